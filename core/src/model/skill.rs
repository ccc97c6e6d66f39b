//! Skills: instructions, the tools they use and the documents they carry.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::slug::Slug;

/// A named markdown document attached to a skill, learned at `/<skill>/<resource>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resource {
    pub name: Slug,
    pub title: String,
    pub content: String,
}

/// The content of one skill version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skill {
    pub slug: Slug,
    pub description: String,
    /// Markdown a model can follow.
    pub instructions: String,
    /// Names of the tools this skill uses; a role grants the tools of its skills.
    pub tools: Vec<String>,
    #[serde(default)]
    pub resources: Vec<Resource>,
    /// `SKILL.md` frontmatter fields besides `name` and `description` (`license`,
    /// `compatibility`, `metadata`, `allowed-tools`, …), as the uploaded file had them.
    /// Empty for skills that never came from a `SKILL.md`.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub frontmatter_extra: Map<String, Value>,
}

impl Skill {
    pub fn resource(&self, name: &str) -> Option<&Resource> {
        self.resources.iter().find(|r| r.name.as_str() == name)
    }
}

/// A numbered version of a skill (the current one, when it comes from a loaded catalog).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillVersion {
    pub version: u32,
    #[serde(flatten)]
    pub skill: Skill,
}
