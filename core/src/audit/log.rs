//! The `AuditLog` service: group-committed appends, verification, export.

use std::io::Write;

use chrono::{DateTime, SecondsFormat, Utc};
use futures::future::BoxFuture;
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use tokio::sync::{mpsc, oneshot};

use super::chain::{self, VerifyReport, canonical_json};
use super::event::{AppendedEvent, AuditEvent, NewEvent};
use super::export::{ExportError, ExportFilter, ExportFormat, ExportWriter};
use crate::names::EventKind;
use crate::store::Tx;
use crate::store::audit::{Anchor, AuditRow};
use crate::store::{Store, StoreError};

/// Events committed in one transaction at most.
const MAX_GROUP: usize = 512;
/// Audited changes committed in one transaction at most.
const MAX_CHANGES: usize = 64;
const QUEUE: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the audit writer has stopped")]
    WriterStopped,
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error("stored audit event {seq} is unreadable: {detail}")]
    Corrupt { seq: u64, detail: String },
}

impl AuditError {
    /// Whether the database could not serve the append (see
    /// [`StoreError::is_unavailable`]); a stopped writer is not that, it stays stopped.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Store(error) if error.is_unavailable())
    }
}

/// An event ready for the chain: payload already canonical.
struct Prepared {
    kind: EventKind,
    session_id: Option<String>,
    actor: Option<String>,
    payload: String,
}

/// A state change that commits in the same transaction as the events it returns: it runs
/// on the writer's connection inside a write transaction ([`Store::begin_write`](crate::store::Store)). `Ok(None)` declines (e.g. a stale
/// revision), and then neither the change nor any event is committed.
pub type Change = crate::store::audit::AuditedChange<Vec<NewEvent>>;

struct Job {
    events: Vec<Prepared>,
    /// Committed alone, before its events, in their transaction.
    change: Option<Change>,
    reply: oneshot::Sender<Result<Vec<AppendedEvent>, AuditError>>,
}

/// The append-only, hash-chained audit log.
///
/// Appends go through one writer that commits every event waiting at that moment in a
/// single transaction (group commit), so many concurrent appends cost few fsyncs. The
/// writer is a thread of its own that appends on a direct connection (see
/// `store::direct`): a caller's append is one hand-off to that thread and one back.
#[derive(Clone, Debug)]
pub struct AuditLog {
    store: Store,
    jobs: mpsc::Sender<Job>,
}

impl AuditLog {
    /// Starts the writer thread. It ends when the last clone of the log is dropped; if it
    /// cannot start, every append fails with [`AuditError::WriterStopped`] (fail closed).
    pub fn new(store: Store) -> Self {
        let (jobs, queue) = mpsc::channel(QUEUE);
        let writer_store = store.clone();
        let started = std::thread::Builder::new()
            .name("skillgate-audit".to_owned())
            .spawn(move || {
                // Its own small runtime, for the audited changes that run on sqlx; event
                // appends block this thread alone.
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime.block_on(run_writer(writer_store, queue)),
                    Err(error) => tracing::error!(%error, "the audit writer cannot start"),
                }
            });
        if let Err(error) = started {
            tracing::error!(%error, "the audit writer thread cannot start");
        }
        Self { store, jobs }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Appends one event and returns once it is durably committed. If the caller stops
    /// waiting, the event may still be committed.
    pub async fn append(&self, event: NewEvent) -> Result<AppendedEvent, AuditError> {
        let mut appended = self.append_batch(vec![event]).await?;
        Ok(appended.remove(0))
    }

