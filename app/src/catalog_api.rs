//! Read-only server functions over the live catalog snapshot, and their wire types.
//!
//! Every function reads one in-memory `CompiledCatalog` snapshot (plus the agent-key list
//! for the scopes page) and checks the caller's console role first: any console role may
//! read. An unknown slug is `Ok(None)`; the page turns that into a 404 while rendering on
//! the server, because a 4xx response to a server-function call must carry an error body.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::api::ConsoleError;

/// Rows per page of every catalog list.
pub const PAGE_SIZE: usize = 100;

/// One page of a list; `page` is 1-based and always within `1..=pages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Paged<T> {
    pub rows: Vec<T>,
    pub page: usize,
    pub pages: usize,
    pub total: usize,
}

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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRow {
    pub name: String,
    pub upstream: String,
    pub description: String,
    pub required: Vec<String>,
    pub sensitive: Vec<String>,
    pub skills: Vec<String>,
    pub roles: Vec<String>,
    /// Why the input schema does not compile, if it does not: such a tool denies every call.
    pub broken: Option<String>,
    /// Since when the tool's upstream no longer lists it (kept, flagged, still granted).
    pub missing_since: Option<String>,
    /// `new` (never admitted) or `changed` (its upstream offers another definition than
    /// the pinned one) while the tool is quarantined: every call is refused.
    pub quarantine: Option<String>,
}

/// One top-level argument of a tool, as its input schema declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArgumentRow {
    pub name: String,
    /// The declared JSON type(s), e.g. `string` or `number | null`; empty when undeclared.
    pub kind: String,
    pub description: String,
    pub required: bool,
    pub sensitive: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDetail {
    pub tool: ToolRow,
    pub arguments: Vec<ArgumentRow>,
    /// The input schema, pretty-printed JSON.
    pub schema: String,
    /// The pin and, while quarantined, the offer; `None` for a built-in tool.
    pub pin: Option<PinDetail>,
}

/// A stored tool's pin: the hash of the definition an admin admitted, and while the tool
/// is quarantined what its upstream offers instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PinDetail {
    /// Hex SHA-256 of the canonical pinned definition; `None`: never admitted.
    pub pin: Option<String>,
    /// `new` or `changed` while quarantined.
    pub quarantine: Option<String>,
    /// Why calls are refused, as a refused call says it.
    pub reason: Option<String>,
    pub since: Option<String>,
    /// Hex SHA-256 of the offered definition: what admitting re-pins (the form sends it back,
    /// so an offer that changes in the meantime is not admitted unseen).
    pub offered_pin: Option<String>,
    /// Pinned definition → offered definition, line by line (pretty JSON, keys sorted).
    pub diff: Vec<crate::revisions_api::DiffLine>,
    /// Whether the signed-in user may admit it (admins only).
    pub can_admit: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScopeRow {
    pub slug: String,
    pub description: String,
    pub roles: Vec<String>,
    /// Each guardrail as the sentence an agent reads.
    pub guardrails: Vec<String>,
}

/// An agent key as the console lists it: never the key itself, only its display prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyRow {
    pub name: String,
    pub scope: String,
    pub prefix: String,
    pub created_at: String,
    pub created_by: Option<String>,
    pub expires_at: Option<String>,
    pub revoked_at: Option<String>,
    pub last_used_at: Option<String>,
    /// `active`, `expired` or `revoked`.
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScopesOverview {
    pub scopes: Paged<ScopeRow>,
    pub keys: Paged<KeyRow>,
}

#[server(prefix = "/console/api")]
pub async fn list_roles(page: usize) -> Result<Paged<RoleRow>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::api::ssr::require(ConsoleRole::Viewer).await?;
    let compiled = crate::api::ssr::context().catalog.load();
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
    crate::api::ssr::require(ConsoleRole::Viewer).await?;
    let compiled = crate::api::ssr::context().catalog.load();
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

#[server(prefix = "/console/api")]
pub async fn list_skills(page: usize) -> Result<Paged<SkillRow>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::api::ssr::require(ConsoleRole::Viewer).await?;
    let compiled = crate::api::ssr::context().catalog.load();
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
    crate::api::ssr::require(ConsoleRole::Viewer).await?;
    let compiled = crate::api::ssr::context().catalog.load();
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

