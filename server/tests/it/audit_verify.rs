//! `skillgate audit verify` against a real SQLite file, with the real binary: deleting the
//! newest events, forging a retention anchor or a checkpoint fails it, naming what is
//! wrong; a prune through `skillgate audit prune` verifies clean; `serve` signs the tip
//! periodically and once more at a clean shutdown.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use clap::Parser as _;
use skillgate_dev::seed_audit::SeedAuditArgs;
use sqlx::{Connection, SqliteConnection};

const BIN: &str = env!("CARGO_BIN_EXE_skillgate");

/// `skillgate-dev seed-audit`'s flags, with their defaults.
#[derive(clap::Parser)]
struct Seed {
    #[command(flatten)]
    args: SeedAuditArgs,
}

struct Db {
    dir: tempfile::TempDir,
}

impl Db {
    /// A database with `events` chain-valid events spread over `days` days.
    async fn seeded(events: u64, days: u64) -> Self {
        let db = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        db.seed(events, days).await;
        db
    }

    /// Appends `events` chain-valid events, as `skillgate-dev seed-audit` does.
    async fn seed(&self, events: u64, days: u64) {
        let Seed { args } = Seed::parse_from([
            "seed-audit",
            "--database-url",
            &self.url(),
            "--events",
            &events.to_string(),
            "--days",
            &days.to_string(),
        ]);
        skillgate_dev::seed_audit::run(args).await.unwrap();
    }

    /// Also creates the audit signing key, as a first `serve` would.
    async fn seeded_with_key(events: u64, days: u64) -> Self {
        let db = Self::seeded(events, days).await;
        let key = db.cli(&["audit", "public-key"]);
        assert!(key.status.success(), "{}", stderr(&key));
        db
    }

    fn url(&self) -> String {
        skillgate_core::store::testing::database_url(self.dir.path(), "skillgate.db")
    }

    fn key_file(&self) -> PathBuf {
        self.dir.path().join("audit-signing.key")
    }

    fn command(&self) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(["--database-url", &self.url()])
            .env_remove("SKILLGATE_AUDIT_SIGNING_KEY")
            .env("RUST_LOG", "info,sqlx=warn")
            .stdin(Stdio::null());
        command
    }

    fn cli(&self, args: &[&str]) -> Output {
        self.command().args(args).output().expect("skillgate runs")
    }

    async fn sql(&self, sql: &str) {
        let mut conn = SqliteConnection::connect(&self.url()).await.unwrap();
        sqlx::raw_sql(sql).execute(&mut conn).await.unwrap();
    }

    async fn scalar(&self, sql: &str) -> i64 {
        let mut conn = SqliteConnection::connect(&self.url()).await.unwrap();
        sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_fails_naming(out: &Output, needle: &str) {
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(out), stderr(out));
    assert!(
        stderr(out).contains(needle),
        "stderr lacks `{needle}`:\n{}",
        stderr(out)
    );
}

fn assert_verifies(out: &Output) {
    assert!(out.status.success(), "{}{}", stdout(out), stderr(out));
    assert!(
        stdout(out).starts_with("audit chain intact"),
        "{}",
        stdout(out)
    );
}

#[tokio::test]
async fn deleting_the_newest_events_fails_audit_verify_naming_truncation() {
    let db = Db::seeded_with_key(200, 1).await;
    let signed = db.cli(&["audit", "checkpoint"]);
    assert!(signed.status.success(), "{}", stderr(&signed));
    assert!(stdout(&signed).contains("seq 200"), "{}", stdout(&signed));
    assert_verifies(&db.cli(&["audit", "verify"]));

    db.sql("DELETE FROM audit_events WHERE seq > 190").await;
    let out = db.cli(&["audit", "verify"]);
    assert_fails_naming(&out, "truncated: the chain ends at seq 190");
    assert_fails_naming(&out, "events 191..=200 were deleted");
    // The server's own checkpointing refuses to sign the shortened chain.
    let again = db.cli(&["audit", "checkpoint"]);
    assert_eq!(again.status.code(), Some(1), "{}", stdout(&again));
}

