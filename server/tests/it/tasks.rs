//! Held calls as MCP tasks on the 2026-07-28 wire (the `io.modelcontextprotocol/tasks`
//! extension, SEP-2663), through the real binary over raw JSON-RPC: no SDK at hand speaks
//! it yet. A reviewer decides in the console; the agent waits with `tasks/get`.

use crate::common;

use common::console::{REVIEWER_PASSWORD, add_user, fetch_post, sign_in};
use common::replies::json_rpc;
use common::{Server, assert_answer_fits_the_published_schema_json};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{Value, json};
use skillgate_core::store::Store;

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A tier-1 session that checked order O-5005 (so refunds of it are only held), made
/// through `tool` (a `tools/call` of the named platform tool; its `result`), whichever
/// revision's client sends it.
pub(crate) async fn tier_one_session<F, Fut>(tool: F) -> String
where
    F: Fn(&'static str, Value) -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    let started = tool("init_skilder", json!({})).await;
    let session = started["structuredContent"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let learned = tool(
        "learn",
        json!({"path": "/roles/tier-1-support", "session_id": session}),
    )
    .await;
    assert_eq!(learned["isError"], false, "{learned}");
    let checked = tool(
        "call_tool",
        json!({"tool": "check_refund_eligibility", "session_id": session,
               "arguments": {"customer_id": "C-1003", "order_id": "O-5005"}}),
    )
    .await;
    assert_eq!(checked["isError"], false, "{checked}");
    session
}

/// An agent speaking the 2026-07-28 wire: each request carries the protocol version and
/// the client's capabilities in `_meta`, with `Mcp-Method` and `Mcp-Name` headers.
pub(crate) struct Agent<'a> {
    server: &'a Server,
    key: String,
    /// Whether its requests declare the tasks extension.
    tasks: bool,
}

impl<'a> Agent<'a> {
    pub(crate) fn new(server: &'a Server, key: &str) -> Self {
        Self {
            server,
            key: key.to_owned(),
            tasks: true,
        }
    }

