//! The console single sign-on file (`serve --console-sso FILE`): which OpenID provider
//! people sign in with, and how its groups map to console roles.
//!
//! ```yaml
//! issuer: https://login.example.com/realms/acme
//! client_id: skillgate-console
//! client_secret_file: /etc/skillgate/console-sso-secret  # or SKILLGATE_CONSOLE_SSO_SECRET
//! # scopes: [openid, profile, email]          # `openid` is always asked for
//! # username_claim: preferred_username         # the console user's name
//! # groups_claim: groups
//! roles:                                       # the highest role of the person's groups
//!   - { group: skillgate-admins, role: admin }
//!   - { group: skillgate-reviewers, role: reviewer }
//! # max_session_seconds: 28800                 # sign in again at least this often (8 h)
//! # password_sign_in: admins                   # all | admins (break-glass) | off
//! # label: Sign in with Acme
//! ```

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use crate::issuers::{ConfigError, IssuerConfig};
use crate::users::ConsoleRole;

/// Who may still sign in with a password once single sign-on is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PasswordSignIn {
    /// Every local user, as without single sign-on.
    All,
    /// Local admins only: the break-glass account for when the provider is down.
    Admins,
    /// Nobody: the provider is the only way in.
    Off,
}

impl PasswordSignIn {
    pub fn allows(self, role: ConsoleRole) -> bool {
        match self {
            Self::All => true,
            Self::Admins => role == ConsoleRole::Admin,
            Self::Off => false,
        }
    }
}

/// One group-to-role rule.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleRule {
    pub group: String,
    pub role: ConsoleRole,
}

/// The file as written. Unknown fields are refused, so a misspelt field is not silently
/// left at its default.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    issuer: String,
    client_id: String,
    client_secret_file: Option<String>,
    scopes: Option<Vec<String>>,
    username_claim: Option<String>,
    groups_claim: Option<String>,
    roles: Vec<RoleRule>,
    max_session_seconds: Option<u64>,
    password_sign_in: Option<PasswordSignIn>,
    label: Option<String>,
    algorithms: Option<Vec<String>>,
}

/// The client secret the console authenticates to the provider with. Never printed.
#[derive(Clone)]
pub struct ClientSecret(String);

impl ClientSecret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientSecret(…)")
    }
}

/// The console's provider, checked.
#[derive(Debug, Clone)]
pub struct SsoConfig {
    /// The provider as a trusted issuer: the ID token's `iss`, algorithms, keys; its
    /// audience is the client id.
    pub issuer: IssuerConfig,
    pub client_id: String,
    /// `None` for a public client (PKCE alone).
    pub client_secret: Option<ClientSecret>,
    /// `{public-url}/auth/sso/callback`, registered at the provider exactly.
    pub redirect_uri: Url,
    pub scopes: Vec<String>,
    pub username_claim: String,
    pub groups_claim: String,
    pub roles: Vec<RoleRule>,
    pub max_session_age: Duration,
    pub password_sign_in: PasswordSignIn,
    pub label: String,
}

/// The callback path, under the console's public URL.
pub const CALLBACK_PATH: &str = "/auth/sso/callback";
const DEFAULT_MAX_SESSION_SECONDS: u64 = 8 * 3600;

fn invalid(message: impl Into<String>) -> ConfigError {
    ConfigError::new(message)
}

impl SsoConfig {
    /// The role `groups` give: the highest any rule grants, `None` when no rule matches.
    pub fn role_for(&self, groups: &[String]) -> Option<ConsoleRole> {
        self.roles
            .iter()
            .filter(|rule| groups.contains(&rule.group))
            .map(|rule| rule.role)
            .max()
    }
}

