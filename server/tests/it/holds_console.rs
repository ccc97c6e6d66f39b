//! The reviewers' console for approval holds, through the real binary: an agent's held
//! refund shows in the queue and on its page, a reviewer decides it with a form post as a
//! browser without JavaScript makes it (or a background fetch as the hydrated page does),
//! and the agent's resume runs exactly what was approved, once.

use crate::common;

use common::console::{
    Browser, REVIEWER_PASSWORD, VIEWER_PASSWORD, add_user, background_fetch, encode, fetch_post,
    http, navigation, page, sign_in,
};
use common::{Client, Server, call, init, learn, platform};
use reqwest::StatusCode;
use reqwest::header::LOCATION;
use serde_json::{Value, json};

/// A decision posted as a plain form (no JavaScript) from the hold's page.
async fn decide_by_form(
    server: &Server,
    browser: &Browser,
    decision: &str,
    hold: &str,
    reason: &str,
) -> reqwest::Response {
    http()
        .post(format!("{}/console/api/{decision}_hold", server.base))
        .headers(navigation(
            server,
            &browser.cookie,
            &format!("/holds/{hold}"),
        ))
        .body(encode(&[
            ("csrf_token", &browser.token),
            ("id", hold),
            ("reason", reason),
        ]))
        .send()
        .await
        .unwrap()
}

/// A decision posted as the hydrated page's background fetch: the status and JSON answer.
async fn decide_by_fetch(
    server: &Server,
    browser: &Browser,
    decision: &str,
    hold: &str,
    reason: &str,
) -> (StatusCode, String) {
    fetch_post(
        server,
        browser,
        &format!("/console/api/{decision}_hold"),
        &[("id", hold), ("reason", reason)],
    )
    .await
}

fn refund(amount: u32) -> Value {
    json!({"customer_id": "C-1003", "order_id": "O-5005", "amount": amount,
           "reason": "Premium support not delivered"})
}

/// An agent learns tier-1 support, checks the order and asks for a refund of 300: held.
/// Returns the session and the hold id.
async fn held_refund(client: &Client) -> (String, String) {
    let (session, _) = init(client).await;
    let learned = learn(client, &session, "/roles/tier-1-support").await;
    assert!(!learned.is_error, "{}", learned.text);
    let checked = call(
        client,
        &session,
        "check_refund_eligibility",
        json!({"customer_id": "C-1003", "order_id": "O-5005"}),
    )
    .await;
    assert!(!checked.is_error, "{}", checked.text);
    let held = call(client, &session, "process_refund", refund(300)).await;
    assert!(
        held.is_error,
        "nothing ran, so a hold is an error: {}",
        held.text
    );
    assert!(held.text.starts_with("APPROVAL REQUIRED"), "{}", held.text);
    assert_eq!(held.structured["decision"], "pending_approval");
    let hold = held.structured["hold_id"].as_str().unwrap().to_owned();
    (session, hold)
}

async fn resume(client: &Client, session: &str, hold: &str) -> common::Reply {
    platform(
        client,
        "call_tool",
        json!({"hold_id": hold, "session_id": session}),
    )
    .await
}

async fn poll(client: &Client, session: &str, hold: &str) -> common::Reply {
    platform(
        client,
        "call_tool",
        json!({"hold_id": hold, "session_id": session, "poll": true}),
    )
    .await
}

