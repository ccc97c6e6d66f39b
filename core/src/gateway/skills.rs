//! The MCP Skills extension (SEP-2640) as the gateway serves it: each skill of each role a
//! key's scope allows is an Agent Skills folder at `skill://<role>/<skill>/`, with its
//! `SKILL.md` and `references/<resource>.md`.
//!
//! Reading a skill is governed like `learn`: a key sees and reads only what its scope
//! allows, every read is audited with the version served, and every refusal is audited as
//! a denied learn. Reading is **not** learning: the extension has no governance session,
//! so a read unlocks nothing. The `SKILL.md` the gateway serves tells the model how to
//! unlock the role's tools (`init_skilder`, `learn /roles/<role>`, `call_tool`), so the
//! router stays the boundary and the limits a role's learn states are always read first.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::{AgentIdentity, Gateway, GatewayError, bounds};
use crate::audit::{EventKind, NewEvent};
use crate::model::{Role, SkillVersion};
use crate::policy::{CompiledCatalog, DenyCode};
use crate::revisions::skill_md::MAX_DESCRIPTION;
use crate::slug::Slug;

/// The URI scheme of the extension.
pub const SKILL_URI_SCHEME: &str = "skill://";
/// The manifest file every skill folder holds.
pub const SKILL_MD: &str = "SKILL.md";
/// The folder of a skill's reference documents.
pub const REFERENCES_DIR: &str = "references";

/// One file of a served skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFile {
    /// `skill://<role>/<skill>/<path>`.
    pub uri: String,
    /// Relative to the skill's folder: `SKILL.md` or `references/<resource>.md`.
    pub path: String,
    pub text: String,
}

impl SkillFile {
    /// `sha256:<hex>` of the file's bytes, as the extension's manifest carries it.
    pub fn digest(&self) -> String {
        format!(
            "sha256:{}",
            hex::encode(Sha256::digest(self.text.as_bytes()))
        )
    }

    pub fn size(&self) -> u64 {
        self.text.len() as u64
    }
}

/// One skill of one role, as a key of a scope that allows the role sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedSkill {
    /// The role whose folder holds the skill: the first of `roles`.
    pub role: Slug,
    /// Every role of the scope that carries the skill; learning any of them unlocks its tools.
    pub roles: Vec<Slug>,
    pub skill: Slug,
    pub version: u32,
    /// The `SKILL.md` frontmatter, exactly as the served file carries it.
    pub frontmatter: Map<String, Value>,
    /// `SKILL.md` first, then the references by name.
    pub files: Vec<SkillFile>,
}

impl ServedSkill {
    /// The skill's URI: that of its `SKILL.md`.
    pub fn uri(&self) -> &str {
        &self.files[0].uri
    }

    /// `skill://<role>/<skill>`, the folder (without a trailing slash).
    pub fn folder(&self) -> String {
        folder_uri(&self.role, &self.skill)
    }

    pub fn name(&self) -> &str {
        self.skill.as_str()
    }

