//! Verification: the chain walked from its newest retention anchor, then checked against
//! every stored checkpoint and the anchor against its signed prune event.

use std::fmt;

use futures::TryStreamExt;
use serde_json::Value;

use super::walk::Ranges;
use super::{PrunedRange, TrustedKeys, prune_message};
use crate::audit::chain::VerifyReport;
use crate::store::audit::{Anchor, AuditRow, Checkpoint};
use crate::store::{Store, StoreError};

/// Problems listed one by one in a report; the rest are counted.
const MAX_LISTED: usize = 20;

/// Something the checkpoints and prune events say is wrong with the stored chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointProblem {
    /// There are checkpoints (or a retention anchor) but no key to check them with.
    NoTrustedKey { checkpoints: u64 },
    /// A valid checkpoint names a seq past the stored tip: the newest events were deleted.
    Truncated {
        stored_tip: u64,
        checkpoint_seq: u64,
        signed_at: String,
    },
    /// The event at a valid checkpoint's seq is missing or has another hash: the chain
    /// was cut back to before it and re-grown, or rewritten.
    Rewritten {
        seq: u64,
        signed_hash: String,
        stored_hash: Option<String>,
    },
    /// A checkpoint whose signature no trusted key made.
    ForgedCheckpoint { seq: u64 },
    /// The retention anchor the chain starts from has no signed prune event.
    ForgedAnchor { seq: u64 },
    /// A prune event, anchor and checkpoint disagree about what was pruned.
    PrunedRangeMismatch { through_seq: u64, detail: String },
}

impl CheckpointProblem {
    /// A stable name for the kind of problem: `truncated`, `forged anchor`, …
    pub fn label(&self) -> &'static str {
        match self {
            CheckpointProblem::NoTrustedKey { .. } => "no trusted key",
            CheckpointProblem::Truncated { .. } => "truncated",
            CheckpointProblem::Rewritten { .. } => "rewritten",
            CheckpointProblem::ForgedCheckpoint { .. } => "forged checkpoint",
            CheckpointProblem::ForgedAnchor { .. } => "forged anchor",
            CheckpointProblem::PrunedRangeMismatch { .. } => "pruned range mismatch",
        }
    }
}

impl fmt::Display for CheckpointProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.label())?;
        match self {
            CheckpointProblem::NoTrustedKey { checkpoints: 0 } => f.write_str(
                "the retention anchor cannot be checked without the audit public key \
                 (pass --public-key or --audit-signing-key)",
            ),
            CheckpointProblem::NoTrustedKey { checkpoints } => write!(
                f,
                "{checkpoints} signed checkpoints cannot be checked without the audit public \
                 key (pass --public-key or --audit-signing-key)"
            ),
            CheckpointProblem::Truncated {
                stored_tip,
                checkpoint_seq,
                signed_at,
            } => write!(
                f,
                "the chain ends at seq {stored_tip}, but a checkpoint signed at {signed_at} \
                 names seq {checkpoint_seq}: events {}..={checkpoint_seq} were deleted",
                stored_tip + 1
            ),
            CheckpointProblem::Rewritten {
                seq,
                signed_hash,
                stored_hash: Some(stored),
            } => write!(
                f,
                "event {seq} has hash {stored}, but its checkpoint signed {signed_hash}: \
                 the chain was cut back and re-grown, or rewritten, at or before seq {seq}"
            ),
            CheckpointProblem::Rewritten {
                seq, signed_hash, ..
            } => write!(
                f,
                "event {seq}, which a checkpoint signed with hash {signed_hash}, is missing"
            ),
            CheckpointProblem::ForgedCheckpoint { seq } => write!(
                f,
                "the checkpoint at seq {seq} is not signed by the trusted audit key"
            ),
            CheckpointProblem::ForgedAnchor { seq } => write!(
                f,
                "the retention anchor at seq {seq} is not vouched for by a signed prune \
                 event: events up to {seq} were deleted outside retention"
            ),
            CheckpointProblem::PrunedRangeMismatch {
                through_seq,
                detail,
            } => write!(f, "the prune through seq {through_seq}: {detail}"),
        }
    }
}

