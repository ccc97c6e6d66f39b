//! Inspection policy: which content inspectors run on a governed call, and what the gateway
//! does with what they find (flag, redact, block), set per tool, role or scope.
//!
//! The policy is one catalog-wide document. A call's action for an inspector is the one of
//! the most specific rule that matches the call (tool over role over scope over a rule that
//! names none), the stricter action on a tie, and the built-in default when no rule matches
//! ([`Inspector::default_action`]).

use serde::{Deserialize, Serialize};

use super::hook::{GuardrailHook, HookStage};
use crate::slug::Slug;

/// A content inspector. Stored and shown by its snake-case name.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Inspector {
    /// Credentials in a result: cloud keys, private keys, tokens, high-entropy secrets.
    Secrets,
    /// Prompt-injection markers in a result: instructions to ignore earlier ones, role or
    /// system directives, requests for the system prompt or credentials; also in their
    /// homoglyph, zero-width and base64-wrapped forms.
    Injection,
    /// A result larger than the rule's `max_bytes`.
    ResultSize,
    /// A secret that a result of one upstream brought into the session, sent in the
    /// arguments of a call to another upstream.
    SecretFlow,
    /// A URL in a call's arguments whose host is loopback, link-local, private or a cloud
    /// metadata address (in any of its IP spellings).
    Egress,
}

impl Inspector {
    pub const ALL: [Inspector; 5] = [
        Inspector::Secrets,
        Inspector::Injection,
        Inspector::ResultSize,
        Inspector::SecretFlow,
        Inspector::Egress,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Secrets => "secrets",
            Self::Injection => "injection",
            Self::ResultSize => "result_size",
            Self::SecretFlow => "secret_flow",
            Self::Egress => "egress",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|i| i.as_str() == name)
    }

    /// What runs when no rule names this inspector: secrets are redacted (a credential in a
    /// result is never what the agent needs) and a secret moving between upstreams is
    /// blocked; injection markers and URLs into the private network are flagged (internal
    /// tools may take internal URLs: blocking them is the operator's call, or a `url_host`
    /// limit's), and results have no size cap.
    pub fn default_action(self) -> InspectAction {
        match self {
            Self::Secrets => InspectAction::Redact,
            Self::Injection | Self::Egress => InspectAction::Flag,
            Self::ResultSize => InspectAction::Off,
            Self::SecretFlow => InspectAction::Block,
        }
    }

    /// Whether this inspector reads a call's arguments (before deciding) rather than its
    /// result (before the agent's answer).
    pub fn reads_arguments(self) -> bool {
        matches!(self, Self::SecretFlow | Self::Egress)
    }
}

/// What the gateway does with a finding. Ordered from the mildest to the strictest.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum InspectAction {
    /// The inspector does not run.
    Off,
    /// The finding is audited; the content passes unchanged.
    #[default]
    Flag,
    /// The finding is audited and the matched content replaced by `[REDACTED:<kind>]`.
    /// Arguments cannot be rewritten on the agent's behalf, nor a result cut to a size
    /// safely: for the argument inspectors and `result_size` it acts as `block`.
    Redact,
    /// The finding is audited and the call refused: the agent gets a structured refusal
    /// (`CONTENT_BLOCKED`), never the content.
    Block,
}

impl InspectAction {
    pub const ALL: [InspectAction; 4] = [
        InspectAction::Off,
        InspectAction::Flag,
        InspectAction::Redact,
        InspectAction::Block,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Flag => "flag",
            Self::Redact => "redact",
            Self::Block => "block",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == name)
    }
}

/// One rule: `inspector` takes `action` for the calls it selects. A selector left out
/// matches every call; a rule with none is the catalog's default for that inspector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InspectionRule {
    pub inspector: Inspector,
    pub action: InspectAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Slug>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Slug>,
    /// For `result_size`: the largest result, in bytes of its JSON, that passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

