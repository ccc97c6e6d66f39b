//! The real binary on PostgreSQL as operators deploy it: over TLS verified against a CA of
//! their own (`sslmode=verify-full&sslrootcert=FILE`), several replicas starting for the
//! first time at the same moment on an empty database, and replicas sharing per-address
//! rate limits. Always PostgreSQL, whatever `SKILLGATE_TEST_DATABASE` says; the TLS test
//! on a throwaway server of its own that speaks only TLS over TCP, with a certificate
//! signed by a CA made here. The store's own TLS tests are in core/tests/it/postgres_tls.rs.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{BIN, Server};
use skillgate_testpg::TempPostgres;
use skillgate_testpg::tls::TlsPostgres;

/// How long a process may take to print its listening line or to exit.
const DEADLINE: Duration = Duration::from_secs(60);

fn tls_postgres() -> &'static TlsPostgres {
    TlsPostgres::shared()
}

#[tokio::test]
async fn skillgate_serves_on_postgresql_over_verified_tls_and_refuses_another_ca_at_start() {
    let pg = tls_postgres();
    let (database, url) = pg.database(&pg.ca_file);
    let server = Server::start_on(url, &[]);
    let health = reqwest::get(format!("{}/healthz", server.base))
        .await
        .unwrap();
    assert_eq!(health.status(), reqwest::StatusCode::OK);
    let (tls, clear) = pg.connections(&database);
    assert!(tls >= 2, "{tls} TLS connections");
    assert_eq!(clear, 0, "connections in the clear");
    // A one-shot command on the same URL.
    let verify = server.cli(&["audit", "verify"]);
    assert!(verify.status.success(), "{verify:?}");

    let (_, wrong) = pg.database(&pg.other_ca_file);
    let files = tempfile::tempdir().unwrap();
    let mut child = serve(files.path(), &wrong, &[]);
    let status = wait_exit(&mut child);
    let stderr = std::fs::read_to_string(files.path().join("serve.log")).unwrap();
    assert!(
        !status.success(),
        "served with an untrusted database certificate"
    );
    assert!(
        stderr.contains("UnknownIssuer"),
        "the refusal does not say why: {stderr}"
    );
}

/// `skillgate serve ARGS` on `url`, its stdout piped, its stderr in `dir/serve.log`, its
/// audit signing key `dir/audit-signing.key` (shared by every process started in `dir`).
fn serve(dir: &Path, url: &str, args: &[&str]) -> Child {
    serve_logging(dir, url, args, "serve.log")
}

fn serve_logging(dir: &Path, url: &str, args: &[&str], log: &str) -> Child {
    Command::new(BIN)
        .arg("serve")
        .args(["--bind", "127.0.0.1:0", "--database-url", url])
        .arg("--site-root")
        .arg(dir)
        .args(args)
        .env("SKILLGATE_AUDIT_SIGNING_KEY", dir.join("audit-signing.key"))
        .env("SKILLGATE_DEMO_EXECUTIONS_LOG", dir.join("exec.jsonl"))
        .env("RUST_LOG", "info,sqlx=warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join(log)).unwrap())
        .spawn()
        .expect("the skillgate binary starts")
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "skillgate did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A process started by [`serve`]; killed when dropped.
struct Started {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a process printed up to its listening line: `Ok((base URL, lines))`, or `Err`
/// with what it printed when it exited first.
fn until_listening(started: &mut Started) -> Result<(String, Vec<String>), Vec<String>> {
    let deadline = Instant::now() + DEADLINE;
    let mut printed = Vec::new();
    loop {
        match started.lines.recv_timeout(Duration::from_millis(50)) {
            Ok(line) => {
                if let Some(base) = line.strip_prefix("Skillgate is listening on ") {
                    return Ok((base.trim().to_owned(), printed));
                }
                printed.push(line);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(printed),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                assert!(
                    Instant::now() < deadline,
                    "skillgate neither listened nor exited; it printed {printed:?}"
                );
            }
        }
    }
}

fn start(dir: &Path, url: &str, args: &[&str], log: &str) -> Started {
    let mut child = serve_logging(dir, url, args, log);
    let stdout = child.stdout.take().unwrap();
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    Started { child, lines }
}

/// Rounds of two first starts: each round is one chance for the two to interleave.
const ROUNDS: usize = 8;

#[tokio::test]
async fn two_replicas_first_starting_at_once_on_an_empty_database_both_serve_and_one_creates_admin()
{
    // `reqwest::get` below builds a client of its own, which needs the process's TLS
    // provider (in one process with the other tests, one of them had installed it).
    skillgate_core::upstream::install_crypto_provider();
    let pg = TempPostgres::shared();
    let mut failures = Vec::new();
    for round in 0..ROUNDS {
        let url = pg.fresh_database();
        let database = url.rsplit('/').next().unwrap().to_owned();
        // One directory: the replicas share the signing key file, created on first start.
        let dir = tempfile::tempdir().unwrap();
        let mut replicas = [
            start(dir.path(), &url, &["--demo"], "a.log"),
            start(dir.path(), &url, &["--demo"], "b.log"),
        ];
        let mut passwords = 0;
        let mut keys = 0;
        for (i, replica) in replicas.iter_mut().enumerate() {
            match until_listening(replica) {
                Ok((base, printed)) => {
                    passwords += printed
                        .iter()
                        .filter(|l| l.starts_with("  password: "))
                        .count();
                    keys += printed
                        .iter()
                        .filter(|l| l.starts_with("agent key for scope support: "))
                        .count();
                    let health = reqwest::get(format!("{base}/healthz")).await.unwrap();
                    assert_eq!(health.status(), reqwest::StatusCode::OK);
                }
                Err(printed) => {
                    let log = std::fs::read_to_string(dir.path().join(if i == 0 {
                        "a.log"
                    } else {
                        "b.log"
                    }))
                    .unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(5).collect();
                    failures.push(format!(
                        "round {round}, replica {i} exited: printed {printed:?}, log tail {tail:?}"
                    ));
                }
            }
        }
        if !failures.is_empty() {
            continue;
        }
        assert_eq!(
            passwords, 1,
            "round {round}: the admin password printed {passwords} times"
        );
        assert_eq!(keys, 1, "round {round}: the demo key printed {keys} times");
        let admins = pg
            .psql(&database, "SELECT COUNT(*) FROM console_users")
            .unwrap();
        assert_eq!(admins, "1", "round {round}");
        let demo_keys = pg
            .psql(&database, "SELECT COUNT(*) FROM agent_keys")
            .unwrap();
        assert_eq!(demo_keys, "1", "round {round}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `POST /oauth/register` of a public client; the status.
async fn register(server: &Server) -> reqwest::StatusCode {
    reqwest::Client::new()
        .post(format!("{}/oauth/register", server.base))
        .json(&serde_json::json!({
            "client_name": "Replicated",
            "redirect_uris": ["http://127.0.0.1/callback"],
            "token_endpoint_auth_method": "none",
        }))
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn the_oauth_registration_budget_of_an_address_is_one_across_replicas() {
    let limit = ["--oauth-register-limit", "2"];
    let first = Server::start_on(skillgate_core::store::testing::postgres_url(), &limit);
    let second = first.replica_with("replica.log", &limit);
    for server in [&first, &second] {
        assert_eq!(register(server).await, reqwest::StatusCode::CREATED);
    }
    for server in [&first, &second] {
        assert_eq!(
            register(server).await,
            reqwest::StatusCode::TOO_MANY_REQUESTS,
            "a replica counted the address on its own"
        );
    }
}
