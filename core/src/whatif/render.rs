//! A replay report for people (grouped by how the outcome flips, the rule, role, tool and
//! key, with the sessions) and for programs (the same as JSON).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Value, json};

use super::report::{ReplayReport, Subject, Verdict};

/// Changes that flip the same way for the same reason: one line of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    pub before: Verdict,
    pub after: Verdict,
    pub subject: Subject,
    pub key: String,
    pub role: Option<String>,
    /// The limit (or, when no limit's sentence matches, the whole rule).
    pub rule: Option<String>,
    /// Each change as its session and the seq of its audit event.
    pub calls: Vec<(String, u64)>,
}

impl ReplayReport {
    /// The changes grouped by flip, subject, key, role and rule; the largest groups first.
    pub fn groups(&self) -> Vec<Group> {
        type GroupKey = (
            Verdict,
            Verdict,
            Subject,
            String,
            Option<String>,
            Option<String>,
        );
        let mut groups: BTreeMap<GroupKey, Vec<(String, u64)>> = BTreeMap::new();
        for c in &self.changes {
            groups
                .entry((
                    c.before,
                    c.after,
                    c.subject.clone(),
                    c.key.clone(),
                    c.role.clone(),
                    c.limit.clone().or_else(|| c.rule.clone()),
                ))
                .or_default()
                .push((c.session_id.clone(), c.seq));
        }
        let mut groups: Vec<Group> = groups
            .into_iter()
            .map(|((before, after, subject, key, role, rule), calls)| Group {
                before,
                after,
                subject,
                key,
                role,
                rule,
                calls,
            })
            .collect();
        groups.sort_by_key(|g| std::cmp::Reverse(g.calls.len()));
        groups
    }

    /// The report for programs: the counts, the groups, every change and every call that
    /// could not be decided.
    pub fn to_json(&self) -> Value {
        json!({
            "sessions": self.sessions,
            "decided": self.decided,
            "skipped": self.skipped,
            "flips": self.flips(),
            "groups": self.groups(),
            "changes": self.changes,
            "undecidable": self.undecidable,
        })
    }

    /// The report for people, under `heading` (what was replayed).
    pub fn render(&self, heading: &str) -> String {
        let mut out = format!(
            "{heading}: {} decision{} in {} session{} decided again",
            self.decided,
            plural(self.decided),
            self.sessions,
            plural(self.sessions)
        );
        if self.skipped > 0 {
            let _ = write!(
                out,
                " ({} could not be: no arguments recorded)",
                self.skipped
            );
        }
        out.push('\n');
        if self.changes.is_empty() {
            out.push_str("no outcome would change\n");
        } else {
            let _ = writeln!(
                out,
                "{} outcome{} would change:",
                self.changes.len(),
                plural(self.changes.len())
            );
        }
        for group in self.groups() {
            let what = match &group.subject {
                Subject::Call { tool } => format!("call{} of {tool}", plural(group.calls.len())),
                Subject::Learn { role } => {
                    format!("learn{} of /roles/{role}", plural(group.calls.len()))
                }
            };
            let _ = write!(
                out,
                "  {} → {}: {} {what} by key {}",
                group.before.as_str(),
                group.after.as_str(),
                group.calls.len(),
                group.key
            );
            if let Some(role) = &group.role {
                let _ = write!(out, ", role {role}");
            }
            out.push('\n');
            if let Some(rule) = &group.rule {
                let _ = writeln!(out, "      rule: {rule}");
            }
            let sessions: Vec<String> = group
                .calls
                .iter()
                .map(|(session, seq)| format!("{session} (event {seq})"))
                .collect();
            let _ = writeln!(out, "      sessions: {}", sessions.join(", "));
        }
        if !self.undecidable.is_empty() {
            let _ = writeln!(
                out,
                "{} not decidable (the log cannot settle them; nothing is guessed):",
                self.undecidable.len()
            );
            for u in &self.undecidable {
                let what = match &u.subject {
                    Subject::Call { tool } => tool.clone(),
                    Subject::Learn { role } => format!("/roles/{role}"),
                };
                let _ = writeln!(
                    out,
                    "  {what} in {} (event {}), {} before: {}",
                    u.session_id,
                    u.seq,
                    u.before.as_str(),
                    u.reason
                );
            }
        }
        out
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