    pub fn description(&self) -> &str {
        self.frontmatter
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    pub fn file(&self, uri: &str) -> Option<&SkillFile> {
        self.files.iter().find(|file| file.uri == uri)
    }
}

fn folder_uri(role: &Slug, skill: &Slug) -> String {
    format!("{SKILL_URI_SCHEME}{role}/{skill}")
}

/// Every skill of every role `scope` allows, ordered by URI. A skill that several of the
/// scope's roles share is served once, under the first of them in the scope's order, and
/// names every one: hosts load each skill's description into the model's context, and one
/// entry per skill keeps names unique in the listing, as the extension recommends. Pure:
/// the same catalog and scope always give the same files and digests.
pub fn skills_in_scope(catalog: &CompiledCatalog, scope: &str) -> Vec<ServedSkill> {
    let mut served: Vec<ServedSkill> = holders(catalog, scope)
        .into_iter()
        .map(|(version, holding)| serve(catalog, &holding, version))
        .collect();
    served.sort_by(|a, b| a.uri().cmp(b.uri()));
    served
}

/// The one skill of [`skills_in_scope`] whose folder holds `uri`
/// (`skill://<role>/<skill>[/…]`), rendered alone: a read or a get needs no other.
pub fn skill_in_scope(catalog: &CompiledCatalog, scope: &str, uri: &str) -> Option<ServedSkill> {
    let mut path = uri.strip_prefix(SKILL_URI_SCHEME)?.splitn(3, '/');
    let (role, skill) = (path.next()?, path.next()?);
    holders(catalog, scope)
        .into_iter()
        .find(|(version, holding)| {
            holding[0].slug.as_str() == role && version.skill.slug.as_str() == skill
        })
        .map(|(version, holding)| serve(catalog, &holding, version))
}

/// Each skill of the scope's roles with the roles that carry it, in the scope's order;
/// nothing rendered yet.
fn holders<'c>(
    catalog: &'c CompiledCatalog,
    scope: &str,
) -> Vec<(&'c SkillVersion, Vec<&'c Role>)> {
    let mut holders: Vec<(&SkillVersion, Vec<&Role>)> = Vec::new();
    for role in catalog.roles_in_scope(scope) {
        for slug in &role.skills {
            let Some(version) = catalog.catalog().skill(slug.as_str()) else {
                continue;
            };
            match holders
                .iter_mut()
                .find(|(held, _)| held.skill.slug == version.skill.slug)
            {
                Some((_, holding)) => holding.push(role),
                None => holders.push((version, vec![role])),
            }
        }
    }
    holders
}

/// `roles` is never empty: the roles of the scope that carry the skill, the first giving
/// the skill its URI.
fn serve(catalog: &CompiledCatalog, roles: &[&Role], version: &SkillVersion) -> ServedSkill {
    let skill = &version.skill;
    let role = roles[0];
    let folder = folder_uri(&role.slug, &skill.slug);
    let frontmatter = frontmatter(roles, version);
    let mut files = vec![SkillFile {
        uri: format!("{folder}/{SKILL_MD}"),
        path: SKILL_MD.to_owned(),
        text: skill_md(catalog, roles, version, &frontmatter),
    }];
    let mut references: Vec<SkillFile> = skill
        .resources
        .iter()
        .map(|resource| {
            let path = format!("{REFERENCES_DIR}/{}.md", resource.name);
            SkillFile {
                uri: format!("{folder}/{path}"),
                path,
                text: reference_text(&resource.title, &resource.content),
            }
        })
        .collect();
    references.sort_by(|a, b| a.path.cmp(&b.path));
    files.extend(references);
    ServedSkill {
        role: role.slug.clone(),
        roles: roles.iter().map(|r| r.slug.clone()).collect(),
        skill: skill.slug.clone(),
        version: version.version,
        frontmatter,
        files,
    }
}

/// A reference document as markdown under its title, unless it opens with a heading of its
/// own (the demo's policies do).
fn reference_text(title: &str, content: &str) -> String {
    let content = content.trim();
    if content.starts_with("# ") {
        format!("{content}\n")
    } else {
        format!("# {title}\n\n{content}\n")
    }
}

/// `name` and `description` per the Agent Skills rules (the name is the skill's slug, which
/// obeys them; a description is 1–1024 characters), the author's other fields as the
/// uploaded `SKILL.md` had them (`license`, `allowed-tools`, …), and `metadata`: the
/// author's entries plus where the skill comes from. Metadata values are strings, as Agent
/// Skills requires; an author's `metadata` that is not a mapping is not served.
fn frontmatter(roles: &[&Role], version: &SkillVersion) -> Map<String, Value> {
    let skill = &version.skill;
    let role = roles[0];
    let mut description = skill.description.trim().to_owned();
    if description.is_empty() {
        description = format!("Skill {} of role {}.", skill.slug, role.slug);
    }
    if description.chars().count() > MAX_DESCRIPTION {
        description = description.chars().take(MAX_DESCRIPTION - 1).collect();
        description.push('…');
    }
    let mut front = Map::new();
    front.insert("name".into(), json!(skill.slug));
    front.insert("description".into(), json!(description));
    for (key, value) in &skill.frontmatter_extra {
        if !matches!(key.as_str(), "name" | "description" | "metadata") {
            front.insert(key.clone(), value.clone());
        }
    }
    let mut metadata = match skill.frontmatter_extra.get("metadata") {
        Some(Value::Object(authored)) => authored.clone(),
        _ => Map::new(),
    };
    let holders: Vec<&str> = roles.iter().map(|r| r.slug.as_str()).collect();
    metadata.insert("skillgate-roles".into(), json!(holders.join(" ")));
    metadata.insert(
        "skillgate-version".into(),
        json!(version.version.to_string()),
    );
    front.insert("metadata".into(), Value::Object(metadata));
    front
}

