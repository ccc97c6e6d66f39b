//! The chain walked in several ranges at once: a whole walk of millions of events is bound
//! by decoding rows and hashing them, which one task does on one core at a time.
//!
//! The events after the start are cut into ranges at stored events, and each range is
//! walked on a task of its own from the stored hash of the event just before it. Together
//! they check what one walk checks: each range checks its own events' hashes and links,
//! and the event each range starts from is the last event of the range before, whose hash
//! that range checked (the ranges must join: each one's verified tip is the next one's
//! start). When a range finds a break, the walk is done again in one piece from the start
//! of the range before it, so the report (which event, and whether it was changed, removed
//! or reordered, which can depend on events further on or on the event just before) is
//! exactly the one-piece walk's.

use futures::TryStreamExt;

use crate::audit::chain::{ChainVerifier, VerifyReport};
use crate::store::audit::Anchor;
use crate::store::{Store, StoreError};

/// How a walk may be cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ranges {
    /// At most this many ranges (tasks) at once.
    pub most: usize,
    /// No range shorter than this many events: below it a task costs more than it saves.
    pub min_events: u64,
}

impl Ranges {
    /// One range per core, up to eight, each of at least 100,000 events.
    pub fn for_this_machine() -> Self {
        Self {
            most: std::thread::available_parallelism()
                .map_or(1, usize::from)
                .min(8),
            min_events: 100_000,
        }
    }

    /// A walk in one piece.
    pub fn one() -> Self {
        Self {
            most: 1,
            min_events: u64::MAX,
        }
    }
}

/// The whole stored chain, from the newest retention anchor (else the genesis), in as
/// many ranges at once as this machine has cores: the one whole walk every reader uses.
pub async fn walk_all(store: &Store) -> Result<VerifyReport, StoreError> {
    let start = store
        .audit_latest_anchor()
        .await?
        .unwrap_or_else(Anchor::genesis);
    walk(store, start, Ranges::for_this_machine()).await
}

/// Walks the stored events after `start` to the newest, in as many ranges at once as
/// `ranges` allows.
pub async fn walk(
    store: &Store,
    start: Anchor,
    ranges: Ranges,
) -> Result<VerifyReport, StoreError> {
    let tip = store.audit_tip().await?;
    let span = tip.seq.saturating_sub(start.seq);
    let count = usize::try_from(span / ranges.min_events.max(1))
        .unwrap_or(usize::MAX)
        .min(ranges.most);
    if count < 2 {
        return walk_range(store.clone(), start, None).await;
    }
    // Range k is the events after `starts[k]` through `starts[k + 1]` (the last one: to the
    // newest event, including any appended meanwhile, as a one-piece walk reads them).
    let mut starts = vec![start.clone()];
    for k in 1..count as u64 {
        let cut = start.seq + span * k / count as u64;
        if let Some(point) = store.audit_point_at_or_before(cut).await?
            && starts.last().is_some_and(|last| point.seq > last.seq)
        {
            starts.push(point);
        }
    }
    let mut tasks: Vec<_> = starts
        .iter()
        .enumerate()
        .map(|(k, from)| {
            let through = starts.get(k + 1).map(|next| next.seq);
            tokio::spawn(walk_range(store.clone(), from.clone(), through))
        })
        .collect();
    // Events read by the ranges before the one being joined, per range.
    let mut read = Vec::with_capacity(tasks.len());
    let mut verified_tip = start.clone();
    for k in 0..tasks.len() {
        let report = joined((&mut tasks[k]).await)??;
        let joins = starts
            .get(k + 1)
            .is_none_or(|next| report.verified_tip == *next);
        if report.first_bad.is_some() || !joins {
            for later in &tasks[k + 1..] {
                later.abort();
            }
            let from = k.saturating_sub(1);
            let again = walk_range(store.clone(), starts[from].clone(), None).await?;
            let before: u64 = read[..from].iter().sum();
            return Ok(VerifyReport {
                events: before + again.events,
                start,
                verified_tip: again.verified_tip,
                first_bad: again.first_bad,
            });
        }
        read.push(report.events);
        verified_tip = report.verified_tip;
    }
    Ok(VerifyReport {
        events: read.iter().sum(),
        start,
        verified_tip,
        first_bad: None,
    })
}

/// A task's outcome: a panic in it goes on as a panic here, as if it had run inline.
fn joined<T>(outcome: Result<T, tokio::task::JoinError>) -> Result<T, StoreError> {
    match outcome {
        Ok(value) => Ok(value),
        Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
        Err(join) => Err(StoreError::Unavailable(format!(
            "the audit walk was stopped: {join}"
        ))),
    }
}

/// One piece: the events after `from` through `through` (to the newest without it).
async fn walk_range(
    store: Store,
    from: Anchor,
    through: Option<u64>,
) -> Result<VerifyReport, StoreError> {
    if store.has_direct_lane() {
        // SQLite: read and hash on a blocking thread through rusqlite, with no hand-off
        // per row (BENCHMARKS.md, "Verification at scale").
        return joined(
            tokio::task::spawn_blocking(move || {
                let mut verifier = ChainVerifier::new(from.clone());
                if !store.audit_visit_direct(from.seq, through, |row| verifier.push(row))? {
                    // Never a walk of nothing that reports a chain intact.
                    return Err(StoreError::Unavailable(
                        "the SQLite direct lane went away during the audit walk".into(),
                    ));
                }
                Ok(verifier.finish())
            })
            .await,
        )?;
    }
    let mut verifier = ChainVerifier::new(from.clone());
    let mut rows = match through {
        Some(through) => store.audit_events_between(from.seq, through),
        None => store.audit_events(from.seq, None),
    };
    let mut read = 0u32;
    while let Some(row) = rows.try_next().await? {
        verifier.push(&row);
        read = read.wrapping_add(1);
        // A console request runs this on a server's runtime: let other tasks in.
        if read.is_multiple_of(1024) {
            tokio::task::yield_now().await;
        }
    }
    Ok(verifier.finish())
}
