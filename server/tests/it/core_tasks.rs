//! Held calls as MCP tasks on the 2025-11-25 wire (core tasks: a `task` on `tools/call`,
//! then `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`), through the real binary
//! over raw JSON-RPC, as a client of that revision sends it. A reviewer decides in the
//! console. The official TypeScript SDK's client is driven over the same flow in
//! `end2end/tests/sdk_tasks.test.js`.

use std::time::Duration;

use crate::common;
use crate::tasks::{decide_in_console, hold_state, refund, tier_one_session};

use common::replies::{json_rpc, raw_initialize};
use common::{Server, assert_answer_fits_the_published_schema_json};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{Value, json};
use skillgate_core::store::Store;

const REVISION: &str = "2025-11-25";

/// A client that initialized with 2025-11-25 and sends what that revision sends after.
struct Agent<'a> {
    server: &'a Server,
    key: String,
    connection: String,
    /// The `initialize` result.
    initialized: Value,
}

impl<'a> Agent<'a> {
    async fn connect(server: &'a Server, key: &str) -> Self {
        let response = raw_initialize(server, Some(key), REVISION)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let connection = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let initialized = json_rpc(&response.text().await.unwrap())["result"].clone();
        Self {
            server,
            key: key.to_owned(),
            connection,
            initialized,
        }
    }

    async fn send(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
        let response = reqwest::Client::new()
            .post(self.server.mcp_url())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .header(AUTHORIZATION, format!("Bearer {}", self.key))
            .header("mcp-protocol-version", REVISION)
            .header("mcp-session-id", &self.connection)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{method}");
        let message = json_rpc(&response.text().await.unwrap());
        assert_eq!(message["id"], 9, "{message}");
        message
    }

    async fn tool(&self, name: &str, arguments: Value) -> Value {
        let message = self
            .send("tools/call", json!({"name": name, "arguments": arguments}))
            .await;
        message["result"].clone()
    }

    /// `call_tool` of `tool`, asked for as a task: the JSON-RPC message.
    async fn call_as_task(&self, session: &str, tool: &str, arguments: Value) -> Value {
        let arguments = json!({"tool": tool, "arguments": arguments, "session_id": session});
        self.send(
            "tools/call",
            json!({"name": "call_tool", "arguments": arguments, "task": {"ttl": 60000}}),
        )
        .await
    }

    async fn tier_one(&self) -> String {
        tier_one_session(|name, arguments| self.tool(name, arguments)).await
    }

    /// A refund of 300 asked for as a task: held, so the task works. Its id and its hold's.
    async fn held_task(&self, session: &str) -> (String, String) {
        let created = self
            .call_as_task(session, "process_refund", refund(300))
            .await;
        let task = &created["result"]["task"];
        assert_eq!(task["status"], "working", "{created}");
        let message = task["statusMessage"].as_str().unwrap();
        let at = message.find("hold_").expect("the message names the hold");
        let hold = message[at..].split_whitespace().next().unwrap().to_owned();
        (task["taskId"].as_str().unwrap().to_owned(), hold)
    }

    async fn get(&self, task: &str) -> Value {
        self.send("tasks/get", json!({"taskId": task})).await
    }

    async fn result(&self, task: &str) -> Value {
        self.send("tasks/result", json!({"taskId": task})).await
    }

    async fn cancel(&self, task: &str) -> Value {
        self.send("tasks/cancel", json!({"taskId": task})).await
    }
}

fn related_task(result: &Value) -> &Value {
    &result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"]
}

