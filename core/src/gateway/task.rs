//! Held calls as MCP tasks: the protocol-neutral half. A client that asks for a task gets
//! one for a call that is held for approval; the MCP adapter speaks each protocol
//! revision's wire (`tasks/get`, `tasks/cancel`, …) over these operations.
//!
//! A task is a view of its hold, stored so that any replica answers for it:
//! - while the hold waits (or was approved and has not run) the task is `working`;
//! - the first `tasks/get` after an approval runs the call, through the same resume as
//!   `call_tool {"hold_id"}`, so it runs once, decided again under the catalog in force;
//!   whichever request runs it (a poll, or the agent's own resume) stores its result in
//!   the task, and every later `tasks/get` answers that result;
//! - a denial, an expiry or a refusal on resume completes the task with the structured
//!   refusal (`isError: true`);
//! - `tasks/cancel` withdraws the hold (audited `hold_withdrawn`, its usage released).
//!
//! A client of MCP 2025-11-25 may ask for any `call_tool` to run as a task, before anyone
//! knows whether it will be held: a call that was not held becomes a task finished at
//! birth, holding what the call answered ([`Gateway::task_for_call`]).
//!
//! A task id is random (122 bits) and bound to the key that made the call: another key's
//! request finds nothing, exactly as for an id that never existed.

use chrono::{DateTime, Duration, Utc};
use rmcp::model::CallToolResult;
use uuid::Uuid;

use super::{AgentIdentity, Gateway, GatewayError, ToolReply};
use crate::holds::{expire, withdraw};
use crate::store::holds::{HoldRow, HoldState};
use crate::store::tasks::{TaskRow, TaskStatus};

/// How long a finished task's result stays readable, beyond the longest its hold can wait
/// and then wait again once approved.
const RETENTION: Duration = Duration::hours(1);

/// The longest task id looked up: issued ones are 37 characters (`task_` and 32 hex).
const MAX_TASK_ID: usize = 64;

/// How often a client should ask: a reviewer decides in minutes, not milliseconds.
pub const POLL_INTERVAL_MS: u64 = 5_000;

/// The most tasks one `tasks/list` page holds.
pub const TASK_PAGE: u32 = 50;

/// A task as the adapters show it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallTask {
    pub id: String,
    pub status: TaskStatus,
    /// What the task waits for, or how it ended: the sentence a model or person reads.
    pub message: String,
    /// The hold it waits on, or waited on; none for a call that was not held.
    pub hold_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// After this the task is gone: `tasks/get` finds nothing.
    pub expires_at: DateTime<Utc>,
    /// The call's result once completed: what ran, or the refusal that ended it.
    pub result: Option<CallToolResult>,
}

impl CallTask {
    /// The task's lifetime from its creation, in milliseconds.
    pub fn ttl_ms(&self) -> u64 {
        (self.expires_at - self.created_at)
            .num_milliseconds()
            .try_into()
            .unwrap_or(0)
    }
}

/// One page of a caller's tasks, and the cursor of the next page when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskPage {
    pub tasks: Vec<CallTask>,
    pub next_cursor: Option<String>,
}

/// What `tasks/cancel` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Cancelled {
    /// The hold was withdrawn and the task is cancelled.
    Now(CallTask),
    /// The task had already ended (completed, failed or cancelled): nothing changed.
    AlreadyFinished(CallTask),
    /// No task of the caller by that id.
    NotFound,
}

