//! Runs the real `skillgate` binary on port 0 with its own database, and talks to its
//! `/mcp` endpoint with rmcp's streamable HTTP client.

pub mod catalog;
pub mod console;
pub mod executions;
pub mod openid;
pub mod replies;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
use tempfile::TempDir;

pub const BIN: &str = env!("CARGO_BIN_EXE_skillgate");
const STARTUP_DEADLINE: Duration = Duration::from_secs(60);

pub type Client = RunningService<RoleClient, ()>;

/// A running `skillgate serve --demo`; killed when dropped.
pub struct Server {
    child: Child,
    /// Shared with replicas: the directory (and database) outlive every process on it.
    dir: Arc<TempDir>,
    /// The database of this server and its replicas: a file in `dir`, or a PostgreSQL
    /// database when the tests run there (`SKILLGATE_TEST_DATABASE=postgres`).
    database_url: Arc<String>,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub port: u16,
    /// The key the demo seed printed, for scope `support`.
    pub support_key: String,
    /// The password of the console user `admin`, printed on the first start of a database.
    pub admin_password: Option<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// `skillgate serve --demo` with more arguments.
    pub fn start_with(args: &[&str]) -> Self {
        Self::spawn(fresh(), true, "server.log", None, args, &[])
    }

    /// `skillgate serve --catalog FILE` on a fresh database: the catalog comes from the
    /// file, which must define a key for scope `support` (its secret is printed once).
    pub fn start_from_catalog(file: &Path) -> Self {
        let file = file.to_str().expect("a UTF-8 path");
        Self::spawn(
            fresh(),
            false,
            "server.log",
            None,
            &["--catalog", file],
            &[],
        )
    }

    /// [`Self::start`] with extra environment variables for the server process.
    pub fn start_with_env(env: &[(&str, &str)]) -> Self {
        Self::spawn(fresh(), true, "server.log", None, &[], env)
    }

    /// A second `skillgate serve` process on the same database, as a replica behind a
    /// load balancer would be.
    pub fn replica(&self) -> Self {
        Self::spawn(
            self.place(),
            false,
            "replica.log",
            Some(self.support_key.clone()),
            &[],
            &[],
        )
    }

    /// [`Self::replica`] with extra environment variables for its process.
    pub fn replica_with_env(&self, env: &[(&str, &str)]) -> Self {
        Self::spawn(
            self.place(),
            false,
            "replica.log",
            Some(self.support_key.clone()),
            &[],
            env,
        )
    }

    /// `skillgate serve --demo ARGS` on the database at `database_url` (an empty one, e.g.
    /// [`skillgate_core::store::testing::postgres_url`]), whatever backend the rest of the
    /// run uses: for tests about replicas on one PostgreSQL database.
    pub fn start_on(database_url: String, args: &[&str]) -> Self {
        let dir = Arc::new(tempfile::tempdir().expect("a temporary directory"));
        Self::spawn(
            (dir, Arc::new(database_url)),
            true,
            "server.log",
            None,
            args,
            &[],
        )
    }

    /// [`Self::replica`] with more arguments, logging to `log` in the shared directory (so
    /// several replicas keep separate logs).
    pub fn replica_with(&self, log: &str, args: &[&str]) -> Self {
        Self::spawn(
            self.place(),
            false,
            log,
            Some(self.support_key.clone()),
            args,
            &[],
        )
    }