    async fn send(
        &self,
        method: &str,
        name: Option<&str>,
        mut params: Value,
    ) -> (StatusCode, Value) {
        let capabilities = if self.tasks {
            json!({"extensions": {TASKS: {}}})
        } else {
            json!({})
        };
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        });
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut request = reqwest::Client::new()
            .post(self.server.mcp_url())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .header(AUTHORIZATION, format!("Bearer {}", self.key))
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method);
        if let Some(name) = name {
            request = request.header("mcp-name", name);
        }
        let response = request.body(body.to_string()).send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        // A refusal the SDK answers at the HTTP layer (a missing capability is 400) still
        // carries its JSON-RPC error.
        let message = if status == StatusCode::OK || text.trim_start().starts_with('{') {
            json_rpc(&text)
        } else {
            json!({"http": text})
        };
        (status, message)
    }

    /// A platform tool's result (`result` of the JSON-RPC answer).
    pub(crate) async fn tool(&self, name: &str, arguments: Value) -> Value {
        let (status, message) = self
            .send(
                "tools/call",
                Some(name),
                json!({"name": name, "arguments": arguments}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{message}");
        message["result"].clone()
    }

    pub(crate) async fn call(&self, session: &str, tool: &str, arguments: Value) -> Value {
        self.tool(
            "call_tool",
            json!({"tool": tool, "arguments": arguments, "session_id": session}),
        )
        .await
    }

    pub(crate) async fn tier_one(&self) -> String {
        tier_one_session(|name, arguments| self.tool(name, arguments)).await
    }

    pub(crate) async fn get(&self, task: &str) -> (StatusCode, Value) {
        self.send("tasks/get", Some(task), json!({"taskId": task}))
            .await
    }

    async fn update(&self, task: &str) -> (StatusCode, Value) {
        let params = json!({"taskId": task, "inputResponses": {}});
        self.send("tasks/update", Some(task), params).await
    }

    pub(crate) async fn cancel(&self, task: &str) -> (StatusCode, Value) {
        self.send("tasks/cancel", Some(task), json!({"taskId": task}))
            .await
    }
}

pub(crate) fn refund(amount: u32) -> Value {
    json!({"customer_id": "C-1003", "order_id": "O-5005", "amount": amount,
           "reason": "Premium support not delivered"})
}

/// The agent's refund of 300 is held; the answer is a task. Returns its id and its hold's.
async fn held_as_task(agent: &Agent<'_>, session: &str) -> (String, String) {
    let created = agent.call(session, "process_refund", refund(300)).await;
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working", "{created}");
    assert!(created.get("content").is_none(), "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    (task, hold_of(&created))
}

/// The hold a task waits on, read from its status message.
pub(crate) fn hold_of(task: &Value) -> String {
    let message = task["statusMessage"].as_str().unwrap();
    let at = message.find("hold_").expect("the message names the hold");
    message[at..].split_whitespace().next().unwrap().to_owned()
}

pub(crate) async fn decide_in_console(server: &Server, decision: &str, hold: &str, reason: &str) {
    add_user(server, "rita", "reviewer", REVIEWER_PASSWORD);
    let rita = sign_in(server, "rita", REVIEWER_PASSWORD).await;
    let (status, body) = fetch_post(
        server,
        &rita,
        &format!("/console/api/{decision}_hold"),
        &[("id", hold), ("reason", reason)],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

pub(crate) async fn hold_state(server: &Server, hold: &str) -> String {
    let store = Store::open(&server.database_url()).await.unwrap();
    store
        .hold(hold)
        .await
        .unwrap()
        .unwrap()
        .state
        .as_str()
        .to_owned()
}

#[tokio::test]
async fn a_held_call_is_a_task_that_runs_once_when_approved_in_the_console() {
    let server = Server::start();
    let agent = Agent::new(&server, &server.support_key);
    let session = agent.tier_one().await;
    let created = agent.call(&session, "process_refund", refund(300)).await;
    assert_eq!(created["resultType"], "task", "{created}");
    assert!(created["ttlMs"].as_u64().unwrap() > 0, "{created}");
    assert_eq!(created["pollIntervalMs"], 5000, "{created}");
    assert!(
        created["statusMessage"]
            .as_str()
            .unwrap()
            .contains("waits for a reviewer")
    );
    let task = created["taskId"].as_str().unwrap().to_owned();
    let hold = hold_of(&created);

    let (status, waiting) = agent.get(&task).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(waiting["result"]["status"], "working", "{waiting}");
    assert_eq!(waiting["result"]["taskId"], task.as_str());
    assert!(
        server.executed("process_refund").is_empty(),
        "nothing ran while it waits"
    );

    decide_in_console(&server, "approve", &hold, "Confirmed with the customer").await;
    // Only tasks/get runs it: an update (which has no input to give) does not.
    let (_, update) = agent.update(&task).await;
    assert_eq!(update["error"]["code"], -32602, "{update}");
    assert!(server.executed("process_refund").is_empty());
    let (_, done) = agent.get(&task).await;
    let done = &done["result"];
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert!(!done["result"]["content"].as_array().unwrap().is_empty());
    let answer = &done["result"]["structuredContent"];
    assert_eq!(answer["code"], "ALLOWED", "{answer}");
    assert_answer_fits_the_published_schema_json(answer);
    assert_eq!(server.executed("process_refund").len(), 1);

    // Read again: the same result, and the call did not run twice.
    let (_, again) = agent.get(&task).await;
    assert_eq!(again["result"]["result"], done["result"]);
    assert_eq!(server.executed("process_refund").len(), 1);
    assert_eq!(hold_state(&server, &hold).await, "executed");
}

#[tokio::test]
async fn a_denied_or_expired_hold_completes_its_task_with_the_structured_refusal() {
    let server = Server::start();
    let agent = Agent::new(&server, &server.support_key);
    let session = agent.tier_one().await;
    let (task, hold) = held_as_task(&agent, &session).await;
    decide_in_console(&server, "deny", &hold, "Not this customer").await;
    let (_, ended) = agent.get(&task).await;
    let ended = &ended["result"];
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(ended["result"]["isError"], true);
    assert_eq!(
        ended["result"]["structuredContent"]["code"],
        "APPROVAL_DENIED"
    );
    assert_answer_fits_the_published_schema_json(&ended["result"]["structuredContent"]);

    // A second held call whose hold runs out of time.
    let session = agent.tier_one().await;
    let (task, hold) = held_as_task(&agent, &session).await;
    let store = Store::open(&server.database_url()).await.unwrap();
    sqlx::query("UPDATE holds SET expires_at = '2000-01-01T00:00:00.000000Z' WHERE id = $1")
        .bind(&hold)
        .execute(store.test_pool())
        .await
        .unwrap();
    let (_, ended) = agent.get(&task).await;
    assert_eq!(ended["result"]["status"], "completed");
    assert_eq!(
        ended["result"]["result"]["structuredContent"]["code"],
        "HOLD_EXPIRED"
    );
    assert!(server.executed("process_refund").is_empty());
}

#[tokio::test]
async fn cancelling_a_task_withdraws_its_hold_and_a_second_cancel_changes_nothing() {
    let server = Server::start();
    let agent = Agent::new(&server, &server.support_key);
    let session = agent.tier_one().await;
    let (task, hold) = held_as_task(&agent, &session).await;

    let (status, ack) = agent.cancel(&task).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let (_, cancelled) = agent.get(&task).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    assert_eq!(hold_state(&server, &hold).await, "withdrawn");
    let withdrawn: Vec<Value> = server
        .audit_events()
        .into_iter()
        .filter(|e| e["kind"] == "hold_withdrawn")
        .collect();
    assert_eq!(withdrawn.len(), 1, "{withdrawn:?}");
    assert_eq!(withdrawn[0]["payload"]["hold_id"], hold.as_str());

    let (status, again) = agent.cancel(&task).await;
    assert_eq!(status, StatusCode::OK, "cancel is idempotent: {again}");
    let kinds: Vec<Value> = server
        .audit_events()
        .into_iter()
        .map(|e| e["kind"].clone())
        .collect();
    assert_eq!(kinds.iter().filter(|k| *k == "hold_withdrawn").count(), 1);
}

#[tokio::test]
async fn another_key_finds_no_task_and_bad_task_requests_get_a_clear_error() {
    let server = Server::start();
    let agent = Agent::new(&server, &server.support_key);
    let session = agent.tier_one().await;
    let (task, _) = held_as_task(&agent, &session).await;

    let other_key = server.create_key("tasks-other", "support");
    let other = Agent::new(&server, &other_key);
    for (status, answer) in [other.get(&task).await, other.cancel(&task).await] {
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            answer["error"]["code"], -32602,
            "not found, never forbidden: {answer}"
        );
    }
    let (_, unknown) = agent.get("task_00000000000000000000000000000000").await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let long = "t".repeat(5000);
    let (_, malformed) = agent.get(&long).await;
    assert_eq!(malformed["error"]["code"], -32602, "{malformed}");
    assert!(malformed["error"]["message"].as_str().unwrap().len() < 200);
    let (_, update) = agent.update(&task).await;
    assert_eq!(update["error"]["code"], -32602, "{update}");
    let (status, _) = agent
        .send(
            "tasks/get",
            Some("task_someone_else"),
            json!({"taskId": task}),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "Mcp-Name must name the task asked for"
    );
    // The task is untouched by all of it.
    let (_, waiting) = agent.get(&task).await;
    assert_eq!(waiting["result"]["status"], "working");
}

#[tokio::test]
async fn a_client_that_declares_no_tasks_gets_the_held_error_and_no_task_methods() {
    let server = Server::start();
    let mut agent = Agent::new(&server, &server.support_key);
    agent.tasks = false;
    let session = agent.tier_one().await;
    let held = agent.call(&session, "process_refund", refund(300)).await;
    assert_ne!(held["resultType"], "task", "{held}");
    assert_eq!(held["isError"], true, "{held}");
    assert_eq!(held["structuredContent"]["code"], "APPROVAL_PENDING");
    let (status, refused) = agent.get("task_00000000000000000000000000000000").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(refused["error"]["code"], -32021, "{refused}");

    // Platform tools that cannot be held answer as they always do, tasks or not.
    agent.tasks = true;
    let started = agent.tool("init_skilder", json!({})).await;
    assert!(started.get("taskId").is_none(), "{started}");
    assert!(started["structuredContent"]["session_id"].is_string());
}
