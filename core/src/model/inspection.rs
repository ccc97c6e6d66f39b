//! Inspection policy: which content inspectors run on a governed call, and what the gateway
//! does with what they find (flag, redact, block), set per tool, role or scope.
//!
//! The policy is one catalog-wide document. A call's action for an inspector is the one of
//! the most specific rule that matches the call (tool over role over scope over a rule that
//! names none), the stricter action on a tie, and the built-in default when no rule matches
//! ([`Inspector::default_action`]).

use serde::{Deserialize, Serialize};

use super::{Catalog, check_upstream_url};
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
fn selects(
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

/// Which part of a call an external hook reads.
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
pub enum HookStage {
    /// The call's arguments, before deciding (no role has authorised the call yet).
    Arguments,
    /// The tool's result, after the built-in inspectors' redactions, before the answer.
    Result,
}

impl HookStage {
    pub const ALL: [HookStage; 2] = [HookStage::Arguments, HookStage::Result];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Arguments => "arguments",
            Self::Result => "result",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// What the gateway does when a hook cannot be asked or gives no usable answer (a timeout,
/// an error status, an unreadable answer, its signing secret unset).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum HookFailure {
    /// Fail closed: the call (or its result) is blocked, as a `deny` would.
    #[default]
    Block,
    /// Fail open: the failure is audited and the content passes.
    Allow,
}

impl HookFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Block => "block",
            Self::Allow => "allow",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        [Self::Block, Self::Allow]
            .into_iter()
            .find(|f| f.as_str() == name)
    }
}

/// The default time a hook has to answer.
pub const HOOK_TIMEOUT_MS: u64 = 2000;
/// The bounds of a hook's `timeout_ms`: a hook runs under the session's lock.
pub const HOOK_TIMEOUT_RANGE: std::ops::RangeInclusive<u64> = 50..=30_000;

fn hook_timeout() -> u64 {
    HOOK_TIMEOUT_MS
}

/// An external guardrail hook: a web service, signed to with the secret in `secret_env`,
/// that answers `allow`, `deny` or (for a result) `modify` for the calls it selects, after
/// the built-in inspectors. Selectors as a rule's; every hook that selects a call runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardrailHook {
    pub name: Slug,
    /// `https://`, or `http://` to this machine.
    pub url: String,
    pub stages: Vec<HookStage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Slug>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Slug>,
    #[serde(default = "hook_timeout")]
    pub timeout_ms: u64,
    #[serde(default)]
    pub on_error: HookFailure,
    /// The environment variable of the gateway's process that holds the signing secret
    /// (the secret itself is never in the catalog).
    pub secret_env: String,
}

impl GuardrailHook {
    /// Whether this hook reads `stage` of `call`.
    pub fn selects(&self, stage: HookStage, call: &CallScope<'_>) -> bool {
        self.stages.contains(&stage)
            && selects(
                self.tool.as_deref(),
                self.role.as_ref(),
                self.scope.as_ref(),
                call,
            )
    }
}

