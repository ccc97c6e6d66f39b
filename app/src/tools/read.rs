//! Read-only server functions of the tools pages: the list and one tool with its pin.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::catalog::api::Paged;
use crate::shared::ConsoleError;

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
    pub diff: Vec<crate::catalog::DiffLine>,
    /// Whether the signed-in user may admit it (admins only).
    pub can_admit: bool,
    /// What inspecting the offered definition found (while quarantined).
    pub findings: Vec<super::pins::DefinitionFindingRow>,
    /// Whether the inspection policy refuses admission while there are findings.
    pub refuses_admission: bool,
}

#[server(prefix = "/console/api")]
pub async fn list_tools(page: usize) -> Result<Paged<ToolRow>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let compiled = crate::shared::ssr::context().catalog.load();
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
    let user = crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let ctx = crate::shared::ssr::context();
    let compiled = ctx.catalog.load();
    let Some(tool) = compiled.tool(&name) else {
        return Ok(None);
    };
    let skills = ssr::skills_by_tool(compiled.catalog());
    let missing = ssr::missing_tools().await?;
    let mut row = ssr::tool_row(&compiled, tool, &skills, &compiled.broken_tools(), &missing);
    let schema = leptos::serde_json::to_string_pretty(&tool.spec.input_schema)
        .map_err(crate::shared::ssr::internal)?;
    // Read from the store, not the snapshot: the page shows the offer this replica's
    // snapshot may not have caught up with yet.
    let mut pin = ctx
        .store
        .tool_pin(&name)
        .await
        .map_err(crate::shared::ssr::internal)?
        .map(|pin| ssr::pin_detail(&pin, user.role.allows(ConsoleRole::Admin)));
    if let Some(detail) = pin.as_mut().filter(|p| p.quarantine.is_some()) {
        let findings = ctx
            .authoring
            .offered_definition_findings(&name)
            .await
            .map_err(crate::shared::ssr::internal)?;
        (detail.findings, detail.refuses_admission) = super::pins::offered_findings(findings);
    }
    row.quarantine = pin.as_ref().and_then(|p| p.quarantine.clone());
    Ok(Some(ToolDetail {
        arguments: ssr::arguments(&tool.spec),
        tool: row,
        schema,
        pin,
    }))
}

#[cfg(feature = "ssr")]
mod ssr {
    use std::collections::HashMap;

    use similar::{ChangeTag, TextDiff};
    use skillgate_core::model::{CatalogTool, ToolSpec, quarantine_reason};
    use skillgate_core::policy::CompiledCatalog;
    use skillgate_core::store::catalog::ToolPin;

    use super::{ArgumentRow, PinDetail, ToolRow};
    use crate::catalog::DiffLine;
    pub use crate::catalog::api::ssr::*;

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
    -> Result<std::collections::BTreeMap<String, String>, crate::shared::ConsoleError> {
        Ok(crate::shared::ssr::context()
            .store
            .quarantined_tools()
            .await
            .map_err(crate::shared::ssr::internal)?
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
            findings: Vec::new(),
            refuses_admission: false,
        }
    }

    /// Tools their upstream stopped listing, by name, with when that was first seen.
    pub async fn missing_tools()
    -> Result<std::collections::BTreeMap<String, String>, crate::shared::ConsoleError> {
        crate::shared::ssr::context()
            .store
            .missing_tools()
            .await
            .map_err(crate::shared::ssr::internal)
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
}
