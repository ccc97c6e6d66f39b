//! `skillgate-dev notify`: whether announcing holds to approvers slows governed calls, above
//! all when the receiver never answers.
//!
//! Each phase starts a fresh gateway and drives two loads at once, both open loop: governed
//! `lookup_customer` calls at `--rate` (the measured load), and refunds above 200 at
//! `--holds-per-second`, each of which the demo catalog holds for a reviewer. Phases differ
//! only in where the holds are announced:
//!
//! - **none**: no notifier (the baseline);
//! - **stuck**: a webhook whose receiver accepts every request and never answers, so every
//!   delivery waits out its timeout and the worker's deliveries in flight stay full;
//! - **answering**: a webhook whose receiver answers 204 at once.
//!
//! The phases alternate over `--rounds`, so a drift of the machine touches each alike.
//! Reported per phase (median over rounds): the lookups' p50 and p99, the holds' p50, and
//! the gateway's CPU per governed call; and the ratio of each to the baseline's.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use axum::Router;
use axum::routing::post;
use clap::Args;
use serde_json::json;

use super::harness::{self, Stack};
use super::load::{self, Call, Phase, Pids, Window};

/// Amounts of the refunds one holder session asks for: each above the 200 that needs an
/// approval, distinct so each is a hold of its own, and together within the session's
/// refund cap of 1000 (a pending hold reserves its amount).
const HELD_AMOUNTS: [u32; 4] = [201, 202, 203, 204];

#[derive(Debug, Args)]
pub struct NotifyArgs {
    /// Concurrent governed sessions of the measured lookup load.
    #[arg(long, default_value_t = 16)]
    pub sessions: usize,
    /// Lookups per second offered, spread over the sessions.
    #[arg(long, default_value_t = 200.0)]
    pub rate: f64,
    /// Held refunds per second asked for beside the lookups.
    #[arg(long, default_value_t = 10.0)]
    pub holds_per_second: f64,
    /// Seconds measured per phase, after the warm-up.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds of calls before measuring (the notifier's worker finds its first holds).
    #[arg(long, default_value_t = 3.0)]
    pub warmup: f64,
    /// Times the three phases are run, alternated.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Receiver {
    None,
    Stuck,
    Answering,
}

impl Receiver {
    const ALL: [Receiver; 3] = [Receiver::None, Receiver::Stuck, Receiver::Answering];

    fn label(self) -> &'static str {
        match self {
            Receiver::None => "no notifier (baseline)",
            Receiver::Stuck => "a webhook that never answers",
            Receiver::Answering => "a webhook that answers at once",
        }
    }
}

/// One phase's figures.
struct Sample {
    lookups: Phase,
    holds: Vec<Duration>,
    hold_errors: usize,
    /// Announcements the receiver got (requests begun, answered or not).
    arrivals: usize,
}

impl Sample {
    /// Gateway CPU milliseconds per governed call, lookups and holds together.
    fn cpu_ms_per_call(&self) -> f64 {
        1000.0 * self.lookups.gateway_cpu / (self.lookups.calls + self.holds.len()) as f64
    }
}

pub async fn run(args: NotifyArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.sessions > 0 && args.rounds > 0,
        "--sessions and --rounds must be at least 1"
    );
    for (name, rate) in [
        ("--rate", args.rate),
        ("--holds-per-second", args.holds_per_second),
    ] {
        anyhow::ensure!(
            rate.is_finite() && rate > 0.0,
            "{name} must be a positive number per second"
        );
    }
    let window = Window {
        interval: Some(Duration::from_secs_f64(args.sessions as f64 / args.rate)),
        ..Window::closed(args.warmup, args.duration)?
    };
    let mut samples: Vec<(Receiver, Sample)> = Vec::new();
    for round in 1..=args.rounds {
        for receiver in Receiver::ALL {
            eprintln!("round {round}: {}", receiver.label());
            samples.push((receiver, phase(&args, window, receiver).await?));
        }
    }
    print!("{}", report(&args, &samples));
    Ok(())
}

