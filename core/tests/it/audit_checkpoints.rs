//! Signed checkpoints against a real SQLite file: truncation, forged anchors, forged
//! checkpoints and pruned ranges are named; a deliberate prune verifies clean.

use futures::TryStreamExt;
use skillgate_core::audit::chain::link;
use skillgate_core::audit::checkpoint::{self, checkpoint_tip};
use skillgate_core::audit::{
    Anchor, AuditLog, AuditRow, CheckpointProblem, CheckpointSigner, Extent, IntegrityReport,
    NewEvent, PruneError, TipCheckpoint, TrustedKeys,
};
use skillgate_core::store::Store;

struct Fixture {
    _dir: tempfile::TempDir,
    log: AuditLog,
    signer: CheckpointSigner,
}

impl Fixture {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = skillgate_core::store::testing::database_url(dir.path(), "audit.db");
        Self {
            log: AuditLog::new(Store::open(&url).await.unwrap()),
            _dir: dir,
            signer: CheckpointSigner::generate(),
        }
    }

    fn store(&self) -> &Store {
        self.log.store()
    }

    async fn append(&self, n: u64) {
        for i in 0..n {
            self.log
                .append(NewEvent::feedback(
                    "s1",
                    "agent",
                    "refunds",
                    (i % 5 + 1) as u8,
                    None,
                ))
                .await
                .unwrap();
        }
    }

    async fn checkpoint(&self) -> TipCheckpoint {
        checkpoint_tip(self.store(), &self.signer, chrono::Utc::now())
            .await
            .unwrap()
    }

    async fn verify(&self) -> IntegrityReport {
        self.log
            .verify_integrity(&self.signer.trusted(), Extent::Whole)
            .await
            .unwrap()
    }

    async fn verify_since_checkpoint(&self) -> IntegrityReport {
        self.log
            .verify_integrity(&self.signer.trusted(), Extent::SinceCheckpoint)
            .await
            .unwrap()
    }

    async fn exec(&self, sql: &str) {
        sqlx::query(sql)
            .execute(self.store().test_pool())
            .await
            .unwrap();
    }

    async fn hash_at(&self, seq: i64) -> String {
        sqlx::query_scalar("SELECT hash FROM audit_events WHERE seq = $1")
            .bind(seq)
            .fetch_one(self.store().test_pool())
            .await
            .unwrap()
    }

    async fn checkpoints(&self) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM audit_checkpoints")
            .fetch_one(self.store().test_pool())
            .await
            .unwrap()
    }
}

fn labels(report: &IntegrityReport) -> Vec<&'static str> {
    report
        .checkpoints
        .problems
        .iter()
        .map(CheckpointProblem::label)
        .collect()
}

#[tokio::test]
async fn a_checkpoint_is_signed_only_when_the_tip_moved() {
    let fx = Fixture::new().await;
    assert_eq!(fx.checkpoint().await, TipCheckpoint::Empty);
    fx.append(3).await;
    let TipCheckpoint::Signed(first) = fx.checkpoint().await else {
        panic!("the first checkpoint of a non-empty chain is signed")
    };
    assert_eq!(first.seq, 3);
    assert_eq!(first.hash, fx.hash_at(3).await);
    assert!(first.is_signed_by(&fx.signer.trusted()));
    assert_eq!(fx.checkpoint().await, TipCheckpoint::Unchanged);
    assert_eq!(fx.checkpoint().await, TipCheckpoint::Unchanged);
    assert_eq!(
        fx.checkpoints().await,
        1,
        "an idle chain grows no checkpoints"
    );
    fx.append(1).await;
    assert!(matches!(fx.checkpoint().await, TipCheckpoint::Signed(c) if c.seq == 4));
    assert_eq!(fx.checkpoints().await, 2);
    let report = fx.verify().await;
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.checkpoints.newest_valid.as_ref().unwrap().seq, 4);
    assert_eq!(report.checkpoints.uncovered_events(), 0);
}

