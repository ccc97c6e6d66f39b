//! People sign in to the console through the company's OpenID provider (issue #52): the
//! authorization code flow with PKCE (RFC 7636), a nonce, and the issuer in the response
//! (RFC 9207), against a provider found by OpenID discovery.
//!
//! [`ConsoleSso::begin`] records a sign-in under way in the database (keyed by a hash of
//! its `state`, bound to the browser by a hash of a cookie secret) and returns where to
//! send the browser. [`ConsoleSso::finish`] takes that record once (a replayed or forged
//! callback finds nothing, or not its browser's), exchanges the code with the PKCE
//! verifier, and verifies the ID token as a trusted issuer's token is verified (keys,
//! algorithm, `iss`, `aud` = the client id, `exp`, `nbf`) and its nonce. What it returns
//! is who the person is and which console role their groups give; the admin door makes
//! or updates the console user ([`crate::admin::AdminService::sso_sign_in`]).

pub mod config;

pub use config::{CALLBACK_PATH, PasswordSignIn, SsoConfig, load, parse};

use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwapOption;

use chrono::{DateTime, Utc};
use oauth2::basic::{
    BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse,
    BasicTokenType,
};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret as OAuthSecret, CsrfToken, EndpointNotSet,
    EndpointSet, ExtraTokenFields, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope,
    StandardRevocableToken, StandardTokenResponse, TokenUrl,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use url::Url;

use crate::issuers::{Issuer, Metadata, TokenRefusal, provider_http};
use crate::limited_read::read_body_limited;
use crate::store::console_sso::PendingSsoLogin;
use crate::store::{Store, StoreError};
use crate::users::ConsoleRole;

/// How long a person has at the provider before the sign-in must start again.
const PENDING_TTL: chrono::Duration = chrono::Duration::minutes(10);
/// The largest token response read.
const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;

/// The ID token beside the access token in the token response (OpenID Connect Core 3.1.3.3).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct IdTokenFields {
    id_token: Option<String>,
}

impl ExtraTokenFields for IdTokenFields {}

type TokenResponse = StandardTokenResponse<IdTokenFields, BasicTokenType>;
type OidcClient = oauth2::Client<
    BasicErrorResponse,
    TokenResponse,
    BasicTokenIntrospectionResponse,
    StandardRevocableToken,
    BasicRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointSet,
>;

/// The browser's half of a sign-in under way: kept in a cookie, its hash in the database.
pub struct BrowserSecret(String);

impl BrowserSecret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Where to send the browser, and the secret it must bring back.
pub struct SsoStart {
    pub redirect: Url,
    pub browser: BrowserSecret,
}

/// The query of the provider's redirect back to the callback.
#[derive(Debug, Default, Deserialize)]
pub struct Callback {
    pub code: Option<String>,
    pub state: Option<String>,
    pub iss: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

/// The person a finished sign-in verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SsoIdentity {
    pub issuer: String,
    pub subject: String,
    /// The console user's name: the username claim.
    pub name: String,
    pub groups: Vec<String>,
    /// The role the groups give; `None` refuses the sign-in.
    pub role: Option<ConsoleRole>,
    /// Where to go afterwards (a console path, checked when the sign-in began).
    pub next: String,
}

/// Why a sign-in through the provider was refused. Its text is shown to the person and
/// audited; it never holds a code, token or secret.
#[derive(Debug, thiserror::Error)]
pub enum SsoRefusal {
    #[error("the identity provider cannot be reached: {0}")]
    ProviderUnavailable(String),
    #[error("the identity provider refused the sign-in: {0}")]
    ProviderError(String),
    #[error("no sign-in under way matches this answer (already used, or never started here)")]
    UnknownState,
    #[error("this sign-in took too long; start again")]
    Expired,
    #[error("this sign-in was started in another browser")]
    OtherBrowser,
    #[error("the answer names another identity provider")]
    IssuerMismatch,
    #[error("the answer carries no authorization code")]
    NoCode,
    #[error("the identity provider would not exchange the code: {0}")]
    CodeRefused(String),
    #[error("the ID token was refused: {0}")]
    IdToken(TokenRefusal),
    #[error("the ID token is not for this sign-in (nonce)")]
    Nonce,
    #[error("the ID token lacks a usable `{0}` claim")]
    MissingClaim(String),
    #[error("no console role is given to the groups of {0}")]
    NoRole(String),
    #[error("the store failed: {0}")]
    Store(#[from] StoreError),
}

impl SsoRefusal {
    /// A short stable name, for the audit.
    pub fn code(&self) -> &'static str {
        match self {
            Self::ProviderUnavailable(_) => "provider_unavailable",
            Self::ProviderError(_) => "provider_error",
            Self::UnknownState => "unknown_state",
            Self::Expired => "expired",
            Self::OtherBrowser => "other_browser",
            Self::IssuerMismatch => "issuer_mismatch",
            Self::NoCode => "no_code",
            Self::CodeRefused(_) => "code_refused",
            Self::IdToken(refusal) => refusal.code(),
            Self::Nonce => "nonce",
            Self::MissingClaim(_) => "missing_claim",
            Self::NoRole(_) => "no_role",
            Self::Store(_) => "store",
        }
    }
}

