//! The authorization server's flows: registration, authorization and consent, the token
//! endpoint, revocation, and checking an access token at `/mcp`.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use oauth2::{PkceCodeChallenge, PkceCodeVerifier};
use serde::Serialize;
use serde_json::Value;
use url::Url;

use super::client::{self, ClientInfo, MAX_DOCUMENT_BYTES, Registration};
use super::{
    ACCESS_TOKEN_PREFIX, AuthorizeError, CLIENT_ID_PREFIX, CLIENT_SECRET_PREFIX, CODE_PREFIX,
    OAuthError, OAuthSettings, REFRESH_TOKEN_PREFIX,
};
use crate::admin::{AdminService, NewConsent};
use crate::keys::{LAST_USED_INTERVAL, hash_key, random_secret};
use crate::slug::Slug;
use crate::store::oauth::{ClientRow, GrantRow, RequestRow, TokenPair};
use crate::store::{Store, StoreError};
use crate::users::ConsoleUser;

/// How long a checked authorization request waits for sign-in and consent.
const REQUEST_TTL: chrono::Duration = chrono::Duration::minutes(10);
/// How long an authorization code may be exchanged.
const CODE_TTL: chrono::Duration = chrono::Duration::seconds(60);
/// PKCE verifiers are 43 to 128 characters (RFC 7636 §4.1).
const VERIFIER_LEN: std::ops::RangeInclusive<usize> = 43..=128;

/// The query of `GET /oauth/authorize`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct AuthorizeRequest {
    pub response_type: Option<String>,
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub state: Option<String>,
    pub code_challenge: Option<String>,
    pub code_challenge_method: Option<String>,
    pub resource: Option<String>,
    pub scope: Option<String>,
}

/// The form of `POST /oauth/token`. Holds secrets: `Debug` shows the grant type only.
#[derive(Default, serde::Deserialize)]
pub struct TokenRequest {
    pub grant_type: Option<String>,
    pub code: Option<String>,
    pub redirect_uri: Option<String>,
    pub code_verifier: Option<String>,
    pub refresh_token: Option<String>,
    pub resource: Option<String>,
    pub scope: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
}

impl std::fmt::Debug for TokenRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenRequest")
            .field("grant_type", &self.grant_type)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// How a client authenticated at the token or revocation endpoint: the form's
/// `client_id`/`client_secret`, or HTTP Basic. Never `Debug`-printed with its secret.
#[derive(Default)]
pub struct ClientAuth {
    pub client_id: Option<String>,
    pub secret: Option<String>,
    /// The secret came in an `Authorization: Basic` header.
    pub basic: bool,
}

impl std::fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientAuth")
            .field("client_id", &self.client_id)
            .field("basic", &self.basic)
            .finish_non_exhaustive()
    }
}

/// A successful token response (RFC 6749 §5.1). Holds tokens: no `Debug`.
#[derive(Serialize)]
pub struct TokenResponse {
    pub access_token: String,
    pub token_type: &'static str,
    pub expires_in: u64,
    pub refresh_token: String,
    pub scope: String,
}

/// What the consent page shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsentRequest {
    pub id: String,
    pub client_id: String,
    pub client_name: String,
    /// `dynamic` (registered itself) or `metadata_document` (the client id is its URL).
    pub registration: String,
    /// Where the browser goes after consent.
    pub redirect_host: String,
    /// The scopes an admin allowed this person, that exist in the catalog.
    pub allowed_scopes: Vec<Slug>,
    /// The scope the client asked for, when it is one of `allowed_scopes`.
    pub requested_scope: Option<Slug>,
    pub expires_at: DateTime<Utc>,
}

/// The person's answer on the consent page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsentDecision {
    Approve { scope: Slug },
    Deny,
}

/// Who an access token authenticates as at `/mcp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthCaller {
    /// The grant's credential row (see the module documentation).
    pub key_id: i64,
    pub key_name: String,
    pub scope: Slug,
    pub user_name: String,
    pub client_name: String,
}

/// The authorization server. Cheap to clone.
#[derive(Clone)]
pub struct OAuthService {
    store: Store,
    admin: Arc<AdminService>,
    settings: Arc<OAuthSettings>,
    /// This server's resource as compared (see [`canonical_resource`]), made once.
    resource: Arc<str>,
    /// Fetches Client ID Metadata Documents: system trust roots, short timeouts, no
    /// redirects (a document must be served at its own URL).
    http: reqwest::Client,
}

