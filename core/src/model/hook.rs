//! External guardrail hooks: a web service the operator runs, asked about the calls it
//! selects after the built-in inspectors, and how a hook is checked when it is configured.

use serde::{Deserialize, Serialize};

use super::inspection::{CallScope, selects};
use super::{Catalog, check_upstream_url};
use crate::slug::Slug;

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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::model::InspectionPolicy;

    fn slug(s: &str) -> Slug {
        Slug::parse(s).unwrap()
    }

    const CALL: CallScope<'static> = CallScope {
        tool: "lookup_customer",
        role: Some("tier-1-support"),
        scope: Some("support"),
    };

    pub(crate) fn hook(name: &str) -> GuardrailHook {
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
}
