//! Read-only server functions of the roles pages: the list and one role.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::catalog::api::Paged;
#[cfg(feature = "ssr")]
use crate::catalog::api::ssr;
use crate::shared::ConsoleError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleRow {
    pub slug: String,
    pub title: String,
    pub description: String,
    pub skill_count: usize,
    pub limit_count: usize,
    /// The scopes that include the role, in catalog order.
    pub scopes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillRef {
    pub slug: String,
    /// `None` when the role names a skill the catalog no longer has.
    pub version: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleDetail {
    pub slug: String,
    pub title: String,
    pub description: String,
    pub instructions: String,
    pub skills: Vec<SkillRef>,
    /// One readable sentence per limit: what an agent reads when it learns the role.
    pub limits: Vec<String>,
    /// The compact notation of each limit, in the same order as `limits`.
    pub limit_rules: Vec<String>,
    pub tools: Vec<String>,
    pub scopes: Vec<String>,
}

#[server(prefix = "/console/api")]
pub async fn list_roles(page: usize) -> Result<Paged<RoleRow>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let compiled = crate::shared::ssr::context().catalog.load();
    let catalog = compiled.catalog();
    let scopes = ssr::scopes_by_role(catalog);
    Ok(ssr::page_of(&catalog.roles, page, |role| RoleRow {
        slug: role.slug.as_str().to_owned(),
        title: role.title.clone(),
        description: role.description.clone(),
        skill_count: role.skills.len(),
        limit_count: role.limits.len(),
        scopes: ssr::lookup(&scopes, role.slug.as_str()),
    }))
}

#[server(prefix = "/console/api")]
pub async fn get_role(slug: String) -> Result<Option<RoleDetail>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let compiled = crate::shared::ssr::context().catalog.load();
    let Some(role) = compiled.role(&slug) else {
        return Ok(None);
    };
    let catalog = compiled.catalog();
    Ok(Some(RoleDetail {
        slug: role.slug.as_str().to_owned(),
        title: role.title.clone(),
        description: role.description.clone(),
        instructions: role.instructions.clone(),
        skills: role
            .skills
            .iter()
            .map(|s| SkillRef {
                slug: s.as_str().to_owned(),
                version: catalog.skill(s.as_str()).map(|v| v.version),
            })
            .collect(),
        limits: role.limit_sentences(),
        limit_rules: role.limits.iter().map(ToString::to_string).collect(),
        tools: compiled
            .role_tools(&slug)
            .map(|tools| tools.iter().cloned().collect())
            .unwrap_or_default(),
        scopes: ssr::lookup(&ssr::scopes_by_role(catalog), &slug),
    }))
}
