//! What a what-if replay of a large audit costs: 1,000,000 audited calls decided again
//! under a proposed catalog, from a real SQLite file, against the baseline of only reading
//! the same events back (the floor any replay of a stored log pays), in the same run.
//!
//! The log is the demo catalog's `support` scope at scale: 50,000 sessions of tier-1
//! support, each learning the role, checking a refund's eligibility and then making 19
//! more calls (looking customers up and refunding 50 at a time, 450 a session), each call
//! with its result, written through the audit log as the gateway writes them (hash chain
//! and all). The proposal lowers the session cap from 1000 to 300, so the last three
//! refunds of every session flip (150,000 changes) and every later call is decided with
//! the changed usage.
//!
//! `cargo bench -p skillgate-core --bench whatif` (`SKILLGATE_BENCH_CALLS` for another size)

use std::time::{Duration, Instant};

use chrono::Utc;
use futures::TryStreamExt;
use rust_decimal::Decimal;
use serde_json::json;
use skillgate_core::audit::{AuditLog, NewEvent};
use skillgate_core::model::Limit;
use skillgate_core::names::EventKind;
use skillgate_core::policy::CompiledCatalog;
use skillgate_core::store::Store;
use skillgate_core::whatif::{ReplayRequest, Verdict, Window, replay_stored};

const CALLS_PER_SESSION: usize = 20;
const ROUNDS: usize = 3;

/// One session's events: start, learn, an eligibility check, then lookups and refunds.
fn session_events(n: usize) -> Vec<NewEvent> {
    let sid = format!("ses_bench_{n:08}");
    let key = "bench-support";
    let order = format!("O-{:04}", n % 10_000);
    let mut events = vec![
        NewEvent::new(
            EventKind::SessionStarted,
            json!({"scope": "support", "task_summary": null}),
        )
        .in_session(&sid)
        .by(key),
        NewEvent::new(
            EventKind::LearnGranted,
            json!({"path": "/roles/tier-1-support", "role": "tier-1-support",
                   "skill_versions": {"customer-lookup": 1, "refund-handling": 1,
                                      "ticketing-and-escalation": 1}}),
        )
        .in_session(&sid)
        .by(key),
    ];
    for i in 0..CALLS_PER_SESSION {
        let (tool, arguments) = match i {
            0 => (
                "check_refund_eligibility",
                json!({"customer_id": "C-1003", "order_id": order}),
            ),
            i if i % 2 == 1 => ("lookup_customer", json!({"customer_id": "C-1003"})),
            _ => (
                "process_refund",
                json!({"customer_id": "C-1003", "order_id": order, "amount": 50,
                       "reason": "Premium support not delivered"}),
            ),
        };
        events.push(
            NewEvent::new(
                EventKind::CallAllowed,
                json!({"tool": tool, "arguments": arguments, "decision": "allowed",
                       "role": "tier-1-support", "skill_versions": {}}),
            )
            .in_session(&sid)
            .by(key),
        );
        events.push(
            NewEvent::new(
                EventKind::CallResult,
                json!({"tool": tool, "status": "ok", "duration_ms": 3, "result_size": 120,
                       "result_sha256": "0".repeat(64)}),
            )
            .in_session(&sid)
            .by(key),
        );
    }
    events
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let calls: usize = std::env::var("SKILLGATE_BENCH_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let sessions = calls / CALLS_PER_SESSION;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!(
        "sqlite://{}",
        dir.path().join("whatif.db").display()
    ))
    .await
    .unwrap();
    store.seed_demo("/nonexistent/skillgate").await.unwrap();
    let audit = AuditLog::new(store.clone());

    let written = Instant::now();
    let mut batch = Vec::new();
    for n in 0..sessions {
        batch.extend(session_events(n));
        if batch.len() >= 20_000 {
            audit
                .append_batch(std::mem::take(&mut batch))
                .await
                .unwrap();
        }
    }
    if !batch.is_empty() {
        audit.append_batch(batch).await.unwrap();
    }
    let events: usize = audit
        .events_after(0)
        .try_fold(0, |n, _| async move { Ok(n + 1) })
        .await
        .unwrap();
    eprintln!(
        "wrote {events} events ({sessions} sessions, {calls} calls) in {:.1} s",
        written.elapsed().as_secs_f64()
    );

    let current = store.compiled_catalog().await.unwrap();
    let mut proposal = current.catalog().clone();
    for role in proposal
        .roles
        .iter_mut()
        .filter(|r| r.slug.as_str() == "tier-1-support")
    {
        for limit in &mut role.limits {
            if let Limit::SumCap { max, .. } = limit {
                *max = Decimal::from(300);
            }
        }
    }
    let proposed = CompiledCatalog::compile(proposal);
    let window = Window::last("1d").unwrap();

    let (mut reads, mut replays) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        // The floor: the same events read back and decoded, nothing decided.
        let started = Instant::now();
        let read: usize = audit
            .events_after(0)
            .try_fold(0, |n, _| async move { Ok(n + 1) })
            .await
            .unwrap();
        reads.push(started.elapsed());
        assert!(read >= events);

        let started = Instant::now();
        let request = ReplayRequest {
            current: &current,
            proposed: &proposed,
            window: &window,
            actor: "bench",
            file_digest: "bench",
        };
        let report = replay_stored(&store, &audit, request, Utc::now(), |_| {})
            .await
            .unwrap();
        replays.push(started.elapsed());
        assert_eq!(report.decided, sessions * (CALLS_PER_SESSION + 1));
        assert_eq!(
            report.count(Verdict::Allowed, Verdict::Denied),
            sessions * 3,
            "{report:#?}"
        );
        assert!(report.undecidable.is_empty());
    }
    let (read, replay) = (median(reads), median(replays));
    println!(
        "what-if replay of {calls} audited calls ({events} events, {sessions} sessions), SQLite, median of {ROUNDS} rounds:"
    );
    println!(
        "  read the events back (baseline): {:>7.2} s",
        read.as_secs_f64()
    );
    println!(
        "  replay under the proposal:       {:>7.2} s  ({:.0} calls/s)",
        replay.as_secs_f64(),
        calls as f64 / replay.as_secs_f64()
    );
    println!(
        "  replay ÷ read: {:.2}×; target: under 60 s",
        replay.as_secs_f64() / read.as_secs_f64()
    );
}