#[tokio::test]
async fn a_reviewer_approves_a_held_refund_in_the_console_and_it_runs_exactly_once() {
    let server = Server::start();
    let key = server.create_key("holds-agent", "support");
    add_user(&server, "rita", "reviewer", REVIEWER_PASSWORD);
    let agent = server.connect(&key).await;
    let (session, hold) = held_refund(&agent).await;
    assert!(server.executed("process_refund").is_empty(), "nothing ran");

    let rita = sign_in(&server, "rita", REVIEWER_PASSWORD).await;
    let (status, queue) = page(&server, &rita.cookie, "/holds").await;
    assert_eq!(status, StatusCode::OK);
    for shown in [
        format!(r#"href="/holds/{hold}""#),
        format!(r#"href="/sessions/{session}""#),
        "holds-agent".to_owned(),
        "tier-1-support".to_owned(),
        "process_refund".to_owned(),
        "greater than 200".to_owned(),
        "hold-pending".to_owned(),
    ] {
        assert!(queue.contains(&shown), "the queue shows {shown}: {queue}");
    }
    let (_, dashboard) = page(&server, &rita.cookie, "/").await;
    assert!(
        dashboard.contains("Holds waiting for a reviewer"),
        "{dashboard}"
    );

    let (status, detail) = page(&server, &rita.cookie, &format!("/holds/{hold}")).await;
    assert_eq!(status, StatusCode::OK);
    for shown in [
        "<code>300</code>",
        "Premium support not delivered",
        "<code>&quot;O-5005&quot;</code>",
        "Catalog revision",
        r#"id="approve-reason""#,
        r#"id="deny-reason""#,
    ] {
        assert!(
            detail.contains(shown) || detail.contains(&shown.replace("&quot;", "\"")),
            "the hold page shows {shown}: {detail}"
        );
    }

    // No JavaScript: the form post comes back to the hold's page, which shows the outcome
    // once and the new state.
    let posted = decide_by_form(&server, &rita, "approve", &hold, "Verified the customer").await;
    assert_eq!(posted.status(), StatusCode::FOUND);
    let back = posted.headers()[LOCATION].to_str().unwrap();
    assert!(
        back.starts_with(&format!("{}/holds/{hold}", server.base)),
        "back to the hold's page: {back}"
    );
    let (_, after) = page(&server, &rita.cookie, &format!("/holds/{hold}")).await;
    assert!(after.contains("Approved: the agent may run"), "{after}");
    assert!(after.contains("hold-approved"), "{after}");
    assert!(after.contains("Approved by rita"), "{after}");
    assert!(
        !after.contains(r#"id="approve-reason""#),
        "no form once decided"
    );
    let (_, again) = page(&server, &rita.cookie, &format!("/holds/{hold}")).await;
    assert!(
        !again.contains("Approved: the agent may run"),
        "the outcome is shown once"
    );

    let ran = resume(&agent, &session, &hold).await;
    assert!(!ran.is_error, "the approved refund runs: {}", ran.text);
    assert_eq!(server.executed("process_refund").len(), 1);
    let twice = resume(&agent, &session, &hold).await;
    assert!(twice.is_error);
    assert_eq!(twice.code(), "HOLD_USED", "{}", twice.text);
    assert_eq!(server.executed("process_refund").len(), 1, "it ran once");

    let (_, executed) = page(&server, &rita.cookie, &format!("/holds/{hold}")).await;
    assert!(executed.contains("hold-executed"), "{executed}");
    assert!(executed.contains("cannot run again"), "{executed}");
    let (_, timeline) = page(&server, &rita.cookie, &format!("/sessions/{session}")).await;
    for shown in [
        "Held for approval: process_refund",
        "Approved by rita: Verified the customer",
        "Approved call process_refund runs",
    ] {
        assert!(timeline.contains(shown), "the timeline shows {shown}");
    }
}

#[tokio::test]
async fn a_viewer_reads_a_hold_but_cannot_decide_it() {
    let server = Server::start();
    add_user(&server, "vic", "viewer", VIEWER_PASSWORD);
    let agent = server.connect(&server.support_key).await;
    let (session, hold) = held_refund(&agent).await;

    let vic = sign_in(&server, "vic", VIEWER_PASSWORD).await;
    let (status, detail) = page(&server, &vic.cookie, &format!("/holds/{hold}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(detail.contains("Deciding needs the reviewer console role"));
    assert!(!detail.contains(r#"id="approve-reason""#), "{detail}");

    let (status, body) = decide_by_fetch(&server, &vic, "approve", &hold, "Looks fine").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let still = poll(&agent, &session, &hold).await;
    assert_eq!(
        still.structured["hold"]["state"], "pending",
        "{}",
        still.text
    );
}

#[tokio::test]
async fn a_decision_without_a_reason_is_refused_and_changes_nothing() {
    let server = Server::start();
    add_user(&server, "rita", "reviewer", REVIEWER_PASSWORD);
    let agent = server.connect(&server.support_key).await;
    let (session, hold) = held_refund(&agent).await;
    let rita = sign_in(&server, "rita", REVIEWER_PASSWORD).await;

    let (status, body) = decide_by_fetch(&server, &rita, "approve", &hold, "   ").await;
    assert_ne!(status, StatusCode::OK);
    assert!(body.contains("give a reason"), "{body}");
    let still = poll(&agent, &session, &hold).await;
    assert_eq!(
        still.structured["hold"]["state"], "pending",
        "{}",
        still.text
    );
}

#[tokio::test]
async fn a_reviewer_cannot_decide_a_hold_raised_through_a_key_they_created() {
    let server = Server::start();
    let admin = sign_in(
        &server,
        "admin",
        server
            .admin_password
            .as_deref()
            .expect("the first start prints it"),
    )
    .await;
    let created = http()
        .post(format!("{}/console/api/create_key", server.base))
        .headers(background_fetch(&server, &admin.cookie))
        .body(encode(&[("name", "admins-agent"), ("scope", "support")]))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::OK);
    let created: Value = created.json().await.unwrap();
    let key = created["key"].as_str().expect("the new key").to_owned();
    let agent = server.connect(&key).await;
    let (session, hold) = held_refund(&agent).await;

    let (status, body) = decide_by_fetch(&server, &admin, "approve", &hold, "Mine, fine").await;
    assert_ne!(status, StatusCode::OK);
    assert!(body.contains("another reviewer must decide it"), "{body}");

    // Without JavaScript the refusal is shown on the hold's page, as a form error.
    let posted = decide_by_form(&server, &admin, "deny", &hold, "Mine, no").await;
    assert_eq!(posted.status(), StatusCode::FOUND);
    let (_, detail) = page(&server, &admin.cookie, &format!("/holds/{hold}")).await;
    let alert = detail
        .find(r#"role="alert""#)
        .map(|at| &detail[at..])
        .unwrap_or_else(|| panic!("the page shows an alert: {detail}"));
    assert!(
        alert.contains("another reviewer must decide it"),
        "{detail}"
    );
    assert!(detail.contains("created by admin"), "{detail}");
    let still = poll(&agent, &session, &hold).await;
    assert_eq!(
        still.structured["hold"]["state"], "pending",
        "{}",
        still.text
    );
}

#[tokio::test]
async fn a_denied_hold_does_not_run_and_its_timeline_says_who_denied_it_and_why() {
    let server = Server::start();
    add_user(&server, "rita", "reviewer", REVIEWER_PASSWORD);
    let agent = server.connect(&server.support_key).await;
    let (session, hold) = held_refund(&agent).await;
    let rita = sign_in(&server, "rita", REVIEWER_PASSWORD).await;

    let (status, body) = decide_by_fetch(&server, &rita, "deny", &hold, "Duplicate request").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("Denied"), "{body}");
    let answer = resume(&agent, &session, &hold).await;
    assert!(answer.is_error);
    assert_eq!(answer.code(), "APPROVAL_DENIED", "{}", answer.text);
    assert!(server.executed("process_refund").is_empty());

    let (_, queue) = page(&server, &rita.cookie, "/holds").await;
    assert!(
        !queue.contains(&hold),
        "a denied hold leaves the pending queue"
    );
    let (_, denied) = page(&server, &rita.cookie, "/holds?state=denied").await;
    assert!(denied.contains(&hold), "{denied}");
    let (_, timeline) = page(&server, &rita.cookie, &format!("/sessions/{session}")).await;
    assert!(
        timeline.contains("Denied by rita: Duplicate request"),
        "{timeline}"
    );
    let (status, _) = page(&server, &rita.cookie, "/holds?state=nonsense").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a bad filter is a message, not a crash"
    );
}

#[tokio::test]
async fn a_sensitive_argument_of_a_held_call_reaches_the_console_only_as_its_digest() {
    let server = Server::start();
    let admin = sign_in(
        &server,
        "admin",
        server
            .admin_password
            .as_deref()
            .expect("the first start prints it"),
    )
    .await;
    let marked = http()
        .post(format!("{}/console/api/set_sensitive", server.base))
        .headers(background_fetch(&server, &admin.cookie))
        .body("tool=process_refund&args%5Breason%5D=on")
        .send()
        .await
        .unwrap();
    assert_eq!(
        marked.status(),
        StatusCode::OK,
        "{}",
        marked.text().await.unwrap()
    );
    let agent = server.connect(&server.support_key).await;
    let (_, hold) = held_refund(&agent).await;

    let (_, detail) = page(&server, &admin.cookie, &format!("/holds/{hold}")).await;
    assert!(
        !detail.contains("Premium support not delivered"),
        "the clear reason is nowhere in the page or its data: {detail}"
    );
    assert!(detail.contains("sha256:"), "{detail}");
    assert!(detail.contains("sensitive: digest only"), "{detail}");
    assert!(detail.contains("<code>300</code>"), "{detail}");
    let json = http()
        .post(format!("{}/console/api/get_hold", server.base))
        .headers(background_fetch(&server, &admin.cookie))
        .body(encode(&[("id", &hold)]))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(json.contains("sha256:"), "{json}");
    assert!(!json.contains("Premium support not delivered"), "{json}");
}