    /// Ends the server as a crash would (SIGKILL: no shutdown, nothing flushed) and waits
    /// for it to be gone.
    pub fn kill_hard(&mut self) -> std::process::ExitStatus {
        let sent = Command::new("kill")
            .args(["-KILL", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIGKILL was not delivered");
        self.child.wait().expect("the child can be waited on")
    }

    /// Stops the server as a service manager does (SIGTERM) and waits for it to exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIGTERM was not delivered");
        let deadline = std::time::Instant::now() + STARTUP_DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().expect("the child can be waited on") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "skillgate did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Where this server lives, for a replica beside it.
    fn place(&self) -> (Arc<TempDir>, Arc<String>) {
        (self.dir.clone(), self.database_url.clone())
    }

    fn spawn(
        (dir, database_url): (Arc<TempDir>, Arc<String>),
        demo: bool,
        log: &str,
        support_key: Option<String>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        // The test's own reqwest clients (rmcp's, the console's) need the crypto provider
        // the binary installs at start.
        skillgate_core::upstream::install_crypto_provider();
        let mut child = Command::new(BIN)
            .arg("serve")
            .args(demo.then_some("--demo"))
            .args(["--bind", "127.0.0.1:0"])
            .args(["--database-url", database_url.as_str()])
            .env("SKILLGATE_AUDIT_SIGNING_KEY", signing_key(dir.path()))
            .arg("--site-root")
            .arg(dir.path())
            .args(args)
            .env(
                "SKILLGATE_DEMO_EXECUTIONS_LOG",
                dir.path().join("exec.jsonl"),
            )
            .env("RUST_LOG", "info,skillgate=debug,sqlx=warn")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                std::fs::File::create(dir.path().join(log)).expect("a log file"),
            ))
            .spawn()
            .expect("the skillgate binary starts");

        // Read stdout on a thread so the startup wait has a deadline instead of a sleep.
        let stdout = child.stdout.take().expect("piped stdout");
        let (lines, received) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let mut support_key = support_key;
        let mut admin_password = None;
        let base = loop {
            let line = match received.recv_timeout(STARTUP_DEADLINE) {
                Ok(line) => line,
                Err(error) => {
                    let _ = child.kill();
                    panic!(
                        "skillgate did not print its listening line ({error}); its log:\n{}",
                        std::fs::read_to_string(dir.path().join(log)).unwrap_or_default()
                    );
                }
            };
            if let Some(key) = key_on_line(&line, "support") {
                support_key = Some(key);
            }
            if let Some(password) = line.strip_prefix("  password: ") {
                admin_password = Some(password.trim().to_owned());
            }
            if let Some(url) = line.strip_prefix("Skillgate is listening on ") {
                break url.trim().to_owned();
            }
        };
        let port = base
            .rsplit(':')
            .next()
            .and_then(|port| port.parse().ok())
            .expect("the listening line ends with a port");
        Server {
            child,
            dir,
            database_url,
            base,
            port,
            support_key: support_key.expect("`--demo` prints a key for scope support"),
            admin_password,
        }
    }

    /// The server process's id (for reading its memory from /proc).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    pub fn database_url(&self) -> String {
        self.database_url.as_str().to_owned()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `skillgate ARGS --database-url …` against this server's database.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .args(["--database-url", &self.database_url()])
            .env("SKILLGATE_AUDIT_SIGNING_KEY", signing_key(self.dir.path()))
            .output()
            .expect("the skillgate binary runs")
    }

    /// `skillgate key create`; returns the key it printed.
    pub fn create_key(&self, name: &str, scope: &str) -> String {
        let output = self.cli(&["key", "create", "--name", name, "--scope", scope]);
        assert!(output.status.success(), "key create: {output:?}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        stdout
            .lines()
            .find_map(|line| key_on_line(line, scope))
            .unwrap_or_else(|| panic!("no key in {stdout}"))
    }

    pub fn revoke_key(&self, name: &str) {
        let output = self.cli(&["key", "revoke", name]);
        assert!(output.status.success(), "key revoke: {output:?}");
    }

    /// Every audit event, as `skillgate audit export --format jsonl` prints it.
    pub fn audit_events(&self) -> Vec<Value> {
        self.workspace_audit_events("default")
    }

    /// Every event of `workspace`'s chain, exported by the command line.
    pub fn workspace_audit_events(&self, workspace: &str) -> Vec<Value> {
        let export = self.cli(&[
            "--workspace",
            workspace,
            "audit",
            "export",
            "--format",
            "jsonl",
        ]);
        assert!(export.status.success(), "{export:?}");
        String::from_utf8_lossy(&export.stdout)
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// Makes workspace `name` with the default workspace's catalog (the demo's) applied.
    pub fn create_workspace_like_default(&self, name: &str) {
        let created = self.cli(&["workspace", "create", name]);
        assert!(created.status.success(), "{created:?}");
        let file = self.dir().join(format!("{name}-catalog.yaml"));
        let exported = self.cli(&["catalog", "export", "--output", file.to_str().unwrap()]);
        assert!(exported.status.success(), "{exported:?}");
        let applied = self.cli(&[
            "--workspace",
            name,
            "catalog",
            "apply",
            file.to_str().unwrap(),
        ]);
        assert!(applied.status.success(), "{applied:?}");
    }

    /// What the demo upstream actually ran: one JSON object per executed call.
    pub fn executions(&self) -> Vec<Value> {
        executions(&self.dir.path().join("exec.jsonl"))
    }

    pub fn executed(&self, tool: &str) -> Vec<Value> {
        self.executions()
            .into_iter()
            .filter(|line| line["tool"] == tool)
            .collect()
    }

    /// An MCP client over streamable HTTP with `Authorization: Bearer KEY`.
    pub async fn connect(&self, key: &str) -> Client {
        let config = StreamableHttpClientTransportConfig::with_uri(self.mcp_url()).auth_header(key);
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("the MCP handshake succeeds")
    }
}

/// A new directory and a new, empty database.
fn fresh() -> (Arc<TempDir>, Arc<String>) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = skillgate_core::store::testing::database_url(dir.path(), "t.db");
    (Arc::new(dir), Arc::new(url))
}

