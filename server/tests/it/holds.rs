//! Approval holds through the real binary: a tier-1 refund above 200 waits for a reviewer,
//! runs exactly once when approved, never with other arguments, after expiry or after the
//! policy tightened, and a denial gives its reserved usage back.
//!
//! The reviewer here is the core `Holds` service on the server's own database file, as the
//! console's server functions call it (the console flow itself is in the browser suite).

use crate::common;

use std::sync::Arc;

use chrono::Utc;
use common::{Reply, Server, call, init, may_refund_o5005, platform};
use serde_json::{Value, json};
use skillgate_core::admin::AdminService;
use skillgate_core::audit::AuditLog;
use skillgate_core::holds::{Decider, HoldError, Holds};
use skillgate_core::model::{ArgCheck, Limit};
use skillgate_core::policy::CatalogHandle;
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;

pub(crate) fn refund(amount: u32) -> Value {
    json!({"customer_id": "C-1003", "order_id": "O-5005", "amount": amount,
           "reason": "Premium support not delivered"})
}

pub(crate) fn assert_ran(reply: &Reply) {
    assert!(!reply.is_error, "expected the call to run: {}", reply.text);
    assert_ne!(
        reply.structured["decision"], "pending_approval",
        "{}",
        reply.text
    );
}

struct Reviewer {
    holds: Holds,
    service: AdminService,
    store: Store,
}

/// The reviewers' service (and the authoring service) on the server's database.
async fn reviewer(server: &Server) -> Reviewer {
    let store = Store::open(&server.database_url()).await.unwrap();
    let catalog = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
    let audit = AuditLog::new(store.clone());
    Reviewer {
        holds: Holds::new(store.clone(), audit.clone(), catalog.clone()),
        service: AdminService::new(store.clone(), audit, catalog),
        store,
    }
}

pub(crate) async fn tier_one(server: &Server, key: &str) -> (common::Client, String) {
    let client = server.connect(key).await;
    let (session, _) = init(&client).await;
    may_refund_o5005(&client, &session).await;
    (client, session)
}

/// Asks for a refund that needs approval; returns its hold id.
pub(crate) async fn held(client: &common::Client, session: &str, amount: u32) -> String {
    let reply = call(client, session, "process_refund", refund(amount)).await;
    assert!(
        reply.is_error,
        "nothing ran, so a hold answers isError: {}",
        reply.text
    );
    assert_eq!(reply.code(), "APPROVAL_PENDING", "{}", reply.text);
    assert_eq!(
        reply.structured["decision"], "pending_approval",
        "{}",
        reply.text
    );
    assert!(
        reply.text.starts_with("APPROVAL REQUIRED"),
        "{}",
        reply.text
    );
    reply.structured["hold_id"].as_str().unwrap().to_owned()
}

pub(crate) async fn resume(
    client: &common::Client,
    session: &str,
    hold: &str,
    extra: Value,
) -> Reply {
    let mut arguments = json!({"hold_id": hold, "session_id": session});
    if let (Value::Object(into), Value::Object(more)) = (&mut arguments, extra) {
        into.extend(more);
    }
    platform(client, "call_tool", arguments).await
}

#[tokio::test]
async fn a_refund_over_200_is_held_runs_nothing_reserves_its_amount_and_is_audited() {
    let server = Server::start();
    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;
    assert!(server.executed("process_refund").is_empty());
    let events = server.audit_events();
    let raised = events.last().unwrap();
    assert_eq!(raised["kind"], "call_held", "{raised}");
    assert_eq!(raised["payload"]["hold_id"], hold.as_str());
    assert_eq!(raised["session_id"], session.as_str());

    let polled = resume(&client, &session, &hold, json!({"poll": true})).await;
    assert_eq!(
        polled.structured["hold"]["state"], "pending",
        "{}",
        polled.text
    );
    assert!(polled.is_error, "still nothing ran: {}", polled.text);
    assert_eq!(polled.code(), "APPROVAL_PENDING", "{}", polled.text);
    assert_eq!(polled.structured["hold_id"], hold.as_str());
    assert_eq!(polled.structured["remedy"]["type"], "wait_for_approval");
    assert_eq!(polled.structured["remedy"]["hold_id"], hold.as_str());
    // What the reviewer is asked to approve, as the audit recorded it.
    let sees = &polled.structured["hold"]["approver_sees"];
    assert_eq!(sees["tool"], "process_refund", "{sees}");
    assert_eq!(sees["rule"], raised["payload"]["rule"], "{sees}");
    assert_eq!(sees["role"], raised["payload"]["role"], "{sees}");
    assert_eq!(sees["session_id"], session.as_str(), "{sees}");
    let digest = sees["arguments_digest"].as_str().unwrap_or_default();
    assert!(
        digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
        "{sees}"
    );
    assert!(server.executed("process_refund").is_empty());

    // The 300 waits reserved: 200 + 200 + 200 fit beside it, the next 200 does not.
    for _ in 0..3 {
        assert_ran(&call(&client, &session, "process_refund", refund(200)).await);
    }
    let over = call(&client, &session, "process_refund", refund(200)).await;
    assert_eq!(over.code(), "GOVERNANCE_VIOLATION", "{}", over.text);
    assert!(over.text.contains("900 already used"), "{}", over.text);
}