/// What the checkpoints say about the stored chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointReport {
    /// Checkpoints read.
    pub checkpoints: u64,
    /// The newest checkpoint a trusted key signed.
    pub newest_valid: Option<Checkpoint>,
    /// The newest stored event (or anchor, or genesis).
    pub stored_tip: Anchor,
    /// The first problems found, in the order found.
    pub problems: Vec<CheckpointProblem>,
    /// Problems found beyond those listed.
    pub more_problems: u64,
}

impl CheckpointReport {
    pub fn is_intact(&self) -> bool {
        self.problems.is_empty() && self.more_problems == 0
    }

    /// Events after the newest valid checkpoint: not yet protected against truncation.
    pub fn uncovered_events(&self) -> u64 {
        let covered = self.newest_valid.as_ref().map_or(0, |c| c.seq);
        self.stored_tip.seq.saturating_sub(covered)
    }

    fn note(&mut self, problem: CheckpointProblem) {
        if self.problems.len() < MAX_LISTED {
            self.problems.push(problem);
        } else {
            self.more_problems += 1;
        }
    }
}

/// How much of the stored chain a verification re-reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Extent {
    /// Every stored event from the newest retention anchor, every checkpoint, and the
    /// anchor against its signed prune event.
    #[default]
    Whole,
    /// Only what is newer than the newest checkpoint a trusted key signed whose event is
    /// still stored with the signed hash: the events after it and the checkpoints after
    /// it. The events up to it are not re-read, so a change to one of them that left the
    /// checkpointed event's hash alone (an edit without re-chaining) is found only by a
    /// [`Extent::Whole`] walk; one that re-chained through it moves that hash and is
    /// found here. Without such a checkpoint this is a whole walk.
    SinceCheckpoint,
}

/// The hash chain walk and the checkpoint checks together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegrityReport {
    pub chain: VerifyReport,
    pub checkpoints: CheckpointReport,
    /// The checkpoint an [`Extent::SinceCheckpoint`] walk started from; `None` when the
    /// whole chain was walked.
    pub since: Option<Checkpoint>,
}

impl IntegrityReport {
    pub fn is_intact(&self) -> bool {
        self.chain.is_intact() && self.checkpoints.is_intact()
    }
}

/// Walks the stored chain (all of it from its newest retention anchor, or what is newer
/// than its newest trusted checkpoint: see [`Extent`]), then checks it against the
/// checkpoints and, for a whole walk, the anchor against its prune event, trusting only
/// `keys`.
#[tracing::instrument(skip(store, keys))]
pub async fn verify_integrity(
    store: &Store,
    keys: &TrustedKeys,
    extent: Extent,
) -> Result<IntegrityReport, StoreError> {
    let anchor = store
        .audit_latest_anchor()
        .await?
        .unwrap_or_else(Anchor::genesis);
    let since = match extent {
        Extent::Whole => None,
        Extent::SinceCheckpoint => resume_point(store, &anchor, keys).await?,
    };
    let start = since.as_ref().map_or_else(
        || anchor.clone(),
        |c| Anchor {
            seq: c.seq,
            hash: c.hash.clone(),
        },
    );
    let chain = super::walk::walk(store, start, Ranges::for_this_machine()).await?;
    let checkpoints = check_checkpoints(store, &anchor, since.as_ref(), keys).await?;
    Ok(IntegrityReport {
        chain,
        checkpoints,
        since,
    })
}

