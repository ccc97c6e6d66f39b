//! What the store promises when several processes share one database, as replicas behind
//! a load balancer do: each test opens two `Store`s (two pools, as two replicas have) on
//! one database and races them. `make test` runs this file on SQLite and on PostgreSQL
//! (`SKILLGATE_TEST_DATABASE=postgres`, see `store::testing`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde_json::json;
use skillgate_core::admin::AdminService;
use skillgate_core::audit::{AuditLog, EventKind, NewEvent};
use skillgate_core::model::{Upstream, UpstreamKind};
use skillgate_core::revisions::{RateLimit, Slot};
use skillgate_core::slug::Slug;
use skillgate_core::store::{LoginBudget, Store, testing};
use tower_sessions::cookie::time::OffsetDateTime;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{ExpiredDeletion, SessionStore};

/// Two stores on one new database, and the directory a SQLite file lives in.
async fn two_replicas() -> (Store, Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = testing::database_url(dir.path(), "shared.db");
    let first = Store::open(&url).await.unwrap();
    let second = Store::open(&url).await.unwrap();
    (first, second, dir)
}

#[tokio::test]
async fn appends_racing_from_two_replicas_make_one_chain_with_no_gap_or_fork() {
    let (first, second, _dir) = two_replicas().await;
    let logs = [AuditLog::new(first), AuditLog::new(second)];
    let mut tasks = Vec::new();
    for i in 0..120u64 {
        let log = logs[(i % 2) as usize].clone();
        tasks.push(tokio::spawn(async move {
            log.append(NewEvent::new(EventKind::Feedback, json!({ "i": i })))
                .await
                .unwrap()
                .seq
        }));
    }
    let mut seqs = Vec::new();
    for task in tasks {
        seqs.push(task.await.unwrap());
    }
    seqs.sort_unstable();
    assert_eq!(
        seqs,
        (1..=120).collect::<Vec<u64>>(),
        "each seq once, none skipped"
    );
    for log in &logs {
        let report = log.verify().await.unwrap();
        assert!(report.is_intact(), "{report:?}");
        assert_eq!(report.verified_tip.seq, 120);
    }
}

#[tokio::test]
async fn the_last_sign_in_slots_go_to_exactly_the_budget_whichever_replica_asks() {
    let (first, second, _dir) = two_replicas().await;
    let budget = LoginBudget {
        per_user: 5,
        per_address: 100,
    };
    let now = Utc::now();
    let since = now - chrono::Duration::minutes(15);
    let stores = [first, second];
    let mut tasks = Vec::new();
    for i in 0..24 {
        let store = stores[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            store
                .reserve_login_attempt("admin", &format!("10.0.0.{i}"), now, since, budget)
                .await
                .unwrap()
                .is_some()
        }));
    }
    let mut granted = 0;
    for task in tasks {
        granted += usize::from(task.await.unwrap());
    }
    assert_eq!(granted, 5, "no two replicas took the last slot");
}

#[tokio::test]
async fn a_rate_limit_admits_exactly_its_maximum_across_replicas() {
    let (first, second, _dir) = two_replicas().await;
    let limit = RateLimit {
        action: "feedback_skill",
        what: "rated skills",
        max: 7,
        window: Duration::from_secs(60),
    };
    let now = Utc::now();
    let stores = [first, second];
    let mut tasks = Vec::new();
    for i in 0..30 {
        let store = stores[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            matches!(
                limit.reserve(&store, "key:1", now).await.unwrap(),
                Slot::Reserved
            )
        }));
    }
    let mut reserved = 0;
    for task in tasks {
        reserved += usize::from(task.await.unwrap());
    }
    assert_eq!(reserved, 7);
}

#[tokio::test]
async fn a_console_session_saved_on_one_replica_loads_on_the_other_until_deleted_or_expired() {
    let (first, second, _dir) = two_replicas().await;
    let (on_first, on_second) = (first.console_sessions(), second.console_sessions());
    on_first.migrate().await.unwrap();
    let mut record = Record {
        id: Id::default(),
        data: HashMap::from([("user".to_owned(), json!("alice"))]),
        expiry_date: OffsetDateTime::now_utc() + tower_sessions::cookie::time::Duration::hours(1),
    };
    on_first.create(&mut record).await.unwrap();
    let loaded = on_second.load(&record.id).await.unwrap().expect("visible");
    assert_eq!(loaded.data["user"], "alice");

    on_second.delete(&record.id).await.unwrap();
    assert!(on_first.load(&record.id).await.unwrap().is_none());

    let mut expired = Record {
        id: Id::default(),
        data: HashMap::new(),
        expiry_date: OffsetDateTime::now_utc() - tower_sessions::cookie::time::Duration::hours(1),
    };
    on_first.save(&expired).await.unwrap();
    on_second.delete_expired().await.unwrap();
    expired.data.insert("probe".into(), json!(1));
    assert!(on_first.load(&expired.id).await.unwrap().is_none());
}

#[tokio::test]
async fn a_catalog_change_on_one_replica_is_seen_by_the_others_next_check() {
    let (first, second, _dir) = two_replicas().await;
    let watcher = Arc::new(AdminService::open(second.clone()).await.unwrap());
    assert!(
        watcher.reload_if_moved().await.unwrap(),
        "a fresh service compiles once"
    );
    assert!(!watcher.reload_if_moved().await.unwrap(), "nothing moved");
    let before = first.catalog_generation().await.unwrap();

    first
        .upsert_upstream(&Upstream {
            name: Slug::parse("crm").unwrap(),
            kind: UpstreamKind::Http {
                url: "https://crm.example.com/mcp".into(),
                ca_bundle: None,
                allow_plaintext: false,
            },
        })
        .await
        .unwrap();

    assert!(second.catalog_generation().await.unwrap() > before);
    assert!(
        watcher.reload_if_moved().await.unwrap(),
        "the change is seen"
    );
    assert!(
        watcher
            .live()
            .catalog()
            .upstreams
            .iter()
            .any(|u| u.name.as_str() == "crm"),
        "the new snapshot has the upstream"
    );
    assert!(!watcher.reload_if_moved().await.unwrap());
}
