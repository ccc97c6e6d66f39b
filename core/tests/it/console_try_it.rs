//! A console user acting as a scope (the Connect page's try-it panel) through the real
//! gateway on the demo catalog: their sessions are theirs alone, apart from every agent
//! key's, and every event names them.

use std::sync::Arc;

use futures::TryStreamExt;
use serde_json::{Value, json};
use skillgate_core::audit::{AuditEvent, AuditLog, EventKind};
use skillgate_core::gateway::{AgentIdentity, Gateway, GatewayOptions, ToolReply, console_actor};
use skillgate_core::policy::CatalogHandle;
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;
use skillgate_core::upstream::UpstreamPool;

struct Fixture {
    gateway: Gateway,
    audit: AuditLog,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&skillgate_core::store::testing::database_url(
        dir.path(),
        "t.db",
    ))
    .await
    .unwrap();
    store.seed_demo("/nonexistent/skillgate").await.unwrap();
    let catalog = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
    let audit = AuditLog::new(store.clone());
    let gateway = Gateway::new(
        store,
        catalog,
        audit.clone(),
        Arc::new(UpstreamPool::default()),
        GatewayOptions::default(),
    );
    Fixture {
        gateway,
        audit,
        _dir: dir,
    }
}

fn support() -> Slug {
    Slug::parse("support").unwrap()
}

fn console(user_id: i64, name: &str) -> AgentIdentity {
    AgentIdentity::console_user(user_id, name, support()).expect("a stored user's id")
}

/// The agent key with the same number as console user 1: the two must never meet.
fn key_one() -> AgentIdentity {
    AgentIdentity {
        key_id: 1,
        key_name: "key-1".to_owned(),
        scope: support(),
        connection: None,
    }
}

fn parts(reply: ToolReply) -> (String, Value, bool) {
    match reply {
        ToolReply::Gateway {
            text,
            structured,
            is_error,
        } => (text, structured, is_error),
        ToolReply::Downstream { result, .. } => panic!("nothing runs downstream here: {result:?}"),
    }
}

async fn start(f: &Fixture, who: &AgentIdentity) -> String {
    let (text, structured, is_error) = parts(f.gateway.init(who, None).await.unwrap());
    assert!(!is_error, "{text}");
    structured["session_id"].as_str().unwrap().to_owned()
}

async fn learn(f: &Fixture, who: &AgentIdentity, sid: &str) -> (String, Value, bool) {
    parts(
        f.gateway
            .learn(who, Some(sid.to_owned()), "/roles/tier-1-support")
            .await
            .unwrap(),
    )
}

async fn events(f: &Fixture) -> Vec<AuditEvent> {
    f.audit.events(None).try_collect().await.unwrap()
}

#[test]
fn a_console_identity_is_made_only_for_a_stored_users_id_and_names_the_user() {
    assert!(AgentIdentity::console_user(0, "alice", support()).is_none());
    assert!(AgentIdentity::console_user(-3, "alice", support()).is_none());
    let alice = console(7, "alice");
    assert_eq!(alice.key_name, "console:alice");
    assert!(alice.is_console_user());
    assert!(alice.key_id < 0);
    assert!(!key_one().is_console_user());
}

#[tokio::test]
async fn a_console_user_acts_as_the_scope_and_every_event_names_them() {
    let f = fixture().await;
    let alice = console(1, "alice");
    let sid = start(&f, &alice).await;
    let (text, _, is_error) = learn(&f, &alice, &sid).await;
    assert!(!is_error, "{text}");
    // Limits apply exactly as to an agent: a refund over the per-call bound is a violation.
    let (text, structured, is_error) = parts(
        f.gateway
            .call(
                &alice,
                Some(sid.clone()),
                "process_refund",
                json!({"customer_id": "C-1003", "order_id": "O-5005", "amount": 1200,
                       "reason": "test"}),
            )
            .await
            .unwrap(),
    );
    assert!(is_error);
    assert_eq!(structured["code"], "GOVERNANCE_VIOLATION", "{text}");
    let events = events(&f).await;
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::SessionStarted,
            EventKind::LearnGranted,
            EventKind::CallDenied
        ]
    );
    for event in &events {
        assert_eq!(event.actor.as_deref(), Some("console:alice"), "{event:?}");
        assert_eq!(event.session_id.as_deref(), Some(sid.as_str()));
    }
}

#[tokio::test]
async fn no_agent_key_and_no_other_console_user_can_use_a_console_users_session() {
    let f = fixture().await;
    let alice = console(1, "alice");
    let bob = console(2, "bob");
    let sid = start(&f, &alice).await;
    for intruder in [key_one(), bob] {
        let (text, structured, is_error) = learn(&f, &intruder, &sid).await;
        assert!(is_error, "{text}");
        assert_eq!(structured["code"], "ACCESS_DENIED", "{text}");
    }
    // Nor can the console user take over an agent key's session.
    let agents = start(&f, &key_one()).await;
    let (text, structured, _) = learn(&f, &alice, &agents).await;
    assert_eq!(structured["code"], "ACCESS_DENIED", "{text}");
    // The refusals stay with whoever asked: no event lands in the sessions they named.
    let events = events(&f).await;
    let in_alices: Vec<&AuditEvent> = events
        .iter()
        .filter(|e| e.session_id.as_deref() == Some(sid.as_str()))
        .collect();
    assert_eq!(in_alices.len(), 1, "only its start: {in_alices:?}");
    let denied: Vec<Option<&str>> = events
        .iter()
        .filter(|e| e.kind == EventKind::LearnDenied)
        .map(|e| e.actor.as_deref())
        .collect();
    assert_eq!(
        denied,
        [Some("key-1"), Some("console:bob"), Some("console:alice")]
    );
    assert_eq!(console_actor("bob"), "console:bob");
}

#[tokio::test]
async fn a_session_cannot_learn_under_another_scope_than_it_started_in() {
    let f = fixture().await;
    let in_support = console(1, "alice");
    let sid = start(&f, &in_support).await;
    // The same user naming the session while claiming the curation scope, whose roles
    // the support scope does not have.
    let in_curation =
        AgentIdentity::console_user(1, "alice", Slug::parse("curation").unwrap()).unwrap();
    let (text, structured, is_error) = parts(
        f.gateway
            .learn(&in_curation, Some(sid.clone()), "/roles/skill-curator")
            .await
            .unwrap(),
    );
    assert!(is_error, "{text}");
    assert_eq!(structured["code"], "ACCESS_DENIED", "{text}");
    let kinds: Vec<EventKind> = events(&f).await.iter().map(|e| e.kind).collect();
    assert!(!kinds.contains(&EventKind::LearnGranted), "{kinds:?}");
}
