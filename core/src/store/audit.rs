//! SQL for the audit chain: appends, the chain tip, streaming reads, retention anchors,
//! signed checkpoints.

use futures::future::BoxFuture;
use futures::stream::{BoxStream, StreamExt};
use rusqlite::OptionalExtension as _;
use sqlx::any::AnyRow;
use sqlx::{Any, AnyConnection, FromRow, Row, Transaction};

use super::{Store, StoreError};

/// `prev_hash` of the first event of a chain: 32 zero bytes, in hex.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The events one prune deleted: `from_seq..=through_seq`, and the hash of the last, which
/// became the retention anchor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunedRange {
    pub from_seq: u64,
    pub through_seq: u64,
    pub anchor_hash: String,
    pub events: u64,
}

/// One stored audit event, every field exactly as stored and hashed. `payload` is
/// canonical JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub seq: u64,
    pub at: String,
    pub session_id: Option<String>,
    pub kind: String,
    pub actor: Option<String>,
    pub payload: String,
    pub prev_hash: String,
    pub hash: String,
}

impl<'r> FromRow<'r, AnyRow> for AuditRow {
    fn from_row(row: &'r AnyRow) -> Result<Self, sqlx::Error> {
        Ok(Self {
            seq: seq_from_db(row.try_get("seq")?),
            at: row.try_get("at")?,
            session_id: row.try_get("session_id")?,
            kind: row.try_get("kind")?,
            actor: row.try_get("actor")?,
            payload: row.try_get("payload")?,
            prev_hash: row.try_get("prev_hash")?,
            hash: row.try_get("hash")?,
        })
    }
}

/// A point of the chain: an event's seq and hash. The genesis is seq 0 with 64 zeros;
/// a retention anchor is the last event of a pruned segment.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Anchor {
    pub seq: u64,
    pub hash: String,
}

impl Anchor {
    pub fn genesis() -> Self {
        Self {
            seq: 0,
            hash: GENESIS_HASH.to_owned(),
        }
    }
}

/// A signed statement that the chain's tip was `seq` with `hash` at `at` (see
/// [`crate::audit::checkpoint`]). Stored as is; only a trusted public key makes it evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub seq: u64,
    pub hash: String,
    pub at: String,
    /// Hex Ed25519 public key of the signer, for reading; verifiers use their own key.
    pub public_key: String,
    /// Hex Ed25519 signature of [`crate::audit::checkpoint::checkpoint_message`].
    pub signature: String,
}

impl<'r> FromRow<'r, AnyRow> for Checkpoint {
    fn from_row(row: &'r AnyRow) -> Result<Self, sqlx::Error> {
        Ok(Self {
            seq: seq_from_db(row.try_get("seq")?),
            hash: row.try_get("hash")?,
            at: row.try_get("at")?,
            public_key: row.try_get("public_key")?,
            signature: row.try_get("signature")?,
        })
    }
}

/// A stored checkpoint and the hash of the stored event at its seq, if there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointAgainstEvent {
    pub checkpoint: Checkpoint,
    pub event_hash: Option<String>,
}

impl<'r> FromRow<'r, AnyRow> for CheckpointAgainstEvent {
    fn from_row(row: &'r AnyRow) -> Result<Self, sqlx::Error> {
        Ok(Self {
            checkpoint: Checkpoint::from_row(row)?,
            event_hash: row.try_get("event_hash")?,
        })
    }
}

/// What [`Store::audit_checkpoint_tip`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TipCheckpoint {
    /// The tip moved past the newest checkpoint; this one was stored.
    Signed(Checkpoint),
    /// The newest checkpoint already covers the tip.
    Unchanged,
    /// Nothing was ever appended.
    Empty,
    /// The tip is at or below the newest checkpoint but is not what it signed: events were
    /// deleted or rewritten. Nothing was signed, so the tampered tip is never vouched for.
    Behind { tip: Anchor, newest: Checkpoint },
}

/// What [`Store::audit_prune_signed`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pruned {
    pub anchor: Anchor,
    pub range: PrunedRange,
    /// The `audit_pruned` event, the new tip.
    pub event: AuditRow,
    /// The checkpoint of that event.
    pub checkpoint: Checkpoint,
}

/// A state change run inside an audited write transaction: `Ok(None)` declines.
pub type AuditedChange<T> = Box<
    dyn for<'c> FnOnce(&'c mut AnyConnection) -> BoxFuture<'c, Result<Option<T>, StoreError>>
        + Send,
>;

/// What became of one change of [`Store::audit_append_after_each`]: its rows, `None` when
/// it declined, or its error.
pub type ChangeOutcome = Result<Option<Vec<AuditRow>>, StoreError>;

