//! Server functions of the inspectors page: read the policy, add and remove a rule, an
//! external hook or a secret source's mark, and save the schema and admission switches. Every change goes through
//! the admin door.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use crate::catalog::authoring::{authoring_error, field, slug_field};
use crate::shared::ConsoleError;

/// One inspector: what it guards against and what it does when no rule selects a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InspectorRow {
    pub name: String,
    pub threat: String,
    /// What runs for a call no tool, role or scope rule selects: the catalog's rule that
    /// names none, else the built-in default.
    pub action: String,
    pub built_in: String,
}

/// A rule as the page shows it; `key` names it for removal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleRow {
    pub key: String,
    pub inspector: String,
    pub action: String,
    pub tool: Option<String>,
    pub role: Option<String>,
    pub scope: Option<String>,
    pub max_bytes: Option<u64>,
}

/// An external guardrail hook as the page shows it (named uniquely: its name removes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookRow {
    pub name: String,
    pub url: String,
    /// `arguments`, `result`.
    pub stages: Vec<String>,
    pub tool: Option<String>,
    pub role: Option<String>,
    pub scope: Option<String>,
    pub timeout_ms: u64,
    pub on_error: String,
    pub secret_env: String,
    /// Whether the gateway serving the page has `secret_env` set (never its value): a hook
    /// without it fails as its `on_error` says.
    pub secret_set: bool,
}

/// A tool marked as a secret source (a vault), with the result fields it returns as
/// secrets (JSON Pointers; none: what the detectors recognise).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecretSourceRow {
    pub tool: String,
    pub fields: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InspectorsView {
    pub inspectors: Vec<InspectorRow>,
    pub rules: Vec<RuleRow>,
    pub hooks: Vec<HookRow>,
    pub secret_sources: Vec<SecretSourceRow>,
    pub close_open_objects: bool,
    pub validate_formats: bool,
    pub refuse_admission_with_findings: bool,
    pub resolve_names: bool,
    pub actions: Vec<String>,
    pub tools: Vec<String>,
    pub roles: Vec<String>,
    pub scopes: Vec<String>,
    pub can_edit: bool,
    /// The catalog file that alone may change the policy, when one manages the catalog.
    pub managed_by: Option<String>,
}

/// What each inspector guards against, in a line.
pub fn threat(inspector: &str) -> &'static str {
    match inspector {
        "secrets" => {
            "Credentials in a result (cloud keys, private keys, tokens) reaching the agent."
        }
        "injection" => {
            "Instructions hidden in a result that try to steer the agent (also disguised by homoglyphs, zero-width characters or base64)."
        }
        "result_size" => "A result so large it floods the agent's context or hides what matters.",
        "secret_flow" => {
            "A secret one upstream returned being sent on to another upstream in a call's arguments."
        }
        "egress" => {
            "A URL in the arguments pointing into the private network or at a cloud metadata address (server-side request forgery)."
        }
        _ => "",
    }
}

#[cfg(feature = "ssr")]
fn rule_key(index: usize, rule: &skillgate_core::model::InspectionRule) -> String {
    // The position and the rule's content: a removal of a rule someone changed meanwhile
    // finds nothing instead of removing another.
    format!(
        "{index}:{}:{}:{}:{}:{}:{}",
        rule.inspector.as_str(),
        rule.action.as_str(),
        rule.tool.as_deref().unwrap_or(""),
        rule.role.as_ref().map_or("", |r| r.as_str()),
        rule.scope.as_ref().map_or("", |s| s.as_str()),
        rule.max_bytes.map(|m| m.to_string()).unwrap_or_default()
    )
}