/// How long the provider's endpoints, read from its discovery document, are used before
/// the document is read again.
const METADATA_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Single sign-on to the console with one provider. Cheap to clone.
#[derive(Clone)]
pub struct ConsoleSso {
    config: Arc<SsoConfig>,
    issuer: Arc<Issuer>,
    http: reqwest::Client,
    store: Store,
    /// The discovery document and when it was read: every sign-in needs its endpoints, and
    /// the provider should not be asked for them twice per sign-in.
    metadata: Arc<ArcSwapOption<(Metadata, Instant)>>,
}

impl std::fmt::Debug for ConsoleSso {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleSso")
            .field("issuer", &self.config.issuer.issuer)
            .finish_non_exhaustive()
    }
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

impl ConsoleSso {
    pub fn new(config: SsoConfig, store: Store) -> Self {
        let http = provider_http();
        Self {
            issuer: Arc::new(Issuer::new(config.issuer.clone(), http.clone())),
            config: Arc::new(config),
            http,
            store,
            metadata: Arc::default(),
        }
    }

    pub fn config(&self) -> &SsoConfig {
        &self.config
    }

    /// The provider's discovery document, read at most once per [`METADATA_MAX_AGE`] (two
    /// sign-ins that find it stale at once may both read it: harmless).
    async fn metadata(&self) -> Result<Metadata, SsoRefusal> {
        if let Some(cached) = self.metadata.load_full()
            && cached.1.elapsed() < METADATA_MAX_AGE
        {
            return Ok(cached.0.clone());
        }
        let metadata = self
            .issuer
            .keys
            .metadata()
            .await
            .map_err(SsoRefusal::ProviderUnavailable)?;
        self.metadata
            .store(Some(Arc::new((metadata.clone(), Instant::now()))));
        Ok(metadata)
    }

    /// The provider's endpoints, from its discovery document.
    async fn client(&self) -> Result<OidcClient, SsoRefusal> {
        let metadata = self.metadata().await?;
        let endpoint = |name: &str, value: Option<String>| {
            value
                .and_then(|text| Url::parse(&text).ok())
                .filter(crate::issuers::config::is_fetchable)
                .ok_or_else(|| {
                    SsoRefusal::ProviderUnavailable(format!("its metadata has no https `{name}`"))
                })
        };
        let auth = endpoint("authorization_endpoint", metadata.authorization_endpoint)?;
        let token = endpoint("token_endpoint", metadata.token_endpoint)?;
        let mut client = oauth2::Client::new(ClientId::new(self.config.client_id.clone()))
            .set_auth_uri(AuthUrl::from_url(auth))
            .set_token_uri(TokenUrl::from_url(token))
            .set_redirect_uri(RedirectUrl::from_url(self.config.redirect_uri.clone()));
        if let Some(secret) = &self.config.client_secret {
            client = client.set_client_secret(OAuthSecret::new(secret.expose().to_owned()));
        }
        Ok(client)
    }

    /// Starts a sign-in that comes back to `next` (a console path the caller checked).
    #[tracing::instrument(skip(self))]
    pub async fn begin(&self, next: &str, now: DateTime<Utc>) -> Result<SsoStart, SsoRefusal> {
        let client = self.client().await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let nonce = CsrfToken::new_random();
        let browser = CsrfToken::new_random();
        let (redirect, state) = client
            .authorize_url(CsrfToken::new_random)
            .add_scopes(self.config.scopes.iter().cloned().map(Scope::new))
            .add_extra_param("nonce", nonce.secret())
            .set_pkce_challenge(challenge)
            .url();
        self.store
            .insert_sso_login(
                &PendingSsoLogin {
                    state_hash: sha256_hex(state.secret()),
                    browser_hash: sha256_hex(browser.secret()),
                    nonce: nonce.secret().clone(),
                    verifier: verifier.secret().clone(),
                    next_path: next.to_owned(),
                    expires_at: now + PENDING_TTL,
                },
                now,
            )
            .await?;
        Ok(SsoStart {
            redirect,
            browser: BrowserSecret(browser.secret().clone()),
        })
    }