fn skill_md(
    catalog: &CompiledCatalog,
    roles: &[&Role],
    version: &SkillVersion,
    frontmatter: &Map<String, Value>,
) -> String {
    let skill = &version.skill;
    // serde_norway renders a YAML mapping; a frontmatter map always renders.
    let yaml = serde_norway::to_string(frontmatter).unwrap_or_default();
    let mut text = format!("---\n{yaml}---\n\n{}\n", skill.instructions.trim());
    let named: Vec<String> = roles
        .iter()
        .map(|role| format!("`{}` ({})", role.slug, role.title))
        .collect();
    let paths: Vec<String> = roles
        .iter()
        .map(|role| format!("`/roles/{}`", role.slug))
        .collect();
    let _ = write!(
        text,
        "\n## Using this skill through Skillgate\n\n\
         This skill belongs to {whose} {named}. Its tools run only through Skillgate's \
         platform tools, and reading this file unlocks none of them:\n\n\
         1. Call `init_skilder` to start a governance session.\n\
         2. Call `learn` with path {paths}: it unlocks the role's tools and states the \
         limits the gateway enforces on them.\n\
         3. Run the tools with `call_tool` (`tool`, `arguments`, `session_id`).\n",
        whose = if roles.len() == 1 {
            "the role"
        } else {
            "the roles"
        },
        named = named.join(", "),
        paths = paths.join(" or "),
    );
    let tools: Vec<&str> = skill
        .tools
        .iter()
        .filter(|name| catalog.tool(name).is_some())
        .map(String::as_str)
        .collect();
    if !tools.is_empty() {
        let _ = write!(text, "\nTools of this skill: {}.\n", tools.join(", "));
    }
    if !skill.resources.is_empty() {
        text.push_str("\nReferences:\n");
        for resource in &skill.resources {
            let _ = writeln!(
                text,
                "- [{}]({REFERENCES_DIR}/{}.md)",
                resource.title, resource.name
            );
        }
    }
    text
}

/// Which method of the extension read or refused a skill, for the audit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillMethod {
    Get,
    Read,
    DirectoryRead,
}

impl SkillMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "skills/get",
            Self::Read => "resources/read",
            Self::DirectoryRead => "resources/directory/read",
        }
    }
}

impl Gateway {
    /// The skills the agent's scope allows (for `skills/list`, `resources/list` and the
    /// directories). Listing is not audited, as `init_skilder`'s role list is not: it says
    /// no more than the scope's catalog.
    pub fn skills_for(&self, agent: &AgentIdentity) -> Vec<ServedSkill> {
        skills_in_scope(&self.catalog.load(), agent.scope.as_str())
    }

    /// The skill of the agent's scope whose folder holds `uri` (see [`skill_in_scope`]).
    pub fn skill_for(&self, agent: &AgentIdentity, uri: &str) -> Option<ServedSkill> {
        skill_in_scope(&self.catalog.load(), agent.scope.as_str(), uri)
    }

