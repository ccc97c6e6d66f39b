//! The reserve-and-record stage: each decision is made durable in ONE commit with the
//! state it changes, through the audit log's writer, before anything acts on it.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde_json::Value;
use tracing::Instrument as _;
use uuid::Uuid;

use super::replies::pending_reply;
use super::{Admitted, Attempt};
use crate::audit::{EventKind, InspectedPart, NewEvent};
use crate::gateway::{AgentIdentity, Gateway, GatewayError, Place};
use crate::metrics::{Outcome, Phase};
use crate::policy::{CompiledCatalog, Denial, Hold, Permit, SessionView, arguments_digest};
use crate::slug::Slug;
use crate::store::holds::{HoldRow, HoldState, finish_hold_on, insert_hold_on};
use crate::store::sessions::{StoredSession, save_session_state_on};
use crate::trace;

/// The state a decision's commit changes besides appending its event. Each part that
/// applies is checked: a stale session revision or a hold no longer `approved` declines
/// the whole commit, event included.
pub(super) struct Change {
    /// The session's new state, saved only if its revision is still this one.
    session: Option<(SessionView, i64)>,
    /// A hold moved from `approved` to this state.
    finish_hold: Option<(String, HoldState)>,
    /// A new hold.
    insert_hold: Option<HoldRow>,
    now: DateTime<Utc>,
}

impl Change {
    /// Nothing but the event: appended with the log's group commit.
    pub(super) fn none() -> Self {
        Self {
            session: None,
            finish_hold: None,
            insert_hold: None,
            now: Utc::now(),
        }
    }

    fn is_none(&self) -> bool {
        self.session.is_none() && self.finish_hold.is_none() && self.insert_hold.is_none()
    }
}

impl Gateway {
    /// Commits `change` and `events` together; `None` when the change declined. What the
    /// change moved in (the session's state, the new hold) comes back on success.
    pub(super) async fn record(
        &self,
        change: Change,
        events: Vec<NewEvent>,
    ) -> Result<Option<Change>, GatewayError> {
        if change.is_none() {
            self.audit.append_batch(events).await?;
            return Ok(Some(change));
        }
        let committed = self
            .audit
            .commit(move |conn| {
                Box::pin(async move {
                    if let Some((hold, to)) = &change.finish_hold
                        && !finish_hold_on(conn, hold, &[HoldState::Approved], *to, change.now)
                            .await?
                    {
                        return Ok(None);
                    }
                    if let Some((view, revision)) = &change.session
                        && !save_session_state_on(conn, view, *revision).await?
                    {
                        return Ok(None);
                    }
                    if let Some(hold) = &change.insert_hold {
                        insert_hold_on(conn, hold).await?;
                    }
                    Ok(Some((change, events)))
                })
            })
            .await?;
        Ok(committed)
    }

    /// Records an allowed call: its reservation (when a limit reads its usage, or when it
    /// resumes a hold whose reservation was given back) with `call_allowed`, and a
    /// resumed hold's move to `executed`, in one commit; then the call runs.
    pub(super) async fn record_allowed(
        &self,
        agent: &AgentIdentity,
        catalog: &CompiledCatalog,
        call: &Admitted,
        mut stored: StoredSession,
        permit: Permit,
        now: DateTime<Utc>,
    ) -> Result<Attempt, GatewayError> {
        let reserves = permit.reserves_usage();
        stored.view.reserve(&permit);
        let mut event = NewEvent::call_allowed(
            &call.sid,
            &agent.key_name,
            &permit,
            call.audited.clone(),
            &learned_versions(&stored.view, permit.role()),
        );
        let mut change = Change::none();
        change.now = now;
        if let Some(hold) = &call.resumes {
            event = event.of_hold(&hold.id);
            change.finish_hold = Some((hold.id.clone(), HoldState::Executed));
        }
        let saves = reserves || call.resumes.is_some();
        let mut view = Some(stored.view);
        if saves {
            change.session = view.take().map(|v| (v, stored.revision));
        }
        let stage = self
            .metrics
            .stage(Phase::AuditDecision)
            .also(Phase::Reserve, saves)
            .traced(trace::audit_span(EventKind::CallAllowed));
        let span = stage.span().clone();
        let events = call.decided_with(agent, event);
        let Some(committed) = self.record(change, events).instrument(span).await? else {
            return Ok(Attempt::Conflict(permit.into_arguments()));
        };
        drop(stage);
        self.metrics.count_decision(Outcome::Allowed);
        let Some(view) = view.or(committed.session.map(|(v, _)| v)) else {
            unreachable!("the view is either kept or handed back by the commit")
        };
        let reply = self
            .execute(agent, catalog, &call.sid, &view, permit)
            .await?;
        Ok(Attempt::Answered(reply))
    }

