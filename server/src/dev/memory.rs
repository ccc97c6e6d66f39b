//! `skillgate dev memory`: the gateway's resident memory after many governance sessions,
//! each of which learned a role.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use serde_json::json;

use super::harness::{self, Stack};

#[derive(Debug, Args)]
pub struct MemoryArgs {
    /// Governance sessions to open (each runs init_skilder and learns the role).
    #[arg(long, default_value_t = 10_000)]
    pub sessions: usize,
    /// MCP clients opening them concurrently.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// Stop opening sessions after this many seconds, even if fewer were opened.
    #[arg(long, default_value_t = 15.0)]
    pub time_limit: f64,
    #[arg(long, default_value = "tier-1-support")]
    pub role: String,
    /// Print JSON instead of a Markdown table.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: MemoryArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.clients > 0, "--clients must be at least 1");
    let stack = Stack::start().await?;
    let pid = stack.gateway.pid().context("the gateway has exited")?;
    let mut clients = Vec::with_capacity(args.clients);
    for _ in 0..args.clients {
        clients.push(harness::connect(&stack.gateway_url, Some(&stack.key)).await?);
    }
    // One session first, so the baseline includes a warm catalog and connection pools.
    harness::init_and_learn(&clients[0], &args.role).await?;
    let (baseline_kib, _) = harness::memory_kib(pid)?;

    let opened = Arc::new(AtomicUsize::new(1));
    let deadline = Instant::now() + Duration::from_secs_f64(args.time_limit);
    let started = Instant::now();
    let mut workers = Vec::new();
    for client in clients {
        let opened = opened.clone();
        let role = args.role.clone();
        let target = args.sessions;
        workers.push(tokio::spawn(async move {
            while Instant::now() < deadline && opened.fetch_add(1, Ordering::Relaxed) < target {
                harness::init_and_learn(&client, &role).await?;
            }
            let _ = client.cancel().await;
            anyhow::Ok(())
        }));
    }
    for worker in workers {
        worker.await.context("a session worker panicked")??;
    }
    let seconds = started.elapsed().as_secs_f64();
    // A worker that finds the target reached still bumps the counter once.
    let sessions = opened.load(Ordering::Relaxed).min(args.sessions);
    let (rss_kib, hwm_kib) = harness::memory_kib(pid)?;
    let mib = |kib: u64| kib as f64 / 1024.0;
    if args.json {
        let report = json!({
            "sessions_requested": args.sessions,
            "sessions_opened": sessions,
            "clients": args.clients,
            "seconds": (seconds * 10.0).round() / 10.0,
            "baseline_rss_mib": (mib(baseline_kib) * 10.0).round() / 10.0,
            "rss_mib": (mib(rss_kib) * 10.0).round() / 10.0,
            "peak_rss_mib": (mib(hwm_kib) * 10.0).round() / 10.0,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "| sessions (init + learn) | clients | seconds | RSS after 1 session | RSS after | peak RSS |\n\
             | ---: | ---: | ---: | ---: | ---: | ---: |\n\
             | {sessions} | {} | {seconds:.1} | {:.1} MiB | {:.1} MiB | {:.1} MiB |",
            args.clients,
            mib(baseline_kib),
            mib(rss_kib),
            mib(hwm_kib),
        );
    }
    Ok(())
}
