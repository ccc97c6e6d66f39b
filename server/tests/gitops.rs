//! `serve --catalog FILE` (GitOps) with the real binary: the file is the catalog at start,
//! an edit of the file is in force for the next session without a restart, an invalid edit
//! leaves the catalog as it was, and the console is read-only for the catalog.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::console::{fetch_post, page, sign_in_admin};
use common::{Server, init, learn};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(30);

/// The demo catalog, exported to `dir/catalog.yaml` from a demo server's database.
fn demo_catalog(dir: &Path) -> std::path::PathBuf {
    let demo = Server::start();
    let file = dir.join("catalog.yaml");
    let out = demo.cli(&["catalog", "export", "--output", file.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    file
}

/// Whether a fresh session of `key` may learn `role` right now.
async fn may_learn(server: &Server, key: &str, role: &str) -> bool {
    let client = server.connect(key).await;
    let (session, _) = init(&client).await;
    let reply = learn(&client, &session, &format!("/roles/{role}")).await;
    let _ = client.cancel().await;
    !reply.is_error
}

/// Waits (polling, with a deadline) until `may_learn` answers `expected`.
async fn until_learnable(server: &Server, key: &str, role: &str, expected: bool) {
    let deadline = Instant::now() + DEADLINE;
    while may_learn(server, key, role).await != expected {
        assert!(
            Instant::now() < deadline,
            "`{role}` learnable is still not {expected}; server log:\n{}",
            std::fs::read_to_string(server.dir().join("server.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn admin_changes_by(server: &Server, prefix: &str) -> Vec<serde_json::Value> {
    server
        .audit_events()
        .into_iter()
        .filter(|e| e["kind"] == "admin_change")
        .filter(|e| e["actor"].as_str().is_some_and(|a| a.starts_with(prefix)))
        .collect()
}

#[tokio::test]
async fn a_served_catalog_file_is_applied_at_start_and_again_when_it_changes() {
    let files = tempfile::tempdir().unwrap();
    let file = demo_catalog(files.path());
    let server = Server::start_from_catalog(&file);
    let key = server.support_key.clone();

    // The file's catalog is the gateway's: its key works, its scope's roles are learnable.
    assert!(may_learn(&server, &key, "retention-desk").await);
    let at_start = admin_changes_by(&server, "catalog-apply:");
    assert!(!at_start.is_empty(), "the start applied the file");

    // A commit that takes the retention desk out of the support scope.
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.matches("\n  - retention-desk\n").count(), 1, "{text}");
    let edited = text.replace("\n  - retention-desk\n", "\n");
    std::fs::write(&file, &edited).unwrap();
    until_learnable(&server, &key, "retention-desk", false).await;
    assert!(may_learn(&server, &key, "tier-1-support").await);
    let changes = admin_changes_by(&server, "catalog-apply:");
    let new: Vec<_> = changes[at_start.len()..].to_vec();
    assert_eq!(new.len(), 1, "one entity changed: {new:?}");
    assert_eq!(new[0]["payload"]["action"], "scope.update");
    assert_eq!(new[0]["payload"]["target"], "scope:support");

    // A broken commit is not applied: the catalog stays as the last good file made it.
    std::fs::write(&file, edited.replace("roles:", "rolez:")).unwrap();
    let log = server.dir().join("server.log");
    let deadline = Instant::now() + DEADLINE;
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("was not applied")
    {
        assert!(Instant::now() < deadline, "the bad file was not reported");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(may_learn(&server, &key, "tier-1-support").await);
    assert!(!may_learn(&server, &key, "retention-desk").await);
    assert_eq!(
        admin_changes_by(&server, "catalog-apply:").len(),
        changes.len(),
        "nothing of the broken file was written"
    );
}

#[tokio::test]
async fn the_console_of_a_served_catalog_file_is_read_only_for_the_catalog_but_not_for_users() {
    let files = tempfile::tempdir().unwrap();
    let file = demo_catalog(files.path());
    let server = Server::start_from_catalog(&file);
    let admin = sign_in_admin(&server).await;

    let (_, roles) = page(&server, &admin.cookie, "/roles").await;
    assert!(roles.contains("Read-only catalog."), "{roles}");
    assert!(
        roles.contains(file.to_str().unwrap()),
        "the banner names the file"
    );

    let before = server.audit_events().len();
    let (_, refused) = fetch_post(
        &server,
        &admin,
        "/console/api/create_role",
        &[
            ("slug", "console-role"),
            ("title", "Made in the console"),
            ("description", "Should not exist."),
            ("instructions", "None."),
            ("csrf_token", &admin.token),
        ],
    )
    .await;
    assert!(refused.contains("managed as code"), "{refused}");
    assert!(refused.contains(file.to_str().unwrap()), "{refused}");
    let (_, revoke) = fetch_post(
        &server,
        &admin,
        "/console/api/revoke_key",
        &[("name", "demo-support"), ("csrf_token", &admin.token)],
    )
    .await;
    assert!(revoke.contains("managed as code"), "{revoke}");
    assert_eq!(
        server.audit_events().len(),
        before,
        "a refusal writes nothing"
    );
    let (_, roles) = page(&server, &admin.cookie, "/roles").await;
    assert!(!roles.contains("console-role"));

    // Console users are not part of the catalog: an admin still manages them.
    let (_, added) = fetch_post(
        &server,
        &admin,
        "/console/api/add_user",
        &[
            ("name", "rita"),
            ("role", "reviewer"),
            ("csrf_token", &admin.token),
        ],
    )
    .await;
    assert!(added.contains("Added `rita`"), "{added}");
    let created: Vec<_> = server
        .audit_events()
        .into_iter()
        .filter(|e| e["payload"]["target"] == json!("console_user:rita"))
        .collect();
    assert_eq!(created.len(), 1);
}
