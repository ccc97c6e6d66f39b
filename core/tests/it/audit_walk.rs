//! The chain walked in ranges at once tells exactly what one walk tells: on an intact
//! chain, and on one changed, rewritten, shortened or reordered at and around the places
//! where the ranges meet. On SQLite and PostgreSQL.

use serde_json::json;
use skillgate_core::audit::chain::event_hash;
use skillgate_core::audit::checkpoint::walk::{Ranges, walk};
use skillgate_core::audit::{Anchor, AuditLog, EventKind, NewEvent, VerifyReport};
use skillgate_core::store::Store;

/// 1,000 events walked as four ranges of 250: they meet after events 250, 500 and 750.
const EVENTS: u64 = 1_000;
const FOUR: Ranges = Ranges {
    most: 4,
    min_events: 10,
};

struct Chain {
    _dir: tempfile::TempDir,
    store: Store,
    // Kept alive: on PostgreSQL, pool connections its writer opened die with it.
    _log: AuditLog,
}

impl Chain {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = skillgate_core::store::testing::database_url(dir.path(), "audit.db");
        let log = AuditLog::new(Store::open(&url).await.unwrap());
        let events = (0..EVENTS)
            .map(|i| {
                NewEvent::new(EventKind::CallResult, json!({ "i": i, "status": "ok" }))
                    .in_session(format!("s{}", i % 7))
                    .by("agent")
            })
            .collect();
        log.append_batch(events).await.unwrap();
        Self {
            store: log.store().clone(),
            _log: log,
            _dir: dir,
        }
    }

    /// The walk in four ranges, checked against the walk in one piece.
    async fn walked(&self) -> VerifyReport {
        let ranged = walk(&self.store, Anchor::genesis(), FOUR).await.unwrap();
        let whole = walk(&self.store, Anchor::genesis(), Ranges::one())
            .await
            .unwrap();
        assert_eq!(ranged, whole, "four ranges against one piece");
        ranged
    }

    async fn exec(&self, sql: &str) {
        sqlx::query(sql)
            .execute(self.store.test_pool())
            .await
            .unwrap();
    }

    /// Event `seq` with another payload and its own hash recomputed, as someone covering
    /// their tracks would: only its successor's link shows it.
    async fn rewrite(&self, seq: i64) {
        let mut row: skillgate_core::audit::AuditRow = sqlx::query_as(
            "SELECT seq, at, session_id, kind, actor, payload, prev_hash, hash \
             FROM audit_events WHERE seq = $1",
        )
        .bind(seq)
        .fetch_one(self.store.test_pool())
        .await
        .unwrap();
        row.payload = r#"{"i":-1,"status":"ok"}"#.to_owned();
        let hash = event_hash(&row).unwrap();
        sqlx::query("UPDATE audit_events SET payload = $1, hash = $2 WHERE seq = $3")
            .bind(&row.payload)
            .bind(hash)
            .bind(seq)
            .execute(self.store.test_pool())
            .await
            .unwrap();
    }
}

fn first_bad(report: &VerifyReport) -> Option<(u64, String)> {
    report
        .first_bad
        .as_ref()
        .map(|bad| (bad.seq, bad.reason.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intact_chain_walked_in_ranges_reads_every_event_once() {
    let chain = Chain::new().await;
    let report = chain.walked().await;
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, EVENTS);
    assert_eq!(report.verified_tip.seq, EVENTS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_event_inside_a_range_is_named_as_one_walk_names_it() {
    let chain = Chain::new().await;
    chain
        .exec(r#"UPDATE audit_events SET payload = '{"i":0}' WHERE seq = 600"#)
        .await;
    assert_eq!(
        first_bad(&chain.walked().await),
        Some((600, "changed".into()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_event_where_two_ranges_meet_is_named_itself_not_its_successor() {
    for seq in [250, 251, 500] {
        let chain = Chain::new().await;
        chain.rewrite(seq).await;
        assert_eq!(
            first_bad(&chain.walked().await),
            Some((seq as u64, "changed".into())),
            "rewritten at {seq}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_event_where_two_ranges_meet_is_named_removed() {
    for seq in [250, 501, 1] {
        let chain = Chain::new().await;
        chain
            .exec(&format!("DELETE FROM audit_events WHERE seq = {seq}"))
            .await;
        let report = chain.walked().await;
        assert_eq!(first_bad(&report), Some((seq, "removed".into())), "{seq}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_swapped_across_two_ranges_are_named_reordered() {
    let chain = Chain::new().await;
    // Move event 245 to 760's place and back: two rows trade their contents.
    for sql in [
        "UPDATE audit_events SET seq = -1 WHERE seq = 245",
        "UPDATE audit_events SET seq = 245 WHERE seq = 760",
        "UPDATE audit_events SET seq = 760 WHERE seq = -1",
    ] {
        chain.exec(sql).await;
    }
    let report = chain.walked().await;
    assert_eq!(first_bad(&report), Some((245, "reordered".into())));
}
