//! `skillgate-dev cluster`: one SQLite server and 1, 2, 3… PostgreSQL replicas under the
//! same governed load, in one run, each replica held to the same CPU budget.
//!
//! On a small machine, replicas share the cores with PostgreSQL, the upstream and the load
//! tool, so without a budget the machine saturates before the design does, and a second
//! replica can show nothing. Here each replica runs in a control group of its own with a
//! CPU quota (a quarter of a core by default); PostgreSQL, the demo upstream and this load
//! tool run outside the quotas. The load saturates the replicas (32 sessions per replica
//! by default, each calling again as soon as it is answered), once on a tool without
//! limits and once on the same tool under a cumulative cap, whose reservation commits with
//! the decision. Each configuration gets a database of its own, seeded alike. The SQLite
//! server is the baseline the others are compared with.
//!
//! Besides throughput and latency it reports CPU per call of each replica and of
//! PostgreSQL, and PostgreSQL's own counts per governed call: statements (each one round
//! trip), write commits and the time spent waiting for the store's write lock
//! (`pg_stats`).

use anyhow::Context as _;
use clap::Args;
use serde_json::{Value, json};
use skillgate_core::model::{Limit, Role, Scope, Skill};
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;
use skillgate_demo_upstream::{BENCH_PAYLOAD, bench_specs};
use skillgate_testpg::TempPostgres;

use super::cgroup::{CpuGroup, Quotas, Throttling};
use super::harness::{self, Process, ScratchDir};
use super::load::{Call, Observer, Phase, Pids, Window, drive};
use super::pg_stats::{self, Counters};
use skillgate::METRICS_PATH;

#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// Concurrent MCP sessions (one client each) per replica.
    #[arg(long, default_value_t = 32)]
    pub sessions_per_replica: usize,
    /// The most PostgreSQL replicas: the run measures 1 up to this many.
    #[arg(long, default_value_t = 3)]
    pub replicas: usize,
    /// CPU time each replica may use, in cores (a cgroup CPU quota).
    #[arg(long, default_value_t = 0.25)]
    pub quota: f64,
    /// Run the replicas without CPU quotas.
    #[arg(long)]
    pub no_quota: bool,
    /// Seconds measured per load, after the warm-up.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds of calls before measuring, per load.
    #[arg(long, default_value_t = 3.0)]
    pub warmup: f64,
    /// Print JSON instead of a Markdown table.
    #[arg(long)]
    pub json: bool,
}

impl ClusterArgs {
    fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.sessions_per_replica > 0,
            "--sessions-per-replica must be at least 1"
        );
        anyhow::ensure!(
            (1..=8).contains(&self.replicas),
            "--replicas must be between 1 and 8"
        );
        anyhow::ensure!(
            self.quota.is_finite() && self.quota > 0.0,
            "--quota must be a positive number of cores"
        );
        Ok(())
    }
}

/// The scope, skill and roles the benchmark adds to the demo catalog.
const SCOPE: &str = "bench";
const UNCAPPED: &str = "bench-uncapped";
const CAPPED: &str = "bench-capped";

/// One of the two loads each configuration serves.
struct Load {
    label: &'static str,
    role: &'static str,
}

const LOADS: [Load; 2] = [
    Load {
        label: "no limit",
        role: UNCAPPED,
    },
    Load {
        label: "cumulative cap",
        role: CAPPED,
    },
];

/// Both loads call the same tool alike: a 1 KB answer, an amount the cap adds up.
fn call() -> Call {
    Call {
        tool: BENCH_PAYLOAD,
        arguments: json!({"bytes": 1024, "amount": 0.01}),
    }
}

/// One measured configuration and load.
struct Run {
    backend: &'static str,
    replicas: usize,
    load: &'static str,
    phase: Phase,
    /// PostgreSQL's counters over the window; `None` on SQLite.
    postgres: Option<Counters>,
    /// Each replica's throttling over the window; empty without quotas.
    throttling: Vec<Throttling>,
    /// Seconds all replicas held the write lock over the window, and how many times they
    /// took it, from their `/metrics`.
    lock_held: LockHeld,
}

impl Run {
    fn per_call(&self, total: f64) -> f64 {
        if self.phase.calls == 0 {
            return f64::NAN;
        }
        total / self.phase.calls as f64
    }

    /// Measured calls each replica answered: sessions were dealt out in turn.
    fn replica_calls(&self) -> Vec<usize> {
        let mut calls = vec![0; self.replicas];
        for (client, count) in self.phase.per_client.iter().enumerate() {
            calls[client % self.replicas] += count;
        }
        calls
    }

