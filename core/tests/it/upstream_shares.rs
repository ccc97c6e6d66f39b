//! An upstream the platform shares into workspaces (issue #55): each workspace gets a copy
//! it may use and not change, kept up to the platform's, recorded in both chains. On both
//! backends.

use std::collections::BTreeMap;

use skillgate_core::admin::{AdminError, AdminService, CredentialUpdate};
use skillgate_core::audit::AuditLog;
use skillgate_core::catalog_code::{ApplyError, ApplyOptions, CatalogFile};
use skillgate_core::demo::catalog::DEMO_UPSTREAM;
use skillgate_core::model::{Role, Skill};
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;
use skillgate_core::store::testing;
use skillgate_core::upstream::Secret;

use super::workspaces::{admin_changes, event_count};

fn slug(text: &str) -> Slug {
    Slug::parse(text).unwrap()
}

struct Platform {
    store: Store,
    admin: AdminService,
    _dir: tempfile::TempDir,
}

/// A platform with the demo catalog, its `demo` upstream holding a stored API token, and
/// the empty workspaces `finance` and `legal`.
async fn platform() -> Platform {
    let dir = tempfile::tempdir().unwrap();
    let url = testing::database_url(dir.path(), "platform.db");
    let store = Store::open(&url).await.unwrap();
    store.seed_demo("/nonexistent/skillgate").await.unwrap();
    let admin = AdminService::open(store.clone()).await.unwrap();
    let demo = demo_upstream(&store).await;
    admin
        .register_upstream(
            "alice",
            &demo,
            CredentialUpdate {
                env: Some(BTreeMap::from([(
                    "DEMO_API_TOKEN".to_owned(),
                    Secret::new("s3cret-token"),
                )])),
                ..CredentialUpdate::default()
            },
        )
        .await
        .unwrap();
    for workspace in ["finance", "legal"] {
        admin
            .create_workspace("alice", workspace, workspace)
            .await
            .unwrap();
    }
    Platform {
        store,
        admin,
        _dir: dir,
    }
}

async fn demo_upstream(store: &Store) -> skillgate_core::model::Upstream {
    store
        .list_upstreams()
        .await
        .unwrap()
        .into_iter()
        .find(|u| u.name.as_str() == DEMO_UPSTREAM)
        .unwrap()
}

/// Shares the demo upstream into `finance` and `legal`.
async fn share_into_both(platform: &Platform) {
    for workspace in ["finance", "legal"] {
        platform
            .admin
            .share_upstream("alice", DEMO_UPSTREAM, workspace)
            .await
            .unwrap();
    }
}

async fn workspace(platform: &Platform, name: &str) -> (Store, AdminService) {
    let store = platform.store.workspace(&slug(name)).await.unwrap();
    let admin = AdminService::open(store.clone()).await.unwrap();
    (store, admin)
}

/// Gives the workspace of `admin` a skill `customers` that uses the shared
/// `lookup_customer`.
async fn uses_lookup_customer(admin: &AdminService) {
    admin
        .create_skill(
            "bob",
            &Skill {
                slug: slug("customers"),
                description: "Finds customers.".to_owned(),
                instructions: "Look the customer up first.".to_owned(),
                tools: vec!["lookup_customer".to_owned()],
                resources: Vec::new(),
                frontmatter_extra: serde_json::Map::new(),
            },
        )
        .await
        .unwrap();
}

/// The demo upstream's tools as `store` holds them, definition and pin.
async fn demo_tools(store: &Store) -> Vec<(String, Option<String>, Vec<String>)> {
    let mut tools = Vec::new();
    for tool in store.list_tools().await.unwrap() {
        if tool.upstream.as_str() != DEMO_UPSTREAM {
            continue;
        }
        let pin = store.tool_pin(&tool.spec.name).await.unwrap().unwrap();
        tools.push((tool.spec.name.clone(), pin.pin, tool.spec.sensitive_args));
    }
    tools
}

async fn intact(store: &Store) {
    let report = AuditLog::new(store.clone()).verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
}