/// Whether a rule's or a hook's selectors (each left out matches every call) select `call`.
pub(super) fn selects(
    tool: Option<&str>,
    role: Option<&Slug>,
    scope: Option<&Slug>,
    call: &CallScope<'_>,
) -> bool {
    tool.is_none_or(|t| t == call.tool)
        && role.is_none_or(|r| call.role.is_some_and(|c| c == r.as_str()))
        && scope.is_none_or(|s| call.scope.is_some_and(|c| c == s.as_str()))
}

impl InspectionRule {
    fn matches(&self, call: &CallScope<'_>) -> bool {
        selects(
            self.tool.as_deref(),
            self.role.as_ref(),
            self.scope.as_ref(),
            call,
        )
    }

    /// Tool over role over scope; a rule naming more is more specific than one naming less.
    fn specificity(&self) -> u8 {
        (u8::from(self.tool.is_some()) << 2)
            | (u8::from(self.role.is_some()) << 1)
            | u8::from(self.scope.is_some())
    }
}

/// How strictly arguments are checked against a tool's pinned input schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaPolicy {
    /// Refuse properties a schema does not declare even when it leaves its objects open
    /// (an object that declares `properties` and says nothing of `additionalProperties`).
    /// A schema that closes its objects is always enforced closed.
    #[serde(default)]
    pub close_open_objects: bool,
    /// Check `format` (date-time, email, uri, uuid, ipv4, …) as an assertion, not a note.
    #[serde(default = "yes")]
    pub validate_formats: bool,
}

impl Default for SchemaPolicy {
    fn default() -> Self {
        Self {
            close_open_objects: false,
            validate_formats: true,
        }
    }
}

/// What inspecting offered tool definitions may do to their admission.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DefinitionPolicy {
    /// Refuse to admit a tool while its offered definition has findings (hidden
    /// characters, instructions aimed at the model, a shadowed name, …).
    #[serde(default)]
    pub refuse_admission_with_findings: bool,
}

fn yes() -> bool {
    true
}

/// What the egress inspector does beyond reading URLs as written.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EgressPolicy {
    /// Resolve the host names of URLs in arguments (before deciding, bounded in time): a
    /// name that resolves to an internal address (`resolves_internal`) or does not resolve
    /// (`unresolvable`) is an `egress` finding, with `egress`'s action for the call.
    #[serde(default)]
    pub resolve_names: bool,
}

impl EgressPolicy {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// What found something in a call: a built-in inspector, or an external hook by its name.
/// Audited as the inspector's name, or as `hook:<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FoundBy {
    Inspector(Inspector),
    Hook(Slug),
}

impl From<Inspector> for FoundBy {
    fn from(inspector: Inspector) -> Self {
        Self::Inspector(inspector)
    }
}

impl PartialEq<Inspector> for FoundBy {
    fn eq(&self, other: &Inspector) -> bool {
        matches!(self, Self::Inspector(i) if i == other)
    }
}

impl std::fmt::Display for FoundBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Inspector(inspector) => f.write_str(inspector.as_str()),
            Self::Hook(name) => write!(f, "hook:{name}"),
        }
    }
}

impl Serialize for FoundBy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// The catalog's inspection policy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct InspectionPolicy {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<InspectionRule>,
    #[serde(default)]
    pub schemas: SchemaPolicy,
    #[serde(default)]
    pub definitions: DefinitionPolicy,
    /// Left out when it is the default, so stored policies and catalog revisions from
    /// before it existed stay what they were.
    #[serde(default, skip_serializing_if = "EgressPolicy::is_default")]
    pub egress: EgressPolicy,
    /// External hooks, run after the built-in inspectors, in this order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<GuardrailHook>,
    /// Tools whose purpose is to return secrets (a vault), each named once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_sources: Vec<SecretSource>,
}

/// A tool whose purpose is to return secrets: a vault, a credential broker. Its results
/// reach the agent (`secrets` flags what it finds there, whatever a rule says: redacting
/// a vault's answer defeats the tool), and every secret in them is remembered, so
/// `secret_flow` still stops it on its way to any other upstream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretSource {
    pub tool: String,
    /// JSON Pointers to the values the tool returns as secrets, whatever they look like
    /// (`/password`, `/secrets/*/value`: `*` is every item or member), read in the
    /// result's `structuredContent` and in each text block that is one JSON document.
    /// Empty: what the `secrets` detectors recognise, and nothing else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

