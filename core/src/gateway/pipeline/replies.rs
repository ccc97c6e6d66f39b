//! The answers an agent reads about a hold: raised, pending, approved, or settled (will
//! never run again). The pipeline answers with them and the agent-facing resume does.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, json};

use crate::gateway::{
    AnswerCode, AnswerDecision, ApproverSees, CallAnswer, HoldStatus, NextCall, ToolReply,
};
use crate::policy::Remedy;
use crate::store::holds::{HoldRow, HoldState};

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn next_call(hold: &HoldRow, poll: bool) -> NextCall {
    let mut arguments = Map::new();
    arguments.insert("hold_id".into(), json!(hold.id));
    arguments.insert("session_id".into(), json!(hold.session_id));
    if poll {
        arguments.insert("poll".into(), json!(true));
    }
    NextCall {
        tool: "call_tool".to_owned(),
        arguments,
    }
}

/// Where `hold` stands, with the calls that resume it or only poll it while it can still
/// run, and what its reviewer sees while it waits.
fn status(hold: &HoldRow) -> HoldStatus {
    let open = matches!(hold.state, HoldState::Pending | HoldState::Approved);
    HoldStatus {
        state: hold.state.as_str().to_owned(),
        expires_at: stamp(hold.expires_at),
        reason: hold.reason.clone(),
        approver_sees: (hold.state == HoldState::Pending).then(|| ApproverSees {
            tool: hold.tool.clone(),
            role: hold.role.clone(),
            rule: hold.rule.clone(),
            key: hold.key_name.clone(),
            session_id: hold.session_id.clone(),
            arguments_digest: hold.arguments_digest.clone(),
        }),
        resume: open.then(|| next_call(hold, false)),
        poll: open.then(|| next_call(hold, true)),
    }
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
    CallAnswer::new(
        AnswerDecision::PendingApproval,
        AnswerCode::ApprovalPending,
        text,
    )
    .tool(&hold.tool)
    .role(&hold.role)
    .rule(&hold.rule)
    .remedy(Remedy::WaitForApproval {
        hold_id: hold.id.clone(),
        expires_at: expires,
    })
    .hold(&hold.id, status(hold))
    .into_reply()
}

/// The answer to asking about an approved hold: it still has not run, so it is an error
/// too, and says how to run it.
pub(in crate::gateway) fn approved_reply(hold: &HoldRow) -> ToolReply {
    let expires = stamp(hold.expires_at);
    let text = format!(
        "APPROVED: hold {} for `{}` was approved by {}; call call_tool with hold_id \"{}\" before {expires} to run it once. Nothing ran yet.",
        hold.id,
        hold.tool,
        hold.decided_by.as_deref().unwrap_or("a reviewer"),
        hold.id
    );
    CallAnswer::new(AnswerDecision::Approved, AnswerCode::Approved, text)
        .tool(&hold.tool)
        .role(&hold.role)
        .rule(&hold.rule)
        .hold(&hold.id, status(hold))
        .into_reply()
}

/// The answer for a hold that will never run (again): denied, expired, refused, or run.
pub(in crate::gateway) fn settled_reply(hold: &HoldRow) -> ToolReply {
    let (code, text) = settled_text(hold);
    let answer = CallAnswer::new(AnswerDecision::Denied, code, text)
        .tool(&hold.tool)
        .role(&hold.role)
        .rule(&hold.rule)
        .hold(&hold.id, status(hold));
    match hold.state {
        HoldState::Expired => answer.remedy(Remedy::CallAgain),
        _ => answer,
    }
    .into_reply()
}

/// The code and text of [`settled_reply`]: what the agent reads and the audit records.
pub(in crate::gateway) fn settled_text(hold: &HoldRow) -> (AnswerCode, String) {
    match hold.state {
        HoldState::Denied => (
            AnswerCode::ApprovalDenied,
            format!(
                "APPROVAL DENIED: {} denied hold {} for `{}`: {}",
                hold.decided_by.as_deref().unwrap_or("a reviewer"),
                hold.id,
                hold.tool,
                hold.reason.as_deref().unwrap_or("no reason given")
            ),
        ),
        HoldState::Expired => (
            AnswerCode::HoldExpired,
            format!(
                "HOLD EXPIRED: hold {} for `{}` was not decided, or not run once approved, in time. Make the call again to raise a new one.",
                hold.id, hold.tool
            ),
        ),
        HoldState::Executed => (
            AnswerCode::HoldUsed,
            format!(
                "HOLD USED: the approved call of hold {} already ran; an approval runs its call once.",
                hold.id
            ),
        ),
        HoldState::Withdrawn => (
            AnswerCode::HoldWithdrawn,
            format!(
                "HOLD WITHDRAWN: hold {} for `{}` was withdrawn by cancelling its task; nothing ran.",
                hold.id, hold.tool
            ),
        ),
        HoldState::Refused | HoldState::Pending | HoldState::Approved => (
            AnswerCode::HoldRefused,
            format!(
                "HOLD REFUSED: the call of hold {} was refused when it came back: the policy changed since it was approved.",
                hold.id
            ),
        ),
    }
}