    /// `resources/read` of a skill file: the skill and the file when the agent's scope
    /// allows them, audited (`skill_read`, with the version served) before the agent gets
    /// the text; `None` (audited as a denied learn) for anything else, out of scope and
    /// unknown alike, so a refusal never says whether another scope has it.
    #[tracing::instrument(skip_all, fields(key = %agent.key_name))]
    pub async fn read_skill_file(
        &self,
        agent: &AgentIdentity,
        uri: &str,
    ) -> Result<Option<(ServedSkill, SkillFile)>, GatewayError> {
        let found = self.skill_for(agent, uri).and_then(|served| {
            let file = served.file(uri)?.clone();
            Some((served, file))
        });
        let Some((served, file)) = found else {
            self.refuse_skill(agent, uri, SkillMethod::Read).await?;
            return Ok(None);
        };
        let event = NewEvent::new(
            EventKind::SkillRead,
            json!({
                "uri": file.uri,
                "role": served.role,
                "roles": served.roles,
                "skill": served.skill,
                "version": served.version,
                "file": file.path,
                "sha256": file.digest(),
            }),
        )
        .by(&agent.key_name);
        self.audit.append(event).await?;
        Ok(Some((served, file)))
    }

    /// Audits a refused extension request as a denied learn of `uri` (`ACCESS_DENIED`:
    /// out of scope and unknown alike), see [`Self::refuse_skill_request`].
    pub async fn refuse_skill(
        &self,
        agent: &AgentIdentity,
        uri: &str,
        method: SkillMethod,
    ) -> Result<(), GatewayError> {
        self.refuse_skill_request(agent, uri, method, DenyCode::AccessDenied, None)
            .await
    }

    /// Audits a refused extension request as a denied learn of `uri` naming `code`, the
    /// method and, when given, why (`rule`: what the agent was told, e.g. the MCP
    /// library's own refusal of a malformed request). The extension names no governance
    /// session, so the event goes where a `call_tool` without `session_id` would: the
    /// newest session of the caller's connection and key; without one it stays with the
    /// caller alone (actor, URI, method and code: who tried what).
    #[tracing::instrument(skip_all, fields(key = %agent.key_name, method = method.as_str()))]
    pub async fn refuse_skill_request(
        &self,
        agent: &AgentIdentity,
        uri: &str,
        method: SkillMethod,
        code: DenyCode,
        rule: Option<&str>,
    ) -> Result<(), GatewayError> {
        self.metrics
            .count_decision(crate::metrics::Outcome::Denied(code));
        let mut event =
            NewEvent::learn_denied(&agent.key_name, &bounds::audited_path(uri), code.as_str());
        if let Value::Object(payload) = &mut event.payload {
            payload.insert("via".into(), json!(method.as_str()));
            if let Some(rule) = rule {
                payload.insert("rule".into(), json!(bounds::audited_rule(rule)));
            }
        }
        let session = self
            .store
            .newest_session_id(agent.key_id, agent.connection.as_deref())
            .await?;
        if let Some(session) = session {
            event = event.in_session(session);
        }
        self.audit.append(event).await?;
        Ok(())
    }
}

/// The directories of the served skills: each folder and its `references/`, with their
/// direct children (`(name, uri, Some(file))` for a file, `None` for a directory), by name.
pub fn directories(skills: &[ServedSkill]) -> BTreeMap<String, Vec<DirectoryEntry>> {
    let mut dirs: BTreeMap<String, Vec<DirectoryEntry>> = BTreeMap::new();
    for served in skills {
        let folder = served.folder();
        let mut top = Vec::new();
        let mut references = Vec::new();
        for file in &served.files {
            match file.path.split_once('/') {
                Some((_, name)) => references.push(DirectoryEntry::file(name, file)),
                None => top.push(DirectoryEntry::file(&file.path, file)),
            }
        }
        if !references.is_empty() {
            let uri = format!("{folder}/{REFERENCES_DIR}");
            top.push(DirectoryEntry {
                name: REFERENCES_DIR.to_owned(),
                uri: uri.clone(),
                size: None,
            });
            dirs.insert(uri, references);
        }
        top.sort_by(|a, b| a.name.cmp(&b.name));
        dirs.insert(folder, top);
    }
    dirs
}

/// A child of a skill directory: a file (with its size) or a directory (`size: None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryEntry {
    pub name: String,
    pub uri: String,
    pub size: Option<u64>,
}

impl DirectoryEntry {
    fn file(name: &str, file: &SkillFile) -> Self {
        Self {
            name: name.to_owned(),
            uri: file.uri.clone(),
            size: Some(file.size()),
        }
    }

