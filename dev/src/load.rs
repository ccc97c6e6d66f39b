//! `skillgate-dev load`: governed calls through `/mcp` against direct calls to the demo
//! upstream, with the same number of concurrent MCP clients, in one run.
//!
//! By default every client calls again as soon as its answer arrives (closed loop), which
//! finds the most calls per second each path sustains; latency there is mostly time spent
//! queueing. `--rate` offers both paths the same fixed load instead (open loop), so the
//! difference in latency is what the gateway adds to a call, not how long the queue is.
//! Each call's latency counts from when it was due, not from when it was sent, so a slow
//! answer that delays the next call is not hidden (no coordinated omission).

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Args;
use serde_json::{Value, json};

use super::breakdown::{Breakdown, Snapshot};
use super::harness::{self, Client, Stack};
use skillgate::{MCP_PATH, METRICS_PATH};

const TOOL: &str = "lookup_customer";

/// The shape of `skillgate-dev load`'s load.
#[derive(Debug, Args)]
pub struct Shape {
    /// Concurrent MCP sessions (one client each) per phase.
    #[arg(long, default_value_t = 32)]
    pub sessions: usize,
    /// Seconds measured per phase, after the warm-up.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds of calls before measuring, per phase.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// The role each governed session learns.
    #[arg(long, default_value = "tier-1-support")]
    pub role: String,
    /// Print JSON instead of a Markdown table.
    #[arg(long)]
    pub json: bool,
}

impl Shape {
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.sessions > 0, "--sessions must be at least 1");
        Ok(())
    }
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    #[command(flatten)]
    pub shape: Shape,
    /// Offer this many calls per second in all, spread evenly over the sessions, instead
    /// of calling as fast as answers come back.
    #[arg(long)]
    pub rate: Option<f64>,
}

/// The outcome of one phase.
#[derive(Debug, Clone)]
pub struct Phase {
    pub name: &'static str,
    pub sessions: usize,
    pub seconds: f64,
    pub calls: usize,
    pub errors: usize,
    /// CPU seconds the gateway (all its replicas), the demo upstream and the database
    /// server (PostgreSQL's processes; 0 for SQLite, which runs inside the gateway) used
    /// during the measured window.
    pub gateway_cpu: f64,
    /// `gateway_cpu` of each replica, in the order of [`Pids::gateways`].
    pub replica_cpu: Vec<f64>,
    pub upstream_cpu: f64,
    pub database_cpu: f64,
    /// Latencies of the measured calls, sorted, in nanoseconds.
    latencies: Vec<u64>,
    /// Measured calls of each client, in the order the clients were given.
    pub per_client: Vec<usize>,
    /// The gateway's own timing of the window, when the path goes through it.
    pub breakdown: Option<Breakdown>,
}

impl Phase {
    pub fn calls_per_second(&self) -> f64 {
        self.calls as f64 / self.seconds
    }

    /// The `q` quantile (0..=1) in milliseconds, nearest rank.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        let rank =
            ((q * self.latencies.len() as f64).ceil() as usize).clamp(1, self.latencies.len());
        self.latencies[rank - 1] as f64 / 1e6
    }

    fn to_json(&self) -> Value {
        json!({
            "sessions": self.sessions,
            "seconds": self.seconds,
            "calls": self.calls,
            "errors": self.errors,
            "calls_per_s": round(self.calls_per_second(), 1),
            "p50_ms": round(self.quantile_ms(0.50), 3),
            "p90_ms": round(self.quantile_ms(0.90), 3),
            "p99_ms": round(self.quantile_ms(0.99), 3),
            "max_ms": round(self.quantile_ms(1.0), 3),
            "gateway_cpu_s": round(self.gateway_cpu, 2),
            "upstream_cpu_s": round(self.upstream_cpu, 2),
        })
    }
}

fn round(value: f64, digits: i32) -> f64 {
    let factor = 10f64.powi(digits);
    (value * factor).round() / factor
}

