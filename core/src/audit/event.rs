//! Audit event types: what callers append ([`NewEvent`]) and what the chain stores
//! ([`AuditEvent`]).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::model::{FoundBy, InspectAction};
use crate::names::{Actor, EventKind};
use crate::policy::{Hold, Permit};
use crate::store::audit::PrunedRange;

/// An event to append. The log assigns `seq`, `at` and the hashes.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub kind: EventKind,
    pub session_id: Option<String>,
    /// The agent key name or the console user responsible for the event.
    pub actor: Option<String>,
    pub payload: Value,
}

/// One thing a content inspector found in a call, for [`NewEvent::inspection_finding`]: what
/// and where, never the matched content (a secret only by its SHA-256 fingerprint).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FindingRecord {
    /// A built-in inspector, or `hook:<name>`.
    pub inspector: FoundBy,
    pub kind: String,
    /// RFC 6901 pointer into the inspected arguments or result (`""`: the whole of it).
    pub path: String,
    /// What the gateway did about it.
    pub action: InspectAction,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// An external hook's: its stated reason, or why it could not be asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Which part of a call an inspection read, for [`NewEvent::inspection_finding`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InspectedPart {
    Arguments,
    Result,
}

impl InspectedPart {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Arguments => "arguments",
            Self::Result => "result",
        }
    }
}

/// How a downstream call ended, for [`NewEvent::call_result`].
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    Ok {
        result_size: u64,
        /// Hex SHA-256 of the result as returned to the agent.
        result_digest: String,
    },
    Error {
        message: String,
    },
}

impl NewEvent {
    pub fn new(kind: EventKind, payload: Value) -> Self {
        Self {
            kind,
            session_id: None,
            actor: None,
            payload,
        }
    }

    pub fn in_session(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }

    pub fn by(mut self, actor: impl Into<String>) -> Self {
        self.actor = Some(actor.into());
        self
    }

    pub fn session_started(
        session_id: &str,
        actor: &str,
        scope: &str,
        task_summary: Option<&str>,
    ) -> Self {
        Self::new(
            EventKind::SessionStarted,
            json!({ "scope": scope, "task_summary": task_summary }),
        )
        .in_session(session_id)
        .by(actor)
    }

    /// `skill_versions` maps each skill of the learned role to the version served.
    pub fn learn_granted(
        session_id: &str,
        actor: &str,
        path: &str,
        role: &str,
        skill_versions: &BTreeMap<String, u32>,
    ) -> Self {
        Self::new(
            EventKind::LearnGranted,
            json!({ "path": path, "role": role, "skill_versions": skill_versions }),
        )
        .in_session(session_id)
        .by(actor)
    }

    /// Placed in a session with [`Self::in_session`] only when the session is the caller's.
    pub fn learn_denied(actor: &str, path: &str, code: &str) -> Self {
        Self::new(
            EventKind::LearnDenied,
            json!({ "path": path, "code": code }),
        )
        .by(actor)
    }

    /// The decision event of an allowed call: it takes the [`Permit`], so it can only be
    /// written for a call the policy engine allowed. `arguments` must already be redacted
    /// with [`super::redact_sensitive`].
    pub fn call_allowed(
        session_id: &str,
        actor: &str,
        permit: &Permit,
        arguments: Value,
        skill_versions: &BTreeMap<String, u32>,
    ) -> Self {
        Self::new(
            EventKind::CallAllowed,
            json!({
                "tool": permit.tool(),
                "arguments": arguments,
                "decision": "allowed",
                "role": permit.role(),
                "skill_versions": skill_versions,
            }),
        )
        .in_session(session_id)
        .by(actor)
    }

    /// A held call: what waits for approval, under which rule, until when. `arguments` must
    /// already be redacted with [`super::redact_sensitive`].
    pub fn call_held(
        session_id: &str,
        actor: &str,
        hold: &Hold,
        hold_id: &str,
        arguments: Value,
        expires_at: &str,
        catalog_revision: &str,
    ) -> Self {
        Self::new(
            EventKind::CallHeld,
            json!({
                "hold_id": hold_id,
                "tool": hold.permit().tool(),
                "arguments": arguments,
                "decision": "pending_approval",
                "role": hold.permit().role(),
                "rule": hold.rule(),
                "expires_at": expires_at,
                "catalog_revision": catalog_revision,
            }),
        )
        .in_session(session_id)
        .by(actor)
    }