impl std::fmt::Debug for OAuthService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthService")
            .field("issuer", &self.settings.issuer)
            .finish_non_exhaustive()
    }
}

/// Appends query parameters to a redirect URI (keeping any it has).
fn with_query(uri: &str, params: &[(&str, Option<&str>)]) -> String {
    match Url::parse(uri) {
        Ok(mut url) => {
            {
                let mut query = url.query_pairs_mut();
                for (name, value) in params {
                    if let Some(value) = value {
                        query.append_pair(name, value);
                    }
                }
            }
            url.to_string()
        }
        Err(_) => uri.to_owned(),
    }
}

/// Normalises a resource indicator for comparison: no trailing slash, case-insensitive
/// scheme and host (the URL parser lowercases both).
fn canonical_resource(text: &str) -> Option<String> {
    let url = Url::parse(text.trim()).ok()?;
    if url.fragment().is_some() {
        return None;
    }
    Some(url.as_str().trim_end_matches('/').to_owned())
}

impl OAuthService {
    pub fn new(store: Store, admin: Arc<AdminService>, settings: OAuthSettings) -> Self {
        crate::upstream::install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(5))
            .connect_timeout(std::time::Duration::from_secs(3))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a client with these settings always builds");
        let resource = canonical_resource(&settings.resource())
            .unwrap_or_else(|| settings.resource())
            .into();
        Self {
            store,
            admin,
            settings: Arc::new(settings),
            resource,
            http,
        }
    }

    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    /// Whether `resource` names this server's `/mcp`.
    fn is_our_resource(&self, resource: &str) -> bool {
        // A grant stores this server's resource as it was then: equal text is the common
        // case (every `/mcp` request with a token asks) and needs no parsing.
        resource == &*self.resource
            || canonical_resource(resource).is_some_and(|r| *r == *self.resource)
    }

    // ---- registration -------------------------------------------------------------------

    /// Dynamic client registration (RFC 7591): returns the client information response.
    #[tracing::instrument(skip_all)]
    pub async fn register(&self, body: Value) -> Result<Value, OAuthError> {
        if !self.settings.dynamic_registration {
            return Err(OAuthError::Disabled(
                "dynamic client registration is turned off on this server".into(),
            ));
        }
        let registration: Registration = serde_json::from_value(body.clone()).map_err(|e| {
            OAuthError::InvalidClientMetadata(format!(
                "the registration is not valid client metadata: {e}"
            ))
        })?;
        let checked = client::check(&registration, false)?;
        let client_id = random_secret(CLIENT_ID_PREFIX);
        let secret = (checked.auth_method != "none").then(|| random_secret(CLIENT_SECRET_PREFIX));
        let now = Utc::now();
        self.store
            .insert_oauth_client(&ClientRow {
                client_id: client_id.clone(),
                registration: "dynamic".into(),
                name: checked.name.clone(),
                redirect_uris: checked.redirect_uris.clone(),
                auth_method: checked.auth_method.clone(),
                secret_hash: secret.as_deref().map(hash_key),
                metadata: body.to_string(),
                created_at: now,
            })
            .await?;
        tracing::info!(client = %client_id, name = %checked.name, "oauth client registered");
        // The response echoes the registered metadata with the server's additions.
        let mut response = match body {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        response.insert("client_id".into(), client_id.into());
        response.insert("client_id_issued_at".into(), now.timestamp().into());
        response.insert("client_name".into(), checked.name.into());
        response.insert("redirect_uris".into(), checked.redirect_uris.into());
        response.insert(
            "token_endpoint_auth_method".into(),
            checked.auth_method.into(),
        );
        response.insert(
            "grant_types".into(),
            serde_json::json!(["authorization_code", "refresh_token"]),
        );
        response.insert("response_types".into(), serde_json::json!(["code"]));
        if let Some(secret) = secret {
            response.insert("client_secret".into(), secret.into());
            response.insert("client_secret_expires_at".into(), 0.into());
        }
        Ok(Value::Object(response))
    }

    /// The client `client_id` names: a registered one, or the metadata document at that
    /// URL, fetched now (and its row refreshed).
    async fn resolve_client(&self, client_id: &str) -> Result<ClientInfo, OAuthError> {
        if client::is_document_url(client_id) {
            if !self.settings.metadata_documents {
                return Err(OAuthError::Disabled(
                    "clients identified by a metadata document URL are turned off on this server"
                        .into(),
                ));
            }
            return self.fetch_document(client_id).await;
        }
        if !client_id.starts_with(CLIENT_ID_PREFIX) {
            return Err(OAuthError::InvalidClient(format!(
                "unknown client `{client_id}`"
            )));
        }
        let row = self
            .store
            .oauth_client(client_id)
            .await?
            .filter(|row| row.registration == "dynamic")
            .ok_or_else(|| OAuthError::InvalidClient(format!("unknown client `{client_id}`")))?;
        Ok(info(&row))
    }

    async fn fetch_document(&self, client_id: &str) -> Result<ClientInfo, OAuthError> {
        let url = client::check_document_url(client_id, self.settings.loopback_metadata_documents)?;
        let unreadable = |why: String| {
            OAuthError::InvalidClient(format!("the client metadata document at {client_id} {why}"))
        };
        let response = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| unreadable(format!("cannot be fetched: {e}")))?;
        if !response.status().is_success() {
            return Err(unreadable(format!(
                "answered HTTP {}",
                response.status().as_u16()
            )));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64)
        {
            return Err(unreadable("is too large".into()));
        }
        let mut body = Vec::new();
        let mut response = response;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| unreadable(format!("cannot be read: {e}")))?
        {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_DOCUMENT_BYTES {
                return Err(unreadable("is too large".into()));
            }
        }
        let document: Value =
            serde_json::from_slice(&body).map_err(|e| unreadable(format!("is not JSON: {e}")))?;
        let registration: Registration = serde_json::from_value(document.clone())
            .map_err(|e| unreadable(format!("is not client metadata: {e}")))?;
        if registration.client_id.as_deref() != Some(client_id) {
            return Err(unreadable("does not name its own URL as client_id".into()));
        }
        let checked = client::check(&registration, true)
            .map_err(|e| unreadable(format!("is refused: {e}")))?;
        let row = ClientRow {
            client_id: client_id.to_owned(),
            registration: "metadata_document".into(),
            name: checked.name,
            redirect_uris: checked.redirect_uris,
            auth_method: checked.auth_method,
            secret_hash: None,
            metadata: document.to_string(),
            created_at: Utc::now(),
        };
        self.store.insert_oauth_client(&row).await?;
        Ok(info(&row))
    }

    // ---- authorization and consent ------------------------------------------------------

    /// Checks an authorization request and keeps it for the consent page. Returns the
    /// request's id (the consent page's address names it).
    #[tracing::instrument(skip_all, fields(client = ?request.client_id))]
    pub async fn authorize(&self, request: AuthorizeRequest) -> Result<String, AuthorizeError> {
        let show = AuthorizeError::Show;
        let client_id = request
            .client_id
            .as_deref()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| show(OAuthError::InvalidRequest("client_id is missing".into())))?;
        let client = self.resolve_client(client_id).await.map_err(show)?;
        let redirect_uri = match request.redirect_uri.as_deref() {
            Some(uri) => uri.to_owned(),
            None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
            None => {
                return Err(show(OAuthError::InvalidRequest(
                    "redirect_uri is missing and the client has several".into(),
                )));
            }
        };
        if !client::redirect_matches(&client.redirect_uris, &redirect_uri) {
            return Err(show(OAuthError::InvalidRedirectUri(format!(
                "redirect_uri `{redirect_uri}` is not registered for this client"
            ))));
        }
        // From here on the redirect URI is trusted: errors go back to the client.
        let back = |error: OAuthError| {
            AuthorizeError::Redirect(self.error_redirect(
                &redirect_uri,
                &error,
                request.state.as_deref(),
            ))
        };
        if request.response_type.as_deref() != Some("code") {
            return Err(back(OAuthError::UnsupportedResponseType(
                "response_type must be `code`".into(),
            )));
        }
        let challenge = request
            .code_challenge
            .as_deref()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| {
                back(OAuthError::InvalidRequest(
                    "code_challenge is required (PKCE)".into(),
                ))
            })?;
        if request.code_challenge_method.as_deref() != Some("S256") {
            return Err(back(OAuthError::InvalidRequest(
                "code_challenge_method must be S256".into(),
            )));
        }
        if challenge.len() != 43
            || !challenge
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(back(OAuthError::InvalidRequest(
                "code_challenge is not a base64url SHA-256".into(),
            )));
        }
        let resource = match request.resource.as_deref() {
            None => self.settings.resource(),
            Some(resource) if self.is_our_resource(resource) => self.settings.resource(),
            Some(resource) => {
                return Err(back(OAuthError::InvalidTarget(format!(
                    "this server issues tokens for {} only, not {resource}",
                    self.settings.resource()
                ))));
            }
        };
        let now = Utc::now();
        let id = random_secret("");
        self.store
            .insert_oauth_request(&RequestRow {
                id: id.clone(),
                client_id: client.client_id,
                redirect_uri,
                state: request.state,
                code_challenge: challenge.to_owned(),
                resource,
                requested_scope: request.scope,
                created_at: now,
                expires_at: now + REQUEST_TTL,
            })
            .await
            .map_err(|e| show(e.into()))?;
        Ok(id)
    }

    fn error_redirect(
        &self,
        redirect_uri: &str,
        error: &OAuthError,
        state: Option<&str>,
    ) -> String {
        with_query(
            redirect_uri,
            &[
                ("error", Some(error.code())),
                ("error_description", Some(&error.description())),
                ("state", state),
                ("iss", Some(&self.settings.issuer)),
            ],
        )
    }

    /// The pending request `id` as the consent page shows it to `user`.
    pub async fn consent_request(
        &self,
        id: &str,
        user: &ConsoleUser,
    ) -> Result<ConsentRequest, OAuthError> {
        let request = self.pending(id).await?;
        let client = self
            .store
            .oauth_client(&request.client_id)
            .await?
            .ok_or_else(|| {
                OAuthError::InvalidClient("the client of this request is gone".into())
            })?;
        let allowed = self.allowed_scopes(user.id).await?;
        let requested_scope = request
            .requested_scope
            .as_deref()
            .into_iter()
            .flat_map(|s| s.split(' '))
            .filter_map(|s| Slug::parse(s).ok())
            .find(|s| allowed.contains(s));
        Ok(ConsentRequest {
            id: request.id,
            client_id: client.client_id,
            client_name: client.name,
            registration: client.registration,
            redirect_host: client::redirect_host(&request.redirect_uri),
            allowed_scopes: allowed,
            requested_scope,
            expires_at: request.expires_at,
        })
    }

    async fn pending(&self, id: &str) -> Result<RequestRow, OAuthError> {
        self.store
            .oauth_request(id, Utc::now())
            .await?
            .ok_or_else(|| {
                OAuthError::InvalidRequest(
                "this sign-in request expired or was answered already: start again from the client"
                    .into(),
            )
            })
    }

    /// The scopes `user_id` may consent to: allowed by an admin and in the catalog now.
    pub async fn allowed_scopes(&self, user_id: i64) -> Result<Vec<Slug>, OAuthError> {
        let live = self.admin.live();
        let known: Vec<&Slug> = live.catalog().scopes.iter().map(|s| &s.slug).collect();
        Ok(self
            .store
            .console_user_scopes(user_id)
            .await?
            .into_iter()
            .filter(|s| known.contains(&s))
            .collect())
    }

    /// The person's answer to request `id`. Returns where to send the browser: the
    /// client's redirect URI with a code, or with `access_denied`.
    #[tracing::instrument(skip(self, user), fields(user = %user.name))]
    pub async fn decide(
        &self,
        id: &str,
        user: &ConsoleUser,
        decision: ConsentDecision,
    ) -> Result<String, OAuthError> {
        let request = self.pending(id).await?;
        let client = self
            .store
            .oauth_client(&request.client_id)
            .await?
            .ok_or_else(|| {
                OAuthError::InvalidClient("the client of this request is gone".into())
            })?;
        let scope = match decision {
            ConsentDecision::Deny => {
                self.store.delete_oauth_request(&request.id).await?;
                tracing::info!(client = %client.client_id, "oauth consent refused");
                return Ok(self.error_redirect(
                    &request.redirect_uri,
                    &OAuthError::AccessDenied("the person refused the request".into()),
                    request.state.as_deref(),
                ));
            }
            ConsentDecision::Approve { scope } => scope,
        };
        if !self.allowed_scopes(user.id).await?.contains(&scope) {
            return Err(OAuthError::InvalidScope(format!(
                "scope `{scope}` is not one an admin allowed you"
            )));
        }
        let code = random_secret(CODE_PREFIX);
        let consent = NewConsent {
            request_id: request.id.clone(),
            user_id: user.id,
            user_name: user.name.clone(),
            client_id: client.client_id.clone(),
            client_name: client.name.clone(),
            scope,
            resource: request.resource.clone(),
            redirect_uri: request.redirect_uri.clone(),
            code_challenge: request.code_challenge.clone(),
            code_hash: hash_key(&code),
            code_expires_at: Utc::now() + CODE_TTL,
        };
        self.admin.record_consent(consent).await?;
        Ok(with_query(
            &request.redirect_uri,
            &[
                ("code", Some(&code)),
                ("state", request.state.as_deref()),
                ("iss", Some(&self.settings.issuer)),
            ],
        ))
    }

    // ---- the token endpoint -------------------------------------------------------------

    /// Checks the client of a token or revocation request.
    async fn authenticate_client(&self, auth: &ClientAuth) -> Result<ClientRow, OAuthError> {
        let client_id = auth
            .client_id
            .as_deref()
            .ok_or_else(|| OAuthError::InvalidClient("client_id is missing".into()))?;
        let row =
            self.store.oauth_client(client_id).await?.ok_or_else(|| {
                OAuthError::InvalidClient(format!("unknown client `{client_id}`"))
            })?;
        match (
            row.auth_method.as_str(),
            &row.secret_hash,
            auth.secret.as_deref(),
        ) {
            ("none", _, None) => Ok(row),
            ("none", _, Some(_)) => Err(OAuthError::InvalidClient(
                "this client is public: it has no secret to send".into(),
            )),
            (method, Some(stored), Some(secret)) => {
                let method_ok = (method == "client_secret_basic") == auth.basic;
                // Comparing digests of 256-bit secrets leaks nothing useful by timing.
                if method_ok && hash_key(secret) == *stored {
                    Ok(row)
                } else {
                    Err(OAuthError::InvalidClient(
                        "client authentication failed".into(),
                    ))
                }
            }
            _ => Err(OAuthError::InvalidClient(
                "client authentication failed".into(),
            )),
        }
    }

    /// `POST /oauth/token`.
    #[tracing::instrument(skip_all, fields(grant_type = ?request.grant_type))]
    pub async fn token(
        &self,
        request: TokenRequest,
        auth: ClientAuth,
    ) -> Result<TokenResponse, OAuthError> {
        let client = self.authenticate_client(&auth).await?;
        if let Some(resource) = request.resource.as_deref()
            && !self.is_our_resource(resource)
        {
            return Err(OAuthError::InvalidTarget(format!(
                "this server issues tokens for {} only",
                self.settings.resource()
            )));
        }
        match request.grant_type.as_deref() {
            Some("authorization_code") => self.exchange_code(&client, request).await,
            Some("refresh_token") => self.refresh(&client, request).await,
            Some(other) => Err(OAuthError::UnsupportedGrantType(format!(
                "grant_type `{other}` is not supported"
            ))),
            None => Err(OAuthError::InvalidRequest("grant_type is missing".into())),
        }
    }

    async fn exchange_code(
        &self,
        client: &ClientRow,
        request: TokenRequest,
    ) -> Result<TokenResponse, OAuthError> {
        let code = request
            .code
            .as_deref()
            .ok_or_else(|| OAuthError::InvalidRequest("code is missing".into()))?;
        let code_hash = hash_key(code);
        let invalid =
            || OAuthError::InvalidGrant("the authorization code is invalid or expired".into());
        let row = self
            .store
            .oauth_code(&code_hash)
            .await?
            .ok_or_else(invalid)?;
        let now = Utc::now();
        if row.client_id != client.client_id {
            return Err(invalid());
        }
        if row.used_at.is_some() {
            // A code used twice was intercepted: the grant it made is not to be trusted.
            self.admin
                .revoke_grant_by_system(row.key_id, "oauth code replayed")
                .await?;
            tracing::warn!(key_id = row.key_id, "oauth code replayed: grant revoked");
            return Err(invalid());
        }
        if row.expires_at <= now {
            return Err(invalid());
        }
        if request.redirect_uri.as_deref() != Some(row.redirect_uri.as_str()) {
            return Err(OAuthError::InvalidGrant(
                "redirect_uri does not match the authorization request".into(),
            ));
        }
        let verifier = request.code_verifier.as_deref().ok_or_else(|| {
            OAuthError::InvalidGrant("code_verifier is missing (PKCE is required)".into())
        })?;
        if !VERIFIER_LEN.contains(&verifier.len()) {
            return Err(OAuthError::InvalidGrant(
                "code_verifier is malformed".into(),
            ));
        }
        let expected = PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(
            verifier.to_owned(),
        ));
        if expected.as_str() != row.code_challenge {
            return Err(OAuthError::InvalidGrant(
                "code_verifier does not match".into(),
            ));
        }
        if !self.store.use_oauth_code(&code_hash, now).await? {
            return Err(invalid());
        }
        let grant = self.live_grant(row.key_id, now).await?;
        self.issue(&grant, None, now).await
    }

    async fn refresh(
        &self,
        client: &ClientRow,
        request: TokenRequest,
    ) -> Result<TokenResponse, OAuthError> {
        let presented = request
            .refresh_token
            .as_deref()
            .ok_or_else(|| OAuthError::InvalidRequest("refresh_token is missing".into()))?;
        let invalid =
            || OAuthError::InvalidGrant("the refresh token is invalid, expired or revoked".into());
        if !presented.starts_with(REFRESH_TOKEN_PREFIX) {
            return Err(invalid());
        }
        let hash = hash_key(presented);
        let row = self.store.oauth_token(&hash).await?.ok_or_else(invalid)?;
        let now = Utc::now();
        if row.kind != "refresh" || row.client_id != client.client_id {
            return Err(invalid());
        }
        if row.revoked_at.is_some() {
            return Err(invalid());
        }
        if row.used_at.is_some() {
            // A rotated refresh token came back: one of two holders is a thief.
            self.admin
                .revoke_grant_by_system(row.key_id, "oauth refresh token replayed")
                .await?;
            tracing::warn!(
                key_id = row.key_id,
                "oauth refresh token replayed: grant revoked"
            );
            return Err(invalid());
        }
        if row.expires_at <= now {
            return Err(invalid());
        }
        let grant = self.live_grant(row.key_id, now).await?;
        if let Some(scope) = request.scope.as_deref()
            && scope != grant.scope.as_str()
        {
            return Err(OAuthError::InvalidScope(format!(
                "this grant is for scope `{}` only",
                grant.scope
            )));
        }
        self.issue(&grant, Some(&hash), now).await
    }

    /// The grant `key_id` if it may still get tokens.
    async fn live_grant(&self, key_id: i64, now: DateTime<Utc>) -> Result<GrantRow, OAuthError> {
        let grant = self
            .store
            .oauth_grant(key_id, now)
            .await?
            .filter(|g| g.revoked_at.is_none())
            .ok_or_else(|| OAuthError::InvalidGrant("the grant was revoked".into()))?;
        if !self
            .allowed_scopes(grant.user_id)
            .await?
            .contains(&grant.scope)
        {
            return Err(OAuthError::InvalidGrant(format!(
                "scope `{}` is no longer allowed to {}",
                grant.scope, grant.user_name
            )));
        }
        Ok(grant)
    }

    /// Issues a token pair for `grant`, rotating the refresh token `rotating` if given.
    async fn issue(
        &self,
        grant: &GrantRow,
        rotating: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<TokenResponse, OAuthError> {
        let access = random_secret(ACCESS_TOKEN_PREFIX);
        let refresh = random_secret(REFRESH_TOKEN_PREFIX);
        let (access_hash, refresh_hash) = (hash_key(&access), hash_key(&refresh));
        let ttl = |d: std::time::Duration| {
            chrono::Duration::from_std(d).unwrap_or(chrono::Duration::minutes(15))
        };
        let pair = TokenPair {
            access_hash: &access_hash,
            access_expires_at: now + ttl(self.settings.access_token_ttl),
            refresh_hash: &refresh_hash,
            refresh_expires_at: now + ttl(self.settings.refresh_token_ttl),
            at: now,
        };
        match rotating {
            Some(old) => {
                if !self
                    .store
                    .rotate_oauth_refresh(old, grant.key_id, &pair)
                    .await?
                {
                    return Err(OAuthError::InvalidGrant(
                        "the refresh token is invalid, expired or revoked".into(),
                    ));
                }
            }
            None => self.store.insert_oauth_tokens(grant.key_id, &pair).await?,
        }
        Ok(TokenResponse {
            access_token: access,
            token_type: "Bearer",
            expires_in: self.settings.access_token_ttl.as_secs(),
            refresh_token: refresh,
            scope: grant.scope.to_string(),
        })
    }

    // ---- revocation ---------------------------------------------------------------------

    /// `POST /oauth/revoke` (RFC 7009). Revoking a refresh token revokes its grant (and so
    /// every token of it); an access token only itself. An unknown token is not an error.
    #[tracing::instrument(skip_all)]
    pub async fn revoke(&self, token: &str, auth: ClientAuth) -> Result<(), OAuthError> {
        let client = self.authenticate_client(&auth).await?;
        let hash = hash_key(token);
        let Some(row) = self.store.oauth_token(&hash).await? else {
            return Ok(());
        };
        if row.client_id != client.client_id {
            return Err(OAuthError::InvalidRequest(
                "the token was not issued to this client".into(),
            ));
        }
        if row.kind == "refresh" {
            self.admin
                .revoke_grant_by_system(row.key_id, "revoked by its client")
                .await?;
        } else {
            self.store.revoke_oauth_token(&hash, Utc::now()).await?;
        }
        Ok(())
    }

    // ---- at /mcp ------------------------------------------------------------------------

    /// Checks an access token presented at `/mcp`. `Ok(None)` for a token that is unknown,
    /// expired, revoked, for another resource, or whose grant, person or scope was revoked
    /// or withdrawn; `Err` only when the database cannot answer.
    #[tracing::instrument(skip_all)]
    pub async fn authenticate(
        &self,
        presented: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<OAuthCaller>, StoreError> {
        if !presented.starts_with(ACCESS_TOKEN_PREFIX) || presented.len() > 128 {
            return Ok(None);
        }
        let Some(row) = self.store.oauth_access(&hash_key(presented), now).await? else {
            return Ok(None);
        };
        let live = self.admin.live();
        let scope_exists = live.catalog().scopes.iter().any(|s| s.slug == row.scope);
        if !row.usable
            || row.expires_at <= now
            || !scope_exists
            || !self.is_our_resource(&row.resource)
        {
            return Ok(None);
        }
        let stale_before = now - LAST_USED_INTERVAL;
        if row.last_used_at.is_none_or(|used| used < stale_before) {
            // Bookkeeping, not access control: a failed write must not refuse a valid token.
            if let Err(error) = self
                .store
                .touch_agent_key(row.key_id, now, stale_before)
                .await
            {
                tracing::warn!(%error, "could not record oauth grant use");
            }
        }
        Ok(Some(OAuthCaller {
            key_id: row.key_id,
            key_name: row.key_name,
            scope: row.scope,
            user_name: row.user_name,
            client_name: row.client_name,
        }))
    }

    // ---- the console --------------------------------------------------------------------

    /// The grants of one person, or of everyone (`None`), newest first.
    pub async fn grants(&self, user_id: Option<i64>) -> Result<Vec<GrantRow>, OAuthError> {
        Ok(self.store.oauth_grants(user_id, Utc::now()).await?)
    }

    /// Revokes grant `key_id` for `actor`: their own, or anyone's for an admin. Takes
    /// effect on the grant's next request.
    #[tracing::instrument(skip(self, actor), fields(actor = %actor.name))]
    pub async fn revoke_grant(
        &self,
        actor: &ConsoleUser,
        key_id: i64,
    ) -> Result<GrantRow, OAuthError> {
        let now = Utc::now();
        let grant = self
            .store
            .oauth_grant(key_id, now)
            .await?
            .ok_or_else(|| OAuthError::InvalidRequest(format!("no grant {key_id}")))?;
        let admin = actor.role.allows(crate::users::ConsoleRole::Admin);
        if grant.user_id != actor.id && !admin {
            return Err(OAuthError::AccessDenied(
                "only its person or an admin may revoke a grant".into(),
            ));
        }
        self.admin.revoke_grant(&actor.name, key_id).await?;
        Ok(self.store.oauth_grant(key_id, now).await?.unwrap_or(grant))
    }
}

fn info(row: &ClientRow) -> ClientInfo {
    ClientInfo {
        client_id: row.client_id.clone(),
        name: row.name.clone(),
        redirect_uris: row.redirect_uris.clone(),
        auth_method: row.auth_method.clone(),
        registration: row.registration.clone(),
    }
}
