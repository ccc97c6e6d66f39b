//! The answers an agent reads about a hold: raised, pending, approved, or settled (will
//! never run again). The pipeline answers with them and the agent-facing resume does.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use crate::gateway::ToolReply;
use crate::store::holds::{HoldRow, HoldState};

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The call that runs a held call once it is approved.
fn resume(hold: &HoldRow) -> Value {
    json!({"tool": "call_tool", "arguments": {"hold_id": hold.id, "session_id": hold.session_id}})
}

/// The call that only asks where a hold stands.
fn poll(hold: &HoldRow) -> Value {
    json!({"tool": "call_tool", "arguments": {"hold_id": hold.id, "session_id": hold.session_id, "poll": true}})
}

/// The answer to a held call, or to asking about a pending hold. Nothing ran, so it is an
/// error (`isError: true`): a client that trusts the flag must not believe the call
/// happened.
pub(in crate::gateway) fn pending_reply(hold: &HoldRow, new: bool) -> ToolReply {
    let expires = stamp(hold.expires_at);
    let text = if new {
        format!(
            "APPROVAL REQUIRED: {} Nothing ran. Hold {} waits for a reviewer until {expires}. \
             Once approved, call call_tool with hold_id \"{}\" (or make the same call again) to run it once; \
             add \"poll\": true to only ask where it stands.",
            hold.rule, hold.id, hold.id
        )
    } else {
        format!(
            "APPROVAL PENDING: hold {} for `{}` waits for a reviewer until {expires}. Nothing ran.",
            hold.id, hold.tool
        )
    };
    let structured = json!({
        "decision": "pending_approval",
        "code": "APPROVAL_PENDING",
        "hold_id": hold.id,
        "state": hold.state.as_str(),
        "tool": hold.tool,
        "role": hold.role,
        "rule": hold.rule,
        "expires_at": expires,
        // The reviewer decides on this exact call: these are what the Holds page shows
        // them (the arguments in full there; their canonical digest here).
        "approver_sees": {
            "tool": hold.tool,
            "role": hold.role,
            "rule": hold.rule,
            "key": hold.key_name,
            "session_id": hold.session_id,
            "arguments_digest": hold.arguments_digest,
        },
        "resume": resume(hold),
        "poll": poll(hold),
    });
    ToolReply::Gateway {
        text,
        structured,
        is_error: true,
    }
}

/// The answer to asking about an approved hold: it still has not run, so it is an error
/// too, and says how to run it.
pub(in crate::gateway) fn approved_reply(hold: &HoldRow) -> ToolReply {
    let expires = stamp(hold.expires_at);
    let structured = json!({
        "decision": "approved",
        "code": "APPROVED",
        "hold_id": hold.id,
        "state": hold.state.as_str(),
        "tool": hold.tool,
        "expires_at": expires,
        "resume": resume(hold),
        "poll": poll(hold),
    });
    ToolReply::Gateway {
        text: format!(
            "APPROVED: hold {} for `{}` was approved by {}; call call_tool with hold_id \"{}\" before {expires} to run it once. Nothing ran yet.",
            hold.id,
            hold.tool,
            hold.decided_by.as_deref().unwrap_or("a reviewer"),
            hold.id
        ),
        structured,
        is_error: true,
    }
}

/// The answer for a hold that will never run (again): denied, expired, refused, or run.
pub(in crate::gateway) fn settled_reply(hold: &HoldRow) -> ToolReply {
    let (code, text) = settled_text(hold);
    ToolReply::Gateway {
        text,
        structured: json!({
            "decision": "denied",
            "code": code,
            "hold_id": hold.id,
            "state": hold.state.as_str(),
            "tool": hold.tool,
            "reason": hold.reason,
        }),
        is_error: true,
    }
}

/// The code and text of [`settled_reply`]: what the agent reads and the audit records.
pub(in crate::gateway) fn settled_text(hold: &HoldRow) -> (&'static str, String) {
    match hold.state {
        HoldState::Denied => (
            "APPROVAL_DENIED",
            format!(
                "APPROVAL DENIED: {} denied hold {} for `{}`: {}",
                hold.decided_by.as_deref().unwrap_or("a reviewer"),
                hold.id,
                hold.tool,
                hold.reason.as_deref().unwrap_or("no reason given")
            ),
        ),
        HoldState::Expired => (
            "HOLD_EXPIRED",
            format!(
                "HOLD EXPIRED: hold {} for `{}` was not decided, or not run once approved, in time. Make the call again to raise a new one.",
                hold.id, hold.tool
            ),
        ),
        HoldState::Executed => (
            "HOLD_USED",
            format!(
                "HOLD USED: the approved call of hold {} already ran; an approval runs its call once.",
                hold.id
            ),
        ),
        HoldState::Refused | HoldState::Pending | HoldState::Approved => (
            "HOLD_REFUSED",
            format!(
                "HOLD REFUSED: the call of hold {} was refused when it came back: the policy changed since it was approved.",
                hold.id
            ),
        ),
    }
}