    /// A reviewer's decision on a hold, in the hold's session, by the reviewer.
    /// `channel` is the door the decision came through: `console`, `cli` or `api`.
    #[allow(clippy::too_many_arguments)]
    pub fn hold_decided(
        session_id: &str,
        reviewer: &str,
        hold_id: &str,
        tool: &str,
        approved: bool,
        reason: &str,
        catalog_revision: &str,
        channel: &str,
    ) -> Self {
        let kind = if approved {
            EventKind::HoldApproved
        } else {
            EventKind::HoldDenied
        };
        Self::new(
            kind,
            json!({
                "hold_id": hold_id,
                "tool": tool,
                "reason": reason,
                "catalog_revision": catalog_revision,
                "channel": channel,
            }),
        )
        .in_session(session_id)
        .by(reviewer)
    }

    /// The announcement `event` of hold `hold_id` to notifier `notifier` failed `attempts`
    /// times, the last with `error`; nobody heard of the hold through it.
    pub fn hold_notification_failed(
        session_id: &str,
        hold_id: &str,
        notifier: &str,
        event: &str,
        attempts: u32,
        error: &str,
    ) -> Self {
        Self::new(
            EventKind::HoldNotificationFailed,
            json!({
                "hold_id": hold_id,
                "notifier": notifier,
                "event": event,
                "attempts": attempts,
                "error": error,
            }),
        )
        .in_session(session_id)
    }

    /// A hold that ran out of time; `was` is the state it expired in.
    pub fn hold_expired(session_id: &str, hold_id: &str, tool: &str, was: &str) -> Self {
        Self::new(
            EventKind::HoldExpired,
            json!({ "hold_id": hold_id, "tool": tool, "was": was }),
        )
        .in_session(session_id)
        .by(Actor::System)
    }

    /// A hold its agent withdrew (cancelled the task waiting on it); `was` is the state it
    /// was withdrawn in.
    pub fn hold_withdrawn(
        session_id: &str,
        hold_id: &str,
        tool: &str,
        was: &str,
        agent: &str,
    ) -> Self {
        Self::new(
            EventKind::HoldWithdrawn,
            json!({ "hold_id": hold_id, "tool": tool, "was": was }),
        )
        .in_session(session_id)
        .by(agent)
    }

    /// Marks a call event as the run (or refusal) of an approved hold.
    pub fn of_hold(mut self, hold_id: &str) -> Self {
        if let Value::Object(payload) = &mut self.payload {
            payload.insert("hold_id".to_owned(), json!(hold_id));
        }
        self
    }

    /// Records, without placing the event in it, which session a refused request named
    /// that was not the caller's: a digest, so the victim's id is not spread through the
    /// log, yet two refusals naming the same session can be matched.
    pub fn naming_session(mut self, named: &str) -> Self {
        if let Value::Object(payload) = &mut self.payload {
            payload.insert(
                "named_session_digest".to_owned(),
                json!(hex::encode(Sha256::digest(named.as_bytes()))),
            );
        }
        self
    }

    /// Placed in a session with [`Self::in_session`] only when the session is the caller's.
    /// `arguments` must already be redacted with [`super::redact_sensitive`].
    pub fn call_denied(
        actor: &str,
        tool: &str,
        arguments: Value,
        code: &str,
        rule: Option<&str>,
    ) -> Self {
        Self::new(
            EventKind::CallDenied,
            json!({
                "tool": tool,
                "arguments": arguments,
                "decision": "denied",
                "code": code,
                "rule": rule,
            }),
        )
        .by(actor)
    }

    pub fn call_result(
        session_id: &str,
        actor: &str,
        tool: &str,
        duration_ms: u64,
        outcome: &CallOutcome,
    ) -> Self {
        let payload = match outcome {
            CallOutcome::Ok {
                result_size,
                result_digest,
            } => json!({
                "tool": tool,
                "status": "ok",
                "duration_ms": duration_ms,
                "result_size": result_size,
                "result_sha256": result_digest,
            }),
            CallOutcome::Error { message } => json!({
                "tool": tool,
                "status": "error",
                "duration_ms": duration_ms,
                "error": message,
            }),
        };
        Self::new(EventKind::CallResult, payload)
            .in_session(session_id)
            .by(actor)
    }