#[server(prefix = "/console/api")]
pub async fn list_tools(page: usize) -> Result<Paged<ToolRow>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::api::ssr::require(ConsoleRole::Viewer).await?;
    let compiled = crate::api::ssr::context().catalog.load();
    let catalog = compiled.catalog();
    let skills = ssr::skills_by_tool(catalog);
    let broken = compiled.broken_tools();
    let missing = ssr::missing_tools().await?;
    let quarantined = ssr::quarantined_tools().await?;
    Ok(ssr::page_of(&catalog.tools, page, |tool| {
        let mut row = ssr::tool_row(&compiled, tool, &skills, &broken, &missing);
        row.quarantine = quarantined.get(tool.spec.name.as_str()).cloned();
        row
    }))
}

#[server(prefix = "/console/api")]
pub async fn get_tool(name: String) -> Result<Option<ToolDetail>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::api::ssr::require(ConsoleRole::Viewer).await?;
    let ctx = crate::api::ssr::context();
    let compiled = ctx.catalog.load();
    let Some(tool) = compiled.tool(&name) else {
        return Ok(None);
    };
    let skills = ssr::skills_by_tool(compiled.catalog());
    let missing = ssr::missing_tools().await?;
    let mut row = ssr::tool_row(&compiled, tool, &skills, &compiled.broken_tools(), &missing);
    let schema = leptos::serde_json::to_string_pretty(&tool.spec.input_schema)
        .map_err(crate::api::ssr::internal)?;
    // Read from the store, not the snapshot: the page shows the offer this replica's
    // snapshot may not have caught up with yet.
    let pin = ctx
        .store
        .tool_pin(&name)
        .await
        .map_err(crate::api::ssr::internal)?
        .map(|pin| ssr::pin_detail(&pin, user.role.allows(ConsoleRole::Admin)));
    row.quarantine = pin.as_ref().and_then(|p| p.quarantine.clone());
    Ok(Some(ToolDetail {
        arguments: ssr::arguments(&tool.spec),
        tool: row,
        schema,
        pin,
    }))
}

#[server(prefix = "/console/api")]
pub async fn scopes_and_keys(
    scope_page: usize,
    key_page: usize,
) -> Result<ScopesOverview, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::api::ssr::require(ConsoleRole::Viewer).await?;
    let ctx = crate::api::ssr::context();
    let compiled = ctx.catalog.load();
    let keys = ctx.keys.list().await.map_err(crate::api::ssr::internal)?;
    Ok(ScopesOverview {
        scopes: ssr::page_of(&compiled.catalog().scopes, scope_page, |s| ScopeRow {
            slug: s.slug.as_str().to_owned(),
            description: s.description.clone(),
            roles: s.roles.iter().map(|r| r.as_str().to_owned()).collect(),
            guardrails: s.guardrail_sentences(),
        }),
        keys: ssr::page_of(&keys, key_page, ssr::key_row),
    })
}

#[cfg(feature = "ssr")]
mod ssr {
    use std::collections::HashMap;

    use similar::{ChangeTag, TextDiff};
    use skillgate_core::keys::AgentKeyInfo;
    use skillgate_core::model::{Catalog, CatalogTool, ToolSpec, quarantine_reason};
    use skillgate_core::policy::CompiledCatalog;
    use skillgate_core::store::catalog::ToolPin;

    use super::{ArgumentRow, KeyRow, PAGE_SIZE, Paged, PinDetail, ToolRow};
    use crate::revisions_api::DiffLine;

    /// Page `page` (1-based, clamped into range) of `items`, mapping only the rows shown.
    pub fn page_of<S, T>(items: &[S], page: usize, row: impl FnMut(&S) -> T) -> Paged<T> {
        let total = items.len();
        let pages = total.div_ceil(PAGE_SIZE).max(1);
        let page = page.clamp(1, pages);
        Paged {
            rows: items
                .iter()
                .skip((page - 1) * PAGE_SIZE)
                .take(PAGE_SIZE)
                .map(row)
                .collect(),
            page,
            pages,
            total,
        }
    }