    /// Appends events with consecutive seqs, all committed or none.
    pub async fn append_batch(
        &self,
        events: Vec<NewEvent>,
    ) -> Result<Vec<AppendedEvent>, AuditError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let events = events.into_iter().map(prepare).collect();
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job {
                events,
                change: None,
                reply,
            })
            .await
            .map_err(|_| AuditError::WriterStopped)?;
        answer.await.map_err(|_| AuditError::WriterStopped)?
    }

    /// Commits a state change together with the events it returns, through the one writer,
    /// so no change is ever stored without its event nor an event without its change.
    /// `change` returns the value to hand back and the events; `Ok(None)` (e.g. a stale
    /// revision) commits nothing and is answered `None`.
    pub async fn commit<T, C>(&self, change: C) -> Result<Option<T>, AuditError>
    where
        T: Send + 'static,
        C: for<'c> FnOnce(
                &'c mut Tx,
            ) -> BoxFuture<
                'c,
                Result<Option<(T, Vec<NewEvent>)>, crate::store::StoreError>,
            > + Send
            + 'static,
    {
        let (value_tx, value_rx) = oneshot::channel();
        let erased: Change = Box::new(move |conn| {
            Box::pin(async move {
                Ok(change(conn).await?.map(|(value, events)| {
                    let _ = value_tx.send(value);
                    events
                }))
            })
        });
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job {
                events: Vec::new(),
                change: Some(erased),
                reply,
            })
            .await
            .map_err(|_| AuditError::WriterStopped)?;
        answer.await.map_err(|_| AuditError::WriterStopped)??;
        // The change ran to its end before the writer answered: the value was sent if it
        // applied, and its sender dropped unsent if it declined.
        Ok(value_rx.await.ok())
    }

    /// The newest committed event (or anchor, or genesis): record it elsewhere to detect a
    /// later truncation of the chain.
    pub async fn tip(&self) -> Result<Anchor, AuditError> {
        Ok(self.store.audit_tip().await?)
    }

    /// Walks the whole stored chain, from the newest retention anchor, in constant memory
    /// (in ranges at once: [`super::checkpoint::walk`]).
    pub async fn verify(&self) -> Result<VerifyReport, AuditError> {
        Ok(super::checkpoint::walk::walk_all(&self.store).await?)
    }

    /// Events in seq order, optionally of one session (a session timeline).
    pub fn events<'a>(
        &'a self,
        session_id: Option<&'a str>,
    ) -> BoxStream<'a, Result<AuditEvent, AuditError>> {
        self.store
            .audit_events(0, session_id)
            .map(|row| decode(row?))
            .boxed()
    }

    /// Every event after `after_seq`, in seq order: a replay reads the log from the
    /// earliest start of the sessions it replays.
    pub fn events_after(&self, after_seq: u64) -> BoxStream<'_, Result<AuditEvent, AuditError>> {
        self.store
            .audit_events(after_seq, None)
            .map(|row| decode(row?))
            .boxed()
    }

    /// The newest `limit` admin changes of one entity (`role:…`, `scope:…`, `skill:…`,
    /// `tool:…`, `agent_key:…`), newest first.
    pub async fn admin_changes(
        &self,
        target: &str,
        limit: u32,
    ) -> Result<Vec<AuditEvent>, AuditError> {
        self.store
            .audit_admin_changes(target, limit)
            .await?
            .into_iter()
            .map(decode)
            .collect()
    }

    /// Streams the chain (or one session) to `writer`; returns the number of events.
    /// Pass a buffered writer.
    pub async fn export<W: Write + Send>(
        &self,
        filter: &ExportFilter,
        format: ExportFormat,
        writer: W,
    ) -> Result<u64, AuditError> {
        let mut out = ExportWriter::new(format, writer)?;
        let mut rows = self.store.audit_events(0, filter.session_id.as_deref());
        let mut count = 0;
        while let Some(row) = rows.try_next().await? {
            out.write(&row)?;
            count += 1;
        }
        out.finish()?;
        Ok(count)
    }

    /// Walks the chain (all of it, or what is newer than its newest trusted checkpoint)
    /// and checks it against the signed checkpoints, trusting `keys`.
    pub async fn verify_integrity(
        &self,
        keys: &super::TrustedKeys,
        extent: super::Extent,
    ) -> Result<super::IntegrityReport, AuditError> {
        Ok(super::checkpoint::verify_integrity(&self.store, keys, extent).await?)
    }

    /// Deletes events up to and including `seq`, keeping their last hash as the anchor
    /// later verification starts from, and appends the `audit_pruned` event `signer`
    /// signs (see [`super::checkpoint::prune_through`]).
    pub async fn prune_through(
        &self,
        seq: u64,
        signer: &super::CheckpointSigner,
        actor: &str,
    ) -> Result<super::Pruned, super::PruneError> {
        super::checkpoint::prune_through(&self.store, signer, seq, actor, Utc::now()).await
    }
}

