//! `skillgate-dev backends`: the same governed load on SQLite, on PostgreSQL with one
//! replica and on PostgreSQL with two replicas, in one run, against one demo upstream.
//!
//! Each phase gets a database of its own, seeded alike, and the same number of sessions
//! (spread evenly over the replicas, as a load balancer would). The SQLite phase is the
//! baseline the others are compared with; CPU is reported per call, for the gateway's
//! processes and for PostgreSQL's (SQLite's work is inside the gateway's).

use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Value, json};
use skillgate_testpg::TempPostgres;

use super::harness::{self, Process, ScratchDir};
use super::load::{Phase, Pids, Shape, drive};

/// The load of each phase; `--sessions` counts all replicas' sessions together.
pub type BackendsArgs = Shape;

/// One measured configuration.
struct Run {
    backend: &'static str,
    replicas: usize,
    phase: Phase,
}

impl Run {
    fn per_call_us(&self, seconds: f64) -> f64 {
        if self.phase.calls == 0 {
            return f64::NAN;
        }
        seconds / self.phase.calls as f64 * 1e6
    }
}

pub async fn run(args: BackendsArgs) -> anyhow::Result<()> {
    args.check()?;
    let dir = ScratchDir::new("backends")?;
    let (upstream, upstream_url) = Process::start(
        &["demo-upstream", "--http", "127.0.0.1:0"],
        &dir.path().join("upstream.log"),
        "demo upstream listening on ",
    )
    .await?;
    let upstream = upstream.pid().context("the demo upstream has exited")?;
    let postgres = TempPostgres::start().context("starting a throwaway PostgreSQL")?;
    let postmaster = postmaster_pid(&postgres)?;
    eprintln!(
        "demo upstream {upstream_url}; PostgreSQL on port {}; logs in {}",
        postgres.port(),
        dir.path().display()
    );

    let configurations: [(&'static str, usize); 3] =
        [("SQLite", 1), ("PostgreSQL", 1), ("PostgreSQL", 2)];
    let mut runs = Vec::new();
    for (index, (backend, replicas)) in configurations.into_iter().enumerate() {
        let (database_url, database) = match backend {
            "SQLite" => (
                format!("sqlite://{}", dir.path().join("sqlite.db").display()),
                None,
            ),
            _ => (postgres.try_fresh_database()?, Some(postmaster)),
        };
        let key = harness::seed(&database_url, &upstream_url).await?;
        let phase = measure(
            &args,
            &dir,
            index,
            &database_url,
            replicas,
            &key,
            upstream,
            database,
        )
        .await
        .with_context(|| format!("{backend} with {replicas} replica(s)"))?;
        runs.push(Run {
            backend,
            replicas,
            phase,
        });
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&runs))?);
    } else {
        print!("{}", markdown(&runs));
    }
    Ok(())
}

/// Starts `replicas` gateways on `database_url`, spreads the sessions over them and
/// drives the governed load.
#[allow(clippy::too_many_arguments)]
async fn measure(
    args: &BackendsArgs,
    dir: &ScratchDir,
    index: usize,
    database_url: &str,
    replicas: usize,
    key: &str,
    upstream: u32,
    database: Option<u32>,
) -> anyhow::Result<Phase> {
    let signing_key = dir.path().join(format!("signing-{index}.key"));
    let site_root = dir.path().to_string_lossy().into_owned();
    let mut gateways = Vec::with_capacity(replicas);
    for replica in 0..replicas {
        let (process, base) = Process::start(
            &[
                "serve",
                "--bind",
                "127.0.0.1:0",
                "--database-url",
                database_url,
                "--site-root",
                &site_root,
                "--audit-signing-key",
                &signing_key.to_string_lossy(),
            ],
            &dir.path().join(format!("gateway-{index}-{replica}.log")),
            "Skillgate is listening on ",
        )
        .await?;
        gateways.push((process, format!("{base}/mcp")));
    }
    let mut clients = Vec::with_capacity(args.sessions);
    for session in 0..args.sessions {
        let url = &gateways[session % replicas].1;
        let client = harness::connect(url, Some(key)).await?;
        let id = harness::init_and_learn(&client, &args.role).await?;
        clients.push((client, Some(id)));
    }
    let pids = Pids {
        gateways: gateways
            .iter()
            .map(|(process, _)| process.pid().context("a gateway has exited"))
            .collect::<anyhow::Result<_>>()?,
        upstream,
        database,
    };
    drive(
        "governed",
        clients,
        Duration::from_secs_f64(args.warmup),
        Duration::from_secs_f64(args.duration),
        None,
        &pids,
        None,
    )
    .await
}

/// The postmaster's pid: the first line of `postmaster.pid` in the data directory.
fn postmaster_pid(postgres: &TempPostgres) -> anyhow::Result<u32> {
    let dir = postgres
        .dir()
        .context("the benchmark's PostgreSQL was started by another process")?;
    let file = dir.join("data").join("postmaster.pid");
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    text.lines()
        .next()
        .and_then(|line| line.trim().parse().ok())
        .with_context(|| format!("no pid in {}", file.display()))
}

fn to_json(runs: &[Run]) -> Value {
    let baseline = runs[0].phase.calls_per_second();
    Value::Array(
        runs.iter()
            .map(|run| {
                json!({
                    "backend": run.backend,
                    "replicas": run.replicas,
                    "sessions": run.phase.sessions,
                    "calls": run.phase.calls,
                    "errors": run.phase.errors,
                    "calls_per_s": run.phase.calls_per_second(),
                    "p50_ms": run.phase.quantile_ms(0.50),
                    "p99_ms": run.phase.quantile_ms(0.99),
                    "gateway_cpu_us_per_call": run.per_call_us(run.phase.gateway_cpu),
                    "database_cpu_us_per_call": run.per_call_us(run.phase.database_cpu),
                    "throughput_over_sqlite": run.phase.calls_per_second() / baseline,
                })
            })
            .collect(),
    )
}

fn markdown(runs: &[Run]) -> String {
    let baseline = runs[0].phase.calls_per_second();
    let mut out = String::from(
        "Closed loop: each session calls again as soon as it is answered; the sessions are \
         spread evenly over the replicas.\n\n\
         | backend | replicas | sessions | calls | errors | calls/s | × SQLite | p50 ms | p99 ms | \
         gateway CPU µs/call | PostgreSQL CPU µs/call |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for run in runs {
        let phase = &run.phase;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} |\n",
            run.backend,
            run.replicas,
            phase.sessions,
            phase.calls,
            phase.errors,
            phase.calls_per_second(),
            phase.calls_per_second() / baseline,
            phase.quantile_ms(0.50),
            phase.quantile_ms(0.99),
            run.per_call_us(phase.gateway_cpu),
            run.per_call_us(phase.database_cpu),
        ));
    }
    out
}
