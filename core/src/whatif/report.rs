//! What a replay found: the calls whose outcome would change, and those it cannot decide.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// The outcome of a decision, as a reviewer compares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Allowed,
    Held,
    Denied,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Held => "held",
            Self::Denied => "denied",
        }
    }
}

/// What was decided: a call of a tool, or the learning of a role.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Subject {
    Call { tool: String },
    Learn { role: String },
}

/// An audited decision the proposed catalog would decide otherwise.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub session_id: String,
    /// The audit event of the decision.
    pub seq: u64,
    pub at: DateTime<Utc>,
    /// The agent key (its name) that made the call.
    pub key: String,
    pub subject: Subject,
    /// What the log recorded.
    pub before: Verdict,
    /// What the proposed catalog decides.
    pub after: Verdict,
    /// The rule that would deny or hold it; for a call that would now be allowed, the rule
    /// that denied or held it.
    pub rule: Option<String>,
    /// That rule's limit as the catalog words it, without this call's figures: what the
    /// report groups by.
    pub limit: Option<String>,
    /// The role whose rule it is (or that would authorise the call), when one is.
    pub role: Option<String>,
}

/// A decision the two catalogs disagree on that the log cannot settle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Undecidable {
    pub session_id: String,
    pub seq: u64,
    pub at: DateTime<Utc>,
    pub key: String,
    pub subject: Subject,
    pub before: Verdict,
    /// Why the replay cannot know.
    pub reason: String,
}

/// Everything a replay found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReplayReport {
    /// Sessions with a decision in the window (each replayed from its start).
    pub sessions: usize,
    /// Decisions (calls and learns) in the window decided again.
    pub decided: usize,
    /// Audited calls that could not be decided again: no arguments recorded (refused before
    /// they were read), a session whose start is not in the log, or the resume of a hold
    /// the replay never raised.
    pub skipped: usize,
    pub changes: Vec<Change>,
    pub undecidable: Vec<Undecidable>,
}

impl ReplayReport {
    /// The changes counted by how they flip (`allowed → denied`: 3).
    pub fn count(&self, before: Verdict, after: Verdict) -> usize {
        self.changes
            .iter()
            .filter(|c| c.before == before && c.after == after)
            .count()
    }

    /// Whether any outcome would change: what a CI gate fails on.
    pub fn flips(&self) -> bool {
        !self.changes.is_empty()
    }
}
