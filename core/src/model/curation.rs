//! The built-in curation upstream as the catalog sees it: its name and its tools'
//! definitions. Every loaded catalog includes them; the server that answers them is
//! `revisions::curator`.

use serde_json::{Value, json};

use super::{CatalogTool, ToolSpec, Upstream, UpstreamKind};
use crate::slug::Slug;

/// The most rows one page of a curator's list holds (the store's page limit).
pub const MAX_PAGE: u32 = 200;

/// The name of the built-in upstream.
pub const CURATION_UPSTREAM: &str = "curation";

fn string(description: &str) -> Value {
    json!({"type": "string", "minLength": 1, "description": description})
}

fn sources() -> Value {
    json!({"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 100,
           "description": "IDs of existing feedback, sessions or wiki patterns of this skill"})
}

/// The curator tools' definitions.
pub fn curator_tool_specs() -> Vec<ToolSpec> {
    let spec = |name: &str, description: &str, properties: Value, required: &[&str]| ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        }),
        output_schema: None,
        annotations: None,
        sensitive_args: Vec::new(),
    };
    vec![
        spec(
            "list_skill_feedback",
            "List the feedback on a skill (ratings, comments, sessions, explicit requirements), oldest first, one page at a time: pass `next_after` of a page as `after` for the next.",
            json!({"skill": string("skill name"),
                   "since": {"type": "string", "description": "RFC 3339 time; only feedback at or after it"},
                   "after": {"type": "string", "minLength": 1, "description": "the `next_after` of the previous page"},
                   "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE,
                             "description": "feedback per page (default 50)"}}),
            &["skill"],
        ),
        spec(
            "get_skill",
            "Read a skill's instructions at a version (the current one when omitted), with its wiki patterns.",
            json!({"skill": string("skill name"),
                   "version": {"type": "integer", "minimum": 1}}),
            &["skill"],
        ),
        spec(
            "add_wiki_pattern",
            "Record a distilled, cited lesson about a skill. Every source must be an existing feedback, session or pattern ID of that skill.",
            json!({"skill": string("skill name"), "name": string("short pattern name"),
                   "content": string("the pattern, in markdown"), "sources": sources()}),
            &["skill", "name", "content", "sources"],
        ),
        spec(
            "propose_skill_revision",
            "Propose a new version of a skill for human review, with cited sources and evidence (numeric or paired, WikiSkill shapes). The server computes the gate verdict; nothing changes until a reviewer approves.",
            json!({"skill": string("skill name"),
                   "base_version": {"type": "integer", "minimum": 1},
                   "instructions": string("the full new instructions (markdown)"),
                   "note": string("why: the rationale for the change"),
                   "sources": sources(),
                   "evidence": {"type": ["object", "null"]},
                   "description": {"type": "string", "minLength": 1, "maxLength": 1024,
                                   "description": "a new description; the base version's is kept when omitted"}}),
            &["skill", "base_version", "instructions", "note", "sources"],
        ),
    ]
}

/// The built-in upstream and its tools, which every loaded catalog includes.
pub fn builtin_catalog_parts() -> (Upstream, Vec<CatalogTool>) {
    let name = Slug::parse(CURATION_UPSTREAM).expect("the curation upstream name is a slug");
    let tools = curator_tool_specs()
        .into_iter()
        .map(|spec| CatalogTool {
            upstream: name.clone(),
            spec,
            quarantine: None,
        })
        .collect();
    (
        Upstream {
            name,
            kind: UpstreamKind::Builtin,
        },
        tools,
    )
}
