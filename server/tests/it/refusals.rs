//! Every refusal `/mcp` has, through the real binary on the demo catalog, and the audit
//! event each one writes before the agent hears it (issue #33: every refusal is audited).
//!
//! | # | request                                             | agent gets               | event (kind, code)                       | placed in                  |
//! |---|-----------------------------------------------------|--------------------------|------------------------------------------|----------------------------|
//! | 1 | `learn /roles/system-admin` (role out of scope)     | `ACCESS_DENIED`          | `learn_denied` `ACCESS_DENIED`           | the session                |
//! | 2 | `learn /roles/no-such-role` (unknown role)          | `ACCESS_DENIED`          | `learn_denied` `ACCESS_DENIED`           | the session                |
//! | 3 | `learn /no/such/path/at/all` (not a learn path)     | `INVALID_ARGUMENTS`      | `learn_denied` `INVALID_ARGUMENTS`       | the session                |
//! | 4 | `call_tool` of a tool no learned role grants        | `ACCESS_DENIED`          | `call_denied` `ACCESS_DENIED`            | the session                |
//! | 5 | `call_tool` with arguments its schema refuses       | `INVALID_ARGUMENTS`      | `call_denied` `INVALID_ARGUMENTS`        | the session                |
//! | 6 | `call_tool` over a limit (refund above 500)         | `GOVERNANCE_VIOLATION`   | `call_denied` `GOVERNANCE_VIOLATION`     | the session                |
//! | 7 | `call_tool` naming an unknown session               | `ACCESS_DENIED`          | `call_denied` `ACCESS_DENIED`            | caller (digest of the id)  |
//! | 8 | `call_tool` naming another key's session            | `ACCESS_DENIED`          | `call_denied` `ACCESS_DENIED`            | caller (digest of the id)  |
//! | 9 | `call_tool` in an expired session                   | `ACCESS_DENIED`          | `call_denied` `ACCESS_DENIED`            | the (own, expired) session |
//! |10 | an unknown platform tool                            | JSON-RPC `-32602`        | `call_denied` `INVALID_ARGUMENTS`        | caller                     |
//! |11 | `call_tool` without `tool`                          | `INVALID_ARGUMENTS`      | `call_denied` `INVALID_ARGUMENTS`        | caller                     |
//! |12 | `feedback_skill` with rating 9                      | `INVALID_ARGUMENTS`      | `feedback` denied `INVALID_ARGUMENTS`    | the session                |
//! |13 | resume of an unknown hold id                        | `ACCESS_DENIED`          | `call_denied` `ACCESS_DENIED`            | caller                     |
//! |14 | resume of another key's hold                        | `ACCESS_DENIED`          | `call_denied` `ACCESS_DENIED`            | caller                     |
//! |15 | resume of a hold that already ran (replay)          | `HOLD_USED`              | `call_denied` `HOLD_USED` + `hold_id`    | the hold's session         |
//! |16 | resume of a denied hold                             | `APPROVAL_DENIED`        | `call_denied` `APPROVAL_DENIED` + hold   | the hold's session         |
//! |17 | resume of an expired hold                           | `HOLD_EXPIRED`           | `call_denied` `HOLD_EXPIRED` + hold      | the hold's session         |
//! |18 | `resources/read` of another scope's skill           | JSON-RPC `-32602`        | `learn_denied` `ACCESS_DENIED`           | newest session of the connection |
//! |19 | `resources/read` of an unknown URI / other scheme   | JSON-RPC `-32602`        | `learn_denied` `ACCESS_DENIED`           | newest session of the connection |
//! |20 | `resources/read` whose `uri` is not a string        | JSON-RPC `-32602` (1)    | `learn_denied` `INVALID_ARGUMENTS`       | newest session of the connection |
//! |21 | `resources/read` without params                     | JSON-RPC `-32602` (1)    | `learn_denied` `INVALID_ARGUMENTS`       | newest session of the connection |
//! |22 | `skills/get` of a URI that is not a `SKILL.md`      | JSON-RPC `-32602` (rmcp) | `learn_denied` `INVALID_ARGUMENTS`       | newest session of the connection |
//! |23 | a JSON-RPC batch holding a `resources/read`         | HTTP 415 (rmcp)          | `learn_denied` `INVALID_ARGUMENTS`       | newest session of the connection |
//! |24 | a 2026-07-28 `resources/read`, `Mcp-Method` lying   | HTTP 400 (rmcp)          | `learn_denied` `INVALID_ARGUMENTS`       | newest session of the connection |
//! |25 | unknown protocol version; no `Mcp-Method` (2026)    | HTTP 400 (rmcp)          | `learn_denied` `INVALID_ARGUMENTS`       | newest session of the connection |
//! |26 | any of 18–25 on a connection with no session        | as above                 | as above                                 | caller (actor, URI, method) |
//! |27 | `tools/call` whose `arguments` is not an object     | JSON-RPC `-32602` (1)    | `call_denied` `INVALID_ARGUMENTS`        | caller                     |
//!
//! (1) rmcp answers `-32601` (method not found) for these: it reads a request whose params do
//! not deserialize as one of a method it does not know. The agent now gets `-32602` saying
//! what the params must be.
//!
//! Rows 15–17, 20–25 and 27 wrote nothing before issue #33: rmcp refused 20–25 and 27
//! before the handler ran, and a settled hold's resume answered without recording the
//! attempt. Rows 18–19 were audited without a session.