#[server(prefix = "/console/api", endpoint = "inspection_policy")]
pub async fn get_inspection() -> Result<InspectorsView, ConsoleError> {
    use skillgate_core::model::{CallScope, InspectAction, Inspector};
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let ctx = crate::shared::ssr::context();
    let policy = ctx
        .authoring
        .inspection_policy()
        .await
        .map_err(crate::shared::ssr::internal)?;
    let live = ctx.authoring.live();
    let catalog = live.catalog();
    // A call no selector matches: no tool is named "", and no role or scope is set.
    let unselected = CallScope {
        tool: "",
        role: None,
        scope: None,
    };
    let inspectors = Inspector::ALL
        .into_iter()
        .map(|i| InspectorRow {
            name: i.as_str().to_owned(),
            threat: threat(i.as_str()).to_owned(),
            action: policy.resolve(i, &unselected).action.as_str().to_owned(),
            built_in: i.default_action().as_str().to_owned(),
        })
        .collect();
    let rules = policy
        .rules
        .iter()
        .enumerate()
        .map(|(index, r)| RuleRow {
            key: rule_key(index, r),
            inspector: r.inspector.as_str().to_owned(),
            action: r.action.as_str().to_owned(),
            tool: r.tool.clone(),
            role: r.role.as_ref().map(|s| s.as_str().to_owned()),
            scope: r.scope.as_ref().map(|s| s.as_str().to_owned()),
            max_bytes: r.max_bytes,
        })
        .collect();
    let hooks = policy
        .hooks
        .iter()
        .map(|h| HookRow {
            name: h.name.as_str().to_owned(),
            url: h.url.clone(),
            stages: h.stages.iter().map(|s| s.as_str().to_owned()).collect(),
            tool: h.tool.clone(),
            role: h.role.as_ref().map(|s| s.as_str().to_owned()),
            scope: h.scope.as_ref().map(|s| s.as_str().to_owned()),
            timeout_ms: h.timeout_ms,
            on_error: h.on_error.as_str().to_owned(),
            secret_env: h.secret_env.clone(),
            secret_set: std::env::var_os(&h.secret_env).is_some_and(|v| !v.is_empty()),
        })
        .collect();
    let mut tools: Vec<String> = catalog.tools.iter().map(|t| t.spec.name.clone()).collect();
    tools.sort();
    let secret_sources = policy
        .secret_sources
        .iter()
        .map(|s| SecretSourceRow {
            tool: s.tool.clone(),
            fields: s.fields.clone(),
        })
        .collect();
    Ok(InspectorsView {
        inspectors,
        rules,
        hooks,
        secret_sources,
        close_open_objects: policy.schemas.close_open_objects,
        validate_formats: policy.schemas.validate_formats,
        refuse_admission_with_findings: policy.definitions.refuse_admission_with_findings,
        resolve_names: policy.egress.resolve_names,
        actions: InspectAction::ALL
            .into_iter()
            .map(|a| a.as_str().to_owned())
            .collect(),
        tools,
        roles: catalog
            .roles
            .iter()
            .map(|r| r.slug.as_str().to_owned())
            .collect(),
        scopes: catalog
            .scopes
            .iter()
            .map(|s| s.slug.as_str().to_owned())
            .collect(),
        can_edit: user.role.allows(ConsoleRole::Admin),
        managed_by: ctx.authoring.catalog_file().map(str::to_owned),
    })
}

