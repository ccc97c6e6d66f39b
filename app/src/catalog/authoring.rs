//! Server-side helpers shared by the catalog editors' server functions: form fields to
//! core types, stored entities, refusals shown beside their field.

use std::collections::BTreeMap;

use leptos::serde_json::{self, Value};
use skillgate_core::admin::AdminError;
use skillgate_core::model::{Limit, Resource, Role, Scope, ToolSpec};
use skillgate_core::policy::CompiledCatalog;
use skillgate_core::slug::Slug;

use crate::catalog::{ArgChoice, Checked, Choice, LimitView, ResourceEdit, ToolChoice};
pub use crate::components::markdown::ssr::markdown_html;
use crate::shared::ConsoleError;
use crate::shared::ssr::{ConsoleContext, internal};

pub(crate) const STAMP: &str = "%Y-%m-%d %H:%M:%S UTC";

pub(crate) fn field(field: &str, message: impl Into<String>) -> ConsoleError {
    ConsoleError::Field {
        field: field.to_owned(),
        message: message.into(),
    }
}

pub fn slug_field(name: &str, text: &str) -> Result<Slug, ConsoleError> {
    Slug::parse(text.trim()).map_err(|e| field(name, e.to_string()))
}

pub fn checked_slugs(name: &str, checked: Checked) -> Result<Vec<Slug>, ConsoleError> {
    checked
        .unwrap_or_default()
        .into_keys()
        .map(|s| slug_field(name, &s))
        .collect()
}

/// A refused change shows beside the field it names (the door says which); the rest
/// above the form; server faults stay in the log.
pub fn authoring_error(error: AdminError) -> ConsoleError {
    match error.field() {
        Some(name) if error.is_user_error() => field(name, error.to_string()),
        _ if error.is_user_error() => ConsoleError::Invalid(error.to_string()),
        _ => internal(error),
    }
}

pub async fn stored_scope(ctx: &ConsoleContext, slug: &Slug) -> Result<Scope, ConsoleError> {
    ctx.authoring
        .scopes()
        .await
        .map_err(internal)?
        .into_iter()
        .map(|s| s.value)
        .find(|s| s.slug == *slug)
        .ok_or_else(|| ConsoleError::Invalid(format!("There is no scope `{slug}`.")))
}

pub async fn stored_role(ctx: &ConsoleContext, slug: &str) -> Result<Role, ConsoleError> {
    let slug = slug_field("slug", slug)?;
    ctx.authoring
        .role(&slug)
        .await
        .map_err(internal)?
        .map(|r| r.value)
        .ok_or_else(|| ConsoleError::Invalid(format!("There is no role `{slug}`.")))
}

/// The arguments a limit may name: every top-level property by name, and every nested
/// value by JSON Pointer, `*` standing for every item of an array (`/lines/*/amount`).
pub(crate) fn arg_choices(spec: &ToolSpec) -> Vec<ArgChoice> {
    let mut out = Vec::new();
    if let Some(props) = spec
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
    {
        for (name, property) in props {
            out.push(ArgChoice {
                name: name.clone(),
                kind: kind_of(property),
            });
            nested_choices(property, &format!("/{}", pointer_token(name)), 1, &mut out);
        }
    }
    out
}

/// How deep the console offers nested values; deeper ones are for the catalog file.
const MAX_CHOICE_DEPTH: usize = 4;

fn nested_choices(schema: &Value, pointer: &str, depth: usize, out: &mut Vec<ArgChoice>) {
    if depth > MAX_CHOICE_DEPTH {
        return;
    }
    let mut visit = |child: &Value, at: String| {
        let container = child.get("properties").is_some() || child.get("items").is_some();
        if !container {
            out.push(ArgChoice {
                name: at.clone(),
                kind: kind_of(child),
            });
        }
        nested_choices(child, &at, depth + 1, out);
    };
    if let Some(items) = schema.get("items").filter(|items| items.is_object()) {
        visit(items, format!("{pointer}/*"));
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in props {
            visit(property, format!("{pointer}/{}", pointer_token(name)));
        }
    }
}

fn pointer_token(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

fn kind_of(property: &Value) -> String {
    match property.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" | "),
        _ => String::new(),
    }
}

pub fn skill_choices(compiled: &CompiledCatalog) -> Vec<Choice> {
    compiled
        .catalog()
        .skills
        .iter()
        .map(|s| Choice {
            name: s.skill.slug.as_str().to_owned(),
            note: s.skill.description.clone(),
        })
        .collect()
}

pub fn role_choices(compiled: &CompiledCatalog) -> Vec<Choice> {
    compiled
        .catalog()
        .roles
        .iter()
        .map(|r| Choice {
            name: r.slug.as_str().to_owned(),
            note: r.title.clone(),
        })
        .collect()
}

/// Limits as the editor lists them: the sentence an agent reads and the compact rule.
pub fn limit_views(limits: &[Limit]) -> Vec<LimitView> {
    limits
        .iter()
        .enumerate()
        .map(|(index, l)| LimitView {
            index,
            sentence: l.sentence(),
            rule: l.to_string(),
        })
        .collect()
}