#[tokio::test]
async fn deleting_the_newest_events_is_reported_as_truncation() {
    let fx = Fixture::new().await;
    fx.append(10).await;
    fx.checkpoint().await;
    fx.exec("DELETE FROM audit_events WHERE seq > 7").await;

    let report = fx.verify().await;
    // The chain alone still verifies: only the checkpoint shows what is missing.
    assert!(report.chain.is_intact(), "{:?}", report.chain);
    assert!(!report.is_intact());
    assert_eq!(
        report.checkpoints.problems,
        [CheckpointProblem::Truncated {
            stored_tip: 7,
            checkpoint_seq: 10,
            signed_at: report.checkpoints.newest_valid.clone().unwrap().at,
        }]
    );
    let text = report.checkpoints.problems[0].to_string();
    assert!(text.starts_with("truncated: "), "{text}");
    assert!(text.contains("events 8..=10 were deleted"), "{text}");
    // The server notices too and signs nothing over the shortened chain.
    assert!(matches!(
        fx.checkpoint().await,
        TipCheckpoint::Behind { tip, .. } if tip.seq == 7
    ));
}

#[tokio::test]
async fn a_chain_cut_back_and_grown_again_is_reported_at_its_checkpoint() {
    let fx = Fixture::new().await;
    fx.append(10).await;
    fx.checkpoint().await;
    let signed = fx.hash_at(10).await;
    fx.exec("DELETE FROM audit_events WHERE seq > 5").await;
    fx.append(8).await;

    let report = fx.verify().await;
    assert!(report.chain.is_intact(), "{:?}", report.chain);
    assert_eq!(
        report.checkpoints.problems,
        [CheckpointProblem::Rewritten {
            seq: 10,
            signed_hash: signed,
            stored_hash: Some(fx.hash_at(10).await),
        }]
    );
}

#[tokio::test]
async fn a_forged_retention_anchor_is_reported() {
    let fx = Fixture::new().await;
    fx.append(20).await;
    fx.checkpoint().await;
    let hash = fx.hash_at(8).await;
    fx.exec("DELETE FROM audit_events WHERE seq <= 8").await;
    sqlx::query("INSERT INTO audit_anchors (seq, hash, pruned_at) VALUES (8, $1, '2026-01-01')")
        .bind(&hash)
        .execute(fx.store().test_pool())
        .await
        .unwrap();

    let report = fx.verify().await;
    assert!(report.chain.is_intact(), "{:?}", report.chain);
    assert_eq!(report.chain.start.seq, 8);
    assert_eq!(
        report.checkpoints.problems,
        [CheckpointProblem::ForgedAnchor { seq: 8 }]
    );
}

#[tokio::test]
async fn a_tampered_or_foreign_checkpoint_signature_is_reported() {
    let fx = Fixture::new().await;
    fx.append(5).await;
    fx.checkpoint().await;
    // One hex digit of the signature changed.
    fx.exec(
        "UPDATE audit_checkpoints SET signature =
           (CASE substr(signature, 1, 1) WHEN '0' THEN '1' ELSE '0' END) || substr(signature, 2)",
    )
    .await;
    let report = fx.verify().await;
    assert_eq!(
        report.checkpoints.problems,
        [CheckpointProblem::ForgedCheckpoint { seq: 5 }]
    );

    // A well-formed checkpoint made with another key, claiming a longer chain.
    let forger = CheckpointSigner::generate();
    let forged = forger.sign_checkpoint(
        &Anchor {
            seq: 9,
            hash: "ab".repeat(32),
        },
        "2026-01-01T00:00:00.000000Z",
    );
    sqlx::query("INSERT INTO audit_checkpoints VALUES ($1, $2, $3, $4, $5)")
        .bind(9_i64)
        .bind(&forged.hash)
        .bind(&forged.at)
        .bind(fx.signer.public_key().to_string())
        .bind(&forged.signature)
        .execute(fx.store().test_pool())
        .await
        .unwrap();
    let report = fx.verify().await;
    assert_eq!(labels(&report), ["forged checkpoint", "forged checkpoint"]);
    assert!(report.checkpoints.newest_valid.is_none());
}