impl Gateway {
    /// Offers a held call as a task: when `reply` says a hold of this caller waits (raised
    /// now, or the same call made again), stores a task bound to the caller and returns
    /// it. `None` for any other reply, which then stands as the call's answer.
    #[tracing::instrument(skip_all, fields(key = %agent.key_name))]
    pub async fn task_for_reply(
        &self,
        agent: &AgentIdentity,
        reply: &ToolReply,
    ) -> Result<Option<CallTask>, GatewayError> {
        let ToolReply::Gateway { structured, .. } = reply else {
            return Ok(None);
        };
        if structured["decision"] != "pending_approval" {
            return Ok(None);
        }
        let Some(hold_id) = structured["hold_id"].as_str() else {
            return Ok(None);
        };
        let Some(hold) = self
            .store
            .hold(hold_id)
            .await?
            .filter(|h| h.key_id == agent.key_id)
        else {
            return Ok(None);
        };
        let now = Self::now();
        // Long enough for the hold to wait, be approved and wait again to run, then for
        // the result to be read.
        let waits = Duration::minutes(i64::from(hold.minutes));
        let row = TaskRow {
            id: new_task_id(),
            hold_id: Some(hold.id.clone()),
            key_id: agent.key_id,
            status: TaskStatus::Working,
            result: None,
            created_at: now,
            updated_at: now,
            expires_at: now + waits + waits + RETENTION,
        };
        self.store.insert_task(&row).await?;
        Ok(Some(view(row, Some(&hold))))
    }

    /// A call as a task, for a client that asked for one before knowing whether the call
    /// would be held: the task of its hold, or, for any other answer, a task finished
    /// with that answer (`completed`; the adapter reads an `isError` result as the
    /// protocol says).
    #[tracing::instrument(skip_all, fields(key = %agent.key_name))]
    pub async fn task_for_call(
        &self,
        agent: &AgentIdentity,
        reply: ToolReply,
    ) -> Result<CallTask, GatewayError> {
        if let Some(task) = self.task_for_reply(agent, &reply).await? {
            return Ok(task);
        }
        self.finished_task(agent, reply.into_call_result()).await
    }

    /// A task finished at birth with `result`: a call asked for as a task that was not
    /// held (it ran, or was refused before anything was held).
    #[tracing::instrument(skip_all, fields(key = %agent.key_name))]
    pub async fn finished_task(
        &self,
        agent: &AgentIdentity,
        result: CallToolResult,
    ) -> Result<CallTask, GatewayError> {
        let now = Self::now();
        let json = serde_json::to_value(&result).map_err(|e| {
            crate::store::StoreError::Conflict(format!("a result does not serialize: {e}"))
        })?;
        let row = TaskRow {
            id: new_task_id(),
            hold_id: None,
            key_id: agent.key_id,
            status: TaskStatus::Completed,
            result: Some(json),
            created_at: now,
            updated_at: now,
            expires_at: now + RETENTION,
        };
        self.store.insert_task(&row).await?;
        Ok(view(row, None))
    }

    /// `tasks/list`: a page of the caller's live tasks in creation order, as stored (a
    /// list runs nothing; `tasks/get` settles a task). `cursor` is the last task of the
    /// previous page; `None` when it names no live task of the caller.
    #[tracing::instrument(skip_all, fields(key = %agent.key_name))]
    pub async fn tasks(
        &self,
        agent: &AgentIdentity,
        cursor: Option<&str>,
    ) -> Result<Option<TaskPage>, GatewayError> {
        let now = Self::now();
        let after = match cursor {
            Some(id) => match self.own_task(agent, id, now).await? {
                Some(row) => Some(row),
                None => return Ok(None),
            },
            None => None,
        };
        // One more than a page says whether another page follows.
        let mut rows = self
            .store
            .tasks_of_key(agent.key_id, now, after.as_ref(), TASK_PAGE + 1)
            .await?;
        let more = rows.len() > TASK_PAGE as usize;
        rows.truncate(TASK_PAGE as usize);
        let next_cursor = more.then(|| rows.last().map(|r| r.id.clone())).flatten();
        let mut tasks = Vec::with_capacity(rows.len());
        for row in rows {
            // A working task's message says what its hold waits for.
            let hold = match (&row.hold_id, row.status) {
                (Some(id), TaskStatus::Working) => self.store.hold(id).await?,
                _ => None,
            };
            tasks.push(view(row, hold.as_ref()));
        }
        Ok(Some(TaskPage { tasks, next_cursor }))
    }

