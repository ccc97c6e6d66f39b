//! Server functions of the Users page: console accounts, administered by admins only.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::flash::Notice;
use crate::shared::ConsoleError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserRow {
    pub name: String,
    pub role: String,
    pub disabled: bool,
    /// The signed-in admin's own row: the page does not offer to lock them out.
    pub is_me: bool,
    /// The OAuth scopes this person may consent to (the consent page offers these).
    pub oauth_scopes: Vec<String>,
    /// The identity provider this person signs in with (single sign-on made the user): the
    /// provider's groups set the role at each sign-in, and there is no password here.
    pub provider: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsersView {
    pub users: Vec<UserRow>,
    /// The catalog's scopes: what an admin may allow a person to consent to.
    pub catalog_scopes: Vec<String>,
    /// What a plain (no JavaScript) form post on this page reported.
    pub notice: Option<Notice>,
}

#[server(prefix = "/console/api", endpoint = "list_users")]
pub async fn list_users() -> Result<UsersView, ConsoleError> {
    use crate::shared::ssr::{context, internal};
    use skillgate_core::users::ConsoleRole;
    let me = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    let ctx = context();
    let users = ctx.users.list().await.map_err(internal)?;
    let mut providers = ctx.users.sso_issuers().await.map_err(internal)?;
    let mut rows = Vec::with_capacity(users.len());
    for u in users {
        let oauth_scopes = ctx.authoring.user_scopes(u.id).await.map_err(internal)?;
        rows.push(UserRow {
            provider: providers.remove(&u.id),
            is_me: u.id == me.id,
            name: u.name,
            role: u.role.to_string(),
            disabled: u.disabled,
            oauth_scopes: oauth_scopes.iter().map(ToString::to_string).collect(),
        });
    }
    let catalog_scopes = ctx
        .authoring
        .live()
        .catalog()
        .scopes
        .iter()
        .map(|s| s.slug.to_string())
        .collect();
    Ok(UsersView {
        users: rows,
        catalog_scopes,
        notice: crate::components::flash::ssr::take().await?,
    })
}

#[server(prefix = "/console/api", endpoint = "add_user")]
pub async fn add_user(name: String, role: String) -> Result<Notice, ConsoleError> {
    crate::components::flash::ssr::keep_for_redirect(ssr::add_user(name.trim(), &role).await).await
}

#[server(prefix = "/console/api", endpoint = "update_user")]
pub async fn update_user(
    name: String,
    role: String,
    disabled: Option<String>,
) -> Result<Notice, ConsoleError> {
    let disabled = disabled.is_some();
    crate::components::flash::ssr::keep_for_redirect(ssr::update_user(&name, &role, disabled).await)
        .await
}

/// Replaces the scopes `name` may consent to with the ticked ones (`scopes[slug]=on`).
#[server(prefix = "/console/api", endpoint = "set_user_scopes")]
pub async fn set_user_scopes(
    name: String,
    scopes: crate::catalog::Checked,
) -> Result<Notice, ConsoleError> {
    crate::components::flash::ssr::keep_for_redirect(ssr::set_scopes(&name, scopes).await).await
}

#[server(prefix = "/console/api", endpoint = "reset_user_password")]
pub async fn reset_user_password(name: String) -> Result<Notice, ConsoleError> {
    crate::components::flash::ssr::keep_for_redirect(ssr::reset_password(&name).await).await
}

#[cfg(feature = "ssr")]
mod ssr {
    use skillgate_core::admin::AdminError;
    use skillgate_core::users::{ConsoleRole, UserError};

    use crate::components::flash::Notice;
    use crate::shared::ConsoleError;
    use crate::shared::ssr::{context, internal, require};

    /// Mistakes the admin can fix are shown to them; anything else stays in the server log.
    fn to_console(error: impl Into<AdminError>) -> ConsoleError {
        let error = error.into();
        if error.is_user_error() {
            ConsoleError::Invalid(error.to_string())
        } else {
            internal(error)
        }
    }

    pub async fn add_user(name: &str, role: &str) -> Result<Notice, ConsoleError> {
        let actor = require(ConsoleRole::Admin).await?;
        let role: ConsoleRole = role.parse().map_err(|e: UserError| to_console(e))?;
        let (user, password) = context()
            .authoring
            .add_user(&actor.name, name, role, None)
            .await
            .map_err(to_console)?;
        let password = password.ok_or_else(|| internal("no password was generated"))?;
        Ok(Notice::with_secret(
            format!(
                "Added `{}` as {}. Give them this password; it is shown only once.",
                user.name, user.role
            ),
            password.expose().to_owned(),
        ))
    }

    pub async fn update_user(
        name: &str,
        role: &str,
        disabled: bool,
    ) -> Result<Notice, ConsoleError> {
        let actor = require(ConsoleRole::Admin).await?;
        let role: ConsoleRole = role.parse().map_err(|e: UserError| to_console(e))?;
        let user = context()
            .authoring
            .change_user_access(&actor, name, role, disabled)
            .await
            .map_err(to_console)?;
        let status = if user.disabled { "disabled" } else { "active" };
        Ok(Notice::ok(format!(
            "Saved `{}`: {}, {status}.",
            user.name, user.role
        )))
    }

    pub async fn set_scopes(
        name: &str,
        scopes: crate::catalog::Checked,
    ) -> Result<Notice, ConsoleError> {
        let actor = require(ConsoleRole::Admin).await?;
        let scopes = crate::catalog::authoring::checked_slugs("scopes", scopes)?;
        let saved = context()
            .authoring
            .set_user_scopes(&actor.name, name, &scopes)
            .await
            .map_err(to_console)?;
        let list = if saved.is_empty() {
            "none".to_owned()
        } else {
            saved
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        Ok(Notice::ok(format!(
            "Saved the OAuth scopes of `{name}`: {list}."
        )))
    }

    pub async fn reset_password(name: &str) -> Result<Notice, ConsoleError> {
        let actor = require(ConsoleRole::Admin).await?;
        let password = context()
            .authoring
            .reset_user_password(&actor.name, name)
            .await
            .map_err(to_console)?;
        Ok(Notice::with_secret(
            format!("New password for `{name}`; it is shown only once."),
            password.expose().to_owned(),
        ))
    }
}