pub(crate) const COLUMNS: &str = "seq, at, session_id, kind, actor, payload, prev_hash, hash";

// SQLite integers are i64; seqs start at 1 and never approach i64::MAX.
pub(crate) fn seq_from_db(seq: i64) -> u64 {
    u64::try_from(seq).unwrap_or(0)
}

pub(crate) fn seq_to_db(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

impl Store {
    /// Appends rows built by `build` from the chain tip, in one `BEGIN IMMEDIATE`
    /// transaction, so that writers in several processes sharing the file chain in turn.
    /// Returns once the rows are committed (and, with `synchronous = FULL`, on disk).
    ///
    /// Runs on a direct connection, on the calling thread, and may wait for the write
    /// lock and `fsync`: call it from the audit writer's thread (or a one-shot tool), never
    /// from a Tokio worker of a server.
    pub async fn audit_append_with<F>(&self, build: F) -> Result<Vec<AuditRow>, StoreError>
    where
        F: FnOnce(&Anchor) -> Vec<AuditRow>,
    {
        let Some(direct) = self.direct() else {
            // PostgreSQL: the same transaction through the pool, under the write lock.
            let rows = self
                .audit_append_after(|_| Box::pin(async { Ok(Some(())) }), |tip, ()| build(tip))
                .await?;
            return Ok(rows.unwrap_or_default());
        };
        direct.with(|conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let tip = {
                let newest = |sql: &str| {
                    super::direct::prepare(&tx, sql)?
                        .query_row([], |row| {
                            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
                        })
                        .optional()
                };
                match newest(NEWEST_EVENT)? {
                    Some(row) => Some(row),
                    None => newest(NEWEST_ANCHOR)?,
                }
            };
            let tip = anchor_of(tip);
            let rows = build(&tip);
            if !rows.is_empty() {
                let mut insert = super::direct::prepare(&tx, INSERT_EVENT)?;
                for row in &rows {
                    insert.execute(rusqlite::params![
                        seq_to_db(row.seq),
                        row.at,
                        row.session_id,
                        row.kind,
                        row.actor,
                        row.payload,
                        row.prev_hash,
                        row.hash,
                    ])?;
                }
                drop(insert);
                // Same transaction: the compliance summary of a session never disagrees
                // with its events.
                super::audit_query::summarize_direct(&tx, &rows)?;
            }
            tx.commit()?;
            Ok(rows)
        })
    }

    /// Runs `change` and appends the rows `build` makes of what it returned, in one
    /// `BEGIN IMMEDIATE` transaction: a state change and its audit events commit together or
    /// not at all. `change` answering `None` (say, a stale revision) commits nothing.
    pub async fn audit_append_after<T, C, F>(
        &self,
        change: C,
        build: F,
    ) -> Result<Option<Vec<AuditRow>>, StoreError>
    where
        C: for<'c> FnOnce(&'c mut AnyConnection) -> BoxFuture<'c, Result<Option<T>, StoreError>>,
        F: FnOnce(&Anchor, T) -> Vec<AuditRow>,
    {
        let mut tx = self.begin_write().await?;
        let Some(outcome) = change(&mut tx).await? else {
            tx.rollback().await?;
            return Ok(None);
        };
        let tip = audit_tip_in(&mut tx).await?;
        let rows = build(&tip, outcome);
        if !rows.is_empty() {
            insert_events_in(&mut tx, &rows).await?;
            super::audit_query::summarize_in(&mut tx, &rows).await?;
        }
        tx.commit().await?;
        Ok(Some(rows))
    }

    /// [`Self::audit_append_after`] for several changes in one write transaction: each runs
    /// in order inside a savepoint of its own, so a change that fails or declines is undone
    /// alone and the others commit, with their rows chained in the same order. One lock
    /// and one commit for the lot: what lets concurrent governed calls share a commit.
    ///
    /// The outer error means nothing was committed (the rows could not be stored, or the
    /// commit failed); then each change may be retried alone. Otherwise each change has
    /// its own outcome: its rows, `None` when it declined, or its error.
    pub async fn audit_append_after_each<T, F>(
        &self,
        changes: Vec<AuditedChange<T>>,
        mut build: F,
    ) -> Result<Vec<ChangeOutcome>, StoreError>
    where
        F: FnMut(&Anchor, T) -> Vec<AuditRow>,
    {
        use sqlx::Acquire as _;
        let mut tx = self.begin_write().await?;
        let mut tip = audit_tip_in(&mut tx).await?;
        let mut outcomes = Vec::with_capacity(changes.len());
        for change in changes {
            let mut savepoint = (&mut tx).begin().await?;
            // The change and its rows in the savepoint: a row the database refuses undoes
            // its own change only.
            let outcome = match change(&mut savepoint).await {
                Ok(Some(outcome)) => {
                    let rows = build(&tip, outcome);
                    match insert_events_in(&mut savepoint, &rows).await {
                        Ok(()) => super::audit_query::summarize_in(&mut savepoint, &rows)
                            .await
                            .map(|()| Some(rows)),
                        Err(error) => Err(error),
                    }
                }
                other => other.map(|_| None),
            };
            match outcome {
                Ok(Some(rows)) => {
                    savepoint.commit().await?;
                    if let Some(last) = rows.last() {
                        tip = Anchor {
                            seq: last.seq,
                            hash: last.hash.clone(),
                        };
                    }
                    outcomes.push(Ok(Some(rows)));
                }
                declined_or_failed => {
                    savepoint.rollback().await?;
                    outcomes.push(declined_or_failed);
                }
            }
        }
        tx.commit().await?;
        Ok(outcomes)
    }

    /// The newest event, else the newest retention anchor, else the genesis.
    pub async fn audit_tip(&self) -> Result<Anchor, StoreError> {
        let mut tx = self.pool().begin().await?;
        let tip = audit_tip_in(&mut tx).await?;
        tx.commit().await?;
        Ok(tip)
    }

    /// Events with `seq > after_seq` in seq order, optionally of one session, streamed
    /// from the database.
    pub fn audit_events<'a>(
        &'a self,
        after_seq: u64,
        session_id: Option<&'a str>,
    ) -> BoxStream<'a, Result<AuditRow, StoreError>> {
        let rows = match session_id {
            None => sqlx::query_as::<_, AuditRow>(&SELECT_AFTER)
                .bind(seq_to_db(after_seq))
                .fetch(self.pool()),
            Some(session_id) => sqlx::query_as::<_, AuditRow>(&SELECT_SESSION_AFTER)
                .bind(session_id)
                .bind(seq_to_db(after_seq))
                .fetch(self.pool()),
        };
        rows.map(|row| row.map_err(StoreError::from)).boxed()
    }

    /// The newest `limit` admin changes whose payload `target` is `target` (e.g.
    /// `role:billing-admin`), newest first: an entity's change log.
    pub async fn audit_admin_changes(
        &self,
        target: &str,
        limit: u32,
    ) -> Result<Vec<AuditRow>, StoreError> {
        Ok(sqlx::query_as::<_, AuditRow>(&SELECT_ADMIN_CHANGES)
            .bind(target)
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?)
    }

    pub async fn audit_count(&self, session_id: Option<&str>) -> Result<u64, StoreError> {
        let count: i64 = match session_id {
            None => {
                sqlx::query_scalar("SELECT COUNT(*) FROM audit_events")
                    .fetch_one(self.pool())
                    .await?
            }
            Some(session_id) => {
                sqlx::query_scalar("SELECT COUNT(*) FROM audit_events WHERE session_id = $1")
                    .bind(session_id)
                    .fetch_one(self.pool())
                    .await?
            }
        };
        Ok(seq_from_db(count))
    }

    /// The newest retention anchor, where verification of the remaining events starts.
    pub async fn audit_latest_anchor(&self) -> Result<Option<Anchor>, StoreError> {
        let row: Option<(i64, String)> =
            sqlx::query_as("SELECT seq, hash FROM audit_anchors ORDER BY seq DESC LIMIT 1")
                .fetch_optional(self.pool())
                .await?;
        Ok(row.map(|(seq, hash)| Anchor {
            seq: seq_from_db(seq),
            hash,
        }))
    }
}

