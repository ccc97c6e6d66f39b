//! `skillgate-dev memory`: the gateway's resident memory while it holds many governance
//! sessions, each of which learned a role.
//!
//! By default every governance session is its own MCP session (its own client: initialize,
//! `init_skilder`, `learn /roles/<role>`), and all of them stay open until the gateway's
//! memory is read, as when that many agents are connected at once. `--reuse-connections`
//! opens the governance sessions one after another over a few long-lived MCP clients
//! instead. The gateway serves `/mcp` statelessly, so the two should agree: an open MCP
//! session is a label its client echoes, not memory in the gateway.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use futures::StreamExt as _;
use rmcp::transport::streamable_http_client::StreamableHttpClient;
use serde_json::json;
use tokio::task::JoinSet;

use super::harness::{self, Client, Stack};

#[derive(Debug, Args)]
pub struct MemoryArgs {
    /// Governance sessions to open (each runs init_skilder and learns the role).
    #[arg(long, default_value_t = 10_000)]
    pub sessions: usize,
    /// Tasks opening sessions at once (with --reuse-connections: the MCP clients).
    #[arg(long, alias = "clients", default_value_t = 32)]
    pub concurrency: usize,
    /// Open the governance sessions over --concurrency long-lived MCP clients instead of
    /// one MCP session each.
    #[arg(long)]
    pub reuse_connections: bool,
    /// Stop opening sessions after this many seconds, even if fewer were opened.
    #[arg(long, default_value_t = 240.0)]
    pub time_limit: f64,
    #[arg(long, default_value = "tier-1-support")]
    pub role: String,
    /// Print JSON instead of a Markdown table.
    #[arg(long)]
    pub json: bool,
}

/// What one run measured; memory in KiB.
#[derive(Debug)]
struct Measurement {
    /// Governance sessions opened, the first (baseline) one included.
    sessions: usize,
    /// MCP sessions open when the memory was read.
    mcp_sessions: usize,
    /// Seconds to open all sessions after the first.
    seconds: f64,
    baseline_kib: u64,
    rss_kib: u64,
    peak_kib: u64,
    /// File descriptors the gateway had open when the memory was read.
    gateway_fds: usize,
    rss_after_close_kib: u64,
}

impl Measurement {
    /// Growth of RSS per session opened after the baseline; NaN when there was none.
    fn per_session_kib(&self) -> f64 {
        let added = self.sessions.saturating_sub(1);
        if added == 0 {
            return f64::NAN;
        }
        (self.rss_kib as f64 - self.baseline_kib as f64) / added as f64
    }
}

/// Where sessions are opened, shared by the tasks that open them.
struct Target {
    url: String,
    key: String,
    role: String,
}

/// Hands out at most `count` session slots, until `deadline`, to any number of tasks.
#[derive(Clone)]
struct Quota {
    claimed: Arc<AtomicUsize>,
    count: usize,
    deadline: Instant,
}

impl Quota {
    fn new(count: usize, time_limit: f64) -> Self {
        Self {
            claimed: Arc::new(AtomicUsize::new(0)),
            count,
            deadline: Instant::now() + Duration::from_secs_f64(time_limit),
        }
    }

    fn take(&self) -> bool {
        Instant::now() < self.deadline && self.claimed.fetch_add(1, Ordering::Relaxed) < self.count
    }
}

pub async fn run(args: MemoryArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.concurrency > 0, "--concurrency must be at least 1");
    anyhow::ensure!(args.sessions > 0, "--sessions must be at least 1");
    let stack = Stack::start().await?;
    let pid = stack.gateway.pid().context("the gateway has exited")?;
    let target = Arc::new(Target {
        url: stack.gateway_url.clone(),
        key: stack.key.clone(),
        role: args.role.clone(),
    });
    let measurement = if args.reuse_connections {
        measure_reused(pid, target, &args).await?
    } else {
        measure_separate(pid, target, &args).await?
    };
    report(&args, &measurement)
}

/// One MCP session per governance session, all open at once.
async fn measure_separate(
    pid: u32,
    target: Arc<Target>,
    args: &MemoryArgs,
) -> anyhow::Result<Measurement> {
    // One connection pool for all clients, as many agents behind one egress would share:
    // requests reuse at most --concurrency connections instead of leaving one idle
    // keep-alive connection per session.
    let http = skillgate_core::upstream::PooledHttp::new();
    // One session first, so the baseline includes a warm catalog and connection pools.
    let first = open_session(http.clone(), &target).await?;
    let (baseline_kib, _) = harness::memory_kib(pid)?;
    let started = Instant::now();
    let quota = Quota::new(args.sessions - 1, args.time_limit);
    let mut clients = open_sessions(http, target, quota, args.concurrency).await?;
    let seconds = started.elapsed().as_secs_f64();
    clients.push(first);
    let sessions = clients.len();
    read_and_close(
        pid,
        clients,
        sessions,
        seconds,
        baseline_kib,
        args.concurrency,
    )
    .await
}

