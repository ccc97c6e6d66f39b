//! The `/mcp` endpoint of the real binary, driven by rmcp's client over streamable HTTP
//! against the demo catalog. "Not executed" is proven from the demo upstream's executions
//! log, never from Skillgate's own audit.

use crate::common;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, ORIGIN, WWW_AUTHENTICATE};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use common::replies::{
    assert_allowed, assert_denied, initialize_body, json_rpc, raw_initialize, role_names,
};
use common::{Server, call, init, learn, platform};

// ---- transport, authentication and admission -------------------------------------------

#[tokio::test]
async fn tools_list_returns_exactly_the_four_platform_tools() {
    let server = Server::start();
    let client = server.connect(&server.support_key).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        ["init_skilder", "learn", "call_tool", "feedback_skill"]
    );
    // call_tool publishes the shape of every answer it gives, which the test client checks
    // each answer against (common::platform); core's tests hold docs/ to the same schema.
    let published = tools[2]
        .output_schema
        .as_deref()
        .expect("call_tool has an outputSchema");
    assert_eq!(published, skillgate_core::gateway::output_schema());
    let info = client.peer_info().expect("the server introduced itself");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("skillgate")
    );
    assert!(
        info.instructions
            .as_deref()
            .unwrap_or("")
            .contains("init_skilder")
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_valid_key_negotiates_protocol_2025_06_18_and_2025_11_25() {
    let server = Server::start();
    for version in ["2025-06-18", "2025-11-25"] {
        let response = raw_initialize(&server, Some(&server.support_key), version)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{version}");
        assert!(response.headers().contains_key("mcp-session-id"));
        let message = json_rpc(&response.text().await.unwrap());
        assert_eq!(message["result"]["protocolVersion"], version);
        assert_eq!(message["result"]["serverInfo"]["name"], "skillgate");
    }
}

#[tokio::test]
async fn a_missing_bad_or_revoked_key_gets_401_with_a_challenge_naming_the_resource_metadata() {
    let server = Server::start();
    let revoked = server.create_key("soon-revoked", "support");
    server.revoke_key("soon-revoked");
    let unknown = format!("sgk_{}", "x".repeat(43));
    for key in [
        None,
        Some("not-a-key"),
        Some(unknown.as_str()),
        Some(revoked.as_str()),
    ] {
        let response = raw_initialize(&server, key, "2025-06-18")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{key:?}");
        // Where an OAuth client finds the authorization server (RFC 9728 §5.1); a refused
        // credential is also `invalid_token`.
        let metadata = format!(
            r#"Bearer resource_metadata="{}/.well-known/oauth-protected-resource/mcp""#,
            server.base
        );
        let challenge = match key {
            None => metadata,
            Some(_) => format!(r#"{metadata}, error="invalid_token""#),
        };
        assert_eq!(response.headers()[WWW_AUTHENTICATE], challenge.as_str());
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"], "unauthorized");
    }
}

#[tokio::test]
async fn a_revoked_key_stops_working_at_once_even_in_an_open_session() {
    let server = Server::start();
    let key = server.create_key("revoke-me", "support");
    let client = server.connect(&key).await;
    client.list_all_tools().await.unwrap();
    server.revoke_key("revoke-me");
    let after = client
        .call_tool(CallToolRequestParams::new("init_skilder"))
        .await;
    assert!(after.is_err(), "a revoked key was served: {after:?}");
}

#[tokio::test]
async fn a_disallowed_origin_is_forbidden_and_a_loopback_origin_is_not() {
    let server = Server::start();
    let response = raw_initialize(&server, Some(&server.support_key), "2025-06-18")
        .header(ORIGIN, "https://evil.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let response = raw_initialize(&server, Some(&server.support_key), "2025-06-18")
        .header(ORIGIN, format!("http://localhost:{}", server.port))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_non_loopback_host_is_forbidden_even_with_a_valid_key() {
    let server = Server::start();
    let response = raw_initialize(&server, Some(&server.support_key), "2025-06-18")
        .header(HOST, format!("rebind.example.com:{}", server.port))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn an_oversized_body_is_rejected_with_413() {
    let server = Server::start();
    let padding = "x".repeat(2 * 1024 * 1024);
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": padding, "version": "0"}}
    });
    let response = reqwest::Client::new()
        .post(server.mcp_url())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .header(AUTHORIZATION, format!("Bearer {}", server.support_key))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn an_unknown_platform_tool_is_a_protocol_error_not_a_tool_result() {
    let server = Server::start();
    let client = server.connect(&server.support_key).await;
    let result = client
        .call_tool(CallToolRequestParams::new("process_refund"))
        .await;
    assert!(result.is_err(), "{result:?}");
}

// ---- the paper's structural scenarios --------------------------------------------------

#[tokio::test]
async fn the_support_scope_lists_its_roles_and_denies_system_admin_without_executing_anything() {
    let server = Server::start();
    let client = server.connect(&server.support_key).await;
    let (session, reply) = init(&client).await;
    let roles = role_names(&reply);
    for role in ["tier-1-support", "retention-desk", "security-fraud"] {
        assert!(roles.contains(&role.to_owned()), "{roles:?}");
    }
    for role in ["billing-admin", "system-admin"] {
        assert!(!roles.contains(&role.to_owned()), "{roles:?}");
        assert!(!reply.text.contains(role), "{}", reply.text);
    }

    let denied = learn(&client, &session, "/roles/system-admin").await;
    assert_denied(&denied, "ACCESS DENIED", "ACCESS_DENIED");
    let denied = call(
        &client,
        &session,
        "delete_user_account",
        json!({"user_id": "U-2001", "confirm": true}),
    )
    .await;
    assert_denied(&denied, "ACCESS DENIED", "ACCESS_DENIED");
    assert!(server.executed("delete_user_account").is_empty());
}

#[tokio::test]
async fn billing_admin_is_not_learnable_in_the_support_scope() {
    let server = Server::start();
    let client = server.connect(&server.support_key).await;
    let (session, _) = init(&client).await;
    let denied = learn(&client, &session, "/roles/billing-admin").await;
    assert_denied(&denied, "ACCESS DENIED", "ACCESS_DENIED");
    let denied = call(
        &client,
        &session,
        "update_payment_method",
        json!({"customer_id": "C-1001", "token": "tok_test_4242"}),
    )
    .await;
    assert_denied(&denied, "ACCESS DENIED", "ACCESS_DENIED");
    assert!(server.executed("update_payment_method").is_empty());
}

/// A connection of the demo support key with a session that learned `tier-1-support`.
async fn tier_one_session(server: &Server) -> (common::Client, String) {
    let client = server.connect(&server.support_key).await;
    let (session, _) = init(&client).await;
    assert_allowed(&learn(&client, &session, "/roles/tier-1-support").await);
    (client, session)
}

/// `process_refund` arguments for the demo's order O-5005.
fn refund(amount: u32) -> Value {
    json!({"customer_id": "C-1003", "order_id": "O-5005", "amount": amount,
           "reason": "Premium support not delivered"})
}

#[tokio::test]
async fn tier_one_support_is_stopped_above_its_refund_cap_and_refunds_within_it() {
    let server = Server::start();
    let (client, session) = tier_one_session(&server).await;

    let over = call(&client, &session, "process_refund", refund(1200)).await;
    assert_denied(&over, "GOVERNANCE VIOLATION", "GOVERNANCE_VIOLATION");
    assert!(server.executed("process_refund").is_empty());

    let eligibility = call(
        &client,
        &session,
        "check_refund_eligibility",
        json!({"customer_id": "C-1003", "order_id": "O-5005"}),
    )
    .await;
    assert_allowed(&eligibility);
    let within = call(&client, &session, "process_refund", refund(200)).await;
    assert_allowed(&within);
    let executed = server.executed("process_refund");
    assert_eq!(executed.len(), 1, "{executed:?}");
    assert_eq!(executed[0]["ok"], true);
    assert_eq!(executed[0]["arguments"]["order_id"], "O-5005");
}

#[tokio::test]
async fn the_retention_desk_refunds_only_after_ticket_extension_and_credit() {
    let server = Server::start();
    let client = server.connect(&server.support_key).await;
    let (session, _) = init(&client).await;
    assert_allowed(&learn(&client, &session, "/roles/retention-desk").await);

    let refund = json!({"customer_id": "C-1001", "order_id": "O-5001", "amount": 50,
                        "reason": "Goodwill after a cancellation request"});
    let early = call(&client, &session, "process_refund", refund.clone()).await;
    assert_denied(&early, "GOVERNANCE VIOLATION", "GOVERNANCE_VIOLATION");
    assert!(server.executed("process_refund").is_empty());

    for (tool, arguments) in [
        (
            "create_ticket",
            json!({"customer_id": "C-1001", "subject": "Wants to cancel",
                   "description": "Considering cancellation over price", "priority": "normal"}),
        ),
        (
            "offer_extension",
            json!({"customer_id": "C-1001", "months": 1}),
        ),
        (
            "apply_service_credit",
            json!({"customer_id": "C-1001", "amount": 50}),
        ),
    ] {
        assert_allowed(&call(&client, &session, tool, arguments).await);
    }
    assert_allowed(&call(&client, &session, "process_refund", refund).await);
    assert_eq!(server.executed("process_refund").len(), 1);
}

#[tokio::test]
async fn learning_security_fraud_mid_session_guards_flagging_behind_an_investigation() {
    let server = Server::start();
    let (client, session) = tier_one_session(&server).await;
    assert_allowed(&learn(&client, &session, "/roles/security-fraud").await);

    let flag = json!({"customer_id": "C-1006", "reason": "Login from a new country after failed resets",
                      "severity": "high"});
    let early = call(&client, &session, "flag_account", flag.clone()).await;
    assert_denied(&early, "GOVERNANCE VIOLATION", "GOVERNANCE_VIOLATION");
    assert!(server.executed("flag_account").is_empty());

    let investigation = call(
        &client,
        &session,
        "investigate_account_activity",
        json!({"customer_id": "C-1006", "days": 30}),
    )
    .await;
    assert_allowed(&investigation);
    assert_allowed(&call(&client, &session, "flag_account", flag).await);
    assert_eq!(server.executed("flag_account").len(), 1);
}

// ---- bad input ------------------------------------------------------------------------

#[tokio::test]
async fn near_miss_tool_names_are_denied_and_never_reach_the_upstream() {
    let server = Server::start();
    let (client, session) = tier_one_session(&server).await;
    for name in ["Process_Refund", "process_refund ", "process-refund"] {
        let denied = call(
            &client,
            &session,
            name,
            json!({"customer_id": "C-1001", "order_id": "O-5001", "amount": 10, "reason": "x"}),
        )
        .await;
        assert_denied(&denied, "ACCESS DENIED", "ACCESS_DENIED");
    }
    assert!(server.executions().is_empty(), "{:?}", server.executions());
}

#[tokio::test]
async fn traversal_and_encoded_learn_paths_get_a_clear_error() {
    let server = Server::start();
    let client = server.connect(&server.support_key).await;
    let (session, _) = init(&client).await;
    for path in [
        "/roles/../system-admin",
        "/roles/%2e%2e/system-admin",
        "//roles/tier-1-support",
    ] {
        let reply = learn(&client, &session, path).await;
        assert!(reply.is_error, "{path}: {}", reply.text);
        assert_eq!(reply.code(), "INVALID_ARGUMENTS", "{path}: {}", reply.text);
    }
}

#[tokio::test]
async fn a_session_id_of_another_key_is_access_denied() {
    let server = Server::start();
    let other_key = server.create_key("other-support", "support");
    let owner = server.connect(&server.support_key).await;
    let intruder = server.connect(&other_key).await;
    let (session, _) = init(&owner).await;
    assert_allowed(&learn(&owner, &session, "/roles/tier-1-support").await);

    let denied = learn(&intruder, &session, "/roles/tier-1-support").await;
    assert_denied(&denied, "ACCESS DENIED", "ACCESS_DENIED");
    let denied = call(
        &intruder,
        &session,
        "lookup_customer",
        json!({"customer_id": "C-1001"}),
    )
    .await;
    assert_denied(&denied, "ACCESS DENIED", "ACCESS_DENIED");
    assert!(server.executed("lookup_customer").is_empty());
}

#[tokio::test]
async fn arguments_that_are_not_an_object_are_invalid_arguments() {
    let server = Server::start();
    let (client, session) = tier_one_session(&server).await;
    let reply = call(&client, &session, "lookup_customer", json!(["C-1001"])).await;
    assert_denied(&reply, "INVALID ARGUMENTS", "INVALID_ARGUMENTS");
    // Wrong shapes of the platform tool's own arguments are caught by the adapter.
    let reply = platform(&client, "learn", json!({"path": 7})).await;
    assert!(reply.is_error);
    assert_eq!(reply.code(), "INVALID_ARGUMENTS");
    assert!(server.executions().is_empty());
}

// ---- audit ----------------------------------------------------------------------------

#[tokio::test]
async fn the_audit_chain_verifies_after_a_scenario() {
    let server = Server::start();
    let (client, session) = tier_one_session(&server).await;
    let denied = call(
        &client,
        &session,
        "delete_user_account",
        json!({"user_id": "U-2001", "confirm": true}),
    )
    .await;
    assert!(denied.is_error);
    client.cancel().await.unwrap();

    let output = server.cli(&["audit", "verify"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "audit verify: {output:?}");
    let count: u64 = stdout
        .strip_prefix("audit chain intact: ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("prints the event count: {stdout}"));
    // session started, role learned, call denied
    assert!(count >= 3, "{stdout}");

    let export = server.cli(&["audit", "export", "--format", "jsonl"]);
    assert!(export.status.success());
    let kinds: Vec<String> = String::from_utf8_lossy(&export.stdout)
        .lines()
        .map(|line| {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            for field in ["seq", "at", "session_id", "kind", "prev_hash", "hash"] {
                assert!(event.get(field).is_some(), "{field} in {line}");
            }
            event["kind"].as_str().unwrap().to_owned()
        })
        .collect();
    // The first start's `admin` user and the demo seed's key come first: admin changes are
    // audited too.
    assert_eq!(
        kinds,
        [
            "admin_change",
            "admin_change",
            "session_started",
            "learn_granted",
            "call_denied"
        ]
    );
}

#[tokio::test]
async fn a_second_server_process_on_the_same_database_continues_a_session_and_shares_its_caps() {
    let first = Server::start();
    let second = first.replica();
    let on_first = first.connect(&first.support_key).await;
    let on_second = second.connect(&first.support_key).await;
    let (session, _) = init(&on_first).await;
    assert_allowed(&learn(&on_first, &session, "/roles/tier-1-support").await);

    // The learned role and the eligibility check made through one process count in the other.
    assert_allowed(
        &call(
            &on_second,
            &session,
            "check_refund_eligibility",
            json!({"customer_id": "C-1003", "order_id": "O-5005"}),
        )
        .await,
    );
    // Refunds of up to 200 need no approval: five of them fill the 1000 per-session cap.
    for n in 0..5 {
        let on = if n % 2 == 0 { &on_first } else { &on_second };
        assert_allowed(&call(on, &session, "process_refund", refund(200)).await);
    }
    // 1000 used across both processes: 100 more is refused.
    let over = call(&on_first, &session, "process_refund", refund(100)).await;
    assert_denied(&over, "GOVERNANCE VIOLATION", "GOVERNANCE_VIOLATION");
    assert!(over.text.contains("1000"), "{}", over.text);
    assert_eq!(first.executed("process_refund").len(), 5);
}

#[tokio::test]
async fn concurrent_refunds_never_pass_a_cap_that_only_some_of_them_fit_under() {
    let first = Server::start();
    let second = first.replica();
    let clients = [
        first.connect(&first.support_key).await,
        second.connect(&first.support_key).await,
    ];
    let (session, _) = init(&clients[0]).await;
    assert_allowed(&learn(&clients[0], &session, "/roles/tier-1-support").await);
    assert_allowed(
        &call(
            &clients[0],
            &session,
            "check_refund_eligibility",
            json!({"customer_id": "C-1008", "order_id": "O-5011"}),
        )
        .await,
    );
    // Twelve refunds of 200 at once, through two processes: the 1000 cap fits five of them.
    let refund = json!({"customer_id": "C-1008", "order_id": "O-5011", "amount": 200,
                        "reason": "Duplicate charge"});
    let replies = futures::future::join_all((0..12).map(|i| {
        let client = &clients[i % 2];
        let session = session.clone();
        let refund = refund.clone();
        async move { call(client, &session, "process_refund", refund).await }
    }))
    .await;
    let allowed = replies.iter().filter(|r| !r.is_error).count();
    let violations = replies
        .iter()
        .filter(|r| r.code() == "GOVERNANCE_VIOLATION")
        .count();
    assert_eq!((allowed, violations), (5, 7), "{replies:?}");
    assert_eq!(first.executed("process_refund").len(), 5);
}

/// A raw JSON-RPC POST to `url`, with the connection label echoed when given; returns the
/// status, the label the response carries, and the JSON-RPC message (if any).
async fn raw_post(
    url: &str,
    key: &str,
    label: Option<&str>,
    body: Value,
) -> (StatusCode, Option<String>, Option<Value>) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .header(AUTHORIZATION, format!("Bearer {key}"))
        .header("mcp-protocol-version", "2025-06-18")
        .body(body.to_string());
    if let Some(label) = label {
        request = request.header("mcp-session-id", label);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let issued = response
        .headers()
        .get("mcp-session-id")
        .map(|value| value.to_str().unwrap().to_owned());
    let text = response.text().await.unwrap();
    let message = (status == StatusCode::OK).then(|| json_rpc(&text));
    (status, issued, message)
}

fn tool_call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
}

#[tokio::test]
async fn one_mcp_connection_is_served_by_either_replica_without_sticky_routing() {
    let first = Server::start();
    let second = first.replica();
    let key = first.support_key.clone();
    let (status, label, _) = raw_post(
        &first.mcp_url(),
        &key,
        None,
        serde_json::from_str(&initialize_body("2025-06-18")).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let label = label.expect("initialize hands out a connection label");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = raw_post(&second.mcp_url(), &key, Some(&label), initialized).await;
    assert_eq!(status, StatusCode::ACCEPTED);

    // Every request below omits session_id and goes to a different process than the last:
    // the connection's newest session is found through the label alone.
    let init = tool_call(2, "init_skilder", json!({}));
    let (status, _, init) = raw_post(&second.mcp_url(), &key, Some(&label), init).await;
    assert_eq!(status, StatusCode::OK);
    assert!(init.unwrap()["result"]["structuredContent"]["session_id"].is_string());
    let learn = tool_call(3, "learn", json!({"path": "/roles/tier-1-support"}));
    let (_, _, learned) = raw_post(&first.mcp_url(), &key, Some(&label), learn).await;
    let learned = learned.unwrap();
    assert_eq!(learned["result"]["isError"], json!(false), "{learned}");
    let eligibility = tool_call(
        4,
        "call_tool",
        json!({"tool": "check_refund_eligibility",
               "arguments": {"customer_id": "C-1003", "order_id": "O-5005"}}),
    );
    let (_, _, called) = raw_post(&second.mcp_url(), &key, Some(&label), eligibility).await;
    let called = called.unwrap();
    assert_eq!(called["result"]["isError"], json!(false), "{called}");
    assert_eq!(first.executed("check_refund_eligibility").len(), 1);
}

#[tokio::test]
async fn without_a_session_id_each_connection_of_a_shared_key_uses_its_own_newest_session() {
    let server = Server::start();
    let one = server.connect(&server.support_key).await;
    let other = server.connect(&server.support_key).await;
    init(&one).await;
    init(&other).await;
    let learned = platform(&one, "learn", json!({"path": "/roles/tier-1-support"})).await;
    assert_allowed(&learned);

    let eligibility = json!({"tool": "check_refund_eligibility",
                             "arguments": {"customer_id": "C-1003", "order_id": "O-5005"}});
    // The other connection's newest session has learned nothing: its call is denied.
    let denied = platform(&other, "call_tool", eligibility.clone()).await;
    assert_denied(&denied, "ACCESS DENIED", "ACCESS_DENIED");
    assert_allowed(&platform(&one, "call_tool", eligibility).await);
    assert_eq!(server.executed("check_refund_eligibility").len(), 1);
}

#[tokio::test]
async fn a_malformed_connection_label_is_a_bad_request_and_delete_is_not_allowed_and_frees_nothing()
{
    let server = Server::start();
    let key = server.support_key.clone();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let (status, _, _) = raw_post(&server.mcp_url(), &key, Some("has space"), list).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let client = server.connect(&key).await;
    let (session, _) = init(&client).await;
    let delete = reqwest::Client::new()
        .delete(server.mcp_url())
        .header(AUTHORIZATION, format!("Bearer {key}"))
        .header("mcp-session-id", "some-connection")
        .send()
        .await
        .unwrap();
    // No session to end: 405 with `Allow`, which the official SDKs accept on close (a 202
    // made the Python SDK log a warning).
    assert_eq!(delete.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        delete
            .headers()
            .get(reqwest::header::ALLOW)
            .map(|v| v.as_bytes()),
        Some(&b"POST"[..])
    );
    // The governance session lives on in the database, usable from any connection.
    let again = server.connect(&key).await;
    assert_allowed(&learn(&again, &session, "/roles/tier-1-support").await);
}

#[tokio::test]
async fn discovery_of_the_sessionless_revision_gets_no_connection_label() {
    let server = Server::start();
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let response = reqwest::Client::new()
        .post(server.mcp_url())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .header(AUTHORIZATION, format!("Bearer {}", server.support_key))
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "server/discover")
        .body(discover.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(!response.headers().contains_key("mcp-session-id"));
    let message = json_rpc(&response.text().await.unwrap());
    assert!(
        message["result"]["supportedVersions"].is_array(),
        "{message}"
    );
}

/// The value of the first exposition line that starts with `series` (name and labels).
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find(|line| line.starts_with(series) && line[series.len()..].starts_with(' '))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no series {series} in:\n{text}"))
}

#[tokio::test]
async fn the_metrics_page_counts_decisions_refusals_and_times_each_phase_of_a_call() {
    let server = Server::start();
    let (client, session) = tier_one_session(&server).await;
    let over = call(&client, &session, "process_refund", refund(1200)).await;
    assert_denied(&over, "GOVERNANCE VIOLATION", "GOVERNANCE_VIOLATION");
    let eligibility = json!({"customer_id": "C-1003", "order_id": "O-5005"});
    assert_allowed(&call(&client, &session, "check_refund_eligibility", eligibility).await);
    assert_allowed(&call(&client, &session, "process_refund", refund(200)).await);
    let refused = raw_initialize(&server, Some("not-a-key"), "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);

    let http = reqwest::Client::new();
    let response = http
        .get(format!("{}/metrics", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()[CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = response.text().await.unwrap();
    let decisions = |word: &str| {
        metric(
            &text,
            &format!(r#"skillgate_call_decisions_total{{decision="{word}"}}"#),
        )
    };
    assert_eq!(decisions("allowed"), 2.0);
    assert_eq!(decisions("governance_violation"), 1.0);
    let phase = |name: &str| {
        metric(
            &text,
            &format!(r#"skillgate_call_phase_seconds_count{{phase="{name}"}}"#),
        )
    };
    // Three calls: each read its session, was decided and had its decision audited; the
    // two allowed ones reached the upstream and had their result audited.
    assert_eq!(phase("session"), 3.0);
    assert_eq!(phase("decide"), 3.0);
    assert_eq!(phase("audit_decision"), 3.0);
    assert_eq!(phase("upstream"), 2.0);
    assert_eq!(phase("audit_result"), 2.0);
    // Each call's arguments were inspected before deciding, each result before settling.
    assert_eq!(phase("inspect"), 5.0);
    // Only the refund is under a cumulative cap, so only it stored a reservation.
    assert_eq!(phase("reserve"), 1.0);
    assert!(phase("auth") >= 5.0, "every keyed request checks its key");
    assert!(
        metric(
            &text,
            r#"skillgate_call_phase_seconds_sum{phase="upstream"}"#
        ) > 0.0
    );
    assert_eq!(
        metric(&text, r#"skillgate_mcp_refusals_total{status="401"}"#),
        1.0
    );
    assert!(metric(&text, "skillgate_admitted_request_seconds_count") >= 5.0);

    let proxied = http
        .get(format!("{}/metrics", server.base))
        .header("x-forwarded-for", "203.0.113.9")
        .send()
        .await
        .unwrap();
    assert_eq!(proxied.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_call_whose_reservation_keeps_conflicting_is_denied_audited_and_never_executed() {
    let server = Server::start();
    let (client, session) = tier_one_session(&server).await;
    let eligibility = json!({"customer_id": "C-1003", "order_id": "O-5005"});
    assert_allowed(&call(&client, &session, "check_refund_eligibility", eligibility).await);

    // Another writer that always gets there first, made real with SQLite itself: every
    // save of a session's usage now changes no row, as when a replica saved in between.
    let db = skillgate_core::store::testing::raw_pool(&server.database_url()).await;
    skillgate_core::store::testing::add_refusing_trigger(
        &db,
        "always_conflicting",
        "UPDATE",
        "governance_sessions",
        None,
        skillgate_core::store::testing::Refusal::Skip,
    )
    .await;

    let busy = call(&client, &session, "process_refund", refund(200)).await;
    assert_denied(&busy, "ACCESS DENIED", "ACCESS_DENIED");
    assert!(busy.text.contains("too busy"), "{}", busy.text);
    assert!(server.executed("process_refund").is_empty());

    let export = server.cli(&["audit", "export", "--format", "jsonl"]);
    assert!(export.status.success());
    let last: Value = String::from_utf8_lossy(&export.stdout)
        .lines()
        .last()
        .map(|line| serde_json::from_str(line).unwrap())
        .unwrap();
    assert_eq!(last["kind"], "call_denied", "{last}");
    assert_eq!(last["payload"]["tool"], "process_refund", "{last}");
    let metrics = reqwest::get(format!("{}/metrics", server.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        metric(
            &metrics,
            r#"skillgate_call_decisions_total{decision="access_denied"}"#
        ),
        1.0
    );
}