#[tokio::test]
async fn a_2025_11_25_client_is_offered_tasks_on_call_tool_only() {
    let server = Server::start();
    let agent = Agent::connect(&server, &server.support_key).await;
    assert_eq!(
        agent.initialized["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "{}",
        agent.initialized
    );
    let listed = agent.send("tools/list", json!({})).await;
    for tool in listed["result"]["tools"].as_array().unwrap() {
        let execution = &tool["execution"];
        if tool["name"] == "call_tool" {
            assert_eq!(execution["taskSupport"], "optional", "{tool}");
        } else {
            assert!(execution.is_null(), "{tool}");
        }
    }
    // An older revision negotiates no tasks.
    let response = raw_initialize(&server, Some(&server.support_key), "2025-06-18")
        .send()
        .await
        .unwrap();
    let older = json_rpc(&response.text().await.unwrap());
    assert!(
        older["result"]["capabilities"].get("tasks").is_none(),
        "{older}"
    );
}

#[tokio::test]
async fn a_held_task_waits_for_the_console_and_its_result_is_the_call_run_once() {
    let server = Server::start();
    let agent = Agent::connect(&server, &server.support_key).await;
    let session = agent.tier_one().await;
    let created = agent
        .call_as_task(&session, "process_refund", refund(300))
        .await;
    let result = &created["result"];
    assert!(result.get("content").is_none(), "{created}");
    assert_eq!(result["task"]["pollInterval"], 5000);
    assert!(result["task"]["ttl"].as_u64().unwrap() > 0);
    let told = result["_meta"]["io.modelcontextprotocol/model-immediate-response"]
        .as_str()
        .unwrap();
    assert!(told.contains("waits for a reviewer"), "{told}");
    let task = result["task"]["taskId"].as_str().unwrap().to_owned();
    let at = told.find("hold_").unwrap();
    let hold = told[at..].split_whitespace().next().unwrap().to_owned();

    let waiting = agent.get(&task).await;
    assert_eq!(waiting["result"]["status"], "working", "{waiting}");
    assert!(waiting["result"].get("_meta").is_none());
    assert!(server.executed("process_refund").is_empty());

    // tasks/result blocks until the reviewer decides; it is answered by the approval.
    let blocked = {
        let url = server.mcp_url();
        let (key, connection, task) = (agent.key.clone(), agent.connection.clone(), task.clone());
        tokio::spawn(async move {
            let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tasks/result",
                              "params": {"taskId": task}});
            let response = reqwest::Client::new()
                .post(url)
                .header(CONTENT_TYPE, "application/json")
                .header(ACCEPT, "application/json, text/event-stream")
                .header(AUTHORIZATION, format!("Bearer {key}"))
                .header("mcp-protocol-version", REVISION)
                .header("mcp-session-id", connection)
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            json_rpc(&response.text().await.unwrap())
        })
    };
    decide_in_console(&server, "approve", &hold, "Confirmed with the customer").await;
    let ran = tokio::time::timeout(Duration::from_secs(30), blocked)
        .await
        .expect("tasks/result answers once the hold is approved")
        .unwrap();
    let ran = &ran["result"];
    assert_eq!(ran["isError"], false, "{ran}");
    assert_eq!(related_task(ran), task.as_str());
    assert!(ran.get("resultType").is_none(), "{ran}");
    assert_eq!(ran["structuredContent"]["code"], "ALLOWED");
    assert_answer_fits_the_published_schema_json(&ran["structuredContent"]);
    assert_eq!(server.executed("process_refund").len(), 1);

    let done = agent.get(&task).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    let again = agent.result(&task).await;
    assert_eq!(&again["result"], ran);
    assert_eq!(server.executed("process_refund").len(), 1, "ran once");
    assert_eq!(hold_state(&server, &hold).await, "executed");
}

#[tokio::test]
async fn a_denied_or_expired_hold_fails_its_task_and_a_cancelled_one_is_withdrawn_once() {
    let server = Server::start();
    let agent = Agent::connect(&server, &server.support_key).await;
    let session = agent.tier_one().await;
    let (denied, hold) = agent.held_task(&session).await;
    decide_in_console(&server, "deny", &hold, "Not this customer").await;
    let ended = agent.get(&denied).await;
    assert_eq!(ended["result"]["status"], "failed", "{ended}");
    let refusal = agent.result(&denied).await;
    let refusal = &refusal["result"];
    assert_eq!(refusal["isError"], true, "{refusal}");
    assert_eq!(refusal["structuredContent"]["code"], "APPROVAL_DENIED");
    assert_eq!(related_task(refusal), denied.as_str());
    assert_answer_fits_the_published_schema_json(&refusal["structuredContent"]);

    // Another whose hold runs out of time fails too, with the expiry as its result.
    let session = agent.tier_one().await;
    let (expired, hold) = agent.held_task(&session).await;
    let store = Store::open(&server.database_url()).await.unwrap();
    sqlx::query("UPDATE holds SET expires_at = '2000-01-01T00:00:00.000000Z' WHERE id = $1")
        .bind(&hold)
        .execute(store.test_pool())
        .await
        .unwrap();
    let expiry = agent.result(&expired).await;
    assert_eq!(
        expiry["result"]["structuredContent"]["code"], "HOLD_EXPIRED",
        "{expiry}"
    );
    assert_eq!(agent.get(&expired).await["result"]["status"], "failed");

    let session = agent.tier_one().await;
    let (cancelled, hold) = agent.held_task(&session).await;
    let ack = agent.cancel(&cancelled).await;
    assert_eq!(ack["result"]["status"], "cancelled", "{ack}");
    assert_eq!(ack["result"]["taskId"], cancelled.as_str());
    assert_eq!(hold_state(&server, &hold).await, "withdrawn");
    let again = agent.cancel(&cancelled).await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already ended (cancelled)"),
        "{again}"
    );
    let result = agent.result(&cancelled).await;
    assert_eq!(
        result["result"]["structuredContent"]["code"], "HOLD_WITHDRAWN",
        "{result}"
    );
    let withdrawn = server
        .audit_events()
        .into_iter()
        .filter(|e| e["kind"] == "hold_withdrawn")
        .count();
    assert_eq!(withdrawn, 1);
    assert!(server.executed("process_refund").is_empty());
}