#[tokio::test]
async fn audit_verify_since_the_checkpoint_rereads_only_newer_events_and_fails_on_an_edit_among_them()
 {
    let db = Db::seeded_with_key(300, 1).await;
    let signed = db.cli(&["audit", "checkpoint"]);
    assert!(signed.status.success(), "{}", stderr(&signed));
    db.seed(20, 1).await;

    let out = db.cli(&["audit", "verify", "--since-checkpoint"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("audit chain intact since the checkpoint of seq 300 signed at "),
        "{text}"
    );
    assert!(text.contains(": 20 newer events (tip seq 320,"), "{text}");

    db.sql(r#"UPDATE audit_events SET payload = '{"edited":true}' WHERE seq = 310"#)
        .await;
    assert_fails_naming(
        &db.cli(&["audit", "verify", "--since-checkpoint"]),
        "event 310 was changed",
    );
}

#[tokio::test]
async fn a_forged_anchor_fails_audit_verify_for_a_verifier_holding_only_the_public_key() {
    let db = Db::seeded(100, 1).await;
    let key = db.cli(&["audit", "public-key"]);
    assert!(key.status.success(), "{}", stderr(&key));
    let public_key = stdout(&key).trim().to_owned();
    assert_eq!(public_key.len(), 64, "{public_key}");
    assert!(db.cli(&["audit", "checkpoint"]).status.success());
    // An outside verifier has no private key at all.
    std::fs::remove_file(db.key_file()).unwrap();
    let outside = ["audit", "verify", "--public-key", public_key.as_str()];
    assert_verifies(&db.cli(&outside));

    db.sql(
        "INSERT INTO audit_anchors (seq, hash, pruned_at)
           SELECT seq, hash, '2026-01-01T00:00:00.000000Z' FROM audit_events WHERE seq = 40;
         DELETE FROM audit_events WHERE seq <= 40;",
    )
    .await;
    assert_fails_naming(
        &db.cli(&outside),
        "forged anchor: the retention anchor at seq 40 is not vouched for",
    );
}

#[tokio::test]
async fn a_tampered_checkpoint_signature_fails_audit_verify() {
    let db = Db::seeded_with_key(50, 1).await;
    assert!(db.cli(&["audit", "checkpoint"]).status.success());
    db.sql(
        "UPDATE audit_checkpoints SET signature =
           (CASE substr(signature, 1, 1) WHEN '0' THEN '1' ELSE '0' END) || substr(signature, 2)",
    )
    .await;
    assert_fails_naming(
        &db.cli(&["audit", "verify"]),
        "forged checkpoint: the checkpoint at seq 50 is not signed by the trusted audit key",
    );
    // Another key's public half does not verify a genuine checkpoint either.
    let stranger = tempfile::tempdir().unwrap();
    let stranger_key = stranger.path().join("k");
    let other = db.cli(&[
        "audit",
        "public-key",
        "--audit-signing-key",
        stranger_key.to_str().unwrap(),
    ]);
    let other = stdout(&other).trim().to_owned();
    assert_fails_naming(
        &db.cli(&["audit", "verify", "--public-key", &other]),
        "forged checkpoint",
    );
}

#[tokio::test]
async fn a_prune_through_the_cli_verifies_clean_and_is_a_signed_chain_event() {
    // 2,500 events over 60 days: the oldest whole segment of 1000 is past 30 days.
    let db = Db::seeded_with_key(2500, 60).await;
    assert!(db.cli(&["audit", "checkpoint"]).status.success());
    let pruned = db.cli(&["audit", "prune", "--older-than", "30"]);
    assert!(pruned.status.success(), "{}", stderr(&pruned));
    assert!(
        stdout(&pruned).contains("pruned audit events 1..=1000 (1000 events)"),
        "{}",
        stdout(&pruned)
    );
    let out = db.cli(&["audit", "verify"]);
    assert_verifies(&out);
    assert!(
        stdout(&out).contains("starts after retention anchor seq 1000"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM audit_events WHERE kind = 'audit_pruned' AND seq = 2501")
            .await,
        1
    );
    assert_eq!(
        db.scalar("SELECT MAX(seq) FROM audit_checkpoints").await,
        2501
    );
    let export = db.cli(&["audit", "export", "--format", "jsonl"]);
    let last = stdout(&export).lines().last().unwrap().to_owned();
    let last: serde_json::Value = serde_json::from_str(&last).unwrap();
    assert_eq!(last["kind"], "audit_pruned");
    assert_eq!(last["payload"]["through_seq"], 1000);
}

/// Starts `skillgate serve` and waits for it to listen; answers the process and its base URL.
fn serve(db: &Db, interval: &str) -> (std::process::Child, String) {
    let mut child = db
        .command()
        .args(["serve", "--bind", "127.0.0.1:0", "--site-root"])
        .arg(db.dir.path())
        .args(["--audit-checkpoint-interval", interval])
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(db.dir.path().join("server.log")).unwrap(),
        ))
        .spawn()
        .expect("skillgate serve starts");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(base) = line.strip_prefix("Skillgate is listening on ") {
                let _ = tx.send(base.to_owned());
            }
        }
    });
    let base = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the server listens");
    (child, base)
}