    /// Each replica's CPU per call it answered, in µs.
    fn replica_cpu_us(&self) -> Vec<f64> {
        self.replica_calls()
            .iter()
            .zip(&self.phase.replica_cpu)
            .map(|(calls, cpu)| {
                if *calls == 0 {
                    f64::NAN
                } else {
                    cpu / *calls as f64 * 1e6
                }
            })
            .collect()
    }

    /// Each replica's share of enforcement periods in which it hit its quota.
    fn throttled(&self) -> Vec<f64> {
        self.throttling
            .iter()
            .map(|t| t.throttled as f64 / (t.periods.max(1)) as f64)
            .collect()
    }
}

pub async fn run(args: ClusterArgs) -> anyhow::Result<()> {
    args.check()?;
    // Ctrl-C or a TERM drops the benchmark: its replicas are killed and their control
    // groups removed by their guards on the way out.
    tokio::select! {
        outcome = measure_all(&args) => outcome,
        signal = interrupted() => {
            eprintln!("{}: stopping the replicas and removing the CPU quotas", signal?);
            anyhow::bail!("interrupted")
        }
    }
}

async fn interrupted() -> anyhow::Result<&'static str> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        ctrl_c = tokio::signal::ctrl_c() => Ok(ctrl_c.map(|()| "interrupted")?),
        _ = term.recv() => Ok("terminated"),
    }
}

async fn measure_all(args: &ClusterArgs) -> anyhow::Result<()> {
    let window = Window::closed(args.warmup, args.duration)?;
    let quotas = if args.no_quota {
        eprintln!("running without CPU quotas (--no-quota)");
        None
    } else {
        match Quotas::open() {
            Ok(quotas) => {
                eprintln!("each replica gets {} core(s): {quotas:?}", args.quota);
                Some(quotas)
            }
            Err(error) => {
                eprintln!(
                    "NO CPU QUOTAS: {error:#}. Running without them: the replicas share the \
                     machine with PostgreSQL, the upstream and this load tool (run as root \
                     on a machine with a writable cgroup hierarchy to hold each to a budget)"
                );
                None
            }
        }
    };
    let dir = ScratchDir::new("cluster")?;
    let (upstream, upstream_url) = Process::start(
        &["demo-upstream", "--http", "127.0.0.1:0", "--bench-tools"],
        &dir.path().join("upstream.log"),
        "demo upstream listening on ",
    )
    .await?;
    let upstream = upstream.pid().context("the demo upstream has exited")?;
    let postgres = TempPostgres::start_with_settings(&pg_stats::SETTINGS)
        .context("starting a throwaway PostgreSQL")?;
    pg_stats::enable(&postgres)?;
    let postmaster = postmaster_pid(&postgres)?;
    eprintln!(
        "demo upstream {upstream_url}; PostgreSQL on port {}; logs in {}",
        postgres.port(),
        dir.path().display()
    );

    let configurations = std::iter::once(("SQLite", 1))
        .chain((1..=args.replicas).map(|replicas| ("PostgreSQL", replicas)));
    let mut runs = Vec::new();
    for (index, (backend, replicas)) in configurations.enumerate() {
        let database_url = match backend {
            "SQLite" => format!("sqlite://{}", dir.path().join("sqlite.db").display()),
            _ => postgres.try_fresh_database()?,
        };
        let key = seed(&database_url, &upstream_url).await?;
        let config = Configuration {
            args,
            dir: &dir,
            index,
            backend,
            replicas,
            database_url: &database_url,
            key: &key,
            upstream,
            postgres: (backend != "SQLite").then_some((&postgres, postmaster)),
            quotas: quotas.as_ref(),
            window,
        };
        let measured = config
            .measure()
            .await
            .with_context(|| format!("{backend} with {replicas} replica(s)"))?;
        runs.extend(measured);
    }
    let quota = quotas.as_ref().map(|_| args.quota);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&runs, quota))?);
    } else {
        print!("{}", markdown(&runs, quota, args.sessions_per_replica));
    }
    Ok(())
}

