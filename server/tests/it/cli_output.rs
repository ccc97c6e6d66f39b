//! The one-shot commands print their result and nothing else: logs stay at `warn` unless
//! `RUST_LOG` asks for more, and carry no colour codes when stderr is not a terminal.

use crate::common;

use std::process::{Command, Output};

use common::{BIN, Server};

fn run(server: &Server, args: &[&str], rust_log: Option<&str>) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .args(["--database-url", &server.database_url()])
        .env_remove("RUST_LOG");
    if let Some(filter) = rust_log {
        command.env("RUST_LOG", filter);
    }
    command.output().expect("the skillgate binary runs")
}

#[test]
fn key_create_and_list_print_their_result_and_no_log_lines() {
    let server = Server::start();
    let created = run(
        &server,
        &["key", "create", "--name", "quiet-key", "--scope", "support"],
        None,
    );
    assert!(created.status.success(), "{created:?}");
    assert!(
        String::from_utf8_lossy(&created.stdout).starts_with("agent key for scope support: sgk_"),
        "{created:?}"
    );
    assert_eq!(String::from_utf8_lossy(&created.stderr), "");

    let listed = run(&server, &["key", "list"], None);
    assert!(listed.status.success(), "{listed:?}");
    assert!(String::from_utf8_lossy(&listed.stdout).contains("quiet-key"));
    assert_eq!(String::from_utf8_lossy(&listed.stderr), "");
}

#[test]
fn audit_verify_prints_its_verdict_and_no_log_lines() {
    let server = Server::start();
    let verified = run(&server, &["audit", "verify"], None);
    assert!(verified.status.success(), "{verified:?}");
    assert!(!verified.stdout.is_empty(), "{verified:?}");
    assert_eq!(String::from_utf8_lossy(&verified.stderr), "");
}

#[test]
fn rust_log_brings_the_logs_back_without_colour_codes_into_a_pipe() {
    let server = Server::start();
    let listed = run(&server, &["key", "list"], Some("debug"));
    assert!(listed.status.success(), "{listed:?}");
    let stderr = String::from_utf8_lossy(&listed.stderr);
    assert!(!stderr.is_empty(), "RUST_LOG=debug logs something");
    assert!(!stderr.contains('\u{1b}'), "no escape codes: {stderr}");
}

/// The `admin_change` events of the server's database as `(actor, action, target)`.
fn admin_changes(server: &Server) -> Vec<(String, String, String)> {
    server
        .audit_events()
        .into_iter()
        .filter(|e| e["kind"] == "admin_change")
        .map(|e| {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
            (
                text(&e["actor"]),
                text(&e["payload"]["action"]),
                text(&e["payload"]["target"]),
            )
        })
        .collect()
}

#[test]
fn each_admin_command_of_the_cli_writes_exactly_one_admin_change_event_by_the_local_user() {
    let server = Server::start();
    let actor = "cli:door-test";
    let mut seen = admin_changes(&server).len();
    let mut step = |args: &[&str], input: Option<&str>, action: &str, target: &str| {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .args(["--database-url", &server.database_url()])
            .env("USER", "door-test")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = command.spawn().expect("the skillgate binary runs");
        if let Some(input) = input {
            use std::io::Write;
            writeln!(child.stdin.take().unwrap(), "{input}").unwrap();
        }
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        let changes = admin_changes(&server);
        assert_eq!(
            changes[seen..],
            [(actor.to_owned(), action.to_owned(), target.to_owned())],
            "{args:?}"
        );
        seen = changes.len();
    };
    step(
        &["key", "create", "--name", "door-key", "--scope", "support"],
        None,
        "agent_key.create",
        "agent_key:door-key",
    );
    step(
        &["key", "revoke", "door-key"],
        None,
        "agent_key.revoke",
        "agent_key:door-key",
    );
    step(
        &["user", "add", "dora", "--role", "viewer"],
        Some("a long enough password"),
        "console_user.create",
        "console_user:dora",
    );
    step(
        &["user", "passwd", "dora"],
        Some("another long password"),
        "console_user.reset_password",
        "console_user:dora",
    );
}
