//! MCP tasks as revision 2025-11-25 has them in the core protocol: a client augments a
//! `tools/call` with `task`, gets a `CreateTaskResult`, and follows it with `tasks/get`,
//! `tasks/result`, `tasks/list` and `tasks/cancel`. rmcp speaks only the 2026-07-28
//! extension ([`super::tasks`]), so this layer speaks the 2025-11-25 wire in front of it,
//! over the same gateway operations, for requests that name that revision in their
//! `MCP-Protocol-Version` header:
//!
//! - `initialize` answers that negotiate 2025-11-25 declare `tasks` (list, cancel,
//!   `requests.tools.call`), and `tools/list` marks `call_tool` `execution.taskSupport:
//!   "optional"`; the other platform tools cannot be held, and a `task` on them is refused
//!   with `-32601`, as the spec says, and audited.
//! - A task-augmented `call_tool` goes through the handler like any call (audit, trace,
//!   panic guard) without its `task`, marked with [`AsTask`]; the handler makes the call a
//!   task (a held call's waits on its hold, any other is finished at birth) and leaves it
//!   in the mark, and this layer answers `{"task": …}` in place of the handler's answer.
//! - `tasks/result` blocks until the task ends (a person decides, so it rechecks the
//!   store every [`RESULT_RECHECK`], which also sees a decision taken on another replica)
//!   and answers exactly what the call answered, with the related-task `_meta`.
//! - A call that ended `isError: true` (a denial, an expiry, a refusal) is `failed`, as
//!   2025-11-25 says for tool calls; a cancel of a finished task is `-32602`.
//!
//! Other revisions pass through untouched: the header is read before any body is.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::body::Bytes;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode, header};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use skillgate_core::gateway::{AgentIdentity, CallTask, Cancelled, Gateway, POLL_INTERVAL_MS};
use skillgate_core::policy::DenyCode;
use skillgate_core::store::tasks::TaskStatus;

use super::auth::AgentCaller;
use super::connection::{MCP_SESSION_ID, unreadable_body};
use super::refusals;
use super::tasks::{self as shared, stamp};
use super::workspaces::CallerGateway;

/// The revision whose core tasks this layer speaks.
pub const REVISION: &str = "2025-11-25";

/// How often a blocked `tasks/result` looks at its task again: often enough that an
/// approval is seen promptly, rarely enough that a waiting agent costs one small read.
pub const RESULT_RECHECK: Duration = Duration::from_millis(500);

const PROTOCOL_HEADER: &str = "mcp-protocol-version";
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
const IMMEDIATE_RESPONSE: &str = "io.modelcontextprotocol/model-immediate-response";

const INVALID_PARAMS: i64 = -32602;
const METHOD_NOT_FOUND: i64 = -32601;
const INTERNAL_ERROR: i64 = -32603;

/// Put on a task-augmented `call_tool`; the handler leaves in it the task it made.
#[derive(Debug, Clone, Default)]
pub struct AsTask(Arc<Mutex<Option<CallTask>>>);

impl AsTask {
    pub fn fill(&self, task: CallTask) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(task);
        }
    }

    fn take(&self) -> Option<CallTask> {
        self.0.lock().ok().and_then(|mut slot| slot.take())
    }
}

/// What this layer reads of a request: its id and method, and the params it acts on.
/// Everything else (a call's arguments) is skipped unparsed.
#[derive(Deserialize)]
struct Head {
    id: Option<Value>,
    method: Option<String>,
    params: Option<Params>,
}

#[derive(Deserialize, Default)]
struct Params {
    name: Option<Value>,
    task: Option<Value>,
    #[serde(rename = "taskId")]
    task_id: Option<Value>,
    cursor: Option<Value>,
}

