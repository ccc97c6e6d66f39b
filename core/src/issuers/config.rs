//! The trusted-issuers file (`serve --trusted-issuers FILE`): which identity providers'
//! access tokens `/mcp` accepts, and how their claims map to a scope.
//!
//! ```yaml
//! issuers:
//!   - issuer: https://login.example.com/realms/acme
//!     audience: https://skillgate.example.com/mcp   # default: this server's /mcp
//!     algorithms: [RS256, ES256]                    # default: RS256, ES256
//!     subject_claim: sub                            # default: sub
//!     scopes:                                       # the first rule that matches wins
//!       - { claim: groups, value: support-agents, scope: support }
//!       - { claim: scope, value: "mcp:refunds", scope: refunds, workspace: finance }
//! ```

use std::path::Path;
use std::time::Duration;

use jsonwebtoken::Algorithm;
use serde::Deserialize;
use url::Url;

use crate::slug::Slug;

/// What is wrong with a trusted-issuers file, naming the entry and field.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

impl ConfigError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// `Err` with `message` unless `holds`.
fn ensure(holds: bool, message: impl FnOnce() -> String) -> Result<(), ConfigError> {
    if holds {
        Ok(())
    } else {
        Err(ConfigError(message()))
    }
}

/// The file as written. Unknown fields are refused: a misspelt `audiance` must not leave
/// the audience unchecked.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    issuers: Vec<IssuerEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IssuerEntry {
    issuer: String,
    audience: Option<String>,
    algorithms: Option<Vec<String>>,
    subject_claim: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`.
    leeway_seconds: Option<u64>,
    /// The least time between two fetches of the issuer's keys for an unknown `kid`. 0
    /// lifts the bound (a test's rotating provider); never in production, where a flood of
    /// made-up `kid`s would then be a flood of fetches.
    key_refresh_seconds: Option<u64>,
    scopes: Vec<ScopeRule>,
}

/// One claim-to-scope rule: a token whose `claim` holds `value` (equal to it, one of its
/// entries when the claim is a list, or one of its words for `scope` and `scp`, which are
/// space-delimited by RFC 9068) is admitted with `scope` of `workspace`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeRule {
    pub claim: String,
    pub value: String,
    pub scope: Slug,
    #[serde(default = "default_workspace")]
    pub workspace: Slug,
}

fn default_workspace() -> Slug {
    Slug::parse(crate::store::workspaces::DEFAULT_WORKSPACE).expect("`default` is a slug")
}

/// One trusted issuer, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerConfig {
    /// Compared exactly with a token's `iss` and the issuer's metadata `issuer`.
    pub issuer: String,
    pub audience: String,
    /// Asymmetric algorithms only: a public key can never be used as an HMAC secret.
    pub algorithms: Vec<Algorithm>,
    pub subject_claim: String,
    pub leeway: Duration,
    pub key_refresh: Duration,
    pub scopes: Vec<ScopeRule>,
}

/// Algorithms an issuer may be trusted with. HMAC (`HS*`) is absent on purpose: its key is
/// a shared secret, and a verifier that accepts it with a public key lets anyone who has
/// the public key sign. `none` is no algorithm at all.
const ASYMMETRIC: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];
const DEFAULT_ALGORITHMS: [Algorithm; 2] = [Algorithm::RS256, Algorithm::ES256];
const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);
const DEFAULT_KEY_REFRESH: Duration = Duration::from_secs(60);

/// Whether `url` may be fetched or trusted: https, or http to a loopback host (a provider
/// on the same machine, as in development and tests).
pub(crate) fn is_fetchable(url: &Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => match url.host() {
            Some(url::Host::Domain(name)) => name == "localhost",
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        },
        _ => false,
    }
}

/// Parses the trusted-issuers file's text. `default_audience` is this server's `/mcp`
/// resource, used where an issuer names none.
pub fn parse(text: &str, default_audience: &str) -> Result<Vec<IssuerConfig>, ConfigError> {
    let file: File =
        serde_path_to_error::deserialize(serde_norway::Deserializer::from_str(text))
            .map_err(|error| ConfigError(format!("{}: {}", error.path(), error.inner())))?;
    ensure(!file.issuers.is_empty(), || {
        "issuers: the list is empty".into()
    })?;
    let mut seen = std::collections::HashSet::new();
    file.issuers
        .into_iter()
        .enumerate()
        .map(|(index, entry)| {
            let at = format!("issuers[{index}]");
            let issuer = check_issuer(&entry.issuer)
                .map_err(|e| ConfigError(format!("{at}.issuer: {e}")))?;
            ensure(seen.insert(issuer.clone()), || {
                format!("{at}.issuer: `{issuer}` is listed twice")
            })?;
            let algorithms = match entry.algorithms {
                None => DEFAULT_ALGORITHMS.to_vec(),
                Some(names) => {
                    ensure(!names.is_empty(), || {
                        format!("{at}.algorithms: the list is empty")
                    })?;
                    names
                        .iter()
                        .map(|name| algorithm(name).map_err(|e| ConfigError(format!("{at}.{e}"))))
                        .collect::<Result<Vec<_>, _>>()?
                }
            };
            ensure(!entry.scopes.is_empty(), || {
                format!("{at}.scopes: no rule maps a token to a scope")
            })?;
            for (i, rule) in entry.scopes.iter().enumerate() {
                ensure(
                    !rule.claim.trim().is_empty() && !rule.value.is_empty(),
                    || format!("{at}.scopes[{i}]: claim and value must not be empty"),
                )?;
            }
            let subject_claim = entry.subject_claim.unwrap_or_else(|| "sub".to_owned());
            ensure(!subject_claim.trim().is_empty(), || {
                format!("{at}.subject_claim: empty")
            })?;
            let audience = entry
                .audience
                .unwrap_or_else(|| default_audience.to_owned());
            ensure(!audience.trim().is_empty(), || {
                format!("{at}.audience: empty")
            })?;
            Ok(IssuerConfig {
                issuer,
                audience,
                algorithms,
                subject_claim,
                leeway: entry
                    .leeway_seconds
                    .map_or(DEFAULT_LEEWAY, Duration::from_secs),
                key_refresh: entry
                    .key_refresh_seconds
                    .map_or(DEFAULT_KEY_REFRESH, Duration::from_secs),
                scopes: entry.scopes,
            })
        })
        .collect()
}

/// A provider whose signed tokens are for `audience` (the console's single sign-on, whose ID
/// tokens are for its client id): checked as a trusted issuer's entry is, with the same
/// defaults, and no scope rules.
pub(crate) fn provider(
    issuer: &str,
    audience: &str,
    algorithms: Option<&[String]>,
) -> Result<IssuerConfig, ConfigError> {
    let issuer = check_issuer(issuer).map_err(|e| ConfigError(format!("issuer: {e}")))?;
    ensure(!audience.trim().is_empty(), || "client_id: empty".into())?;
    let algorithms = match algorithms {
        None => DEFAULT_ALGORITHMS.to_vec(),
        Some([]) => return Err(ConfigError("algorithms: the list is empty".into())),
        Some(names) => names
            .iter()
            .map(|name| algorithm(name))
            .collect::<Result<Vec<_>, _>>()?,
    };
    Ok(IssuerConfig {
        issuer,
        audience: audience.to_owned(),
        algorithms,
        subject_claim: "sub".to_owned(),
        leeway: DEFAULT_LEEWAY,
        key_refresh: DEFAULT_KEY_REFRESH,
        scopes: Vec::new(),
    })
}

/// One of [`ASYMMETRIC`] by its JOSE name.
fn algorithm(name: &str) -> Result<Algorithm, ConfigError> {
    name.parse::<Algorithm>()
        .ok()
        .filter(|alg| ASYMMETRIC.contains(alg))
        .ok_or_else(|| {
            ConfigError(format!(
                "algorithms: `{name}` is not one of RS256, RS384, RS512, PS256, PS384, PS512, \
                 ES256, ES384, EdDSA (HMAC and `none` are never trusted)"
            ))
        })
}

/// Reads and parses the trusted-issuers file at `path`.
pub fn load(path: &Path, default_audience: &str) -> Result<Vec<IssuerConfig>, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("reading {}: {e}", path.display())))?;
    parse(&text, default_audience).map_err(|e| ConfigError(format!("{}: {e}", path.display())))
}

/// An issuer identifier as RFC 8414 wants it: an https URL (or http on loopback) with no
/// query or fragment. Kept exactly as written: a token's `iss` and the provider's metadata
/// must match it character for character (RFC 8414 section 3.3), trailing slash included.
fn check_issuer(text: &str) -> Result<String, ConfigError> {
    let url = Url::parse(text).map_err(|e| ConfigError(format!("`{text}` is not a URL: {e}")))?;
    ensure(is_fetchable(&url), || {
        format!("`{text}` must be https (http only on a loopback address)")
    })?;
    ensure(url.query().is_none() && url.fragment().is_none(), || {
        format!("`{text}` must have no query or fragment")
    })?;
    Ok(text.to_owned())
}
