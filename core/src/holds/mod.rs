//! Approval holds: the reviewers' side (queue, approve, deny) and the expiry of holds no
//! one decided or ran in time. The agents' side (raising and resuming a hold) is in
//! `gateway::hold`.
//!
//! Every change of a hold commits with its audit event through the one audit writer, and a
//! hold that stops reserving (denied, expired) gives its usage back to its session in the
//! same transaction.
//!
//! A hold is decided through one of three doors (the console, the command line, the HTTP
//! API), all through [`Holds::approve`] and [`Holds::deny`], so the same rules hold for
//! each: a reason, never the decider's own agent, one decision per hold. The event records
//! the decider and the door ([`Channel`]).

pub mod notify;
mod view;

pub use view::{HoldView, sensitive_arguments, shown_state};

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use crate::admin::{refusal_event, target};
use crate::audit::{AuditError, AuditLog, NewEvent};
use crate::policy::CatalogHandle;
use crate::store::Tx;
use crate::store::holds::{self, HoldRow, HoldState};
use crate::store::sessions::{load_session_on, save_session_state_on};
use crate::store::{Store, StoreError};

/// The longest reason a reviewer may give.
pub const MAX_REASON: usize = 2000;
/// The most holds one page of the queue shows.
pub const PAGE: u32 = 50;
/// Longer than any id Skillgate issues (`hold_` and 32 hex digits): a longer one is not
/// looked up.
pub const MAX_ID: usize = 100;

/// A queue filter as a decider writes it: a state (`pending`, `approved`, …) or `all`
/// (`None`).
pub fn state_filter(text: &str) -> Result<Option<HoldState>, HoldError> {
    match text.trim() {
        "all" => Ok(None),
        state => HoldState::parse(state)
            .map(Some)
            .ok_or_else(|| HoldError::UnknownState(state.to_owned())),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    #[error("there is no hold `{0}`")]
    NotFound(String),
    #[error(
        "unknown hold state `{0}`: use pending, approved, denied, expired, executed, refused, withdrawn or all"
    )]
    UnknownState(String),
    #[error("give a reason for the decision (at most {MAX_REASON} characters)")]
    Reason,
    #[error(
        "hold `{0}` was raised by a session of one of your own agent keys (or your own try-it): another reviewer must decide it"
    )]
    OwnHold(String),
    #[error("hold `{id}` can no longer be decided: it is {state}")]
    Settled { id: String, state: &'static str },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Audit(#[from] AuditError),
}

impl HoldError {
    /// Whether the reviewer can fix this (as opposed to a server fault).
    pub fn is_user_error(&self) -> bool {
        self.refusal_code().is_some()
    }

    /// The class an audited refusal of this error records; `None` for a server fault.
    fn refusal_code(&self) -> Option<&'static str> {
        match self {
            Self::NotFound(_) => Some("NOT_FOUND"),
            Self::Reason | Self::UnknownState(_) => Some("INVALID"),
            Self::OwnHold(_) => Some("OWN_HOLD"),
            Self::Settled { .. } => Some("SETTLED"),
            Self::Store(_) | Self::Audit(_) => None,
        }
    }
}

/// The door a decision came through, recorded in its audit event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Console,
    Cli,
    Api,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Console => "console",
            Self::Cli => "cli",
            Self::Api => "api",
        }
    }
}

/// Who decides a hold, and through which door.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decider {
    /// The console user (or `cli:` local account) the decision is made as: the identity the
    /// "not your own agent's call" rule compares with the key's creator.
    pub name: String,
    pub channel: Channel,
}

impl Decider {
    pub fn console(name: &str) -> Self {
        Self::new(name, Channel::Console)
    }

    pub fn new(name: &str, channel: Channel) -> Self {
        Self {
            name: name.to_owned(),
            channel,
        }
    }
}

/// The most earlier calls [`Holds::surroundings`] shows, and the session events it reads
/// to find them.
pub const EARLIER_CALLS: usize = 10;
const SESSION_EVENTS_READ: u32 = 500;

/// What a decider reads beside a hold ([`Holds::surroundings`]).
#[derive(Debug, Clone)]
pub struct Surroundings {
    /// The session's calls before the hold, as its timeline shows them, oldest first.
    pub earlier: Vec<crate::compliance::TimelineEntry>,
    /// Each announcement of the hold to a notifier, and how its delivery went.
    pub notified: Vec<crate::store::notifications::NotificationRow>,
}

/// The reviewers' service. Cheap to share behind an `Arc`.
#[derive(Debug, Clone)]
pub struct Holds {
    store: Store,
    audit: AuditLog,
    catalog: Arc<CatalogHandle>,
}

impl Holds {
    pub fn new(store: Store, audit: AuditLog, catalog: Arc<CatalogHandle>) -> Self {
        Self {
            store,
            audit,
            catalog,
        }
    }

