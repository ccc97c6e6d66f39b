//! Stored audit rows decoded into what a reviewer reads: a headline, a tone (so denials
//! and violations stand out), the role, rule, arguments and result of each event.

use serde_json::Value;

use crate::audit::{AuditRow, EventKind};
use crate::store::audit_query::VIOLATION_CODE;

/// How an entry is presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Neutral,
    Granted,
    Allowed,
    Denied,
    Violation,
    Error,
    /// A call waiting for a reviewer's approval.
    Held,
    /// Content an inspector flagged or redacted: the call went on.
    Flagged,
}

impl Tone {
    pub fn as_str(self) -> &'static str {
        match self {
            Tone::Neutral => "neutral",
            Tone::Granted => "granted",
            Tone::Allowed => "allowed",
            Tone::Denied => "denied",
            Tone::Violation => "violation",
            Tone::Error => "error",
            Tone::Held => "held",
            Tone::Flagged => "flagged",
        }
    }
}

/// One call argument; a sensitive one is shown only as the digest the audit stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Argument {
    pub name: String,
    pub value: String,
    pub digest: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineEntry {
    pub seq: u64,
    pub at: String,
    pub kind: String,
    pub actor: Option<String>,
    pub tone: Tone,
    /// A short badge: `granted`, `denied`, `ACCESS_DENIED`, `GOVERNANCE_VIOLATION`, …
    pub badge: String,
    pub headline: String,
    pub role: Option<String>,
    /// The role whose grant and limits let an allowed call run.
    pub authorized_by: Option<String>,
    pub tool: Option<String>,
    pub rule: Option<String>,
    pub arguments: Vec<Argument>,
    /// `skill@version` of each skill served by a learn or used by a call.
    pub skill_versions: Vec<String>,
    pub duration_ms: Option<u64>,
    /// The downstream result or error, or the feedback given.
    pub detail: Option<String>,
    /// Set on a learn that added a role to a session that had already learned another:
    /// the session's scope of action grew here.
    pub scope_grew: bool,
    pub hash: String,
}