    pub fn lookup(index: &HashMap<&str, Vec<String>>, key: &str) -> Vec<String> {
        index.get(key).cloned().unwrap_or_default()
    }

    /// Role slug → the scopes that include it, in catalog order.
    pub fn scopes_by_role(catalog: &Catalog) -> HashMap<&str, Vec<String>> {
        let mut index: HashMap<&str, Vec<String>> = HashMap::new();
        for scope in &catalog.scopes {
            for role in &scope.roles {
                index
                    .entry(role.as_str())
                    .or_default()
                    .push(scope.slug.as_str().to_owned());
            }
        }
        index
    }

    /// Skill slug → the roles that include it, in catalog order.
    pub fn roles_by_skill(catalog: &Catalog) -> HashMap<&str, Vec<String>> {
        let mut index: HashMap<&str, Vec<String>> = HashMap::new();
        for role in &catalog.roles {
            for skill in &role.skills {
                index
                    .entry(skill.as_str())
                    .or_default()
                    .push(role.slug.as_str().to_owned());
            }
        }
        index
    }

    /// Tool name → the skills (current versions) that use it, in catalog order.
    pub fn skills_by_tool(catalog: &Catalog) -> HashMap<&str, Vec<String>> {
        let mut index: HashMap<&str, Vec<String>> = HashMap::new();
        for skill in &catalog.skills {
            for tool in &skill.skill.tools {
                index
                    .entry(tool.as_str())
                    .or_default()
                    .push(skill.skill.slug.as_str().to_owned());
            }
        }
        index
    }

    pub fn tool_row(
        compiled: &CompiledCatalog,
        tool: &CatalogTool,
        skills: &HashMap<&str, Vec<String>>,
        broken: &[(&str, &str)],
        missing: &std::collections::BTreeMap<String, String>,
    ) -> ToolRow {
        let name = tool.spec.name.as_str();
        ToolRow {
            name: name.to_owned(),
            upstream: tool.upstream.as_str().to_owned(),
            description: tool.spec.description.clone(),
            required: required(&tool.spec),
            sensitive: tool.spec.sensitive_args.clone(),
            skills: lookup(skills, name),
            roles: compiled
                .roles_granting(name)
                .iter()
                .map(|r| r.as_str().to_owned())
                .collect(),
            broken: broken
                .binary_search_by(|(n, _)| (*n).cmp(name))
                .ok()
                .map(|i| broken[i].1.to_owned()),
            missing_since: missing.get(name).cloned(),
            quarantine: None,
        }
    }

    /// Quarantined tools by name: `new` or `changed`.
    pub async fn quarantined_tools()
    -> Result<std::collections::BTreeMap<String, String>, crate::api::ConsoleError> {
        Ok(crate::api::ssr::context()
            .store
            .quarantined_tools()
            .await
            .map_err(crate::api::ssr::internal)?
            .into_iter()
            .map(|pin| (pin.tool.clone(), quarantine_kind(&pin).to_owned()))
            .collect())
    }