/// One phase on a fresh gateway.
async fn phase(args: &NotifyArgs, window: Window, receiver: Receiver) -> anyhow::Result<Sample> {
    let stack = Stack::start().await?;
    let arrivals = Arc::new(AtomicUsize::new(0));
    let _receiver = match receiver {
        Receiver::None => None,
        mode => {
            let (url, server) = serve_receiver(mode, arrivals.clone()).await?;
            add_webhook(&stack, &url).await?;
            Some(server)
        }
    };
    let mut clients = Vec::with_capacity(args.sessions);
    for _ in 0..args.sessions {
        let client = harness::connect(&stack.gateway_url, Some(&stack.key)).await?;
        let session = harness::init_and_learn(&client, "tier-1-support").await?;
        clients.push((client, Some(session)));
    }
    let (gateway, upstream) = stack.pids()?;
    let pids = Pids {
        gateways: vec![gateway],
        upstream,
        database: None,
    };
    let start = Instant::now();
    let holder = tokio::spawn(hold_loop(
        stack.gateway_url.clone(),
        stack.key.clone(),
        Duration::from_secs_f64(1.0 / args.holds_per_second),
        start + window.warmup,
        start + window.warmup + window.duration,
    ));
    let lookups = load::drive(
        "governed",
        clients,
        &Call::lookup(),
        window,
        &pids,
        None,
        None,
    )
    .await?;
    let (holds, hold_errors) = holder.await.context("the holder panicked")??;
    let arrivals = arrivals.load(Ordering::Relaxed);
    if receiver != Receiver::None && arrivals == 0 {
        bail!(
            "{}: no announcement reached the receiver, so the phase measured nothing; the gateway's log is in {}",
            receiver.label(),
            stack.dir().display()
        );
    }
    Ok(Sample {
        lookups,
        holds,
        hold_errors,
        arrivals,
    })
}