/// An empty select or text field is "no selector".
#[cfg(feature = "ssr")]
fn chosen(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// Reads the stored policy, lets `edit` change it, and saves it as `user` through the admin
/// door (which checks it against the catalog and audits it): the one way this page writes.
#[cfg(feature = "ssr")]
async fn edit_policy(
    user: &skillgate_core::users::ConsoleUser,
    edit: impl FnOnce(&mut skillgate_core::model::InspectionPolicy) -> Result<(), ConsoleError>,
) -> Result<(), ConsoleError> {
    let ctx = crate::shared::ssr::context();
    let mut policy = ctx
        .authoring
        .inspection_policy()
        .await
        .map_err(crate::shared::ssr::internal)?;
    edit(&mut policy)?;
    ctx.authoring
        .set_inspection_policy(&user.name, policy)
        .await
        .map_err(authoring_error)
}

/// Adds a rule: `inspector` takes `action` for the calls of `tool`, `role` and `scope`
/// (each optional), with `max_bytes` for `result_size`.
#[server(prefix = "/console/api", endpoint = "add_inspection_rule")]
pub async fn add_inspection_rule(
    inspector: String,
    action: String,
    tool: Option<String>,
    role: Option<String>,
    scope: Option<String>,
    max_bytes: Option<String>,
) -> Result<(), ConsoleError> {
    use skillgate_core::model::{InspectAction, InspectionRule, Inspector};
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    let inspector = Inspector::parse(inspector.trim())
        .ok_or_else(|| field("inspector", format!("`{inspector}` is not an inspector.")))?;
    let action = InspectAction::parse(action.trim()).ok_or_else(|| {
        field(
            "action",
            format!("`{action}` is not an action: pick off, flag, redact or block."),
        )
    })?;
    let slug = |name: &'static str, value: Option<String>| {
        chosen(value).map(|v| slug_field(name, &v)).transpose()
    };
    let max_bytes = chosen(max_bytes)
        .map(|m| {
            m.parse::<u64>().map_err(|_| {
                field(
                    "max_bytes",
                    "Write the largest result in bytes, a whole number.",
                )
            })
        })
        .transpose()?;
    let rule = InspectionRule {
        inspector,
        action,
        tool: chosen(tool),
        role: slug("role", role)?,
        scope: slug("scope", scope)?,
        max_bytes,
    };
    edit_policy(&user, |policy| {
        policy.rules.push(rule);
        Ok(())
    })
    .await
}

/// Removes the rule `key` names (as the page listed it).
#[server(prefix = "/console/api", endpoint = "remove_inspection_rule")]
pub async fn remove_inspection_rule(key: String) -> Result<(), ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    edit_policy(&user, |policy| {
        let Some(index) = policy
            .rules
            .iter()
            .enumerate()
            .position(|(i, r)| rule_key(i, r) == key)
        else {
            return Err(ConsoleError::Invalid(
                "That rule was changed or removed meanwhile; reload the page.".into(),
            ));
        };
        policy.rules.remove(index);
        Ok(())
    })
    .await
}

pub use hook_form::*;

/// The hook form's server function, in its own module for one lint (as the upstream form's).
#[allow(
    clippy::too_many_arguments,
    reason = "a plain (no JavaScript) form posts one argument per field, by these names"
)]
mod hook_form {
    use leptos::prelude::*;

    #[cfg(feature = "ssr")]
    use crate::catalog::authoring::{field, slug_field};
    use crate::shared::ConsoleError;

    /// Adds an external hook `name` at `url` for the stages ticked (`stage_arguments`,
    /// `stage_result`), the calls of `tool`, `role` and `scope` (each optional), answering
    /// within `timeout_ms` (default 2000), failing as `on_error` says, signed with the secret
    /// in the gateway's environment variable `secret_env`.
    #[server(prefix = "/console/api", endpoint = "add_inspection_hook")]
    pub async fn add_inspection_hook(
        name: String,
        url: String,
        stage_arguments: Option<String>,
        stage_result: Option<String>,
        tool: Option<String>,
        role: Option<String>,
        scope: Option<String>,
        timeout_ms: Option<String>,
        on_error: String,
        secret_env: String,
    ) -> Result<(), ConsoleError> {
        use skillgate_core::model::{GuardrailHook, HOOK_TIMEOUT_MS, HookFailure, HookStage};
        use skillgate_core::users::ConsoleRole;
        let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
        use super::chosen;
        let slug = |name: &'static str, value: Option<String>| {
            chosen(value).map(|v| slug_field(name, &v)).transpose()
        };
        let stages: Vec<HookStage> = [
            (stage_arguments, HookStage::Arguments),
            (stage_result, HookStage::Result),
        ]
        .into_iter()
        .filter_map(|(ticked, stage)| ticked.map(|_| stage))
        .collect();
        let timeout_ms = chosen(timeout_ms)
            .map(|t| {
                t.parse::<u64>().map_err(|_| {
                    field(
                        "timeout_ms",
                        "Write the time the hook has to answer in milliseconds, a whole number.",
                    )
                })
            })
            .transpose()?
            .unwrap_or(HOOK_TIMEOUT_MS);
        let on_error = HookFailure::parse(on_error.trim()).ok_or_else(|| {
            field(
                "on_error",
                format!("`{on_error}` is not a failure mode: pick block or allow."),
            )
        })?;
        let hook = GuardrailHook {
            name: slug_field("name", name.trim())?,
            url: url.trim().to_owned(),
            stages,
            tool: chosen(tool),
            role: slug("role", role)?,
            scope: slug("scope", scope)?,
            timeout_ms,
            on_error,
            secret_env: secret_env.trim().to_owned(),
        };
        super::edit_policy(&user, |policy| {
            policy.hooks.push(hook);
            Ok(())
        })
        .await
    }
}