#[tokio::test]
async fn an_approved_hold_runs_exactly_once_and_a_second_resume_runs_nothing() {
    let server = Server::start();
    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;
    let reviewer = reviewer(&server).await;
    reviewer
        .holds
        .approve(
            &Decider::console("rita"),
            &hold,
            "Confirmed with the customer",
            Utc::now(),
        )
        .await
        .unwrap();

    let polled = resume(&client, &session, &hold, json!({"poll": true})).await;
    assert_eq!(polled.structured["decision"], "approved", "{}", polled.text);
    assert!(polled.is_error, "approved, still not run: {}", polled.text);
    assert_eq!(polled.code(), "APPROVED", "{}", polled.text);
    assert!(
        server.executed("process_refund").is_empty(),
        "poll runs nothing"
    );

    // The answer says how to run it: that exact call runs it.
    let how = &polled.structured["hold"]["resume"];
    assert_eq!(how["tool"], "call_tool", "{how}");
    assert_ran(&platform(&client, "call_tool", how["arguments"].clone()).await);
    let again = resume(&client, &session, &hold, json!({})).await;
    assert!(again.is_error);
    assert_eq!(again.code(), "HOLD_USED", "{}", again.text);
    let executed = server.executed("process_refund");
    assert_eq!(executed.len(), 1, "{executed:?}");
    assert_eq!(executed[0]["arguments"]["amount"], 300);

    let events = server.audit_events();
    let kinds: Vec<&str> = events
        .iter()
        .filter(|e| e["payload"]["hold_id"] == hold.as_str())
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    // The replay is refused and audited as such, naming the hold.
    assert_eq!(
        kinds,
        ["call_held", "hold_approved", "call_allowed", "call_denied"]
    );
    let approved = events
        .iter()
        .find(|e| e["kind"] == "hold_approved")
        .unwrap();
    assert_eq!(approved["actor"], "rita");
    assert_eq!(approved["payload"]["reason"], "Confirmed with the customer");
}

#[tokio::test]
async fn making_the_same_call_again_runs_the_approved_hold() {
    let server = Server::start();
    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;
    let again = call(&client, &session, "process_refund", refund(300)).await;
    assert_eq!(
        again.structured["hold_id"],
        hold.as_str(),
        "the pending hold, not a new one"
    );
    reviewer(&server)
        .await
        .holds
        .approve(&Decider::console("rita"), &hold, "ok", Utc::now())
        .await
        .unwrap();
    assert_ran(&call(&client, &session, "process_refund", refund(300)).await);
    assert_eq!(server.executed("process_refund").len(), 1);
}

#[tokio::test]
async fn other_arguments_another_key_or_a_foreign_session_cannot_use_an_approval() {
    let server = Server::start();
    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;
    reviewer(&server)
        .await
        .holds
        .approve(&Decider::console("rita"), &hold, "ok", Utc::now())
        .await
        .unwrap();

    let other_amount = resume(
        &client,
        &session,
        &hold,
        json!({"tool": "process_refund", "arguments": refund(301)}),
    )
    .await;
    assert_eq!(
        other_amount.code(),
        "ACCESS_DENIED",
        "{}",
        other_amount.text
    );
    assert!(
        other_amount.text.contains("other arguments"),
        "{}",
        other_amount.text
    );
    let other_tool = resume(&client, &session, &hold, json!({"tool": "lookup_customer"})).await;
    assert_eq!(other_tool.code(), "ACCESS_DENIED", "{}", other_tool.text);

    let intruder_key = server.create_key("intruder", "support");
    let (intruder, their_session) = tier_one(&server, &intruder_key).await;
    let stolen = resume(&intruder, &their_session, &hold, json!({})).await;
    assert_eq!(stolen.code(), "ACCESS_DENIED", "{}", stolen.text);
    assert!(server.executed("process_refund").is_empty());
    // The approval still stands for the call it was given for.
    assert_ran(&resume(&client, &session, &hold, json!({})).await);
}

#[tokio::test]
async fn a_denied_hold_runs_nothing_and_gives_its_reserved_amount_back() {
    let server = Server::start();
    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;
    reviewer(&server)
        .await
        .holds
        .deny(
            &Decider::console("rita"),
            &hold,
            "Not covered by the policy",
            Utc::now(),
        )
        .await
        .unwrap();
    let denied = resume(&client, &session, &hold, json!({})).await;
    assert_eq!(denied.code(), "APPROVAL_DENIED", "{}", denied.text);
    assert!(
        denied.text.contains("Not covered by the policy"),
        "{}",
        denied.text
    );
    // All 1000 of the session's refunds are available again: the 300 was released.
    for _ in 0..5 {
        assert_ran(&call(&client, &session, "process_refund", refund(200)).await);
    }
    assert_eq!(server.executed("process_refund").len(), 5);
}

