//! What the dev tools run against: the real `skillgate` binary as child processes (a demo
//! upstream over HTTP and a gateway whose catalog points at it), and rmcp clients. That
//! binary is the one beside `skillgate-dev` (`cargo build -p skillgate -p skillgate-dev`
//! builds both into the same directory).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use rmcp::RoleClient;
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig,
};
use serde_json::Value;
use skillgate_core::demo::catalog::DEMO_UPSTREAM;
use skillgate_core::keys::AgentKeys;
use skillgate_core::model::{Upstream, UpstreamKind};
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

pub type Client = RunningService<RoleClient, ()>;

const STARTUP_DEADLINE: Duration = Duration::from_secs(30);
/// The scope of the demo catalog whose key the tools use.
pub const SCOPE: &str = "support";

/// The `skillgate` binary beside this executable; a test binary (in `deps/`) looks one
/// directory up, where cargo puts the binaries.
pub fn product_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the skillgate-dev binary")?;
    let mut dir = exe.parent().context("the executable has no directory")?;
    if dir.file_name().is_some_and(|name| name == "deps") {
        dir = dir.parent().context("deps/ has no parent")?;
    }
    let product = dir.join(format!("skillgate{}", std::env::consts::EXE_SUFFIX));
    anyhow::ensure!(
        product.is_file(),
        "{} not found: build it beside skillgate-dev (cargo build -p skillgate -p skillgate-dev)",
        product.display()
    );
    Ok(product)
}

/// A directory under the system temp dir, removed when dropped.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    pub fn new(label: &str) -> anyhow::Result<Self> {
        let path = std::env::temp_dir().join(format!(
            "skillgate-{label}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Self(path))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn database_url(&self) -> String {
        format!("sqlite://{}", self.0.join("bench.db").display())
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child `skillgate` process, killed when dropped; its stderr goes to a log file.
pub struct Process {
    child: Child,
}

impl Process {
    /// Starts `skillgate ARGS` and waits for a stdout line starting with `prefix`; returns
    /// the rest of that line.
    pub(super) async fn start(
        args: &[&str],
        log: &Path,
        prefix: &str,
    ) -> anyhow::Result<(Self, String)> {
        let mut child = Command::new(product_binary()?)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).context("creating a log file")?)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting skillgate {}", args.join(" ")))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let found = tokio::time::timeout(STARTUP_DEADLINE, async {
            while let Some(line) = lines.next_line().await? {
                if let Some(rest) = line.strip_prefix(prefix) {
                    return Ok(Some(rest.trim().to_owned()));
                }
            }
            Ok::<_, std::io::Error>(None)
        })
        .await;
        let rest = match found {
            Ok(Ok(Some(rest))) => rest,
            other => bail!(
                "skillgate {} did not print `{prefix}…` ({other:?}); its log is {}:\n{}",
                args.join(" "),
                log.display(),
                std::fs::read_to_string(log).unwrap_or_default()
            ),
        };
        // Keep draining stdout so a late line never meets a closed pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok((Self { child }, rest))
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }
}

/// A demo upstream over HTTP and a gateway whose `demo` upstream is that URL.
pub struct Stack {
    pub upstream_url: String,
    pub gateway_url: String,
    /// An agent key for scope `support`.
    pub key: String,
    pub gateway: Process,
    upstream: Process,
    dir: ScratchDir,
}

impl Stack {
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with(&[]).await
    }

    /// [`Self::start`] with more arguments for `skillgate serve`.
    pub async fn start_with(serve_args: &[&str]) -> anyhow::Result<Self> {
        let dir = ScratchDir::new("bench")?;
        let (upstream, upstream_url) = Process::start(
            &["demo-upstream", "--http", "127.0.0.1:0"],
            &dir.path().join("upstream.log"),
            "demo upstream listening on ",
        )
        .await?;
        let key = seed(&dir.database_url(), &upstream_url).await?;
        let database_url = dir.database_url();
        let site_root = dir.path().to_string_lossy().into_owned();
        let (gateway, base) = Process::start(
            &[
                "serve",
                "--bind",
                "127.0.0.1:0",
                "--database-url",
                &database_url,
                "--site-root",
                &site_root,
            ]
            .into_iter()
            .chain(serve_args.iter().copied())
            .collect::<Vec<_>>(),
            &dir.path().join("gateway.log"),
            "Skillgate is listening on ",
        )
        .await?;
        Ok(Self {
            upstream_url,
            gateway_url: format!("{base}/mcp"),
            key,
            gateway,
            upstream,
            dir,
        })
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The gateway's SQLite database, for the CLI's commands beside it.
    pub fn database_url(&self) -> String {
        self.dir.database_url()
    }

    /// Process ids of the gateway and the demo upstream.
    pub fn pids(&self) -> anyhow::Result<(u32, u32)> {
        let gateway = self.gateway.pid().context("the gateway has exited")?;
        let upstream = self
            .upstream
            .pid()
            .context("the demo upstream has exited")?;
        Ok((gateway, upstream))
    }
}