pub async fn run(args: LoadArgs) -> anyhow::Result<()> {
    args.shape.check()?;
    let LoadArgs { shape: args, rate } = args;
    anyhow::ensure!(
        rate.is_none_or(|rate| rate.is_finite() && rate > 0.0),
        "--rate must be a positive number of calls per second"
    );
    // Each session is due for its next call one interval after its last one was due.
    let window = Window {
        interval: rate.map(|rate| Duration::from_secs_f64(args.sessions as f64 / rate)),
        ..Window::closed(args.warmup, args.duration)?
    };
    let stack = Stack::start().await?;
    eprintln!(
        "gateway {} (pid {:?}), demo upstream {}; logs in {}",
        stack.gateway_url,
        stack.gateway.pid(),
        stack.upstream_url,
        stack.dir().display()
    );
    let call = Call::lookup();

    let mut direct = Vec::with_capacity(args.sessions);
    for _ in 0..args.sessions {
        direct.push((harness::connect(&stack.upstream_url, None).await?, None));
    }
    let (gateway, upstream) = stack.pids()?;
    let pids = Pids {
        gateways: vec![gateway],
        upstream,
        database: None,
    };
    let direct = drive("direct", direct, &call, window, &pids, None, None).await?;

    let mut governed = Vec::with_capacity(args.sessions);
    for _ in 0..args.sessions {
        let client = harness::connect(&stack.gateway_url, Some(&stack.key)).await?;
        let session = harness::init_and_learn(&client, &args.role).await?;
        governed.push((client, Some(session)));
    }
    let metrics_url = format!(
        "{}{}",
        stack.gateway_url.trim_end_matches(MCP_PATH),
        METRICS_PATH
    );
    let governed = drive(
        "governed",
        governed,
        &call,
        window,
        &pids,
        Some(&metrics_url),
        None,
    )
    .await?;

    let report = Report {
        rate,
        direct,
        governed,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json())?);
    } else {
        print!("{}", report.markdown());
    }
    Ok(())
}

/// The downstream call a load repeats: directly, or through `call_tool` in a session.
#[derive(Debug, Clone)]
pub struct Call {
    pub tool: &'static str,
    pub arguments: Value,
}

impl Call {
    /// `lookup_customer` of one customer: the demo's most common read.
    pub fn lookup() -> Self {
        Self {
            tool: TOOL,
            arguments: json!({"customer_id": "C-1001"}),
        }
    }

    /// The tool a client calls and its arguments: the tool itself without a session,
    /// `call_tool` naming it in the session otherwise.
    fn request(&self, session: Option<&str>) -> (&'static str, Value) {
        match session {
            None => (self.tool, self.arguments.clone()),
            Some(session) => (
                "call_tool",
                json!({"tool": self.tool, "arguments": self.arguments, "session_id": session}),
            ),
        }
    }
}

/// When a phase calls: the warm-up, the measured window after it, and for an open loop
/// how far apart each client's calls are due.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub warmup: Duration,
    pub duration: Duration,
    /// `None`: each client calls again as soon as its answer arrives (closed loop).
    pub interval: Option<Duration>,
}

impl Window {
    /// A closed loop of `warmup` then `duration` seconds, as `--warmup` and `--duration`
    /// give them.
    pub fn closed(warmup: f64, duration: f64) -> anyhow::Result<Self> {
        anyhow::ensure!(
            duration.is_finite() && duration > 0.0 && warmup.is_finite() && warmup >= 0.0,
            "--duration must be positive and --warmup not negative"
        );
        Ok(Self {
            warmup: Duration::from_secs_f64(warmup),
            duration: Duration::from_secs_f64(duration),
            interval: None,
        })
    }
}

/// The processes whose CPU a phase measures.
pub struct Pids {
    pub gateways: Vec<u32>,
    pub upstream: u32,
    /// PostgreSQL's postmaster: its server processes are its children.
    pub database: Option<u32>,
}