pub async fn serve(request: Request, next: Next) -> Response {
    let version = request
        .headers()
        .get(PROTOCOL_HEADER)
        .map(HeaderValue::as_bytes);
    // `initialize` comes before any version is negotiated, so usually without the header
    // (or with the one the client hopes for); other revisions' requests are not read.
    let ours = match version {
        None => false,
        Some(v) if v == REVISION.as_bytes() => true,
        Some(_) => return next.run(request).await,
    };
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    // The body limit layer outside has bounded it already.
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) => return unreadable_body(error),
    };
    let head: Option<Head> = serde_json::from_slice(&bytes).ok();
    let Some(Head {
        id: Some(id),
        method: Some(method),
        params,
    }) = head
    else {
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    let params = params.unwrap_or_default();
    let caller = parts.extensions.get::<AgentCaller>().cloned();
    let gateway = parts.extensions.get::<CallerGateway>().cloned();
    let agent = caller.zip(gateway).map(|(caller, CallerGateway(gateway))| {
        let connection = parts
            .headers
            .get(MCP_SESSION_ID)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        (caller.identity(connection), gateway)
    });
    match (ours, method.as_str(), agent) {
        // Whichever revision it then negotiates: the answer says.
        (_, "initialize", _) => {
            let response = next
                .run(Request::from_parts(parts, Body::from(bytes)))
                .await;
            amend(response, declare_tasks).await
        }
        (true, "tools/list", _) => {
            let response = next
                .run(Request::from_parts(parts, Body::from(bytes)))
                .await;
            amend(response, mark_call_tool).await
        }
        (true, "tools/call", Some((agent, gateway))) if params.task.is_some() => {
            if let Err(refused) = check_task_call(&params) {
                refusals::take(Some(&parts));
                return refuse_call(&gateway, &agent, &params, id, refused).await;
            }
            let Some(stripped) = without_task(&bytes) else {
                return next
                    .run(Request::from_parts(parts, Body::from(bytes)))
                    .await;
            };
            let slot = AsTask::default();
            parts.extensions.insert(slot.clone());
            parts.headers.remove(header::CONTENT_LENGTH);
            let response = next
                .run(Request::from_parts(parts, Body::from(stripped)))
                .await;
            match slot.take() {
                Some(task) => answer(id, Ok(created(&task))),
                // The handler failed (a JSON-RPC error): that is what the call answered.
                None => response,
            }
        }
        (true, "tasks/get", Some((agent, gateway))) => {
            let answer_of = match task_id(&params) {
                Ok(task) => settle(&gateway, &agent, task)
                    .await
                    .and_then(|found| found.ok_or_else(|| not_found(task)))
                    .map(|task| core_task(&task)),
                Err(refused) => Err(refused),
            };
            answer(id, answer_of)
        }
        (true, "tasks/result", Some((agent, gateway))) => {
            let answer_of = match task_id(&params) {
                Ok(task) => wait_for_result(&gateway, &agent, task).await,
                Err(refused) => Err(refused),
            };
            answer(id, answer_of)
        }
        (true, "tasks/list", Some((agent, gateway))) => {
            answer(id, list(&gateway, &agent, &params).await)
        }
        (true, "tasks/cancel", Some((agent, gateway))) => {
            let answer_of = match task_id(&params) {
                Ok(task) => cancel(&gateway, &agent, task).await,
                Err(refused) => Err(refused),
            };
            answer(id, answer_of)
        }
        _ => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
    }
}

/// A JSON-RPC error: code and message.
type Refusal = (i64, String);

/// What is wrong with a `task` on a `tools/call`, if anything: only `call_tool` can be held,
/// and `task` is an object whose `ttl`, when given, is a whole number of milliseconds.
fn check_task_call(params: &Params) -> Result<(), Refusal> {
    let name = params.name.as_ref().and_then(Value::as_str);
    if name != Some("call_tool") {
        let shown = match &params.name {
            Some(Value::String(name)) => name.chars().take(64).collect::<String>(),
            Some(other) => other.to_string().chars().take(64).collect(),
            None => "(no name)".to_owned(),
        };
        return Err((
            METHOD_NOT_FOUND,
            format!(
                "`{shown}` does not run as a task (its execution.taskSupport is forbidden): \
                 only call_tool can be held for approval; call it without `task`"
            ),
        ));
    }
    let ttl_ok = match &params.task {
        Some(Value::Object(task)) => task
            .get("ttl")
            .is_none_or(|ttl| ttl.is_null() || ttl.as_u64().is_some()),
        _ => false,
    };
    if !ttl_ok {
        return Err((
            INVALID_PARAMS,
            "`params.task` must be an object whose `ttl`, when given, is a whole number of \
             milliseconds"
                .to_owned(),
        ));
    }
    Ok(())
}

