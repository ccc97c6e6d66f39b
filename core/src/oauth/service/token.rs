//! The token endpoint: client authentication, the authorization code exchange with PKCE,
//! refresh token rotation (a replayed one revokes its grant), and revocation (RFC 7009).

use chrono::{DateTime, Utc};
use oauth2::{PkceCodeChallenge, PkceCodeVerifier};
use serde::Serialize;

use super::OAuthService;
use crate::keys::hash_key;
use crate::keys::random_secret;
use crate::oauth::{ACCESS_TOKEN_PREFIX, OAuthError, REFRESH_TOKEN_PREFIX};
use crate::store::oauth::{ClientRow, GrantRow, TokenPair};

/// PKCE verifiers are 43 to 128 characters (RFC 7636 §4.1).
const VERIFIER_LEN: std::ops::RangeInclusive<usize> = 43..=128;

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

impl OAuthService {
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
}