/// A webhook receiver on loopback that counts requests and either answers 204 or never
/// answers. Returns its URL and the task serving it (aborted when dropped).
async fn serve_receiver(
    mode: Receiver,
    arrivals: Arc<AtomicUsize>,
) -> anyhow::Result<(String, AbortOnDrop)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    let app = Router::new().route(
        "/hook",
        post(move || {
            arrivals.fetch_add(1, Ordering::Relaxed);
            async move {
                if mode == Receiver::Stuck {
                    std::future::pending::<()>().await;
                }
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((url, AbortOnDrop(server)))
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `skillgate notifier add-webhook` on the gateway's database, as an admin would; the
/// gateway's worker reads notifiers from the database on its next round.
async fn add_webhook(stack: &Stack, url: &str) -> anyhow::Result<()> {
    let output = tokio::process::Command::new(harness::product_binary()?)
        .args([
            "--database-url",
            &stack.database_url(),
            "notifier",
            "add-webhook",
            "approvers",
            "--url",
            url,
        ])
        .output()
        .await
        .context("running skillgate notifier add-webhook")?;
    anyhow::ensure!(
        output.status.success(),
        "skillgate notifier add-webhook failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// Asks for a held refund every `interval` until `end`, opening a new session when one has
/// reserved all it may; returns the latencies of the holds due in the measured window
/// (counted from when each was due) and how many of those failed.
async fn hold_loop(
    url: String,
    key: String,
    interval: Duration,
    measure_from: Instant,
    end: Instant,
) -> anyhow::Result<(Vec<Duration>, usize)> {
    let client = harness::connect(&url, Some(&key)).await?;
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut session = String::new();
    let mut due = Instant::now();
    for index in 0usize.. {
        let amount = HELD_AMOUNTS[index % HELD_AMOUNTS.len()];
        if index % HELD_AMOUNTS.len() == 0 {
            session = eligible_session(&client).await?;
        }
        tokio::time::sleep_until(due.into()).await;
        if due >= end {
            break;
        }
        let arguments = json!({
            "tool": "process_refund",
            "session_id": session,
            "arguments": {"customer_id": "C-1003", "order_id": "O-5005", "amount": amount,
                          "reason": "Premium support not delivered"},
        });
        let reply = harness::call(&client, "call_tool", arguments).await?;
        let held = reply
            .structured_content
            .as_ref()
            .is_some_and(|s| s["decision"] == "pending_approval");
        if due >= measure_from {
            latencies.push(due.elapsed());
            errors += usize::from(!held);
        }
        due += interval;
    }
    let _ = client.cancel().await;
    Ok((latencies, errors))
}

/// A tier-1 session that checked order O-5005 (eligible), so its refunds reach the
/// approval rule.
async fn eligible_session(client: &harness::Client) -> anyhow::Result<String> {
    let session = harness::init_and_learn(client, "tier-1-support").await?;
    let checked = harness::call(
        client,
        "call_tool",
        json!({"tool": "check_refund_eligibility", "session_id": session,
               "arguments": {"customer_id": "C-1003", "order_id": "O-5005"}}),
    )
    .await?;
    if checked.is_error == Some(true) {
        bail!(
            "check_refund_eligibility failed: {}",
            harness::text_of(&checked)
        );
    }
    Ok(session)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn report(args: &NotifyArgs, samples: &[(Receiver, Sample)]) -> String {
    let mut out = format!(
        "# skillgate-dev notify\n\n{} governed lookups/s over {} sessions and {} held refunds/s, \
         {} rounds of {} s measured after {} s, phases alternated; median over rounds.\n\n",
        args.rate, args.sessions, args.holds_per_second, args.rounds, args.duration, args.warmup
    );
    out.push_str(
        "| holds announced to | lookups | errors | lookup p50 ms | lookup p99 ms | hold p50 ms | gateway CPU ms per call | announcements received |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let figures = |receiver: Receiver| {
        let of: Vec<&Sample> = samples
            .iter()
            .filter(|(r, _)| *r == receiver)
            .map(|(_, s)| s)
            .collect();
        let med = |f: &dyn Fn(&Sample) -> f64| median(of.iter().map(|s| f(s)).collect());
        (
            of.iter().map(|s| s.lookups.calls).sum::<usize>(),
            of.iter()
                .map(|s| s.lookups.errors + s.hold_errors)
                .sum::<usize>(),
            med(&|s| s.lookups.quantile_ms(0.5)),
            med(&|s| s.lookups.quantile_ms(0.99)),
            med(&|s| harness::percentile(&s.holds, 0.5).as_secs_f64() * 1000.0),
            med(&Sample::cpu_ms_per_call),
            of.iter().map(|s| s.arrivals).sum::<usize>(),
        )
    };
    let baseline = figures(Receiver::None);
    for receiver in Receiver::ALL {
        let (calls, errors, p50, p99, hold, cpu, arrivals) = figures(receiver);
        out.push_str(&format!(
            "| {} | {calls} | {errors} | {p50:.2} | {p99:.2} | {hold:.2} | {cpu:.3} | {arrivals} |\n",
            receiver.label()
        ));
    }
    for receiver in [Receiver::Stuck, Receiver::Answering] {
        let (_, _, p50, p99, hold, cpu, _) = figures(receiver);
        out.push_str(&format!(
            "\n{} ÷ baseline: lookup p50 {:.2}×, lookup p99 {:.2}×, hold p50 {:.2}×, CPU per call {:.2}×.",
            receiver.label(),
            p50 / baseline.2,
            p99 / baseline.3,
            hold / baseline.4,
            cpu / baseline.5
        ));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_held_amounts_of_one_session_fit_under_its_refund_cap_and_each_needs_approval() {
        assert!(HELD_AMOUNTS.iter().all(|amount| *amount > 200));
        assert!(HELD_AMOUNTS.iter().sum::<u32>() <= 1000);
        let mut distinct = HELD_AMOUNTS.to_vec();
        distinct.dedup();
        assert_eq!(distinct.len(), HELD_AMOUNTS.len());
    }
}
