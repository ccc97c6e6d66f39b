//! `skillgate migrate` through the real binary: a SQLite deployment with real activity
//! (governed calls, a held refund, feedback, a revoked key, a console user allowed a scope,
//! an OAuth client, signed checkpoints) copied into an empty PostgreSQL database, which
//! then verifies with the same tip and serves the same agents.

use crate::common;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::console::{add_user, http, sign_in};
use common::{BIN, Client, Server, call, init, learn, platform};
use reqwest::StatusCode;
use rmcp::ServiceExt as _;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use skillgate_core::store::copy::COPIED_TABLES;
use skillgate_core::store::testing::{postgres_url, raw_pool, sqlite_only};

const PASSWORD: &str = "a long password for alice";

fn refund(amount: u32) -> Value {
    json!({"customer_id": "C-1003", "order_id": "O-5005", "amount": amount,
           "reason": "Premium support not delivered"})
}

/// A tier-1 session whose refund eligibility was checked: a governed call that ran.
async fn eligible_session(agent: &Client) -> String {
    let (session, _) = init(agent).await;
    assert!(
        !learn(agent, &session, "/roles/tier-1-support")
            .await
            .is_error
    );
    let check = json!({"customer_id": "C-1003", "order_id": "O-5005"});
    let checked = call(agent, &session, "check_refund_eligibility", check).await;
    assert!(!checked.is_error, "{}", checked.text);
    session
}

