//! What the governed-call pipeline promises whichever way a call enters it: a resumed hold's
//! refusal at any stage is recorded once, by that stage, naming the hold; and an allowed
//! call's reservation and its `call_allowed` event are one commit. No upstream is connected:
//! a call that runs ends in an upstream error, after its `call_allowed`.

use futures::TryStreamExt;
use serde_json::Value;
use skillgate_core::audit::{AuditEvent, EventKind};
use skillgate_core::store::testing;

use crate::desk::{
    Fixture, agent, approved_hold, desk_role, desk_session, fixture, refund, reply, slug,
};

async fn resume(f: &Fixture, sid: &str, hold: &str) -> (String, Value) {
    reply(
        f.gateway
            .resume(&agent(), Some(sid.to_owned()), hold, None, None, false)
            .await
            .unwrap(),
    )
}

async fn events(f: &Fixture) -> Vec<AuditEvent> {
    f.audit.events(None).try_collect().await.unwrap()
}

/// The `call_denied` events naming `hold` after the first `skip` events.
fn denials_of(events: &[AuditEvent], skip: usize, hold: &str) -> Vec<AuditEvent> {
    events[skip..]
        .iter()
        .filter(|e| e.kind == EventKind::CallDenied && e.payload["hold_id"] == hold)
        .cloned()
        .collect()
}

/// Asserts that the events after `before` hold exactly one `call_denied`, that it names
/// `hold`, lies in `sid` and carries `code`, and that nothing was allowed meanwhile.
async fn one_denial_naming(f: &Fixture, before: usize, hold: &str, sid: &str, code: &str) {
    let events = events(f).await;
    let denied: Vec<_> = events[before..]
        .iter()
        .filter(|e| e.kind == EventKind::CallDenied)
        .collect();
    assert_eq!(denied.len(), 1, "{denied:#?}");
    assert_eq!(denials_of(&events, before, hold).len(), 1, "{denied:#?}");
    assert_eq!(denied[0].session_id.as_deref(), Some(sid));
    assert_eq!(denied[0].payload["code"], code, "{:#?}", denied[0]);
    assert_eq!(denied[0].payload["tool"], "process_refund");
    assert!(
        !events[before..]
            .iter()
            .any(|e| e.kind == EventKind::CallAllowed),
        "a refused resume allows nothing"
    );
}

#[tokio::test]
async fn a_resume_of_a_used_hold_is_refused_once_in_the_audit_naming_the_hold() {
    let f = fixture().await;
    let sid = desk_session(&f).await;
    let hold = approved_hold(&f, &sid, 300).await;
    let (ran, _) = resume(&f, &sid, &hold).await;
    assert!(ran.starts_with("UPSTREAM ERROR"), "it ran: {ran}");
    let before = events(&f).await.len();
    let (text, structured) = resume(&f, &sid, &hold).await;
    assert_eq!(structured["code"], "HOLD_USED", "{text}");
    one_denial_naming(&f, before, &hold, &sid, "HOLD_USED").await;
}

#[tokio::test]
async fn a_resume_the_policy_now_refuses_is_refused_once_in_the_audit_naming_the_hold() {
    let f = fixture().await;
    let sid = desk_session(&f).await;
    let hold = approved_hold(&f, &sid, 300).await;
    // The per-refund bound drops to 250 after the approval.
    let stored = f.admin.role(&slug("refund-desk")).await.unwrap().unwrap();
    f.admin
        .update_role("alice", &desk_role(250), stored.revision)
        .await
        .unwrap();
    f.catalog.replace(f.store.compiled_catalog().await.unwrap());
    let before = events(&f).await.len();
    let (text, structured) = resume(&f, &sid, &hold).await;
    assert_eq!(structured["code"], "GOVERNANCE_VIOLATION", "{text}");
    one_denial_naming(&f, before, &hold, &sid, "GOVERNANCE_VIOLATION").await;
    let moved = f.store.hold(&hold).await.unwrap().unwrap();
    assert_eq!(moved.state.as_str(), "refused");
}

#[tokio::test]
async fn a_resume_in_a_session_too_busy_to_save_is_refused_once_in_the_audit_naming_the_hold() {
    let f = fixture().await;
    let sid = desk_session(&f).await;
    let hold = approved_hold(&f, &sid, 300).await;
    // Every save of the session loses its revision check, as under a racing process.
    testing::add_refusing_trigger(
        f.store.test_pool(),
        "sessions_always_stale",
        "UPDATE",
        "governance_sessions",
        None,
        testing::Refusal::Skip,
    )
    .await;
    let before = events(&f).await.len();
    let (text, structured) = resume(&f, &sid, &hold).await;
    assert_eq!(structured["code"], "ACCESS_DENIED", "{text}");
    assert!(text.contains("too busy"), "{text}");
    one_denial_naming(&f, before, &hold, &sid, "ACCESS_DENIED").await;
    let kept = f.store.hold(&hold).await.unwrap().unwrap();
    assert_eq!(kept.state.as_str(), "approved", "it may still run later");
}

#[tokio::test]
async fn a_resume_whose_held_arguments_are_unreadable_is_refused_once_in_the_audit_naming_the_hold()
{
    let f = fixture().await;
    let sid = desk_session(&f).await;
    let hold = approved_hold(&f, &sid, 300).await;
    sqlx::query("UPDATE holds SET arguments = '\"not an object\"' WHERE id = $1")
        .bind(&hold)
        .execute(f.store.test_pool())
        .await
        .unwrap();
    let before = events(&f).await.len();
    let (text, structured) = resume(&f, &sid, &hold).await;
    assert_eq!(structured["code"], "INTERNAL_ERROR", "{text}");
    one_denial_naming(&f, before, &hold, &sid, "INTERNAL_ERROR").await;
}

#[tokio::test]
async fn an_allowed_calls_reservation_is_committed_with_its_call_allowed_or_not_at_all() {
    let f = fixture().await;
    let sid = desk_session(&f).await;
    let session = f.store.load_session(&sid).await.unwrap().unwrap();
    // The audit refuses `call_allowed`, as a full disk would, and nothing else.
    testing::add_refusing_trigger(
        f.store.test_pool(),
        "no_call_allowed",
        "INSERT",
        "audit_events",
        Some("NEW.kind = 'call_allowed'"),
        testing::Refusal::Abort("audit unavailable"),
    )
    .await;
    let failed = f
        .gateway
        .call(&agent(), Some(sid.clone()), "process_refund", refund(150))
        .await;
    assert!(failed.is_err(), "{failed:?}");
    let after = f.store.load_session(&sid).await.unwrap().unwrap();
    assert_eq!(
        after.revision, session.revision,
        "no reservation is stored without its call_allowed"
    );
    assert_eq!(after.view.usage, session.view.usage);
}
