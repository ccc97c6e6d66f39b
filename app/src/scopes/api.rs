//! Server functions of the scope editor: read, create and save a scope.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use crate::catalog::authoring as ssr;
use crate::catalog::*;
use crate::shared::ConsoleError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScopeEditor {
    pub slug: String,
    pub revision: i64,
    pub description: String,
    pub roles: Vec<String>,
    pub all_roles: Vec<Choice>,
    /// Limits that bind every call of the scope's sessions, under every role.
    pub guardrails: Vec<LimitView>,
    /// The tools the scope's roles grant: what a guardrail may name.
    pub tools: Vec<ToolChoice>,
    pub can_edit: bool,
}

#[server(prefix = "/console/api", endpoint = "scope_editor")]
pub async fn get_scope_editor(slug: String) -> Result<Option<ScopeEditor>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let ctx = crate::shared::ssr::context();
    let scopes = ctx
        .authoring
        .scopes()
        .await
        .map_err(crate::shared::ssr::internal)?;
    let Some(stored) = scopes.into_iter().find(|s| s.value.slug.as_str() == slug) else {
        return Ok(None);
    };
    let live = ctx.authoring.live();
    Ok(Some(ScopeEditor {
        slug: stored.value.slug.as_str().to_owned(),
        revision: stored.revision,
        description: stored.value.description.clone(),
        roles: stored
            .value
            .roles
            .iter()
            .map(|r| r.as_str().to_owned())
            .collect(),
        all_roles: ssr::role_choices(&live),
        guardrails: ssr::limit_views(&stored.value.guardrails),
        tools: ssr::scope_tools(&live, &stored.value),
        can_edit: user.role.allows(ConsoleRole::Admin),
    }))
}

#[server(prefix = "/console/api", endpoint = "role_choices")]
pub async fn role_choices() -> Result<Vec<Choice>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    Ok(ssr::role_choices(
        &crate::shared::ssr::context().authoring.live(),
    ))
}

#[server(prefix = "/console/api", endpoint = "create_scope")]
pub async fn create_scope(
    slug: String,
    description: String,
    roles: Checked,
) -> Result<(), ConsoleError> {
    use skillgate_core::model::Scope;
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    let scope = Scope {
        slug: ssr::slug_field("slug", &slug)?,
        description: description.trim().to_owned(),
        roles: ssr::checked_slugs("roles", roles)?,
        guardrails: Vec::new(),
    };
    crate::shared::ssr::context()
        .authoring
        .create_scope(&user.name, &scope)
        .await
        .map_err(ssr::authoring_error)?;
    leptos_axum::redirect(&format!("/scopes/{}", scope.slug));
    Ok(())
}

#[server(prefix = "/console/api", endpoint = "save_scope")]
pub async fn save_scope(
    slug: String,
    revision: i64,
    description: String,
    roles: Checked,
) -> Result<i64, ConsoleError> {
    use skillgate_core::model::Scope;
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    let ctx = crate::shared::ssr::context();
    // The form edits description and roles; the guardrails have their own editor and
    // are kept as stored.
    let slug = ssr::slug_field("slug", &slug)?;
    let guardrails = ssr::stored_scope(&ctx, &slug).await?.guardrails;
    let scope = Scope {
        slug,
        description: description.trim().to_owned(),
        roles: ssr::checked_slugs("roles", roles)?,
        guardrails,
    };
    ctx.authoring
        .update_scope(&user.name, &scope, revision)
        .await
        .map_err(ssr::authoring_error)
}
