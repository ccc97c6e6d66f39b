//! The MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663, protocol 2026-07-28)
//! over the gateway's call tasks: a `tools/call` of `call_tool` that is held for approval,
//! from a client that declared the extension, answers with a task (`resultType: "task"`);
//! `tasks/get` reports it (running the call once it is approved) and `tasks/cancel`
//! withdraws the hold. The SDK gates `tasks/*` on the client's declaration (-32021) and
//! checks `Mcp-Name` against the task id.
//!
//! As the extension says: a held call that ends refused (denied, expired, refused on
//! resume) completes the task with that `isError: true` result; `failed` is for the
//! gateway failing; there is no `tasks/list` nor `tasks/result`.

use std::panic::AssertUnwindSafe;

use chrono::{DateTime, SecondsFormat, Utc};
use futures::FutureExt as _;
use rmcp::ErrorData as McpError;
use rmcp::model::{CreateTaskResult, DetailedTask, JsonObject, Task, TaskPayload, TaskStatus};
use serde_json::{Value, json};
use skillgate_core::gateway::{AgentIdentity, CallTask, Gateway, GatewayError, POLL_INTERVAL_MS};
use skillgate_core::store::tasks::TaskStatus as Stored;

/// A task's timestamps on the wire (both revisions): RFC 3339, milliseconds, UTC.
pub fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn status(status: Stored) -> TaskStatus {
    match status {
        Stored::Working => TaskStatus::Working,
        Stored::Completed => TaskStatus::Completed,
        Stored::Cancelled => TaskStatus::Cancelled,
        Stored::Failed => TaskStatus::Failed,
    }
}

fn base(task: &CallTask) -> Task {
    Task::new(
        task.id.clone(),
        status(task.status),
        stamp(task.created_at),
        stamp(task.updated_at),
    )
    .with_status_message(task.message.clone())
    .with_ttl_ms(task.ttl_ms())
    .with_poll_interval_ms(POLL_INTERVAL_MS)
}

/// The answer to the `tools/call` that raised the hold: the task to poll.
pub fn created(task: &CallTask) -> CreateTaskResult {
    CreateTaskResult::new(base(task))
}

/// `tasks/get`'s task: its status and, once completed, the call's result inlined.
pub fn detailed(task: &CallTask) -> DetailedTask {
    let payload = match task.status {
        Stored::Working => TaskPayload::Working,
        Stored::Cancelled => TaskPayload::Cancelled,
        Stored::Completed => match task
            .result
            .as_ref()
            .and_then(|r| serde_json::to_value(r).ok())
        {
            Some(Value::Object(result)) => TaskPayload::Completed { result },
            // A stored result that cannot be read is the gateway's failure, not the call's.
            _ => TaskPayload::Failed {
                error: failure("the task's result could not be read"),
            },
        },
        Stored::Failed => TaskPayload::Failed {
            error: failure("the gateway failed while settling this task"),
        },
    };
    DetailedTask::new(base(task), payload)
}

/// A JSON-RPC error object, as a failed task carries it.
fn failure(message: &str) -> JsonObject {
    match json!({"code": -32603, "message": message}) {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// The caller's task `id` as it stands now, running its call if its hold was approved
/// since (`tasks/get` of either revision, and a blocked `tasks/result`). A panic on the
/// way is answered and audited as `call_tool`'s is.
pub async fn settle(
    gateway: &Gateway,
    agent: &AgentIdentity,
    id: &str,
) -> Result<Option<CallTask>, McpError> {
    let settled = AssertUnwindSafe(gateway.task(agent, id))
        .catch_unwind()
        .await;
    match settled {
        Ok(found) => found.map_err(failure_of),
        Err(_) => {
            tracing::error!("a task handler panicked");
            if let Err(error) = gateway
                .record_internal_error(agent, "tasks/get", None)
                .await
            {
                tracing::error!(%error, "the failed request could not be audited");
            }
            Err(McpError::internal_error("internal error", None))
        }
    }
}

/// The store or audit log failed while serving a task: the agent hears only that it failed.
pub fn failure_of(error: GatewayError) -> McpError {
    tracing::error!(%error, "the gateway failed while serving a task");
    McpError::internal_error("internal error", None)
}

/// An unknown task id, another key's task and an expired one get the same answer.
pub fn not_found(id: &str) -> McpError {
    let shown: String = id.chars().take(64).collect();
    McpError::invalid_params(format!("no task `{shown}`"), None)
}

/// `tasks/update` answers outstanding input requests; a held call never asks for input.
pub fn no_input(id: &str) -> McpError {
    let shown: String = id.chars().take(64).collect();
    McpError::invalid_params(
        format!("task `{shown}` asks for no input: it waits for a reviewer"),
        None,
    )
}