/// Every tool some role of the scope grants, with its arguments, in name order.
pub fn scope_tools(compiled: &CompiledCatalog, scope: &Scope) -> Vec<ToolChoice> {
    let catalog = compiled.catalog();
    let names: std::collections::BTreeSet<String> = scope
        .roles
        .iter()
        .filter_map(|r| catalog.role(r.as_str()))
        .flat_map(|role| catalog.role_tools(role))
        .collect();
    names
        .iter()
        .filter_map(|name| catalog.tool(name))
        .map(|t| ToolChoice {
            name: t.spec.name.clone(),
            args: arg_choices(&t.spec),
        })
        .collect()
}

pub fn resource_edits(resources: &[Resource]) -> Vec<ResourceEdit> {
    resources
        .iter()
        .map(|r| ResourceEdit {
            name: r.name.as_str().to_owned(),
            title: r.title.clone(),
            content: r.content.clone(),
            remove: None,
        })
        .collect()
}

pub fn parse_resources(
    rows: Option<BTreeMap<usize, ResourceEdit>>,
) -> Result<Vec<Resource>, ConsoleError> {
    rows.unwrap_or_default()
        .into_values()
        .filter(|r| !r.name.trim().is_empty() && r.remove.is_none())
        .map(|r| {
            Ok(Resource {
                name: slug_field("resources", &r.name)?,
                title: r.title.trim().to_owned(),
                content: r.content,
            })
        })
        .collect()
}

pub fn expiry(days: Option<&str>) -> Result<Option<chrono::DateTime<chrono::Utc>>, ConsoleError> {
    let Some(days) = days.map(str::trim).filter(|d| !d.is_empty()) else {
        return Ok(None);
    };
    match days.parse::<u32>() {
        Ok(d @ 1..=36_500) => Ok(Some(chrono::Utc::now() + chrono::Duration::days(d.into()))),
        _ => Err(field(
            "expires_in_days",
            "Enter a number of days from 1 to 36500, or leave it empty for no expiry.",
        )),
    }
}

/// The MCP endpoint as this request reached the server, for the pasted configuration.
pub async fn client_config(key: &str) -> String {
    let host = leptos_axum::extract::<http::HeaderMap>()
        .await
        .ok()
        .and_then(|h| {
            h.get(http::header::HOST)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "127.0.0.1:3000".to_owned());
    let config = serde_json::json!({
        "mcpServers": {
            "skillgate": {
                "type": "http",
                "url": format!("http://{host}/mcp"),
                "headers": { "Authorization": format!("Bearer {key}") },
            }
        }
    });
    serde_json::to_string_pretty(&config).unwrap_or_default()
}

/// A browser form post without JavaScript asks for HTML; a server-function call does not.
/// Keeps a secret just made (`value`) for one render of `page` by `user_id`, and
/// redirects there: a plain form post is answered with a redirect, which cannot carry
/// the secret, so the page names it by a one-time reveal token (`page?reveal=…#anchor`).
pub async fn reveal_after_redirect<T: serde::Serialize>(
    ctx: &ConsoleContext,
    user_id: i64,
    value: &T,
    page: &str,
    anchor: &str,
) -> Result<(), ConsoleError> {
    let payload = serde_json::to_string(value).map_err(internal)?;
    let reveal = ctx
        .authoring
        .stash_key_reveal(user_id, &payload)
        .await
        .map_err(internal)?;
    leptos_axum::redirect(&format!("{page}?reveal={reveal}#{anchor}"));
    Ok(())
}

/// The secret [`reveal_after_redirect`] kept under `reveal` for `user_id`: at most once,
/// and only within its minute.
pub async fn take_reveal<T: serde::de::DeserializeOwned>(
    ctx: &ConsoleContext,
    user_id: i64,
    reveal: Option<String>,
) -> Result<Option<T>, ConsoleError> {
    let Some(reveal) = reveal else {
        return Ok(None);
    };
    Ok(ctx
        .authoring
        .take_key_reveal(user_id, &reveal)
        .await
        .map_err(internal)?
        .and_then(|payload| serde_json::from_str(&payload).ok()))
}

pub async fn is_plain_form_post() -> bool {
    leptos_axum::extract::<http::HeaderMap>()
        .await
        .ok()
        .and_then(|h| {
            h.get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .map(|v| v.contains("text/html"))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use leptos::serde_json::json;

    use super::*;

    #[test]
    fn nested_values_are_offered_by_pointer_with_a_star_for_array_items() {
        let spec = ToolSpec {
            name: "batch".into(),
            description: String::new(),
            input_schema: json!({"type": "object", "properties": {
                "customer": {"type": "string"},
                "lines": {"type": "array", "items": {"type": "object", "properties": {
                    "amount": {"type": "number"}, "a/b": {"type": "string"}}}},
                "tags": {"type": "array", "items": {"type": "string"}}
            }}),
            output_schema: None,
            annotations: None,
            sensitive_args: Vec::new(),
        };
        let names: Vec<String> = arg_choices(&spec)
            .into_iter()
            .map(|c| format!("{} ({})", c.name, c.kind))
            .collect();
        assert_eq!(
            names,
            [
                "customer (string)",
                "lines (array)",
                "/lines/*/a~1b (string)",
                "/lines/*/amount (number)",
                "tags (array)",
                "/tags/* (string)",
            ]
        );
    }
}