#[tokio::test]
async fn a_shared_upstream_reaches_the_workspace_whole_and_is_read_only_there() {
    let platform = platform().await;
    let share = platform
        .admin
        .share_upstream("alice", DEMO_UPSTREAM, "finance")
        .await
        .unwrap();
    assert_eq!(
        (share.upstream.as_str(), share.workspace.as_str()),
        ("demo", "finance")
    );
    assert_eq!(
        platform.store.upstream_shares().await.unwrap(),
        vec![share.clone()]
    );

    // The copy: the upstream, its stored credentials, its tools with their pins.
    let (finance, finance_admin) = workspace(&platform, "finance").await;
    assert_eq!(
        demo_upstream(&finance).await,
        demo_upstream(&platform.store).await
    );
    assert_eq!(
        finance.shared_upstreams().await.unwrap(),
        BTreeMap::from([("demo".to_owned(), "default".to_owned())])
    );
    let token = finance.upstream_credentials().await.unwrap()["demo"].env["DEMO_API_TOKEN"]
        .expose()
        .to_owned();
    assert_eq!(token, "s3cret-token");
    let tools = demo_tools(&finance).await;
    assert!(tools.len() >= 5, "{tools:?}");
    assert_eq!(tools, demo_tools(&platform.store).await);
    assert!(finance_admin.live().tool("lookup_customer").is_some());

    // Sharing again, with nothing changed, writes nothing.
    let (finance_events, platform_events) = (
        event_count(&finance).await,
        event_count(&platform.store).await,
    );
    let again = platform
        .admin
        .share_upstream("bob", DEMO_UPSTREAM, "finance")
        .await
        .unwrap();
    assert_eq!(again, share, "the share as first registered");
    assert_eq!(
        (
            event_count(&finance).await,
            event_count(&platform.store).await
        ),
        (finance_events, platform_events)
    );

    // Each chain says so, and never the token.
    assert!(
        admin_changes(&finance)
            .await
            .contains(&("upstream.share".into(), "upstream:demo".into()))
    );
    assert!(
        admin_changes(&platform.store)
            .await
            .contains(&("upstream.share".into(), "upstream:demo".into()))
    );
    let payloads: Vec<String> = sqlx::query_scalar("SELECT payload FROM audit_events")
        .fetch_all(finance.test_pool())
        .await
        .unwrap();
    assert!(payloads.iter().all(|p| !p.contains("s3cret-token")));

    // Read-only in the workspace, whichever way in; nothing written.
    let before = event_count(&finance).await;
    let demo = demo_upstream(&finance).await;
    let refusals = [
        finance_admin
            .register_upstream("bob", &demo, CredentialUpdate::default())
            .await
            .unwrap_err(),
        finance_admin
            .register_upstream(
                "bob",
                &demo,
                CredentialUpdate {
                    clear: true,
                    ..CredentialUpdate::default()
                },
            )
            .await
            .unwrap_err(),
        finance_admin
            .set_sensitive_args("bob", "lookup_customer", &["email".to_owned()])
            .await
            .unwrap_err(),
        finance_admin
            .admit_tool("bob", "lookup_customer", "0000")
            .await
            .unwrap_err(),
        finance_admin
            .admit_upstream_identity("bob", "demo", "0000")
            .await
            .unwrap_err(),
    ];
    for refused in refusals {
        assert!(
            matches!(&refused, AdminError::SharedUpstream { upstream, from } if upstream == "demo" && from == "default"),
            "{refused:?}"
        );
    }
    assert_eq!(event_count(&finance).await, before);
    assert_eq!(tools, demo_tools(&finance).await);
    assert_eq!(
        finance.upstream_credentials().await.unwrap()["demo"].env["DEMO_API_TOKEN"].expose(),
        "s3cret-token"
    );

    // A catalog file: its own export applies back unchanged; one that changes or prunes
    // the shared upstream is refused whole.
    let exported = finance_admin.export_catalog().await.unwrap().to_yaml();
    assert!(exported.contains("demo-upstream"), "{exported}");
    let same = CatalogFile::parse(exported.as_bytes()).unwrap();
    let report = finance_admin
        .apply_catalog(&same, ApplyOptions::default())
        .await
        .unwrap();
    assert!(!report.applied, "{:?}", report.plan);
    let changed = exported.replacen("demo-upstream", "other-upstream", 1);
    assert_ne!(changed, exported);
    let empty = "version: 1\n";
    for (file, prune) in [(changed.as_str(), false), (empty, true)] {
        let file = CatalogFile::parse(file.as_bytes()).unwrap();
        for dry_run in [true, false] {
            let refused = finance_admin
                .apply_catalog(&file, ApplyOptions { prune, dry_run })
                .await
                .unwrap_err();
            let ApplyError::Invalid(issues) = refused else {
                panic!("{refused:?}")
            };
            assert!(
                issues
                    .iter()
                    .any(|i| i.message.contains("shared into this workspace")),
                "{issues:?}"
            );
        }
    }
    assert_eq!(event_count(&finance).await, before);
    assert_eq!(
        demo_upstream(&finance).await,
        demo_upstream(&platform.store).await
    );

    // The platform cannot remove an upstream it still shares.
    let platform_before = event_count(&platform.store).await;
    let refused = platform
        .admin
        .apply_catalog(
            &CatalogFile::parse(empty.as_bytes()).unwrap(),
            ApplyOptions {
                prune: true,
                dry_run: false,
            },
        )
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("unshare it first"),
        "{refused}"
    );
    assert_eq!(event_count(&platform.store).await, platform_before);

    intact(&finance).await;
    intact(&platform.store).await;
}