    /// `tasks/get`: where the caller's task stands, running its call if the hold was
    /// approved since. `None` when the caller has no task by that id (or it expired).
    #[tracing::instrument(skip_all, fields(key = %agent.key_name))]
    pub async fn task(
        &self,
        agent: &AgentIdentity,
        id: &str,
    ) -> Result<Option<CallTask>, GatewayError> {
        let now = Self::now();
        let Some(row) = self.own_task(agent, id, now).await? else {
            return Ok(None);
        };
        if row.status.is_terminal() {
            return Ok(Some(view(row, None)));
        }
        let hold = match &row.hold_id {
            Some(id) => self.store.hold(id).await?,
            None => None,
        };
        let Some(mut hold) = hold else {
            // Holds are never deleted while a task can read them, and a task without a
            // hold is finished when made: this is a broken row.
            let failed = self.end_task(&row, TaskStatus::Failed, None).await?;
            return Ok(Some(failed));
        };
        if hold.is_due(now) {
            expire(&self.audit, &hold, now).await?;
            hold = self.store.hold(&hold.id).await?.unwrap_or(hold);
        }
        match hold.state {
            HoldState::Pending => Ok(Some(view(row, Some(&hold)))),
            HoldState::Approved => {
                // Runs it (once: the resume moves the hold to `executed` with its
                // `call_allowed`) and stores its result in the task on the way out.
                let session = Some(hold.session_id.clone());
                self.resume(agent, session, &hold.id, None, None, false)
                    .await?;
                self.reread(&row, None).await
            }
            // Ran through another request: it stored the result in the task, or is about
            // to (then this poll still says `working`).
            HoldState::Executed => self.reread(&row, Some(&hold)).await,
            HoldState::Denied | HoldState::Expired | HoldState::Refused => {
                let refusal = super::pipeline::replies::settled_reply(&hold).into_call_result();
                let ended = self
                    .end_task(&row, TaskStatus::Completed, Some(refusal))
                    .await?;
                Ok(Some(ended))
            }
            HoldState::Withdrawn => {
                let withdrawn = super::pipeline::replies::settled_reply(&hold).into_call_result();
                let ended = self
                    .end_task(&row, TaskStatus::Cancelled, Some(withdrawn))
                    .await?;
                Ok(Some(ended))
            }
        }
    }

    /// `tasks/cancel`: withdraws the hold of the caller's working task (audited, its
    /// usage released) and cancels the task. A task that already ended stays as it was.
    #[tracing::instrument(skip_all, fields(key = %agent.key_name))]
    pub async fn cancel_task(
        &self,
        agent: &AgentIdentity,
        id: &str,
    ) -> Result<Cancelled, GatewayError> {
        let now = Self::now();
        let Some(row) = self.own_task(agent, id, now).await? else {
            return Ok(Cancelled::NotFound);
        };
        if row.status.is_terminal() {
            return Ok(Cancelled::AlreadyFinished(view(row, None)));
        }
        let hold = match &row.hold_id {
            Some(id) => self.store.hold(id).await?,
            None => None,
        };
        if let Some(hold) = &hold
            && withdraw(&self.audit, hold, &agent.key_name, now).await?
        {
            // What the call answers now, kept for a protocol that reads a cancelled
            // task's result (2025-11-25's `tasks/result`): withdrawn, nothing ran.
            let withdrawn = self
                .store
                .hold(&hold.id)
                .await?
                .map(|h| super::pipeline::replies::settled_reply(&h).into_call_result());
            let cancelled = self
                .end_task(&row, TaskStatus::Cancelled, withdrawn)
                .await?;
            return Ok(Cancelled::Now(cancelled));
        }
        // The hold ran, was decided or expired first: the task ends as that says.
        Ok(match self.task(agent, id).await? {
            Some(task) => Cancelled::AlreadyFinished(task),
            None => Cancelled::NotFound,
        })
    }

    /// Whether the caller has a live task by that id, without settling it (nothing runs).
    pub async fn has_task(&self, agent: &AgentIdentity, id: &str) -> Result<bool, GatewayError> {
        Ok(self.own_task(agent, id, Self::now()).await?.is_some())
    }

