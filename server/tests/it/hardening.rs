//! The router against a determined agent, through the real binary: numbers past `f64`,
//! caps that a second role cannot reopen, step guards bound to subject and outcome, events
//! attributed to whoever caused them, panics answered and audited, bounded requests.

use crate::common;

use std::time::Duration;

use common::{Server, call, init, learn, platform};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

/// An agent's answer must come back within normal latency, never after a client timeout.
const PROMPT: Duration = Duration::from_secs(10);

fn assert_allowed(reply: &common::Reply) {
    assert!(!reply.is_error, "expected success, got: {}", reply.text);
}

fn assert_denied(reply: &common::Reply, code: &str) {
    assert!(reply.is_error, "expected a denial, got: {}", reply.text);
    assert_eq!(reply.code(), code, "{}", reply.text);
}

/// JSON with numbers kept as written (serde_json's `arbitrary_precision` is on).
fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

fn last_event(server: &Server) -> Value {
    server.audit_events().pop().expect("at least one event")
}

async fn tier_one(server: &Server) -> (common::Client, String) {
    let client = server.connect(&server.support_key).await;
    let (session, _) = init(&client).await;
    assert_allowed(&learn(&client, &session, "/roles/tier-1-support").await);
    (client, session)
}

fn refund(order: &str, amount: Value) -> Value {
    json!({"customer_id": "C-1003", "order_id": order, "amount": amount,
           "reason": "Premium support not delivered"})
}

fn eligibility(order: &str) -> Value {
    json!({"customer_id": "C-1003", "order_id": order})
}

async fn within(reply: impl std::future::Future<Output = common::Reply>) -> common::Reply {
    tokio::time::timeout(PROMPT, reply)
        .await
        .expect("the gateway answers within normal latency")
}

// ---- numbers beyond f64 -----------------------------------------------------------------

#[tokio::test]
async fn amounts_and_counts_beyond_f64_are_refused_promptly_and_audited() {
    let server = Server::start();
    let (client, session) = tier_one(&server).await;
    assert_allowed(
        &call(
            &client,
            &session,
            "check_refund_eligibility",
            eligibility("O-5005"),
        )
        .await,
    );
    for amount in [
        "1e400",
        "-1e400",
        "1e-400",
        "123456789012345678901234567890123456789",
    ] {
        let reply = within(call(
            &client,
            &session,
            "process_refund",
            refund("O-5005", parsed(amount)),
        ))
        .await;
        assert!(reply.is_error, "{amount}: {}", reply.text);
        assert!(
            ["INVALID_ARGUMENTS", "GOVERNANCE_VIOLATION"].contains(&reply.code()),
            "{amount}: {}",
            reply.text
        );
        assert!(
            reply.text.contains("amount"),
            "{amount} names the argument: {}",
            reply.text
        );
        let event = last_event(&server);
        assert_eq!(event["kind"], "call_denied", "{amount}: {event}");
        assert_eq!(event["session_id"], session.as_str());
    }

    assert_allowed(&learn(&client, &session, "/roles/retention-desk").await);
    let months = within(call(
        &client,
        &session,
        "offer_extension",
        json!({"customer_id": "C-1003", "months": parsed("1e400")}),
    ))
    .await;
    assert_denied(&months, "INVALID_ARGUMENTS");
    assert!(months.text.contains("months"), "{}", months.text);
    assert!(server.executed("process_refund").is_empty());
    assert!(server.executed("offer_extension").is_empty());
    // The server kept serving throughout.
    assert_allowed(
        &call(
            &client,
            &session,
            "lookup_customer",
            json!({"customer_id": "C-1003"}),
        )
        .await,
    );
}

// ---- caps bound the session, guardrails bind every role ---------------------------------