/// The newest checkpoint above the retention anchor that a trusted key signed and whose
/// event is stored with the hash it signed: where a walk may resume.
async fn resume_point(
    store: &Store,
    anchor: &Anchor,
    keys: &TrustedKeys,
) -> Result<Option<Checkpoint>, StoreError> {
    if keys.is_empty() {
        return Ok(None);
    }
    let tip = store.audit_tip().await?;
    let mut rows = store.audit_checkpoints_newest_first(tip.seq);
    while let Some(row) = rows.try_next().await? {
        let c = row.checkpoint;
        if c.seq <= anchor.seq {
            break;
        }
        // Checkpoints passed over here are newer than the one returned, so
        // `check_checkpoints` reports them.
        if c.is_signed_by(keys) && row.event_hash.as_deref() == Some(c.hash.as_str()) {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

/// Checks the checkpoints newer than `since` (all of them without it) against the stored
/// events, and, for a whole walk, the retention anchor against its prune event.
async fn check_checkpoints(
    store: &Store,
    anchor: &Anchor,
    since: Option<&Checkpoint>,
    keys: &TrustedKeys,
) -> Result<CheckpointReport, StoreError> {
    let mut report = CheckpointReport {
        checkpoints: 0,
        newest_valid: since.cloned(),
        stored_tip: store.audit_tip().await?,
        problems: Vec::new(),
        more_problems: 0,
    };
    if keys.is_empty() {
        let total = store.audit_checkpoint_count().await?;
        if total > 0 || anchor.seq > 0 {
            report.checkpoints = total;
            report.note(CheckpointProblem::NoTrustedKey { checkpoints: total });
        }
        return Ok(report);
    }
    if anchor.seq > 0 && since.is_none() {
        check_anchor(store, anchor, keys, &mut report).await?;
    }
    let mut truncated: Option<Checkpoint> = None;
    let mut rows = store.audit_checkpoints_against_events(since.map_or(0, |c| c.seq), None);
    while let Some(row) = rows.try_next().await? {
        report.checkpoints += 1;
        let c = row.checkpoint;
        if !c.is_signed_by(keys) {
            report.note(CheckpointProblem::ForgedCheckpoint { seq: c.seq });
            continue;
        }
        if c.seq > report.stored_tip.seq {
            // Only the furthest one is named: it says how much was deleted.
            truncated = Some(c.clone());
        } else if c.seq == anchor.seq && anchor.seq > 0 {
            if c.hash != anchor.hash {
                report.note(CheckpointProblem::PrunedRangeMismatch {
                    through_seq: anchor.seq,
                    detail: format!(
                        "its checkpoint signed hash {}, but the retention anchor records {}",
                        c.hash, anchor.hash
                    ),
                });
            }
        } else if c.seq > anchor.seq && row.event_hash.as_deref() != Some(&c.hash) {
            report.note(CheckpointProblem::Rewritten {
                seq: c.seq,
                signed_hash: c.hash.clone(),
                stored_hash: row.event_hash,
            });
        }
        report.newest_valid = Some(c);
    }
    if let Some(c) = truncated {
        report.note(CheckpointProblem::Truncated {
            stored_tip: report.stored_tip.seq,
            checkpoint_seq: c.seq,
            signed_at: c.at,
        });
    }
    Ok(report)
}

/// A retention anchor is vouched for by a signed `audit_pruned` event, later in the chain,
/// naming exactly its seq and hash, and the previous anchor as where the range began.
async fn check_anchor(
    store: &Store,
    anchor: &Anchor,
    keys: &TrustedKeys,
    report: &mut CheckpointReport,
) -> Result<(), StoreError> {
    let previous = store
        .audit_anchor_before(anchor.seq)
        .await?
        .map_or(0, |a| a.seq);
    let mut mismatch = None;
    let mut vouched = false;
    for row in store.audit_prune_events(anchor.seq, anchor.seq).await? {
        match prune_event_range(&row, keys) {
            Some(range) if range.anchor_hash != anchor.hash => {
                mismatch = Some(format!(
                    "its signed event {} names hash {}, but the retention anchor records {}",
                    row.seq, range.anchor_hash, anchor.hash
                ));
            }
            Some(range) if range.from_seq != previous + 1 => {
                mismatch = Some(format!(
                    "its signed event {} says it began at seq {}, but the previous anchor is at seq {previous}",
                    row.seq, range.from_seq
                ));
            }
            Some(_) => vouched = true,
            None => {}
        }
    }
    match (vouched, mismatch) {
        (_, Some(detail)) => report.note(CheckpointProblem::PrunedRangeMismatch {
            through_seq: anchor.seq,
            detail,
        }),
        (false, None) => report.note(CheckpointProblem::ForgedAnchor { seq: anchor.seq }),
        (true, None) => {}
    }
    Ok(())
}

/// The range of an `audit_pruned` event whose signature a trusted key made.
fn prune_event_range(row: &AuditRow, keys: &TrustedKeys) -> Option<PrunedRange> {
    let payload: Value = serde_json::from_str(&row.payload).ok()?;
    let range = PrunedRange::from_payload(&payload)?;
    let signature = payload.get("signature")?.as_str()?;
    keys.verify(&prune_message(&range), signature)
        .then_some(range)
}
