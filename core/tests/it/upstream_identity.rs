//! An upstream's pinned identity on a real database: the first sync pins it, an unchanged
//! one records nothing, another party (key or name) quarantines the upstream (audited with
//! both identities) so `decide` refuses its tools with `UPSTREAM_QUARANTINED`, and an
//! admin's admission of exactly the identity reviewed lifts it. A new version of the same
//! party is an upgrade: pinned, audited and remembered, never refused.

use std::sync::Arc;

use chrono::{Duration, Utc};
use serde_json::{Value, json};
use skillgate_core::admin::{AdminError, AdminService};
use skillgate_core::audit::{AuditEvent, AuditLog};
use skillgate_core::model::UpstreamIdentity;
use skillgate_core::policy::{CallRequest, CatalogHandle, Decision, DenyCode, SessionView, decide};
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;
use skillgate_core::store::catalog::identity_digest;

const ENDPOINT: &str = r#"{"kind":"http","url":"https://tools.internal/mcp"}"#;

struct Fixture {
    service: AdminService,
    handle: Arc<CatalogHandle>,
    store: Store,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let url = skillgate_core::store::testing::database_url(dir.path(), "identity.db");
    let store = Store::open(&url).await.unwrap();
    store.seed_demo("/nonexistent/skillgate").await.unwrap();
    let handle = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
    let service = AdminService::new(store.clone(), AuditLog::new(store.clone()), handle.clone());
    Fixture {
        service,
        handle,
        store,
        _dir: dir,
    }
}

fn demo() -> Slug {
    Slug::parse("demo").unwrap()
}

fn identity(key: &str, version: &str) -> UpstreamIdentity {
    UpstreamIdentity {
        spki_sha256: Some(format!("sha256/{key}")),
        server_name: "acme-tools".into(),
        server_version: version.into(),
    }
}

async fn history(service: &AdminService) -> Vec<AuditEvent> {
    service.history("upstream:demo").await.unwrap()
}

/// Decides a `lookup_customer` (a demo upstream tool) for a session of `tier-1-support`.
fn lookup(handle: &CatalogHandle) -> Decision {
    let mut session = SessionView::new(
        "s1",
        "k1",
        Slug::parse("support").unwrap(),
        Utc::now() + Duration::hours(1),
    );
    session.learn(
        Slug::parse("tier-1-support").unwrap(),
        handle.load().skill_versions_of("tier-1-support"),
    );
    let Value::Object(arguments) = json!({"customer_id": "C-1001"}) else {
        unreachable!("an object literal")
    };
    let request = CallRequest {
        session_id: "s1",
        key_id: "k1",
        tool: "lookup_customer",
        arguments,
        approved: None,
    };
    decide(&handle.load(), Some(&session), request, Utc::now())
}

#[tokio::test]
async fn the_first_identity_is_pinned_and_an_unchanged_one_records_nothing() {
    let f = fixture().await;
    let first = identity("AAAA", "1.2.0");
    let pinned = f
        .service
        .sync_identity(&demo(), ENDPOINT, &first)
        .await
        .unwrap()
        .expect("the first identity is pinned");
    assert_eq!(pinned.action, "upstream.identity_pin");
    let stored = f.store.upstream_identity("demo").await.unwrap().unwrap();
    assert_eq!(stored.pinned, first);
    assert_eq!(stored.quarantined_since, None);

    assert_eq!(
        f.service
            .sync_identity(&demo(), ENDPOINT, &first)
            .await
            .unwrap(),
        None
    );
    // The first pin is trusted on first use like a seed (stored, not an event), and an
    // unchanged identity records nothing.
    assert!(history(&f.service).await.is_empty());
    assert!(matches!(lookup(&f.handle), Decision::Allow(_)));
}

#[tokio::test]
async fn a_changed_identity_quarantines_the_upstream_until_the_reviewed_one_is_admitted() {
    let f = fixture().await;
    let first = identity("AAAA", "1.2.0");
    f.service
        .sync_identity(&demo(), ENDPOINT, &first)
        .await
        .unwrap();
    // The same CA re-issued the certificate with another key.
    let rekeyed = identity("BBBB", "1.2.0");
    let change = f
        .service
        .sync_identity(&demo(), ENDPOINT, &rekeyed)
        .await
        .unwrap()
        .expect("a quarantine");
    assert_eq!(change.action, "upstream.identity_quarantine");
    let Decision::Deny(denial) = lookup(&f.handle) else {
        panic!("a call of a quarantined upstream's tool is refused");
    };
    assert_eq!(denial.code, DenyCode::UpstreamQuarantined);
    assert!(
        denial
            .rule
            .contains("spki_sha256 sha256/AAAA -> sha256/BBBB"),
        "{}",
        denial.rule
    );
    assert!(
        !denial
            .available_tools
            .iter()
            .any(|t| t == "lookup_customer")
    );
    let event = &history(&f.service).await[0];
    assert_eq!(event.payload["action"], "upstream.identity_quarantine");
    assert_eq!(
        event.payload["before"]["pinned"]["spki_sha256"],
        "sha256/AAAA"
    );
    assert_eq!(
        event.payload["after"]["offered"]["spki_sha256"],
        "sha256/BBBB"
    );

    // Seen again, the same offer records nothing more; another one is not admitted blind.
    assert_eq!(
        f.service
            .sync_identity(&demo(), ENDPOINT, &rekeyed)
            .await
            .unwrap(),
        None
    );
    let stale = f
        .service
        .admit_upstream_identity("alice", "demo", &identity_digest(&first))
        .await
        .unwrap_err();
    assert!(matches!(stale, AdminError::Conflict(_)), "{stale}");
    assert!(matches!(lookup(&f.handle), Decision::Deny(_)));

    let admitted = f
        .service
        .admit_upstream_identity("alice", "demo", &identity_digest(&rekeyed))
        .await
        .unwrap();
    assert_eq!(admitted, rekeyed);
    assert!(matches!(lookup(&f.handle), Decision::Allow(_)));
    let event = &history(&f.service).await[0];
    assert_eq!(event.actor.as_deref(), Some("alice"));
    assert_eq!(event.payload["action"], "upstream.identity_admit");
    assert_eq!(
        event.payload["after"]["pinned"]["spki_sha256"],
        "sha256/BBBB"
    );
}