#[tokio::test]
async fn a_platform_change_of_a_shared_upstream_reaches_every_copy_once() {
    let platform = platform().await;
    share_into_both(&platform).await;
    let nothing = platform.admin.project_shares().await.unwrap();
    assert!(
        nothing.written.is_empty() && nothing.failed.is_empty(),
        "{nothing:?}"
    );

    platform
        .admin
        .set_sensitive_args("alice", "lookup_customer", &["email".to_owned()])
        .await
        .unwrap();
    let demo = demo_upstream(&platform.store).await;
    platform
        .admin
        .register_upstream(
            "alice",
            &demo,
            CredentialUpdate {
                env: Some(BTreeMap::from([(
                    "DEMO_API_TOKEN".to_owned(),
                    Secret::new("rotated-token"),
                )])),
                ..CredentialUpdate::default()
            },
        )
        .await
        .unwrap();
    let (finance, _) = workspace(&platform, "finance").await;
    let stale = event_count(&finance).await;

    let projected = platform.admin.project_shares().await.unwrap();
    assert!(projected.failed.is_empty(), "{:?}", projected.failed);
    assert_eq!(
        projected.written,
        vec![
            ("demo".to_owned(), "finance".to_owned()),
            ("demo".to_owned(), "legal".to_owned())
        ]
    );
    for name in ["finance", "legal"] {
        let (store, admin) = workspace(&platform, name).await;
        assert_eq!(
            admin
                .live()
                .tool("lookup_customer")
                .unwrap()
                .spec
                .sensitive_args,
            vec!["email".to_owned()],
            "{name}"
        );
        assert_eq!(
            store.upstream_credentials().await.unwrap()["demo"].env["DEMO_API_TOKEN"].expose(),
            "rotated-token"
        );
        assert_eq!(demo_tools(&store).await, demo_tools(&platform.store).await);
        assert_eq!(
            admin_changes(&store).await.last().unwrap(),
            &(
                "upstream.shared_change".to_owned(),
                "upstream:demo".to_owned()
            )
        );
        intact(&store).await;
    }
    assert_eq!(
        event_count(&finance).await,
        stale + 1,
        "one change, one event"
    );

    // Up to date: projecting again writes nothing.
    let again = platform.admin.project_shares().await.unwrap();
    assert!(
        again.written.is_empty() && again.failed.is_empty(),
        "{again:?}"
    );
    assert_eq!(event_count(&finance).await, stale + 1);
}

#[tokio::test]
async fn unsharing_is_refused_while_a_workspace_skill_uses_a_shared_tool() {
    let platform = platform().await;
    share_into_both(&platform).await;
    let (finance, finance_admin) = workspace(&platform, "finance").await;
    uses_lookup_customer(&finance_admin).await;
    finance_admin
        .create_role(
            "bob",
            &Role {
                slug: slug("ledger"),
                title: "Ledger".to_owned(),
                description: "Ledger.".to_owned(),
                instructions: String::new(),
                skills: vec![slug("customers")],
                limits: Vec::new(),
            },
        )
        .await
        .unwrap();

    let (finance_events, platform_events) = (
        event_count(&finance).await,
        event_count(&platform.store).await,
    );
    let refused = platform
        .admin
        .unshare_upstream("alice", DEMO_UPSTREAM, "finance")
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, AdminError::Conflict(m) if m.contains("`customers`")),
        "{refused:?}"
    );
    assert_eq!(event_count(&finance).await, finance_events);
    assert_eq!(event_count(&platform.store).await, platform_events);
    assert!(
        finance
            .shared_upstreams()
            .await
            .unwrap()
            .contains_key("demo")
    );

    // Legal uses none of it: its copy goes, with an event in each chain.
    platform
        .admin
        .unshare_upstream("alice", DEMO_UPSTREAM, "legal")
        .await
        .unwrap();
    let (legal, legal_admin) = workspace(&platform, "legal").await;
    assert!(legal.list_upstreams().await.unwrap().is_empty());
    assert!(legal_admin.live().tool("lookup_customer").is_none());
    assert!(
        admin_changes(&legal)
            .await
            .contains(&("upstream.unshare".into(), "upstream:demo".into()))
    );
    assert!(
        admin_changes(&platform.store)
            .await
            .contains(&("upstream.unshare".into(), "upstream:demo".into()))
    );
    let left: Vec<String> = platform
        .store
        .upstream_shares()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.workspace)
        .collect();
    assert_eq!(left, vec!["finance".to_owned()]);
    let again = platform
        .admin
        .unshare_upstream("alice", DEMO_UPSTREAM, "legal")
        .await
        .unwrap_err();
    assert!(matches!(again, AdminError::NotFound(_)), "{again:?}");
    intact(&legal).await;
    intact(&platform.store).await;
}

