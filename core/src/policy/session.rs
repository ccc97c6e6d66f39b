//! A governance session as `decide` sees it: who owns it, what it learned, what it used.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::Reservation;
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

/// What one role's allowed calls of one tool have used so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolUsage {
    pub count: u32,
    /// Sums of the arguments that the role's cumulative caps track.
    #[serde(default)]
    pub sums: BTreeMap<String, Decimal>,
}

/// The call history limits need: usage per (role, tool) of allowed calls, and the tools
/// that succeeded (for step-order guards, whichever role ran them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    by_role: BTreeMap<String, BTreeMap<String, ToolUsage>>,
    #[serde(default)]
    succeeded: BTreeSet<String>,
}

impl Usage {
    pub fn tool_usage(&self, role: &str, tool: &str) -> Option<&ToolUsage> {
        self.by_role.get(role)?.get(tool)
    }

    pub fn count(&self, role: &str, tool: &str) -> u32 {
        self.tool_usage(role, tool).map_or(0, |u| u.count)
    }

    pub fn sum(&self, role: &str, tool: &str, arg: &str) -> Decimal {
        self.tool_usage(role, tool)
            .and_then(|u| u.sums.get(arg).copied())
            .unwrap_or(Decimal::ZERO)
    }

    pub fn has_succeeded(&self, tool: &str) -> bool {
        self.succeeded.contains(tool)
    }

    /// Every (role, tool) with its usage, for persisting.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str, &ToolUsage)> {
        self.by_role.iter().flat_map(|(role, tools)| {
            tools
                .iter()
                .map(move |(tool, u)| (role.as_str(), tool.as_str(), u))
        })
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
}

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
        }
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

    /// Applies the usage an `Allow` reserved. The caller does this under the same per-session
    /// serialization as the decision, so two calls cannot both fit under one cap.
    pub fn reserve(&mut self, reservation: &Reservation) {
        let usage = self
            .usage
            .by_role
            .entry(reservation.role().as_str().to_owned())
            .or_default()
            .entry(reservation.tool().to_owned())
            .or_default();
        usage.count = usage.count.saturating_add(1);
        for reserved in reservation.amounts() {
            let sum = usage.sums.entry(reserved.arg.clone()).or_default();
            *sum = sum.saturating_add(reserved.amount);
        }
    }

    /// Records that a call of `tool` succeeded upstream, which step-order guards wait for.
    pub fn record_success(&mut self, tool: &str) {
        if !self.usage.succeeded.contains(tool) {
            self.usage.succeeded.insert(tool.to_owned());
        }
    }
}
