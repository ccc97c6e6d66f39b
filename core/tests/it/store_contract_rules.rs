//! The rules of the store's operations, run on the backend of the run (SQLite, or
//! PostgreSQL with `SKILLGATE_TEST_DATABASE=postgres`) and, for the hot statements that
//! have two lanes (the direct SQLite connections and the pool: see `store::lane`), on both
//! lanes of one database. On PostgreSQL both "lanes" are the pool.

use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use skillgate_core::audit::{AuditLog, EventKind, NewEvent};
use skillgate_core::model::{Role, Scope, Skill};
use skillgate_core::policy::SessionView;
use skillgate_core::slug::Slug;
use skillgate_core::store::keys::AgentKeyRow;
use skillgate_core::store::sessions::{NewSession, save_session_state_on};
use skillgate_core::store::{Store, StoreError, testing};

fn slug(text: &str) -> Slug {
    Slug::parse(text).unwrap()
}

/// A new database, and the directory a SQLite file lives in.
async fn store() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&testing::database_url(dir.path(), "rules.db"))
        .await
        .unwrap();
    (store, dir)
}

/// The same database through each lane of its hot statements.
fn lanes(store: &Store) -> [(&'static str, Store); 2] {
    [("direct", store.clone()), ("pool", store.on_pool_lane())]
}

async fn new_session(store: &Store, id: &str) -> SessionView {
    let view = SessionView::new(id, "1", slug("desk"), Utc::now() + Duration::hours(1));
    store
        .insert_session(&NewSession {
            view: &view,
            key_id: 1,
            key_name: "agent-1",
            connection: None,
            task_summary: None,
            created_at: Utc::now(),
        })
        .await
        .unwrap();
    view
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().to_utc()
}

async fn save(store: &Store, view: &SessionView, expected_revision: i64) -> bool {
    // The change owns what it reads: the store runs it for any lifetime of the connection.
    let view = view.clone();
    store
        .with_conn(move |tx| {
            Box::pin(async move { save_session_state_on(tx, &view, expected_revision).await })
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn a_session_save_from_a_stale_revision_is_refused_and_every_lane_reads_the_winner() {
    let (store, _dir) = store().await;
    let mut view = new_session(&store, "s-1").await;
    for (lane, reader) in lanes(&store) {
        let loaded = reader.load_session("s-1").await.unwrap().expect(lane);
        assert_eq!(loaded.key_name, "agent-1", "{lane}");
        assert_eq!(loaded.view.id, "s-1", "{lane}");
    }
    let start = store.load_session("s-1").await.unwrap().unwrap().revision;
    view.expires_at = at("2030-01-01T00:00:00Z");
    assert!(save(&store, &view, start).await, "the first save wins");
    let mut stale = view.clone();
    stale.expires_at = at("2031-01-01T00:00:00Z");
    assert!(
        !save(&store, &stale, start).await,
        "a save from the revision the first one moved past is refused"
    );
    for (lane, reader) in lanes(&store) {
        let now = reader.load_session("s-1").await.unwrap().expect(lane);
        assert_eq!(now.revision, start + 1, "{lane}: one save, one revision");
        assert_eq!(
            now.view.expires_at,
            at("2030-01-01T00:00:00Z"),
            "{lane}: the refused save changed nothing"
        );
        assert!(
            reader.load_session("s-none").await.unwrap().is_none(),
            "{lane}"
        );
    }
}

#[tokio::test]
async fn an_agent_key_is_found_by_its_hash_on_every_lane_and_its_revocation_is_seen() {
    let (store, _dir) = store().await;
    let scope = slug("desk");
    let row = AgentKeyRow {
        name: "agent-1",
        scope: &scope,
        key_hash: "hash-1",
        prefix: "sg_abc",
        created_at: Utc::now(),
        created_by: Some("admin"),
        expires_at: None,
    };
    let inserted = store.insert_agent_key(&row).await.unwrap();
    let same_name = AgentKeyRow {
        key_hash: "hash-2",
        ..row.clone()
    };
    assert!(
        matches!(
            store.insert_agent_key(&same_name).await,
            Err(StoreError::Conflict(_))
        ),
        "a key name is unique"
    );
    for (lane, reader) in lanes(&store) {
        let found = reader.find_agent_key_by_hash("hash-1").await.unwrap();
        assert_eq!(found.as_ref(), Some(&inserted), "{lane}");
        assert!(
            reader
                .find_agent_key_by_hash("hash-2")
                .await
                .unwrap()
                .is_none(),
            "{lane}"
        );
    }
    revoke(&store, "agent-1").await;
    for (lane, reader) in lanes(&store) {
        let found = reader
            .find_agent_key_by_hash("hash-1")
            .await
            .unwrap()
            .expect(lane);
        assert!(found.revoked_at.is_some(), "{lane}: the revocation is read");
    }
}

/// Revokes `name` through the pool, where the admin service writes.
async fn revoke(store: &Store, name: &str) {
    sqlx::query("UPDATE agent_keys SET revoked_at = $1 WHERE name = $2")
        .bind(skillgate_core::store::stamp(Utc::now()))
        .bind(name)
        .execute(store.test_pool())
        .await
        .unwrap();
}

#[tokio::test]
async fn appends_on_either_lane_make_one_chain_in_order_with_summaries_that_match_it() {
    let (store, _dir) = store().await;
    let [(_, direct), (_, pool)] = lanes(&store);
    let logs = [AuditLog::new(direct), AuditLog::new(pool)];
    let mut seqs = Vec::new();
    for i in 0..10u64 {
        let event = if i == 0 {
            NewEvent::session_started("s-1", "agent-1", "desk", Some("refund an order"))
        } else {
            NewEvent::new(EventKind::Feedback, json!({ "i": i }))
                .in_session("s-1")
                .by("agent-1")
        };
        seqs.push(logs[(i % 2) as usize].append(event).await.unwrap().seq);
    }
    assert_eq!(seqs, (1..=10).collect::<Vec<u64>>(), "in order, no gap");
    for log in &logs {
        let report = log.verify().await.unwrap();
        assert!(report.is_intact(), "{report:?}");
        assert_eq!(report.verified_tip.seq, 10);
    }
    let tip = store.audit_tip().await.unwrap();
    assert_eq!(tip.seq, 10);
    let summary = store.audit_session("s-1").await.unwrap().unwrap();
    assert_eq!(summary.events, 10, "each lane's appends are summarized");
    assert_eq!((summary.first_seq, summary.last_seq), (1, 10));
    assert_eq!(summary.scope.as_deref(), Some("desk"));
    assert_eq!(summary.task_summary.as_deref(), Some("refund an order"));
}

#[tokio::test]
async fn an_append_that_the_database_refuses_stores_neither_its_events_nor_its_summary() {
    let (store, _dir) = store().await;
    let pool = store.test_pool().clone();
    for (lane, writer) in lanes(&store) {
        let log = AuditLog::new(writer);
        let before = store.audit_tip().await.unwrap();
        testing::add_refusing_trigger(
            &pool,
            "refuse_summary",
            "INSERT",
            "audit_session_summaries",
            None,
            testing::Refusal::Abort("disk full"),
        )
        .await;
        let session = format!("s-{lane}");
        let refused = log
            .append(NewEvent::session_started(&session, "agent-1", "desk", None))
            .await;
        testing::drop_refusing_trigger(&pool, "refuse_summary", "audit_session_summaries").await;
        assert!(
            refused.is_err(),
            "{lane}: the summary's failure fails the append"
        );
        assert_eq!(
            store.audit_tip().await.unwrap(),
            before,
            "{lane}: no event stored"
        );
        assert!(
            store.audit_session(&session).await.unwrap().is_none(),
            "{lane}"
        );
    }
}

/// The session of each event of [`interleaved`], in order.
const INTERLEAVED_SESSIONS: [&str; 9] = ["a", "b", "a", "a", "c", "b", "a", "b", "a"];

/// Events of three sessions, interleaved, several of one session in a row: `prefix-a`,
/// `prefix-b`, `prefix-c`.
fn interleaved(prefix: &str) -> Vec<NewEvent> {
    let [a, b, c] = ["a", "b", "c"].map(|s| format!("{prefix}-{s}"));
    let versions = std::collections::BTreeMap::new();
    vec![
        NewEvent::session_started(&a, "agent-1", "desk", Some("refund an order")),
        NewEvent::session_started(&b, "agent-2", "desk", None),
        NewEvent::learn_granted(&a, "agent-1", "/roles/billing", "billing", &versions),
        NewEvent::learn_granted(&a, "agent-1", "/roles/support", "support", &versions),
        NewEvent::session_started(&c, "agent-3", "ops", None),
        NewEvent::call_denied("agent-2", "refund", json!({}), "ACCESS_DENIED", None).in_session(&b),
        NewEvent::call_denied("agent-1", "refund", json!({}), "GOVERNANCE_VIOLATION", None)
            .in_session(&a),
        NewEvent::learn_granted(&b, "agent-2", "/roles/billing", "billing", &versions),
        NewEvent::learn_granted(&a, "agent-1", "/roles/billing", "billing", &versions),
    ]
}

/// A session's summary without what differs between two sessions of the same events.
fn counts(summary: &skillgate_core::store::audit_query::SessionSummary) -> serde_json::Value {
    json!({
        "key": summary.key, "scope": summary.scope, "task_summary": summary.task_summary,
        "events": summary.events, "learns": summary.learns, "calls": summary.calls,
        "denials": summary.denials, "violations": summary.violations, "errors": summary.errors,
        "roles": summary.roles, "tools": summary.tools,
    })
}

#[tokio::test]
async fn events_of_several_sessions_appended_in_one_commit_summarize_as_when_appended_one_by_one() {
    let (store, _dir) = store().await;
    // Both writers live to the end: a writer's runtime owns the pool connections it opened.
    let logs = lanes(&store).map(|(lane, writer)| (lane, AuditLog::new(writer)));
    for (lane, log) in &logs {
        let together = log
            .append_batch(interleaved(&format!("{lane}-together")))
            .await
            .unwrap();
        for event in interleaved(&format!("{lane}-alone")) {
            log.append(event).await.unwrap();
        }
        for session in ["a", "b", "c"] {
            let id = format!("{lane}-together-{session}");
            let summary = store.audit_session(&id).await.unwrap().unwrap();
            let alone = store
                .audit_session(&format!("{lane}-alone-{session}"))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                counts(&summary),
                counts(&alone),
                "{lane}: session {session}"
            );
            let seqs: Vec<u64> = together
                .iter()
                .zip(INTERLEAVED_SESSIONS)
                .filter(|(_, of)| *of == session)
                .map(|(e, _)| e.seq)
                .collect();
            assert_eq!(
                (summary.first_seq, summary.last_seq),
                (seqs[0], *seqs.last().unwrap()),
                "{lane}: session {session}"
            );
        }
        let a = store
            .audit_session(&format!("{lane}-together-a"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            counts(&a),
            json!({"key": "agent-1", "scope": "desk", "task_summary": "refund an order",
                   "events": 5, "learns": 3, "calls": 0, "denials": 0, "violations": 1,
                   "errors": 0, "roles": ["billing", "support"], "tools": ["refund"]}),
            "{lane}"
        );
    }
}

fn role(name: &str, title: &str) -> Role {
    Role {
        slug: slug(name),
        title: title.into(),
        description: String::new(),
        instructions: String::new(),
        skills: vec![],
        limits: vec![],
    }
}

#[tokio::test]
async fn a_catalog_name_is_unique_and_a_stale_update_is_a_conflict_that_changes_nothing() {
    let (store, _dir) = store().await;
    assert_eq!(
        store
            .create_role(&role("desk-agent", "Desk"))
            .await
            .unwrap(),
        1
    );
    assert!(matches!(
        store.create_role(&role("desk-agent", "Twice")).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(
        store
            .update_role(&role("desk-agent", "Desk 2"), 1)
            .await
            .unwrap(),
        2
    );
    assert!(matches!(
        store.update_role(&role("desk-agent", "Stale"), 1).await,
        Err(StoreError::Conflict(_))
    ));
    let stored = store.get_role(&slug("desk-agent")).await.unwrap().unwrap();
    assert_eq!(
        (stored.value.title.as_str(), stored.revision),
        ("Desk 2", 2)
    );

    let scope = Scope {
        slug: slug("desk"),
        description: "the desk".into(),
        roles: vec![slug("desk-agent")],
        guardrails: vec![],
    };
    assert_eq!(store.create_scope(&scope).await.unwrap(), 1);
    assert!(matches!(
        store.create_scope(&scope).await,
        Err(StoreError::Conflict(_))
    ));
    let changed = Scope {
        description: "changed".into(),
        ..scope.clone()
    };
    assert_eq!(store.update_scope(&changed, 1).await.unwrap(), 2);
    assert!(matches!(
        store.update_scope(&scope, 1).await,
        Err(StoreError::Conflict(_))
    ));
    let scopes = store.list_scopes().await.unwrap();
    assert_eq!(scopes.len(), 1);
    assert_eq!(
        (scopes[0].value.description.as_str(), scopes[0].revision),
        ("changed", 2)
    );

    let skill = Skill {
        slug: slug("refunds"),
        description: "Refunds".into(),
        instructions: "Refund carefully.".into(),
        tools: vec![],
        resources: vec![],
        frontmatter_extra: Default::default(),
    };
    let saved = store.create_skill(&skill).await.unwrap();
    assert!(matches!(
        store.create_skill(&skill).await,
        Err(StoreError::Conflict(_))
    ));
    let second = Skill {
        description: "Refunds, v2".into(),
        ..skill.clone()
    };
    let saved2 = store.update_skill(&second, saved.revision).await.unwrap();
    assert_eq!(saved2.value.version, 2);
    assert!(matches!(
        store.update_skill(&skill, saved.revision).await,
        Err(StoreError::Conflict(_))
    ));
    let versions = store.skill_versions(&slug("refunds")).await.unwrap();
    assert_eq!(versions.len(), 2, "the stale save stored no version");
    let skills = store.list_skills().await.unwrap();
    assert_eq!(skills[0].value.skill.description, "Refunds, v2");
}

/// Rows in `rate_limit_slots`, by subject.
async fn slot_rows(store: &Store, subject: &str) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM rate_limit_slots WHERE subject = $1")
        .bind(subject)
        .fetch_one(store.test_pool())
        .await
        .unwrap()
}

/// A subject that never asks again (an address that registered one OAuth client) leaves
/// nothing behind: the next reservation of the same action, by anyone, drops every slot
/// that left the window, and none that is still in it.
#[tokio::test]
async fn rate_limit_slots_of_a_subject_that_never_returns_are_dropped_once_out_of_the_window() {
    use skillgate_core::revisions::Slot;
    let (store, _dir) = store().await;
    let limit = ("oauth.register", 2, std::time::Duration::from_secs(60));
    let start = at("2026-01-01T00:00:00Z");
    for subject in ["203.0.113.1", "203.0.113.2"] {
        let slot = store
            .reserve_rate_slot(subject, limit, start)
            .await
            .unwrap();
        assert!(matches!(slot, Slot::Reserved), "{subject}");
    }
    let other_action = ("feedback", 2, std::time::Duration::from_secs(60));
    let slot = store
        .reserve_rate_slot("agent-1", other_action, start)
        .await;
    assert!(matches!(slot.unwrap(), Slot::Reserved));

    // Within the window: another subject's reservation drops nothing.
    let within = start + Duration::seconds(30);
    let slot = store.reserve_rate_slot("203.0.113.3", limit, within).await;
    assert!(matches!(slot.unwrap(), Slot::Reserved));
    assert_eq!(slot_rows(&store, "203.0.113.1").await, 1);
    assert_eq!(slot_rows(&store, "203.0.113.2").await, 1);

    // Past it: the first two are gone; the third is still in its window; another
    // action's slots are that action's to drop.
    let later = start + Duration::seconds(75);
    let slot = store.reserve_rate_slot("203.0.113.4", limit, later).await;
    assert!(matches!(slot.unwrap(), Slot::Reserved));
    assert_eq!(slot_rows(&store, "203.0.113.1").await, 0);
    assert_eq!(slot_rows(&store, "203.0.113.2").await, 0);
    assert_eq!(slot_rows(&store, "203.0.113.3").await, 1);
    assert_eq!(slot_rows(&store, "agent-1").await, 1);
}

#[tokio::test]
async fn the_inspection_policy_starts_as_the_defaults_and_a_saved_one_reads_back_and_moves_the_catalog()
 {
    use skillgate_core::admin::AdminService;
    use skillgate_core::model::{InspectAction, InspectionPolicy, InspectionRule, Inspector};

    let (store, _dir) = store().await;
    assert_eq!(
        store.load_catalog().await.unwrap().inspection,
        InspectionPolicy::default()
    );
    store
        .create_role(&role("desk-agent", "Desk"))
        .await
        .unwrap();
    let admin = AdminService::open(store.clone()).await.unwrap();
    let generation = store.catalog_generation().await.unwrap();
    let policy = InspectionPolicy {
        rules: vec![InspectionRule {
            inspector: Inspector::Egress,
            action: InspectAction::Block,
            tool: None,
            role: Some(slug("desk-agent")),
            scope: None,
            max_bytes: None,
        }],
        ..InspectionPolicy::default()
    };
    admin
        .set_inspection_policy("alice", policy.clone())
        .await
        .unwrap();
    assert_eq!(store.load_catalog().await.unwrap().inspection, policy);
    assert!(store.catalog_generation().await.unwrap() > generation);
}
