//! Server functions of the API tokens page: list, issue (the token shown once) and revoke.
//!
//! Everyone signed in manages their own tokens; an admin also everyone else's. A token acts
//! as its user with the user's role at each request, so a viewer's token can read holds
//! but not decide them.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::flash::Notice;
use crate::shared::ConsoleError;

/// One token as the page lists it: never the token itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLine {
    pub id: i64,
    pub user: String,
    pub name: String,
    pub prefix: String,
    /// `active`, `expired` or `revoked`.
    pub status: String,
    pub created_at: String,
    pub created_by: String,
    pub expires_at: Option<String>,
    pub revoked_at: Option<String>,
    pub last_used_at: Option<String>,
}

/// A token just issued: the only time it is shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreatedToken {
    pub user: String,
    pub name: String,
    pub token: String,
    /// A ready-to-run request that lists the pending holds with it.
    pub example: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokensView {
    pub me: String,
    pub mine: Vec<TokenLine>,
    /// Everyone else's tokens and the enabled users a token can be issued for, for an
    /// admin; `None` for anyone else.
    pub others: Option<Vec<TokenLine>>,
    pub people: Option<Vec<String>>,
    /// A token issued by a form post without JavaScript, shown once after the redirect.
    pub fresh: Option<CreatedToken>,
    /// What a plain (no JavaScript) revoke reported.
    pub notice: Option<Notice>,
}

#[server(prefix = "/console/api", endpoint = "list_api_tokens")]
pub async fn list_api_tokens(reveal: Option<String>) -> Result<TokensView, ConsoleError> {
    ssr::list(reveal).await
}

/// Issues a token for `user` (default: the signed-in person). With JavaScript the token
/// comes back in the result; a plain form post is answered with a redirect, which cannot
/// carry it, so it is kept server-side for one render, named by a one-time reveal token.
#[server(prefix = "/console/api", endpoint = "create_api_token")]
pub async fn create_api_token(
    name: String,
    expires_in_days: Option<String>,
    user: Option<String>,
) -> Result<Option<CreatedToken>, ConsoleError> {
    ssr::create(&name, expires_in_days.as_deref(), user.as_deref()).await
}

#[server(prefix = "/console/api", endpoint = "revoke_api_token")]
pub async fn revoke_api_token(id: i64) -> Result<Notice, ConsoleError> {
    crate::components::flash::ssr::keep_for_redirect(ssr::revoke(id).await).await
}

#[cfg(feature = "ssr")]
mod ssr {
    use chrono::{DateTime, Utc};
    use skillgate_core::api_tokens::ApiTokens;
    use skillgate_core::store::api_tokens::ApiTokenInfo;
    use skillgate_core::users::ConsoleRole;

    use super::*;
    use crate::catalog::authoring::{
        authoring_error, expiry, is_plain_form_post, reveal_after_redirect, take_reveal,
    };
    use crate::shared::ssr::{context, internal, require};

    fn stamp(at: DateTime<Utc>) -> String {
        at.format("%Y-%m-%d %H:%M UTC").to_string()
    }

    fn line(token: ApiTokenInfo, now: DateTime<Utc>) -> TokenLine {
        let status = if token.revoked_at.is_some() {
            "revoked"
        } else if token.is_active(now) {
            "active"
        } else {
            "expired"
        };
        TokenLine {
            id: token.id,
            status: status.to_owned(),
            created_at: stamp(token.created_at),
            expires_at: token.expires_at.map(stamp),
            revoked_at: token.revoked_at.map(stamp),
            last_used_at: token.last_used_at.map(stamp),
            user: token.user,
            name: token.name,
            prefix: token.prefix,
            created_by: token.created_by,
        }
    }

    /// The request that lists pending holds, against the host this page was served from.
    async fn example(token: &str) -> String {
        let host = leptos_axum::extract::<http::HeaderMap>()
            .await
            .ok()
            .and_then(|h| {
                h.get(http::header::HOST)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| "127.0.0.1:3000".to_owned());
        format!("curl -H 'Authorization: Bearer {token}' http://{host}/api/v1/holds")
    }

    pub async fn list(reveal: Option<String>) -> Result<TokensView, ConsoleError> {
        let user = require(ConsoleRole::Viewer).await?;
        let ctx = context();
        let tokens = ApiTokens::new(ctx.store.clone());
        let now = Utc::now();
        let is_admin = user.role.allows(ConsoleRole::Admin);
        let all = tokens
            .list(if is_admin { None } else { Some(user.id) })
            .await
            .map_err(internal)?;
        let (mine, others): (Vec<_>, Vec<_>) = all.into_iter().partition(|t| t.user == user.name);
        let people = if is_admin {
            let users = ctx.users.list().await.map_err(internal)?;
            Some(
                users
                    .into_iter()
                    .filter(|u| !u.disabled)
                    .map(|u| u.name)
                    .collect(),
            )
        } else {
            None
        };
        let fresh = take_reveal(&ctx, user.id, reveal).await?;
        Ok(TokensView {
            mine: mine.into_iter().map(|t| line(t, now)).collect(),
            others: is_admin.then(|| others.into_iter().map(|t| line(t, now)).collect()),
            people,
            fresh,
            notice: crate::components::flash::ssr::take().await?,
            me: user.name,
        })
    }

    pub async fn create(
        name: &str,
        expires_in_days: Option<&str>,
        owner: Option<&str>,
    ) -> Result<Option<CreatedToken>, ConsoleError> {
        let user = require(ConsoleRole::Viewer).await?;
        let expires_at = expiry(expires_in_days)?;
        let owner = owner
            .map(str::trim)
            .filter(|o| !o.is_empty())
            .unwrap_or(&user.name)
            .to_owned();
        let ctx = context();
        let (info, token) = ctx
            .authoring
            .create_api_token(&user, &owner, name.trim(), expires_at)
            .await
            .map_err(authoring_error)?;
        let created = CreatedToken {
            user: info.user,
            name: info.name,
            example: example(token.expose()).await,
            token: token.expose().to_owned(),
        };
        if is_plain_form_post().await {
            reveal_after_redirect(&ctx, user.id, &created, "/tokens", "new-token").await?;
            return Ok(None);
        }
        Ok(Some(created))
    }

    pub async fn revoke(id: i64) -> Result<Notice, ConsoleError> {
        let user = require(ConsoleRole::Viewer).await?;
        let token = context()
            .authoring
            .revoke_api_token(&user, id)
            .await
            .map_err(authoring_error)?;
        let whose = if token.user == user.name {
            String::new()
        } else {
            format!(" of {}", token.user)
        };
        Ok(Notice::ok(format!(
            "Revoked the API token “{}”{whose}: it is refused from its next request.",
            token.name
        )))
    }
}