#[tokio::test]
async fn a_new_version_of_the_same_party_is_pinned_and_audited_without_a_quarantine() {
    let f = fixture().await;
    let first = identity("AAAA", "1.2.0");
    f.service
        .sync_identity(&demo(), ENDPOINT, &first)
        .await
        .unwrap();
    let upgraded = identity("AAAA", "1.3.0");
    let change = f
        .service
        .sync_identity(&demo(), ENDPOINT, &upgraded)
        .await
        .unwrap()
        .expect("an upgrade is recorded");
    assert_eq!(change.action, "upstream.identity_version");
    assert!(matches!(lookup(&f.handle), Decision::Allow(_)));
    let stored = f.store.upstream_identity("demo").await.unwrap().unwrap();
    assert_eq!(stored.pinned, upgraded);
    assert_eq!(stored.quarantined_since, None);
    let (from, at) = stored.upgraded_from.expect("the upgrade is remembered");
    assert_eq!(from, "1.2.0");
    assert!(!at.is_empty());
    let event = &history(&f.service).await[0];
    assert_eq!(event.actor.as_deref(), Some("upstream-sync:demo"));
    assert_eq!(event.payload["action"], "upstream.identity_version");
    assert_eq!(event.payload["before"]["pinned"]["server_version"], "1.2.0");
    assert_eq!(event.payload["after"]["pinned"]["server_version"], "1.3.0");

    // Seen again, the upgrade records nothing more.
    assert_eq!(
        f.service
            .sync_identity(&demo(), ENDPOINT, &upgraded)
            .await
            .unwrap(),
        None
    );
    assert_eq!(history(&f.service).await.len(), 1);
}

#[tokio::test]
async fn a_new_version_with_another_key_or_name_still_quarantines() {
    let f = fixture().await;
    f.service
        .sync_identity(&demo(), ENDPOINT, &identity("AAAA", "1.2.0"))
        .await
        .unwrap();
    let renamed = UpstreamIdentity {
        server_name: "evil-tools".into(),
        ..identity("AAAA", "1.2.1")
    };
    for other in [identity("BBBB", "1.2.1"), renamed] {
        let change = f
            .service
            .sync_identity(&demo(), ENDPOINT, &other)
            .await
            .unwrap()
            .expect("a quarantine");
        assert_eq!(change.action, "upstream.identity_quarantine");
        let Decision::Deny(denial) = lookup(&f.handle) else {
            panic!("another party's version is no upgrade: {other:?}");
        };
        assert_eq!(denial.code, DenyCode::UpstreamQuarantined);
        assert!(
            denial.rule.contains("server_version 1.2.0 -> 1.2.1"),
            "{}",
            denial.rule
        );
    }
}

#[tokio::test]
async fn the_pinned_party_back_releases_a_quarantine_and_takes_its_new_version() {
    let f = fixture().await;
    f.service
        .sync_identity(&demo(), ENDPOINT, &identity("AAAA", "1.2.0"))
        .await
        .unwrap();
    f.service
        .sync_identity(&demo(), ENDPOINT, &identity("BBBB", "1.2.0"))
        .await
        .unwrap();
    assert!(
        matches!(lookup(&f.handle), Decision::Deny(d) if d.code == DenyCode::UpstreamQuarantined)
    );
    let released = f
        .service
        .sync_identity(&demo(), ENDPOINT, &identity("AAAA", "1.2.1"))
        .await
        .unwrap()
        .expect("a release");
    assert_eq!(released.action, "upstream.identity_unquarantine");
    assert!(matches!(lookup(&f.handle), Decision::Allow(_)));
    let stored = f.store.upstream_identity("demo").await.unwrap().unwrap();
    assert_eq!(stored.pinned, identity("AAAA", "1.2.1"));
    assert_eq!(stored.offered, None);
}

#[tokio::test]
async fn an_upstream_an_admin_points_elsewhere_is_pinned_again_not_quarantined() {
    let f = fixture().await;
    f.service
        .sync_identity(&demo(), ENDPOINT, &identity("AAAA", "1.2.0"))
        .await
        .unwrap();
    let moved = r#"{"kind":"http","url":"https://tools2.internal/mcp"}"#;
    let change = f
        .service
        .sync_identity(&demo(), moved, &identity("CCCC", "2.0.0"))
        .await
        .unwrap()
        .expect("a new pin");
    assert_eq!(change.action, "upstream.identity_pin");
    assert_eq!(
        change.after["pinned"]["spki_sha256"], "sha256/CCCC",
        "{}",
        change.after
    );
    assert!(matches!(lookup(&f.handle), Decision::Allow(_)));
    // Re-pinning replaces a pin: audited with both.
    let event = &history(&f.service).await[0];
    assert_eq!(event.payload["action"], "upstream.identity_pin");
    assert_eq!(
        event.payload["before"]["pinned"]["spki_sha256"],
        "sha256/AAAA"
    );
}
