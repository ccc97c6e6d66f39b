//! Scale check, run on demand: `cargo test -p skillgate-core --release --test it -- --ignored audit_scale::`.

use serde_json::json;
use skillgate_core::audit::{AuditLog, EventKind, NewEvent};
use skillgate_core::store::Store;

const EVENTS: u64 = 1_000_000;

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes a million events; run on demand"]
async fn a_million_event_chain_verifies_without_loading_it_into_memory() {
    let dir = tempfile::tempdir().unwrap();
    let url = skillgate_core::store::testing::database_url(dir.path(), "audit.db");
    let log = AuditLog::new(Store::open(&url).await.unwrap());
    let started = std::time::Instant::now();
    for batch in 0..EVENTS / 5_000 {
        let events = (0..5_000)
            .map(|i| {
                NewEvent::new(
                    EventKind::CallResult,
                    json!({ "batch": batch, "i": i, "status": "ok" }),
                )
                .in_session(format!("s{}", i % 100))
                .by("agent")
            })
            .collect();
        log.append_batch(events).await.unwrap();
    }
    eprintln!(
        "appended {EVENTS} in {:?}, peak RSS {} KiB",
        started.elapsed(),
        peak_rss_kib()
    );
    let started = std::time::Instant::now();
    let report = log.verify().await.unwrap();
    eprintln!(
        "verified in {:?}, peak RSS {} KiB",
        started.elapsed(),
        peak_rss_kib()
    );
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, EVENTS);
    // A million events loaded at once would take several hundred MiB.
    assert!(peak_rss_kib() < 150 * 1024);
}