    /// Records a held call: its reservation, the hold and `call_held` in one commit,
    /// unless the same call is already held (answered with that hold) or approved (run
    /// as its resume).
    pub(super) async fn raise_hold(
        &self,
        agent: &AgentIdentity,
        catalog: &CompiledCatalog,
        call: &Admitted,
        mut stored: StoredSession,
        hold: Hold,
        now: DateTime<Utc>,
    ) -> Result<Attempt, GatewayError> {
        let permit = hold.permit();
        let digest = arguments_digest(permit.arguments());
        let sid = stored.view.id.clone();
        if let Some(existing) = self
            .store
            .live_hold_of_call(&sid, permit.tool(), &digest)
            .await?
            .filter(|h| !h.is_due(now))
        {
            return Ok(match existing.state {
                HoldState::Approved => Attempt::Resume(Box::new(existing)),
                _ => Attempt::Answered(pending_reply(&existing, false)),
            });
        }
        let id = format!("hold_{}", Uuid::new_v4().simple());
        let expires_at = now + Duration::minutes(i64::from(hold.minutes()));
        let row = HoldRow {
            id: id.clone(),
            session_id: sid.clone(),
            key_id: agent.key_id,
            key_name: agent.key_name.clone(),
            scope: agent.scope.to_string(),
            role: permit.role().to_string(),
            tool: permit.tool().to_owned(),
            arguments: Value::Object(permit.arguments().clone()),
            arguments_digest: digest,
            usage: permit.held_usage(),
            rule: hold.rule().to_owned(),
            minutes: hold.minutes(),
            catalog_revision: catalog.revision().to_owned(),
            state: HoldState::Pending,
            created_at: now,
            expires_at,
            decided_by: None,
            decided_at: None,
            reason: None,
            decided_revision: None,
            finished_at: None,
        };
        let event = NewEvent::call_held(
            &sid,
            &agent.key_name,
            &hold,
            &id,
            call.audited.clone(),
            &expires_at.to_rfc3339_opts(SecondsFormat::Secs, true),
            catalog.revision(),
        );
        let reserves = permit.reserves_usage();
        let mut change = Change::none();
        change.now = now;
        if reserves {
            stored.view.reserve(permit);
            change.session = Some((stored.view, stored.revision));
        }
        change.insert_hold = Some(row);
        let stage = self
            .metrics
            .stage(Phase::AuditDecision)
            .also(Phase::Reserve, reserves)
            .traced(trace::audit_span(EventKind::CallHeld));
        let span = stage.span().clone();
        let events = call.decided_with(agent, event);
        let Some(committed) = self.record(change, events).instrument(span).await? else {
            return Ok(Attempt::Conflict(hold.into_permit().into_arguments()));
        };
        drop(stage);
        self.metrics.count_decision(Outcome::Held);
        let Some(row) = committed.insert_hold else {
            unreachable!("the commit hands back the hold it inserted")
        };
        Ok(Attempt::Answered(pending_reply(&row, true)))
    }

    /// Records the refusal of a resumed hold the policy now refuses: the hold moves to
    /// `refused` and what it reserved goes back to the session, with the `call_denied`,
    /// in one commit. Nothing runs.
    pub(super) async fn refuse_resume(
        &self,
        agent: &AgentIdentity,
        call: &Admitted,
        place: Place,
        stored: StoredSession,
        denial: Denial,
        now: DateTime<Utc>,
    ) -> Result<Attempt, GatewayError> {
        let refusal = call.refusal(place, call.audited.clone(), denial);
        let mut change = Change::none();
        change.now = now;
        change.session = Some((stored.view, stored.revision));
        if let Some(hold) = &call.resumes {
            change.finish_hold = Some((hold.id.clone(), HoldState::Refused));
        }
        Ok(match self.refuse_with(agent, refusal, change).await? {
            Some(reply) => Attempt::Answered(reply),
            // Decided again on the held arguments (checked to be an object at admission).
            None => Attempt::Conflict(
                call.resumes
                    .as_ref()
                    .and_then(|hold| hold.arguments.as_object().cloned())
                    .unwrap_or_default(),
            ),
        })
    }
}

impl Admitted {
    /// A decision's events in its session: what the argument inspectors found, then
    /// `decided` (`call_allowed`, `call_held`).
    fn decided_with(&self, agent: &AgentIdentity, decided: NewEvent) -> Vec<NewEvent> {
        let found = self
            .noted
            .event(&agent.key_name, &self.tool, InspectedPart::Arguments)
            .map(|event| event.in_session(self.sid.clone()));
        found.into_iter().chain([decided]).collect()
    }
}

/// The skill versions the session learned for `role`, as `call_allowed` records them.
fn learned_versions(view: &SessionView, role: &Slug) -> BTreeMap<String, u32> {
    view.learned
        .iter()
        .find(|l| &l.role == role)
        .map(|l| {
            l.skills
                .iter()
                .map(|s| (s.skill.to_string(), s.version))
                .collect()
        })
        .unwrap_or_default()
}
