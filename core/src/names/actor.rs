//! Who an audit event is attributed to, the one place each actor's name is built and read.
//!
//! The stored actor is plain text; these are its forms:
//!
//! | actor | stored as |
//! |---|---|
//! | an agent key, or a console user changing something in the console | the key or user name |
//! | a console user calling as an agent through try-it | `console:<username>` |
//! | a one-shot command of the `skillgate` binary | `cli:<local account>`, or `cli` |
//! | a catalog file applied | `catalog-apply:<first 12 hex digits of its SHA-256>` |
//! | scheduled retention | `retention` |
//! | the demo seed of `skillgate serve --demo` | `demo seed` |
//! | the first start creating the `admin` console user | `bootstrap` |
//! | Skillgate itself (a hold expiring) | `skillgate` |
//!
//! Agent key names and usernames are letters, digits, `.`, `_` and `-`, so none of them can
//! be mistaken for a prefixed form; a key *named* `cli`, `retention`, `bootstrap` or
//! `skillgate` reads as that actor, as it always has in the log.

use std::fmt;
use std::str::FromStr;

/// The prefix of a console user calling through try-it (see [`Actor::Console`]).
pub const CONSOLE_ACTOR_PREFIX: &str = "console:";
const CLI: &str = "cli";
const CLI_PREFIX: &str = "cli:";
const CATALOG_APPLY_PREFIX: &str = "catalog-apply:";
const RETENTION: &str = "retention";
const DEMO_SEED: &str = "demo seed";
const BOOTSTRAP: &str = "bootstrap";
const SKILLGATE: &str = "skillgate";

/// How many hex digits of a catalog file's digest name its apply.
pub const CATALOG_APPLY_DIGITS: usize = 12;

/// An audit actor. Build one and turn it into the stored text with `to_string()` (or
/// `String::from`); read a stored actor back with [`str::parse`] (never fails: any other
/// text is a [`Actor::Named`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Actor {
    /// An agent key, or a console user acting in the console, by name.
    Named(String),
    /// A console user calling as an agent through the Connect page's try-it panel.
    Console(String),
    /// A one-shot command, as the local account running it (`None` when unknown).
    Cli(Option<String>),
    /// A catalog file applied, by the first [`CATALOG_APPLY_DIGITS`] of its digest.
    CatalogApply(String),
    /// Retention pruning on its schedule.
    Retention,
    /// The demo seed of a `--demo` server.
    DemoSeed,
    /// The first start of an empty database, creating the `admin` console user.
    Bootstrap,
    /// Skillgate itself, e.g. a hold expiring.
    System,
}

impl Actor {
    /// The try-it actor of the console user `username`.
    pub fn console(username: &str) -> Self {
        Self::Console(username.to_owned())
    }

    /// The actor of a one-shot command: the local account running it (`$USER`).
    pub fn local_cli() -> Self {
        match std::env::var("USER") {
            Ok(user) if !user.is_empty() => Self::Cli(Some(user)),
            _ => Self::Cli(None),
        }
    }

    /// The actor of applying the catalog file whose lowercase hex SHA-256 is `digest`.
    pub fn catalog_apply(digest: &str) -> Self {
        let end = digest
            .char_indices()
            .nth(CATALOG_APPLY_DIGITS)
            .map_or(digest.len(), |(at, _)| at);
        Self::CatalogApply(digest[..end].to_owned())
    }

    /// True for the try-it actor of the console user `username`.
    pub fn is_console_user(actor: &str, username: &str) -> bool {
        actor
            .strip_prefix(CONSOLE_ACTOR_PREFIX)
            .is_some_and(|name| name == username)
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Named(name) => f.write_str(name),
            Self::Console(user) => write!(f, "{CONSOLE_ACTOR_PREFIX}{user}"),
            Self::Cli(Some(account)) => write!(f, "{CLI_PREFIX}{account}"),
            Self::Cli(None) => f.write_str(CLI),
            Self::CatalogApply(digest) => write!(f, "{CATALOG_APPLY_PREFIX}{digest}"),
            Self::Retention => f.write_str(RETENTION),
            Self::DemoSeed => f.write_str(DEMO_SEED),
            Self::Bootstrap => f.write_str(BOOTSTRAP),
            Self::System => f.write_str(SKILLGATE),
        }
    }
}

impl From<Actor> for String {
    fn from(actor: Actor) -> Self {
        actor.to_string()
    }
}

impl FromStr for Actor {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let prefixed = |prefix: &str| text.strip_prefix(prefix).map(str::to_owned);
        Ok(if let Some(user) = prefixed(CONSOLE_ACTOR_PREFIX) {
            Self::Console(user)
        } else if let Some(account) = prefixed(CLI_PREFIX) {
            Self::Cli(Some(account))
        } else if let Some(digest) = prefixed(CATALOG_APPLY_PREFIX) {
            Self::CatalogApply(digest)
        } else {
            match text {
                CLI => Self::Cli(None),
                RETENTION => Self::Retention,
                DEMO_SEED => Self::DemoSeed,
                BOOTSTRAP => Self::Bootstrap,
                SKILLGATE => Self::System,
                name => Self::Named(name.to_owned()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_actor_round_trips_through_its_stored_text() {
        let actors = [
            Actor::Named("support-key".into()),
            Actor::console("bob"),
            Actor::Cli(Some("alice".into())),
            Actor::Cli(None),
            Actor::catalog_apply("0123456789abcdef0123"),
            Actor::Retention,
            Actor::DemoSeed,
            Actor::Bootstrap,
            Actor::System,
        ];
        for actor in actors {
            let text = actor.to_string();
            assert_eq!(text.parse::<Actor>().unwrap(), actor, "{text}");
        }
    }

    #[test]
    fn each_actor_is_stored_as_the_log_has_always_named_it() {
        assert_eq!(Actor::console("bob").to_string(), "console:bob");
        assert_eq!(Actor::Cli(Some("alice".into())).to_string(), "cli:alice");
        assert_eq!(Actor::Cli(None).to_string(), "cli");
        assert_eq!(
            Actor::catalog_apply("0123456789abcdef0123").to_string(),
            "catalog-apply:0123456789ab"
        );
        assert_eq!(Actor::Retention.to_string(), "retention");
        assert_eq!(Actor::DemoSeed.to_string(), "demo seed");
        assert_eq!(Actor::Bootstrap.to_string(), "bootstrap");
        assert_eq!(Actor::System.to_string(), "skillgate");
        assert_eq!(Actor::Named("k".into()).to_string(), "k");
    }

    #[test]
    fn only_the_try_it_actor_of_that_user_is_the_console_user() {
        assert!(Actor::is_console_user("console:bob", "bob"));
        assert!(!Actor::is_console_user("console:bobby", "bob"));
        assert!(!Actor::is_console_user("bob", "bob"));
    }
}