/// Removes the hook `name`.
#[server(prefix = "/console/api", endpoint = "remove_inspection_hook")]
pub async fn remove_inspection_hook(name: String) -> Result<(), ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    edit_policy(&user, |policy| {
        let Some(index) = policy.hooks.iter().position(|h| h.name.as_str() == name) else {
            return Err(ConsoleError::Invalid(
                "That hook was removed meanwhile; reload the page.".into(),
            ));
        };
        policy.hooks.remove(index);
        Ok(())
    })
    .await
}

/// Marks `tool` as a secret source whose result `fields` (JSON Pointers, one per line or
/// separated by commas or spaces; none: what the detectors recognise) are secrets; a tool
/// marked already gets these fields instead.
#[server(prefix = "/console/api", endpoint = "mark_secret_source")]
pub async fn mark_secret_source(tool: String, fields: String) -> Result<(), ConsoleError> {
    use skillgate_core::model::{SecretSource, valid_field_pointer};
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    let tool = chosen(Some(tool)).ok_or_else(|| field("tool", "Pick the tool to mark."))?;
    let fields: Vec<String> = fields
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|f| !f.is_empty())
        .map(str::to_owned)
        .collect();
    if let Some(bad) = fields.iter().find(|f| !valid_field_pointer(f)) {
        return Err(field(
            "fields",
            format!(
                "`{bad}` is not a JSON Pointer to a field: write `/password` or `/secrets/*/value`."
            ),
        ));
    }
    edit_policy(&user, |policy| {
        let mark = SecretSource { tool, fields };
        match policy
            .secret_sources
            .iter_mut()
            .find(|s| s.tool == mark.tool)
        {
            Some(existing) => *existing = mark,
            None => policy.secret_sources.push(mark),
        }
        Ok(())
    })
    .await
}

/// Takes the secret-source mark off `tool`: its results are inspected like any other's.
#[server(prefix = "/console/api", endpoint = "unmark_secret_source")]
pub async fn unmark_secret_source(tool: String) -> Result<(), ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    edit_policy(&user, |policy| {
        let before = policy.secret_sources.len();
        policy.secret_sources.retain(|s| s.tool != tool);
        if policy.secret_sources.len() == before {
            return Err(ConsoleError::Invalid(
                "That tool is not marked (any more); reload the page.".into(),
            ));
        }
        Ok(())
    })
    .await
}

/// Saves the switches: a checkbox left unticked posts nothing, which is off.
#[server(prefix = "/console/api", endpoint = "save_inspection_switches")]
pub async fn save_inspection_switches(
    close_open_objects: Option<String>,
    validate_formats: Option<String>,
    refuse_admission_with_findings: Option<String>,
    resolve_names: Option<String>,
) -> Result<(), ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    edit_policy(&user, |policy| {
        policy.schemas.close_open_objects = close_open_objects.is_some();
        policy.schemas.validate_formats = validate_formats.is_some();
        policy.definitions.refuse_admission_with_findings =
            refuse_admission_with_findings.is_some();
        policy.egress.resolve_names = resolve_names.is_some();
        Ok(())
    })
    .await
}
