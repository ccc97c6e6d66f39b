//! `skillgate-dev workspaces`: what each workspace a gateway serves costs it (issue #55).
//!
//! A workspace is a database of its own, and a server opens its services (pools, audit
//! writer, upstream connections, background tasks) on the workspace's first request. This
//! probe makes `--workspaces` workspaces with the demo catalog and a key each, then has one
//! agent per workspace start a governance session and learn a role, one workspace after
//! another. It reports the gateway's memory, threads and open files per workspace opened,
//! and the first agent's time (the workspace opened on the way) against a second and a
//! third agent's in the same workspace and a default workspace's agent, in the same run.
//! It also starts a second gateway on the same database before the workspaces exist and
//! again after they were served, and reports how long each took to listen: what the
//! workspaces cost a server's start.
//!
//! Last, with every workspace open, it drives governed calls as the default workspace's
//! agent, as a workspace's, and as the default's again (a control: what two arms that
//! cannot differ measure apart), in rotated order on the same server (`--ab-seconds`,
//! `--ab-rounds`): what serving a call from a workspace instead of `default` costs the
//! gateway, with one binary, so build-to-build noise cannot pass for it.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Args;
use serde_json::json;

use super::harness::{self, Stack};
use super::load::{self, Call, Phase, Pids, Window};

#[derive(Debug, Args)]
pub struct WorkspacesArgs {
    /// Workspaces to make and open (besides `default`).
    #[arg(long, default_value_t = 100)]
    pub workspaces: usize,
    #[arg(long, default_value = "tier-1-support")]
    pub role: String,
    /// Seconds measured per phase of the governed-call A/B (default workspace against a
    /// workspace's agent); 0 skips it.
    #[arg(long, default_value_t = 5.0)]
    pub ab_seconds: f64,
    /// Rounds of the A/B: each arm runs once a round, and which runs first alternates, so a
    /// drift over the run falls on both.
    #[arg(long, default_value_t = 3)]
    pub ab_rounds: usize,
    /// Print JSON instead of a Markdown table.
    #[arg(long)]
    pub json: bool,
}

/// The gateway process as /proc shows it.
#[derive(Debug, Clone, Copy)]
struct Footprint {
    rss_kib: u64,
    threads: u64,
    fds: u64,
}

fn footprint(pid: u32) -> anyhow::Result<Footprint> {
    let (rss_kib, _) = harness::memory_kib(pid)?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let threads = status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .context("/proc status has no Threads line")?;
    Ok(Footprint {
        rss_kib,
        threads,
        fds: u64::try_from(harness::open_fds(pid)?)?,
    })
}