/// Whether `pointer` is one a [`SecretSource`] may name: RFC 6901, so empty (the whole
/// document, which is not a secret's place) or starting with `/`, with `~` escaped.
pub fn valid_field_pointer(pointer: &str) -> bool {
    pointer.starts_with('/')
        && pointer.len() > 1
        && pointer
            .split('~')
            .skip(1)
            .all(|rest| rest.starts_with('0') || rest.starts_with('1'))
}

/// What a rule selects on: the call's tool, the role that authorised it (none before
/// deciding) and the session's scope.
#[derive(Debug, Clone, Copy)]
pub struct CallScope<'a> {
    pub tool: &'a str,
    pub role: Option<&'a str>,
    pub scope: Option<&'a str>,
}

/// What one inspector does for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    pub action: InspectAction,
    /// `result_size` only: the cap.
    pub max_bytes: Option<u64>,
}

impl InspectionPolicy {
    /// The action `inspector` takes on `call`: the most specific matching rule's, the
    /// stricter on a tie, else the built-in default. A `result_size` rule without a cap is
    /// off (there is nothing to compare with).
    pub fn resolve(&self, inspector: Inspector, call: &CallScope<'_>) -> Resolved {
        let best = self
            .rules
            .iter()
            .filter(|r| r.inspector == inspector && r.matches(call))
            .max_by_key(|r| (r.specificity(), r.action));
        let resolved = match best {
            Some(rule) => Resolved {
                action: rule.action,
                max_bytes: rule.max_bytes,
            },
            None => Resolved {
                action: inspector.default_action(),
                max_bytes: None,
            },
        };
        if inspector == Inspector::ResultSize && resolved.max_bytes.is_none() {
            return Resolved {
                action: InspectAction::Off,
                max_bytes: None,
            };
        }
        resolved
    }

    /// The mark of `tool` as a secret source, if it has one.
    pub fn secret_source(&self, tool: &str) -> Option<&SecretSource> {
        self.secret_sources.iter().find(|s| s.tool == tool)
    }

    /// The hooks that read `stage` of `call`, in their order.
    pub fn hooks_for<'a>(
        &'a self,
        stage: HookStage,
        call: &'a CallScope<'a>,
    ) -> impl Iterator<Item = &'a GuardrailHook> + 'a {
        self.hooks.iter().filter(move |h| h.selects(stage, call))
    }
}

#[cfg(test)]
mod tests {
    use super::super::hook::tests::hook;
    use super::*;

    fn slug(s: &str) -> Slug {
        Slug::parse(s).unwrap()
    }

    fn rule(inspector: Inspector, action: InspectAction) -> InspectionRule {
        InspectionRule {
            inspector,
            action,
            tool: None,
            role: None,
            scope: None,
            max_bytes: None,
        }
    }