    /// The caller's live task by that id. An id longer than any issued is nobody's: it is
    /// not looked up.
    async fn own_task(
        &self,
        agent: &AgentIdentity,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<TaskRow>, GatewayError> {
        if id.len() > MAX_TASK_ID {
            return Ok(None);
        }
        Ok(self.store.task_of(id, agent.key_id, now).await?)
    }

    /// Stores in the working tasks of `hold` the result of the request that just ran it
    /// (or that the policy refused on resume). Nothing when the hold is still approved (the
    /// request was turned away before deciding, say a busy session: a later poll runs it),
    /// nor when another request ran it (`HOLD_USED`): that request stores its own.
    pub(super) async fn settle_tasks_of(
        &self,
        hold: &HoldRow,
        reply: &ToolReply,
    ) -> Result<(), GatewayError> {
        if let ToolReply::Gateway { structured, .. } = reply
            && structured["code"] == "HOLD_USED"
        {
            return Ok(());
        }
        let now = self.store.hold(&hold.id).await?;
        if now.is_none_or(|h| h.state == HoldState::Approved) {
            return Ok(());
        }
        let result = serde_json::to_value(reply.clone().into_call_result()).map_err(|e| {
            crate::store::StoreError::Conflict(format!("a result does not serialize: {e}"))
        })?;
        self.store
            .finish_tasks_of_hold(&hold.id, &result, Self::now())
            .await?;
        Ok(())
    }

    /// Ends `row` as `status` (when it is still working) and answers how it stands now.
    async fn end_task(
        &self,
        row: &TaskRow,
        status: TaskStatus,
        result: Option<CallToolResult>,
    ) -> Result<CallTask, GatewayError> {
        let json = result.as_ref().and_then(|r| serde_json::to_value(r).ok());
        self.store
            .finish_task(&row.id, status, json.as_ref(), Self::now())
            .await?;
        Ok(self
            .reread(row, None)
            .await?
            .unwrap_or_else(|| view(row.clone(), None)))
    }

    /// The task as stored now.
    async fn reread(
        &self,
        row: &TaskRow,
        hold: Option<&HoldRow>,
    ) -> Result<Option<CallTask>, GatewayError> {
        let now = Self::now();
        Ok(self
            .store
            .task_of(&row.id, row.key_id, now)
            .await?
            .map(|row| view(row, hold)))
    }
}

fn new_task_id() -> String {
    format!("task_{}", Uuid::new_v4().simple())
}

/// The adapters' view of a stored task; `hold`, when known, words a working task's message.
fn view(row: TaskRow, hold: Option<&HoldRow>) -> CallTask {
    let result: Option<CallToolResult> = row
        .result
        .as_ref()
        .and_then(|json| serde_json::from_value(json.clone()).ok());
    let message = match (row.status, hold) {
        (TaskStatus::Working, Some(hold)) if hold.state == HoldState::Approved => format!(
            "Hold {} was approved; the call runs once on the next tasks/get.",
            hold.id
        ),
        (TaskStatus::Working, Some(hold)) if hold.state == HoldState::Pending => format!(
            "Hold {} waits for a reviewer until {}: {} The reviewer sees the tool `{}`, role {}, key {} and the call's arguments.",
            hold.id,
            hold.expires_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            hold.rule,
            hold.tool,
            hold.role,
            hold.key_name,
        ),
        (TaskStatus::Working, _) => format!(
            "Hold {} is being settled.",
            row.hold_id.as_deref().unwrap_or("-")
        ),
        (TaskStatus::Completed, _) => result
            .as_ref()
            .and_then(|r| r.structured_content.as_ref())
            .and_then(|s| s["message"].as_str())
            .unwrap_or("The call finished.")
            .to_owned(),
        (TaskStatus::Cancelled, _) => format!(
            "Hold {} was withdrawn when the task was cancelled; nothing ran.",
            row.hold_id.as_deref().unwrap_or("-")
        ),
        (TaskStatus::Failed, _) => "The gateway failed while settling this task.".to_owned(),
    };
    CallTask {
        id: row.id,
        status: row.status,
        message,
        hold_id: row.hold_id,
        created_at: row.created_at,
        updated_at: row.updated_at,
        expires_at: row.expires_at,
        result,
    }
}
