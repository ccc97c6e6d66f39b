//! Every admin change goes through one door and leaves exactly one `admin_change` event per
//! entity it changed; a refused change leaves none. Against a real SQLite file with the
//! demo catalog, one change path at a time.

use std::sync::Arc;

use serde_json::{Value, json};
use skillgate_core::admin::{AdminService, CredentialUpdate};
use skillgate_core::audit::{AuditLog, EventKind};
use skillgate_core::model::{Role, Scope, Skill, ToolSpec, Upstream, UpstreamKind};
use skillgate_core::policy::CatalogHandle;
use skillgate_core::revisions::{Proposal, Revisions};
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;
use skillgate_core::store::revisions::Proposer;
use skillgate_core::users::{ConsoleRole, Password, Users};

struct Fixture {
    admin: Arc<AdminService>,
    revisions: Revisions,
    store: Store,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&skillgate_core::store::testing::database_url(
        dir.path(),
        "door.db",
    ))
    .await
    .unwrap();
    store.seed_demo("/nonexistent/skillgate").await.unwrap();
    let handle = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
    let admin = Arc::new(AdminService::new(
        store.clone(),
        AuditLog::new(store.clone()),
        handle,
    ));
    Fixture {
        revisions: Revisions::new(admin.clone()),
        admin,
        store,
        _dir: dir,
    }
}

fn slug(text: &str) -> Slug {
    Slug::parse(text).unwrap()
}