async fn wait_for_checkpoint_of(db: &Db, seq: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let newest = db
            .scalar("SELECT COALESCE(MAX(seq), 0) FROM audit_checkpoints")
            .await;
        if newest == seq {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "newest checkpoint {newest}, not {seq}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn log_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
}

#[tokio::test]
async fn serve_creates_a_private_key_beside_the_database_and_signs_the_tip_periodically() {
    let db = Db::seeded(30, 1).await;
    let (mut child, _) = serve(&db, "1");
    // The 30 seeded events and the first start's `admin` user, an audited admin change.
    wait_for_checkpoint_of(&db, 31).await;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(db.key_file())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // Another process moves the tip; the next tick signs it.
    db.seed(5, 1).await;
    wait_for_checkpoint_of(&db, 36).await;
    let _ = child.kill();
    let _ = child.wait();
    let log = log_of(db.dir.path());
    assert!(log.contains("created an audit signing key"), "{log}");
    assert!(log.contains("audit-signing.key"), "{log}");
    assert_verifies(&db.cli(&["audit", "verify"]));
}

#[tokio::test]
async fn serve_signs_the_tip_once_more_at_a_clean_shutdown() {
    let db = Db::seeded(30, 1).await;
    // An hour between ticks: only the first (at start) and the final one can sign.
    let (mut child, _) = serve(&db, "3600");
    // The 30 seeded events and the first start's `admin` user.
    wait_for_checkpoint_of(&db, 31).await;
    db.seed(7, 1).await;
    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", log_of(db.dir.path()));
    assert_eq!(
        db.scalar("SELECT MAX(seq) FROM audit_checkpoints").await,
        38,
        "{}",
        log_of(db.dir.path())
    );
    assert_eq!(db.scalar("SELECT COUNT(*) FROM audit_checkpoints").await, 2);
}

#[tokio::test]
async fn the_console_audit_page_names_a_truncation_and_the_server_signs_nothing_over_it() {
    let db = Db::seeded_with_key(200, 1).await;
    assert!(db.cli(&["audit", "checkpoint"]).status.success());
    let mut add = db
        .command()
        .args(["user", "add", "auditor", "--role", "viewer"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = add.stdin.take().unwrap();
        writeln!(stdin, "correct-horse-battery-staple").unwrap();
    }
    assert!(add.wait().unwrap().success());
    db.sql("DELETE FROM audit_events WHERE seq > 190").await;

    let (mut child, base) = serve(&db, "3600");
    skillgate_core::upstream::install_crypto_provider();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    // As a browser signs in: the sign-in page gives a pre-login session and its form token.
    let form = http.get(format!("{base}/login")).send().await.unwrap();
    let pre_login = session_cookie(&form).expect("a pre-login session cookie");
    let html = form.text().await.unwrap();
    let field = html
        .find(r#"name="csrf_token""#)
        .expect("the sign-in form carries a form token");
    let token = html[field..]
        .split(r#"value=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the token field has a value")
        .to_owned();
    let login = http
        .post(format!("{base}/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", &base)
        .header("sec-fetch-site", "same-origin")
        .header("cookie", &pre_login)
        .body(format!(
            "name=auditor&password=correct-horse-battery-staple&csrf_token={token}"
        ))
        .send()
        .await
        .unwrap();
    assert!(login.status().is_redirection(), "{}", login.status());
    let cookie = session_cookie(&login).expect("a console session cookie");
    let page = http
        .get(format!("{base}/audit?run=1"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(html.contains("Broken hash chain"), "{html}");
    assert!(
        html.contains("truncated: the chain ends at seq 190"),
        "{html}"
    );
    assert_eq!(
        db.scalar("SELECT MAX(seq) FROM audit_checkpoints").await,
        200
    );
    let log = log_of(db.dir.path());
    assert!(
        log.contains("is not the one its newest checkpoint signed"),
        "{log}"
    );
}

#[tokio::test]
async fn pruning_or_signing_from_the_cli_without_the_servers_key_is_refused() {
    let db = Db::seeded(2500, 60).await;
    for args in [
        &["audit", "prune", "--older-than", "30"][..],
        &["audit", "checkpoint"][..],
    ] {
        let out = db.cli(args);
        assert!(!out.status.success(), "{args:?}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("there is no audit signing key"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert!(!db.key_file().exists());
    assert_eq!(db.scalar("SELECT COUNT(*) FROM audit_events").await, 2500);
}

/// The `name=value` of the console session cookie a response sets, if it sets one.
fn session_cookie(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("skillgate_session="))
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
}