/// Every problem of `hooks` against `catalog`, as (the hook's position, its field, what is
/// wrong): names unique; a URL the gateway may dial (`https://`, or `http://` to this
/// machine); at least one stage, each once; a timeout within [`HOOK_TIMEOUT_RANGE`]; an
/// environment variable's name for the secret; selectors the catalog has.
pub fn hook_issues(
    catalog: &Catalog,
    hooks: &[GuardrailHook],
) -> Vec<(usize, &'static str, String)> {
    let mut issues = Vec::new();
    let mut names = std::collections::HashSet::new();
    for (i, hook) in hooks.iter().enumerate() {
        let mut issue = |field, message: String| issues.push((i, field, message));
        if !names.insert(&hook.name) {
            issue(
                "name",
                format!("another hook is already named `{}`", hook.name),
            );
        }
        if check_upstream_url(&hook.url, false).is_err() {
            issue(
                "url",
                format!(
                    "`{}` must be an https:// URL, or http:// to this machine (localhost, \
                     127.0.0.1, ::1): a hook receives calls and results",
                    hook.url
                ),
            );
        }
        if hook.stages.is_empty() {
            issue(
                "stages",
                "name at least one stage: `arguments`, `result`".to_owned(),
            );
        }
        let stages: std::collections::BTreeSet<_> = hook.stages.iter().collect();
        if stages.len() < hook.stages.len() {
            issue("stages", "a stage is named twice".to_owned());
        }
        if !HOOK_TIMEOUT_RANGE.contains(&hook.timeout_ms) {
            issue(
                "timeout_ms",
                format!(
                    "must be between {} and {} ms",
                    HOOK_TIMEOUT_RANGE.start(),
                    HOOK_TIMEOUT_RANGE.end()
                ),
            );
        }
        let env_name = !hook.secret_env.is_empty()
            && !hook.secret_env.starts_with(|c: char| c.is_ascii_digit())
            && hook
                .secret_env
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !env_name {
            issue(
                "secret_env",
                "name the environment variable that holds the signing secret (letters, digits \
                 and `_`), not the secret itself"
                    .to_owned(),
            );
        }
        if let Some(tool) = &hook.tool
            && catalog.tool(tool).is_none()
        {
            issue("tool", format!("the catalog has no tool `{tool}`"));
        }
        if let Some(role) = &hook.role
            && catalog.role(role.as_str()).is_none()
        {
            issue("role", format!("the catalog has no role `{role}`"));
        }
        if let Some(scope) = &hook.scope
            && catalog.scope(scope.as_str()).is_none()
        {
            issue("scope", format!("the catalog has no scope `{scope}`"));
        }
    }
    issues
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

    fn hook(name: &str) -> GuardrailHook {
        GuardrailHook {
            name: slug(name),
            url: "https://guard.example/check".to_owned(),
            stages: vec![HookStage::Result],
            tool: None,
            role: None,
            scope: None,
            timeout_ms: HOOK_TIMEOUT_MS,
            on_error: HookFailure::Block,
            secret_env: "GUARD_SECRET".to_owned(),
        }
    }

    #[test]
    fn a_hook_reads_only_its_stages_of_the_calls_its_selectors_match() {
        let mut by_role = hook("moderation");
        by_role.role = Some(slug("tier-1-support"));
        assert!(by_role.selects(HookStage::Result, &CALL));
        assert!(!by_role.selects(HookStage::Arguments, &CALL));
        let undecided = CallScope { role: None, ..CALL };
        assert!(!by_role.selects(HookStage::Result, &undecided));
        let mut other_tool = hook("other");
        other_tool.tool = Some("issue_refund".to_owned());
        let policy = InspectionPolicy {
            hooks: vec![by_role, other_tool],
            ..InspectionPolicy::default()
        };
        let names: Vec<&str> = policy
            .hooks_for(HookStage::Result, &CALL)
            .map(|h| h.name.as_str())
            .collect();
        assert_eq!(names, ["moderation"]);
    }

    #[test]
    fn a_hook_is_refused_for_a_remote_plain_url_a_taken_name_a_bad_timeout_or_a_secret_in_place_of_its_variable()
     {
        let catalog = Catalog::default();
        assert!(hook_issues(&catalog, &[hook("moderation")]).is_empty());
        let mut local = hook("local");
        local.url = "http://127.0.0.1:8080/check".to_owned();
        assert!(hook_issues(&catalog, &[local]).is_empty());
        let mut remote = hook("moderation");
        remote.url = "http://guard.example/check".to_owned();
        remote.timeout_ms = 10;
        remote.secret_env = "s3cr3t value!".to_owned();
        remote.stages = vec![];
        remote.tool = Some("lookup_customer".to_owned());
        let fields: Vec<(usize, &str)> = hook_issues(&catalog, &[hook("moderation"), remote])
            .into_iter()
            .map(|(i, field, _)| (i, field))
            .collect();
        assert_eq!(
            fields,
            [
                (1, "name"),
                (1, "url"),
                (1, "stages"),
                (1, "timeout_ms"),
                (1, "secret_env"),
                (1, "tool")
            ]
        );
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
