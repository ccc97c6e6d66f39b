//! The answers an agent reads about a hold: raised, pending, approved, or settled (will
//! never run again). The pipeline answers with them and the agent-facing resume does.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::json;

use crate::gateway::ToolReply;
use crate::store::holds::{HoldRow, HoldState};

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The answer to a held call, or to asking about a pending hold.
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
    ToolReply::Gateway {
        text,
        structured: json!({
            "decision": "pending_approval",
            "hold_id": hold.id,
            "state": hold.state.as_str(),
            "tool": hold.tool,
            "rule": hold.rule,
            "expires_at": expires,
        }),
        is_error: false,
    }
}

pub(in crate::gateway) fn approved_reply(hold: &HoldRow) -> ToolReply {
    let expires = stamp(hold.expires_at);
    ToolReply::Gateway {
        text: format!(
            "APPROVED: hold {} for `{}` was approved by {}; call call_tool with hold_id \"{}\" before {expires} to run it once.",
            hold.id,
            hold.tool,
            hold.decided_by.as_deref().unwrap_or("a reviewer"),
            hold.id
        ),
        structured: json!({
            "decision": "approved",
            "hold_id": hold.id,
            "state": hold.state.as_str(),
            "tool": hold.tool,
            "expires_at": expires,
        }),
        is_error: false,
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