use crate::common;

use std::sync::Arc;

use chrono::Utc;
use common::{Client, Reply, Server, call, init, learn, may_refund_o5005, platform};
use serde_json::{Value, json};
use skillgate_core::audit::AuditLog;
use skillgate_core::holds::{Decider, Holds};
use skillgate_core::policy::CatalogHandle;
use skillgate_core::store::Store;

const ADMIN_SKILL: &str = "skill://system-admin/account-administration/SKILL.md";

fn refund(amount: u32) -> Value {
    json!({"customer_id": "C-1003", "order_id": "O-5005", "amount": amount,
           "reason": "Premium support not delivered"})
}

/// The audit log, read through the CLI, with what came after the last look.
struct Audit<'s> {
    server: &'s Server,
    seen: usize,
}

impl<'s> Audit<'s> {
    fn new(server: &'s Server) -> Self {
        let seen = server.audit_events().len();
        Self { server, seen }
    }

    /// The events written since the last call.
    fn new_events(&mut self) -> Vec<Value> {
        let events = self.server.audit_events();
        let fresh = events[self.seen..].to_vec();
        self.seen = events.len();
        fresh
    }

    /// The events written since the last look, without moving the mark.
    fn new_events_peek(&self) -> Vec<Value> {
        self.server.audit_events()[self.seen..].to_vec()
    }

    /// Exactly one event was written since the last look, of `kind` with `code`, placed
    /// in `session` (`None`: with the caller alone); returns it.
    #[track_caller]
    fn one(&mut self, what: &str, kind: &str, code: &str, session: Option<&str>) -> Value {
        let fresh = self.new_events();
        let [event] = fresh.as_slice() else {
            panic!("{what}: expected one audit event, got {fresh:#?}");
        };
        assert_eq!(event["kind"], kind, "{what}: {event}");
        assert_eq!(event["payload"]["code"], code, "{what}: {event}");
        assert_eq!(event["session_id"].as_str(), session, "{what}: {event}");
        event.clone()
    }
}

/// `/mcp` spoken by hand, for the requests an SDK would never send: a connection label
/// from its own `initialize`, or none.
struct Raw {
    http: reqwest::Client,
    url: String,
    key: String,
    label: Option<String>,
}