fn text(payload: &Value, key: &str) -> Option<String> {
    match payload.get(key)? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn arguments(payload: &Value) -> Vec<Argument> {
    let Some(Value::Object(map)) = payload.get("arguments") else {
        return Vec::new();
    };
    let mut args: Vec<Argument> = map
        .iter()
        .map(|(name, value)| match value {
            // The shape `redact_sensitive` stores in place of a sensitive value.
            Value::Object(o) if o.len() == 1 && o.get("sha256").is_some_and(Value::is_string) => {
                Argument {
                    name: name.clone(),
                    value: format!("sha256:{}", o["sha256"].as_str().unwrap_or_default()),
                    digest: true,
                }
            }
            other => Argument {
                name: name.clone(),
                value: other.to_string(),
                digest: false,
            },
        })
        .collect();
    args.sort_by(|a, b| a.name.cmp(&b.name));
    args
}

fn skill_versions(payload: &Value) -> Vec<String> {
    match payload.get("skill_versions") {
        Some(Value::Object(map)) => map
            .iter()
            .map(|(skill, version)| format!("{skill}@{version}"))
            .collect(),
        _ => Vec::new(),
    }
}

/// `secrets aws_access_key at /content/0/text (redact); injection …`: each finding of an
/// `inspection_finding`, at most a dozen.
fn findings_detail(payload: &Value) -> String {
    const SHOWN: usize = 12;
    let findings = payload
        .get("findings")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut parts: Vec<String> = findings
        .iter()
        .take(SHOWN)
        .map(|f| {
            let at = match text(f, "path").unwrap_or_default() {
                path if path.is_empty() => "the whole".to_owned(),
                path => path,
            };
            format!(
                "{} {} at {at} ({})",
                text(f, "inspector").unwrap_or_default(),
                text(f, "kind").unwrap_or_default(),
                text(f, "action").unwrap_or_default()
            )
        })
        .collect();
    if findings.len() > SHOWN {
        parts.push(format!("and {} more", findings.len() - SHOWN));
    }
    parts.join("; ")
}

/// Decodes rows of one session in chain order.
pub fn decode_entries(rows: &[AuditRow]) -> Vec<TimelineEntry> {
    decode_entries_after(rows, Vec::new())
}

/// Decodes a later page of a session's rows, given the roles learned before it.
pub fn decode_entries_after(rows: &[AuditRow], learned_before: Vec<String>) -> Vec<TimelineEntry> {
    let mut learned = learned_before;
    rows.iter()
        .map(|row| {
            let payload: Value = serde_json::from_str(&row.payload).unwrap_or(Value::Null);
            let tool = text(&payload, "tool");
            let mut entry = TimelineEntry {
                seq: row.seq,
                at: row.at.clone(),
                kind: row.kind.clone(),
                actor: row.actor.clone(),
                tone: Tone::Neutral,
                badge: row.kind.replace('_', " "),
                headline: row.kind.replace('_', " "),
                role: text(&payload, "role"),
                authorized_by: None,
                tool: tool.clone(),
                rule: text(&payload, "rule"),
                arguments: arguments(&payload),
                skill_versions: skill_versions(&payload),
                duration_ms: payload.get("duration_ms").and_then(Value::as_u64),
                detail: None,
                scope_grew: false,
                hash: row.hash.clone(),
            };
            let tool = tool.unwrap_or_default();
            let hold_id = text(&payload, "hold_id");
            let hold_id = hold_id.as_deref();
            let Ok(kind) = row.kind.parse::<EventKind>() else {
                return entry;
            };
            match kind {
                EventKind::SessionStarted => {
                    entry.badge = "init".into();
                    entry.headline = format!(
                        "Session started in scope {}",
                        text(&payload, "scope").unwrap_or_default()
                    );
                    entry.detail = text(&payload, "task_summary");
                }
                EventKind::LearnGranted => {
                    let role = entry.role.clone().unwrap_or_default();
                    entry.tone = Tone::Granted;
                    entry.badge = "learn granted".into();
                    entry.headline = format!("Learned role {role}");
                    if !learned.contains(&role) {
                        entry.scope_grew = !learned.is_empty();
                        learned.push(role);
                    }
                }
                EventKind::LearnDenied => {
                    entry.tone = Tone::Denied;
                    entry.badge = "learn denied".into();
                    entry.headline = format!(
                        "Learn refused: {}",
                        text(&payload, "path").unwrap_or_default()
                    );
                    entry.rule = text(&payload, "code");
                }
                EventKind::CallAllowed => {
                    entry.authorized_by = entry.role.clone();
                    entry.tone = Tone::Allowed;
                    entry.badge = "allowed".into();
                    entry.headline = format!("Call {tool} allowed");
                    if let Some(hold) = hold_id {
                        entry.badge = "approved call runs".into();
                        entry.headline = format!("Approved call {tool} runs (hold {hold})");
                    }
                }
                EventKind::CallDenied => {
                    let code = text(&payload, "code").unwrap_or_default();
                    entry.tone = if code == VIOLATION_CODE {
                        Tone::Violation
                    } else {
                        Tone::Denied
                    };
                    entry.headline = format!("Call {tool} refused: {code}");
                    if let Some(hold) = hold_id {
                        entry.headline = match code.as_str() {
                            // A resume of a hold that will never run (again).
                            "HOLD_USED" | "APPROVAL_DENIED" | "HOLD_EXPIRED" | "HOLD_REFUSED" => {
                                format!("Resume of hold {hold} for {tool} refused: {code}")
                            }
                            _ => format!(
                                "Approved call {tool} refused when it came back: {code} (hold {hold})"
                            ),
                        };
                    }
                    entry.badge = code;
                }
                EventKind::CallHeld => {
                    entry.tone = Tone::Held;
                    entry.badge = "held".into();
                    entry.headline = format!("Held for approval: {tool}");
                    entry.detail = Some(format!(
                        "Hold {} waits for a reviewer until {}; catalog revision {}.",
                        hold_id.unwrap_or_default(),
                        text(&payload, "expires_at").unwrap_or_default(),
                        text(&payload, "catalog_revision").unwrap_or_default()
                    ));
                }
                EventKind::HoldApproved | EventKind::HoldDenied => {
                    let approved = kind == EventKind::HoldApproved;
                    let by = row.actor.clone().unwrap_or_else(|| "a reviewer".into());
                    let reason = text(&payload, "reason").unwrap_or_default();
                    (entry.tone, entry.badge) = if approved {
                        (Tone::Granted, "hold approved".into())
                    } else {
                        (Tone::Denied, "hold denied".into())
                    };
                    entry.headline = format!(
                        "{} by {by}: {reason}",
                        if approved { "Approved" } else { "Denied" }
                    );
                    entry.detail = Some(format!(
                        "Hold {} of {tool}, decided under catalog revision {}.",
                        hold_id.unwrap_or_default(),
                        text(&payload, "catalog_revision").unwrap_or_default()
                    ));
                }
                EventKind::HoldExpired => {
                    entry.badge = "hold expired".into();
                    entry.headline = "Hold expired".into();
                    let missed = if text(&payload, "was").as_deref() == Some("approved") {
                        "was approved but not run in time"
                    } else {
                        "was not decided in time"
                    };
                    entry.detail = Some(format!(
                        "Hold {} of {tool} {missed}: nothing ran, and what it reserved was released.",
                        hold_id.unwrap_or_default(),
                    ));
                }
                EventKind::HoldNotificationFailed => {
                    entry.tone = Tone::Error;
                    entry.badge = "not notified".into();
                    entry.headline = format!(
                        "Approvers not notified through {}",
                        text(&payload, "notifier").unwrap_or_default()
                    );
                    entry.detail = Some(format!(
                        "The {} announcement of hold {} failed {} times: {}",
                        text(&payload, "event").unwrap_or_default(),
                        hold_id.unwrap_or_default(),
                        text(&payload, "attempts").unwrap_or_default(),
                        text(&payload, "error").unwrap_or_default()
                    ));
                }
                EventKind::HoldWithdrawn => {
                    entry.badge = "hold withdrawn".into();
                    entry.headline = "Hold withdrawn by the agent".into();
                    entry.detail = Some(format!(
                        "Hold {} of {tool} was withdrawn when its task was cancelled: nothing ran, and what it reserved was released.",
                        hold_id.unwrap_or_default(),
                    ));
                }
                EventKind::CallResult => {
                    let ok = text(&payload, "status").as_deref() == Some("ok");
                    entry.tone = if ok { Tone::Neutral } else { Tone::Error };
                    entry.badge = if ok { "result ok" } else { "result error" }.into();
                    entry.headline = format!("Result of {tool}");
                    entry.detail = if ok {
                        Some(format!(
                            "{} bytes, sha256 {}",
                            text(&payload, "result_size").unwrap_or_default(),
                            text(&payload, "result_sha256").unwrap_or_default()
                        ))
                    } else {
                        text(&payload, "error")
                    };
                }
                EventKind::Feedback if text(&payload, "decision").as_deref() == Some("denied") => {
                    let code = text(&payload, "code").unwrap_or_default();
                    entry.tone = if code == VIOLATION_CODE {
                        Tone::Violation
                    } else {
                        Tone::Denied
                    };
                    entry.badge = "feedback denied".into();
                    entry.headline = format!(
                        "Feedback on {} refused: {code}",
                        text(&payload, "skill").unwrap_or_else(|| "a skill".into())
                    );
                }
                EventKind::Feedback => {
                    entry.headline = format!(
                        "Feedback on {}: {}/5",
                        text(&payload, "skill").unwrap_or_default(),
                        text(&payload, "rating").unwrap_or_default()
                    );
                    entry.detail = text(&payload, "comment");
                }
                EventKind::SkillRead => {
                    entry.badge = "skill read".into();
                    entry.headline = format!(
                        "Read {} through the Skills extension",
                        text(&payload, "uri").unwrap_or_default()
                    );
                    entry.detail = Some(format!(
                        "Version {} of skill {} (role {}); reading unlocks nothing.",
                        text(&payload, "version").unwrap_or_default(),
                        text(&payload, "skill").unwrap_or_default(),
                        text(&payload, "role").unwrap_or_default()
                    ));
                }
                EventKind::InspectionFinding => {
                    let outcome = text(&payload, "outcome").unwrap_or_default();
                    let stage = text(&payload, "stage").unwrap_or_default();
                    entry.tone = if outcome == "blocked" {
                        Tone::Denied
                    } else {
                        Tone::Flagged
                    };
                    entry.badge = format!("content {outcome}");
                    entry.headline = format!("Inspection of the {stage} of {tool}: {outcome}");
                    entry.detail = Some(findings_detail(&payload));
                }
                EventKind::AuditPruned => {
                    entry.badge = "pruned".into();
                    entry.headline = format!(
                        "Events {}–{} pruned by retention",
                        text(&payload, "from_seq").unwrap_or_default(),
                        text(&payload, "through_seq").unwrap_or_default()
                    );
                    entry.detail = text(&payload, "anchor_hash").map(|h| format!("anchor {h}"));
                }
                _ => {}
            }
            entry
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: u64, kind: &str, payload: &str) -> AuditRow {
        AuditRow {
            seq,
            at: "2026-01-01T00:00:00.000000Z".into(),
            session_id: Some("s".into()),
            kind: kind.into(),
            actor: Some("k".into()),
            payload: payload.into(),
            prev_hash: String::new(),
            hash: String::new(),
        }
    }

    #[test]
    fn a_second_learned_role_marks_where_the_scope_grew() {
        let entries = decode_entries(&[
            row(
                1,
                "learn_granted",
                r#"{"role":"a","skill_versions":{"x":2}}"#,
            ),
            row(2, "learn_granted", r#"{"role":"a"}"#),
            row(3, "learn_granted", r#"{"role":"b"}"#),
        ]);
        let grew: Vec<bool> = entries.iter().map(|e| e.scope_grew).collect();
        assert_eq!(grew, [false, false, true]);
        assert_eq!(entries[0].skill_versions, ["x@2"]);
    }

    #[test]
    fn an_inspection_finding_reads_as_its_inspectors_kinds_and_actions() {
        let entries = decode_entries(&[
            row(
                1,
                "inspection_finding",
                r#"{"tool":"fetch_page","stage":"result","outcome":"redacted","findings":[{"inspector":"secrets","kind":"aws_access_key","path":"/content/0/text","action":"redact","fingerprint":"ab"},{"inspector":"injection","kind":"ignore_instructions","path":"/content/1/text","action":"flag"}]}"#,
            ),
            row(
                2,
                "inspection_finding",
                r#"{"tool":"fetch_page","stage":"arguments","outcome":"blocked","findings":[{"inspector":"egress","kind":"metadata","path":"/url","action":"block"}]}"#,
            ),
        ]);
        assert_eq!(entries[0].tone, Tone::Flagged);
        assert_eq!(entries[0].badge, "content redacted");
        assert_eq!(
            entries[0].headline,
            "Inspection of the result of fetch_page: redacted"
        );
        assert_eq!(
            entries[0].detail.as_deref(),
            Some(
                "secrets aws_access_key at /content/0/text (redact); injection ignore_instructions at /content/1/text (flag)"
            )
        );
        assert_eq!(entries[1].tone, Tone::Denied);
        assert_eq!(entries[1].badge, "content blocked");
    }

    #[test]
    fn a_prune_reads_as_the_range_it_deleted() {
        let entries = decode_entries(&[row(
            1001,
            "audit_pruned",
            r#"{"anchor_hash":"ab","events":1000,"from_seq":1,"through_seq":1000}"#,
        )]);
        assert_eq!(entries[0].headline, "Events 1–1000 pruned by retention");
        assert_eq!(entries[0].badge, "pruned");
        assert_eq!(entries[0].detail.as_deref(), Some("anchor ab"));
    }

    #[test]
    fn a_later_page_marks_the_scope_growing_from_the_roles_learned_before_it() {
        let page = [row(8, "learn_granted", r#"{"role":"b"}"#)];
        assert!(decode_entries_after(&page, vec!["a".into()])[0].scope_grew);
        assert!(!decode_entries(&page)[0].scope_grew);
    }

    #[test]
    fn a_refused_feedback_reads_as_a_denial_with_its_rule_and_actor() {
        let entries = decode_entries(&[row(
            1,
            "feedback",
            r#"{"decision":"denied","code":"ACCESS_DENIED","rule":"`x` is not a skill of a role this session has learned","skill":"x","rating":3}"#,
        )]);
        let e = &entries[0];
        assert_eq!(e.tone, Tone::Denied);
        assert_eq!(e.headline, "Feedback on x refused: ACCESS_DENIED");
        assert!(e.rule.as_deref().unwrap().contains("not a skill"));
        assert_eq!(e.actor.as_deref(), Some("k"));
    }

    #[test]
    fn a_violation_shows_its_rule_and_a_sensitive_argument_only_as_a_digest() {
        let entries = decode_entries(&[row(
            1,
            "call_denied",
            r#"{"arguments":{"amount":900,"card":{"sha256":"ab12"}},"code":"GOVERNANCE_VIOLATION","rule":"max_refund","tool":"issue_refund"}"#,
        )]);
        let e = &entries[0];
        assert_eq!(e.tone, Tone::Violation);
        assert_eq!(e.rule.as_deref(), Some("max_refund"));
        assert_eq!(
            e.arguments[1],
            Argument {
                name: "card".into(),
                value: "sha256:ab12".into(),
                digest: true
            }
        );
        assert_eq!(e.arguments[0].value, "900");
    }

    #[test]
    fn only_an_allowed_call_names_the_role_that_authorized_it() {
        let entries = decode_entries(&[
            row(
                1,
                "call_allowed",
                r#"{"tool":"process_refund","role":"refunds"}"#,
            ),
            row(
                2,
                "call_held",
                r#"{"tool":"process_refund","role":"refunds"}"#,
            ),
            row(3, "learn_granted", r#"{"role":"refunds"}"#),
        ]);
        assert_eq!(entries[0].authorized_by.as_deref(), Some("refunds"));
        assert_eq!(entries[1].authorized_by, None);
        assert_eq!(entries[2].authorized_by, None);
    }

    #[test]
    fn a_held_call_reads_as_waiting_with_its_rule_and_hold() {
        let entries = decode_entries(&[row(
            1,
            "call_held",
            r#"{"hold_id":"hold_1","tool":"process_refund","arguments":{"amount":300,"token":{"sha256":"ab"}},"decision":"pending_approval","role":"tier-1-support","rule":"`process_refund` needs a reviewer's approval","expires_at":"2026-01-01T00:15:00Z","catalog_revision":"r7"}"#,
        )]);
        let e = &entries[0];
        assert_eq!(e.tone, Tone::Held);
        assert_eq!(e.tone.as_str(), "held");
        assert_eq!(e.headline, "Held for approval: process_refund");
        assert!(e.rule.as_deref().unwrap().contains("reviewer's approval"));
        assert_eq!(e.role.as_deref(), Some("tier-1-support"));
        let detail = e.detail.as_deref().unwrap();
        assert!(
            detail.contains("hold_1") && detail.contains("2026-01-01T00:15:00Z"),
            "{detail}"
        );
        assert_eq!(e.arguments[1].value, "sha256:ab");
        assert!(e.arguments[1].digest);
    }

    #[test]
    fn a_decision_on_a_hold_names_the_reviewer_and_the_reason() {
        let mut approved = row(
            2,
            "hold_approved",
            r#"{"hold_id":"hold_1","tool":"process_refund","reason":"Customer is verified","catalog_revision":"r7"}"#,
        );
        approved.actor = Some("alice".into());
        let mut denied = row(
            3,
            "hold_denied",
            r#"{"hold_id":"hold_2","tool":"process_refund","reason":"Duplicate","catalog_revision":"r7"}"#,
        );
        denied.actor = Some("bob".into());
        let entries = decode_entries(&[approved, denied]);
        assert_eq!(
            entries[0].headline,
            "Approved by alice: Customer is verified"
        );
        assert_eq!(entries[0].tone, Tone::Granted);
        assert_eq!(entries[1].headline, "Denied by bob: Duplicate");
        assert_eq!(entries[1].tone, Tone::Denied);
        assert!(entries[1].detail.as_deref().unwrap().contains("hold_2"));
    }

    #[test]
    fn an_expired_hold_says_whether_it_was_undecided_or_unused() {
        let entries = decode_entries(&[
            row(
                4,
                "hold_expired",
                r#"{"hold_id":"hold_1","tool":"process_refund","was":"pending"}"#,
            ),
            row(
                5,
                "hold_expired",
                r#"{"hold_id":"hold_2","tool":"process_refund","was":"approved"}"#,
            ),
        ]);
        assert_eq!(entries[0].headline, "Hold expired");
        assert!(
            entries[0]
                .detail
                .as_deref()
                .unwrap()
                .contains("not decided in time")
        );
        assert!(
            entries[1]
                .detail
                .as_deref()
                .unwrap()
                .contains("approved but not run")
        );
    }

    #[test]
    fn the_run_and_the_refusal_of_an_approved_hold_are_marked_as_that_hold() {
        let entries = decode_entries(&[
            row(
                6,
                "call_allowed",
                r#"{"tool":"process_refund","role":"tier-1-support","hold_id":"hold_1"}"#,
            ),
            row(
                7,
                "call_denied",
                r#"{"tool":"process_refund","code":"GOVERNANCE_VIOLATION","rule":"cap","hold_id":"hold_2"}"#,
            ),
            row(8, "call_allowed", r#"{"tool":"process_refund"}"#),
        ]);
        assert_eq!(
            entries[0].headline,
            "Approved call process_refund runs (hold hold_1)"
        );
        assert_eq!(entries[0].tone, Tone::Allowed);
        assert_eq!(
            entries[1].headline,
            "Approved call process_refund refused when it came back: GOVERNANCE_VIOLATION (hold hold_2)"
        );
        assert_eq!(entries[1].tone, Tone::Violation);
        assert_eq!(entries[2].headline, "Call process_refund allowed");
    }

    #[test]
    fn a_refused_resume_of_a_settled_hold_reads_as_that_not_as_a_policy_change() {
        let entries = decode_entries(&[row(
            9,
            "call_denied",
            r#"{"tool":"process_refund","code":"HOLD_USED","rule":"ran","hold_id":"hold_1"}"#,
        )]);
        assert_eq!(
            entries[0].headline,
            "Resume of hold hold_1 for process_refund refused: HOLD_USED"
        );
        assert_eq!(entries[0].badge, "HOLD_USED");
    }
}