#[tokio::test]
async fn a_second_role_cannot_refund_past_the_scopes_per_session_guardrail() {
    let server = Server::start();
    let (client, session) = tier_one(&server).await;
    let init_text = {
        let (_, reply) = init(&client).await;
        reply.text
    };
    assert!(
        init_text.contains("Guardrails of scope support"),
        "{init_text}"
    );
    assert!(
        init_text.contains("must add up to at most 1000"),
        "{init_text}"
    );

    assert_allowed(
        &call(
            &client,
            &session,
            "check_refund_eligibility",
            eligibility("O-5005"),
        )
        .await,
    );
    // Refunds of up to 200 run without approval: five fill tier-1's cap and the guardrail.
    for _ in 0..5 {
        assert_allowed(
            &call(
                &client,
                &session,
                "process_refund",
                refund("O-5005", json!(200)),
            )
            .await,
        );
    }
    let desk = learn(&client, &session, "/roles/retention-desk").await;
    assert_allowed(&desk);
    assert!(
        desk.text.contains("Guardrails of scope support"),
        "{}",
        desk.text
    );
    for (tool, arguments) in [
        (
            "create_ticket",
            json!({"customer_id": "C-1003", "subject": "Wants to cancel",
                   "description": "Asked for a refund instead", "priority": "normal"}),
        ),
        (
            "offer_extension",
            json!({"customer_id": "C-1003", "months": 1}),
        ),
        (
            "apply_service_credit",
            json!({"customer_id": "C-1003", "amount": 50}),
        ),
    ] {
        assert_allowed(&call(&client, &session, tool, arguments).await);
    }

    // retention-desk bounds each refund but caps no sum: only the scope's guardrail stops it.
    let sixth = call(
        &client,
        &session,
        "process_refund",
        refund("O-5005", json!(200)),
    )
    .await;
    assert_denied(&sixth, "GOVERNANCE_VIOLATION");
    assert!(
        sixth.text.contains("guardrail of scope support"),
        "{}",
        sixth.text
    );
    assert!(sixth.text.contains("1000 already used"), "{}", sixth.text);
    assert_eq!(sixth.structured["guardrail_of"], "support");

    let large = call(
        &client,
        &session,
        "process_refund",
        refund("O-5005", json!(4000)),
    )
    .await;
    assert_denied(&large, "GOVERNANCE_VIOLATION");
    assert_eq!(server.executed("process_refund").len(), 5);
}

// ---- step guards bind subject and outcome -----------------------------------------------

#[tokio::test]
async fn a_refund_needs_an_eligible_check_of_the_same_order() {
    let server = Server::start();
    let (client, session) = tier_one(&server).await;
    // O-5006 was refunded already: its check succeeds, answering `eligible: false`.
    let ineligible = call(
        &client,
        &session,
        "check_refund_eligibility",
        eligibility("O-5006"),
    )
    .await;
    assert_allowed(&ineligible);
    assert_eq!(ineligible.result()["eligible"], false);
    let denied = call(
        &client,
        &session,
        "process_refund",
        refund("O-5006", json!(100)),
    )
    .await;
    assert_denied(&denied, "GOVERNANCE_VIOLATION");
    assert!(denied.text.contains("same `order_id`"), "{}", denied.text);
    let other_order = call(
        &client,
        &session,
        "process_refund",
        refund("O-5005", json!(100)),
    )
    .await;
    assert_denied(&other_order, "GOVERNANCE_VIOLATION");
    assert!(server.executed("process_refund").is_empty());

    assert_allowed(
        &call(
            &client,
            &session,
            "check_refund_eligibility",
            eligibility("O-5005"),
        )
        .await,
    );
    assert_allowed(
        &call(
            &client,
            &session,
            "process_refund",
            refund("O-5005", json!(100)),
        )
        .await,
    );
    let executed = server.executed("process_refund");
    assert_eq!(executed.len(), 1);
    assert_eq!(executed[0]["arguments"]["order_id"], "O-5005");
}

// ---- events land where they belong ------------------------------------------------------

#[tokio::test]
async fn a_foreign_session_named_by_another_key_is_audited_under_that_key_alone() {
    let server = Server::start();
    let intruder_key = server.create_key("intruder", "support");
    let (owner, session) = tier_one(&server).await;
    let intruder = server.connect(&intruder_key).await;
    let before: Vec<Value> = server
        .audit_events()
        .into_iter()
        .filter(|e| e["session_id"] == session.as_str())
        .collect();

    let denied = call(
        &intruder,
        &session,
        "lookup_customer",
        json!({"customer_id": "C-1001"}),
    )
    .await;
    assert_denied(&denied, "ACCESS_DENIED");
    let denied = learn(&intruder, &session, "/roles/tier-1-support").await;
    assert_denied(&denied, "ACCESS_DENIED");

    let events = server.audit_events();
    let in_session: Vec<&Value> = events
        .iter()
        .filter(|e| e["session_id"] == session.as_str())
        .collect();
    assert_eq!(
        in_session.len(),
        before.len(),
        "the victim's session gained events: {in_session:?}"
    );
    assert!(in_session.iter().all(|e| e["actor"] != "intruder"));
    let theirs: Vec<&Value> = events.iter().filter(|e| e["actor"] == "intruder").collect();
    assert_eq!(theirs.len(), 2, "{theirs:?}");
    for event in theirs {
        assert!(event["session_id"].is_null(), "{event}");
        let digest = event["payload"]["named_session_digest"].as_str().unwrap();
        assert_eq!(digest.len(), 64);
        assert!(!event.to_string().contains(&session), "{event}");
    }
    // The owner carries on untouched.
    assert_allowed(
        &call(
            &owner,
            &session,
            "lookup_customer",
            json!({"customer_id": "C-1001"}),
        )
        .await,
    );
}