    /// What the inspectors found in one call's `stage`; `outcome` is the strictest action
    /// taken (`flagged`, `redacted` or `blocked`). Placed like the call's other events.
    pub fn inspection_finding(
        actor: &str,
        tool: &str,
        stage: InspectedPart,
        findings: &[FindingRecord],
    ) -> Self {
        let outcome = match findings.iter().map(|f| f.action).max() {
            Some(InspectAction::Block) => "blocked",
            Some(InspectAction::Redact) => "redacted",
            _ => "flagged",
        };
        Self::new(
            EventKind::InspectionFinding,
            json!({
                "tool": tool,
                "stage": stage.as_str(),
                "outcome": outcome,
                "findings": findings,
            }),
        )
        .by(actor)
    }

    pub fn feedback(
        session_id: &str,
        actor: &str,
        skill: &str,
        rating: u8,
        comment: Option<&str>,
    ) -> Self {
        Self::new(
            EventKind::Feedback,
            json!({ "skill": skill, "rating": rating, "comment": comment }),
        )
        .in_session(session_id)
        .by(actor)
    }

    /// `target` names what changed, e.g. `limit:refunds/max_refund`; `before` is `null`
    /// for a creation and `after` is `null` for a deletion.
    pub fn admin_change(
        actor: &str,
        action: &str,
        target: &str,
        before: Value,
        after: Value,
    ) -> Self {
        Self::new(
            EventKind::AdminChange,
            json!({ "action": action, "target": target, "before": before, "after": after }),
        )
        .by(actor)
    }

    /// A what-if replay: `payload` says over which window (or sessions), against which
    /// catalog file, and the counts it found. Outside any session: it read many.
    pub fn what_if_replay(actor: &str, payload: Value) -> Self {
        Self::new(EventKind::WhatIfReplay, payload).by(actor)
    }

    /// An admin-side request refused before it changed anything: `action` and `target` as
    /// an [`Self::admin_change`] would name them, `code` a short upper-case class of the
    /// refusal (e.g. `TOO_LARGE`, `INVALID`), `reason` what the requester was told.
    pub fn admin_refused(
        actor: &str,
        action: &str,
        target: &str,
        code: &str,
        reason: &str,
    ) -> Self {
        Self::new(
            EventKind::AdminRefused,
            json!({
                "action": action,
                "target": target,
                "decision": "refused",
                "code": code,
                "reason": reason,
            }),
        )
        .by(actor)
    }
}

impl NewEvent {
    /// Events `from_seq..=through_seq` were deleted, leaving `anchor_hash` (the hash of
    /// event `through_seq`) as the anchor verification starts from. `signature` is the
    /// audit key's signature of the range (the checkpoint module's `prune_message`), so a
    /// verifier can tell a deliberate prune from a forged anchor.
    pub fn audit_pruned(
        actor: &str,
        range: &PrunedRange,
        public_key: &str,
        signature: &str,
    ) -> Self {
        Self::new(
            EventKind::AuditPruned,
            json!({
                "from_seq": range.from_seq,
                "through_seq": range.through_seq,
                "anchor_hash": range.anchor_hash,
                "events": range.events,
                "public_key": public_key,
                "signature": signature,
            }),
        )
        .by(actor)
    }
}

/// One committed event, as read back from the chain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEvent {
    pub seq: u64,
    pub at: DateTime<Utc>,
    pub session_id: Option<String>,
    pub kind: EventKind,
    pub actor: Option<String>,
    pub payload: Value,
    pub prev_hash: String,
    pub hash: String,
}

/// What [`super::AuditLog::append`] answers once the event is durably committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendedEvent {
    pub seq: u64,
    pub hash: String,
    pub at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denied_call_records_its_code_and_rule() {
        let event = NewEvent::call_denied(
            "agent",
            "issue_refund",
            json!({}),
            "GOVERNANCE_VIOLATION",
            Some("max_refund"),
        )
        .in_session("s1");
        assert_eq!(event.kind, EventKind::CallDenied);
        assert_eq!(event.payload["code"], "GOVERNANCE_VIOLATION");
        assert_eq!(event.payload["rule"], "max_refund");
        assert_eq!(event.session_id.as_deref(), Some("s1"));
    }

    #[test]
    fn a_refusal_naming_a_foreign_session_carries_its_digest_not_its_id() {
        let event = NewEvent::call_denied(
            "mallory",
            "process_refund",
            json!({}),
            "ACCESS_DENIED",
            None,
        )
        .naming_session("ses_victim");
        assert_eq!(event.session_id, None);
        let digest = event.payload["named_session_digest"].as_str().unwrap();
        assert_eq!(digest.len(), 64);
        assert!(!event.payload.to_string().contains("ses_victim"));
    }
}