#[tokio::test]
async fn checkpoints_without_a_trusted_key_do_not_verify() {
    let fx = Fixture::new().await;
    fx.append(2).await;
    fx.checkpoint().await;
    let report = fx
        .log
        .verify_integrity(&TrustedKeys::default(), Extent::Whole)
        .await
        .unwrap();
    assert_eq!(labels(&report), ["no trusted key"]);
    // A verifier trusting the public key alone (no private key) accepts them.
    let public = fx.signer.public_key().to_string().parse().unwrap();
    let report = fx
        .log
        .verify_integrity(&TrustedKeys::new(vec![public]), Extent::Whole)
        .await
        .unwrap();
    assert!(report.is_intact(), "{report:?}");
}

#[tokio::test]
async fn a_deliberate_prune_verifies_clean_and_records_a_signed_event() {
    let fx = Fixture::new().await;
    fx.append(30).await;
    fx.checkpoint().await;
    let pruned = fx
        .log
        .prune_through(20, &fx.signer, "retention")
        .await
        .unwrap();
    assert_eq!((pruned.range.from_seq, pruned.range.through_seq), (1, 20));
    assert_eq!(pruned.range.events, 20);
    assert_eq!(pruned.event.seq, 31);
    assert_eq!(pruned.event.kind, "audit_pruned");
    assert_eq!(pruned.checkpoint.seq, 31);

    let report = fx.verify().await;
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.chain.start.seq, 20);
    assert_eq!(report.checkpoints.newest_valid.unwrap().seq, 31);
    let events: Vec<_> = fx.log.events(None).try_collect().await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.payload["through_seq"], 20);
    assert_eq!(last.payload["anchor_hash"], pruned.anchor.hash.as_str());
    assert_eq!(last.actor.as_deref(), Some("retention"));

    // A second prune starts where the first ended.
    fx.append(5).await;
    let again = fx
        .log
        .prune_through(33, &fx.signer, "retention")
        .await
        .unwrap();
    assert_eq!((again.range.from_seq, again.range.through_seq), (21, 33));
    let report = fx.verify().await;
    assert!(report.is_intact(), "{report:?}");
}

#[tokio::test]
async fn a_prune_event_signed_by_another_key_does_not_vouch_for_its_anchor() {
    let fx = Fixture::new().await;
    fx.append(12).await;
    let stranger = CheckpointSigner::generate();
    fx.log.prune_through(10, &stranger, "x").await.unwrap();
    let report = fx.verify().await;
    assert!(report.chain.is_intact());
    let labels = labels(&report);
    assert!(labels.contains(&"forged anchor"), "{labels:?}");
    assert!(labels.contains(&"forged checkpoint"), "{labels:?}");
}

/// Rewrites every stored event from the first after the anchor so that the chain links to
/// `anchor_hash`: what someone who changed the anchor would have to do for the walk to pass.
async fn relink_after_anchor(store: &Store, anchor_seq: u64, anchor_hash: &str) {
    let rows: Vec<AuditRow> = store.audit_events(0, None).try_collect().await.unwrap();
    let mut tip = Anchor {
        seq: anchor_seq,
        hash: anchor_hash.to_owned(),
    };
    for row in rows {
        let new = link(
            &tip,
            row.at.clone(),
            row.session_id.clone(),
            row.kind.clone(),
            row.actor.clone(),
            row.payload.clone(),
        );
        sqlx::query("UPDATE audit_events SET prev_hash = $1, hash = $2 WHERE seq = $3")
            .bind(&new.prev_hash)
            .bind(&new.hash)
            .bind(new.seq as i64)
            .execute(store.test_pool())
            .await
            .unwrap();
        tip = Anchor {
            seq: new.seq,
            hash: new.hash,
        };
    }
}