/// The `(actor, action, target)` of every `admin_change` event, in chain order.
async fn admin_changes(store: &Store) -> Vec<(String, String, String)> {
    let rows: Vec<(Option<String>, String)> =
        sqlx::query_as("SELECT actor, payload FROM audit_events WHERE kind = $1 ORDER BY seq")
            .bind(EventKind::AdminChange.as_str())
            .fetch_all(store.test_pool())
            .await
            .unwrap();
    rows.into_iter()
        .map(|(actor, payload)| {
            let payload: Value = serde_json::from_str(&payload).unwrap();
            (
                actor.unwrap_or_default(),
                payload["action"].as_str().unwrap_or_default().to_owned(),
                payload["target"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Runs one change and returns the events it added.
async fn events_of<T, E: std::fmt::Debug>(
    store: &Store,
    change: impl std::future::Future<Output = Result<T, E>>,
) -> (Result<T, E>, Vec<(String, String, String)>) {
    let before = admin_changes(store).await.len();
    let result = change.await;
    let after = admin_changes(store).await;
    (result, after[before..].to_vec())
}

fn one(events: &[(String, String, String)], actor: &str, action: &str, target: &str) {
    assert_eq!(
        events,
        [(actor.to_owned(), action.to_owned(), target.to_owned())],
        "expected exactly one `{action}` on `{target}` by `{actor}`"
    );
}

fn role(max_title: &str) -> Role {
    Role {
        slug: slug("door-role"),
        title: max_title.into(),
        description: "A role for the door test.".into(),
        instructions: "Look customers up.".into(),
        skills: vec![slug("customer-lookup")],
        limits: Vec::new(),
    }
}

#[tokio::test]
async fn every_catalog_change_path_writes_exactly_one_admin_change_event() {
    let f = fixture().await;
    let (a, s) = (&f.admin, &f.store);

    let (rev, ev) = events_of(s, a.create_role("ada", &role("Door role"))).await;
    one(&ev, "ada", "role.create", "role:door-role");
    let (rev, ev) = events_of(s, a.update_role("ada", &role("Door role 2"), rev.unwrap())).await;
    one(&ev, "ada", "role.update", "role:door-role");
    rev.unwrap();

    let scope = Scope {
        slug: slug("door-scope"),
        description: String::new(),
        roles: vec![slug("door-role")],
        guardrails: Vec::new(),
    };
    let (rev, ev) = events_of(s, a.create_scope("ada", &scope)).await;
    one(&ev, "ada", "scope.create", "scope:door-scope");
    let changed = Scope {
        description: "Now described.".into(),
        ..scope.clone()
    };
    let (_, ev) = events_of(s, a.update_scope("ada", &changed, rev.unwrap())).await;
    one(&ev, "ada", "scope.update", "scope:door-scope");

    let skill = Skill {
        slug: slug("door-skill"),
        description: "A skill for the door test.".into(),
        instructions: "Say hello.".into(),
        tools: vec!["lookup_customer".into()],
        resources: Vec::new(),
        frontmatter_extra: Default::default(),
    };
    let (saved, ev) = events_of(s, a.create_skill("ada", &skill)).await;
    one(&ev, "ada", "skill.create", "skill:door-skill");
    let second = Skill {
        instructions: "Say hello twice.".into(),
        ..skill.clone()
    };
    let (saved, ev) = events_of(s, a.update_skill("ada", &second, saved.unwrap().revision)).await;
    one(&ev, "ada", "skill.update", "skill:door-skill");
    let (_, ev) = events_of(
        s,
        a.restore_skill_version("ada", &skill.slug, 1, saved.unwrap().revision),
    )
    .await;
    one(&ev, "ada", "skill.restore", "skill:door-skill");

    let upstream = Upstream {
        name: slug("door-upstream"),
        kind: UpstreamKind::Http {
            url: "http://127.0.0.1:9/mcp".into(),
            ca_bundle: None,
            allow_plaintext: false,
        },
    };
    let (_, ev) = events_of(
        s,
        a.register_upstream("ada", &upstream, CredentialUpdate::default()),
    )
    .await;
    one(&ev, "ada", "upstream.create", "upstream:door-upstream");
    let (_, ev) = events_of(
        s,
        a.register_upstream("ada", &upstream, CredentialUpdate::default()),
    )
    .await;
    one(&ev, "ada", "upstream.update", "upstream:door-upstream");

    let (_, ev) = events_of(
        s,
        a.set_sensitive_args("ada", "lookup_customer", &["customer_id".into()]),
    )
    .await;
    one(&ev, "ada", "tool.sensitive_args", "tool:lookup_customer");

    // A sync that offers one new tool: one quarantine event, by the sync.
    let offered = ToolSpec {
        name: "door_tool".into(),
        description: "A tool the door upstream offers.".into(),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations: None,
        sensitive_args: Vec::new(),
    };
    let (sync, ev) = events_of(s, a.sync_tools(&upstream.name, vec![offered.clone()])).await;
    one(
        &ev,
        "upstream-sync:door-upstream",
        "tool.quarantine",
        "tool:door_tool",
    );
    let offer = sync.unwrap().changes[0].after["offered"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, ev) = events_of(s, a.admit_tool("ada", "door_tool", &offer)).await;
    one(&ev, "ada", "tool.admit", "tool:door_tool");
    // The same offer again changes nothing and says nothing.
    let (_, ev) = events_of(s, a.sync_tools(&upstream.name, vec![offered])).await;
    assert!(ev.is_empty(), "{ev:?}");
    // Not listed any more: flagged missing, once.
    let (_, ev) = events_of(s, a.sync_tools(&upstream.name, Vec::new())).await;
    one(
        &ev,
        "upstream-sync:door-upstream",
        "tool.missing",
        "tool:door_tool",
    );

    let (key, ev) = events_of(s, a.create_key("ada", "door-key", &slug("support"), None)).await;
    one(&ev, "ada", "agent_key.create", "agent_key:door-key");
    let (_, secret) = key.unwrap();
    let (_, ev) = events_of(s, a.revoke_key("ada", "door-key")).await;
    one(&ev, "ada", "agent_key.revoke", "agent_key:door-key");
    let everything = serde_json::to_string(&admin_changes(s).await).unwrap();
    assert!(!everything.contains(secret.expose()));

    let (_, ev) = events_of(s, a.set_retention_days("ada", Some(90))).await;
    one(&ev, "ada", "audit.retention", "audit:retention_days");
    let (_, ev) = events_of(s, a.set_retention_days("ada", Some(90))).await;
    assert!(ev.is_empty(), "an unchanged period is no change: {ev:?}");
}

#[tokio::test]
async fn every_user_change_path_writes_exactly_one_admin_change_event() {
    let f = fixture().await;
    let (a, s) = (&f.admin, &f.store);
    let (_, ev) = events_of(s, a.bootstrap_admin()).await;
    one(
        &ev,
        "bootstrap",
        "console_user.create",
        "console_user:admin",
    );
    let (_, ev) = events_of(s, a.bootstrap_admin()).await;
    assert!(ev.is_empty());
    let root = Users::new(s.clone())
        .list()
        .await
        .unwrap()
        .into_iter()
        .find(|u| u.name == "admin")
        .unwrap();

    let (_, ev) = events_of(
        s,
        a.add_user(
            "cli:ops",
            "rita",
            ConsoleRole::Viewer,
            Some(Password::new("a long enough password")),
        ),
    )
    .await;
    one(&ev, "cli:ops", "console_user.create", "console_user:rita");
    let (_, ev) = events_of(
        s,
        a.change_user_access(&root, "rita", ConsoleRole::Reviewer, false),
    )
    .await;
    one(&ev, "admin", "console_user.update", "console_user:rita");
    let (_, ev) = events_of(s, a.reset_user_password("admin", "rita")).await;
    one(
        &ev,
        "admin",
        "console_user.reset_password",
        "console_user:rita",
    );
    let (_, ev) = events_of(
        s,
        a.set_user_password("cli:ops", "rita", Password::new("another long password")),
    )
    .await;
    one(
        &ev,
        "cli:ops",
        "console_user.reset_password",
        "console_user:rita",
    );
}

#[tokio::test]
async fn every_revision_path_writes_exactly_one_admin_change_event_with_its_record() {
    let f = fixture().await;
    let (r, s) = (&f.revisions, &f.store);
    let (fb, ev) = events_of(
        s,
        r.add_human_feedback("refund-handling", 2, "Ask for the order id.", false, "rita"),
    )
    .await;
    one(&ev, "rita", "feedback.add", "skill:refund-handling");
    let fb = fb.unwrap();
    let (_, ev) = events_of(
        s,
        r.add_pattern(
            "refund-handling",
            "order first",
            "Ask for the order id first.",
            std::slice::from_ref(&fb),
            "rita",
        ),
    )
    .await;
    one(&ev, "rita", "wiki_pattern.add", "skill:refund-handling");

    let proposal = || Proposal {
        skill: "refund-handling".into(),
        base_version: 1,
        instructions: "# Refunds\n\nConfirm the order id, then check eligibility.".into(),
        note: "Wrong orders were refunded.".into(),
        sources: vec![fb.clone()],
        evidence: json!({"pairs": [{"case_id": "c1", "verdict": "better"}]}),
        ..Proposal::default()
    };
    let (first, ev) = events_of(s, r.propose(proposal(), Proposer::User("paula".into()))).await;
    one(
        &ev,
        "paula",
        "skill_candidate.propose",
        "skill:refund-handling",
    );
    let (second, _) = events_of(s, r.propose(proposal(), Proposer::User("paula".into()))).await;
    let (_, ev) = events_of(s, r.reject(&second.unwrap().id, "rita", "duplicate")).await;
    one(
        &ev,
        "rita",
        "skill_candidate.reject",
        "skill:refund-handling",
    );
    let first = first.unwrap();
    let (_, ev) = events_of(s, r.approve(&first.id, "rita", "better")).await;
    one(
        &ev,
        "rita",
        "skill_candidate.approve",
        "skill:refund-handling",
    );
    assert_eq!(
        f.admin
            .live()
            .catalog()
            .skill("refund-handling")
            .unwrap()
            .version,
        2,
        "the approval swapped the live catalog"
    );
    let (_, ev) = events_of(s, r.restore("refund-handling", 1, "rita")).await;
    one(&ev, "rita", "skill.restore", "skill:refund-handling");
}

#[tokio::test]
async fn refused_changes_write_no_event_and_name_the_field_they_are_about() {
    let f = fixture().await;
    let (a, s) = (&f.admin, &f.store);
    let before = admin_changes(s).await.len();

    let long = Role {
        description: "x".repeat(501),
        ..role("Door role")
    };
    let error = a.create_role("ada", &long).await.unwrap_err();
    assert_eq!(error.field(), Some("description"), "{error}");

    let error = a
        .create_key("ada", "bad name!", &slug("support"), None)
        .await
        .unwrap_err();
    assert_eq!(error.field(), Some("name"), "{error}");
    let error = a
        .create_key("ada", "fine", &slug("no-such-scope"), None)
        .await
        .unwrap_err();
    assert_eq!(error.field(), Some("scope"), "{error}");

    let upstream = Upstream {
        name: slug("tls"),
        kind: UpstreamKind::Http {
            url: "ftp://example.test/mcp".into(),
            ca_bundle: None,
            allow_plaintext: false,
        },
    };
    let error = a
        .register_upstream("ada", &upstream, CredentialUpdate::default())
        .await
        .unwrap_err();
    assert_eq!(error.field(), Some("url"), "{error}");

    let error = a.set_retention_days("ada", Some(0)).await.unwrap_err();
    assert_eq!(error.field(), Some("days"), "{error}");

    let error = a
        .add_user(
            "ada",
            "bob",
            ConsoleRole::Viewer,
            Some(Password::new("short")),
        )
        .await
        .unwrap_err();
    assert_eq!(error.field(), Some("password"), "{error}");

    let error = a.revoke_key("ada", "nobody").await.unwrap_err();
    assert!(error.is_user_error(), "{error}");

    assert_eq!(
        admin_changes(s).await.len(),
        before,
        "a refusal is never audited"
    );
}