impl Raw {
    async fn open(server: &Server, key: &str) -> Self {
        let mut raw = Self {
            http: reqwest::Client::new(),
            url: server.mcp_url(),
            key: key.to_owned(),
            label: None,
        };
        let response = raw
            .send(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "refusals", "version": "1"}}})
                .to_string(),
                &[],
            )
            .await;
        assert_eq!(response.status(), 200);
        raw.label = response
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_owned());
        assert!(
            raw.label.is_some(),
            "initialize hands out a connection label"
        );
        raw
    }

    fn unlabelled(server: &Server, key: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            url: server.mcp_url(),
            key: key.to_owned(),
            label: None,
        }
    }

    async fn send(&self, body: &str, headers: &[(&str, &str)]) -> reqwest::Response {
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(&self.key)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_owned());
        if let Some(label) = &self.label {
            request = request.header("mcp-session-id", label);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.expect("the server answers")
    }

    /// Posts `body`; the HTTP status and the JSON-RPC message (`Null` when the answer is
    /// not one).
    async fn post(&self, body: &str, headers: &[(&str, &str)]) -> (u16, Value) {
        let response = self.send(body, headers).await;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let json = text
            .lines()
            .find_map(|line| line.strip_prefix("data:"))
            .unwrap_or(&text);
        (
            status,
            serde_json::from_str(json.trim()).unwrap_or(Value::Null),
        )
    }

    async fn init_skilder(&self) -> String {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "init_skilder", "arguments": {}}});
        let (status, reply) = self.post(&body.to_string(), &[]).await;
        assert_eq!(status, 200, "{reply}");
        reply["result"]["structuredContent"]["session_id"]
            .as_str()
            .unwrap_or_else(|| panic!("init_skilder answers a session: {reply}"))
            .to_owned()
    }
}

fn read(uri: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 7, "method": "resources/read", "params": {"uri": uri}})
        .to_string()
}

/// One refused Skills-extension request (rows 18–25): what the agent must get
/// (`Ok(status)` an HTTP error status, `Err(code)` a JSON-RPC error), the event's code and
/// the URI it names.
struct SkillRefusal {
    what: &'static str,
    body: String,
    headers: Vec<(&'static str, &'static str)>,
    answer: Result<u16, i64>,
    code: &'static str,
    uri: String,
}

fn skill_refusal(
    what: &'static str,
    body: String,
    headers: &[(&'static str, &'static str)],
    answer: Result<u16, i64>,
    code: &'static str,
    uri: &str,
) -> SkillRefusal {
    SkillRefusal {
        what,
        body,
        headers: headers.to_vec(),
        answer,
        code,
        uri: uri.to_owned(),
    }
}

fn skill_refusals() -> Vec<SkillRefusal> {
    let folder = "skill://tier-1-support/refund-handling";
    vec![
        skill_refusal(
            "another scope's skill",
            read(json!(ADMIN_SKILL)),
            &[],
            Err(-32602),
            "ACCESS_DENIED",
            ADMIN_SKILL,
        ),
        skill_refusal(
            "another scheme",
            read(json!("file:///etc/passwd")),
            &[],
            Err(-32602),
            "ACCESS_DENIED",
            "file:///etc/passwd",
        ),
        skill_refusal(
            "a uri that is not a string",
            read(json!(42)),
            &[],
            Err(-32602),
            "INVALID_ARGUMENTS",
            "42",
        ),
        skill_refusal(
            "no params",
            json!({"jsonrpc": "2.0", "id": 7, "method": "resources/read"}).to_string(),
            &[],
            Err(-32602),
            "INVALID_ARGUMENTS",
            "",
        ),
        skill_refusal(
            "skills/get of a folder",
            json!({"jsonrpc": "2.0", "id": 7, "method": "skills/get", "params": {"uri": folder}})
                .to_string(),
            &[],
            Err(-32602),
            "INVALID_ARGUMENTS",
            folder,
        ),
        skill_refusal(
            "a batch",
            format!("[{}]", read(json!(ADMIN_SKILL))),
            &[],
            Ok(415),
            "INVALID_ARGUMENTS",
            ADMIN_SKILL,
        ),
        skill_refusal(
            "a lying Mcp-Method header",
            read(json!(ADMIN_SKILL)),
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/list"),
            ],
            Ok(400),
            "INVALID_ARGUMENTS",
            ADMIN_SKILL,
        ),
        skill_refusal(
            "a 2026-07-28 request without its Mcp-Method header",
            read(json!(ADMIN_SKILL)),
            &[("mcp-protocol-version", "2026-07-28")],
            Ok(400),
            "INVALID_ARGUMENTS",
            ADMIN_SKILL,
        ),
        skill_refusal(
            "an unknown protocol version",
            read(json!(ADMIN_SKILL)),
            &[("mcp-protocol-version", "1999-01-01")],
            Ok(400),
            "INVALID_ARGUMENTS",
            ADMIN_SKILL,
        ),
    ]
}

