//! Workspaces in the store (issue #55): each is a database of its own beside the platform's
//! (a SQLite file, or a PostgreSQL schema), created through the admin door, isolated from
//! the others, with an audit chain that verifies on its own. On both backends.

use skillgate_core::admin::AdminService;
use skillgate_core::audit::AuditLog;
use skillgate_core::keys::AgentKeys;
use skillgate_core::model::Role;
use skillgate_core::slug::Slug;
use skillgate_core::store::testing::{self, sqlite_only};
use skillgate_core::store::{Store, StoreError};

fn slug(text: &str) -> Slug {
    Slug::parse(text).unwrap()
}

struct Platform {
    store: Store,
    admin: AdminService,
    url: String,
    dir: tempfile::TempDir,
}

async fn platform() -> Platform {
    let dir = tempfile::tempdir().unwrap();
    let url = testing::database_url(dir.path(), "platform.db");
    let store = Store::open(&url).await.unwrap();
    store.seed_demo("/nonexistent/skillgate").await.unwrap();
    let admin = AdminService::open(store.clone()).await.unwrap();
    Platform {
        store,
        admin,
        url,
        dir,
    }
}

pub(crate) async fn event_count(store: &Store) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM audit_events")
        .fetch_one(store.test_pool())
        .await
        .unwrap()
}