#[tokio::test]
async fn a_call_that_is_not_held_is_a_finished_task_listed_only_to_its_own_key() {
    let server = Server::start();
    let agent = Agent::connect(&server, &server.support_key).await;
    let session = agent.tier_one().await;
    let (held, _) = agent.held_task(&session).await;
    let created = agent
        .call_as_task(
            &session,
            "lookup_customer",
            json!({"customer_id": "C-1003"}),
        )
        .await;
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "completed", "{created}");
    let ran = task["taskId"].as_str().unwrap().to_owned();
    let result = agent.result(&ran).await;
    assert_eq!(result["result"]["isError"], false, "{result}");
    assert_eq!(related_task(&result["result"]), ran.as_str());
    // A refused call is a task that failed, with the refusal as its result.
    let refused = agent
        .call_as_task(&session, "delete_customer", json!({}))
        .await;
    assert_eq!(refused["result"]["task"]["status"], "failed", "{refused}");
    let denied = refused["result"]["task"]["taskId"].as_str().unwrap();
    let denial = agent.result(denied).await;
    assert_eq!(
        denial["result"]["structuredContent"]["code"],
        "ACCESS_DENIED"
    );

    let listed = agent.send("tasks/list", json!({})).await;
    let ids: Vec<&str> = listed["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["taskId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [held.as_str(), ran.as_str(), denied]);
    assert!(listed["result"].get("nextCursor").is_none());

    let other_key = server.create_key("tasks-other", "support");
    let other = Agent::connect(&server, &other_key).await;
    let theirs = other.send("tasks/list", json!({})).await;
    assert_eq!(theirs["result"]["tasks"], json!([]));
    for answer in [
        other.get(&held).await,
        other.result(&ran).await,
        other.cancel(&held).await,
    ] {
        assert_eq!(answer["error"]["code"], -32602, "not found: {answer}");
    }
    assert_eq!(agent.get(&held).await["result"]["status"], "working");
}

#[tokio::test]
async fn bad_task_requests_get_a_clear_json_rpc_error_and_change_nothing() {
    let server = Server::start();
    let agent = Agent::connect(&server, &server.support_key).await;
    let session = agent.tier_one().await;
    let before = server.audit_events().len();
    let learn = agent
        .send(
            "tools/call",
            json!({"name": "learn", "arguments": {"path": "/roles/tier-1-support",
                   "session_id": session}, "task": {}}),
        )
        .await;
    assert_eq!(learn["error"]["code"], -32601, "{learn}");
    assert!(
        learn["error"]["message"]
            .as_str()
            .unwrap()
            .contains("only call_tool can be held"),
        "{learn}"
    );
    let events = server.audit_events();
    let refusal = &events[before..];
    assert_eq!(refusal.len(), 1, "audited once: {refusal:?}");
    assert_eq!(refusal[0]["kind"], "call_denied");

    let bad_task = agent
        .send(
            "tools/call",
            json!({"name": "call_tool", "arguments": {"tool": "lookup_customer",
                   "arguments": {"customer_id": "C-1003"}, "session_id": session},
                   "task": {"ttl": "soon"}}),
        )
        .await;
    assert_eq!(bad_task["error"]["code"], -32602, "{bad_task}");
    assert!(server.executed("lookup_customer").is_empty(), "nothing ran");

    for (method, params) in [
        ("tasks/get", json!({})),
        ("tasks/get", json!({"taskId": 7})),
        (
            "tasks/get",
            json!({"taskId": "task_00000000000000000000000000000000"}),
        ),
        ("tasks/result", json!({"taskId": "t".repeat(5000)})),
        ("tasks/cancel", json!({"taskId": "nope"})),
        (
            "tasks/list",
            json!({"cursor": "task_00000000000000000000000000000000"}),
        ),
        ("tasks/list", json!({"cursor": 3})),
    ] {
        let answer = agent.send(method, params.clone()).await;
        assert_eq!(
            answer["error"]["code"], -32602,
            "{method} {params}: {answer}"
        );
        assert!(answer["error"]["message"].as_str().unwrap().len() < 200);
    }

    // Without a task, a held call answers the honest error as before.
    let held = agent
        .tool(
            "call_tool",
            json!({"tool": "process_refund", "arguments": refund(300), "session_id": session}),
        )
        .await;
    assert_eq!(held["isError"], true, "{held}");
    assert_eq!(held["structuredContent"]["code"], "APPROVAL_PENDING");
}