    /// Finishes the sign-in the provider's answer `callback` is for, in the browser that
    /// holds `browser`.
    #[tracing::instrument(skip_all)]
    pub async fn finish(
        &self,
        callback: Callback,
        browser: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<SsoIdentity, SsoRefusal> {
        let state = callback.state.as_deref().ok_or(SsoRefusal::UnknownState)?;
        // Taken before anything else is looked at: whatever happens next, this state is
        // spent, so an answer cannot be tried twice.
        let pending = self
            .store
            .take_sso_login(&sha256_hex(state))
            .await?
            .ok_or(SsoRefusal::UnknownState)?;
        if let Some(error) = callback.error {
            let described = match callback.error_description {
                Some(description) => format!("{error}: {description}"),
                None => error,
            };
            return Err(SsoRefusal::ProviderError(
                described.chars().take(300).collect(),
            ));
        }
        if pending.expires_at < now {
            return Err(SsoRefusal::Expired);
        }
        // Hashes are compared, so how long the comparison takes says nothing of the secret.
        let same_browser = browser.is_some_and(|secret| sha256_hex(secret) == pending.browser_hash);
        if !same_browser {
            return Err(SsoRefusal::OtherBrowser);
        }
        // RFC 9207: an answer naming another issuer is a mix-up attack's.
        if callback
            .iss
            .as_deref()
            .is_some_and(|iss| iss != self.config.issuer.issuer)
        {
            return Err(SsoRefusal::IssuerMismatch);
        }
        let code = callback.code.ok_or(SsoRefusal::NoCode)?;
        let id_token = self.exchange(code, pending.verifier.clone()).await?;
        let claims = self
            .issuer
            .verified_claims(&id_token)
            .await
            .map_err(SsoRefusal::IdToken)?;
        self.identity(&claims, &pending)
    }

    async fn exchange(&self, code: String, verifier: String) -> Result<String, SsoRefusal> {
        let client = self.client().await?;
        let http = ProviderHttp(self.http.clone());
        let response = client
            .exchange_code(AuthorizationCode::new(code))
            .set_pkce_verifier(PkceCodeVerifier::new(verifier))
            .request_async(&http)
            .await
            .map_err(|error| match error {
                oauth2::RequestTokenError::ServerResponse(refused) => {
                    SsoRefusal::CodeRefused(refused.error().to_string())
                }
                oauth2::RequestTokenError::Request(e) => {
                    SsoRefusal::ProviderUnavailable(e.to_string())
                }
                other => SsoRefusal::CodeRefused(other.to_string()),
            })?;
        response
            .extra_fields()
            .id_token
            .clone()
            .ok_or_else(|| SsoRefusal::MissingClaim("id_token".into()))
    }

    /// The person the verified `claims` name, for the sign-in `pending`.
    fn identity(
        &self,
        claims: &serde_json::Map<String, Value>,
        pending: &PendingSsoLogin,
    ) -> Result<SsoIdentity, SsoRefusal> {
        if claims.get("nonce").and_then(Value::as_str) != Some(pending.nonce.as_str()) {
            return Err(SsoRefusal::Nonce);
        }
        // OpenID Connect Core 3.1.3.7: when present, `azp` must be this client.
        if claims
            .get("azp")
            .is_some_and(|azp| azp.as_str() != Some(self.config.client_id.as_str()))
        {
            return Err(SsoRefusal::IdToken(TokenRefusal::WrongAudience));
        }
        let text = |name: &str| {
            claims
                .get(name)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_owned)
        };
        let subject = text("sub")
            .filter(|s| s.chars().count() <= 256)
            .ok_or_else(|| SsoRefusal::MissingClaim("sub".into()))?;
        let name = text(&self.config.username_claim)
            .filter(|name| crate::users::validate_name(name).is_ok())
            .ok_or_else(|| SsoRefusal::MissingClaim(self.config.username_claim.clone()))?;
        let groups: Vec<String> = match claims.get(&self.config.groups_claim) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(Value::String(one)) => vec![one.clone()],
            _ => Vec::new(),
        };
        Ok(SsoIdentity {
            issuer: self.config.issuer.issuer.clone(),
            subject,
            role: self.config.role_for(&groups),
            name,
            groups,
            next: pending.next_path.clone(),
        })
    }
}

/// oauth2's HTTP client: the provider client (short timeouts, no redirects), with a
/// bounded answer.
struct ProviderHttp(reqwest::Client);

impl<'c> oauth2::AsyncHttpClient<'c> for ProviderHttp {
    type Error = std::io::Error;
    type Future = std::pin::Pin<
        Box<dyn Future<Output = Result<oauth2::HttpResponse, std::io::Error>> + Send + 'c>,
    >;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        Box::pin(async move {
            let request = reqwest::Request::try_from(request).map_err(std::io::Error::other)?;
            let response = self
                .0
                .execute(request)
                .await
                .map_err(std::io::Error::other)?;
            let mut answer = oauth2::http::Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                headers.extend(response.headers().clone());
            }
            let body = read_body_limited(response, MAX_TOKEN_RESPONSE_BYTES)
                .await
                .map_err(std::io::Error::other)?;
            answer.body(body.to_vec()).map_err(std::io::Error::other)
        })
    }
}