/// Reads the gateway's memory and open files while `clients` are open, then closes them
/// and reads its memory again.
async fn read_and_close(
    pid: u32,
    clients: Vec<Client>,
    sessions: usize,
    seconds: f64,
    baseline_kib: u64,
    concurrency: usize,
) -> anyhow::Result<Measurement> {
    let (rss_kib, peak_kib) = harness::memory_kib(pid)?;
    let gateway_fds = harness::open_fds(pid)?;
    let mcp_sessions = clients.len();
    close_all(clients, concurrency).await;
    Ok(Measurement {
        sessions,
        mcp_sessions,
        seconds,
        baseline_kib,
        rss_kib,
        peak_kib,
        gateway_fds,
        rss_after_close_kib: harness::memory_kib(pid)?.0,
    })
}

/// Opens MCP sessions that each learned the role, `concurrency` at a time, until `quota`
/// runs out; the first failure stops them all.
async fn open_sessions(
    http: impl StreamableHttpClient,
    target: Arc<Target>,
    quota: Quota,
    concurrency: usize,
) -> anyhow::Result<Vec<Client>> {
    let mut workers = JoinSet::new();
    for _ in 0..concurrency {
        let (http, target, quota) = (http.clone(), target.clone(), quota.clone());
        workers.spawn(async move {
            let mut clients = Vec::new();
            while quota.take() {
                clients.push(open_session(http.clone(), &target).await?);
            }
            anyhow::Ok(clients)
        });
    }
    let mut clients = Vec::with_capacity(quota.count);
    // Returning early drops `workers`, which aborts the other tasks and closes their clients.
    while let Some(done) = workers.join_next().await {
        clients.extend(done.context("a session worker panicked")??);
    }
    Ok(clients)
}

/// A new MCP session (initialize) that started a governance session and learned the role.
async fn open_session(http: impl StreamableHttpClient, target: &Target) -> anyhow::Result<Client> {
    let client = harness::connect_with(http, &target.url, Some(&target.key)).await?;
    harness::init_and_learn(&client, &target.role).await?;
    Ok(client)
}

/// Governance sessions opened one after another over `--concurrency` long-lived clients.
async fn measure_reused(
    pid: u32,
    target: Arc<Target>,
    args: &MemoryArgs,
) -> anyhow::Result<Measurement> {
    let mut clients = Vec::with_capacity(args.concurrency);
    for _ in 0..args.concurrency {
        clients.push(harness::connect(&target.url, Some(&target.key)).await?);
    }
    // One session first, so the baseline includes a warm catalog and connection pools.
    harness::init_and_learn(&clients[0], &target.role).await?;
    let (baseline_kib, _) = harness::memory_kib(pid)?;
    let started = Instant::now();
    let quota = Quota::new(args.sessions - 1, args.time_limit);
    let mut workers = JoinSet::new();
    for client in clients {
        let (target, quota) = (target.clone(), quota.clone());
        workers.spawn(async move {
            let mut opened = 0;
            while quota.take() {
                harness::init_and_learn(&client, &target.role).await?;
                opened += 1;
            }
            anyhow::Ok((client, opened))
        });
    }
    let (mut clients, mut sessions) = (Vec::new(), 1);
    while let Some(done) = workers.join_next().await {
        let (client, opened) = done.context("a session worker panicked")??;
        clients.push(client);
        sessions += opened;
    }
    let seconds = started.elapsed().as_secs_f64();
    read_and_close(
        pid,
        clients,
        sessions,
        seconds,
        baseline_kib,
        args.concurrency,
    )
    .await
}

/// Closes the clients, `concurrency` at a time (each sends a `DELETE`, which the gateway
/// answers without anything to free).
async fn close_all(clients: Vec<Client>, concurrency: usize) {
    futures::stream::iter(clients)
        .for_each_concurrent(concurrency, |client| async move {
            let _ = client.cancel().await;
        })
        .await;
}

fn report(args: &MemoryArgs, m: &Measurement) -> anyhow::Result<()> {
    let mib = |kib: u64| kib as f64 / 1024.0;
    let round1 = |value: f64| (value * 10.0).round() / 10.0;
    if args.json {
        let report = json!({
            "reuse_connections": args.reuse_connections,
            "sessions_requested": args.sessions,
            "sessions_opened": m.sessions,
            "mcp_sessions_open": m.mcp_sessions,
            "concurrency": args.concurrency,
            "seconds": round1(m.seconds),
            "baseline_rss_mib": round1(mib(m.baseline_kib)),
            "rss_mib": round1(mib(m.rss_kib)),
            "peak_rss_mib": round1(mib(m.peak_kib)),
            "rss_per_session_kib": round1(m.per_session_kib()),
            "rss_after_close_mib": round1(mib(m.rss_after_close_kib)),
            "gateway_open_fds": m.gateway_fds,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "| sessions (init + learn) | MCP sessions open | concurrency | seconds | RSS after 1 session | RSS after all | peak RSS | RSS per session | RSS after close | gateway fds |\n\
             | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n\
             | {} | {} | {} | {:.1} | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1} KiB | {:.1} MiB | {} |",
            m.sessions,
            m.mcp_sessions,
            args.concurrency,
            m.seconds,
            mib(m.baseline_kib),
            mib(m.rss_kib),
            mib(m.peak_kib),
            m.per_session_kib(),
            mib(m.rss_after_close_kib),
            m.gateway_fds,
        );
    }
    Ok(())
}
