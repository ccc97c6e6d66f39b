//! The audit log against a real SQLite file: chaining, durability, tamper detection.

use std::collections::BTreeMap;

use futures::TryStreamExt;
use serde_json::json;
use skillgate_core::audit::{
    AuditLog, BadEvent, BadReason, CheckpointSigner, EventKind, Extent, NewEvent, redact_sensitive,
};
use skillgate_core::store::{Store, testing};

struct Db {
    _dir: tempfile::TempDir,
    url: String,
}

impl Db {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = skillgate_core::store::testing::database_url(dir.path(), "audit.db");
        Self { _dir: dir, url }
    }

    async fn log(&self) -> AuditLog {
        AuditLog::new(Store::open(&self.url).await.unwrap())
    }
}

fn feedback(i: u64) -> NewEvent {
    NewEvent::feedback("s1", "agent", "refunds", (i % 5 + 1) as u8, Some("ok"))
}

async fn append_n(log: &AuditLog, n: u64) {
    for i in 0..n {
        log.append(feedback(i)).await.unwrap();
    }
}

async fn exec(log: &AuditLog, sql: &str) {
    sqlx::query(sql)
        .execute(log.store().test_pool())
        .await
        .unwrap();
}

/// Makes the database refuse `feedback` events, as a full disk would, and no others.
async fn refuse_feedback_events(log: &AuditLog) {
    testing::add_refusing_trigger(
        log.store().test_pool(),
        "refuse_feedback",
        "INSERT",
        "audit_events",
        Some("NEW.kind = 'feedback'"),
        testing::Refusal::Abort("refused"),
    )
    .await;
}

async fn first_bad(log: &AuditLog) -> Option<BadEvent> {
    log.verify().await.unwrap().first_bad
}

#[tokio::test]
async fn a_chain_of_appended_events_verifies() {
    let db = Db::new();
    let log = db.log().await;
    append_n(&log, 25).await;
    let report = log.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, 25);
    assert_eq!(report.verified_tip.seq, 25);
}

