//! What `decide` answers: a [`Permit`] that only the policy engine can mint, or a [`Denial`].

use std::collections::BTreeMap;
use std::fmt;

use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::{Map, Value};

use super::digest::value_digest;
use super::remedy::Remedy;
use super::{HeldUsage, Outcome};
use crate::slug::Slug;

/// The arguments of a downstream call: one JSON object from the MCP adapter to the upstream.
pub type Arguments = Map<String, Value>;

/// Why a call was denied, in the codes the MCP `structuredContent` carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DenyCode {
    AccessDenied,
    GovernanceViolation,
    InvalidArguments,
    /// The tool exists but cannot be governed (its input schema does not compile), so no
    /// call of it can run until an admin fixes it.
    ToolUnusable,
    /// The gateway itself failed while handling the request; nothing further ran.
    InternalError,
    /// The tool is quarantined: new and not yet admitted, or its upstream's definition
    /// differs from the one an admin pinned. An agent reads it as an access denial.
    ToolQuarantined,
    /// The tool's upstream is quarantined: its identity (certificate key, `serverInfo`)
    /// differs from the pinned one, and no admin has admitted the new one yet.
    UpstreamQuarantined,
    /// A content inspector set to block found something in the call's arguments (an
    /// internal URL, a secret another upstream returned) or in its result.
    ContentBlocked,
}

impl DenyCode {
    /// The words a model reads at the start of a denial.
    pub fn label(self) -> &'static str {
        match self {
            Self::AccessDenied => "ACCESS DENIED",
            Self::GovernanceViolation => "GOVERNANCE VIOLATION",
            Self::InvalidArguments => "INVALID ARGUMENTS",
            Self::ToolUnusable => "TOOL UNUSABLE",
            Self::InternalError => "INTERNAL ERROR",
            Self::ToolQuarantined => "ACCESS DENIED",
            Self::UpstreamQuarantined => "ACCESS DENIED",
            Self::ContentBlocked => "CONTENT BLOCKED",
        }
    }

    /// The code as `structuredContent` and the audit spell it: `ACCESS_DENIED`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AccessDenied => "ACCESS_DENIED",
            Self::GovernanceViolation => "GOVERNANCE_VIOLATION",
            Self::InvalidArguments => "INVALID_ARGUMENTS",
            Self::ToolUnusable => "TOOL_UNUSABLE",
            Self::InternalError => "INTERNAL_ERROR",
            Self::ToolQuarantined => "TOOL_QUARANTINED",
            Self::UpstreamQuarantined => "UPSTREAM_QUARANTINED",
            Self::ContentBlocked => "CONTENT_BLOCKED",
        }
    }
}

/// An amount a call adds to a cumulative cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedAmount {
    pub arg: String,
    pub amount: Decimal,
}

/// The session usage a permitted call takes: a count, amounts, or nothing at all when no cap
/// of the catalog reads this tool's usage (then nothing needs storing before the call).
#[derive(Debug, PartialEq, Eq, Default)]
pub struct Reservation {
    count: bool,
    amounts: Vec<ReservedAmount>,
}

impl Reservation {
    pub(super) fn new(count: bool, amounts: Vec<ReservedAmount>) -> Self {
        Self { count, amounts }
    }

    pub fn is_empty(&self) -> bool {
        !self.count && self.amounts.is_empty()
    }

    pub fn counts(&self) -> bool {
        self.count
    }

    pub fn amounts(&self) -> &[ReservedAmount] {
        &self.amounts
    }
}

/// What a permitted call must remember when it succeeds, for bound step-order guards:
/// digests of the arguments guards compare, and the result pointers they read.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SuccessNote {
    tool: String,
    args: BTreeMap<String, String>,
    pointers: Vec<String>,
}

impl SuccessNote {
    pub(super) fn new(tool: String, args: BTreeMap<String, String>, pointers: Vec<String>) -> Self {
        Self {
            tool,
            args,
            pointers,
        }
    }

    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Whether a bound guard compares against this tool's results (not only its
    /// arguments): a replay, which has no results, cannot know what such a guard sees.
    pub fn reads_results(&self) -> bool {
        !self.pointers.is_empty()
    }

    /// Whether a bound guard compares against successes of this call's tool.
    pub fn is_watched(&self) -> bool {
        !self.args.is_empty() || !self.pointers.is_empty()
    }

    /// The outcome to store, given the downstream's structured result; `None` when no
    /// bound guard compares against this tool.
    pub fn outcome(&self, result: Option<&Value>) -> Option<Outcome> {
        if !self.is_watched() {
            return None;
        }
        let results = self
            .pointers
            .iter()
            .filter_map(|pointer| {
                let value = result?.pointer(pointer)?;
                Some((pointer.clone(), value_digest(value)))
            })
            .collect();
        Some(Outcome {
            args: self.args.clone(),
            results,
        })
    }
}

/// Permission to execute one downstream call, minted only by [`super::decide`]. It owns the
/// call's arguments, names the role that authorised it and the usage to reserve; the
/// reservation, the `call_allowed` event and the upstream call each take it, and the
/// upstream call consumes it, so one permit runs at most one call.
pub struct Permit {
    tool: String,
    role: Slug,
    arguments: Arguments,
    reservation: Reservation,
    note: SuccessNote,
}

