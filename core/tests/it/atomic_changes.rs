//! A state change and its audit event commit together through the one audit writer: no
//! catalog save without its `admin_change` event, no event for a change that was undone,
//! and the chain stays one chain while plain appends and changes interleave.

use std::sync::Arc;

use skillgate_core::admin::AdminService;
use skillgate_core::audit::{AuditLog, EventKind, NewEvent};
use skillgate_core::policy::CatalogHandle;
use skillgate_core::slug::Slug;
use skillgate_core::store::{Store, testing};

struct Fixture {
    store: Store,
    audit: AuditLog,
    service: AdminService,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&skillgate_core::store::testing::database_url(
        dir.path(),
        "a.db",
    ))
    .await
    .unwrap();
    store.seed_demo("/nonexistent/skillgate").await.unwrap();
    let handle = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
    let audit = AuditLog::new(store.clone());
    let service = AdminService::new(store.clone(), audit.clone(), handle);
    Fixture {
        store,
        audit,
        service,
        _dir: dir,
    }
}

fn slug(text: &str) -> Slug {
    Slug::parse(text).unwrap()
}

async fn admin_changes(store: &Store) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM audit_events WHERE kind = 'admin_change'")
        .fetch_one(store.test_pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_role_save_whose_event_cannot_be_written_is_not_saved() {
    let f = fixture().await;
    let stored = f
        .service
        .role(&slug("billing-admin"))
        .await
        .unwrap()
        .unwrap();
    // The audit refuses admin changes, as a full disk would.
    testing::add_refusing_trigger(
        f.store.test_pool(),
        "no_admin_events",
        "INSERT",
        "audit_events",
        Some("NEW.kind = 'admin_change'"),
        testing::Refusal::Abort("audit unavailable"),
    )
    .await;
    let mut role = stored.value.clone();
    role.title = "Renamed without a trace".into();
    let refused = f.service.update_role("alice", &role, stored.revision).await;
    assert!(refused.is_err(), "{refused:?}");
    let after = f
        .service
        .role(&slug("billing-admin"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.revision, stored.revision, "the save was rolled back");
    assert_eq!(after.value.title, stored.value.title);

    testing::drop_refusing_trigger(f.store.test_pool(), "no_admin_events", "audit_events").await;
    let before = admin_changes(&f.store).await;
    let revision = f
        .service
        .update_role("alice", &role, stored.revision)
        .await
        .unwrap();
    assert_eq!(revision, stored.revision + 1);
    assert_eq!(admin_changes(&f.store).await, before + 1);
}

#[tokio::test]
async fn a_refused_save_leaves_no_event_and_a_key_revoked_from_the_cli_path_is_audited() {
    let f = fixture().await;
    let before = admin_changes(&f.store).await;
    let stale = f
        .service
        .role(&slug("billing-admin"))
        .await
        .unwrap()
        .unwrap();
    assert!(
        f.service
            .update_role("alice", &stale.value, stale.revision + 7)
            .await
            .is_err()
    );
    assert_eq!(admin_changes(&f.store).await, before);

    let (info, _key) = f
        .service
        .create_key("alice", "bot", &slug("support"), None)
        .await
        .unwrap();
    f.service.revoke_key("alice", &info.name).await.unwrap();
    assert_eq!(admin_changes(&f.store).await, before + 2);
    assert!(f.service.revoke_key("alice", "nobody").await.is_err());
    assert_eq!(admin_changes(&f.store).await, before + 2);
}

#[tokio::test]
async fn appends_and_audited_changes_interleave_on_one_intact_chain() {
    let f = fixture().await;
    let mut tasks = Vec::new();
    for n in 0..40 {
        let audit = f.audit.clone();
        tasks.push(tokio::spawn(async move {
            audit
                .append(NewEvent::session_started(
                    &format!("s{n}"),
                    "agent",
                    "support",
                    None,
                ))
                .await
                .unwrap();
        }));
    }
    // Saves of one role from its current revision, one after another, while the appends run.
    for _ in 0..5 {
        let current = f
            .service
            .role(&slug("system-admin"))
            .await
            .unwrap()
            .unwrap();
        let mut role = current.value.clone();
        role.title.push('.');
        f.service
            .update_role("alice", &role, current.revision)
            .await
            .unwrap();
    }
    for task in tasks {
        task.await.unwrap();
    }
    let report = f.audit.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    let kinds: Vec<String> = sqlx::query_scalar("SELECT kind FROM audit_events ORDER BY seq")
        .fetch_all(f.store.test_pool())
        .await
        .unwrap();
    assert_eq!(
        kinds
            .iter()
            .filter(|k| *k == EventKind::SessionStarted.as_str())
            .count(),
        40
    );
}
