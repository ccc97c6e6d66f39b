//! The authorization server: the service, checking an access token at `/mcp`, and the
//! console's view of grants. Its flows live beside it: `register` (client registration),
//! `authorize` (authorization and consent), `token` (the token endpoint and revocation).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use url::Url;

use super::{ACCESS_TOKEN_PREFIX, OAuthError, OAuthSettings};
use crate::admin::AdminService;
use crate::keys::{LAST_USED_INTERVAL, hash_key};
use crate::slug::Slug;
use crate::store::oauth::GrantRow;
use crate::store::{Store, StoreError};
use crate::users::ConsoleUser;

mod authorize;
mod register;
mod token;

pub use authorize::{AuthorizeRequest, ConsentDecision, ConsentRequest};
pub use token::{ClientAuth, TokenRequest, TokenResponse};

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