    /// A page of the queue, newest first: `state` `None` lists every hold.
    pub async fn list(
        &self,
        state: Option<HoldState>,
        before: Option<&str>,
    ) -> Result<Vec<HoldRow>, HoldError> {
        Ok(self.store.list_holds(state, before, PAGE).await?)
    }

    pub async fn get(&self, id: &str) -> Result<HoldRow, HoldError> {
        self.store
            .hold(id)
            .await?
            .ok_or_else(|| HoldError::NotFound(id.to_owned()))
    }

    /// What a decider reads beside `hold`: up to `EARLIER_CALLS` calls its session made
    /// before it (newest last), and every announcement of it to the approvers.
    pub async fn surroundings(&self, hold: &HoldRow) -> Result<Surroundings, HoldError> {
        let rows = self
            .store
            .audit_session_rows(&hold.session_id, 0, SESSION_EVENTS_READ)
            .await?;
        let held_at = rows.iter().position(|row| {
            row.kind == crate::names::EventKind::CallHeld.as_str()
                && serde_json::from_str::<serde_json::Value>(&row.payload)
                    .is_ok_and(|payload| payload["hold_id"] == hold.id.as_str())
        });
        let before = &rows[..held_at.unwrap_or(rows.len())];
        let mut earlier: Vec<_> = crate::compliance::decode_entries(before)
            .into_iter()
            .filter(|entry| entry.kind.starts_with("call_"))
            .collect();
        let skip = earlier.len().saturating_sub(EARLIER_CALLS);
        earlier.drain(..skip);
        Ok(Surroundings {
            earlier,
            notified: self.store.notifications_of_hold(&hold.id).await?,
        })
    }

    /// `hold` as a decider reads it at `now`, under the live catalog.
    pub fn view(&self, hold: &HoldRow, now: DateTime<Utc>) -> HoldView {
        HoldView::new(hold, &self.catalog.load(), now)
    }

