//! Pruning: deleting the oldest events behind a signed `audit_pruned` event, once they
//! verify and match their checkpoints.

use chrono::{DateTime, Utc};
use futures::TryStreamExt;

use super::CheckpointSigner;
use crate::audit::chain::{self, ChainVerifier, canonical_json};
use crate::store::audit::{Anchor, Pruned};
use crate::store::{Store, StoreError, stamp};

#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("audit event {0} does not exist")]
    NoSuchEvent(u64),
    #[error("nothing to prune: the chain already starts after seq {0}")]
    AlreadyPruned(u64),
    #[error("refusing to prune: the events to delete do not verify ({0})")]
    Broken(chain::BadEvent),
    #[error(
        "refusing to prune: event {0} is not the one its signed checkpoint names; run `skillgate audit verify`"
    )]
    CheckpointMismatch(u64),
}

/// Deletes the events from the current anchor through `through`, after checking that they
/// verify and match their signed checkpoints (a prune must not erase the evidence of a
/// tampered range), and appends the signed `audit_pruned` event and a checkpoint of it,
/// all in one transaction with the deletion.
#[tracing::instrument(skip(store, signer))]
pub async fn prune_through(
    store: &Store,
    signer: &CheckpointSigner,
    through: u64,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<Pruned, PruneError> {
    let start = store
        .audit_latest_anchor()
        .await?
        .unwrap_or_else(Anchor::genesis);
    if through <= start.seq {
        return Err(PruneError::AlreadyPruned(start.seq));
    }
    let mut verifier = ChainVerifier::new(start.clone());
    {
        let mut rows = store.audit_events(start.seq, None);
        while let Some(row) = rows.try_next().await? {
            if row.seq > through {
                break;
            }
            verifier.push(&row);
        }
    }
    let walked = verifier.finish();
    if let Some(bad) = walked.first_bad {
        return Err(PruneError::Broken(bad));
    }
    if walked.verified_tip.seq != through {
        return Err(PruneError::NoSuchEvent(through));
    }
    let keys = signer.trusted();
    let mut checkpoints = store.audit_checkpoints_against_events(start.seq, Some(through));
    while let Some(c) = checkpoints.try_next().await? {
        if c.checkpoint.is_signed_by(&keys) && c.event_hash.as_deref() != Some(&c.checkpoint.hash) {
            return Err(PruneError::CheckpointMismatch(c.checkpoint.seq));
        }
    }
    drop(checkpoints);
    let at = stamp(now);
    let pruned = store
        .audit_prune_signed(
            &start,
            through,
            &walked.verified_tip.hash,
            &at,
            |range, tip| {
                let event = signer.prune_event(actor, range);
                let row = chain::link(
                    tip,
                    at.clone(),
                    event.session_id,
                    event.kind.as_str().to_owned(),
                    event.actor,
                    canonical_json(&event.payload),
                );
                let checkpoint = signer.sign_checkpoint(
                    &Anchor {
                        seq: row.seq,
                        hash: row.hash.clone(),
                    },
                    &at,
                );
                (row, checkpoint)
            },
        )
        .await?;
    tracing::info!(
        from = pruned.range.from_seq,
        through = pruned.range.through_seq,
        events = pruned.range.events,
        "pruned audit events"
    );
    Ok(pruned)
}