const CHECKPOINT_COLUMNS: &str = "c.seq, c.hash, c.at, c.public_key, c.signature";

impl Store {
    /// Signs the chain tip with `sign` and stores the checkpoint, when the tip moved past
    /// the newest checkpoint; an idle chain gets no new rows. One write transaction, so
    /// replicas sharing the database do not sign the same tip twice.
    pub async fn audit_checkpoint_tip(
        &self,
        sign: impl FnOnce(&Anchor) -> Checkpoint,
    ) -> Result<TipCheckpoint, StoreError> {
        let mut tx = self.begin_write().await?;
        let tip = audit_tip_in(&mut tx).await?;
        let newest = latest_checkpoint_in(&mut tx).await?;
        let outcome = match newest {
            _ if tip.seq == 0 => TipCheckpoint::Empty,
            Some(newest) if newest.seq == tip.seq && newest.hash == tip.hash => {
                TipCheckpoint::Unchanged
            }
            Some(newest) if newest.seq >= tip.seq => TipCheckpoint::Behind { tip, newest },
            _ => {
                let checkpoint = sign(&tip);
                insert_checkpoint_in(&mut tx, &checkpoint).await?;
                TipCheckpoint::Signed(checkpoint)
            }
        };
        tx.commit().await?;
        Ok(outcome)
    }