async fn walk_skill_refusals(raw: &Raw, audit: &mut Audit<'_>, session: Option<&str>) {
    let mut unaudited = Vec::new();
    for SkillRefusal {
        what,
        body,
        headers,
        answer,
        code,
        uri,
    } in skill_refusals()
    {
        let (status, reply) = raw.post(&body, &headers).await;
        // Every row is tried before failing, so a run shows each refusal left unaudited.
        if audit.new_events_peek().is_empty() {
            unaudited.push(what);
            continue;
        }
        let event = audit.one(what, "learn_denied", code, session);
        match answer {
            Ok(expected) => assert_eq!(status, expected, "{what}: {reply}"),
            Err(expected) => {
                assert_eq!(status, 200, "{what}");
                assert_eq!(reply["error"]["code"], expected, "{what}: {reply}");
            }
        }
        assert_eq!(event["actor"], "demo-support", "{what}: {event}");
        assert_eq!(event["payload"]["path"], uri.as_str(), "{what}: {event}");
        let method = if body.contains("skills/get") {
            "skills/get"
        } else {
            "resources/read"
        };
        assert_eq!(event["payload"]["via"], method, "{what}: {event}");
        if code == "INVALID_ARGUMENTS" {
            assert!(
                event["payload"]["rule"]
                    .as_str()
                    .is_some_and(|r| !r.is_empty()),
                "{what}: the library's answer is the rule: {event}"
            );
        }
    }
    assert!(
        unaudited.is_empty(),
        "refused without an audit event: {unaudited:?}"
    );
}

async fn reviewer(server: &Server) -> (Holds, Store) {
    let store = Store::open(&server.database_url()).await.unwrap();
    let catalog = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
    let audit = AuditLog::new(store.clone());
    (Holds::new(store.clone(), audit, catalog), store)
}

async fn resume(client: &Client, session: &str, hold: &str) -> Reply {
    platform(
        client,
        "call_tool",
        json!({"hold_id": hold, "session_id": session}),
    )
    .await
}

/// A tier-1 session that may refund; returns the id of a hold of a 300 refund.
async fn held(client: &Client, session: &str) -> String {
    let reply = call(client, session, "process_refund", refund(300)).await;
    assert_eq!(
        reply.structured["decision"], "pending_approval",
        "{}",
        reply.text
    );
    reply.structured["hold_id"].as_str().unwrap().to_owned()
}

#[track_caller]
fn refused(reply: &Reply, code: &str) {
    assert!(reply.is_error, "{}", reply.text);
    assert_eq!(reply.code(), code, "{}", reply.text);
}