/// The audit signing key every process on one database shares (where `serve` would put
/// it beside a SQLite file; PostgreSQL needs it named).
fn signing_key(dir: &Path) -> PathBuf {
    dir.join("audit-signing.key")
}

fn key_on_line(line: &str, scope: &str) -> Option<String> {
    line.strip_prefix(&format!("agent key for scope {scope}: "))
        .map(|key| key.trim().to_owned())
}

fn executions(path: &PathBuf) -> Vec<Value> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| serde_json::from_str(line).expect("executions log lines are JSON"))
            .collect(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => panic!("reading the executions log: {error}"),
    }
}

/// A platform tool call's outcome, flattened for assertions.
#[derive(Debug)]
pub struct Reply {
    pub text: String,
    pub structured: Value,
    pub is_error: bool,
}

impl Reply {
    pub fn code(&self) -> &str {
        self.structured["code"].as_str().unwrap_or("")
    }

    /// A `call_tool` that ran: the tool's own structured result, inside the gateway's answer.
    pub fn result(&self) -> &Value {
        &self.structured["result"]
    }
}

/// Every `call_tool` answer these tests see, refusal or result, is checked against the
/// `outputSchema` `call_tool` publishes: a path that answers another shape fails its test.
fn assert_answer_fits_the_published_schema(reply: &Reply) {
    assert_answer_fits_the_published_schema_json(&reply.structured);
}

/// The same check on a `structuredContent` read from raw JSON-RPC.
pub fn assert_answer_fits_the_published_schema_json(structured: &Value) {
    static VALIDATOR: std::sync::LazyLock<jsonschema::Validator> = std::sync::LazyLock::new(|| {
        let schema = Value::Object(skillgate_core::gateway::output_schema().clone());
        jsonschema::validator_for(&schema).expect("the published schema compiles")
    });
    let problems: Vec<String> = VALIDATOR
        .iter_errors(structured)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        problems.is_empty(),
        "a call_tool answer outside its outputSchema: {problems:?}\n{structured}"
    );
}

impl From<CallToolResult> for Reply {
    fn from(result: CallToolResult) -> Self {
        let text = result
            .content
            .iter()
            .filter_map(|block| block.as_text().map(|t| t.text.clone()))
            .collect::<Vec<_>>()
            .join("\n");
        Reply {
            text,
            structured: result.structured_content.unwrap_or(Value::Null),
            is_error: result.is_error.unwrap_or(false),
        }
    }
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("tool arguments must be an object, not {other}"),
    }
}

/// Calls a platform tool and expects a tool result (not a protocol error).
pub async fn platform(client: &Client, tool: &str, arguments: Value) -> Reply {
    let reply: Reply = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(object(arguments)))
        .await
        .unwrap_or_else(|error| panic!("{tool} failed at the protocol level: {error}"))
        .into();
    if tool == "call_tool" {
        assert_answer_fits_the_published_schema(&reply);
    }
    reply
}

/// `init_skilder`; returns the session id and the reply.
pub async fn init(client: &Client) -> (String, Reply) {
    let reply = platform(client, "init_skilder", serde_json::json!({})).await;
    assert!(!reply.is_error, "init_skilder: {}", reply.text);
    let session = reply.structured["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("init_skilder returns a session_id: {:?}", reply.structured))
        .to_owned();
    (session, reply)
}

pub async fn learn(client: &Client, session: &str, path: &str) -> Reply {
    platform(
        client,
        "learn",
        serde_json::json!({"path": path, "session_id": session}),
    )
    .await
}

/// Makes `session` one that may refund order O-5005 of the demo catalog: it learns
/// `tier-1-support` and checks the order's eligibility (the guard `process_refund` waits for).
pub async fn may_refund_o5005(client: &Client, session: &str) {
    let learned = learn(client, session, "/roles/tier-1-support").await;
    assert!(!learned.is_error, "{}", learned.text);
    let check = serde_json::json!({"customer_id": "C-1003", "order_id": "O-5005"});
    let checked = call(client, session, "check_refund_eligibility", check).await;
    assert!(!checked.is_error, "{}", checked.text);
}

pub async fn call(client: &Client, session: &str, tool: &str, arguments: Value) -> Reply {
    platform(
        client,
        "call_tool",
        serde_json::json!({"tool": tool, "arguments": arguments, "session_id": session}),
    )
    .await
}
