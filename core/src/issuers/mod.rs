//! Access tokens from the company's identity provider at `/mcp` (issue #52).
//!
//! An operator lists trusted issuers ([`config`]); a bearer token at `/mcp` that is a JWT
//! from one of them is admitted when it verifies completely:
//!
//! - its `iss` is a trusted issuer's, exactly, and its signature verifies with that
//!   issuer's published keys ([`keys`]), under an algorithm the issuer is trusted with
//!   (asymmetric only: never `none`, never an HMAC key confused with a public key), the
//!   key's own algorithm if the key set pins one;
//! - its `aud` names this server's `/mcp` (or the configured audience), it has `exp`, and
//!   `exp` and `nbf` hold within the configured leeway;
//! - its subject claim is a non-empty string, the agent identity the audit shows;
//! - one of the issuer's rules maps its claims to a scope, of a workspace.
//!
//! Anything else is a [`TokenRefusal`] that names what failed, for the audit and for the
//! `WWW-Authenticate` answer; the provider being unreachable is its own refusal, so the
//! caller can answer "try again" rather than "bad token", and nothing is admitted.

pub(crate) mod config;
mod keys;
#[cfg(feature = "test-support")]
pub mod testing;

pub use config::{ConfigError, IssuerConfig, ScopeRule, load, parse};
pub use keys::KEY_MAX_AGE;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};

use crate::slug::Slug;
pub(crate) use keys::Metadata;
use keys::{IssuerKeys, KeyError};

/// The longest token looked at: provider tokens are a few kilobytes at most.
const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// The longest subject kept as an agent identity.
const MAX_SUBJECT_CHARS: usize = 256;

/// Who a verified token is: its issuer and subject, and where its claims put it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalCaller {
    pub issuer: String,
    pub subject: String,
    pub workspace: Slug,
    pub scope: Slug,
}

/// Why a token is not admitted. Its text names what failed and never echoes the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    #[error("the token is not a signed JWT")]
    Malformed,
    #[error("the token's issuer is not trusted here")]
    UntrustedIssuer,
    #[error("the token's algorithm `{0}` is not one this issuer is trusted with")]
    Algorithm(String),
    #[error("the token's signing key is not among the issuer's published keys")]
    UnknownKey,
    #[error("the token's signature does not verify")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token is not for this server (audience)")]
    WrongAudience,
    /// A required claim is missing, or (the subject) not a string of 1 to 256 characters.
    #[error("the token lacks a required claim: {0}")]
    MissingClaim(String),
    #[error("the token's claims map to no scope")]
    NoScope,
    /// The provider's keys could not be fetched: nothing was verified.
    #[error("the issuer's keys cannot be fetched: {0}")]
    IssuerUnavailable(String),
}

impl TokenRefusal {
    /// A short stable name, for the audit and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::UntrustedIssuer => "untrusted_issuer",
            Self::Algorithm(_) => "algorithm",
            Self::UnknownKey => "unknown_key",
            Self::BadSignature => "bad_signature",
            Self::Expired => "expired",
            Self::NotYetValid => "not_yet_valid",
            Self::WrongAudience => "wrong_audience",
            Self::MissingClaim(_) => "missing_claim",
            Self::NoScope => "no_scope",
            Self::IssuerUnavailable(_) => "issuer_unavailable",
        }
    }
}

/// One issuer: its configuration and its keys. The console's single sign-on verifies ID
/// tokens with it too.
pub(crate) struct Issuer {
    pub config: IssuerConfig,
    pub keys: IssuerKeys,
}

impl Issuer {
    pub fn new(config: IssuerConfig, http: reqwest::Client) -> Self {
        Self {
            keys: IssuerKeys::new(&config, http),
            config,
        }
    }

    /// The claims of `token`, a JWT this issuer signed, once its algorithm, key, signature,
    /// `iss`, `aud`, `exp` and `nbf` verify.
    pub async fn verified_claims(&self, token: &str) -> Result<Map<String, Value>, TokenRefusal> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| TokenRefusal::Malformed)?;
        if !self.config.algorithms.contains(&header.alg) {
            return Err(TokenRefusal::Algorithm(format!("{:?}", header.alg)));
        }
        let key = self
            .keys
            .key(header.kid.as_deref())
            .await
            .map_err(|error| match error {
                KeyError::Unknown => TokenRefusal::UnknownKey,
                KeyError::Unavailable(why) => TokenRefusal::IssuerUnavailable(why),
            })?;
        if key.algorithm.is_some_and(|pinned| pinned != header.alg) {
            return Err(TokenRefusal::Algorithm(format!("{:?}", header.alg)));
        }
        verify(token, &key.key, header.alg, &self.config)
    }
}

/// The HTTP client of every fetch from a provider. Short timeouts: a key fetch runs inside
/// a request's admission. No redirects: a provider's documents are served at their own
/// URLs.
pub(crate) fn provider_http() -> reqwest::Client {
    crate::upstream::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(3))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client with these settings always builds")
}

/// The trusted issuers and their keys. Cheap to clone.
#[derive(Clone)]
pub struct TrustedIssuers {
    issuers: Arc<[Issuer]>,
}