    /// The checkpoint with the highest seq, whatever its signature.
    pub async fn audit_latest_checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(sqlx::query_as(&format!(
            "SELECT {CHECKPOINT_COLUMNS} FROM audit_checkpoints c ORDER BY c.seq DESC LIMIT 1"
        ))
        .fetch_optional(&mut *conn)
        .await?)
    }

    /// Checkpoints with `after < seq <= through` (all with `None`), in seq order, each
    /// with the hash of the stored event at its seq; streamed.
    pub fn audit_checkpoints_against_events(
        &self,
        after: u64,
        through: Option<u64>,
    ) -> BoxStream<'_, Result<CheckpointAgainstEvent, StoreError>> {
        sqlx::query_as::<_, CheckpointAgainstEvent>(&CHECKPOINTS_AGAINST_EVENTS)
            .bind(seq_to_db(after))
            .bind(through.map_or(i64::MAX, seq_to_db))
            .fetch(self.pool())
            .map(|row| row.map_err(StoreError::from))
            .boxed()
    }

    pub async fn audit_checkpoint_count(&self) -> Result<u64, StoreError> {
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_checkpoints")
            .fetch_one(self.pool())
            .await?;
        Ok(seq_from_db(count))
    }

    /// The `audit_pruned` events after `after_seq` whose payload names `through_seq`:
    /// the prune that left the anchor at `through_seq`, if it was one.
    pub async fn audit_prune_events(
        &self,
        after_seq: u64,
        through_seq: u64,
    ) -> Result<Vec<AuditRow>, StoreError> {
        Ok(sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM audit_events WHERE kind = 'audit_pruned' AND seq > $1
             AND CAST(json_extract(payload, '$.through_seq') AS BIGINT) = $2 ORDER BY seq"
        ))
        .bind(seq_to_db(after_seq))
        .bind(seq_to_db(through_seq))
        .fetch_all(self.pool())
        .await?)
    }

    /// The newest retention anchor below `seq`, if any.
    pub async fn audit_anchor_before(&self, seq: u64) -> Result<Option<Anchor>, StoreError> {
        let row: Option<(i64, String)> = sqlx::query_as(
            "SELECT seq, hash FROM audit_anchors WHERE seq < $1 ORDER BY seq DESC LIMIT 1",
        )
        .bind(seq_to_db(seq))
        .fetch_optional(self.pool())
        .await?;
        Ok(row.map(|(seq, hash)| Anchor {
            seq: seq_from_db(seq),
            hash,
        }))
    }

    /// Deletes events `start.seq + 1 ..= through` and records event `through` (whose hash
    /// the caller verified to be `through_hash`) as the new anchor; appends the
    /// `audit_pruned` event and its checkpoint that `build` makes from the range and the
    /// chain tip; drops checkpoints of deleted events below the anchor. One transaction:
    /// nothing is deleted without its signed event. Fails with a conflict, changing
    /// nothing, when the anchor or the event at `through` are no longer what the caller
    /// verified.
    pub async fn audit_prune_signed(
        &self,
        start: &Anchor,
        through: u64,
        through_hash: &str,
        now: &str,
        build: impl FnOnce(&PrunedRange, &Anchor) -> (AuditRow, Checkpoint),
    ) -> Result<Pruned, StoreError> {
        let mut tx = self.begin_write().await?;
        let anchor: Option<(i64, String)> =
            sqlx::query_as("SELECT seq, hash FROM audit_anchors ORDER BY seq DESC LIMIT 1")
                .fetch_optional(&mut *tx)
                .await?;
        let current = anchor.map_or_else(Anchor::genesis, |(seq, hash)| Anchor {
            seq: seq_from_db(seq),
            hash,
        });
        let hash: Option<String> =
            sqlx::query_scalar("SELECT hash FROM audit_events WHERE seq = $1")
                .bind(seq_to_db(through))
                .fetch_optional(&mut *tx)
                .await?;
        if current != *start || hash.as_deref() != Some(through_hash) {
            return Err(StoreError::Conflict(
                "the audit chain changed while it was being pruned; nothing was pruned".into(),
            ));
        }
        let deleted = sqlx::query("DELETE FROM audit_events WHERE seq <= $1")
            .bind(seq_to_db(through))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("INSERT INTO audit_anchors (seq, hash, pruned_at) VALUES ($1, $2, $3)")
            .bind(seq_to_db(through))
            .bind(through_hash)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM audit_session_summaries WHERE last_seq <= $1")
            .bind(seq_to_db(through))
            .execute(&mut *tx)
            .await?;
        // Below the anchor no event is left to check them against.
        sqlx::query("DELETE FROM audit_checkpoints WHERE seq < $1")
            .bind(seq_to_db(through))
            .execute(&mut *tx)
            .await?;
        let range = PrunedRange {
            from_seq: start.seq + 1,
            through_seq: through,
            anchor_hash: through_hash.to_owned(),
            events: deleted,
        };
        let tip = audit_tip_in(&mut tx).await?;
        let (event, checkpoint) = build(&range, &tip);
        insert_events_in(&mut tx, std::slice::from_ref(&event)).await?;
        super::audit_query::summarize_in(&mut tx, std::slice::from_ref(&event)).await?;
        insert_checkpoint_in(&mut tx, &checkpoint).await?;
        tx.commit().await?;
        Ok(Pruned {
            anchor: Anchor {
                seq: through,
                hash: through_hash.to_owned(),
            },
            range,
            event,
            checkpoint,
        })
    }
}