/// A task-augmented call refused before the handler: audited under the caller (the name
/// it sent as the tool), then answered.
async fn refuse_call(
    gateway: &Gateway,
    agent: &AgentIdentity,
    params: &Params,
    id: Value,
    (code, message): Refusal,
) -> Response {
    let tool = match &params.name {
        Some(Value::String(name)) => name.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    tracing::info!(%message, "refused a task-augmented tools/call");
    let audited = gateway
        .record_refusal(agent, &tool, None, DenyCode::InvalidArguments, &message)
        .await;
    match audited {
        Ok(()) => answer(id, Err((code, message))),
        Err(error) => {
            tracing::error!(%error, "a refused request could not be audited");
            (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response()
        }
    }
}

/// The request without `params.task`, for the handler (rmcp reads no `task` and would
/// run the call as a plain one). `None` if the body is not a JSON object after all.
fn without_task(bytes: &Bytes) -> Option<Bytes> {
    let mut message: Value = serde_json::from_slice(bytes).ok()?;
    message.get_mut("params")?.as_object_mut()?.remove("task");
    serde_json::to_vec(&message).ok().map(Bytes::from)
}

fn task_id(params: &Params) -> Result<&str, Refusal> {
    params
        .task_id
        .as_ref()
        .and_then(Value::as_str)
        .ok_or_else(|| {
            (
                INVALID_PARAMS,
                "`params.taskId` must be a string".to_owned(),
            )
        })
}

fn not_found(id: &str) -> Refusal {
    let error = shared::not_found(id);
    (INVALID_PARAMS, error.message.into_owned())
}

fn internal(error: rmcp::ErrorData) -> Refusal {
    (INTERNAL_ERROR, error.message.into_owned())
}

async fn settle(
    gateway: &Gateway,
    agent: &AgentIdentity,
    id: &str,
) -> Result<Option<CallTask>, Refusal> {
    shared::settle(gateway, agent, id).await.map_err(internal)
}

/// `tasks/result`: blocks until the task ends, then answers what the call answered.
async fn wait_for_result(
    gateway: &Gateway,
    agent: &AgentIdentity,
    id: &str,
) -> Result<Value, Refusal> {
    loop {
        let task = settle(gateway, agent, id)
            .await?
            .ok_or_else(|| not_found(id))?;
        if task.status.is_terminal() {
            return result_of(&task);
        }
        // Ends: a hold is decided, withdrawn or expires (the settle above expires it),
        // and a client that stops waiting drops this request.
        tokio::time::sleep(RESULT_RECHECK).await;
    }
}

/// A finished task's result, exactly as the call answered, tagged with its task.
fn result_of(task: &CallTask) -> Result<Value, Refusal> {
    let stored = match (task.status, &task.result) {
        (TaskStatus::Failed, _) | (_, None) => {
            return Err((INTERNAL_ERROR, "internal error".to_owned()));
        }
        (_, Some(result)) => result,
    };
    let mut result =
        serde_json::to_value(stored).map_err(|_| (INTERNAL_ERROR, "internal error".to_owned()))?;
    // rmcp's 2026-07-28 discriminator is not part of this revision's result.
    if let Some(object) = result.as_object_mut() {
        object.remove("resultType");
        let meta = object
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(RELATED_TASK.to_owned(), json!({"taskId": task.id}));
        }
    }
    Ok(result)
}

async fn list(gateway: &Gateway, agent: &AgentIdentity, params: &Params) -> Result<Value, Refusal> {
    let cursor = match &params.cursor {
        None | Some(Value::Null) => None,
        Some(Value::String(cursor)) => Some(cursor.as_str()),
        Some(_) => {
            return Err((
                INVALID_PARAMS,
                "`params.cursor` must be a string".to_owned(),
            ));
        }
    };
    let page = gateway
        .tasks(agent, cursor)
        .await
        .map_err(|error| internal(shared::failure_of(error)))?
        .ok_or_else(|| {
            (
                INVALID_PARAMS,
                "unknown cursor: pass the `nextCursor` of the previous page".to_owned(),
            )
        })?;
    let mut answer = json!({"tasks": page.tasks.iter().map(core_task).collect::<Vec<_>>()});
    if let Some(next) = page.next_cursor {
        answer["nextCursor"] = Value::String(next);
    }
    Ok(answer)
}

async fn cancel(gateway: &Gateway, agent: &AgentIdentity, id: &str) -> Result<Value, Refusal> {
    match gateway.cancel_task(agent, id).await {
        Ok(Cancelled::Now(task)) => Ok(core_task(&task)),
        Ok(Cancelled::AlreadyFinished(task)) => Err((
            INVALID_PARAMS,
            format!(
                "task `{}` already ended ({}): a finished task cannot be cancelled",
                task.id,
                status(&task)
            ),
        )),
        Ok(Cancelled::NotFound) => Err(not_found(id)),
        Err(error) => Err(internal(shared::failure_of(error))),
    }
}

/// The status a task has on this revision's wire: a tool call that ended `isError: true`
/// is `failed`.
fn status(task: &CallTask) -> &'static str {
    match task.status {
        TaskStatus::Working => "working",
        TaskStatus::Completed
            if task
                .result
                .as_ref()
                .is_some_and(|r| r.is_error == Some(true)) =>
        {
            "failed"
        }
        TaskStatus::Completed => "completed",
        TaskStatus::Cancelled => "cancelled",
        TaskStatus::Failed => "failed",
    }
}