/// Parses the file's text. `public_url` is the console's public URL (`--public-url`);
/// `secret` the secret from the environment, used when the file names no secret file.
pub fn parse(
    text: &str,
    public_url: &Url,
    secret: Option<String>,
) -> Result<SsoConfig, ConfigError> {
    let file: File = serde_path_to_error::deserialize(serde_norway::Deserializer::from_str(text))
        .map_err(|error| invalid(format!("{}: {}", error.path(), error.inner())))?;
    let issuer = crate::issuers::config::provider(
        &file.issuer,
        &file.client_id,
        file.algorithms.as_deref(),
    )?;
    let client_secret = match &file.client_secret_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| invalid(format!("client_secret_file: reading {path}: {e}")))?;
            Some(text.trim_end_matches(['\r', '\n']).to_owned())
        }
        None => secret,
    }
    .filter(|s| !s.is_empty())
    .map(ClientSecret);
    if file.roles.is_empty() {
        return Err(invalid("roles: no rule maps a group to a console role"));
    }
    if let Some(i) = file.roles.iter().position(|r| r.group.is_empty()) {
        return Err(invalid(format!("roles[{i}].group: empty")));
    }
    let mut scopes = file
        .scopes
        .unwrap_or_else(|| vec!["openid".into(), "profile".into(), "email".into()]);
    if !scopes.iter().any(|s| s == "openid") {
        scopes.insert(0, "openid".into());
    }
    if let Some(bad) = scopes
        .iter()
        .find(|s| s.is_empty() || s.chars().any(|c| c.is_whitespace()))
    {
        return Err(invalid(format!("scopes: `{bad}` is not one scope")));
    }
    let seconds = file
        .max_session_seconds
        .unwrap_or(DEFAULT_MAX_SESSION_SECONDS);
    if seconds == 0 {
        return Err(invalid("max_session_seconds: must be at least 1"));
    }
    let redirect_uri = public_url
        .join(CALLBACK_PATH)
        .map_err(|e| invalid(format!("the public URL {public_url}: {e}")))?;
    Ok(SsoConfig {
        issuer,
        client_id: file.client_id,
        client_secret,
        redirect_uri,
        scopes,
        username_claim: file
            .username_claim
            .unwrap_or_else(|| "preferred_username".into()),
        groups_claim: file.groups_claim.unwrap_or_else(|| "groups".into()),
        roles: file.roles,
        max_session_age: Duration::from_secs(seconds),
        password_sign_in: file.password_sign_in.unwrap_or(PasswordSignIn::Admins),
        label: file
            .label
            .unwrap_or_else(|| "Sign in with your company account".into()),
    })
}

/// Reads and parses the file at `path`.
pub fn load(
    path: &Path,
    public_url: &Url,
    secret: Option<String>,
) -> Result<SsoConfig, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| invalid(format!("reading {}: {e}", path.display())))?;
    parse(&text, public_url, secret).map_err(|e| invalid(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url() -> Url {
        Url::parse("https://skillgate.example.com").unwrap()
    }

    const FILE: &str = "issuer: https://login.example.com/realms/acme
client_id: skillgate-console
roles:
  - { group: skillgate-admins, role: admin }
  - { group: skillgate-reviewers, role: reviewer }
";

    #[test]
    fn a_minimal_file_gets_safe_defaults_and_the_exact_callback() {
        let config = parse(FILE, &url(), Some("s3cret".into())).unwrap();
        assert_eq!(
            config.issuer.issuer,
            "https://login.example.com/realms/acme"
        );
        assert_eq!(config.issuer.audience, "skillgate-console");
        assert_eq!(
            config.redirect_uri.as_str(),
            "https://skillgate.example.com/auth/sso/callback"
        );
        assert_eq!(config.scopes, ["openid", "profile", "email"]);
        assert_eq!(config.password_sign_in, PasswordSignIn::Admins);
        assert_eq!(config.max_session_age, Duration::from_secs(8 * 3600));
        assert_eq!(config.client_secret.unwrap().expose(), "s3cret");
    }

    #[test]
    fn the_highest_role_of_the_persons_groups_wins_and_no_group_is_no_role() {
        let config = parse(FILE, &url(), None).unwrap();
        let groups = |g: &[&str]| g.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            config.role_for(&groups(&["skillgate-reviewers", "skillgate-admins"])),
            Some(ConsoleRole::Admin)
        );
        assert_eq!(
            config.role_for(&groups(&["skillgate-reviewers"])),
            Some(ConsoleRole::Reviewer)
        );
        assert_eq!(config.role_for(&groups(&["staff"])), None);
    }

    #[test]
    fn bad_files_are_refused_naming_the_field() {
        let cases = [
            (
                FILE.replace("https://login", "http://login"),
                "must be https",
            ),
            (FILE.replace("client_id:", "client_idd:"), "unknown field"),
            (
                "issuer: https://a.example\nclient_id: c\nroles: []\n".to_owned(),
                "roles: no rule",
            ),
            (
                format!("{FILE}algorithms: [HS256]\n"),
                "HMAC and `none` are never trusted",
            ),
            (
                format!("{FILE}max_session_seconds: 0\n"),
                "max_session_seconds",
            ),
            (
                format!("{FILE}password_sign_in: some\n"),
                "password_sign_in",
            ),
            (FILE.replace("role: admin", "role: root"), "roles[0].role"),
        ];
        for (text, expected) in cases {
            let error = parse(&text, &url(), None).unwrap_err().to_string();
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }

    #[test]
    fn the_secret_never_shows_in_debug_output() {
        let config = parse(FILE, &url(), Some("s3cret-value".into())).unwrap();
        assert!(!format!("{config:?}").contains("s3cret-value"));
    }
}
