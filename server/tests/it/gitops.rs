//! `serve --catalog FILE` (GitOps) with the real binary: the file is the catalog at start,
//! an edit of the file is in force for the next session without a restart, an invalid edit
//! leaves the catalog as it was, and the console is read-only for the catalog.

use crate::common;

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

/// How many times the server read and applied the file (with or without changes).
fn applies(server: &Server) -> usize {
    server_log(server)
        .lines()
        .filter(|l| l.contains("applied the catalog file") || l.contains("has no changes"))
        .count()
}

fn server_log(server: &Server) -> String {
    std::fs::read_to_string(server.dir().join("server.log")).unwrap_or_default()
}

/// How many lines of the server's log contain `text`.
fn logged(server: &Server, text: &str) -> usize {
    server_log(server)
        .lines()
        .filter(|l| l.contains(text))
        .count()
}

/// Waits (polling, with a deadline) until the server's log has `count` lines with `text`.
async fn until_logged(server: &Server, text: &str, count: usize) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let log = server_log(server);
        let seen = log.lines().filter(|l| l.contains(text)).count();
        if seen >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "`{text}` is logged {seen} times, not {count}; server log:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// utime + stime of the process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name (2nd field) is in parentheses; fields 14 and 15 count after it.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

#[tokio::test]
async fn one_edit_of_a_served_catalog_file_is_applied_once_and_then_nothing_is_read_again() {
    let files = tempfile::tempdir().unwrap();
    let file = demo_catalog(files.path());
    let server = Server::start_from_catalog(&file);
    let key = server.support_key.clone();
    assert_eq!(applies(&server), 1, "the start applied the file once");
    let at_start = admin_changes_by(&server, "catalog-apply:").len();

    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("\n  - retention-desk\n", "\n")).unwrap();
    until_learnable(&server, &key, "retention-desk", false).await;
    until_logged(&server, "applied the catalog file", 2).await;

    // Idle: the server's own reads of the file must not count as changes. Nothing happens
    // here by design, so this is a window, not a wait for a condition.
    let ticks = cpu_ticks(server.pid());
    let idle = Duration::from_secs(3);
    tokio::time::sleep(idle).await;
    let used = cpu_ticks(server.pid()) - ticks;
    assert_eq!(
        applies(&server),
        2,
        "applied once at start and once for the edit; log:\n{}",
        server_log(&server)
    );
    assert_eq!(
        admin_changes_by(&server, "catalog-apply:").len(),
        at_start + 1,
        "one entity changed, once"
    );
    // 100 ticks a second: an idle server uses (next to) none of them.
    assert!(used <= 10, "{used} ticks of CPU in {idle:?} idle");

    // Touching the file without changing it (an event, same bytes) applies nothing.
    let unchanged = logged(&server, "contents did not change");
    let same = std::fs::read(&file).unwrap();
    std::fs::write(&file, &same).unwrap();
    until_logged(&server, "contents did not change", unchanged + 1).await;
    assert_eq!(applies(&server), 2);
}

#[tokio::test]
async fn an_invalid_edit_is_reported_once_and_not_retried_while_the_file_stays_the_same() {
    let files = tempfile::tempdir().unwrap();
    let file = demo_catalog(files.path());
    let server = Server::start_from_catalog(&file);
    let text = std::fs::read_to_string(&file).unwrap();

    std::fs::write(&file, text.replace("roles:", "rolez:")).unwrap();
    until_logged(&server, "was not applied", 1).await;
    // The same bad bytes again (an event, no change): not applied, not reported again.
    let unchanged = logged(&server, "contents did not change");
    std::fs::write(&file, text.replace("roles:", "rolez:")).unwrap();
    until_logged(&server, "contents did not change", unchanged + 1).await;
    let log = server_log(&server);
    assert_eq!(log.matches("was not applied").count(), 1, "{log}");
    // The watch audits its refusal like `catalog apply` does: once, naming the file.
    let refusals = refusals_of(&server);
    let [refusal] = refusals.as_slice() else {
        panic!("expected one admin_refused event, got {refusals:#?}");
    };
    assert_eq!(refusal["payload"]["code"], "INVALID", "{refusal}");
    assert_eq!(
        refusal["payload"]["target"],
        format!("catalog-file:{}", file.display())
    );
    assert!(
        refusal["actor"]
            .as_str()
            .is_some_and(|a| a.starts_with("catalog-apply:")),
        "{refusal}"
    );
}

/// The `admin_refused` events of `catalog.apply`.
fn refusals_of(server: &Server) -> Vec<serde_json::Value> {
    server
        .audit_events()
        .into_iter()
        .filter(|e| e["kind"] == "admin_refused")
        .filter(|e| e["payload"]["action"] == "catalog.apply")
        .collect()
}

#[tokio::test]
async fn a_catalog_file_over_the_size_limit_is_refused_naming_the_limit_and_memory_stays_small() {
    let files = tempfile::tempdir().unwrap();
    let file = demo_catalog(files.path());
    let server = Server::start_from_catalog(&file);
    let key = server.support_key.clone();
    let before = rss_kib(server.pid());

    // A 50 MB file: the demo catalog and a long comment, as a careless commit could be.
    let mut big = std::fs::read_to_string(&file).unwrap();
    big.push_str(&format!("# {}\n", "x".repeat(50 * 1024 * 1024)));
    let next = files.path().join("catalog.yaml.new");
    std::fs::write(&next, &big).unwrap();
    std::fs::rename(&next, &file).unwrap();
    until_logged(&server, "could not be read", 1).await;
    let log = server_log(&server);
    assert!(
        log.contains("over the catalog size limit (--max-catalog-bytes) of 4194304 bytes (4 MiB)"),
        "{log}"
    );
    let after = rss_kib(server.pid());
    eprintln!("VmRSS before the big file: {before} kB, after: {after} kB");
    assert!(
        after < before + 16 * 1024,
        "the server grew from {before} kB to {after} kB"
    );
    // The catalog is as it was, and the refusal is not repeated for the same file.
    assert!(may_learn(&server, &key, "retention-desk").await);
    let same = files.path().join("catalog.yaml.same");
    std::fs::write(&same, &big).unwrap();
    std::fs::rename(&same, &file).unwrap();
    until_logged(&server, "still cannot be read", 1).await;
    assert_eq!(server_log(&server).matches("could not be read").count(), 1);
    let refusals = refusals_of(&server);
    let [refusal] = refusals.as_slice() else {
        panic!("expected one admin_refused event, got {refusals:#?}");
    };
    assert_eq!(refusal["payload"]["code"], "TOO_LARGE", "{refusal}");
    assert_eq!(refusal["actor"], "catalog-apply", "{refusal}");
}