/// The demo catalog with the benchmark tool, a skill, a role without limits and one with
/// a cumulative cap on the tool, and scope `bench` allowing both; returns a key for it.
async fn seed(database_url: &str, upstream_url: &str) -> anyhow::Result<String> {
    let slug = |text: &str| Slug::parse(text).with_context(|| format!("`{text}` is not a slug"));
    let store = Store::open(database_url).await?;
    harness::seed_demo(&store, upstream_url).await?;
    store.seed_tools(&slug("demo")?, &bench_specs()).await?;
    let skill = Skill {
        slug: slug("bench")?,
        description: "The benchmark tool.".to_owned(),
        instructions: "# Bench\n\nCall `bench_payload`.".to_owned(),
        tools: vec![BENCH_PAYLOAD.to_owned()],
        resources: Vec::new(),
        frontmatter_extra: Default::default(),
    };
    store.create_skill(&skill).await?;
    let cap = Limit::SumCap {
        tool: BENCH_PAYLOAD.to_owned(),
        arg: "amount".to_owned(),
        // Never reached by a run: the cap is read and reserved on every call, as a real
        // one is, and never refuses.
        max: 1_000_000_000_000i64.into(),
    };
    for (role, limits) in [(UNCAPPED, Vec::new()), (CAPPED, vec![cap])] {
        store
            .create_role(&Role {
                slug: slug(role)?,
                title: role.to_owned(),
                description: "The benchmark tool.".to_owned(),
                instructions: "Call the benchmark tool.".to_owned(),
                skills: vec![skill.slug.clone()],
                limits,
            })
            .await?;
    }
    store
        .create_scope(&Scope {
            slug: slug(SCOPE)?,
            description: "The benchmark's roles.".to_owned(),
            roles: vec![slug(UNCAPPED)?, slug(CAPPED)?],
            guardrails: Vec::new(),
        })
        .await?;
    let key = harness::agent_key(&store, SCOPE).await?;
    store.close().await;
    Ok(key)
}

/// One backend and replica count, and what it runs beside.
struct Configuration<'a> {
    args: &'a ClusterArgs,
    dir: &'a ScratchDir,
    index: usize,
    backend: &'static str,
    replicas: usize,
    database_url: &'a str,
    key: &'a str,
    upstream: u32,
    /// The server and its postmaster's pid, for PostgreSQL.
    postgres: Option<(&'a TempPostgres, u32)>,
    quotas: Option<&'a Quotas>,
    window: Window,
}

impl Configuration<'_> {
    /// Starts the replicas, each in its quota group, and measures both loads on them.
    async fn measure(&self) -> anyhow::Result<Vec<Run>> {
        let signing_key = self.dir.path().join(format!("signing-{}.key", self.index));
        let site_root = self.dir.path().to_string_lossy().into_owned();
        let mut replicas = Vec::with_capacity(self.replicas);
        let mut groups = Vec::new();
        for replica in 0..self.replicas {
            let (process, base) = Process::start(
                &[
                    "serve",
                    "--bind",
                    "127.0.0.1:0",
                    "--database-url",
                    self.database_url,
                    "--site-root",
                    &site_root,
                    "--audit-signing-key",
                    &signing_key.to_string_lossy(),
                ],
                &self
                    .dir
                    .path()
                    .join(format!("gateway-{}-{replica}.log", self.index)),
                "Skillgate is listening on ",
            )
            .await?;
            let pid = process.pid().context("a replica has exited")?;
            if let Some(quotas) = self.quotas {
                let group = quotas.group(&format!("{}-{replica}", self.index), self.args.quota)?;
                group.add(pid)?;
                groups.push(group);
            }
            replicas.push((process, base, pid));
        }
        let pids = Pids {
            gateways: replicas.iter().map(|(_, _, pid)| *pid).collect(),
            upstream: self.upstream,
            database: self.postgres.map(|(_, postmaster)| postmaster),
        };
        let database = match self.postgres {
            Some(_) => Some(pg_stats::database_of(self.database_url)?),
            None => None,
        };
        let mut runs = Vec::with_capacity(LOADS.len());
        for load in &LOADS {
            let sessions = self.args.sessions_per_replica * self.replicas;
            let mut clients = Vec::with_capacity(sessions);
            for session in 0..sessions {
                // Dealt out in turn, as a balancer would; `Run::replica_calls` relies on it.
                let url = format!("{}/mcp", replicas[session % self.replicas].1);
                let client = harness::connect(&url, Some(self.key)).await?;
                let id = harness::init_and_learn(&client, load.role).await?;
                clients.push((client, Some(id)));
            }
            let mut observer = WindowCounters {
                postgres: self.postgres.map(|(pg, _)| pg).zip(database),
                groups: &groups,
                metrics: replicas
                    .iter()
                    .map(|(_, base, _)| format!("{base}{METRICS_PATH}"))
                    .collect(),
                start: None,
                counters: None,
                throttling: Vec::new(),
                lock_held: LockHeld::default(),
            };
            let phase = drive(
                "governed",
                clients,
                &call(),
                self.window,
                &pids,
                None,
                Some(&mut observer),
            )
            .await
            .with_context(|| format!("the load `{}`", load.label))?;
            eprintln!(
                "{} × {}, {}: {:.0} calls/s",
                self.backend,
                self.replicas,
                load.label,
                phase.calls_per_second()
            );
            runs.push(Run {
                backend: self.backend,
                replicas: self.replicas,
                load: load.label,
                phase,
                postgres: observer.counters,
                throttling: observer.throttling,
                lock_held: observer.lock_held,
            });
        }
        Ok(runs)
    }
}