#[tokio::test]
async fn every_refusal_of_the_mcp_endpoint_is_audited_with_its_code_and_place() {
    let server = Server::start();
    let other_key = server.create_key("other-bot", "support");
    let client = server.connect(&server.support_key).await;
    let other = server.connect(&other_key).await;
    let (session, _) = init(&client).await;
    let (other_session, _) = init(&other).await;
    let mut audit = Audit::new(&server);
    let own = Some(session.as_str());

    // 1-3: learn.
    refused(
        &learn(&client, &session, "/roles/system-admin").await,
        "ACCESS_DENIED",
    );
    audit.one("learn out of scope", "learn_denied", "ACCESS_DENIED", own);
    refused(
        &learn(&client, &session, "/roles/no-such-role").await,
        "ACCESS_DENIED",
    );
    audit.one(
        "learn of an unknown role",
        "learn_denied",
        "ACCESS_DENIED",
        own,
    );
    refused(
        &learn(&client, &session, "/no/such/path/at/all").await,
        "INVALID_ARGUMENTS",
    );
    audit.one("learn of no path", "learn_denied", "INVALID_ARGUMENTS", own);

    // 4-6: call_tool decided by the policy.
    refused(
        &call(&client, &session, "process_refund", refund(100)).await,
        "ACCESS_DENIED",
    );
    audit.one("a tool not unlocked", "call_denied", "ACCESS_DENIED", own);
    may_refund_o5005(&client, &session).await;
    audit.new_events();
    let mut bad = refund(100);
    bad["amount"] = json!("a lot");
    refused(
        &call(&client, &session, "process_refund", bad).await,
        "INVALID_ARGUMENTS",
    );
    audit.one("invalid arguments", "call_denied", "INVALID_ARGUMENTS", own);
    refused(
        &call(&client, &session, "process_refund", refund(600)).await,
        "GOVERNANCE_VIOLATION",
    );
    audit.one("over a limit", "call_denied", "GOVERNANCE_VIOLATION", own);

    // 7-9: sessions that are not the caller's to use.
    refused(
        &call(
            &client,
            "ses_nope",
            "lookup_customer",
            json!({"customer_id": "C-1003"}),
        )
        .await,
        "ACCESS_DENIED",
    );
    let event = audit.one("an unknown session", "call_denied", "ACCESS_DENIED", None);
    assert!(
        event["payload"]["named_session_digest"].is_string(),
        "{event}"
    );
    refused(
        &call(
            &other,
            &session,
            "lookup_customer",
            json!({"customer_id": "C-1003"}),
        )
        .await,
        "ACCESS_DENIED",
    );
    let event = audit.one("a foreign session", "call_denied", "ACCESS_DENIED", None);
    assert_eq!(event["actor"], "other-bot");
    assert!(
        event["payload"]["named_session_digest"].is_string(),
        "{event}"
    );
    let (_, store) = reviewer(&server).await;
    expire_session(&store, &other_session).await;
    refused(
        &call(
            &other,
            &other_session,
            "lookup_customer",
            json!({"customer_id": "C-1003"}),
        )
        .await,
        "ACCESS_DENIED",
    );
    audit.one(
        "an expired session",
        "call_denied",
        "ACCESS_DENIED",
        Some(other_session.as_str()),
    );

    // 10-11: requests the adapter refuses before any platform tool runs.
    let unknown = client
        .call_tool(rmcp::model::CallToolRequestParams::new(
            "no_such_platform_tool",
        ))
        .await;
    assert!(unknown.is_err(), "{unknown:?}");
    let event = audit.one(
        "an unknown platform tool",
        "call_denied",
        "INVALID_ARGUMENTS",
        None,
    );
    assert_eq!(event["payload"]["tool"], "no_such_platform_tool");
    refused(
        &platform(&client, "call_tool", json!({"session_id": session})).await,
        "INVALID_ARGUMENTS",
    );
    audit.one(
        "call_tool without a tool",
        "call_denied",
        "INVALID_ARGUMENTS",
        None,
    );

    // 12: feedback.
    let rating = platform(
        &client,
        "feedback_skill",
        json!({"skill": "refund-handling", "rating": 9, "session_id": session}),
    )
    .await;
    refused(&rating, "INVALID_ARGUMENTS");
    let event = audit.one("a rating of 9", "feedback", "INVALID_ARGUMENTS", own);
    assert_eq!(event["payload"]["decision"], "denied");

    // 13-17: resumes of holds.
    refused(
        &resume(&client, &session, "hold_nope").await,
        "ACCESS_DENIED",
    );
    audit.one("an unknown hold", "call_denied", "ACCESS_DENIED", None);
    let (holds, _) = reviewer(&server).await;
    let hold = held(&client, &session).await;
    audit.new_events();
    refused(
        &resume(&other, &other_session, &hold).await,
        "ACCESS_DENIED",
    );
    audit.one("another key's hold", "call_denied", "ACCESS_DENIED", None);
    holds
        .approve(&Decider::console("rita"), &hold, "ok", Utc::now())
        .await
        .unwrap();
    let ran = resume(&client, &session, &hold).await;
    assert!(!ran.is_error, "{}", ran.text);
    audit.new_events();
    for attempt in 0..2 {
        refused(&resume(&client, &session, &hold).await, "HOLD_USED");
        let event = audit.one("a replay of a used hold", "call_denied", "HOLD_USED", own);
        assert_eq!(
            event["payload"]["hold_id"],
            hold.as_str(),
            "attempt {attempt}: {event}"
        );
        assert_eq!(event["payload"]["tool"], "process_refund");
    }
    let denied = held(&client, &session).await;
    holds
        .deny(&Decider::console("rita"), &denied, "no", Utc::now())
        .await
        .unwrap();
    audit.new_events();
    refused(&resume(&client, &session, &denied).await, "APPROVAL_DENIED");
    let event = audit.one("a denied hold", "call_denied", "APPROVAL_DENIED", own);
    assert_eq!(event["payload"]["hold_id"], denied.as_str());
    // A poll only asks where the hold stands: nothing is refused, nothing written.
    let polled = platform(
        &client,
        "call_tool",
        json!({"hold_id": denied, "session_id": session, "poll": true}),
    )
    .await;
    assert_eq!(polled.code(), "APPROVAL_DENIED");
    assert_eq!(audit.new_events(), Vec::<Value>::new());
    let late = held(&client, &session).await;
    // Whoever expires it first (this resume or the server's sweep), both events follow.
    audit.new_events();
    sqlx::query("UPDATE holds SET expires_at = '2000-01-01T00:00:00.000000Z' WHERE id = $1")
        .bind(&late)
        .execute(store.test_pool())
        .await
        .unwrap();
    refused(&resume(&client, &session, &late).await, "HOLD_EXPIRED");
    let fresh = audit.new_events();
    let kinds: Vec<&str> = fresh.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["hold_expired", "call_denied"], "{fresh:#?}");
    assert_eq!(fresh[1]["payload"]["code"], "HOLD_EXPIRED");
    assert_eq!(fresh[1]["payload"]["hold_id"], late.as_str());
    assert_eq!(fresh[1]["session_id"], session.as_str());

    // 18-25: the Skills extension, on a connection with a governance session...
    let raw = Raw::open(&server, &server.support_key).await;
    let raw_session = raw.init_skilder().await;
    audit.new_events();
    walk_skill_refusals(&raw, &mut audit, Some(raw_session.as_str())).await;
    // 26: ... and on one without.
    let bare = Raw::unlabelled(&server, &server.support_key);
    walk_skill_refusals(&bare, &mut audit, None).await;

    // 27: a `tools/call` the library cannot parse never reaches the handler.
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                      "params": {"name": "call_tool", "arguments": "not an object"}});
    let (status, reply) = raw.post(&body.to_string(), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("params.arguments")),
        "{reply}"
    );
    let event = audit.one(
        "a tools/call rmcp refuses",
        "call_denied",
        "INVALID_ARGUMENTS",
        None,
    );
    assert_eq!(event["payload"]["tool"], "call_tool", "{event}");
    assert!(event["payload"]["rule"].is_string(), "{event}");
}

