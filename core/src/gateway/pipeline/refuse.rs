//! The refuse stage: the one place a refused call is counted, traced and audited, whatever
//! stage refused it and whichever entry it came by.

use serde_json::Value;
use tracing::Instrument as _;

use super::inspect::Inspection;
use super::record::Change;
use super::replies::{settled_reply, settled_text};
use crate::audit::{EventKind, InspectedPart, NewEvent};
use crate::gateway::{
    AgentIdentity, AnswerCode, CallAnswer, Gateway, GatewayError, Place, ToolReply, bounds,
};
use crate::metrics::{Outcome, Phase};
use crate::policy::{Denial, DenyCode};
use crate::slug::Slug;
use crate::store::holds::HoldRow;
use crate::trace;

/// A refused call, as its `call_denied` event and the agent's answer show it.
pub(in crate::gateway) struct Refusal {
    place: Place,
    /// The hold whose resume this is: the event names it.
    hold: Option<String>,
    tool: String,
    /// The arguments as audited (redacted, or `null` when none are recorded).
    arguments: Value,
    /// The code it is counted as, the rule, the role.
    denial: Denial,
    /// A hold that will never run (again): the code the audit and the agent read instead
    /// of the denial's (`HOLD_USED`, …), and the agent's answer.
    settled: Option<(AnswerCode, ToolReply)>,
    /// What the argument inspectors found: audited before the `call_denied`, in its commit.
    noted: Inspection,
}

impl Refusal {
    pub(in crate::gateway) fn new(
        place: Place,
        tool: &str,
        arguments: Value,
        denial: Denial,
    ) -> Self {
        Self {
            place,
            hold: None,
            tool: tool.to_owned(),
            arguments,
            denial,
            settled: None,
            noted: Inspection::default(),
        }
    }

    /// Audits what the argument inspectors found with the refusal.
    pub(super) fn noting(mut self, noted: &Inspection) -> Self {
        self.noted = noted.clone();
        self
    }

    /// Names the hold this refused call resumed.
    pub(in crate::gateway) fn of_hold(mut self, hold_id: &str) -> Self {
        self.hold = Some(hold_id.to_owned());
        self
    }

    /// A resume of a hold that will never run (again): denied, expired, refused or used.
    /// Audited in the hold's session (the hold is the caller's), naming the hold.
    pub(in crate::gateway) fn settled(hold: &HoldRow) -> Self {
        let (code, text) = settled_text(hold);
        let mut refusal = Self::new(
            Place::Session(hold.session_id.clone()),
            &hold.tool,
            Value::Null,
            Denial::new(DenyCode::AccessDenied, text),
        )
        .of_hold(&hold.id);
        refusal.settled = Some((code, settled_reply(hold)));
        refusal
    }

    fn code(&self) -> String {
        match &self.settled {
            Some((code, _)) => code.as_str().to_owned(),
            None => self.denial.code.as_str().to_owned(),
        }
    }

    /// The refusal's events: what the argument inspectors found, then its `call_denied`.
    fn events(&self, agent: &AgentIdentity) -> Vec<NewEvent> {
        let found = self
            .noted
            .event(&agent.key_name, &self.tool, InspectedPart::Arguments)
            .map(|event| self.place.place(event));
        found.into_iter().chain([self.event(agent)]).collect()
    }

    fn event(&self, agent: &AgentIdentity) -> NewEvent {
        let event = NewEvent::call_denied(
            &agent.key_name,
            &self.tool,
            self.arguments.clone(),
            &self.code(),
            Some(&bounds::audited_rule(&self.denial.rule)),
        );
        let event = self.place.place(event);
        match &self.hold {
            Some(hold) => event.of_hold(hold),
            None => event,
        }
    }
}

impl Gateway {
    /// Records a refusal (its `call_denied` durable where it belongs) and answers with it.
    pub(in crate::gateway) async fn refuse_call(
        &self,
        agent: &AgentIdentity,
        refused: Refusal,
    ) -> Result<ToolReply, GatewayError> {
        let committed = self.refuse_with(agent, refused, Change::none()).await?;
        // A refusal that changes nothing but the log always commits.
        committed.ok_or_else(|| {
            GatewayError::Store(crate::store::StoreError::Conflict(
                "a refusal declined to commit".to_owned(),
            ))
        })
    }

    /// Records a refusal together with `change` in one commit. `None` when the change
    /// declined (a stale revision, a hold that moved): nothing was recorded nor counted.
    pub(super) async fn refuse_with(
        &self,
        agent: &AgentIdentity,
        refused: Refusal,
        change: Change,
    ) -> Result<Option<ToolReply>, GatewayError> {
        let events = refused.events(agent);
        let stage = self
            .metrics
            .stage(Phase::AuditDecision)
            .traced(trace::audit_span(EventKind::CallDenied));
        let span = stage.span().clone();
        if self
            .record(change, events)
            .instrument(span)
            .await?
            .is_none()
        {
            return Ok(None);
        }
        drop(stage);
        self.metrics
            .count_decision(Outcome::Denied(refused.denial.code));
        trace::record_decision(
            &tracing::Span::none(),
            "denied",
            Some(&refused.code()),
            refused.denial.role.as_ref().map(Slug::as_str),
        );
        Ok(Some(match refused.settled {
            Some((_, reply)) => reply,
            None => {
                let answer = CallAnswer::denied(refused.denial).tool(&refused.tool);
                match &refused.hold {
                    Some(hold) => answer.of_hold(hold),
                    None => answer,
                }
                .into_reply()
            }
        }))
    }
}