    const CALL: CallScope<'static> = CallScope {
        tool: "lookup_customer",
        role: Some("tier-1-support"),
        scope: Some("support"),
    };

    #[test]
    fn an_inspector_no_rule_names_takes_its_built_in_default() {
        let policy = InspectionPolicy::default();
        assert_eq!(
            policy.resolve(Inspector::Secrets, &CALL).action,
            InspectAction::Redact
        );
        assert_eq!(
            policy.resolve(Inspector::Injection, &CALL).action,
            InspectAction::Flag
        );
        assert_eq!(
            policy.resolve(Inspector::ResultSize, &CALL).action,
            InspectAction::Off
        );
    }

    #[test]
    fn a_tool_rule_wins_over_a_role_rule_and_a_role_rule_over_a_scope_rule() {
        let mut by_scope = rule(Inspector::Injection, InspectAction::Block);
        by_scope.scope = Some(slug("support"));
        let mut by_role = rule(Inspector::Injection, InspectAction::Off);
        by_role.role = Some(slug("tier-1-support"));
        let mut policy = InspectionPolicy {
            rules: vec![by_scope, by_role],
            ..InspectionPolicy::default()
        };
        assert_eq!(
            policy.resolve(Inspector::Injection, &CALL).action,
            InspectAction::Off
        );
        let mut by_tool = rule(Inspector::Injection, InspectAction::Redact);
        by_tool.tool = Some("lookup_customer".to_owned());
        policy.rules.push(by_tool);
        assert_eq!(
            policy.resolve(Inspector::Injection, &CALL).action,
            InspectAction::Redact
        );
        let other = CallScope {
            tool: "issue_refund",
            ..CALL
        };
        assert_eq!(
            policy.resolve(Inspector::Injection, &other).action,
            InspectAction::Off
        );
    }

    #[test]
    fn a_rule_naming_a_role_does_not_match_before_a_role_authorised_the_call() {
        let mut by_role = rule(Inspector::Egress, InspectAction::Off);
        by_role.role = Some(slug("tier-1-support"));
        let policy = InspectionPolicy {
            rules: vec![by_role],
            ..InspectionPolicy::default()
        };
        let undecided = CallScope { role: None, ..CALL };
        assert_eq!(
            policy.resolve(Inspector::Egress, &undecided).action,
            Inspector::Egress.default_action()
        );
    }

    #[test]
    fn equally_specific_rules_resolve_to_the_stricter_action() {
        let policy = InspectionPolicy {
            rules: vec![
                rule(Inspector::Secrets, InspectAction::Block),
                rule(Inspector::Secrets, InspectAction::Flag),
            ],
            ..InspectionPolicy::default()
        };
        assert_eq!(
            policy.resolve(Inspector::Secrets, &CALL).action,
            InspectAction::Block
        );
    }

    #[test]
    fn a_size_rule_without_a_cap_is_off_and_with_one_carries_it() {
        let mut capped = rule(Inspector::ResultSize, InspectAction::Block);
        let policy = InspectionPolicy {
            rules: vec![capped.clone()],
            ..InspectionPolicy::default()
        };
        assert_eq!(
            policy.resolve(Inspector::ResultSize, &CALL).action,
            InspectAction::Off
        );
        capped.max_bytes = Some(4096);
        let policy = InspectionPolicy {
            rules: vec![capped],
            ..InspectionPolicy::default()
        };
        let resolved = policy.resolve(Inspector::ResultSize, &CALL);
        assert_eq!(resolved.action, InspectAction::Block);
        assert_eq!(resolved.max_bytes, Some(4096));
    }

    #[test]
    fn a_hook_is_audited_as_hook_and_its_name_beside_the_built_in_inspectors() {
        assert_eq!(
            serde_json::to_value(FoundBy::Hook(slug("moderation"))).unwrap(),
            "hook:moderation"
        );
        assert_eq!(
            serde_json::to_value(FoundBy::from(Inspector::SecretFlow)).unwrap(),
            "secret_flow"
        );
        assert_eq!(FoundBy::from(Inspector::Egress), Inspector::Egress);
    }

    #[test]
    fn the_policy_reads_back_from_its_json_with_defaults_for_what_it_leaves_out() {
        let policy: InspectionPolicy = serde_json::from_str(
            r#"{"rules":[{"inspector":"injection","action":"block","tool":"fetch_page"}]}"#,
        )
        .unwrap();
        assert_eq!(policy.rules[0].tool.as_deref(), Some("fetch_page"));
        assert!(policy.schemas.validate_formats);
        assert!(!policy.schemas.close_open_objects);
        assert!(!policy.definitions.refuse_admission_with_findings);
        assert!(policy.hooks.is_empty());
        let hooked: InspectionPolicy = serde_json::from_str(
            r#"{"hooks":[{"name":"moderation","url":"https://guard.example/","stages":["result"],"secret_env":"GUARD_SECRET"}]}"#,
        )
        .unwrap();
        assert_eq!(
            hooked.hooks,
            [hook("moderation")].map(|mut h| {
                h.url = "https://guard.example/".to_owned();
                h
            })
        );
        let again: InspectionPolicy =
            serde_json::from_value(serde_json::to_value(&policy).unwrap()).unwrap();
        assert_eq!(again, policy);
    }
}