#[tokio::test]
async fn an_approval_that_expired_runs_nothing_and_gives_its_amount_back() {
    let server = Server::start();
    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;
    let reviewer = reviewer(&server).await;
    reviewer
        .holds
        .approve(&Decider::console("rita"), &hold, "ok", Utc::now())
        .await
        .unwrap();
    // Fifteen minutes pass.
    sqlx::query("UPDATE holds SET expires_at = '2000-01-01T00:00:00.000000Z' WHERE id = $1")
        .bind(&hold)
        .execute(reviewer.store.test_pool())
        .await
        .unwrap();
    let late = resume(&client, &session, &hold, json!({})).await;
    assert_eq!(late.code(), "HOLD_EXPIRED", "{}", late.text);
    assert!(server.executed("process_refund").is_empty());
    for _ in 0..5 {
        assert_ran(&call(&client, &session, "process_refund", refund(200)).await);
    }
    assert!(
        server
            .audit_events()
            .iter()
            .any(|e| e["kind"] == "hold_expired" && e["payload"]["hold_id"] == hold.as_str())
    );
}

#[tokio::test]
async fn a_limit_tightened_after_the_approval_refuses_the_call_when_it_comes_back() {
    let first = Server::start();
    let (client, session) = tier_one(&first, &first.support_key).await;
    let hold = held(&client, &session, 300).await;
    let reviewer = reviewer(&first).await;
    reviewer
        .holds
        .approve(&Decider::console("rita"), &hold, "ok", Utc::now())
        .await
        .unwrap();
    // An admin lowers tier-1's per-refund bound from 500 to 250.
    let stored = reviewer
        .service
        .role(&Slug::parse("tier-1-support").unwrap())
        .await
        .unwrap()
        .unwrap();
    let mut role = stored.value.clone();
    for limit in &mut role.limits {
        if let Limit::ArgBound {
            check: ArgCheck::Compare { value, .. },
            ..
        } = limit
        {
            *value = 250.into();
        }
    }
    reviewer
        .service
        .update_role("alice", &role, stored.revision)
        .await
        .unwrap();
    // A process that compiled the new catalog takes the resume.
    let replica = first.replica();
    let on_replica = replica.connect(&first.support_key).await;
    let refused = resume(&on_replica, &session, &hold, json!({})).await;
    assert_eq!(refused.code(), "GOVERNANCE_VIOLATION", "{}", refused.text);
    assert!(refused.text.contains("250"), "{}", refused.text);
    let again = resume(&on_replica, &session, &hold, json!({})).await;
    assert_eq!(again.code(), "HOLD_REFUSED", "{}", again.text);
    assert!(first.executed("process_refund").is_empty());
}

#[tokio::test]
async fn a_reviewer_cannot_decide_a_hold_raised_by_their_own_agent_key() {
    let server = Server::start();
    let reviewer = reviewer(&server).await;
    let (_, key) = reviewer
        .service
        .create_key("rita", "ritas-bot", &Slug::parse("support").unwrap(), None)
        .await
        .unwrap();
    let (client, session) = tier_one(&server, key.expose()).await;
    let hold = held(&client, &session, 300).await;
    let own = reviewer
        .holds
        .approve(&Decider::console("rita"), &hold, "mine", Utc::now())
        .await;
    assert!(matches!(own, Err(HoldError::OwnHold(_))), "{own:?}");
    reviewer
        .holds
        .approve(&Decider::console("sam"), &hold, "checked", Utc::now())
        .await
        .unwrap();
    assert_ran(&resume(&client, &session, &hold, json!({})).await);
}

#[tokio::test]
async fn concurrent_resumes_through_two_processes_run_the_approved_call_once() {
    let first = Server::start();
    let second = first.replica();
    let (client, session) = tier_one(&first, &first.support_key).await;
    let other = second.connect(&first.support_key).await;
    let hold = held(&client, &session, 300).await;
    reviewer(&first)
        .await
        .holds
        .approve(&Decider::console("rita"), &hold, "ok", Utc::now())
        .await
        .unwrap();
    let replies = futures::future::join_all((0..6).map(|i| {
        let client = if i % 2 == 0 { &client } else { &other };
        let (session, hold) = (session.clone(), hold.clone());
        async move { resume(client, &session, &hold, json!({})).await }
    }))
    .await;
    let ran = replies.iter().filter(|r| !r.is_error).count();
    let used = replies.iter().filter(|r| r.code() == "HOLD_USED").count();
    assert_eq!((ran, used), (1, 5), "{replies:?}");
    assert_eq!(first.executed("process_refund").len(), 1);
}
