//! The `inspection:` section of the catalog document: the inspection policy (which content
//! inspectors run on a call and what they do with a finding), and its conversions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::{
    DefinitionPolicy, EgressPolicy, GuardrailHook, HOOK_TIMEOUT_MS, HookFailure, HookStage,
    InspectAction, InspectionPolicy, InspectionRule, Inspector, SchemaPolicy, SecretSource,
};
use crate::slug::Slug;

/// The inspection policy. Left out of a file, the stored policy is kept (with `--prune`,
/// the built-in defaults are restored); an export leaves it out when it is the defaults.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InspectionDoc {
    /// Per tool, role or scope: what an inspector does. The most specific matching rule
    /// wins (tool over role over scope over none); no rule: the inspector's default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<InspectionRuleDoc>,
    #[serde(default)]
    pub schemas: SchemasDoc,
    #[serde(default)]
    pub definitions: DefinitionsDoc,
    /// What `egress` does beyond reading URLs as written. Left out: the defaults.
    #[serde(default, skip_serializing_if = "EgressDoc::is_default")]
    pub egress: EgressDoc,
    /// External guardrail hooks, asked after the built-in inspectors, in this order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookDoc>,
    /// Tools whose purpose is to return secrets (a vault): their results reach the agent,
    /// flagged, and `secret_flow` keeps those secrets from every other upstream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_sources: Vec<SecretSourceDoc>,
}

/// A tool whose purpose is to return secrets. See docs/guardrails.md, "Secret sources".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretSourceDoc {
    pub tool: String,
    /// JSON Pointers to the values it returns as secrets, whatever they look like
    /// (`/password`, `/secrets/*/value`), in `structuredContent` or a JSON text block.
    /// Left out: what the `secrets` detectors recognise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

/// An external guardrail hook: a web service the gateway POSTs a signed JSON request to,
/// which answers `allow`, `deny` or (for a result) `modify`. See docs/guardrails.md.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HookDoc {
    pub name: Slug,
    /// `https://`, or `http://` to this machine.
    pub url: String,
    /// Which parts of a call the hook reads: `arguments` (before deciding), `result`.
    pub stages: Vec<HookStage>,
    /// Only calls of this tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Only calls a role of this slug authorised (never at the `arguments` stage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Slug>,
    /// Only calls of sessions of this scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Slug>,
    /// How long the hook has to answer. Default: 2000.
    #[serde(default = "hook_timeout")]
    #[schemars(range(min = 50, max = 30000))]
    pub timeout_ms: u64,
    /// When the hook gives no usable answer: `block` (default) or `allow`.
    #[serde(default)]
    pub on_error: HookFailure,
    /// The environment variable of the gateway holding the signing secret.
    pub secret_env: String,
}

fn hook_timeout() -> u64 {
    HOOK_TIMEOUT_MS
}

impl From<&GuardrailHook> for HookDoc {
    fn from(hook: &GuardrailHook) -> Self {
        Self {
            name: hook.name.clone(),
            url: hook.url.clone(),
            stages: hook.stages.clone(),
            tool: hook.tool.clone(),
            role: hook.role.clone(),
            scope: hook.scope.clone(),
            timeout_ms: hook.timeout_ms,
            on_error: hook.on_error,
            secret_env: hook.secret_env.clone(),
        }
    }
}