/// Moves a session's expiry into the past, as time would.
async fn expire_session(store: &Store, id: &str) {
    let (state,): (String,) = sqlx::query_as("SELECT state FROM governance_sessions WHERE id = $1")
        .bind(id)
        .fetch_one(store.test_pool())
        .await
        .unwrap();
    let mut state: Value = serde_json::from_str(&state).unwrap();
    assert!(state["expires_at"].is_string(), "{state}");
    state["expires_at"] = json!("2000-01-01T00:00:00Z");
    sqlx::query("UPDATE governance_sessions SET state = $1, expires_at = $2 WHERE id = $3")
        .bind(state.to_string())
        .bind("2000-01-01T00:00:00.000000Z")
        .bind(id)
        .execute(store.test_pool())
        .await
        .unwrap();
}

/// The admin side: a `catalog apply` the server refuses (too big, invalid) changes nothing
/// and is an `admin_refused` event naming the file and why; a dry run asks for nothing and
/// writes nothing.
#[tokio::test]
async fn a_refused_catalog_apply_is_audited_and_a_dry_run_is_not() {
    let server = Server::start();
    let mut audit = Audit::new(&server);
    let file = server.dir().join("broken.yaml");
    std::fs::write(&file, "roles: [this is not, a catalog\n").unwrap();
    let path = file.to_str().unwrap();

    let dry = server.cli(&["catalog", "apply", path, "--dry-run"]);
    assert!(!dry.status.success(), "{dry:?}");
    assert_eq!(audit.new_events(), Vec::<Value>::new());

    let invalid = server.cli(&["catalog", "apply", path]);
    assert!(!invalid.status.success(), "{invalid:?}");
    let event = audit.one("an invalid catalog file", "admin_refused", "INVALID", None);
    assert_eq!(event["payload"]["action"], "catalog.apply", "{event}");
    assert_eq!(event["payload"]["target"], format!("catalog-file:{path}"));
    assert!(
        event["actor"]
            .as_str()
            .is_some_and(|a| a.starts_with("catalog-apply:")),
        "{event}"
    );
    assert!(event["payload"]["reason"].is_string(), "{event}");

    let big = server.cli(&["catalog", "apply", path, "--max-catalog-bytes", "8"]);
    assert!(!big.status.success(), "{big:?}");
    let event = audit.one(
        "a catalog file over the limit",
        "admin_refused",
        "TOO_LARGE",
        None,
    );
    assert_eq!(event["actor"], "catalog-apply", "{event}");
}