#[tokio::test]
async fn appends_answer_consecutive_seqs_and_chain_hashes() {
    let db = Db::new();
    let log = db.log().await;
    let first = log.append(feedback(0)).await.unwrap();
    let batch = log
        .append_batch(vec![feedback(1), feedback(2)])
        .await
        .unwrap();
    assert_eq!(first.seq, 1);
    assert_eq!(batch.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
    let events: Vec<_> = log.events(None).try_collect().await.unwrap();
    assert_eq!(events[0].prev_hash, skillgate_core::audit::GENESIS_HASH);
    assert_eq!(events[1].prev_hash, first.hash);
    assert_eq!(events[2].prev_hash, batch[0].hash);
    assert_eq!(events[2].hash, batch[1].hash);
    assert_eq!(events[0].at, first.at);
}

#[tokio::test]
async fn an_edited_payload_is_reported_as_changed_at_its_seq() {
    let db = Db::new();
    let log = db.log().await;
    append_n(&log, 10).await;
    exec(
        &log,
        r#"UPDATE audit_events SET payload = '{"rating":5}' WHERE seq = 4"#,
    )
    .await;
    assert_eq!(
        first_bad(&log).await,
        Some(BadEvent {
            seq: 4,
            reason: BadReason::Changed
        })
    );
}

#[tokio::test]
async fn a_deleted_row_is_reported_as_removed_at_its_seq() {
    let db = Db::new();
    let log = db.log().await;
    append_n(&log, 10).await;
    exec(&log, "DELETE FROM audit_events WHERE seq = 6").await;
    assert_eq!(
        first_bad(&log).await,
        Some(BadEvent {
            seq: 6,
            reason: BadReason::Removed
        })
    );
}

#[tokio::test]
async fn two_swapped_rows_are_reported_as_reordered_at_the_first() {
    let db = Db::new();
    let log = db.log().await;
    append_n(&log, 10).await;
    exec(&log, "UPDATE audit_events SET seq = -1 WHERE seq = 3").await;
    exec(&log, "UPDATE audit_events SET seq = 3 WHERE seq = 8").await;
    exec(&log, "UPDATE audit_events SET seq = 8 WHERE seq = -1").await;
    assert_eq!(
        first_bad(&log).await,
        Some(BadEvent {
            seq: 3,
            reason: BadReason::Reordered
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_from_fifty_tasks_form_one_gap_free_verifying_chain() {
    let db = Db::new();
    let log = db.log().await;
    let tasks: Vec<_> = (0..50)
        .map(|task| {
            let log = log.clone();
            tokio::spawn(async move {
                let mut seqs = Vec::new();
                for i in 0..20 {
                    let event =
                        NewEvent::new(EventKind::CallResult, json!({ "task": task, "i": i }))
                            .in_session(format!("s{task}"));
                    seqs.push(log.append(event).await.unwrap().seq);
                }
                seqs
            })
        })
        .collect();
    let mut seqs = Vec::new();
    for task in tasks {
        seqs.extend(task.await.unwrap());
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=1000).collect::<Vec<u64>>());
    let report = log.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, 1000);
    assert_eq!(log.store().audit_count(Some("s7")).await.unwrap(), 20);
    // One commit stamps one `at` on all of its events: fewer stamps than events means
    // appends were grouped.
    let commits: i64 = sqlx::query_scalar("SELECT COUNT(DISTINCT at) FROM audit_events")
        .fetch_one(log.store().test_pool())
        .await
        .unwrap();
    eprintln!("1000 events in {commits} commits");
    assert!(commits < 1000);
}

#[tokio::test]
async fn two_stores_sharing_one_file_chain_their_appends_together() {
    let db = Db::new();
    let (a, b) = (db.log().await, db.log().await);
    let writers = [a.clone(), b.clone()].map(|log| {
        tokio::spawn(async move {
            for i in 0..30 {
                log.append(feedback(i)).await.unwrap();
            }
        })
    });
    for writer in writers {
        writer.await.unwrap();
    }
    let report = a.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, 60);
}

#[tokio::test]
async fn an_append_is_visible_to_a_fresh_connection_as_soon_as_it_returns() {
    let db = Db::new();
    let log = db.log().await;
    let appended = log
        .append(allowed_event(
            "s1",
            "agent",
            "issue_refund",
            json!({ "amount": "20.00" }),
            "refunds",
            &BTreeMap::from([("refund-policy".to_owned(), 3)]),
        ))
        .await
        .unwrap();
    let fresh = testing::raw_pool(&db.url).await;
    let (kind, hash): (String, String) =
        sqlx::query_as("SELECT kind, hash FROM audit_events WHERE seq = $1")
            .bind(appended.seq as i64)
            .fetch_one(&fresh)
            .await
            .unwrap();
    assert_eq!(kind, "call_allowed");
    assert_eq!(hash, appended.hash);
}

#[tokio::test]
async fn a_redacted_token_never_reaches_the_stored_payload() {
    let db = Db::new();
    let log = db.log().await;
    let token = "tok_live_4f9a8c7e";
    let arguments = json!({ "customer": "c-1", "api_token": token });
    let redacted = redact_sensitive(&arguments, &["api_token".to_owned()]);
    log.append(
        NewEvent::call_denied(
            "agent",
            "charge",
            redacted,
            "GOVERNANCE_VIOLATION",
            Some("max_amount"),
        )
        .in_session("s1"),
    )
    .await
    .unwrap();
    let payloads: Vec<String> = sqlx::query_scalar("SELECT payload FROM audit_events")
        .fetch_all(log.store().test_pool())
        .await
        .unwrap();
    assert_eq!(payloads.len(), 1);
    assert!(!payloads[0].contains(token), "{}", payloads[0]);
    assert!(
        payloads[0].contains(r#""api_token":{"sha256":"#),
        "{}",
        payloads[0]
    );
    assert!(payloads[0].contains(r#""customer":"c-1""#));
}

#[tokio::test]
async fn a_failing_event_fails_only_its_own_caller() {
    let db = Db::new();
    let log = db.log().await;
    refuse_feedback_events(&log).await;
    let tasks: Vec<_> = (0..20u64)
        .map(|i| {
            let log = log.clone();
            tokio::spawn(async move {
                let event = if i % 2 == 0 {
                    feedback(i)
                } else {
                    NewEvent::new(EventKind::CallResult, json!({ "i": i }))
                };
                (i, log.append(event).await)
            })
        })
        .collect();
    for task in tasks {
        let (i, result) = task.await.unwrap();
        assert_eq!(result.is_ok(), i % 2 == 1, "event {i}: {result:?}");
    }
    let report = log.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, 10);
}

#[tokio::test]
async fn a_session_timeline_lists_only_that_session_in_order() {
    let db = Db::new();
    let log = db.log().await;
    log.append(NewEvent::session_started("a", "key-a", "support", None))
        .await
        .unwrap();
    log.append(NewEvent::session_started(
        "b",
        "key-b",
        "support",
        Some("refund"),
    ))
    .await
    .unwrap();
    log.append(NewEvent::learn_denied("key-a", "/roles/admin", "ACCESS_DENIED").in_session("a"))
        .await
        .unwrap();
    log.append(NewEvent::admin_change(
        "alice",
        "update",
        "limit:refunds/max",
        json!(500),
        json!(200),
    ))
    .await
    .unwrap();
    let timeline: Vec<_> = log.events(Some("a")).try_collect().await.unwrap();
    let kinds: Vec<_> = timeline.iter().map(|e| (e.seq, e.kind)).collect();
    assert_eq!(
        kinds,
        [(1, EventKind::SessionStarted), (3, EventKind::LearnDenied)]
    );
    assert_eq!(timeline[1].payload["path"], "/roles/admin");
}

#[tokio::test]
async fn verification_after_pruning_starts_from_the_retention_anchor() {
    let db = Db::new();
    let log = db.log().await;
    append_n(&log, 10).await;
    let signer = CheckpointSigner::generate();
    let pruned = log.prune_through(4, &signer, "test").await.unwrap();
    assert_eq!(pruned.anchor.seq, 4);
    // Events 5..=10, the prune event 11, then 12 and 13.
    assert_eq!(pruned.event.seq, 11);
    append_n(&log, 2).await;
    let report = log.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!((report.start.seq, report.events), (4, 9));

    log.prune_through(12, &signer, "test").await.unwrap();
    let next = log.append(feedback(0)).await.unwrap();
    assert_eq!(next.seq, 15);
    let report = log
        .verify_integrity(&signer.trusted(), Extent::Whole)
        .await
        .unwrap();
    assert!(report.is_intact(), "{report:?}");
}

#[tokio::test]
async fn a_writer_whose_tip_another_process_moved_appends_after_it_and_the_chain_stays_whole() {
    let db = Db::new();
    let (a, b) = (db.log().await, db.log().await);
    // Strictly alternating, so every append after the first finds the tip moved.
    let mut seqs = Vec::new();
    for i in 0..6 {
        let log = if i % 2 == 0 { &a } else { &b };
        seqs.push(log.append(feedback(i)).await.unwrap().seq);
    }
    assert_eq!(seqs, vec![1, 2, 3, 4, 5, 6]);
    let report = b.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, 6);
}

#[tokio::test]
async fn every_event_of_one_session_in_one_group_counts_in_its_summary() {
    let db = Db::new();
    let log = db.log().await;
    // Another session first, so the group below takes the writer's one-round-trip path.
    log.append(NewEvent::session_started("s0", "agent", "support", None))
        .await
        .unwrap();
    log.append_batch(vec![
        NewEvent::session_started("s1", "agent", "support", Some("refund a customer")),
        allowed_event(
            "s1",
            "agent",
            "issue_refund",
            json!({ "amount": "20.00" }),
            "refunds",
            &BTreeMap::new(),
        ),
        NewEvent::call_result(
            "s1",
            "agent",
            "issue_refund",
            3,
            &skillgate_core::audit::CallOutcome::Error {
                message: "down".to_owned(),
            },
        ),
        NewEvent::call_denied(
            "agent",
            "issue_refund",
            json!({ "amount": "900.00" }),
            "GOVERNANCE_VIOLATION",
            Some("max_amount"),
        )
        .in_session("s1"),
        feedback(0),
    ])
    .await
    .unwrap();
    let row: (i64, i64, i64, i64, i64, i64, String, Option<String>) = sqlx::query_as(
        "SELECT first_seq, last_seq, events, calls, errors, violations, tools, scope
         FROM audit_session_summaries WHERE session_id = 's1'",
    )
    .fetch_one(log.store().test_pool())
    .await
    .unwrap();
    assert_eq!(
        row,
        (
            2,
            6,
            5,
            1,
            1,
            1,
            " issue_refund ".to_owned(),
            Some("support".to_owned())
        )
    );
}

#[tokio::test]
async fn appending_after_the_whole_chain_was_pruned_continues_from_the_anchor() {
    let db = Db::new();
    let log = db.log().await;
    append_n(&log, 3).await;
    let signer = CheckpointSigner::generate();
    log.prune_through(3, &signer, "test").await.unwrap();
    let next = log.append(feedback(9)).await.unwrap();
    // Seq 4 is the prune event.
    assert_eq!(next.seq, 5);
    let report = log.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, 2);
}

/// A `call_allowed` event as the gateway writes it for a permitted call (the typed
/// constructor takes a policy permit; these tests exercise storage, not policy).
fn allowed_event(
    session_id: &str,
    actor: &str,
    tool: &str,
    arguments: serde_json::Value,
    role: &str,
    skill_versions: &std::collections::BTreeMap<String, u32>,
) -> NewEvent {
    NewEvent::new(
        skillgate_core::audit::EventKind::CallAllowed,
        serde_json::json!({
            "tool": tool,
            "arguments": arguments,
            "decision": "allowed",
            "role": role,
            "skill_versions": skill_versions,
        }),
    )
    .in_session(session_id)
    .by(actor)
}

/// Many audited changes sent at once share a transaction; each still succeeds, declines or
/// fails alone, a refused event undoes its own change only, and the chain stays whole.
#[tokio::test]
async fn concurrent_audited_changes_each_commit_decline_or_fail_alone() {
    let db = Db::new();
    let log = db.log().await;
    refuse_feedback_events(&log).await;
    let tasks: Vec<_> = (0..48u64)
        .map(|i| {
            let log = log.clone();
            tokio::spawn(async move {
                let outcome = log
                    .commit(move |conn| {
                        Box::pin(async move {
                            sqlx::query(
                                "INSERT INTO compliance_settings (key, value) VALUES ($1, 'x')",
                            )
                            .bind(format!("k{i}"))
                            .execute(conn.test_conn())
                            .await?;
                            match i % 4 {
                                0 => Err(skillgate_core::store::StoreError::Conflict("no".into())),
                                1 => Ok(None),
                                // Its event is refused by the database.
                                2 => Ok(Some((i, vec![feedback(i)]))),
                                _ => Ok(Some((
                                    i,
                                    vec![NewEvent::new(EventKind::CallResult, json!({ "i": i }))],
                                ))),
                            }
                        })
                    })
                    .await;
                (i, outcome)
            })
        })
        .collect();
    for task in tasks {
        let (i, outcome) = task.await.unwrap();
        match i % 4 {
            0 | 2 => assert!(outcome.is_err(), "{i}: {outcome:?}"),
            1 => assert_eq!(outcome.unwrap(), None, "{i} declined"),
            _ => assert_eq!(outcome.unwrap(), Some(i)),
        }
    }
    let mut kept: Vec<String> =
        sqlx::query_scalar("SELECT key FROM compliance_settings WHERE key LIKE 'k%'")
            .fetch_all(log.store().test_pool())
            .await
            .unwrap();
    kept.sort();
    let mut expected: Vec<String> = (0..48u64)
        .filter(|i| i % 4 == 3)
        .map(|i| format!("k{i}"))
        .collect();
    expected.sort();
    assert_eq!(kept, expected, "only the changes that committed are stored");
    let report = log.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.events, 12);
}

#[tokio::test]
async fn appends_that_fail_together_while_the_database_is_away_are_told_so_together_not_retried_one_by_one()
 {
    use skillgate_core::audit::AuditError;
    use skillgate_core::store::{PoolSettings, StoreError};

    // A PostgreSQL of this test's own, to stop; a pool that waits half a second.
    let mut pg = skillgate_testpg::TempPostgres::start().unwrap();
    let url = pg.fresh_database();
    let settings = PoolSettings {
        max_connections: None,
        acquire_timeout: std::time::Duration::from_millis(500),
    };
    let log = AuditLog::new(Store::open_with(&url, settings).await.unwrap());
    log.append(feedback(0)).await.unwrap();

    pg.stop().unwrap();
    // The writer takes the first and fails on it for the pool's wait; the others queue
    // meanwhile and fail as one group.
    let answers = futures::future::join_all((1..=8).map(|i| log.append(feedback(i)))).await;
    for answer in &answers {
        let error = answer
            .as_ref()
            .expect_err("nothing commits while the database is away");
        assert!(error.is_unavailable(), "{error:?}");
    }
    // A group's failure is told to each of its callers as it is, not found again by a
    // retry of each caller, which would wait out the pool once per caller.
    let told_together = answers
        .iter()
        .filter(|answer| matches!(answer, Err(AuditError::Store(StoreError::Unavailable(_)))))
        .count();
    assert!(told_together >= 2, "{answers:?}");

    // Back, the same writer appends again, after the one event that committed.
    pg.start_again().unwrap();
    let appended = log.append(feedback(9)).await.unwrap();
    assert_eq!(appended.seq, 2);
    let report = log.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
}
