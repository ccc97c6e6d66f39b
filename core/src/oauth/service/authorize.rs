//! Authorization and consent: checking `GET /oauth/authorize`, showing the request on the
//! consent page, and turning the person's answer into a code or a refusal.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{OAuthService, with_query};
use crate::admin::NewConsent;
use crate::keys::{hash_key, random_secret};
use crate::oauth::client;
use crate::oauth::{AuthorizeError, CODE_PREFIX, OAuthError};
use crate::slug::Slug;
use crate::store::oauth::RequestRow;
use crate::users::ConsoleUser;

/// How long a checked authorization request waits for sign-in and consent.
const REQUEST_TTL: chrono::Duration = chrono::Duration::minutes(10);
/// How long an authorization code may be exchanged.
const CODE_TTL: chrono::Duration = chrono::Duration::seconds(60);

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

impl OAuthService {
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
}