fn prepare(event: NewEvent) -> Prepared {
    Prepared {
        kind: event.kind,
        session_id: event.session_id,
        actor: event.actor,
        payload: canonical_json(&event.payload),
    }
}

fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn decode(row: AuditRow) -> Result<AuditEvent, AuditError> {
    let corrupt = |detail: String| AuditError::Corrupt {
        seq: row.seq,
        detail,
    };
    let at = DateTime::parse_from_rfc3339(&row.at)
        .map_err(|err| corrupt(format!("at: {err}")))?
        .with_timezone(&Utc);
    let kind = row.kind.parse().map_err(|err| corrupt(format!("{err}")))?;
    let payload =
        serde_json::from_str(&row.payload).map_err(|err| corrupt(format!("payload: {err}")))?;
    Ok(AuditEvent {
        seq: row.seq,
        at,
        session_id: row.session_id,
        kind,
        actor: row.actor,
        payload,
        prev_hash: row.prev_hash,
        hash: row.hash,
    })
}

async fn run_writer(store: Store, mut queue: mpsc::Receiver<Job>) {
    // A change job met while gathering a group waits for the group to commit first, so
    // events keep the order their callers sent them in.
    let mut held: Option<Job> = None;
    loop {
        let first = match held.take() {
            Some(job) => job,
            None => match queue.recv().await {
                Some(job) => job,
                None => break,
            },
        };
        if first.change.is_some() {
            // Consecutive changes commit together (each in a savepoint of its own); an
            // event-only job met meanwhile waits for them, keeping the callers' order.
            let mut changes = vec![first];
            while changes.len() < MAX_CHANGES {
                match queue.try_recv() {
                    Ok(job) if job.change.is_none() => {
                        held = Some(job);
                        break;
                    }
                    Ok(job) => changes.push(job),
                    Err(_) => break,
                }
            }
            commit_changes(&store, changes).await;
            continue;
        }
        let mut pending = first.events.len();
        let mut group = vec![first];
        while pending < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) if job.change.is_some() => {
                    held = Some(job);
                    break;
                }
                Ok(job) => {
                    pending += job.events.len();
                    group.push(job);
                }
                Err(_) => break,
            }
        }
        commit_group(&store, group).await;
    }
}

/// Commits change jobs in one transaction, each undone alone (in its savepoint) if it
/// fails, declines or has an event refused. Only a failure of the transaction itself (its
/// commit, the connection) fails every caller of the batch.
async fn commit_changes(store: &Store, mut jobs: Vec<Job>) {
    if jobs.len() == 1 {
        if let Some(job) = jobs.pop() {
            commit_change(store, job).await;
        }
        return;
    }
    let now = Utc::now();
    let at = timestamp(now);
    // Every job of a batch has a change (`run_writer` batches only those).
    let changes: Vec<Change> = jobs
        .iter_mut()
        .filter_map(|job| job.change.take())
        .collect();
    let result = store
        .audit_append_after_each(changes, |anchor, events| link_new(anchor, &at, events))
        .await;
    match result {
        Ok(outcomes) => {
            for (job, outcome) in jobs.into_iter().zip(outcomes) {
                let _ = job.reply.send(answer(outcome, &at, now));
            }
        }
        // The changes ran but nothing was committed, and a change cannot run twice (it is
        // consumed): each caller is told, and retries as after any failed commit.
        Err(err) => {
            tracing::error!(error = %err, callers = jobs.len(), "audited changes failed to commit");
            let unavailable = err.is_unavailable();
            let message = format!("the audited change was not committed: {err}");
            for job in jobs {
                let error = if unavailable {
                    StoreError::Unavailable(message.clone())
                } else {
                    StoreError::Conflict(message.clone())
                };
                let _ = job.reply.send(Err(AuditError::Store(error)));
            }
        }
    }
}

/// Commits one change job: its state change and the events it returns, in one transaction.
async fn commit_change(store: &Store, mut job: Job) {
    let Some(change) = job.change.take() else {
        return;
    };
    let now = Utc::now();
    let at = timestamp(now);
    let result = store
        .audit_append_after(change, |anchor, events| link_new(anchor, &at, events))
        .await;
    let _ = job.reply.send(answer(result, &at, now));
}

