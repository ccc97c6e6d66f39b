//! Server functions of agent keys: the key form, create and revoke.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use crate::catalog::authoring as ssr;
use crate::shared::ConsoleError;

/// Everything the key form needs: the scopes a key can map to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyForm {
    pub scopes: Vec<String>,
    pub can_edit: bool,
    /// A key created by a form post without JavaScript, shown once after the redirect.
    pub fresh: Option<CreatedKey>,
}

/// A newly created agent key: the only time the key itself is ever shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreatedKey {
    pub name: String,
    pub scope: String,
    pub key: String,
    /// A ready-to-paste MCP client configuration that uses the key.
    pub config: String,
}

#[server(prefix = "/console/api", endpoint = "key_form")]
pub async fn get_key_form(reveal: Option<String>) -> Result<KeyForm, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let ctx = crate::shared::ssr::context();
    let can_edit = user.role.allows(ConsoleRole::Admin);
    let fresh = ssr::take_reveal(&ctx, user.id, reveal.filter(|_| can_edit)).await?;
    Ok(KeyForm {
        scopes: ctx
            .authoring
            .live()
            .catalog()
            .scopes
            .iter()
            .map(|s| s.slug.as_str().to_owned())
            .collect(),
        can_edit,
        fresh,
    })
}

/// Creates an agent key. With JavaScript the key comes back in the result. A plain form
/// post is answered with a redirect, which cannot carry the key: it is kept server-side
/// for one render and the redirect names it with a random one-time token.
#[server(prefix = "/console/api", endpoint = "create_key")]
pub async fn create_key(
    name: String,
    scope: String,
    expires_in_days: Option<String>,
) -> Result<Option<CreatedKey>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    let scope = ssr::slug_field("scope", &scope)?;
    let expires_at = ssr::expiry(expires_in_days.as_deref())?;
    let ctx = crate::shared::ssr::context();
    let (info, key) = ctx
        .authoring
        .create_key(&user.name, name.trim(), &scope, expires_at)
        .await
        .map_err(ssr::authoring_error)?;
    let created = CreatedKey {
        name: info.name.clone(),
        scope: info.scope.as_str().to_owned(),
        config: ssr::client_config(key.expose()).await,
        key: key.expose().to_owned(),
    };
    if ssr::is_plain_form_post().await {
        ssr::reveal_after_redirect(&ctx, user.id, &created, "/scopes", "new-key").await?;
        return Ok(None);
    }
    Ok(Some(created))
}

#[server(prefix = "/console/api", endpoint = "revoke_key")]
pub async fn revoke_key(name: String) -> Result<(), ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    crate::shared::ssr::context()
        .authoring
        .revoke_key(&user.name, &name)
        .await
        .map_err(ssr::authoring_error)?;
    Ok(())
}
