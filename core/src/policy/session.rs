//! A governance session as `decide` sees it: who owns it, what it learned, what it used.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::Permit;
use crate::slug::Slug;

/// A skill version a session learned with a role; the audit records which one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnedSkill {
    pub skill: Slug,
    pub version: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnedRole {
    pub role: Slug,
    pub skills: Vec<LearnedSkill>,
}

/// What the session's allowed calls of one tool have used, whichever role authorised them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolUsage {
    pub count: u32,
    /// Sums of the arguments that some cumulative cap tracks.
    #[serde(default)]
    pub sums: BTreeMap<String, Decimal>,
}

/// One success of a prerequisite tool, as bound step-order guards compare it: digests of
/// the argument values and result values that guards name (never the values themselves,
/// which may be personal data).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub args: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub results: BTreeMap<String, String>,
}

/// What a held call reserved in its session, kept with the hold so that a denial or an
/// expiry can give exactly that back. Releasing never takes a count or sum below zero.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldUsage {
    pub tool: String,
    pub count: bool,
    #[serde(default)]
    pub amounts: BTreeMap<String, Decimal>,
}

/// Successes of one prerequisite a session keeps for bound guards: the newest ones. An older
/// success falling out can only make a guard deny (fail closed), never allow.
pub const MAX_OUTCOMES: usize = 32;

/// The call history limits need: usage per tool of allowed calls (session-wide, so a second
/// role cannot reopen a cap the first one filled), the tools that succeeded, and the
/// successes bound guards compare against.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StoredUsage")]
pub struct Usage {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    tools: BTreeMap<String, ToolUsage>,
    #[serde(default)]
    succeeded: BTreeSet<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    outcomes: BTreeMap<String, Vec<Outcome>>,
}

/// The stored form, which also reads sessions saved when usage was kept per role: their
/// usage is added up per tool, so a cap never forgets a call made before an upgrade.
#[derive(Deserialize)]
struct StoredUsage {
    #[serde(default)]
    tools: BTreeMap<String, ToolUsage>,
    #[serde(default)]
    by_role: BTreeMap<String, BTreeMap<String, ToolUsage>>,
    #[serde(default)]
    succeeded: BTreeSet<String>,
    #[serde(default)]
    outcomes: BTreeMap<String, Vec<Outcome>>,
}

impl From<StoredUsage> for Usage {
    fn from(stored: StoredUsage) -> Self {
        let mut tools = stored.tools;
        for (tool, usage) in stored.by_role.into_values().flatten() {
            let total = tools.entry(tool).or_default();
            total.count = total.count.saturating_add(usage.count);
            for (arg, sum) in usage.sums {
                let entry = total.sums.entry(arg).or_default();
                *entry = entry.saturating_add(sum);
            }
        }
        Self {
            tools,
            succeeded: stored.succeeded,
            outcomes: stored.outcomes,
        }
    }
}

impl Usage {
    pub fn tool_usage(&self, tool: &str) -> Option<&ToolUsage> {
        self.tools.get(tool)
    }

    /// How many allowed calls of `tool` this session has made that a count cap tracks.
    pub fn count(&self, tool: &str) -> u32 {
        self.tool_usage(tool).map_or(0, |u| u.count)
    }

    /// The sum of `tool.arg` over this session's allowed calls.
    pub fn sum(&self, tool: &str, arg: &str) -> Decimal {
        self.tool_usage(tool)
            .and_then(|u| u.sums.get(arg).copied())
            .unwrap_or(Decimal::ZERO)
    }

    pub fn has_succeeded(&self, tool: &str) -> bool {
        self.succeeded.contains(tool)
    }

    /// The remembered successes of `tool`, oldest first.
    pub fn outcomes(&self, tool: &str) -> &[Outcome] {
        self.outcomes.get(tool).map_or(&[], Vec::as_slice)
    }

    /// Every tool with its usage, for persisting and display.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &ToolUsage)> {
        self.tools.iter().map(|(tool, u)| (tool.as_str(), u))
    }

    pub fn succeeded_tools(&self) -> impl Iterator<Item = &str> {
        self.succeeded.iter().map(String::as_str)
    }
}

/// A session, loaded by the MCP layer from the store before each decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionView {
    pub id: String,
    /// The agent key that created the session; only that key may use it.
    pub owner_key_id: String,
    pub scope: Slug,
    pub expires_at: DateTime<Utc>,
    /// Learned roles in learn order: the first whose rules pass authorizes a call.
    pub learned: Vec<LearnedRole>,
    #[serde(default)]
    pub usage: Usage,
    /// Secrets results brought into the session, by fingerprint and the upstream that
    /// returned them: a call sending one to another upstream is a secret flow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets_seen: Vec<SeenSecret>,
}

/// A secret a result brought into a session: its SHA-256 fingerprint (never the value) and
/// the upstream whose result carried it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenSecret {
    pub fingerprint: String,
    pub upstream: String,
}

/// The most secrets a session remembers; the oldest are forgotten first.
pub const MAX_SEEN_SECRETS: usize = 64;

impl SessionView {
    pub fn new(
        id: impl Into<String>,
        owner_key_id: impl Into<String>,
        scope: Slug,
        expires_at: DateTime<Utc>,
    ) -> Self {
        Self {
            id: id.into(),
            owner_key_id: owner_key_id.into(),
            scope,
            expires_at,
            learned: Vec::new(),
            usage: Usage::default(),
            secrets_seen: Vec::new(),
        }
    }