/// `(action, target)` of every `admin_change` event of `store`'s chain, in order.
pub(crate) async fn admin_changes(store: &Store) -> Vec<(String, String)> {
    let payloads: Vec<String> = sqlx::query_scalar(
        "SELECT payload FROM audit_events WHERE kind = 'admin_change' ORDER BY seq",
    )
    .fetch_all(store.test_pool())
    .await
    .unwrap();
    payloads
        .iter()
        .map(|text| {
            let payload: serde_json::Value = serde_json::from_str(text).unwrap();
            (
                payload["action"].as_str().unwrap().to_owned(),
                payload["target"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The names of the roles of `store`'s catalog.
async fn role_names(store: &Store) -> Vec<String> {
    let catalog = store.load_catalog().await.unwrap();
    catalog.roles.iter().map(|r| r.slug.to_string()).collect()
}

fn role(name: &str, title: &str) -> Role {
    Role {
        slug: slug(name),
        title: title.to_owned(),
        description: format!("{title}."),
        instructions: String::new(),
        skills: Vec::new(),
        limits: Vec::new(),
    }
}

#[tokio::test]
async fn a_new_workspace_starts_empty_and_may_reuse_another_workspaces_names() {
    let platform = platform().await;
    let (record, finance) = platform
        .admin
        .create_workspace("alice", "finance", "Finance")
        .await
        .unwrap();
    assert_eq!(record.slug.as_str(), "finance");
    assert_eq!(finance.workspace_slug(), "finance");
    assert!(!finance.is_platform());
    assert!(
        finance.load_catalog().await.unwrap().roles.is_empty(),
        "a new workspace has none of the default workspace's catalog"
    );

    // The demo catalog again, in the new workspace: the same role names as the default's.
    assert!(finance.seed_demo("/nonexistent/skillgate").await.unwrap());
    let finance_admin = AdminService::open(finance.clone()).await.unwrap();
    finance_admin
        .create_role("bob", &role("refunds-eu", "EU refunds"))
        .await
        .unwrap();

    let default_roles = role_names(&platform.store).await;
    let reopened = platform.store.workspace(&slug("finance")).await.unwrap();
    let finance_roles = role_names(&reopened).await;
    assert!(default_roles.contains(&"tier-1-support".to_owned()));
    assert!(finance_roles.contains(&"tier-1-support".to_owned()));
    assert!(finance_roles.contains(&"refunds-eu".to_owned()));
    assert!(
        !default_roles.contains(&"refunds-eu".to_owned()),
        "a role made in finance is not in the default workspace"
    );

    // A key of the same name in each; each authenticates in its own workspace only.
    let support = slug("support");
    let (_, default_key) = platform
        .admin
        .create_key("alice", "ci", &support, None)
        .await
        .unwrap();
    let (_, finance_key) = finance_admin
        .create_key("bob", "ci", &support, None)
        .await
        .unwrap();
    let now = chrono::Utc::now();
    let default_keys = AgentKeys::new(platform.store.clone());
    let finance_keys = AgentKeys::new(reopened.clone());
    assert!(
        default_keys
            .authenticate(default_key.expose(), now)
            .await
            .is_ok()
    );
    assert!(
        finance_keys
            .authenticate(finance_key.expose(), now)
            .await
            .is_ok()
    );
    assert!(
        default_keys
            .authenticate(finance_key.expose(), now)
            .await
            .is_err(),
        "finance's key is unknown to the default workspace"
    );
    assert!(
        finance_keys
            .authenticate(default_key.expose(), now)
            .await
            .is_err(),
        "the default workspace's key is unknown to finance"
    );
}

#[tokio::test]
async fn each_workspace_chain_records_its_creation_and_verifies_on_its_own() {
    let platform = platform().await;
    let before = event_count(&platform.store).await;
    let (_, finance) = platform
        .admin
        .create_workspace("alice", "finance", "Finance")
        .await
        .unwrap();
    let creation = (
        "workspace.create".to_owned(),
        "workspace:finance".to_owned(),
    );
    assert_eq!(
        admin_changes(&platform.store).await.last(),
        Some(&creation),
        "the platform's chain records the creation"
    );
    assert_eq!(event_count(&platform.store).await, before + 1);
    assert_eq!(
        admin_changes(&finance).await,
        vec![creation],
        "the workspace's chain starts with its creation, and holds nothing of the platform's"
    );

    let finance_admin = AdminService::open(finance.clone()).await.unwrap();
    finance_admin
        .create_role("bob", &role("refunds-eu", "EU refunds"))
        .await
        .unwrap();
    assert_eq!(
        event_count(&platform.store).await,
        before + 1,
        "a change in finance adds nothing to the platform's chain"
    );

    let finance_report = AuditLog::new(finance.clone()).verify().await.unwrap();
    assert!(finance_report.is_intact(), "{finance_report:?}");
    assert_eq!(finance_report.events, 2);
    let platform_report = AuditLog::new(platform.store.clone())
        .verify()
        .await
        .unwrap();
    assert!(platform_report.is_intact(), "{platform_report:?}");
    assert_eq!(platform_report.events, u64::try_from(before + 1).unwrap());
}

#[tokio::test]
async fn a_bad_taken_or_reserved_workspace_name_creates_nothing() {
    let platform = platform().await;
    platform
        .admin
        .create_workspace("alice", "finance", "Finance")
        .await
        .unwrap();
    let events = event_count(&platform.store).await;
    let files = files_beside(&platform);

    let refused = [
        ("Finance!", "Finance", "lowercase letters"),
        (&"a".repeat(41), "Long", "at most 40"),
        ("default", "Default", "exists in every deployment"),
        ("finance", "Finance again", "exists already"),
        ("support", "  ", "needs a title"),
        ("support", "two\nlines", "control characters"),
    ];
    for (name, title, said) in refused {
        let error = platform
            .admin
            .create_workspace("alice", name, title)
            .await
            .unwrap_err();
        assert!(
            error.is_user_error() && error.to_string().contains(said),
            "{name:?} {title:?}: {error}"
        );
    }
    let listed: Vec<String> = platform
        .admin
        .workspaces()
        .await
        .unwrap()
        .iter()
        .map(|w| w.slug.to_string())
        .collect();
    assert_eq!(listed, ["finance"]);
    assert_eq!(event_count(&platform.store).await, events);
    assert_eq!(files_beside(&platform), files, "no database was made");
}

/// The workspace databases beside a SQLite platform file (none on PostgreSQL).
fn files_beside(platform: &Platform) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(platform.dir.path().join("platform-workspaces")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        // A database's `-wal` and `-shm` files come and go with its connections.
        .filter(|name| name.ends_with(".db"))
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn an_unregistered_workspace_is_not_found_and_only_the_platform_opens_workspaces() {
    let platform = platform().await;
    let error = platform.store.workspace(&slug("nope")).await.unwrap_err();
    assert!(matches!(error, StoreError::NotFound(_)), "{error}");
    assert_eq!(error.to_string(), "workspace `nope` not found");

    let default = platform.store.workspace(&slug("default")).await.unwrap();
    assert!(default.is_platform());

    let (_, finance) = platform
        .admin
        .create_workspace("alice", "finance", "Finance")
        .await
        .unwrap();
    let nested = finance.workspace(&slug("finance")).await.unwrap_err();
    assert!(matches!(nested, StoreError::Workspace(_)), "{nested}");
    let finance_admin = AdminService::open(finance).await.unwrap();
    let error = finance_admin
        .create_workspace("bob", "nested", "Nested")
        .await
        .unwrap_err();
    assert!(error.to_string().contains("platform database"), "{error}");
}

#[tokio::test]
async fn a_database_of_one_workspace_put_in_place_of_another_is_refused() {
    if sqlite_only("a_database_of_one_workspace_put_in_place_of_another_is_refused") {
        return;
    }
    let platform = platform().await;
    let (_, finance) = platform
        .admin
        .create_workspace("alice", "finance", "Finance")
        .await
        .unwrap();
    let (_, support) = platform
        .admin
        .create_workspace("alice", "support", "Support")
        .await
        .unwrap();
    finance.close().await;
    support.close().await;
    drop((finance, support));
    let folder = platform.dir.path().join("platform-workspaces");
    std::fs::copy(folder.join("finance.db"), folder.join("support.db")).unwrap();

    let error = platform
        .store
        .workspace(&slug("support"))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Workspace(_)), "{error}");
    assert!(
        error.to_string().contains("workspace `finance`'s"),
        "the refusal names whose database it is: {error}"
    );

    std::fs::remove_file(folder.join("support.db")).unwrap();
    let error = platform
        .store
        .workspace(&slug("support"))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("is missing"), "{error}");
}

#[tokio::test]
async fn a_deployment_from_before_workspaces_becomes_the_default_workspace_unchanged() {
    let platform = platform().await;
    platform
        .admin
        .create_role("alice", &role("refunds-eu", "EU refunds"))
        .await
        .unwrap();
    // The schema as it was before migration 0025, with this deployment's data.
    let pool = testing::raw_pool(&platform.url).await;
    for statement in [
        "DROP TABLE upstream_shares",
        "ALTER TABLE upstreams DROP COLUMN shared_from",
        "DELETE FROM _sqlx_migrations WHERE version = 26",
        "DROP TABLE workspaces",
        "DROP TABLE this_workspace",
        "DELETE FROM _sqlx_migrations WHERE version = 25",
    ] {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    pool.close().await;
    let before = AuditLog::new(platform.store.clone())
        .verify()
        .await
        .unwrap();
    assert!(before.is_intact());
    let roles_before = platform.store.load_catalog().await.unwrap().roles;
    platform.store.close().await;
    drop(platform.admin);
    drop(platform.store);

    let store = Store::open(&platform.url).await.unwrap();
    assert!(store.is_platform());
    assert_eq!(store.workspace_slug(), "default");
    assert!(store.list_workspaces().await.unwrap().is_empty());
    let after = AuditLog::new(store.clone()).verify().await.unwrap();
    assert!(after.is_intact(), "{after:?}");
    assert_eq!(after.events, before.events);
    assert_eq!(
        after.verified_tip, before.verified_tip,
        "the same chain, to its tip"
    );
    assert_eq!(store.load_catalog().await.unwrap().roles, roles_before);
}
