//! The agents' side of approval holds: resuming one (`call_tool` with `hold_id`) once a
//! reviewer decided. Raising a hold is the pipeline's record stage (`pipeline/record.rs`).
//!
//! An approved hold runs **at most once**: the resume that runs it moves the hold from
//! `approved` to `executed` in the same transaction as its `call_allowed` event, and only
//! one transaction can make that move. Before running, the call is decided again under the
//! current catalog with the approval as evidence: a call the policy would now refuse does
//! not run, whatever was approved. Both happen in the pipeline, as for any call.

use serde_json::Value;

use super::pipeline::replies::{approved_reply, pending_reply};
use super::pipeline::{Entry, Refusal};
use super::{AgentIdentity, Gateway, GatewayError, Place, ToolReply, bounds};
use crate::holds::expire;
use crate::policy::{Denial, DenyCode, arguments_digest};
use crate::store::holds::{HoldRow, HoldState};

impl Gateway {
    /// `call_tool` naming `hold_id`: answers where the hold stands, and runs an approved
    /// one. `tool` and `arguments`, when given, must be exactly the held call. With
    /// `poll`, nothing runs.
    #[tracing::instrument(skip_all, fields(key = %agent.key_name))]
    pub async fn resume(
        &self,
        agent: &AgentIdentity,
        session_id: Option<String>,
        hold_id: &str,
        tool: Option<&str>,
        arguments: Option<Value>,
        poll: bool,
    ) -> Result<ToolReply, GatewayError> {
        let now = Self::now();
        let named = session_id.filter(|id| !id.is_empty());
        let shown_tool = tool.map_or_else(|| "call_tool".to_owned(), bounds::audited_tool);
        let refuse = |rule: String| {
            let denial = Denial::new(DenyCode::AccessDenied, rule);
            Refusal::new(
                Place::caller_naming(named.as_deref()),
                &shown_tool,
                Value::Null,
                denial,
            )
        };
        if hold_id.chars().count() > bounds::MAX_SESSION_ID {
            let refused = refuse("`hold_id` is not a hold Skillgate issued.".to_owned());
            return self.refuse_call(agent, refused).await;
        }
        // Another key's hold, a hold of another session than the one named, or none at all:
        // the same answer, audited under the caller.
        let hold = self.store.hold(hold_id).await?.filter(|h| {
            h.key_id == agent.key_id && named.as_deref().is_none_or(|sid| sid == h.session_id)
        });
        let Some(hold) = hold else {
            let refused = refuse(format!(
                "There is no hold `{hold_id}` of this session: call the tool again to raise one."
            ));
            return self.refuse_call(agent, refused).await;
        };
        if let Some(problem) = mismatch(&hold, tool, arguments) {
            let place = Place::Session(hold.session_id.clone());
            let denial = Denial::new(DenyCode::AccessDenied, problem);
            let refused = Refusal::new(place, &hold.tool, Value::Null, denial);
            return self.refuse_call(agent, refused).await;
        }
        if hold.is_due(now) {
            expire(&self.audit, &hold, now).await?;
            let settled = self.store.hold(hold_id).await?.unwrap_or(hold);
            return self.settled(agent, &settled, poll).await;
        }
        match hold.state {
            HoldState::Approved if !poll => {
                let reply = self
                    .govern(agent, Entry::Resume(Box::new(hold.clone())))
                    .await?;
                // A task waiting on the hold answers with what this request got.
                self.settle_tasks_of(&hold, &reply).await?;
                Ok(reply)
            }
            HoldState::Approved => Ok(approved_reply(&hold)),
            HoldState::Pending => Ok(pending_reply(&hold, false)),
            _ => self.settled(agent, &hold, poll).await,
        }
    }

    /// The answer for a hold that will never run (again). A resume of it is refused, and
    /// the refusal is audited like any refused call, once per attempt, in the hold's
    /// session and naming the hold, before the agent hears it; a `poll` only asks where
    /// the hold stands and writes nothing.
    async fn settled(
        &self,
        agent: &AgentIdentity,
        hold: &HoldRow,
        poll: bool,
    ) -> Result<ToolReply, GatewayError> {
        if poll {
            return Ok(super::pipeline::replies::settled_reply(hold));
        }
        self.refuse_call(agent, Refusal::settled(hold)).await
    }
}

/// Why a resume's own `tool` or `arguments` do not name the held call, if they do not.
fn mismatch(hold: &HoldRow, tool: Option<&str>, arguments: Option<Value>) -> Option<String> {
    if tool.is_some_and(|t| t != hold.tool) {
        return Some(format!(
            "Hold `{}` is for `{}`, not this tool.",
            hold.id, hold.tool
        ));
    }
    match arguments {
        Some(Value::Object(args)) if arguments_digest(&args) != hold.arguments_digest => {
            Some(format!(
                "Hold `{}` was raised for other arguments: an approval covers exactly the call that was held.",
                hold.id
            ))
        }
        Some(Value::Object(_)) | None => None,
        Some(_) => Some("`arguments` must be a JSON object of the tool's arguments.".to_owned()),
    }
}
