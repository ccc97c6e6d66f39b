//! What a proposal is: the fields a new version of a skill is proposed with, read from a
//! pasted `SKILL.md`, an uploaded bundle and its WikiSkill `provenance.json`.

use serde_json::{Map, Value, json};

use super::RevisionError;
use crate::model::Resource;
use crate::revisions::bundle::Bundle;
use crate::revisions::skill_md::SkillMd;

/// Who stands behind a proposal, which decides whether it must cite sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Authorship {
    /// Agents and reviewers: a proposal cites existing feedback, session or pattern IDs.
    #[default]
    Cited,
    /// A console admin, or the operator at the command line, writing the skill themself:
    /// sources are optional (any cited must still exist). Without evidence the gate says
    /// it cannot evaluate, and a reviewer other than the proposer decides as for any
    /// candidate.
    Admin,
}

/// What the gate says of an admin-authored candidate without evidence.
pub const ADMIN_WITHOUT_EVIDENCE: &str = "no evidence: an admin authored this candidate without evaluation \
     evidence, so the gate cannot evaluate it; the reviewer decides";

/// A proposed new version of a skill, as the curator tool, the HTTP API and the upload send it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Proposal {
    /// Whether sources are required; the caller decides from the proposer's role, never
    /// from what the proposal says.
    pub authorship: Authorship,
    pub skill: String,
    pub base_version: u32,
    /// `None` keeps the base version's description.
    pub description: Option<String>,
    pub instructions: String,
    pub note: String,
    pub sources: Vec<String>,
    pub evidence: Value,
    /// The new version's extra `SKILL.md` frontmatter; `None` keeps the base version's.
    pub frontmatter_extra: Option<Map<String, Value>>,
    /// The new version's resources (a zip's `references/`); `None` keeps the base's.
    pub resources: Option<Vec<Resource>>,
    /// The `SKILL.md` exactly as uploaded, exported byte for byte once approved.
    pub skill_md: Option<String>,
}

/// The fields of a WikiSkill `provenance.json` a proposal takes (all optional):
/// `base_version` (or `version`, as an exported folder names the version it holds),
/// `note`, `sources`, `evidence`. `file` names it in errors.
struct Provenance {
    base_version: Option<u32>,
    note: Option<String>,
    sources: Vec<String>,
    evidence: Value,
}

impl Provenance {
    fn parse(file: &str, text: Option<&str>) -> Result<Self, RevisionError> {
        let invalid = |what: &str| RevisionError::Invalid(format!("{file}: {what}"));
        let value: Value = match text.map(str::trim).filter(|p| !p.is_empty()) {
            Some(text) => {
                serde_json::from_str(text).map_err(|e| invalid(&format!("is not JSON: {e}")))?
            }
            None => json!({}),
        };
        if !value.is_object() {
            return Err(invalid("must be a JSON object"));
        }
        let base_version = match value.get("base_version").or_else(|| value.get("version")) {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(|| invalid("base_version must be a version number"))?,
            ),
        };
        let sources = match value.get("sources") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|s| s.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| invalid("sources must be a list of IDs"))?,
            Some(_) => return Err(invalid("sources must be a list of IDs")),
        };
        let note = match value.get("note") {
            None | Some(Value::Null) => None,
            Some(Value::String(note)) => Some(note.clone()),
            Some(_) => return Err(invalid("note must be text")),
        };
        Ok(Self {
            base_version,
            note,
            sources,
            evidence: value.get("evidence").cloned().unwrap_or(Value::Null),
        })
    }
}

impl Proposal {
    /// A proposal from a pasted `SKILL.md` and optional WikiSkill `provenance.json`
    /// (`base_version`, `note`, `sources`, `evidence`; all optional).
    pub fn from_upload(
        skill: &str,
        current_version: u32,
        skill_md: &str,
        provenance: Option<&str>,
    ) -> Result<Self, RevisionError> {
        let md = SkillMd::parse(skill_md, skill)?;
        let provenance = Provenance::parse("provenance.json", provenance)?;
        Ok(Self {
            skill: skill.to_owned(),
            base_version: provenance.base_version.unwrap_or(current_version),
            description: Some(md.description),
            instructions: md.instructions,
            note: provenance
                .note
                .unwrap_or_else(|| "Uploaded as SKILL.md.".to_owned()),
            sources: provenance.sources,
            evidence: provenance.evidence,
            frontmatter_extra: Some(md.extra),
            resources: None,
            skill_md: Some(skill_md.to_owned()),
            authorship: Authorship::Cited,
        })
    }

    /// A proposal from an uploaded bundle (a `SKILL.md` or a zip of the skill's folder)
    /// for skill `skill`. A zip's references replace the skill's resources; a plain
    /// `SKILL.md` keeps them.
    pub fn from_bundle(
        skill: &str,
        current_version: u32,
        bundle: Bundle,
    ) -> Result<Self, RevisionError> {
        bundle.check_skill(skill)?;
        let (file, text) = match &bundle.provenance {
            Some((file, text)) => (file.as_str(), Some(text.as_str())),
            None => ("provenance.json", None),
        };
        let provenance = Provenance::parse(file, text)?;
        let default_note = if bundle.resources.is_some() {
            format!(
                "Uploaded as an Agent Skills bundle ({}).",
                bundle.skill_md_path
            )
        } else {
            format!("Uploaded as {}.", bundle.skill_md_path)
        };
        Ok(Self {
            skill: skill.to_owned(),
            base_version: provenance.base_version.unwrap_or(current_version),
            description: Some(bundle.skill_md.description),
            instructions: bundle.skill_md.instructions,
            note: provenance.note.unwrap_or(default_note),
            sources: provenance.sources,
            evidence: provenance.evidence,
            frontmatter_extra: Some(bundle.skill_md.extra),
            resources: bundle.resources,
            skill_md: Some(bundle.skill_md_text),
            authorship: Authorship::Cited,
        })
    }
}
