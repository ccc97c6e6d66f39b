//! Server functions that read and change one role: its editor, the new-role form's
//! choices, create and save.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::catalog::*;
use crate::shared::ConsoleError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleEditor {
    pub slug: String,
    pub revision: i64,
    pub title: String,
    pub description: String,
    pub instructions: String,
    /// The instructions rendered from markdown, sanitized on the server.
    pub instructions_html: String,
    pub skills: Vec<String>,
    /// Every skill of the catalog, to pick from.
    pub all_skills: Vec<Choice>,
    pub limits: Vec<LimitView>,
    /// The tools the role grants, with their top-level arguments: the limit pickers.
    pub tools: Vec<ToolChoice>,
    pub can_edit: bool,
}

#[server(prefix = "/console/api", endpoint = "role_editor")]
pub async fn get_role_editor(slug: String) -> Result<Option<RoleEditor>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let ctx = crate::shared::ssr::context();
    let Ok(parsed) = skillgate_core::slug::Slug::parse(&slug) else {
        return Ok(None);
    };
    let Some(stored) = ctx
        .authoring
        .role(&parsed)
        .await
        .map_err(crate::shared::ssr::internal)?
    else {
        return Ok(None);
    };
    Ok(Some(ssr::role_editor(
        &ctx.authoring.live(),
        stored.value,
        stored.revision,
        user.role.allows(ConsoleRole::Admin),
    )))
}

/// The catalog's skills, for the new-role form.
#[server(prefix = "/console/api", endpoint = "skill_choices")]
pub async fn skill_choices() -> Result<Vec<Choice>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    Ok(ssr::skill_choices(
        &crate::shared::ssr::context().authoring.live(),
    ))
}

#[server(prefix = "/console/api", endpoint = "create_role")]
pub async fn create_role(
    slug: String,
    title: String,
    description: String,
    instructions: String,
    skills: Checked,
) -> Result<(), ConsoleError> {
    use skillgate_core::model::Role;
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    let role = Role {
        slug: ssr::slug_field("slug", &slug)?,
        title: title.trim().to_owned(),
        description: description.trim().to_owned(),
        instructions,
        skills: ssr::checked_slugs("skills", skills)?,
        limits: Vec::new(),
    };
    crate::shared::ssr::context()
        .authoring
        .create_role(&user.name, &role)
        .await
        .map_err(ssr::authoring_error)?;
    leptos_axum::redirect(&format!("/roles/{}/edit", role.slug));
    Ok(())
}

#[server(prefix = "/console/api", endpoint = "save_role")]
pub async fn save_role(
    slug: String,
    revision: i64,
    title: String,
    description: String,
    instructions: String,
    skills: Checked,
) -> Result<i64, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    let ctx = crate::shared::ssr::context();
    let mut role = ssr::stored_role(&ctx, &slug).await?;
    role.title = title.trim().to_owned();
    role.description = description.trim().to_owned();
    role.instructions = instructions;
    role.skills = ssr::checked_slugs("skills", skills)?;
    ctx.authoring
        .update_role(&user.name, &role, revision)
        .await
        .map_err(ssr::authoring_error)
}

#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    #[allow(unused_imports)]
    pub(crate) use crate::catalog::authoring::*;
    use skillgate_core::model::Role;
    use skillgate_core::policy::CompiledCatalog;

    use super::RoleEditor;
    use crate::catalog::*;

    pub fn role_editor(
        compiled: &CompiledCatalog,
        role: Role,
        revision: i64,
        can_edit: bool,
    ) -> RoleEditor {
        let catalog = compiled.catalog();
        let tools = catalog
            .role_tools(&role)
            .into_iter()
            .filter_map(|name| catalog.tool(&name))
            .map(|t| ToolChoice {
                name: t.spec.name.clone(),
                args: arg_choices(&t.spec),
            })
            .collect();
        RoleEditor {
            slug: role.slug.as_str().to_owned(),
            revision,
            instructions_html: markdown_html(&role.instructions),
            limits: limit_views(&role.limits),
            skills: role.skills.iter().map(|s| s.as_str().to_owned()).collect(),
            all_skills: skill_choices(compiled),
            title: role.title,
            description: role.description,
            instructions: role.instructions,
            tools,
            can_edit,
        }
    }
}