#[tokio::test]
async fn sharing_is_refused_where_it_would_overwrite_or_reach_nothing() {
    let platform = platform().await;
    let (finance, _) = workspace(&platform, "finance").await;
    // Finance has a `demo` upstream of its own (the demo catalog again).
    assert!(finance.seed_demo("/nonexistent/other").await.unwrap());
    let own = demo_upstream(&finance).await;
    let before = (
        event_count(&finance).await,
        event_count(&platform.store).await,
    );

    let refused = platform
        .admin
        .share_upstream("alice", DEMO_UPSTREAM, "finance")
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, AdminError::Conflict(m) if m.contains("of its own")),
        "{refused:?}"
    );
    for (upstream, workspace) in [("nope", "legal"), (DEMO_UPSTREAM, "nope")] {
        let refused = platform
            .admin
            .share_upstream("alice", upstream, workspace)
            .await
            .unwrap_err();
        assert!(matches!(refused, AdminError::NotFound(_)), "{refused:?}");
    }
    for (upstream, workspace) in [(DEMO_UPSTREAM, "default"), ("curation", "legal")] {
        let refused = platform
            .admin
            .share_upstream("alice", upstream, workspace)
            .await
            .unwrap_err();
        assert!(
            matches!(refused, AdminError::BadInput { .. }),
            "{refused:?}"
        );
    }
    // Only the platform shares.
    let (_, finance_admin) = workspace(&platform, "finance").await;
    let refused = finance_admin
        .share_upstream("bob", DEMO_UPSTREAM, "legal")
        .await
        .unwrap_err();
    assert!(
        matches!(refused, AdminError::BadInput { .. }),
        "{refused:?}"
    );

    assert_eq!(demo_upstream(&finance).await, own);
    assert!(finance.shared_upstreams().await.unwrap().is_empty());
    assert!(platform.store.upstream_shares().await.unwrap().is_empty());
    assert_eq!(
        (
            event_count(&finance).await,
            event_count(&platform.store).await
        ),
        before
    );
}

#[tokio::test]
async fn a_platform_change_a_workspace_catalog_cannot_take_leaves_that_copy_as_it_was() {
    let platform = platform().await;
    share_into_both(&platform).await;
    let (finance, finance_admin) = workspace(&platform, "finance").await;
    uses_lookup_customer(&finance_admin).await;
    let finance_tools = demo_tools(&finance).await;
    let finance_events = event_count(&finance).await;

    // The platform's demo upstream stops providing lookup_customer.
    let fewer: Vec<_> = skillgate_core::demo::tools::tool_specs()
        .into_iter()
        .filter(|t| t.name != "lookup_customer")
        .collect();
    platform
        .store
        .seed_tools(&slug(DEMO_UPSTREAM), &fewer)
        .await
        .unwrap();

    let projected = platform.admin.project_shares().await.unwrap();
    assert_eq!(
        projected.written,
        vec![("demo".to_owned(), "legal".to_owned())]
    );
    let failed: Vec<(&str, &str)> = projected
        .failed
        .iter()
        .map(|(u, w, _)| (u.as_str(), w.as_str()))
        .collect();
    assert_eq!(failed, vec![("demo", "finance")], "{:?}", projected.failed);
    let why = projected.failed[0].2.to_string();
    assert!(why.contains("lookup_customer"), "{why}");

    // Finance's copy and chain are as they were; its catalog still compiles.
    assert_eq!(demo_tools(&finance).await, finance_tools);
    assert_eq!(event_count(&finance).await, finance_events);
    assert!(AdminService::open(finance.clone()).await.is_ok());
    let (legal, _) = workspace(&platform, "legal").await;
    assert!(
        !demo_tools(&legal)
            .await
            .iter()
            .any(|(name, _, _)| name == "lookup_customer")
    );
}