    fn quarantine_kind(pin: &ToolPin) -> &'static str {
        if pin.is_new() { "new" } else { "changed" }
    }

    /// A definition as pretty JSON with its keys sorted (the canonical form, re-indented),
    /// so a diff shows what changed, not how the upstream ordered its keys.
    fn pretty(spec: &ToolSpec) -> String {
        let sorted: leptos::serde_json::Value =
            leptos::serde_json::from_str(&spec.canonical_definition())
                .unwrap_or_else(|_| spec.definition());
        leptos::serde_json::to_string_pretty(&sorted).unwrap_or_default()
    }

    pub fn pin_detail(pin: &ToolPin, can_admit: bool) -> PinDetail {
        let quarantined = pin.quarantined_since.is_some();
        let diff = match &pin.offered {
            Some(offered) if quarantined => {
                let old = pin.pinned.as_ref().map(pretty).unwrap_or_default();
                let new = pretty(offered);
                TextDiff::from_lines(&old, &new)
                    .iter_all_changes()
                    .map(|change| DiffLine {
                        tag: match change.tag() {
                            ChangeTag::Equal => "equal",
                            ChangeTag::Insert => "insert",
                            ChangeTag::Delete => "delete",
                        }
                        .to_owned(),
                        text: change.value().trim_end_matches('\n').to_owned(),
                    })
                    .collect()
            }
            _ => Vec::new(),
        };
        PinDetail {
            pin: pin.pin.clone(),
            quarantine: quarantined.then(|| quarantine_kind(pin).to_owned()),
            reason: pin
                .offered
                .as_ref()
                .filter(|_| quarantined)
                .map(|offered| quarantine_reason(pin.pinned.as_ref(), offered)),
            since: pin.quarantined_since.clone(),
            offered_pin: pin.offered_pin().filter(|_| quarantined),
            diff,
            can_admit,
        }
    }

    /// Tools their upstream stopped listing, by name, with when that was first seen.
    pub async fn missing_tools()
    -> Result<std::collections::BTreeMap<String, String>, crate::api::ConsoleError> {
        crate::api::ssr::context()
            .store
            .missing_tools()
            .await
            .map_err(crate::api::ssr::internal)
    }

    fn required(spec: &ToolSpec) -> Vec<String> {
        spec.input_schema
            .get("required")
            .and_then(|r| r.as_array())
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The top-level arguments the schema declares, in schema order.
    pub fn arguments(spec: &ToolSpec) -> Vec<ArgumentRow> {
        let required = required(spec);
        let Some(properties) = spec
            .input_schema
            .get("properties")
            .and_then(|p| p.as_object())
        else {
            return Vec::new();
        };
        properties
            .iter()
            .map(|(name, property)| {
                let kind = match property.get("type") {
                    Some(leptos::serde_json::Value::String(t)) => t.clone(),
                    Some(leptos::serde_json::Value::Array(ts)) => ts
                        .iter()
                        .filter_map(|t| t.as_str())
                        .collect::<Vec<_>>()
                        .join(" | "),
                    _ => String::new(),
                };
                ArgumentRow {
                    name: name.clone(),
                    kind,
                    description: property
                        .get("description")
                        .and_then(|d| d.as_str())
                        .unwrap_or_default()
                        .to_owned(),
                    required: required.contains(name),
                    sensitive: spec.sensitive_args.contains(name),
                }
            })
            .collect()
    }

    const STAMP: &str = "%Y-%m-%d %H:%M UTC";

    pub fn key_row(key: &AgentKeyInfo) -> KeyRow {
        let status = if key.revoked_at.is_some() {
            "revoked"
        } else if key.is_active(now_like(&key.created_at)) {
            "active"
        } else {
            "expired"
        };
        KeyRow {
            name: key.name.clone(),
            scope: key.scope.as_str().to_owned(),
            prefix: key.prefix.clone(),
            created_at: key.created_at.format(STAMP).to_string(),
            created_by: key.created_by.clone(),
            expires_at: key.expires_at.map(|t| t.format(STAMP).to_string()),
            revoked_at: key.revoked_at.map(|t| t.format(STAMP).to_string()),
            last_used_at: key.last_used_at.map(|t| t.format(STAMP).to_string()),
            status: status.to_owned(),
        }
    }

    /// The current time in the type of `_like`: the key list's UTC timestamps, without a
    /// direct `chrono` dependency in this crate.
    fn now_like<T: From<std::time::SystemTime>>(_like: &T) -> T {
        T::from(std::time::SystemTime::now())
    }

    #[cfg(test)]
    mod tests {
        use super::{PAGE_SIZE, page_of};

        #[test]
        fn pages_hold_at_most_page_size_rows_and_out_of_range_pages_are_clamped() {
            let items: Vec<usize> = (0..PAGE_SIZE * 2 + 5).collect();
            let second = page_of(&items, 2, |i| *i);
            assert_eq!(
                (second.page, second.pages, second.total),
                (2, 3, items.len())
            );
            assert_eq!(second.rows.first(), Some(&PAGE_SIZE));
            assert_eq!(second.rows.len(), PAGE_SIZE);
            assert_eq!(page_of(&items, 99, |i| *i).rows.len(), 5);
            assert_eq!(page_of(&items, 0, |i| *i).page, 1);
            let empty = page_of(&Vec::<usize>::new(), 3, |i| *i);
            assert_eq!((empty.page, empty.pages, empty.rows.len()), (1, 1, 0));
        }
    }
}