/// Reads PostgreSQL's counters and the quota groups' throttling at both ends of a window.
struct WindowCounters<'a> {
    postgres: Option<(&'a TempPostgres, &'a str)>,
    groups: &'a [CpuGroup],
    /// Each replica's `/metrics` page.
    metrics: Vec<String>,
    start: Option<(Option<Counters>, Vec<Throttling>, LockHeld)>,
    /// Over the window, once it ended.
    counters: Option<Counters>,
    throttling: Vec<Throttling>,
    lock_held: LockHeld,
}

/// The write-lock hold histogram's sum (seconds) and count, of all replicas together.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct LockHeld {
    seconds: f64,
    times: f64,
}

impl LockHeld {
    const SUM: &'static str = "skillgate_store_write_lock_hold_seconds_sum ";
    const COUNT: &'static str = "skillgate_store_write_lock_hold_seconds_count ";

    /// Adds one replica's page.
    fn add(&mut self, page: &str) -> anyhow::Result<()> {
        let value = |prefix: &str| {
            page.lines()
                .find_map(|line| line.strip_prefix(prefix))
                .and_then(|value| value.trim().parse::<f64>().ok())
                .with_context(|| format!("no `{}` on a replica's /metrics", prefix.trim()))
        };
        self.seconds += value(Self::SUM)?;
        self.times += value(Self::COUNT)?;
        Ok(())
    }
}

impl WindowCounters<'_> {
    fn read(&self) -> anyhow::Result<(Option<Counters>, Vec<Throttling>, LockHeld)> {
        let counters = match self.postgres {
            Some((postgres, database)) => Some(pg_stats::read(postgres, database)?),
            None => None,
        };
        let throttling = self
            .groups
            .iter()
            .map(CpuGroup::throttling)
            .collect::<anyhow::Result<_>>()?;
        // Called inside `block_in_place`: the pages are read on this thread.
        let mut lock_held = LockHeld::default();
        for url in &self.metrics {
            let page = tokio::runtime::Handle::current()
                .block_on(async { reqwest::get(url).await?.error_for_status()?.text().await });
            lock_held.add(&page.with_context(|| format!("reading {url}"))?)?;
        }
        Ok((counters, throttling, lock_held))
    }
}

impl Observer for WindowCounters<'_> {
    fn window_started(&mut self) -> anyhow::Result<()> {
        self.start = Some(self.read()?);
        Ok(())
    }

    fn window_ended(&mut self) -> anyhow::Result<()> {
        let (counters, throttling, lock_held) = self.read()?;
        let (counters_before, throttling_before, lock_held_before) = self
            .start
            .take()
            .context("the window ended before it started")?;
        self.lock_held = LockHeld {
            seconds: lock_held.seconds - lock_held_before.seconds,
            times: lock_held.times - lock_held_before.times,
        };
        self.counters = counters
            .zip(counters_before)
            .map(|(after, before)| after - before);
        self.throttling = throttling
            .iter()
            .zip(&throttling_before)
            .map(|(after, before)| Throttling {
                periods: after.periods - before.periods,
                throttled: after.throttled - before.throttled,
            })
            .collect();
        Ok(())
    }
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

/// The SQLite run of the same load: what each run is compared with.
fn baseline<'a>(runs: &'a [Run], run: &Run) -> Option<&'a Run> {
    runs.iter()
        .find(|other| other.backend == "SQLite" && other.load == run.load)
}

