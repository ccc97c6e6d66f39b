//! OAuth through the door: the scopes an admin allows each console user, a person's
//! consent (a grant), and revoking a grant. Each commits with its `admin_change` event;
//! tokens and codes are protocol state of [`crate::oauth`], not changes, and are not.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{AdminError, AdminService, Changed, target};
use crate::keys::{hash_key, random_secret};
use crate::slug::Slug;
use crate::store::StoreError;
use crate::store::oauth::{
    NewCode, NewGrant, insert_grant_on, revoke_grant_on, set_user_scopes_on, take_request_on,
};

/// The audit actor of revocations the authorization server makes itself (a replayed
/// code or refresh token, a client revoking its own refresh token).
pub const OAUTH_ACTOR: &str = "oauth-server";

/// A consent to commit: the grant and its first authorization code.
#[derive(Clone)]
pub struct NewConsent {
    /// The pending request it answers (taken, so it cannot be answered twice).
    pub request_id: String,
    pub user_id: i64,
    pub user_name: String,
    pub client_id: String,
    pub client_name: String,
    pub scope: Slug,
    pub resource: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub code_hash: String,
    pub code_expires_at: DateTime<Utc>,
}

impl std::fmt::Debug for NewConsent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewConsent")
            .field("user_name", &self.user_name)
            .field("client_id", &self.client_id)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// The credential row name of a grant: person, client and a random tag, so the audit
/// names who acted through what. Key names are letters, digits, `.`, `_` and `-`, so no
/// agent key can be named like this.
fn grant_name(user: &str, client: &str) -> String {
    let tag = &random_secret("")[..8];
    format!("oauth:{user} via {client} #{tag}")
}

fn grant_target(key_id: i64) -> String {
    target("oauth_grant", &key_id.to_string())
}

impl AdminService {
    /// The scopes console user `user_id` may consent to, as stored (sorted).
    pub async fn user_scopes(&self, user_id: i64) -> Result<Vec<Slug>, AdminError> {
        Ok(self.store.console_user_scopes(user_id).await?)
    }

    /// Replaces the scopes console user `name` may consent to. Every scope must be in the
    /// catalog. Taking a scope away ends the person's tokens for it on their next request.
    #[tracing::instrument(skip(self))]
    pub async fn set_user_scopes(
        &self,
        actor: &str,
        name: &str,
        scopes: &[Slug],
    ) -> Result<Vec<Slug>, AdminError> {
        let live = self.live();
        let known: Vec<&Slug> = live.catalog().scopes.iter().map(|s| &s.slug).collect();
        if let Some(unknown) = scopes.iter().find(|s| !known.contains(s)) {
            return Err(AdminError::bad_input(
                "scopes",
                format!("unknown scope `{unknown}`: allow scopes that exist in the catalog"),
            ));
        }
        let user = self
            .store
            .find_user(name)
            .await?
            .ok_or_else(|| AdminError::NotFound(format!("console user `{name}`")))?;
        let mut scopes = scopes.to_vec();
        scopes.sort();
        scopes.dedup();
        let target = target("console_user", name);
        let after_scopes = scopes.clone();
        self.record(
            actor,
            Box::new(move |conn| {
                Box::pin(async move {
                    let before = set_user_scopes_on(conn, user.id, &scopes).await?;
                    let after: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
                    let changed = (before != after)
                        .then(|| {
                            Changed::new(
                                "console_user.scopes",
                                target,
                                json!({ "oauth_scopes": before }),
                                json!({ "oauth_scopes": after }),
                            )
                        })
                        .into_iter()
                        .collect();
                    Ok((after_scopes, changed))
                })
            }),
        )
        .await
    }

    /// Commits a person's consent: the grant, its credential row and its authorization
    /// code, audited as by the person. Fails with a conflict when the request was answered
    /// meanwhile (a double submit), so one request makes at most one grant.
    #[tracing::instrument(skip(self))]
    pub async fn record_consent(&self, consent: NewConsent) -> Result<i64, AdminError> {
        let actor = consent.user_name.clone();
        let name = grant_name(&consent.user_name, &consent.client_name);
        // A secret nobody is shown: the row can never be presented as a key.
        let key_hash = hash_key(&random_secret("sgx_"));
        self.record(
            &actor,
            Box::new(move |conn| {
                Box::pin(async move {
                    if !take_request_on(conn, &consent.request_id).await? {
                        return Err(StoreError::Conflict(
                            "this sign-in request was answered already".into(),
                        ));
                    }
                    let now = Utc::now();
                    let grant = NewGrant {
                        name: &name,
                        key_hash: &key_hash,
                        scope: &consent.scope,
                        user_id: consent.user_id,
                        user_name: &consent.user_name,
                        client_id: &consent.client_id,
                        client_name: &consent.client_name,
                        resource: &consent.resource,
                        at: now,
                    };
                    let code = NewCode {
                        code_hash: &consent.code_hash,
                        redirect_uri: &consent.redirect_uri,
                        code_challenge: &consent.code_challenge,
                        expires_at: consent.code_expires_at,
                    };
                    let key_id = insert_grant_on(conn, &grant, &code).await?;
                    let after = json!({
                        "name": name,
                        "user": consent.user_name,
                        "client_id": consent.client_id,
                        "client_name": consent.client_name,
                        "scope": consent.scope,
                        "resource": consent.resource,
                    });
                    let changed = Changed::new(
                        "oauth_grant.create",
                        grant_target(key_id),
                        Value::Null,
                        after,
                    );
                    Ok((key_id, vec![changed]))
                })
            }),
        )
        .await
    }

    /// Revokes grant `key_id` and its tokens, audited as by `actor`. Revoking a revoked
    /// grant keeps its first revocation and writes no event.
    #[tracing::instrument(skip(self))]
    pub async fn revoke_grant(&self, actor: &str, key_id: i64) -> Result<(), AdminError> {
        self.record(
            actor,
            Box::new(move |conn| {
                Box::pin(async move {
                    let now = Utc::now();
                    let before = revoke_grant_on(conn, key_id, now)
                        .await?
                        .ok_or_else(|| StoreError::NotFound(format!("oauth grant {key_id}")))?;
                    let changed = before
                        .is_none()
                        .then(|| {
                            Changed::new(
                                "oauth_grant.revoke",
                                grant_target(key_id),
                                json!({ "revoked_at": null }),
                                json!({ "revoked_at": now }),
                            )
                        })
                        .into_iter()
                        .collect();
                    Ok(((), changed))
                })
            }),
        )
        .await
    }

    /// [`Self::revoke_grant`] by the authorization server itself, with its reason.
    pub(crate) async fn revoke_grant_by_system(
        &self,
        key_id: i64,
        reason: &str,
    ) -> Result<(), AdminError> {
        tracing::info!(
            key_id,
            reason,
            "oauth grant revoked by the authorization server"
        );
        self.revoke_grant(OAUTH_ACTOR, key_id).await
    }
}