/// `skillgate ARGS --database-url URL`, which must succeed; its stdout.
fn skillgate(database_url: &str, args: &[&str]) -> anyhow::Result<String> {
    let output = std::process::Command::new(harness::product_binary()?)
        .args(args)
        .args(["--database-url", database_url])
        .output()
        .with_context(|| format!("running skillgate {}", args.join(" ")))?;
    if !output.status.success() {
        bail!(
            "skillgate {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Makes workspace `name` with the catalog in `file` and returns a key of its `support`
/// scope.
fn make_workspace(database_url: &str, name: &str, file: &Path) -> anyhow::Result<String> {
    skillgate(database_url, &["workspace", "create", name])?;
    let file = file.to_string_lossy();
    skillgate(
        database_url,
        &["--workspace", name, "catalog", "apply", file.as_ref()],
    )?;
    let created = skillgate(
        database_url,
        &[
            "--workspace",
            name,
            "key",
            "create",
            "--name",
            "bench",
            "--scope",
            "support",
        ],
    )?;
    created
        .lines()
        .find_map(|line| line.strip_prefix("agent key for scope support: "))
        .map(|key| key.trim().to_owned())
        .with_context(|| format!("no key in {created}"))
}

/// How many times a start-up is timed, before and after the workspaces exist.
const START_UPS: usize = 3;

/// Starts another gateway on `database_url` (as a replica would be) and returns how long it
/// took to listen, and its resident memory then; the gateway is stopped after.
async fn start_up(dir: &Path, database_url: &str, label: &str) -> anyhow::Result<(Duration, u64)> {
    let site_root = dir.to_string_lossy().into_owned();
    let started = Instant::now();
    let (gateway, _) = harness::Process::start(
        &[
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--database-url",
            database_url,
            "--site-root",
            &site_root,
        ],
        &dir.join(format!("start-up-{label}.log")),
        "Skillgate is listening on ",
    )
    .await?;
    let took = started.elapsed();
    let pid = gateway.pid().context("the started gateway has exited")?;
    let (rss_kib, _) = harness::memory_kib(pid)?;
    Ok((took, rss_kib))
}

/// The start-ups' times and the largest resident memory among them.
async fn start_ups(
    dir: &Path,
    database_url: &str,
    label: &str,
) -> anyhow::Result<(Vec<Duration>, u64)> {
    let mut times = Vec::with_capacity(START_UPS);
    let mut rss = 0;
    for i in 0..START_UPS {
        let (took, kib) = start_up(dir, database_url, &format!("{label}-{i}")).await?;
        times.push(took);
        rss = rss.max(kib);
    }
    Ok((times, rss))
}

/// One agent: a new MCP session that starts a governance session and learns `role`.
async fn one_agent(url: &str, key: &str, role: &str) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let client = harness::connect(url, Some(key)).await?;
    harness::init_and_learn(&client, role).await?;
    let took = started.elapsed();
    let _ = client.cancel().await;
    Ok(took)
}

/// Concurrent sessions of the A/B's phases: one, and `skillgate-dev load`'s default.
const AB_SESSIONS: [usize; 2] = [1, 32];

/// One arm of the A/B, summed over its rounds.
#[derive(Debug, Default)]
struct Arm {
    calls: usize,
    seconds: f64,
    gateway_cpu: f64,
    upstream_cpu: f64,
    p50_ms: Vec<f64>,
}

impl Arm {
    fn add(&mut self, phase: &Phase) -> anyhow::Result<()> {
        anyhow::ensure!(
            phase.errors == 0 && phase.calls > 0,
            "{}: {} of {} governed calls failed",
            phase.name,
            phase.errors,
            phase.calls
        );
        self.calls += phase.calls;
        self.seconds += phase.seconds;
        self.gateway_cpu += phase.gateway_cpu;
        self.upstream_cpu += phase.upstream_cpu;
        self.p50_ms.push(phase.quantile_ms(0.5));
        Ok(())
    }

    fn gateway_us_per_call(&self) -> f64 {
        self.gateway_cpu / self.calls as f64 * 1e6
    }

    fn upstream_us_per_call(&self) -> f64 {
        self.upstream_cpu / self.calls as f64 * 1e6
    }

    fn to_json(&self) -> serde_json::Value {
        json!({
            "calls": self.calls,
            "calls_per_s": self.calls as f64 / self.seconds,
            "gateway_cpu_us_per_call": self.gateway_us_per_call(),
            "upstream_cpu_us_per_call": self.upstream_us_per_call(),
            "p50_ms_per_round": self.p50_ms,
        })
    }
}

/// `sessions` agents of `key`, each with a governance session that learned `role`, calling
/// `lookup_customer` through the gateway for `window`.
async fn governed(
    name: &'static str,
    url: &str,
    key: &str,
    role: &str,
    sessions: usize,
    window: Window,
    pids: &Pids,
) -> anyhow::Result<Phase> {
    let mut clients = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        let client = harness::connect(url, Some(key)).await?;
        let session = harness::init_and_learn(&client, role).await?;
        clients.push((client, Some(session)));
    }
    load::drive(name, clients, &Call::lookup(), window, pids, None, None).await
}

/// The A/B at one number of sessions: the default workspace's agents, a workspace's, and
/// the default's again as a control (an A/A: how far two arms that cannot differ do).
struct AbRow {
    sessions: usize,
    default: Arm,
    workspace: Arm,
    control: Arm,
}

/// The A/B at each of [`AB_SESSIONS`]. The three arms run in a rotating order, so over
/// three rounds each runs first, second and third once.
async fn ab(
    stack: &Stack,
    workspace_key: &str,
    role: &str,
    seconds: f64,
    rounds: usize,
) -> anyhow::Result<Vec<AbRow>> {
    let window = Window::closed(1.0, seconds)?;
    let (gateway, upstream) = stack.pids()?;
    let pids = Pids {
        gateways: vec![gateway],
        upstream,
        database: None,
    };
    let arms = [
        ("default", stack.key.as_str()),
        ("workspace", workspace_key),
        ("control", stack.key.as_str()),
    ];
    let mut out = Vec::with_capacity(AB_SESSIONS.len());
    for sessions in AB_SESSIONS {
        let mut sums: [Arm; 3] = Default::default();
        for round in 0..rounds {
            for step in 0..arms.len() {
                let index = (round + step) % arms.len();
                let (name, key) = arms[index];
                let phase =
                    governed(name, &stack.gateway_url, key, role, sessions, window, &pids).await?;
                sums[index].add(&phase)?;
            }
        }
        let [default, workspace, control] = sums;
        out.push(AbRow {
            sessions,
            default,
            workspace,
            control,
        });
    }
    Ok(out)
}

pub async fn run(args: WorkspacesArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.workspaces > 0, "--workspaces must be at least 1");
    anyhow::ensure!(
        args.ab_seconds.is_finite() && args.ab_seconds >= 0.0,
        "--ab-seconds must be 0 or more"
    );
    anyhow::ensure!(args.ab_rounds > 0, "--ab-rounds must be at least 1");
    // Each workspace's catalog is the default's, so it names the same demo upstream over
    // HTTP: every workspace opens its own connections to it.
    let stack = Stack::start().await?;
    let database_url = format!("sqlite://{}", stack.dir().join("bench.db").display());
    let pid = stack.gateway.pid().context("the gateway has exited")?;
    let (start_before, start_rss_before) = start_ups(stack.dir(), &database_url, "before").await?;
    let file = stack.dir().join("catalog.yaml");
    std::fs::write(&file, skillgate(&database_url, &["catalog", "export"])?)?;
    let mut keys = Vec::with_capacity(args.workspaces);
    for i in 1..=args.workspaces {
        keys.push(make_workspace(&database_url, &format!("ws-{i}"), &file)?);
    }

    // The default workspace warm first: the baseline holds one workspace in use.
    one_agent(&stack.gateway_url, &stack.key, &args.role).await?;
    let mut warm_default = Vec::new();
    for _ in 0..5 {
        warm_default.push(one_agent(&stack.gateway_url, &stack.key, &args.role).await?);
    }
    let before = footprint(pid)?;
    let (mut first, mut second, mut third) = (Vec::new(), Vec::new(), Vec::new());
    for key in &keys {
        for times in [&mut first, &mut second, &mut third] {
            times.push(one_agent(&stack.gateway_url, key, &args.role).await?);
        }
    }
    let after = footprint(pid)?;
    let (start_after, start_rss_after) = start_ups(stack.dir(), &database_url, "after").await?;
    let ab = if args.ab_seconds > 0.0 {
        ab(
            &stack,
            &keys[0],
            &args.role,
            args.ab_seconds,
            args.ab_rounds,
        )
        .await?
    } else {
        Vec::new()
    };
    let n = args.workspaces as f64;
    let per = |after: u64, before: u64| (after as f64 - before as f64) / n;
    let ms = |times: &[Duration], p: f64| harness::percentile(times, p).as_secs_f64() * 1000.0;
    let report = json!({
        "workspaces": args.workspaces,
        "rss_before_mib": before.rss_kib as f64 / 1024.0,
        "rss_after_mib": after.rss_kib as f64 / 1024.0,
        "rss_per_workspace_kib": per(after.rss_kib, before.rss_kib),
        "threads_before": before.threads,
        "threads_per_workspace": per(after.threads, before.threads),
        "fds_before": before.fds,
        "fds_per_workspace": per(after.fds, before.fds),
        "default_agent_ms_p50": ms(&warm_default, 0.5),
        "first_agent_ms_p50": ms(&first, 0.5),
        "first_agent_ms_max": ms(&first, 1.0),
        "second_agent_ms_p50": ms(&second, 0.5),
        "third_agent_ms_p50": ms(&third, 0.5),
        "start_up_ms_before_p50": ms(&start_before, 0.5),
        "start_up_ms_after_p50": ms(&start_after, 0.5),
        "start_up_rss_before_mib": start_rss_before as f64 / 1024.0,
        "start_up_rss_after_mib": start_rss_after as f64 / 1024.0,
        "governed_ab": ab.iter().map(|row| json!({
            "sessions": row.sessions,
            "default": row.default.to_json(),
            "workspace": row.workspace.to_json(),
            "control": row.control.to_json(),
            "gateway_cpu_ratio_workspace_over_default":
                row.workspace.gateway_us_per_call() / row.default.gateway_us_per_call(),
            "gateway_cpu_ratio_control_over_default":
                row.control.gateway_us_per_call() / row.default.gateway_us_per_call(),
        })).collect::<Vec<_>>(),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let f = |key: &str| report[key].as_f64().unwrap_or(f64::NAN);
    println!(
        "| workspaces opened | RSS before → after | RSS per workspace | threads per workspace | files per workspace | agent of default (p50) | first agent of a workspace (p50 / max) | second agent (p50) | third agent (p50) |\n\
         | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n\
         | {} | {:.1} → {:.1} MiB | {:.0} KiB | {:.1} | {:.1} | {:.1} ms | {:.1} / {:.1} ms | {:.1} ms | {:.1} ms |\n\n\
         | start-up of a second gateway (p50 of {START_UPS}) | time to listen | RSS when listening |\n\
         | --- | ---: | ---: |\n\
         | before the workspaces | {:.0} ms | {:.1} MiB |\n\
         | with the {} workspaces | {:.0} ms | {:.1} MiB |",
        args.workspaces,
        f("rss_before_mib"),
        f("rss_after_mib"),
        f("rss_per_workspace_kib"),
        f("threads_per_workspace"),
        f("fds_per_workspace"),
        f("default_agent_ms_p50"),
        f("first_agent_ms_p50"),
        f("first_agent_ms_max"),
        f("second_agent_ms_p50"),
        f("third_agent_ms_p50"),
        f("start_up_ms_before_p50"),
        f("start_up_rss_before_mib"),
        args.workspaces,
        f("start_up_ms_after_p50"),
        f("start_up_rss_after_mib"),
    );
    if !ab.is_empty() {
        println!(
            "\n| governed calls with {} workspaces open ({} rotated rounds of {}s) | gateway CPU µs per call: default / workspace / default again | workspace ÷ default | default again ÷ default (A/A) | calls/s default / workspace / again | p50 ms default / workspace / again (per round) |\n\
             | --- | ---: | ---: | ---: | ---: | --- |",
            args.workspaces, args.ab_rounds, args.ab_seconds
        );
        let rounds = |arm: &Arm| {
            arm.p50_ms
                .iter()
                .map(|ms| format!("{ms:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let rate = |arm: &Arm| arm.calls as f64 / arm.seconds;
        for row in &ab {
            let (a, b, c) = (&row.default, &row.workspace, &row.control);
            println!(
                "| {} connection(s) | {:.0} / {:.0} / {:.0} | {:.3} | {:.3} | {:.0} / {:.0} / {:.0} | {} / {} / {} |",
                row.sessions,
                a.gateway_us_per_call(),
                b.gateway_us_per_call(),
                c.gateway_us_per_call(),
                b.gateway_us_per_call() / a.gateway_us_per_call(),
                c.gateway_us_per_call() / a.gateway_us_per_call(),
                rate(a),
                rate(b),
                rate(c),
                rounds(a),
                rounds(b),
                rounds(c),
            );
        }
    }
    Ok(())
}