impl From<&HookDoc> for GuardrailHook {
    fn from(hook: &HookDoc) -> Self {
        Self {
            name: hook.name.clone(),
            url: hook.url.clone(),
            stages: hook.stages.clone(),
            tool: hook.tool.clone(),
            role: hook.role.clone(),
            scope: hook.scope.clone(),
            timeout_ms: hook.timeout_ms,
            on_error: hook.on_error,
            secret_env: hook.secret_env.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InspectionRuleDoc {
    pub inspector: Inspector,
    pub action: InspectAction,
    /// Only calls of this tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Only calls a role of this slug authorised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Slug>,
    /// Only calls of sessions of this scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Slug>,
    /// `result_size` (and only it, which needs it): the largest result, in bytes of its
    /// JSON, that passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_bytes: Option<u64>,
}

/// How strictly arguments are checked against a tool's pinned input schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SchemasDoc {
    /// Refuse undeclared properties even where a schema leaves its objects open.
    #[serde(default)]
    pub close_open_objects: bool,
    /// Check `format` (date-time, email, uri, uuid, …) as an assertion. Default: true.
    #[serde(default = "yes")]
    pub validate_formats: bool,
}

impl Default for SchemasDoc {
    fn default() -> Self {
        Self::from(&SchemaPolicy::default())
    }
}

/// What the egress inspector does beyond reading URLs as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EgressDoc {
    /// Resolve the host names of URLs in arguments: one that resolves to an internal
    /// address, or does not resolve, is an `egress` finding. Default: false.
    #[serde(default)]
    pub resolve_names: bool,
}

impl EgressDoc {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// What inspecting an offered tool definition may do to its admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DefinitionsDoc {
    /// Refuse to admit a tool while its offered definition has findings.
    #[serde(default)]
    pub refuse_admission_with_findings: bool,
}

fn yes() -> bool {
    true
}

impl From<&SchemaPolicy> for SchemasDoc {
    fn from(policy: &SchemaPolicy) -> Self {
        Self {
            close_open_objects: policy.close_open_objects,
            validate_formats: policy.validate_formats,
        }
    }
}

impl From<&InspectionPolicy> for InspectionDoc {
    fn from(policy: &InspectionPolicy) -> Self {
        Self {
            rules: policy
                .rules
                .iter()
                .map(|r| InspectionRuleDoc {
                    inspector: r.inspector,
                    action: r.action,
                    tool: r.tool.clone(),
                    role: r.role.clone(),
                    scope: r.scope.clone(),
                    max_bytes: r.max_bytes,
                })
                .collect(),
            schemas: SchemasDoc::from(&policy.schemas),
            definitions: DefinitionsDoc {
                refuse_admission_with_findings: policy.definitions.refuse_admission_with_findings,
            },
            egress: EgressDoc {
                resolve_names: policy.egress.resolve_names,
            },
            hooks: policy.hooks.iter().map(HookDoc::from).collect(),
            secret_sources: policy
                .secret_sources
                .iter()
                .map(|s| SecretSourceDoc {
                    tool: s.tool.clone(),
                    fields: s.fields.clone(),
                })
                .collect(),
        }
    }
}

impl InspectionDoc {
    /// The section in an export: none when the policy is the defaults, so a catalog that
    /// never set one exports as it did before the section existed.
    pub fn exported(policy: &InspectionPolicy) -> Option<Self> {
        (*policy != InspectionPolicy::default()).then(|| Self::from(policy))
    }

    /// The policy the section states (checked against the catalog by `validate`).
    pub fn to_policy(&self) -> InspectionPolicy {
        InspectionPolicy {
            rules: self
                .rules
                .iter()
                .map(|r| InspectionRule {
                    inspector: r.inspector,
                    action: r.action,
                    tool: r.tool.clone(),
                    role: r.role.clone(),
                    scope: r.scope.clone(),
                    max_bytes: r.max_bytes,
                })
                .collect(),
            schemas: SchemaPolicy {
                close_open_objects: self.schemas.close_open_objects,
                validate_formats: self.schemas.validate_formats,
            },
            definitions: DefinitionPolicy {
                refuse_admission_with_findings: self.definitions.refuse_admission_with_findings,
            },
            egress: EgressPolicy {
                resolve_names: self.egress.resolve_names,
            },
            hooks: self.hooks.iter().map(GuardrailHook::from).collect(),
            secret_sources: self
                .secret_sources
                .iter()
                .map(|s| SecretSource {
                    tool: s.tool.clone(),
                    fields: s.fields.clone(),
                })
                .collect(),
        }
    }
}