    /// Remembers secrets `upstream` returned; `false` when all were known already.
    pub fn see_secrets<'a>(
        &mut self,
        upstream: &str,
        fingerprints: impl IntoIterator<Item = &'a str>,
    ) -> bool {
        let mut changed = false;
        for fingerprint in fingerprints {
            if self
                .secrets_seen
                .iter()
                .any(|s| s.fingerprint == fingerprint && s.upstream == upstream)
            {
                continue;
            }
            if self.secrets_seen.len() >= MAX_SEEN_SECRETS {
                self.secrets_seen.remove(0);
            }
            self.secrets_seen.push(SeenSecret {
                fingerprint: fingerprint.to_owned(),
                upstream: upstream.to_owned(),
            });
            changed = true;
        }
        changed
    }

    pub fn has_learned(&self, role: &str) -> bool {
        self.learned.iter().any(|l| l.role.as_str() == role)
    }

    /// Records that the role was learned. Learning a role again refreshes its skill
    /// versions but keeps its place in learn order, so re-reading a role cannot reorder
    /// which role authorizes first.
    pub fn learn(&mut self, role: Slug, skills: Vec<LearnedSkill>) {
        match self.learned.iter_mut().find(|l| l.role == role) {
            Some(existing) => existing.skills = skills,
            None => self.learned.push(LearnedRole { role, skills }),
        }
    }

    /// Applies the usage a permit reserved. The caller does this under the same per-session
    /// serialization as the decision, so two calls cannot both fit under one cap.
    pub fn reserve(&mut self, permit: &Permit) {
        let reservation = permit.reservation();
        if reservation.is_empty() {
            return;
        }
        let usage = self
            .usage
            .tools
            .entry(permit.tool().to_owned())
            .or_default();
        if reservation.counts() {
            usage.count = usage.count.saturating_add(1);
        }
        for reserved in reservation.amounts() {
            let sum = usage.sums.entry(reserved.arg.clone()).or_default();
            *sum = sum.saturating_add(reserved.amount);
        }
    }

    /// Gives back what a hold reserved (it was denied, expired, or is about to be decided
    /// again on resuming).
    pub fn release(&mut self, held: &HeldUsage) {
        let Some(usage) = self.usage.tools.get_mut(&held.tool) else {
            return;
        };
        if held.count {
            usage.count = usage.count.saturating_sub(1);
        }
        for (arg, amount) in &held.amounts {
            if let Some(sum) = usage.sums.get_mut(arg) {
                *sum = (*sum - *amount).max(Decimal::ZERO);
            }
        }
    }

    /// Records that a call of `tool` succeeded upstream, which plain step-order guards wait
    /// for, and (when bound guards compare against `tool`) what it succeeded with.
    /// Returns whether anything changed, i.e. whether the session must be saved.
    pub fn record_success(&mut self, tool: &str, outcome: Option<Outcome>) -> bool {
        let mut changed = false;
        if !self.usage.succeeded.contains(tool) {
            self.usage.succeeded.insert(tool.to_owned());
            changed = true;
        }
        if let Some(outcome) = outcome {
            let kept = self.usage.outcomes.entry(tool.to_owned()).or_default();
            // The same success twice proves nothing more: keep room for different ones.
            if !kept.contains(&outcome) {
                kept.push(outcome);
                if kept.len() > MAX_OUTCOMES {
                    kept.remove(0);
                }
                changed = true;
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_stored_per_role_is_read_as_the_sum_per_tool() {
        let stored = serde_json::json!({
            "by_role": {
                "tier-1-support": {"process_refund": {"count": 2, "sums": {"amount": "800"}}},
                "retention-desk": {"process_refund": {"count": 1, "sums": {"amount": "400"}}}
            },
            "succeeded": ["check_refund_eligibility"]
        });
        let usage: Usage = serde_json::from_value(stored).unwrap();
        assert_eq!(usage.count("process_refund"), 3);
        assert_eq!(usage.sum("process_refund", "amount"), Decimal::from(1200));
        assert!(usage.has_succeeded("check_refund_eligibility"));
        let again: Usage = serde_json::from_value(serde_json::to_value(&usage).unwrap()).unwrap();
        assert_eq!(again, usage);
    }

    #[test]
    fn releasing_a_hold_gives_back_exactly_its_usage_and_never_goes_below_zero() {
        let mut view = SessionView::new("s", "1", Slug::parse("support").unwrap(), Utc::now());
        let mut total = ToolUsage {
            count: 2,
            ..ToolUsage::default()
        };
        total.sums.insert("amount".into(), Decimal::from(500));
        view.usage.tools.insert("refund".into(), total);
        let held = HeldUsage {
            tool: "refund".into(),
            count: true,
            amounts: [("amount".to_owned(), Decimal::from(300))].into(),
        };
        view.release(&held);
        assert_eq!(view.usage.count("refund"), 1);
        assert_eq!(view.usage.sum("refund", "amount"), Decimal::from(200));
        view.release(&held);
        view.release(&held);
        assert_eq!(view.usage.count("refund"), 0);
        assert_eq!(view.usage.sum("refund", "amount"), Decimal::ZERO);
    }

    #[test]
    fn a_session_keeps_only_the_newest_successes_of_a_prerequisite() {
        let mut view = SessionView::new("s", "1", Slug::parse("support").unwrap(), Utc::now());
        for n in 0..(MAX_OUTCOMES + 5) {
            let mut outcome = Outcome::default();
            outcome.args.insert("order_id".into(), n.to_string());
            assert!(view.record_success("check", Some(outcome)));
        }
        let kept = view.usage.outcomes("check");
        assert_eq!(kept.len(), MAX_OUTCOMES);
        assert_eq!(kept[0].args["order_id"], "5");
        let same = kept.last().cloned();
        assert!(!view.record_success("check", same));
    }
}