/// The reviewer's side: a hold decision the service refuses (no reason, an unknown hold, a
/// hold already decided) changes nothing and is an `admin_refused` event naming the
/// reviewer, the hold and why, before the reviewer hears it.
#[tokio::test]
async fn a_refused_hold_decision_is_audited_and_changes_nothing() {
    let server = Server::start();
    let client = server.connect(&server.support_key).await;
    let (session, _) = init(&client).await;
    may_refund_o5005(&client, &session).await;
    let hold = held(&client, &session).await;
    let (holds, _) = reviewer(&server).await;
    let mut audit = Audit::new(&server);

    let blank = holds
        .approve(&Decider::console("rita"), &hold, "   ", Utc::now())
        .await;
    assert!(blank.is_err(), "{blank:?}");
    let event = audit.one(
        "a decision without a reason",
        "admin_refused",
        "INVALID",
        None,
    );
    assert_eq!(event["actor"], "rita", "{event}");
    assert_eq!(event["payload"]["action"], "hold.approve", "{event}");
    assert_eq!(
        event["payload"]["target"],
        format!("hold:{hold}"),
        "{event}"
    );
    assert_eq!(holds.get(&hold).await.unwrap().state.as_str(), "pending");

    let unknown = holds
        .deny(&Decider::console("rita"), "hold_nope", "no", Utc::now())
        .await;
    assert!(unknown.is_err(), "{unknown:?}");
    let event = audit.one("an unknown hold", "admin_refused", "NOT_FOUND", None);
    assert_eq!(event["payload"]["action"], "hold.deny", "{event}");
    assert_eq!(event["payload"]["target"], "hold:hold_nope", "{event}");

    holds
        .deny(&Decider::console("rita"), &hold, "no", Utc::now())
        .await
        .unwrap();
    audit.new_events();
    let again = holds
        .approve(&Decider::console("sam"), &hold, "yes", Utc::now())
        .await;
    assert!(again.is_err(), "{again:?}");
    let event = audit.one("a hold already decided", "admin_refused", "SETTLED", None);
    assert_eq!(event["actor"], "sam", "{event}");
    assert_eq!(holds.get(&hold).await.unwrap().state.as_str(), "denied");
}