fn to_json(runs: &[Run], quota: Option<f64>) -> Value {
    let rows: Vec<Value> = runs
        .iter()
        .map(|run| {
            let phase = &run.phase;
            let over_sqlite = baseline(runs, run)
                .map(|base| phase.calls_per_second() / base.phase.calls_per_second());
            json!({
                "backend": run.backend,
                "replicas": run.replicas,
                "load": run.load,
                "sessions": phase.sessions,
                "calls": phase.calls,
                "errors": phase.errors,
                "calls_per_s": phase.calls_per_second(),
                "throughput_over_sqlite": over_sqlite,
                "p50_ms": phase.quantile_ms(0.50),
                "p99_ms": phase.quantile_ms(0.99),
                "replica_cpu_us_per_call": run.replica_cpu_us(),
                "replica_throttled_share": run.throttled(),
                "database_cpu_us_per_call": run.per_call(phase.database_cpu) * 1e6,
                "statements_per_call": run.postgres.map(|c| run.per_call(c.statements)),
                "commits_per_call": run.postgres.map(|c| run.per_call(c.commits)),
                "lock_wait_us_per_call": run.postgres.map(|c| run.per_call(c.lock_wait_ms) * 1e3),
                "lock_held_ms_per_take": run.lock_held.seconds / run.lock_held.times * 1e3,
                "lock_held_us_per_call": run.per_call(run.lock_held.seconds) * 1e6,
                "lock_held_share_of_window": run.lock_held.seconds / phase.seconds,
            })
        })
        .collect();
    json!({"quota_cores_per_replica": quota, "runs": rows})
}

fn list(values: &[f64], format: impl Fn(f64) -> String) -> String {
    if values.is_empty() {
        return "–".to_owned();
    }
    values
        .iter()
        .map(|value| format(*value))
        .collect::<Vec<_>>()
        .join(" / ")
}

fn markdown(runs: &[Run], quota: Option<f64>, sessions_per_replica: usize) -> String {
    let budget = match quota {
        Some(cores) => format!("each replica held to {cores} core(s) by a cgroup CPU quota"),
        None => "no CPU quotas (the replicas share the machine)".to_owned(),
    };
    let mut out = format!(
        "Closed loop, {sessions_per_replica} sessions per replica dealt out in turn, {budget}; \
         PostgreSQL, the upstream and the load tool outside any quota. Statements are \
         PostgreSQL's count (one round trip each); lock wait is time in the write lock's \
         statement; lock held is the replicas' own account (`/metrics`), per time a write \
         took it and in all per second of the window.\n\n\
         | backend | replicas | load | calls/s | × SQLite | p50 ms | p99 ms | errors | \
         CPU µs/call, each replica | periods throttled | PostgreSQL CPU µs/call | \
         statements/call | commits/call | lock wait µs/call | lock held ms/take | lock held s/s |\n\
         | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for run in runs {
        let phase = &run.phase;
        let over_sqlite = baseline(runs, run).map_or(f64::NAN, |base| {
            phase.calls_per_second() / base.phase.calls_per_second()
        });
        let postgres = |value: fn(&Counters) -> f64, scale: f64, digits: usize| {
            run.postgres.as_ref().map_or("–".to_owned(), |counters| {
                format!("{:.digits$}", run.per_call(value(counters)) * scale)
            })
        };
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} |\n",
            run.backend,
            run.replicas,
            run.load,
            phase.calls_per_second(),
            over_sqlite,
            phase.quantile_ms(0.50),
            phase.quantile_ms(0.99),
            phase.errors,
            list(&run.replica_cpu_us(), |us| format!("{us:.0}")),
            list(&run.throttled(), |share| format!("{:.0} %", share * 100.0)),
            match run.postgres {
                Some(_) => format!("{:.0}", run.per_call(phase.database_cpu) * 1e6),
                None => "–".to_owned(),
            },
            postgres(|c| c.statements, 1.0, 1),
            postgres(|c| c.commits, 1.0, 2),
            postgres(|c| c.lock_wait_ms, 1e3, 0),
            run.lock_held.seconds / run.lock_held.times * 1e3,
            run.lock_held.seconds / phase.seconds,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "\
# HELP skillgate_store_write_lock_hold_seconds Time write transactions held the lock.
# TYPE skillgate_store_write_lock_hold_seconds histogram
skillgate_store_write_lock_hold_seconds_sum 1.5
skillgate_store_write_lock_hold_seconds_count 300
skillgate_store_write_lock_hold_seconds_bucket{le=\"0.000025\"} 0
skillgate_store_write_lock_wait_seconds_sum 9.0
skillgate_store_write_lock_wait_seconds_count 7
";

    #[test]
    fn the_lock_hold_of_several_replicas_adds_up_from_their_pages() {
        let mut held = LockHeld::default();
        held.add(PAGE).unwrap();
        held.add(PAGE).unwrap();
        assert_eq!(
            held,
            LockHeld {
                seconds: 3.0,
                times: 600.0
            }
        );
    }

    #[test]
    fn a_page_without_the_lock_hold_series_is_an_error_not_a_zero() {
        let error = LockHeld::default()
            .add("skillgate_call_decisions_total{decision=\"allowed\"} 3\n")
            .unwrap_err();
        assert!(
            error.to_string().contains("write_lock_hold_seconds_sum"),
            "{error}"
        );
    }
}