/// Chains the events a change returned onto `anchor`.
fn link_new(anchor: &Anchor, at: &str, events: Vec<NewEvent>) -> Vec<AuditRow> {
    let prepared: Vec<Prepared> = events.into_iter().map(prepare).collect();
    let refs: Vec<&Prepared> = prepared.iter().collect();
    link_all(anchor, at, &refs)
}

/// What the caller of one change is told: its events as appended, nothing when it
/// declined, or its error.
fn answer(
    outcome: Result<Option<Vec<AuditRow>>, StoreError>,
    at: &str,
    now: DateTime<Utc>,
) -> Result<Vec<AppendedEvent>, AuditError> {
    match outcome {
        Ok(Some(rows)) => Ok(appended(rows, at, now)),
        Ok(None) => Ok(Vec::new()),
        Err(err) => {
            tracing::error!(error = %err, "audited change failed");
            Err(err.into())
        }
    }
}

async fn commit_group(store: &Store, group: Vec<Job>) {
    let events: Vec<&Prepared> = group.iter().flat_map(|job| job.events.iter()).collect();
    match write(store, &events).await {
        Ok(appended) => {
            let mut appended = appended.into_iter();
            for job in group {
                let mine = appended.by_ref().take(job.events.len()).collect();
                let _ = job.reply.send(Ok(mine));
            }
        }
        Err(err) if group.len() == 1 => {
            tracing::error!(error = %err, "audit append failed");
            let _ = group.into_iter().next().map(|job| job.reply.send(Err(err)));
        }
        // Retrying caller by caller would wait out the pool's acquire timeout once per
        // caller while the database is away, and every append queued behind them with it.
        Err(err) if err.is_unavailable() => {
            tracing::error!(error = %err, callers = group.len(), "audit append failed: the database is unavailable");
            let message = err.to_string();
            for job in group {
                let _ = job
                    .reply
                    .send(Err(AuditError::Store(StoreError::Unavailable(
                        message.clone(),
                    ))));
            }
        }
        // Commit each caller's events on their own, so one caller's failure is theirs
        // alone and every caller gets an answer about its own events.
        Err(err) => {
            tracing::warn!(error = %err, callers = group.len(), "audit group commit failed, retrying per caller");
            for job in group {
                let events: Vec<&Prepared> = job.events.iter().collect();
                let result = write(store, &events).await;
                if let Err(err) = &result {
                    tracing::error!(error = %err, "audit append failed");
                }
                let _ = job.reply.send(result);
            }
        }
    }
}

/// Chains `events` onto `tip` in order.
fn link_all(tip: &Anchor, at: &str, events: &[&Prepared]) -> Vec<AuditRow> {
    let mut tip = tip.clone();
    events
        .iter()
        .map(|event| {
            let row = chain::link(
                &tip,
                at.to_owned(),
                event.session_id.clone(),
                event.kind.as_str().to_owned(),
                event.actor.clone(),
                event.payload.clone(),
            );
            tip = Anchor {
                seq: row.seq,
                hash: row.hash.clone(),
            };
            row
        })
        .collect()
}

/// Chains `events` onto the tip as it is inside the write transaction, so appends by
/// another process (the CLI, a retention prune) are chained onto, never forked.
async fn write(store: &Store, events: &[&Prepared]) -> Result<Vec<AppendedEvent>, AuditError> {
    let now = Utc::now();
    let at = timestamp(now);
    let rows = store
        .audit_append_with(|tip| link_all(tip, &at, events))
        .await?;
    Ok(appended(rows, &at, now))
}

fn appended(rows: Vec<AuditRow>, at: &str, now: DateTime<Utc>) -> Vec<AppendedEvent> {
    // Stored `at` has microsecond precision; answer with exactly what was stored.
    let at = DateTime::parse_from_rfc3339(at)
        .map(|at| at.with_timezone(&Utc))
        .unwrap_or(now);
    rows.into_iter()
        .map(|row| AppendedEvent {
            seq: row.seq,
            hash: row.hash,
            at,
        })
        .collect()
}