#[tokio::test]
async fn an_anchor_that_is_not_the_pruned_range_signed_is_reported() {
    let fx = Fixture::new().await;
    fx.append(20).await;
    fx.checkpoint().await;
    fx.append(5).await;
    fx.log
        .prune_through(20, &fx.signer, "retention")
        .await
        .unwrap();
    let other = "cd".repeat(32);
    fx.exec(&format!(
        "UPDATE audit_anchors SET hash = '{other}' WHERE seq = 20"
    ))
    .await;
    relink_after_anchor(fx.store(), 20, &other).await;

    let report = fx.verify().await;
    assert!(report.chain.is_intact(), "{:?}", report.chain);
    let labels = labels(&report);
    // The checkpoint of seq 20 and the prune event both signed the real hash.
    assert_eq!(
        labels
            .iter()
            .filter(|l| **l == "pruned range mismatch")
            .count(),
        2,
        "{:?}",
        report.checkpoints.problems
    );
    // And the checkpoint the prune wrote no longer matches its event.
    assert!(labels.contains(&"rewritten"), "{labels:?}");
}

#[tokio::test]
async fn pruning_refuses_a_range_that_does_not_verify_and_deletes_nothing() {
    let fx = Fixture::new().await;
    fx.append(20).await;
    fx.exec("UPDATE audit_events SET payload = '{\"rating\":5}' WHERE seq = 5")
        .await;
    let err = fx
        .log
        .prune_through(10, &fx.signer, "retention")
        .await
        .unwrap_err();
    assert!(
        matches!(err, PruneError::Broken(ref bad) if bad.seq == 5),
        "{err}"
    );
    assert_eq!(fx.store().audit_count(None).await.unwrap(), 20);
    assert_eq!(fx.store().audit_latest_anchor().await.unwrap(), None);
}

#[tokio::test]
async fn pruning_refuses_a_range_whose_checkpoint_does_not_match() {
    let fx = Fixture::new().await;
    fx.append(10).await;
    fx.checkpoint().await;
    fx.append(5).await;
    // Event 10 rewritten, and every later one relinked: the walk passes, its signed
    // checkpoint does not.
    rewrite_and_rechain(&fx, 10).await;
    assert!(fx.log.verify().await.unwrap().is_intact());
    let err = fx
        .log
        .prune_through(12, &fx.signer, "retention")
        .await
        .unwrap_err();
    assert!(matches!(err, PruneError::CheckpointMismatch(10)), "{err}");
    assert_eq!(fx.store().audit_count(None).await.unwrap(), 15);
}

#[tokio::test]
async fn the_periodic_task_signs_a_checkpoint_at_once() {
    let fx = Fixture::new().await;
    fx.append(2).await;
    let signer = std::sync::Arc::new(CheckpointSigner::generate());
    let task = tokio::spawn(checkpoint::checkpoint_every(
        fx.store().clone(),
        signer,
        std::time::Duration::from_secs(3600),
    ));
    // The first tick fires immediately; wait for its row, bounded.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while fx.checkpoints().await == 0 {
        assert!(std::time::Instant::now() < deadline, "no checkpoint signed");
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    task.abort();
    assert_eq!(fx.checkpoints().await, 1);
}

/// Rewrites event `seq`'s payload and relinks every later event, recomputing their hashes:
/// the chain walk passes, and each checkpoint from `seq` on no longer matches.
async fn rewrite_and_rechain(fx: &Fixture, seq: u64) {
    let rows: Vec<AuditRow> = fx
        .store()
        .audit_events(seq - 1, None)
        .try_collect()
        .await
        .unwrap();
    let mut tip = Anchor {
        seq: seq - 1,
        hash: fx.hash_at(seq as i64 - 1).await,
    };
    for (i, row) in rows.into_iter().enumerate() {
        let payload = if i == 0 {
            "{\"rating\":1}".to_owned()
        } else {
            row.payload
        };
        let new = link(&tip, row.at, row.session_id, row.kind, row.actor, payload);
        sqlx::query(
            "UPDATE audit_events SET payload = $1, prev_hash = $2, hash = $3 WHERE seq = $4",
        )
        .bind(&new.payload)
        .bind(&new.prev_hash)
        .bind(&new.hash)
        .bind(new.seq as i64)
        .execute(fx.store().test_pool())
        .await
        .unwrap();
        tip = Anchor {
            seq: new.seq,
            hash: new.hash,
        };
    }
}