#[tokio::test]
async fn malformed_platform_calls_are_refused_and_audited() {
    let server = Server::start();
    let client = server.connect(&server.support_key).await;
    let reply = platform(&client, "learn", json!({"path": 7})).await;
    assert_denied(&reply, "INVALID_ARGUMENTS");
    let event = last_event(&server);
    assert_eq!(event["kind"], "call_denied", "{event}");
    assert_eq!(event["payload"]["tool"], "learn");
    assert_eq!(event["payload"]["code"], "INVALID_ARGUMENTS");

    let unknown = client
        .call_tool(CallToolRequestParams::new("process_refund"))
        .await;
    assert!(
        unknown.is_err(),
        "an unknown platform tool is a protocol error"
    );
    assert_eq!(last_event(&server)["payload"]["tool"], "process_refund");
}

// ---- bounded requests -------------------------------------------------------------------

#[tokio::test]
async fn oversized_tool_names_session_ids_and_arguments_are_refused_with_a_digest_in_the_audit() {
    let server = Server::start();
    let (client, session) = tier_one(&server).await;

    let long_tool = "t".repeat(10_000);
    let reply = call(&client, &session, &long_tool, json!({})).await;
    assert_denied(&reply, "INVALID_ARGUMENTS");
    assert!(reply.text.contains("`tool`"), "{}", reply.text);
    let event = last_event(&server);
    assert!(
        event["payload"]["tool"].as_str().unwrap().chars().count() <= 129,
        "{event}"
    );

    let big = json!({"customer_id": "C-1001", "note": "x".repeat(200_000)});
    let reply = call(&client, &session, "lookup_customer", big).await;
    assert_denied(&reply, "INVALID_ARGUMENTS");
    assert!(reply.text.contains("`arguments`"), "{}", reply.text);
    let event = last_event(&server);
    assert!(
        event.to_string().len() < 2_000,
        "the audit keeps a digest, not the body"
    );
    assert_eq!(
        event["payload"]["arguments"]["omitted"]["sha256"]
            .as_str()
            .map(str::len),
        Some(64)
    );

    let long_session = "s".repeat(5_000);
    let reply = call(
        &client,
        &long_session,
        "lookup_customer",
        json!({"customer_id": "C-1001"}),
    )
    .await;
    assert_denied(&reply, "INVALID_ARGUMENTS");
    let reply = learn(&client, &long_session, "/roles/tier-1-support").await;
    assert_denied(&reply, "INVALID_ARGUMENTS");
    assert!(
        !server
            .audit_events()
            .iter()
            .any(|e| e.to_string().contains(&long_session))
    );
    assert!(server.executed("lookup_customer").is_empty());
}

// ---- a panic is answered, audited, counted and survived ---------------------------------