impl Pids {
    /// CPU seconds so far of each gateway, of the upstream and of the database server.
    fn cpu(&self) -> anyhow::Result<(Vec<f64>, f64, f64)> {
        let gateways = self
            .gateways
            .iter()
            .map(|pid| harness::cpu_seconds(*pid))
            .collect::<anyhow::Result<_>>()?;
        let database = match self.database {
            Some(postmaster) => harness::cpu_seconds_with_children(postmaster)?,
            None => 0.0,
        };
        Ok((gateways, harness::cpu_seconds(self.upstream)?, database))
    }
}

/// Counters a phase reads at the start and at the end of its measured window, besides
/// the processes' CPU: a database's statements, a control group's throttling.
pub trait Observer {
    fn window_started(&mut self) -> anyhow::Result<()>;
    fn window_ended(&mut self) -> anyhow::Result<()>;
}

/// Every client calls in a loop until the deadline; calls due after the warm-up count.
/// With an `interval`, a client's calls are due that far apart (the clients staggered
/// evenly within one interval); without, each is due when the previous answer arrives.
pub async fn drive(
    name: &'static str,
    clients: Vec<(Client, Option<String>)>,
    call: &Call,
    window: Window,
    pids: &Pids,
    metrics_url: Option<&str>,
    mut observer: Option<&mut dyn Observer>,
) -> anyhow::Result<Phase> {
    let Window {
        warmup,
        duration,
        interval,
    } = window;
    let sessions = clients.len();
    // Prove the path works before timing it.
    let (tool, arguments) = call.request(clients[0].1.as_deref());
    let first = harness::call(&clients[0].0, tool, arguments).await?;
    if first.is_error == Some(true) {
        bail!(
            "{name}: the first call failed: {}",
            harness::text_of(&first)
        );
    }

    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + duration;
    let mut workers = Vec::with_capacity(sessions);
    for (index, (client, session)) in clients.into_iter().enumerate() {
        let mut due = interval.map(|step| start + step.mul_f64(index as f64 / sessions as f64));
        let (tool, arguments) = call.request(session.as_deref());
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0usize;
            loop {
                let sent = match (due, interval) {
                    (Some(at), Some(step)) => {
                        tokio::time::sleep_until(at.into()).await;
                        due = Some(at + step);
                        at
                    }
                    _ => Instant::now(),
                };
                if sent >= end {
                    break;
                }
                let outcome = harness::call(&client, tool, arguments.clone()).await;
                let elapsed = sent.elapsed();
                let failed = !matches!(&outcome, Ok(result) if result.is_error != Some(true));
                if sent >= measure_from {
                    latencies.push(elapsed.as_nanos() as u64);
                    errors += usize::from(failed);
                }
                if outcome.is_err() {
                    // A broken session would spin; stop this worker.
                    break;
                }
            }
            let _ = client.cancel().await;
            (latencies, errors)
        }));
    }
    tokio::time::sleep_until(measure_from.into()).await;
    let cpu_before = pids.cpu()?;
    if let Some(observer) = observer.as_deref_mut() {
        tokio::task::block_in_place(|| observer.window_started())?;
    }
    let metrics_before = match metrics_url {
        Some(url) => Some(Snapshot::scrape(url).await?),
        None => None,
    };
    tokio::time::sleep_until(end.into()).await;
    let cpu_after = pids.cpu()?;
    if let Some(observer) = observer {
        tokio::task::block_in_place(|| observer.window_ended())?;
    }
    let replica_cpu: Vec<f64> = cpu_after
        .0
        .iter()
        .zip(&cpu_before.0)
        .map(|(after, before)| after - before)
        .collect();
    let gateway_cpu = replica_cpu.iter().sum();
    let upstream_cpu = cpu_after.1 - cpu_before.1;
    let database_cpu = cpu_after.2 - cpu_before.2;
    let breakdown = match (metrics_url, metrics_before) {
        (Some(url), Some(before)) => {
            Some(Breakdown::between(&before, &Snapshot::scrape(url).await?))
        }
        _ => None,
    };
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut per_client = Vec::with_capacity(sessions);
    for worker in workers {
        let (mut own, own_errors) = worker.await.context("a load worker panicked")?;
        per_client.push(own.len());
        latencies.append(&mut own);
        errors += own_errors;
    }
    latencies.sort_unstable();
    Ok(Phase {
        name,
        sessions,
        seconds: duration.as_secs_f64(),
        calls: latencies.len(),
        errors,
        gateway_cpu,
        replica_cpu,
        upstream_cpu,
        database_cpu,
        latencies,
        per_client,
        breakdown,
    })
}