/// A task as this revision's `Task`.
fn core_task(task: &CallTask) -> Value {
    json!({
        "taskId": task.id,
        "status": status(task),
        "statusMessage": task.message,
        "createdAt": stamp(task.created_at),
        "lastUpdatedAt": stamp(task.updated_at),
        "ttl": task.ttl_ms(),
        "pollInterval": POLL_INTERVAL_MS,
    })
}

/// `CreateTaskResult`, with the sentence a host may hand its model while the task runs.
fn created(task: &CallTask) -> Value {
    json!({
        "task": core_task(task),
        "_meta": {IMMEDIATE_RESPONSE: task.message},
    })
}

/// This layer's own JSON-RPC answer.
fn answer(id: Value, outcome: Result<Value, Refusal>) -> Response {
    let message = match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        }
    };
    (
        [(header::CONTENT_TYPE, "application/json")],
        message.to_string(),
    )
        .into_response()
}

/// The library's JSON answer, changed by `edit`; passed on unchanged when it is not a
/// JSON-RPC result (an error, or an event stream).
async fn amend(response: Response, edit: fn(&mut Value) -> bool) -> Response {
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1024 * 1024).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response();
    };
    let mut message: Value = match serde_json::from_slice(&bytes) {
        Ok(message) => message,
        Err(_) => return Response::from_parts(parts, Body::from(bytes)),
    };
    if !edit(&mut message) {
        return Response::from_parts(parts, Body::from(bytes));
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(message.to_string()))
}

/// An `initialize` answer that negotiated this revision declares its tasks.
fn declare_tasks(message: &mut Value) -> bool {
    let result = &mut message["result"];
    if result["protocolVersion"] != REVISION || !result["capabilities"].is_object() {
        return false;
    }
    result["capabilities"]["tasks"] = json!({
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    });
    true
}

/// `call_tool` may run as a task; the other platform tools cannot be held.
fn mark_call_tool(message: &mut Value) -> bool {
    let Some(tools) = message["result"]["tools"].as_array_mut() else {
        return false;
    };
    let mut marked = false;
    for tool in tools.iter_mut().filter(|t| t["name"] == "call_tool") {
        tool["execution"] = json!({"taskSupport": "optional"});
        marked = true;
    }
    marked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_call_tool_takes_a_task_and_the_task_must_be_an_object_with_a_whole_ttl() {
        let params = |name: Value, task: Value| Params {
            name: Some(name),
            task: Some(task),
            ..Params::default()
        };
        assert!(check_task_call(&params(json!("call_tool"), json!({}))).is_ok());
        assert!(check_task_call(&params(json!("call_tool"), json!({"ttl": 60000}))).is_ok());
        let (code, message) = check_task_call(&params(json!("learn"), json!({}))).unwrap_err();
        assert_eq!(code, METHOD_NOT_FOUND);
        assert!(
            message.contains("`learn` does not run as a task"),
            "{message}"
        );
        for bad in [
            json!(true),
            json!({"ttl": -1}),
            json!({"ttl": 1.5}),
            json!("x"),
        ] {
            let (code, _) = check_task_call(&params(json!("call_tool"), bad)).unwrap_err();
            assert_eq!(code, INVALID_PARAMS);
        }
    }

    #[test]
    fn the_initialize_answer_declares_tasks_only_for_this_revision() {
        let mut ours = json!({"result": {"protocolVersion": REVISION, "capabilities": {}}});
        assert!(declare_tasks(&mut ours));
        assert_eq!(
            ours["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
            json!({})
        );
        let mut older = json!({"result": {"protocolVersion": "2025-06-18", "capabilities": {}}});
        assert!(!declare_tasks(&mut older));
        assert!(older["result"]["capabilities"].get("tasks").is_none());
    }

    #[test]
    fn the_stripped_request_keeps_everything_but_the_task() {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "call_tool", "arguments": {"tool": "t"}, "task": {"ttl": 1}}});
        let stripped = without_task(&Bytes::from(body.to_string())).unwrap();
        let stripped: Value = serde_json::from_slice(&stripped).unwrap();
        let mut expected = body;
        expected["params"].as_object_mut().unwrap().remove("task");
        assert_eq!(stripped, expected);
    }
}