#[tokio::test]
async fn a_walk_since_the_newest_checkpoint_reads_only_newer_events_and_finds_an_edit_among_them() {
    let fx = Fixture::new().await;
    fx.append(6).await;
    fx.checkpoint().await;
    fx.append(4).await;
    fx.checkpoint().await;
    fx.append(5).await;

    let report = fx.verify_since_checkpoint().await;
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.since.as_ref().map(|c| c.seq), Some(10));
    assert_eq!(
        report.chain.events, 5,
        "only the events after seq 10 are read"
    );
    assert_eq!(report.chain.verified_tip.seq, 15);
    assert_eq!(report.checkpoints.uncovered_events(), 5);

    fx.exec("UPDATE audit_events SET payload = '{\"rating\":5}' WHERE seq = 13")
        .await;
    let report = fx.verify_since_checkpoint().await;
    assert_eq!(
        report
            .chain
            .first_bad
            .map(|bad| (bad.seq, bad.reason.to_string())),
        Some((13, "changed".to_owned()))
    );
}

#[tokio::test]
async fn a_rewrite_rechained_through_the_newest_checkpoint_is_found_from_the_one_before() {
    let fx = Fixture::new().await;
    fx.append(5).await;
    fx.checkpoint().await;
    fx.append(5).await;
    fx.checkpoint().await;
    let signed = fx.hash_at(10).await;
    fx.append(5).await;
    rewrite_and_rechain(&fx, 8).await;

    let report = fx.verify_since_checkpoint().await;
    assert_eq!(
        report.since.as_ref().map(|c| c.seq),
        Some(5),
        "the checkpoint whose event changed is not a place to resume from"
    );
    assert!(report.chain.is_intact(), "{:?}", report.chain);
    assert_eq!(report.chain.events, 10);
    assert_eq!(
        report.checkpoints.problems,
        [CheckpointProblem::Rewritten {
            seq: 10,
            signed_hash: signed,
            stored_hash: Some(fx.hash_at(10).await),
        }]
    );
}

#[tokio::test]
async fn a_walk_since_the_checkpoint_reports_the_newest_events_deleted() {
    let fx = Fixture::new().await;
    fx.append(10).await;
    fx.checkpoint().await;
    fx.exec("DELETE FROM audit_events WHERE seq > 7").await;

    let report = fx.verify_since_checkpoint().await;
    assert_eq!(
        report.since, None,
        "no checkpoint at or below the stored tip"
    );
    assert_eq!(labels(&report), ["truncated"]);
}

#[tokio::test]
async fn an_old_edit_left_unchained_is_found_by_the_whole_walk_and_not_by_the_walk_since_the_checkpoint()
 {
    // The trade the faster walk makes, pinned so that it is never mistaken for more.
    let fx = Fixture::new().await;
    fx.append(10).await;
    fx.checkpoint().await;
    fx.append(3).await;
    fx.exec("UPDATE audit_events SET payload = '{\"rating\":5}' WHERE seq = 4")
        .await;

    assert!(fx.verify_since_checkpoint().await.is_intact());
    let whole = fx.verify().await;
    assert_eq!(whole.chain.first_bad.map(|bad| bad.seq), Some(4));
}

#[tokio::test]
async fn a_forged_checkpoint_newer_than_the_valid_one_is_reported_and_not_resumed_from() {
    let fx = Fixture::new().await;
    fx.append(10).await;
    fx.checkpoint().await;
    fx.append(3).await;
    let forger = CheckpointSigner::generate();
    checkpoint_tip(fx.store(), &forger, chrono::Utc::now())
        .await
        .unwrap();

    let report = fx.verify_since_checkpoint().await;
    assert_eq!(report.since.as_ref().map(|c| c.seq), Some(10));
    assert_eq!(report.chain.events, 3);
    assert_eq!(
        report.checkpoints.problems,
        [CheckpointProblem::ForgedCheckpoint { seq: 13 }]
    );
}
