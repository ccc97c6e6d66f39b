//! Read-only server functions of the skills pages: the list and one skill.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::catalog::api::Paged;
#[cfg(feature = "ssr")]
use crate::catalog::api::ssr;
use crate::shared::ConsoleError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceRef {
    pub name: String,
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillRow {
    pub slug: String,
    pub version: u32,
    pub description: String,
    pub tools: Vec<String>,
    pub resources: Vec<ResourceRef>,
    pub roles: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceDoc {
    pub name: String,
    pub title: String,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillDetail {
    pub slug: String,
    pub version: u32,
    pub description: String,
    pub instructions: String,
    pub tools: Vec<String>,
    pub resources: Vec<ResourceDoc>,
    pub roles: Vec<String>,
}

#[server(prefix = "/console/api")]
pub async fn list_skills(page: usize) -> Result<Paged<SkillRow>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let compiled = crate::shared::ssr::context().catalog.load();
    let catalog = compiled.catalog();
    let roles = ssr::roles_by_skill(catalog);
    Ok(ssr::page_of(&catalog.skills, page, |s| SkillRow {
        slug: s.skill.slug.as_str().to_owned(),
        version: s.version,
        description: s.skill.description.clone(),
        tools: s.skill.tools.clone(),
        resources: s
            .skill
            .resources
            .iter()
            .map(|r| ResourceRef {
                name: r.name.as_str().to_owned(),
                title: r.title.clone(),
            })
            .collect(),
        roles: ssr::lookup(&roles, s.skill.slug.as_str()),
    }))
}

#[server(prefix = "/console/api")]
pub async fn get_skill(slug: String) -> Result<Option<SkillDetail>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let compiled = crate::shared::ssr::context().catalog.load();
    let catalog = compiled.catalog();
    let Some(s) = catalog.skill(&slug) else {
        return Ok(None);
    };
    Ok(Some(SkillDetail {
        slug: s.skill.slug.as_str().to_owned(),
        version: s.version,
        description: s.skill.description.clone(),
        instructions: s.skill.instructions.clone(),
        tools: s.skill.tools.clone(),
        resources: s
            .skill
            .resources
            .iter()
            .map(|r| ResourceDoc {
                name: r.name.as_str().to_owned(),
                title: r.title.clone(),
                content: r.content.clone(),
            })
            .collect(),
        roles: ssr::lookup(&ssr::roles_by_skill(catalog), &slug),
    }))
}
