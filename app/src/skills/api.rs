//! Server functions that read and change one skill: its editor, one version, save and
//! restore.

use std::collections::BTreeMap;

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::catalog::*;
use crate::shared::ConsoleError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionRow {
    pub version: u32,
    pub description: String,
    pub tools: Vec<String>,
    pub resources: Vec<String>,
    pub instructions_chars: usize,
    pub current: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillEditor {
    pub slug: String,
    pub revision: i64,
    pub version: u32,
    pub description: String,
    pub instructions: String,
    pub instructions_html: String,
    pub tools: Vec<String>,
    pub all_tools: Vec<Choice>,
    pub resources: Vec<ResourceEdit>,
    pub versions: Vec<VersionRow>,
    pub can_edit: bool,
}

/// One version of a skill, read-only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillVersionView {
    pub slug: String,
    pub version: u32,
    pub description: String,
    pub instructions_html: String,
    pub tools: Vec<String>,
    pub resources: Vec<ResourceEdit>,
}

#[server(prefix = "/console/api", endpoint = "skill_editor")]
pub async fn get_skill_editor(slug: String) -> Result<Option<SkillEditor>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let ctx = crate::shared::ssr::context();
    let skills = ctx
        .authoring
        .skills()
        .await
        .map_err(crate::shared::ssr::internal)?;
    let Some(stored) = skills
        .into_iter()
        .find(|s| s.value.skill.slug.as_str() == slug)
    else {
        return Ok(None);
    };
    let versions = ctx
        .authoring
        .skill_versions(&stored.value.skill.slug)
        .await
        .map_err(crate::shared::ssr::internal)?;
    Ok(Some(ssr::skill_editor(
        &ctx.authoring.live(),
        stored.value,
        stored.revision,
        versions,
        user.role.allows(ConsoleRole::Admin),
    )))
}

#[server(prefix = "/console/api", endpoint = "skill_version")]
pub async fn skill_version(
    slug: String,
    version: u32,
) -> Result<Option<SkillVersionView>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let Ok(parsed) = skillgate_core::slug::Slug::parse(&slug) else {
        return Ok(None);
    };
    let versions = crate::shared::ssr::context()
        .authoring
        .skill_versions(&parsed)
        .await
        .map_err(crate::shared::ssr::internal)?;
    Ok(versions
        .into_iter()
        .find(|v| v.version == version)
        .map(|v| SkillVersionView {
            slug,
            version: v.version,
            description: v.skill.description,
            instructions_html: ssr::markdown_html(&v.skill.instructions),
            tools: v.skill.tools,
            resources: ssr::resource_edits(&v.skill.resources),
        }))
}

/// Saves a new version of a skill. `resources` arrive as `resources[i][name|title|content]`
/// (plus `[remove]` when ticked); a ticked or nameless row is left out, and the blank row
/// the form always offers adds one when filled in.
#[server(prefix = "/console/api", endpoint = "save_skill")]
pub async fn save_skill(
    slug: String,
    revision: i64,
    description: String,
    instructions: String,
    tools: Checked,
    resources: Option<BTreeMap<usize, ResourceEdit>>,
) -> Result<u32, ConsoleError> {
    use skillgate_core::model::Skill;
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    let slug = ssr::slug_field("slug", &slug)?;
    let authoring = &crate::shared::ssr::context().authoring;
    // The form edits no frontmatter beyond the description: the current version's extra
    // fields (license, metadata, …) carry forward. Its uploaded SKILL.md text does not.
    let frontmatter_extra = authoring
        .skills()
        .await
        .map_err(ssr::authoring_error)?
        .into_iter()
        .find(|s| s.value.skill.slug == slug)
        .map(|s| s.value.skill.frontmatter_extra)
        .unwrap_or_default();
    let skill = Skill {
        slug,
        description: description.trim().to_owned(),
        instructions,
        tools: tools.unwrap_or_default().into_keys().collect(),
        resources: ssr::parse_resources(resources)?,
        frontmatter_extra,
    };
    let saved = authoring
        .update_skill(&user.name, &skill, revision)
        .await
        .map_err(ssr::authoring_error)?;
    Ok(saved.value.version)
}

#[server(prefix = "/console/api", endpoint = "restore_skill")]
pub async fn restore_skill(slug: String, revision: i64, version: u32) -> Result<i64, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    let slug = ssr::slug_field("slug", &slug)?;
    crate::shared::ssr::context()
        .authoring
        .restore_skill_version(&user.name, &slug, version, revision)
        .await
        .map_err(ssr::authoring_error)
}

#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    #[allow(unused_imports)]
    pub(crate) use crate::catalog::authoring::*;
    use skillgate_core::model::SkillVersion;
    use skillgate_core::policy::CompiledCatalog;

    use super::{SkillEditor, VersionRow};
    use crate::catalog::*;

    pub fn skill_editor(
        compiled: &CompiledCatalog,
        current: SkillVersion,
        revision: i64,
        versions: Vec<SkillVersion>,
        can_edit: bool,
    ) -> SkillEditor {
        let skill = current.skill;
        SkillEditor {
            slug: skill.slug.as_str().to_owned(),
            revision,
            version: current.version,
            instructions_html: markdown_html(&skill.instructions),
            all_tools: compiled
                .catalog()
                .tools
                .iter()
                .map(|t| Choice {
                    name: t.spec.name.clone(),
                    note: t.upstream.as_str().to_owned(),
                })
                .collect(),
            resources: resource_edits(&skill.resources),
            versions: versions
                .into_iter()
                .rev()
                .map(|v| VersionRow {
                    version: v.version,
                    current: v.version == current.version,
                    instructions_chars: v.skill.instructions.chars().count(),
                    description: v.skill.description,
                    tools: v.skill.tools,
                    resources: v
                        .skill
                        .resources
                        .iter()
                        .map(|r| r.name.as_str().to_owned())
                        .collect(),
                })
                .collect(),
            description: skill.description,
            instructions: skill.instructions,
            tools: skill.tools,
            can_edit,
        }
    }
}