#[tokio::test]
async fn a_panicking_handler_answers_an_internal_error_is_audited_and_the_server_keeps_serving() {
    let server = Server::start_with_env(&[("SKILLGATE_FAULT_PANIC_TOOL", "get_order_history")]);
    let (client, session) = tier_one(&server).await;
    let request = CallRequestArgs::call(
        &session,
        "get_order_history",
        json!({"customer_id": "C-1001"}),
    );
    let answer = tokio::time::timeout(PROMPT, client.call_tool(request))
        .await
        .expect("a panic is answered at once, not left to a client timeout");
    let error = answer.expect_err("a panic is a JSON-RPC error, not a tool result");
    assert!(error.to_string().contains("internal error"), "{error}");

    let event = last_event(&server);
    assert_eq!(event["kind"], "call_denied", "{event}");
    assert_eq!(event["actor"], "demo-support");
    assert_eq!(event["payload"]["code"], "INTERNAL_ERROR");
    assert_eq!(event["payload"]["tool"], "get_order_history");
    let metrics = reqwest::get(format!("{}/metrics", server.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("skillgate_handler_panics_total 1"),
        "{metrics}"
    );
    assert_allowed(
        &call(
            &client,
            &session,
            "lookup_customer",
            json!({"customer_id": "C-1001"}),
        )
        .await,
    );
}

/// `call_tool` request parameters, for tests that need the raw protocol result.
struct CallRequestArgs;

impl CallRequestArgs {
    fn call(session: &str, tool: &str, arguments: Value) -> CallToolRequestParams {
        let Value::Object(arguments) =
            json!({"tool": tool, "arguments": arguments, "session_id": session})
        else {
            unreachable!()
        };
        CallToolRequestParams::new("call_tool").with_arguments(arguments)
    }
}

// ---- state changes and their events commit together -------------------------------------

#[tokio::test]
async fn a_learn_whose_event_cannot_be_written_unlocks_nothing() {
    let server = Server::start();
    let client = server.connect(&server.support_key).await;
    let (session, _) = init(&client).await;
    let db = skillgate_core::store::testing::raw_pool(&server.database_url()).await;
    // The audit refuses `learn_granted` events, as a full disk or a broken chain would.
    skillgate_core::store::testing::add_refusing_trigger(
        &db,
        "no_learn_events",
        "INSERT",
        "audit_events",
        Some("NEW.kind = 'learn_granted'"),
        skillgate_core::store::testing::Refusal::Abort("audit unavailable"),
    )
    .await;
    let failed = client
        .call_tool(
            CallToolRequestParams::new("learn").with_arguments(
                json!({"path": "/roles/tier-1-support", "session_id": session})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await;
    assert!(failed.is_err(), "the learn fails as a whole: {failed:?}");
    let state: String = sqlx::query_scalar("SELECT state FROM governance_sessions WHERE id = $1")
        .bind(&session)
        .fetch_one(&db)
        .await
        .unwrap();
    let state: Value = serde_json::from_str(&state).unwrap();
    assert_eq!(state["learned"], json!([]), "no role was unlocked: {state}");
    skillgate_core::store::testing::drop_refusing_trigger(&db, "no_learn_events", "audit_events")
        .await;
    let denied = call(
        &client,
        &session,
        "lookup_customer",
        json!({"customer_id": "C-1001"}),
    )
    .await;
    assert_denied(&denied, "ACCESS_DENIED");
}

#[tokio::test]
async fn a_learn_whose_save_keeps_conflicting_is_denied_and_audited() {
    let server = Server::start();
    let client = server.connect(&server.support_key).await;
    let (session, _) = init(&client).await;
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
    let busy = learn(&client, &session, "/roles/tier-1-support").await;
    assert_denied(&busy, "ACCESS_DENIED");
    assert!(busy.text.contains("changed too often"), "{}", busy.text);
    let event = last_event(&server);
    assert_eq!(event["kind"], "learn_denied", "{event}");
    assert_eq!(event["session_id"], session.as_str());
    assert!(
        !server
            .audit_events()
            .iter()
            .any(|e| e["kind"] == "learn_granted")
    );
}

#[tokio::test]
async fn a_session_whose_start_cannot_be_audited_is_not_created() {
    let server = Server::start();
    let client = server.connect(&server.support_key).await;
    let db = skillgate_core::store::testing::raw_pool(&server.database_url()).await;
    let sessions = || async {
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM governance_sessions")
            .fetch_one(&db)
            .await
            .unwrap()
    };
    let before = sessions().await;
    skillgate_core::store::testing::add_refusing_trigger(
        &db,
        "no_session_events",
        "INSERT",
        "audit_events",
        Some("NEW.kind = 'session_started'"),
        skillgate_core::store::testing::Refusal::Abort("audit unavailable"),
    )
    .await;
    let failed = client
        .call_tool(CallToolRequestParams::new("init_skilder"))
        .await;
    assert!(failed.is_err(), "init fails as a whole: {failed:?}");
    assert_eq!(
        sessions().await,
        before,
        "no session exists without its event"
    );
}

#[tokio::test]
async fn a_curator_may_read_tier_one_skills_but_its_scope_forbids_refunds() {
    let server = Server::start();
    let curator_key = server.create_key("curator", "curation");
    let client = server.connect(&curator_key).await;
    let (session, _) = init(&client).await;
    assert_allowed(&learn(&client, &session, "/roles/tier-1-support").await);
    assert_allowed(
        &call(
            &client,
            &session,
            "check_refund_eligibility",
            eligibility("O-5005"),
        )
        .await,
    );
    let refund = call(
        &client,
        &session,
        "process_refund",
        refund("O-5005", json!(10)),
    )
    .await;
    assert_denied(&refund, "GOVERNANCE_VIOLATION");
    assert!(
        refund.text.contains("guardrail of scope curation"),
        "{}",
        refund.text
    );
    assert!(
        refund.text.contains("may not be called at all"),
        "{}",
        refund.text
    );
    assert!(server.executed("process_refund").is_empty());
}