impl Permit {
    pub(super) fn new(
        tool: String,
        role: Slug,
        arguments: Arguments,
        reservation: Reservation,
        note: SuccessNote,
    ) -> Self {
        Self {
            tool,
            role,
            arguments,
            reservation,
            note,
        }
    }

    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The learned role whose limits authorised the call.
    pub fn role(&self) -> &Slug {
        &self.role
    }

    pub fn arguments(&self) -> &Arguments {
        &self.arguments
    }

    pub fn reservation(&self) -> &Reservation {
        &self.reservation
    }

    /// The usage this permit reserves, in the form a hold keeps to release it later.
    pub fn held_usage(&self) -> HeldUsage {
        HeldUsage {
            tool: self.tool.clone(),
            count: self.reservation.count,
            amounts: self
                .reservation
                .amounts
                .iter()
                .map(|a| (a.arg.clone(), a.amount))
                .collect(),
        }
    }

    /// Whether the session must be saved with this permit's usage before the call runs.
    pub fn reserves_usage(&self) -> bool {
        !self.reservation.is_empty()
    }

    /// Gives the arguments back without executing, e.g. to decide again after another
    /// process changed the session in between.
    pub fn into_arguments(self) -> Arguments {
        self.arguments
    }

    /// Takes what a success of this call must leave for bound guards; the caller keeps it
    /// while the permit goes to the upstream.
    pub fn take_note(&mut self) -> SuccessNote {
        std::mem::take(&mut self.note)
    }

    /// Splits the permit for execution: the tool and arguments go to the upstream.
    pub fn into_call(self) -> (String, Arguments, SuccessNote) {
        (self.tool, self.arguments, self.note)
    }
}

/// Arguments may be personal data: a permit's debug output names only tool and role.
impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("tool", &self.tool)
            .field("role", &self.role)
            .field("reservation", &self.reservation)
            .finish_non_exhaustive()
    }
}

/// A refused call: the code it is counted as, the rule, who refused it and what would
/// satisfy it. The agent reads it as the gateway's answer (`gateway::answer`).
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    pub code: DenyCode,
    /// A sentence naming the rule that denied, for the model and the audit.
    pub rule: String,
    /// The learned role whose rule denied, when one did.
    pub role: Option<Slug>,
    /// The scope whose guardrail denied, when one did.
    pub guardrail_of: Option<Slug>,
    pub available_tools: Vec<String>,
    /// What would satisfy the rule, where something the caller can do would.
    pub remedy: Option<Remedy>,
}

impl Denial {
    pub fn new(code: DenyCode, rule: impl Into<String>) -> Self {
        Self {
            code,
            rule: rule.into(),
            role: None,
            guardrail_of: None,
            available_tools: Vec::new(),
            remedy: None,
        }
    }

    pub fn with_available(mut self, tools: Vec<String>) -> Self {
        self.available_tools = tools;
        self
    }

    pub fn with_remedy(mut self, remedy: Option<Remedy>) -> Self {
        self.remedy = remedy;
        self
    }

    pub fn by_role(mut self, role: Slug) -> Self {
        self.role = Some(role);
        self
    }

    pub fn by_guardrail(mut self, scope: Slug) -> Self {
        self.guardrail_of = Some(scope);
        self
    }
}

/// The text a model reads: `GOVERNANCE VIOLATION (role tier-1-support): … Available tools: …`.
impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code.label())?;
        match (&self.role, &self.guardrail_of) {
            (_, Some(scope)) => write!(f, " (guardrail of scope {scope})")?,
            (Some(role), None) => write!(f, " (role {role})")?,
            (None, None) => {}
        }
        write!(f, ": {}", self.rule)?;
        if !self.available_tools.is_empty() {
            write!(f, " Available tools: {}.", self.available_tools.join(", "))?;
        }
        Ok(())
    }
}

/// A call every limit allows but that needs a reviewer's approval first: it runs only when
/// it comes back with an approval of exactly these arguments. It carries the permit whose
/// usage is reserved while the call waits, so a held call cannot be overtaken by others
/// that a cap only fits one of.
#[derive(Debug)]
pub struct Hold {
    permit: Permit,
    rule: String,
    minutes: u32,
}

impl Hold {
    pub(super) fn new(permit: Permit, rule: String, minutes: u32) -> Self {
        Self {
            permit,
            rule,
            minutes,
        }
    }

    /// The permit the hold reserves usage with; it executes nothing until approved.
    pub fn permit(&self) -> &Permit {
        &self.permit
    }

    /// The requires-approval rule's sentence.
    pub fn rule(&self) -> &str {
        &self.rule
    }

    /// How long the hold waits for a reviewer, and its approval stays valid.
    pub fn minutes(&self) -> u32 {
        self.minutes
    }

    pub fn into_permit(self) -> Permit {
        self.permit
    }
}

/// The outcome of [`super::decide`].
#[derive(Debug)]
pub enum Decision {
    Allow(Permit),
    Hold(Hold),
    Deny(Denial),
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Self::Allow(_))
    }

    pub fn deny_code(&self) -> Option<DenyCode> {
        match self {
            Self::Deny(denial) => Some(denial.code),
            Self::Allow(_) | Self::Hold(_) => None,
        }
    }
}