impl std::fmt::Debug for TrustedIssuers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.issuers.iter().map(|i| &i.config.issuer))
            .finish()
    }
}

impl TrustedIssuers {
    pub fn new(configs: Vec<IssuerConfig>) -> Self {
        let http = provider_http();
        let issuers = configs
            .into_iter()
            .map(|config| Issuer::new(config, http.clone()))
            .collect();
        Self { issuers }
    }

    /// The issuers' identifiers, for the protected-resource metadata (RFC 9728).
    pub fn issuer_urls(&self) -> impl Iterator<Item = &str> {
        self.issuers.iter().map(|i| i.config.issuer.as_str())
    }

    /// Whether `token` looks like a JWT (three parts, a JSON header: `eyJ` is `{"` in
    /// base64url), as opposed to an agent key or one of Skillgate's own opaque tokens.
    pub fn is_jwt(token: &str) -> bool {
        token.len() <= MAX_TOKEN_BYTES && token.split('.').count() == 3 && token.starts_with("eyJ")
    }

    /// The issuer a token claims, unverified: for the record of a refusal.
    pub fn claimed_issuer(token: &str) -> Option<String> {
        Self::is_jwt(token)
            .then(|| unverified_issuer(token))
            .flatten()
    }

    /// Verifies `token` (see the module documentation) and maps it to a caller.
    #[tracing::instrument(skip_all)]
    pub async fn authenticate(&self, token: &str) -> Result<ExternalCaller, TokenRefusal> {
        if !Self::is_jwt(token) {
            return Err(TokenRefusal::Malformed);
        }
        // The issuer picks the keys, so it is read before the signature is checked; the
        // verification below checks it again, signed.
        let claimed = unverified_issuer(token).ok_or(TokenRefusal::Malformed)?;
        let issuer = self
            .issuers
            .iter()
            .find(|i| i.config.issuer == claimed)
            .ok_or(TokenRefusal::UntrustedIssuer)?;
        let claims = issuer.verified_claims(token).await?;
        let subject = claims
            .get(&issuer.config.subject_claim)
            .and_then(Value::as_str)
            // Refused rather than cut: two long subjects sharing a prefix are two agents.
            .filter(|s| !s.trim().is_empty() && s.chars().count() <= MAX_SUBJECT_CHARS)
            .ok_or_else(|| TokenRefusal::MissingClaim(issuer.config.subject_claim.clone()))?;
        let rule = issuer
            .config
            .scopes
            .iter()
            .find(|rule| claim_holds(claims.get(&rule.claim), &rule.claim, &rule.value))
            .ok_or(TokenRefusal::NoScope)?;
        Ok(ExternalCaller {
            issuer: issuer.config.issuer.clone(),
            subject: subject.to_owned(),
            workspace: rule.workspace.clone(),
            scope: rule.scope.clone(),
        })
    }
}

/// The `iss` of a token's payload, not yet verified.
fn unverified_issuer(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: Map<String, Value> = serde_json::from_slice(&bytes).ok()?;
    claims.get("iss")?.as_str().map(str::to_owned)
}

/// The token's claims once its signature, issuer, audience and times verify.
fn verify(
    token: &str,
    key: &jsonwebtoken::DecodingKey,
    alg: Algorithm,
    config: &IssuerConfig,
) -> Result<Map<String, Value>, TokenRefusal> {
    use jsonwebtoken::errors::ErrorKind;
    let mut validation = Validation::new(alg);
    validation.set_issuer(&[&config.issuer]);
    validation.set_audience(&[&config.audience]);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation.validate_nbf = true;
    validation.leeway = config.leeway.as_secs();
    match jsonwebtoken::decode::<Map<String, Value>>(token, key, &validation) {
        Ok(data) => Ok(data.claims),
        Err(error) => Err(match error.kind() {
            ErrorKind::InvalidSignature => TokenRefusal::BadSignature,
            ErrorKind::ExpiredSignature => TokenRefusal::Expired,
            ErrorKind::ImmatureSignature => TokenRefusal::NotYetValid,
            ErrorKind::InvalidAudience => TokenRefusal::WrongAudience,
            ErrorKind::InvalidIssuer => TokenRefusal::UntrustedIssuer,
            ErrorKind::MissingRequiredClaim(claim) => TokenRefusal::MissingClaim(claim.clone()),
            // A key of another family than the algorithm (an RSA key for ES256).
            ErrorKind::InvalidAlgorithm => TokenRefusal::Algorithm(format!("{alg:?}")),
            _ => TokenRefusal::Malformed,
        }),
    }
}

/// Whether claim `name`'s `value` holds `wanted`: equal to it, one of its entries (a list),
/// or for `scope` and `scp` one of its space-delimited words (RFC 9068).
fn claim_holds(value: Option<&Value>, name: &str, wanted: &str) -> bool {
    match value {
        Some(Value::String(s)) if name == "scope" || name == "scp" => {
            s.split(' ').any(|word| word == wanted)
        }
        Some(Value::String(s)) => s == wanted,
        Some(Value::Array(items)) => items.iter().any(|item| item.as_str() == Some(wanted)),
        _ => false,
    }
}