static CHECKPOINTS_AGAINST_EVENTS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {CHECKPOINT_COLUMNS}, e.hash AS event_hash
         FROM audit_checkpoints c LEFT JOIN audit_events e ON e.seq = c.seq
         WHERE c.seq > $1 AND c.seq <= $2 ORDER BY c.seq"
    )
});

async fn latest_checkpoint_in(
    tx: &mut Transaction<'static, Any>,
) -> Result<Option<Checkpoint>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "SELECT {CHECKPOINT_COLUMNS} FROM audit_checkpoints c ORDER BY c.seq DESC LIMIT 1"
    ))
    .fetch_optional(&mut **tx)
    .await?)
}

async fn insert_checkpoint_in(
    tx: &mut Transaction<'static, Any>,
    checkpoint: &Checkpoint,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO audit_checkpoints (seq, hash, at, public_key, signature)
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(seq_to_db(checkpoint.seq))
    .bind(&checkpoint.hash)
    .bind(&checkpoint.at)
    .bind(&checkpoint.public_key)
    .bind(&checkpoint.signature)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// One event, exactly as hashed.
const INSERT_EVENT: &str =
    "INSERT INTO audit_events (seq, at, session_id, kind, actor, payload, prev_hash, hash)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

/// Inserts `rows` in order on an sqlx transaction (changes and prunes, one or a few events).
async fn insert_events_in(conn: &mut AnyConnection, rows: &[AuditRow]) -> Result<(), StoreError> {
    for row in rows {
        sqlx::query(INSERT_EVENT)
            .bind(seq_to_db(row.seq))
            .bind(&row.at)
            .bind(&row.session_id)
            .bind(&row.kind)
            .bind(&row.actor)
            .bind(&row.payload)
            .bind(&row.prev_hash)
            .bind(&row.hash)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

static SELECT_AFTER: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT {COLUMNS} FROM audit_events WHERE seq > $1 ORDER BY seq")
});

static SELECT_ADMIN_CHANGES: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {COLUMNS} FROM audit_events WHERE kind = 'admin_change' \
         AND json_extract(payload, '$.target') = $1 ORDER BY seq DESC LIMIT $2"
    )
});

static SELECT_SESSION_AFTER: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT {COLUMNS} FROM audit_events WHERE session_id = $1 AND seq > $2 ORDER BY seq")
});

const NEWEST_EVENT: &str = "SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1";
const NEWEST_ANCHOR: &str = "SELECT seq, hash FROM audit_anchors ORDER BY seq DESC LIMIT 1";

/// The tip from the newest event, else the newest anchor (`None`: the genesis).
fn anchor_of(newest: Option<(i64, String)>) -> Anchor {
    newest.map_or_else(Anchor::genesis, |(seq, hash)| Anchor {
        seq: seq_from_db(seq),
        hash,
    })
}

async fn audit_tip_in(tx: &mut Transaction<'static, Any>) -> Result<Anchor, StoreError> {
    let newest: Option<(i64, String)> = sqlx::query_as(NEWEST_EVENT)
        .fetch_optional(&mut **tx)
        .await?;
    let newest = match newest {
        Some(row) => Some(row),
        None => {
            sqlx::query_as(NEWEST_ANCHOR)
                .fetch_optional(&mut **tx)
                .await?
        }
    };
    Ok(anchor_of(newest))
}