/// A stopped `serve --demo` on a SQLite file, after real activity; and the secret of the
/// key it revoked.
async fn deployment() -> (Server, String) {
    let mut server = Server::start();
    let agent = server.connect(&server.support_key).await;
    let session = eligible_session(&agent).await;
    let held = call(&agent, &session, "process_refund", refund(300)).await;
    assert_eq!(
        held.structured["decision"], "pending_approval",
        "{}",
        held.text
    );
    let refunded = call(&agent, &session, "process_refund", refund(120)).await;
    assert!(!refunded.is_error, "{}", refunded.text);
    let rated = platform(
        &agent,
        "feedback_skill",
        json!({"skill": "refund-handling", "rating": 4, "comment": "clear steps",
               "session_id": session}),
    )
    .await;
    assert!(!rated.is_error, "{}", rated.text);
    drop(agent);

    let revoked = server.create_key("old-laptop", "support");
    server.revoke_key("old-laptop");
    add_user(&server, "alice", "viewer", PASSWORD);
    let allowed = server.cli(&["user", "scopes", "alice", "--allow", "support"]);
    assert!(allowed.status.success(), "{allowed:?}");
    sign_in(&server, "alice", PASSWORD).await;
    let registered = http()
        .post(format!("{}/oauth/register", server.base))
        .json(&json!({
            "client_name": "Desktop agent",
            "redirect_uris": ["http://127.0.0.1/callback"],
            "token_endpoint_auth_method": "none",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), StatusCode::CREATED);

    // A clean stop signs the final checkpoint of the chain.
    assert!(server.terminate().success());
    (server, revoked)
}

fn key_file(server: &Server) -> PathBuf {
    server.dir().join("audit-signing.key")
}

fn migrate(from: &str, to: &str) -> Output {
    Command::new(BIN)
        .args(["migrate", "--from", from, "--to", to])
        .output()
        .expect("the skillgate binary runs")
}

/// `skillgate audit verify` of the database at `url`, trusting the deployment's key.
fn verify(url: &str, key: &Path) -> Output {
    Command::new(BIN)
        .args(["audit", "verify", "--database-url", url])
        .arg("--audit-signing-key")
        .arg(key)
        .output()
        .expect("the skillgate binary runs")
}

/// The first line of a passing `audit verify`: `audit chain intact: N events (tip seq S,
/// hash H)`.
fn intact_line(output: &Output) -> String {
    assert!(output.status.success(), "audit verify: {output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().next().unwrap_or_default().to_owned();
    assert!(line.starts_with("audit chain intact: "), "{stdout}");
    line
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn row_counts(url: &str) -> Vec<(&'static str, i64)> {
    let pool = raw_pool(url).await;
    let mut counts = Vec::new();
    for table in COPIED_TABLES {
        let rows: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(&pool)
            .await
            .unwrap();
        counts.push((*table, rows));
    }
    pool.close().await;
    counts
}

/// `skillgate serve` (no demo seed) on the copy, with the deployment's signing key.
struct CopyServer {
    child: Child,
    base: String,
    executions: PathBuf,
}

impl Drop for CopyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl CopyServer {
    fn start(database_url: &str, key: &Path, dir: &Path) -> Self {
        skillgate_core::upstream::install_crypto_provider();
        let executions = dir.join("copy-exec.jsonl");
        let log = dir.join("copy.log");
        let mut child = Command::new(BIN)
            .args([
                "serve",
                "--bind",
                "127.0.0.1:0",
                "--database-url",
                database_url,
            ])
            .arg("--audit-signing-key")
            .arg(key)
            .arg("--site-root")
            .arg(dir)
            .env("SKILLGATE_DEMO_EXECUTIONS_LOG", &executions)
            .env("RUST_LOG", "info,sqlx=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .expect("the skillgate binary starts");
        let stdout = child.stdout.take().unwrap();
        let (lines, received) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let base = loop {
            match received.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    if let Some(url) = line.strip_prefix("Skillgate is listening on ") {
                        break url.trim().to_owned();
                    }
                }
                Err(error) => panic!(
                    "the server on the copy did not start ({error}):\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                ),
            }
        };
        Self {
            child,
            base,
            executions,
        }
    }

    async fn connect(&self, key: &str) -> Client {
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", self.base))
            .auth_header(key);
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("the MCP handshake succeeds")
    }

    /// Stops it as a service manager does, which signs a final checkpoint.
    fn terminate(mut self) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        assert!(self.child.wait().unwrap().success());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sqlite_deployment_copied_to_postgresql_verifies_with_the_same_tip_and_serves_its_agents()
{
    if sqlite_only("a_sqlite_deployment_copied_to_postgresql…") {
        return;
    }
    let (server, revoked_key) = deployment().await;
    let sqlite = server.database_url();
    let key = key_file(&server);
    let before = intact_line(&verify(&sqlite, &key));

    let postgres = postgres_url();
    // testpg trusts every local connection: the password is only there to be hidden.
    let with_password = postgres.replacen("postgres@", "postgres:hunter2@", 1);
    let migrated = migrate(&sqlite, &with_password);
    let (stdout, stderr) = (text(&migrated.stdout), text(&migrated.stderr));
    assert!(migrated.status.success(), "{stdout}\n{stderr}");
    let tip_hash = before.rsplit("hash ").next().unwrap().trim_end_matches(')');
    assert!(
        stdout.contains("The copy's audit chain verifies with the source's tip")
            && stdout.contains(tip_hash),
        "{stdout}"
    );
    assert!(
        stdout.contains("console_sessions (console sign-ins"),
        "{stdout}"
    );
    assert!(stdout.contains(&key.display().to_string()), "{stdout}");
    assert!(!stdout.contains("hunter2") && !stderr.contains("hunter2"));

    assert_eq!(intact_line(&verify(&postgres, &key)), before);
    let (source_rows, copy_rows) = (row_counts(&sqlite).await, row_counts(&postgres).await);
    assert_eq!(copy_rows, source_rows);
    for (table, rows) in &source_rows {
        assert!(
            stdout.contains(&format!("  {table:<26}{rows:>10}\n")),
            "{table}: {stdout}"
        );
    }
    let rows = |table: &str| source_rows.iter().find(|(t, _)| *t == table).unwrap().1;
    for table in [
        "agent_keys",
        "console_users",
        "console_user_scopes",
        "governance_sessions",
        "holds",
        "skill_feedback",
        "oauth_clients",
        "audit_events",
        "audit_checkpoints",
        "audit_session_summaries",
    ] {
        assert!(rows(table) > 0, "the deployment has {table} rows");
    }
    let scopes = Command::new(BIN)
        .args(["user", "scopes", "alice", "--database-url", &postgres])
        .output()
        .unwrap();
    assert!(
        scopes.status.success() && text(&scopes.stdout).contains("support"),
        "{scopes:?}"
    );

    // The demo agent key works on a server on the copy, and the revoked one does not.
    let copy = CopyServer::start(&postgres, &key, server.dir());
    let agent = copy.connect(&server.support_key).await;
    eligible_session(&agent).await;
    let executed = std::fs::read_to_string(&copy.executions).unwrap_or_default();
    assert!(
        executed.contains("check_refund_eligibility"),
        "the upstream ran the call: {executed}"
    );
    drop(agent);
    let revoked = http()
        .post(format!("{}/mcp", copy.base))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(&revoked_key)
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), StatusCode::UNAUTHORIZED);
    copy.terminate();

    // Served with the same key, the copy's chain grew and still verifies against it.
    let after = intact_line(&verify(&postgres, &key));
    assert_ne!(after, before);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_migrate_into_the_copy_is_refused_and_changes_nothing() {
    if sqlite_only("a_second_migrate_into_the_copy_is_refused_and_changes_nothing") {
        return;
    }
    let (server, _) = deployment().await;
    let sqlite = server.database_url();
    let key = key_file(&server);
    let postgres = postgres_url();
    let first = migrate(&sqlite, &postgres);
    assert!(first.status.success(), "{first:?}");
    let rows = row_counts(&postgres).await;
    let tip = intact_line(&verify(&postgres, &key));

    let second = migrate(&sqlite, &postgres);
    assert!(!second.status.success(), "{second:?}");
    let stderr = text(&second.stderr);
    assert!(
        stderr.contains("the target database is not empty")
            && stderr.contains("nothing was copied"),
        "{stderr}"
    );
    assert_eq!(row_counts(&postgres).await, rows);
    assert_eq!(intact_line(&verify(&postgres, &key)), tip);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_copy_of_a_tampered_chain_is_reported_as_not_verifying() {
    if sqlite_only("a_copy_of_a_tampered_chain_is_reported_as_not_verifying") {
        return;
    }
    let (server, _) = deployment().await;
    let sqlite = server.database_url();
    let pool = raw_pool(&sqlite).await;
    sqlx::query("UPDATE audit_events SET payload = $1 WHERE seq = 3")
        .bind(r#"{"tampered":true}"#)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    let postgres = postgres_url();
    let migrated = migrate(&sqlite, &postgres);
    let (stdout, stderr) = (text(&migrated.stdout), text(&migrated.stderr));
    assert!(!migrated.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("Audit chain of the copy:   does NOT verify"),
        "{stdout}"
    );
    assert!(
        stderr.contains("the copy's audit chain is BROKEN: event 3 was changed"),
        "{stderr}"
    );
    assert!(stderr.contains("the source's does not either"), "{stderr}");
    assert!(!verify(&postgres, &key_file(&server)).status.success());
}

#[test]
fn a_source_file_that_does_not_exist_is_refused_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let from = format!("sqlite://{}", dir.path().join("typo.db").display());
    let to = format!("sqlite://{}", dir.path().join("copy.db").display());
    let output = migrate(&from, &to);
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("there is no database file at"),
        "{output:?}"
    );
    assert!(!dir.path().join("typo.db").exists());
    assert!(!dir.path().join("copy.db").exists());
}

#[tokio::test]
async fn a_deployment_with_workspaces_is_copied_workspace_by_workspace_each_chain_proven() {
    if sqlite_only("a_deployment_with_workspaces_is_copied_workspace_by_workspace…") {
        return;
    }
    let mut server = Server::start();
    server.create_workspace_like_default("finance");
    assert!(server.terminate().success());
    let sqlite = server.database_url();
    let key = key_file(&server);

    let postgres = postgres_url();
    let migrated = migrate(&sqlite, &postgres);
    let (stdout, stderr) = (text(&migrated.stdout), text(&migrated.stderr));
    assert!(migrated.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("from workspace finance of"),
        "the workspace is copied too: {stdout}"
    );
    assert_eq!(
        stdout
            .matches("The copy's audit chain verifies with the source's tip")
            .count(),
        2,
        "the platform's chain and finance's, each proven: {stdout}"
    );

    let keys = |url: &str| {
        let listed = Command::new(BIN)
            .args([
                "--workspace",
                "finance",
                "key",
                "list",
                "--database-url",
                url,
            ])
            .output()
            .unwrap();
        assert!(listed.status.success(), "{listed:?}");
        text(&listed.stdout)
    };
    assert_eq!(
        keys(&postgres),
        keys(&sqlite),
        "finance's keys, in finance's schema"
    );
    let verified = Command::new(BIN)
        .args([
            "audit",
            "verify",
            "--every-workspace",
            "--database-url",
            &postgres,
        ])
        .arg("--audit-signing-key")
        .arg(&key)
        .output()
        .unwrap();
    assert!(verified.status.success(), "{verified:?}");
    assert!(text(&verified.stdout).contains("workspace finance:"));
}