    /// Approves the exact call held as `id`: it may run once within the hold's minutes.
    #[tracing::instrument(skip(self, reason))]
    pub async fn approve(
        &self,
        decider: &Decider,
        id: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<(), HoldError> {
        self.decide(decider, id, true, reason, now).await
    }

    /// Denies the call held as `id` and gives its reserved usage back to its session.
    #[tracing::instrument(skip(self, reason))]
    pub async fn deny(
        &self,
        decider: &Decider,
        id: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<(), HoldError> {
        self.decide(decider, id, false, reason, now).await
    }

    /// Decides the hold; a decision the reviewer is refused (no reason, their own agent's
    /// hold, a settled or unknown hold) is audited as `admin_refused` before they hear it.
    async fn decide(
        &self,
        decider: &Decider,
        id: &str,
        approve: bool,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<(), HoldError> {
        let result = self.try_decide(decider, id, approve, reason, now).await;
        if let Err(refused) = &result
            && let Some(code) = refused.refusal_code()
        {
            self.record_refusal(decider, id, approve, code, &refused.to_string())
                .await?;
        }
        result
    }

    /// Audits a decision refused before it reached this service (a door's role check:
    /// a viewer's API token) as the service audits its own refusals.
    pub async fn record_refusal(
        &self,
        decider: &Decider,
        id: &str,
        approve: bool,
        code: &str,
        message: &str,
    ) -> Result<(), HoldError> {
        let action = if approve { "hold.approve" } else { "hold.deny" };
        let mut event = refusal_event(&decider.name, action, &target("hold", id), code, message);
        event.payload["channel"] = decider.channel.as_str().into();
        self.audit.append(event).await?;
        Ok(())
    }

    async fn try_decide(
        &self,
        decider: &Decider,
        id: &str,
        approve: bool,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<(), HoldError> {
        let reason = reason.trim().to_owned();
        if reason.is_empty() || reason.chars().count() > MAX_REASON {
            return Err(HoldError::Reason);
        }
        let hold = self.get(id).await?;
        if self.raised_by_own_key(&decider.name, &hold).await? {
            return Err(HoldError::OwnHold(hold.id));
        }
        if hold.is_due(now) {
            expire(&self.audit, &hold, now).await?;
            return Err(HoldError::Settled {
                id: hold.id,
                state: HoldState::Expired.as_str(),
            });
        }
        let revision = self.catalog.load().revision().to_owned();
        let until = approve.then(|| now + Duration::minutes(i64::from(hold.minutes)));
        let reviewer = decider.name.clone();
        let channel = decider.channel;
        let decided = hold.clone();
        let done = self
            .audit
            .commit(move |conn| {
                Box::pin(async move {
                    let changed = holds::decide_hold_on(
                        conn,
                        &decided.id,
                        until,
                        &reviewer,
                        &reason,
                        &revision,
                        now,
                    )
                    .await?;
                    if !changed {
                        return Ok(None);
                    }
                    if until.is_none() {
                        release_on(conn, &decided).await?;
                    }
                    let event = NewEvent::hold_decided(
                        &decided.session_id,
                        &reviewer,
                        &decided.id,
                        &decided.tool,
                        until.is_some(),
                        &reason,
                        &revision,
                        channel.as_str(),
                    );
                    Ok(Some(((), vec![event])))
                })
            })
            .await?;
        match done {
            Some(()) => Ok(()),
            None => {
                let state = self.get(id).await?.state.as_str();
                Err(HoldError::Settled {
                    id: id.to_owned(),
                    state,
                })
            }
        }
    }

    /// Whether the hold's session belongs to an agent key that `reviewer` created: a person
    /// does not approve their own agent's call.
    /// A hold raised through the console's try-it panel is its user's own.
    async fn raised_by_own_key(&self, reviewer: &str, hold: &HoldRow) -> Result<bool, HoldError> {
        if hold.key_id < 0 {
            return Ok(hold.key_name == crate::gateway::console_actor(reviewer));
        }
        let key = self.store.agent_key_by_id(hold.key_id).await?;
        Ok(key.and_then(|k| k.created_by).as_deref() == Some(reviewer))
    }

    /// Expires every hold whose time ran out, releasing what each reserved. Returns how many.
    pub async fn expire_due(&self, now: DateTime<Utc>) -> Result<usize, HoldError> {
        let mut expired = 0;
        loop {
            let due = self.store.due_holds(now, 100).await?;
            if due.is_empty() {
                return Ok(expired);
            }
            let batch = due.len();
            for hold in due {
                if expire(&self.audit, &hold, now).await? {
                    expired += 1;
                }
            }
            if batch < 100 {
                return Ok(expired);
            }
        }
    }
}

impl Holds {
    /// Removes the tasks (held calls offered as MCP tasks) whose lifetime ended: their
    /// results are not kept past it. Returns how many.
    pub async fn prune_tasks(&self, now: DateTime<Utc>) -> Result<u64, HoldError> {
        Ok(self.store.prune_tasks(now).await?)
    }
}

/// Gives back what `hold` reserved in its session, inside the caller's transaction.
pub(crate) async fn release_on(conn: &mut Tx, hold: &HoldRow) -> Result<(), StoreError> {
    let Some(mut stored) = load_session_on(conn, &hold.session_id).await? else {
        return Ok(());
    };
    stored.view.release(&hold.usage);
    // Inside `BEGIN IMMEDIATE` nobody else writes: the revision cannot have moved.
    save_session_state_on(conn, &stored.view, stored.revision).await?;
    Ok(())
}

/// Withdraws `hold` for `agent` (who cancelled the task waiting on it) if it is still
/// pending or approved: its usage is released and a `hold_withdrawn` event written, all in
/// one transaction. Returns whether it was withdrawn now (false: it ran, was decided or
/// expired first).
pub(crate) async fn withdraw(
    audit: &AuditLog,
    hold: &HoldRow,
    agent: &str,
    now: DateTime<Utc>,
) -> Result<bool, AuditError> {
    let agent = agent.to_owned();
    end_live(audit, hold, HoldState::Withdrawn, now, move |hold, was| {
        NewEvent::hold_withdrawn(&hold.session_id, &hold.id, &hold.tool, was, &agent)
    })
    .await
}

/// Expires `hold` if it is still pending or approved: its usage is released and a
/// `hold_expired` event written, all in one transaction. Returns whether it expired now.
pub(crate) async fn expire(
    audit: &AuditLog,
    hold: &HoldRow,
    now: DateTime<Utc>,
) -> Result<bool, AuditError> {
    end_live(audit, hold, HoldState::Expired, now, |hold, was| {
        NewEvent::hold_expired(&hold.session_id, &hold.id, &hold.tool, was)
    })
    .await
}

/// Moves a hold that still reserves usage (pending or approved) to `to`, releases what it
/// reserved and writes the event `event` makes of it and the state it left, in one
/// transaction. False when it had already moved on (ran, was decided, expired).
async fn end_live(
    audit: &AuditLog,
    hold: &HoldRow,
    to: HoldState,
    now: DateTime<Utc>,
    event: impl FnOnce(&HoldRow, &str) -> NewEvent + Send + 'static,
) -> Result<bool, AuditError> {
    let hold = hold.clone();
    let done = audit
        .commit(move |conn| {
            Box::pin(async move {
                let was = hold.state.as_str();
                let live = [HoldState::Pending, HoldState::Approved];
                if !holds::finish_hold_on(conn, &hold.id, &live, to, now).await? {
                    return Ok(None);
                }
                release_on(conn, &hold).await?;
                Ok(Some(((), vec![event(&hold, was)])))
            })
        })
        .await?;
    Ok(done.is_some())
}