    pub fn is_directory(&self) -> bool {
        self.size.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::catalog::demo_catalog as demo_draft;
    use crate::model::Catalog;
    use crate::revisions::skill_md::SkillMd;

    fn draft_catalog() -> Catalog {
        demo_draft().into_catalog(Vec::new())
    }

    fn demo_catalog() -> CompiledCatalog {
        CompiledCatalog::compile(draft_catalog())
    }

    /// The YAML between a served file's `---` lines, as a host would parse it.
    fn file_frontmatter(text: &str) -> Map<String, Value> {
        let yaml = text
            .strip_prefix("---\n")
            .and_then(|rest| rest.split_once("\n---\n"))
            .map(|(yaml, _)| yaml)
            .unwrap();
        serde_norway::from_str(yaml).unwrap()
    }

    #[test]
    fn a_scope_serves_the_skills_of_its_roles_and_no_others() {
        let catalog = demo_catalog();
        let support = skills_in_scope(&catalog, "support");
        let roles: std::collections::BTreeSet<&str> =
            support.iter().map(|s| s.role.as_str()).collect();
        assert_eq!(
            roles.into_iter().collect::<Vec<_>>(),
            ["retention-desk", "security-fraud", "tier-1-support"]
        );
        assert!(support.iter().all(|s| !s.uri().contains("system-admin")));
        assert!(
            support
                .iter()
                .any(|s| s.uri() == "skill://tier-1-support/refund-handling/SKILL.md")
        );
        assert!(skills_in_scope(&catalog, "no-such-scope").is_empty());
        let uris: Vec<&str> = support.iter().map(ServedSkill::uri).collect();
        let mut sorted = uris.clone();
        sorted.sort_unstable();
        assert_eq!(uris, sorted);
    }

    #[test]
    fn the_served_skill_md_has_the_entrys_frontmatter_and_says_how_to_unlock_the_role() {
        let catalog = demo_catalog();
        let served = skills_in_scope(&catalog, "support");
        let refund = served
            .iter()
            .find(|s| s.uri() == "skill://tier-1-support/refund-handling/SKILL.md")
            .unwrap();
        let text = &refund.files[0].text;
        // The file parses as an Agent Skills SKILL.md of this skill.
        let parsed = SkillMd::parse(text, "refund-handling").unwrap();
        assert_eq!(parsed.description, refund.description());
        // Its YAML frontmatter is the entry's, value for value.
        let front = file_frontmatter(text);
        assert_eq!(front, refund.frontmatter);
        assert_eq!(front["metadata"]["skillgate-roles"], "tier-1-support");
        assert!(text.contains("`learn` with path `/roles/tier-1-support`"));
        assert!(text.contains("unlocks none of them"));
    }

    #[test]
    fn one_skill_looked_up_by_uri_is_the_listed_one_and_nothing_else_resolves() {
        let catalog = demo_catalog();
        for served in skills_in_scope(&catalog, "support") {
            for file in &served.files {
                assert_eq!(
                    skill_in_scope(&catalog, "support", &file.uri).as_ref(),
                    Some(&served)
                );
            }
            assert_eq!(
                skill_in_scope(&catalog, "support", &served.folder()).as_ref(),
                Some(&served)
            );
        }
        for uri in [
            "skill://system-admin/account-administration/SKILL.md",
            // customer-lookup is served under tier-1-support, its first role in support.
            "skill://retention-desk/customer-lookup/SKILL.md",
            "skill://tier-1-support",
            "file://tier-1-support/refund-handling/SKILL.md",
            "",
        ] {
            assert_eq!(skill_in_scope(&catalog, "support", uri), None, "{uri}");
        }
    }

    #[test]
    fn a_skill_two_roles_share_is_served_once_and_names_both() {
        let catalog = demo_catalog();
        let served = skills_in_scope(&catalog, "support");
        let lookups: Vec<&ServedSkill> = served
            .iter()
            .filter(|s| s.name() == "customer-lookup")
            .collect();
        assert_eq!(lookups.len(), 1);
        let lookup = lookups[0];
        // support's roles: tier-1-support, then retention-desk; both carry customer-lookup.
        assert_eq!(
            lookup.uri(),
            "skill://tier-1-support/customer-lookup/SKILL.md"
        );
        let roles: Vec<&str> = lookup.roles.iter().map(Slug::as_str).collect();
        assert_eq!(roles, ["tier-1-support", "retention-desk"]);
        let text = &lookup.files[0].text;
        assert!(text.contains("`/roles/tier-1-support` or `/roles/retention-desk`"));
        let names: std::collections::BTreeSet<&str> = served.iter().map(|s| s.name()).collect();
        assert_eq!(names.len(), served.len());
    }

    #[test]
    fn references_are_files_under_references_with_digest_and_size() {
        let catalog = demo_catalog();
        let served = skills_in_scope(&catalog, "support");
        let refund = served
            .iter()
            .find(|s| s.uri() == "skill://tier-1-support/refund-handling/SKILL.md")
            .unwrap();
        let reference = refund
            .file("skill://tier-1-support/refund-handling/references/refund-policy.md")
            .expect("the demo's refund policy is a reference");
        assert!(reference.text.starts_with("# "));
        assert_eq!(reference.size(), reference.text.len() as u64);
        let digest = reference.digest();
        assert_eq!(digest.len(), "sha256:".len() + 64);
        assert!(
            refund.files[0]
                .text
                .contains("(references/refund-policy.md)")
        );
        let dirs = directories(&served);
        let folder = &dirs["skill://tier-1-support/refund-handling"];
        assert_eq!(
            folder
                .iter()
                .map(|e| (e.name.as_str(), e.is_directory()))
                .collect::<Vec<_>>(),
            [("SKILL.md", false), ("references", true)]
        );
        assert_eq!(
            dirs["skill://tier-1-support/refund-handling/references"][0].name,
            "refund-policy.md"
        );
    }

    #[test]
    fn an_uploaded_skills_own_frontmatter_is_served_beside_the_gateways_metadata() {
        let mut catalog = draft_catalog();
        let refund = catalog
            .skills
            .iter_mut()
            .find(|s| s.skill.slug.as_str() == "refund-handling")
            .unwrap();
        refund.skill.frontmatter_extra = serde_json::from_value(json!({
            "license": "Apache-2.0",
            "allowed-tools": "process_refund",
            "metadata": {"author": "payments-team"},
        }))
        .unwrap();
        let compiled = CompiledCatalog::compile(catalog);
        let served = skills_in_scope(&compiled, "support");
        let refund = served
            .iter()
            .find(|s| s.name() == "refund-handling")
            .unwrap();
        assert_eq!(refund.frontmatter["license"], "Apache-2.0");
        assert_eq!(refund.frontmatter["allowed-tools"], "process_refund");
        assert_eq!(refund.frontmatter["metadata"]["author"], "payments-team");
        assert_eq!(
            refund.frontmatter["metadata"]["skillgate-roles"],
            "tier-1-support"
        );
        assert_eq!(file_frontmatter(&refund.files[0].text), refund.frontmatter);
    }

    #[test]
    fn an_overlong_or_empty_description_still_meets_the_agent_skills_rule() {
        let mut catalog = draft_catalog();
        catalog.skills[0].skill.description = "d".repeat(5000);
        catalog.skills[1].skill.description = "  ".into();
        let first = catalog.skills[0].skill.slug.clone();
        let second = catalog.skills[1].skill.slug.clone();
        let compiled = CompiledCatalog::compile(catalog);
        let all: Vec<ServedSkill> = ["support", "billing", "ops", "curation"]
            .iter()
            .flat_map(|scope| skills_in_scope(&compiled, scope))
            .collect();
        for served in all.iter().filter(|s| s.skill == first || s.skill == second) {
            let n = served.description().chars().count();
            assert!((1..=MAX_DESCRIPTION).contains(&n), "{n}");
            SkillMd::parse(&served.files[0].text, served.name()).unwrap();
        }
    }
}