pub struct Report {
    /// The offered calls per second of an open-loop run.
    pub rate: Option<f64>,
    pub direct: Phase,
    pub governed: Phase,
}

impl Report {
    fn ratio(&self) -> f64 {
        self.governed.calls_per_second() / self.direct.calls_per_second()
    }

    fn added_ms(&self, q: f64) -> f64 {
        self.governed.quantile_ms(q) - self.direct.quantile_ms(q)
    }

    fn to_json(&self) -> Value {
        json!({
            "tool": TOOL,
            "offered_calls_per_s": self.rate,
            "direct": self.direct.to_json(),
            "governed": self.governed.to_json(),
            "throughput_ratio_governed_over_direct": round(self.ratio(), 3),
            "gateway_added_p50_ms": round(self.added_ms(0.50), 3),
            "gateway_added_p99_ms": round(self.added_ms(0.99), 3),
            "gateway_breakdown": self.governed.breakdown.as_ref().map(Breakdown::to_json),
        })
    }

    pub fn markdown(&self) -> String {
        let mut out = match self.rate {
            Some(rate) => format!(
                "Open loop: {rate} calls/s offered to each path; latency counts from when each call was due.\n\n"
            ),
            None => {
                String::from("Closed loop: each session calls again as soon as it is answered.\n\n")
            }
        };
        out.push_str(
            "| path | sessions | calls | errors | calls/s | p50 ms | p90 ms | p99 ms | max ms | CPU s gateway / upstream |\n\
             | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        );
        for phase in [&self.direct, &self.governed] {
            let label = match phase.name {
                "direct" => "direct to the demo upstream",
                _ => "governed through /mcp",
            };
            out.push_str(&format!(
                "| {label} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} / {:.2} |\n",
                phase.sessions,
                phase.calls,
                phase.errors,
                phase.calls_per_second(),
                phase.quantile_ms(0.50),
                phase.quantile_ms(0.90),
                phase.quantile_ms(0.99),
                phase.quantile_ms(1.0),
                phase.gateway_cpu,
                phase.upstream_cpu,
            ));
        }
        out.push_str(&format!(
            "\nThroughput governed / direct: {:.2}. Gateway-added latency: p50 {:+.2} ms, p99 {:+.2} ms.\n",
            self.ratio(),
            self.added_ms(0.50),
            self.added_ms(0.99),
        ));
        if let Some(breakdown) = &self.governed.breakdown {
            out.push_str(&breakdown.markdown());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_that_cannot_be_timed_is_refused_before_anything_starts() {
        for (warmup, duration) in [
            (2.0, 0.0),
            (-1.0, 10.0),
            (2.0, f64::INFINITY),
            (f64::NAN, 10.0),
        ] {
            assert!(
                Window::closed(warmup, duration).is_err(),
                "{warmup} {duration}"
            );
        }
        let window = Window::closed(0.0, 0.5).unwrap();
        assert_eq!(
            (window.warmup, window.duration, window.interval),
            (Duration::ZERO, Duration::from_millis(500), None)
        );
    }
}