/// Seeds the demo catalog with its `demo` upstream at `upstream_url` and creates a key for
/// scope `support`; the gateway started afterwards reads both from the database.
pub(super) async fn seed(database_url: &str, upstream_url: &str) -> anyhow::Result<String> {
    let store = Store::open(database_url).await?;
    seed_demo(&store, upstream_url).await?;
    let key = agent_key(&store, SCOPE).await?;
    store.close().await;
    Ok(key)
}

/// The demo catalog, its `demo` upstream at `upstream_url`.
pub(super) async fn seed_demo(store: &Store, upstream_url: &str) -> anyhow::Result<()> {
    store
        .seed_demo(&product_binary()?.to_string_lossy())
        .await?;
    store
        .upsert_upstream(&Upstream {
            name: Slug::parse(DEMO_UPSTREAM).expect("a slug"),
            kind: UpstreamKind::Http {
                url: upstream_url.to_owned(),
                ca_bundle: None,
                allow_plaintext: false,
            },
        })
        .await?;
    Ok(())
}

/// A new agent key for `scope`, in clear.
pub(super) async fn agent_key(store: &Store, scope: &str) -> anyhow::Result<String> {
    let scope = Slug::parse(scope).with_context(|| format!("`{scope}` is not a slug"))?;
    let (_, key) = AgentKeys::new(store.clone())
        .create(
            &format!("dev-bench-{scope}"),
            &scope,
            std::slice::from_ref(&scope),
            None,
            Some("skillgate-dev"),
        )
        .await?;
    Ok(key.expose().to_owned())
}

/// An MCP client over streamable HTTP, with `Authorization: Bearer KEY` when given.
pub async fn connect(url: &str, key: Option<&str>) -> anyhow::Result<Client> {
    // Keep-alive connections, as real clients use (and as the gateway uses upstream).
    connect_with(skillgate_core::upstream::PooledHttp::new(), url, key).await
}

/// [`connect`] over `http`. Clients given clones of one HTTP client share its connection
/// pool, so thousands of them do not each hold an idle keep-alive connection.
pub async fn connect_with(
    http: impl StreamableHttpClient,
    url: &str,
    key: Option<&str>,
) -> anyhow::Result<Client> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(key) = key {
        config = config.auth_header(key);
    }
    let transport = StreamableHttpClientTransport::with_client(http, config);
    ().serve(transport)
        .await
        .with_context(|| format!("MCP handshake with {url}"))
}

/// Calls `tool`; a protocol error is an error, a tool error is a result.
pub async fn call(client: &Client, tool: &str, arguments: Value) -> anyhow::Result<CallToolResult> {
    let Value::Object(arguments) = arguments else {
        bail!("tool arguments must be an object");
    };
    let arguments: JsonObject = arguments;
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
        .with_context(|| format!("calling {tool}"))
}

/// The text of a result, for error messages.
pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Starts a governance session and learns `role`; returns the session id.
pub async fn init_and_learn(client: &Client, role: &str) -> anyhow::Result<String> {
    let init = call(client, "init_skilder", serde_json::json!({})).await?;
    let session = init
        .structured_content
        .as_ref()
        .and_then(|s| s["session_id"].as_str())
        .map(str::to_owned)
        .with_context(|| format!("init_skilder returned no session: {}", text_of(&init)))?;
    let learned = call(
        client,
        "learn",
        serde_json::json!({"path": format!("/roles/{role}"), "session_id": session}),
    )
    .await?;
    if learned.is_error == Some(true) {
        bail!("learn /roles/{role} was refused: {}", text_of(&learned));
    }
    Ok(session)
}

/// `VmRSS` and `VmHWM` of a process, in KiB, from /proc (Linux only).
pub fn memory_kib(pid: u32) -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse::<u64>().ok())
            .with_context(|| format!("no {name} in /proc/{pid}/status"))
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// CPU time of `parent` and of its living children (PostgreSQL's server processes are
/// children of the postmaster), in seconds. A child that exits in between takes its time
/// with it, so measure over a window in which the connections stay open.
pub fn cpu_seconds_with_children(parent: u32) -> anyhow::Result<f64> {
    let mut total = cpu_seconds(parent)?;
    for entry in std::fs::read_dir("/proc").context("reading /proc")? {
        let Some(pid) = entry?
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|ppid| ppid.parse::<u32>().ok());
        if ppid == Some(parent) {
            total += cpu_seconds(pid).unwrap_or(0.0);
        }
    }
    Ok(total)
}

/// CPU time (user + system) a process has used so far, in seconds, from /proc. Assumes
/// the usual 100 clock ticks per second.
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("unexpected /proc/PID/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after `) state`.
    let ticks = |index: usize| -> anyhow::Result<f64> {
        Ok(fields
            .get(index)
            .context("unexpected /proc/PID/stat")?
            .parse::<f64>()?)
    };
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}

/// How many file descriptors a process has open, from /proc (Linux only).
pub fn open_fds(pid: u32) -> anyhow::Result<usize> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))
        .with_context(|| format!("listing /proc/{pid}/fd"))?
        .count())
}

/// The `p` quantile (0 to 1) of `samples` by nearest rank; `samples` must not be empty.
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}
