//! Server functions of the OAuth pages: the consent page's view of a pending sign-in
//! request, and the connected clients (grants) a person may see and revoke.
//!
//! The consent decision itself is not a server function: the consent form posts to the
//! server's `/oauth/consent` handler, which redirects the browser to the client.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::flash::Notice;
use crate::shared::ConsoleError;

/// A pending authorization request as the consent page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsentView {
    pub id: String,
    pub client_id: String,
    pub client_name: String,
    /// The client is known by its metadata document's URL (its `client_id`), not by a
    /// registration it made itself.
    pub by_metadata_document: bool,
    pub redirect_host: String,
    /// The scopes the person may choose from (allowed by an admin, in the catalog).
    pub scopes: Vec<String>,
    /// The scope chosen when the page opens: the one the client asked for, or the first.
    pub preselected: Option<String>,
    pub expires_at: String,
}

/// What the consent page finds under its id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ConsentLookup {
    Pending(ConsentView),
    /// Expired, answered already, or never made: why, in words the person can act on.
    Gone(String),
}

#[server(prefix = "/console/api", endpoint = "get_consent")]
pub async fn get_consent(id: String) -> Result<ConsentLookup, ConsoleError> {
    ssr::consent(&id).await
}

/// One grant: a person's consent to one client, with its tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrantLine {
    pub key_id: i64,
    pub user_name: String,
    pub client_name: String,
    pub client_id: String,
    pub scope: String,
    pub created_at: String,
    pub last_used_at: Option<String>,
    pub live_access_tokens: i64,
    pub refresh_expires_at: Option<String>,
    pub revoked_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectedView {
    /// The scopes the signed-in person may consent to (an admin sets them).
    pub allowed_scopes: Vec<String>,
    /// The signed-in person's own grants, newest first.
    pub mine: Vec<GrantLine>,
    /// Everyone else's grants, for an admin; `None` for anyone else.
    pub others: Option<Vec<GrantLine>>,
    /// What a plain (no JavaScript) revoke reported.
    pub notice: Option<Notice>,
}

#[server(prefix = "/console/api", endpoint = "list_grants")]
pub async fn list_grants() -> Result<ConnectedView, ConsoleError> {
    ssr::grants().await
}

#[server(prefix = "/console/api", endpoint = "revoke_grant")]
pub async fn revoke_grant(key_id: i64) -> Result<Notice, ConsoleError> {
    crate::components::flash::ssr::keep_for_redirect(ssr::revoke(key_id).await).await
}

#[cfg(feature = "ssr")]
mod ssr {
    use chrono::{DateTime, Utc};
    use skillgate_core::oauth::OAuthError;
    use skillgate_core::store::oauth::GrantRow;
    use skillgate_core::users::ConsoleRole;

    use super::{ConnectedView, ConsentLookup, ConsentView, GrantLine};
    use crate::components::flash::Notice;
    use crate::shared::ConsoleError;
    use crate::shared::ssr::{context, internal, require};

    const STAMP: &str = "%Y-%m-%d %H:%M UTC";

    fn stamp(at: DateTime<Utc>) -> String {
        at.format(STAMP).to_string()
    }

    /// The person sees what they can act on; server faults stay in the log.
    fn to_console(error: OAuthError) -> ConsoleError {
        if error.code() == "server_error" {
            internal(error)
        } else {
            ConsoleError::Invalid(error.description())
        }
    }

    pub async fn consent(id: &str) -> Result<ConsentLookup, ConsoleError> {
        let user = require(ConsoleRole::Viewer).await?;
        let request = match context().oauth.consent_request(id.trim(), &user).await {
            Ok(request) => request,
            Err(e @ (OAuthError::InvalidRequest(_) | OAuthError::InvalidClient(_))) => {
                return Ok(ConsentLookup::Gone(e.description()));
            }
            Err(e) => return Err(to_console(e)),
        };
        let scopes: Vec<String> = request
            .allowed_scopes
            .iter()
            .map(|s| s.to_string())
            .collect();
        let preselected = request
            .requested_scope
            .map(|s| s.to_string())
            .or_else(|| scopes.first().cloned());
        Ok(ConsentLookup::Pending(ConsentView {
            id: request.id,
            by_metadata_document: request.registration == "metadata_document",
            client_id: request.client_id,
            client_name: request.client_name,
            redirect_host: request.redirect_host,
            scopes,
            preselected,
            expires_at: stamp(request.expires_at),
        }))
    }

    fn line(grant: GrantRow) -> GrantLine {
        GrantLine {
            key_id: grant.key_id,
            user_name: grant.user_name,
            client_name: grant.client_name,
            client_id: grant.client_id,
            scope: grant.scope.to_string(),
            created_at: stamp(grant.created_at),
            last_used_at: grant.last_used_at.map(stamp),
            live_access_tokens: grant.live_access_tokens,
            refresh_expires_at: grant.refresh_expires_at.map(stamp),
            revoked_at: grant.revoked_at.map(stamp),
        }
    }

    pub async fn grants() -> Result<ConnectedView, ConsoleError> {
        let user = require(ConsoleRole::Viewer).await?;
        let oauth = context().oauth;
        let allowed_scopes = oauth
            .allowed_scopes(user.id)
            .await
            .map_err(to_console)?
            .iter()
            .map(ToString::to_string)
            .collect();
        let mine = oauth
            .grants(Some(user.id))
            .await
            .map_err(to_console)?
            .into_iter()
            .map(line)
            .collect();
        let others = if user.role.allows(ConsoleRole::Admin) {
            let all = oauth.grants(None).await.map_err(to_console)?;
            Some(
                all.into_iter()
                    .filter(|g| g.user_id != user.id)
                    .map(line)
                    .collect(),
            )
        } else {
            None
        };
        Ok(ConnectedView {
            allowed_scopes,
            mine,
            others,
            notice: crate::components::flash::ssr::take().await?,
        })
    }

    pub async fn revoke(key_id: i64) -> Result<Notice, ConsoleError> {
        let user = require(ConsoleRole::Viewer).await?;
        let grant = context()
            .oauth
            .revoke_grant(&user, key_id)
            .await
            .map_err(to_console)?;
        let whose = if grant.user_id == user.id {
            String::new()
        } else {
            format!(" for {}", grant.user_name)
        };
        Ok(Notice::ok(format!(
            "Revoked {}{whose}: its tokens stop working on their next request.",
            grant.client_name
        )))
    }
}
