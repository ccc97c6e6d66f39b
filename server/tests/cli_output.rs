//! The one-shot commands print their result and nothing else: logs stay at `warn` unless
//! `RUST_LOG` asks for more, and carry no colour codes when stderr is not a terminal.

mod common;

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
