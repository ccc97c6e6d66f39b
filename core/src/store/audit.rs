//! SQL for the audit chain: appends, the chain tip, streaming reads, retention anchors,
//! signed checkpoints.

use futures::future::BoxFuture;
use futures::stream::{BoxStream, StreamExt};
use sqlx::any::AnyRow;
use sqlx::{Any, FromRow, Row, Transaction};

pub use super::audit_row::AuditRow;
pub(crate) use super::audit_row::{COLUMNS, seq_from_db, seq_to_db};
use super::lane::{Lane, LaneRow, MultiRow, OnDirect, Param, Statements, ready};
use super::{Store, StoreError, Tx};
use crate::names::EventKind;

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
pub type AuditedChange<T> =
    Box<dyn for<'c> FnOnce(&'c mut Tx) -> BoxFuture<'c, Result<Option<T>, StoreError>> + Send>;

/// What became of one change of [`Store::audit_append_after_each`]: its rows, `None` when
/// it declined, or its error.
pub type ChangeOutcome = Result<Option<Vec<AuditRow>>, StoreError>;

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
        match self.lane() {
            Lane::Direct(direct) => direct.with(|conn| {
                let asked = std::time::Instant::now();
                let tx =
                    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                let _held = self.write_lock_times().acquired(asked.elapsed());
                let rows = ready(append_on(&mut OnDirect(&tx), build))?;
                tx.commit()?;
                Ok(rows)
            }),
            // PostgreSQL: the same transaction through the pool, under the write lock.
            Lane::Pool(_) => {
                let rows = self
                    .audit_append_after(|_| Box::pin(async { Ok(Some(())) }), |tip, ()| build(tip))
                    .await?;
                Ok(rows.unwrap_or_default())
            }
        }
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
        C: for<'c> FnOnce(&'c mut Tx) -> BoxFuture<'c, Result<Option<T>, StoreError>>,
        F: FnOnce(&Anchor, T) -> Vec<AuditRow>,
    {
        let (mut tx, _held) = self.begin_write().await?;
        let Some(outcome) = change(Tx::wrap(&mut tx)).await? else {
            tx.rollback().await?;
            return Ok(None);
        };
        let rows = append_on(&mut *tx, |tip| build(tip, outcome)).await?;
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
        let (mut tx, _held) = self.begin_write().await?;
        let mut tip = tip_on(&mut *tx).await?;
        let mut outcomes = Vec::with_capacity(changes.len());
        for change in changes {
            let mut savepoint = (&mut tx).begin().await?;
            // The change and its rows in the savepoint: a row the database refuses undoes
            // its own change only.
            let outcome = match change(Tx::wrap(&mut savepoint)).await {
                Ok(Some(outcome)) => {
                    let rows = build(&tip, outcome);
                    insert_on(&mut *savepoint, &rows).await.map(|()| Some(rows))
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
        let tip = tip_on(&mut *tx).await?;
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

    /// Events with `after < seq <= through` in seq order, streamed: one range of a walk
    /// that reads several ranges at once.
    pub fn audit_events_between(
        &self,
        after: u64,
        through: u64,
    ) -> BoxStream<'_, Result<AuditRow, StoreError>> {
        sqlx::query_as::<_, AuditRow>(&SELECT_BETWEEN)
            .bind(seq_to_db(after))
            .bind(seq_to_db(through))
            .fetch(self.pool())
            .map(|row| row.map_err(StoreError::from))
            .boxed()
    }

    /// Visits the events with `after < seq <= through` (to the newest without `through`)
    /// in seq order on the calling thread, through SQLite's direct lane: a long read
    /// without sqlx's hand-off of each row from its worker thread, which costs more than
    /// decoding the row. `Ok(false)`, having visited nothing, where there is no direct lane
    /// (PostgreSQL: stream [`Self::audit_events_between`] instead). Blocks: call it from a
    /// blocking thread.
    pub(crate) fn audit_visit_direct(
        &self,
        after: u64,
        through: Option<u64>,
        mut visit: impl FnMut(&AuditRow),
    ) -> Result<bool, StoreError> {
        let Some(direct) = self.direct() else {
            return Ok(false);
        };
        direct.with(|conn| {
            let mut statement = super::direct::prepare(conn, &SELECT_BETWEEN)?;
            let mut rows =
                statement.query((seq_to_db(after), through.map_or(i64::MAX, seq_to_db)))?;
            while let Some(row) = rows.next()? {
                visit(&AuditRow {
                    seq: seq_from_db(row.get(0)?),
                    at: row.get(1)?,
                    session_id: row.get(2)?,
                    kind: row.get(3)?,
                    actor: row.get(4)?,
                    payload: row.get(5)?,
                    prev_hash: row.get(6)?,
                    hash: row.get(7)?,
                });
            }
            Ok(())
        })?;
        Ok(true)
    }

    /// The stored event with the highest seq at or below `seq`, as a chain point.
    pub async fn audit_point_at_or_before(&self, seq: u64) -> Result<Option<Anchor>, StoreError> {
        self.point(
            "SELECT seq, hash FROM audit_events WHERE seq <= $1 ORDER BY seq DESC LIMIT 1",
            seq,
        )
        .await
    }

    /// The chain point (seq, hash) one `query` binding `seq` finds, if any.
    async fn point(&self, query: &'static str, seq: u64) -> Result<Option<Anchor>, StoreError> {
        let row: Option<(i64, String)> = sqlx::query_as(query)
            .bind(seq_to_db(seq))
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(|(seq, hash)| Anchor {
            seq: seq_from_db(seq),
            hash,
        }))
    }

    /// The newest `limit` admin changes whose payload `target` is `target` (e.g.
    /// `role:billing-admin`), newest first: an entity's change log.
    pub async fn audit_admin_changes(
        &self,
        target: &str,
        limit: u32,
    ) -> Result<Vec<AuditRow>, StoreError> {
        Ok(sqlx::query_as::<_, AuditRow>(&SELECT_ADMIN_CHANGES)
            .bind(EventKind::AdminChange.as_str())
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
        let (mut tx, _held) = self.begin_write().await?;
        let tip = tip_on(&mut *tx).await?;
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

    /// Checkpoints with `seq <= through`, newest first, each with the hash of the stored
    /// event at its seq; streamed, so a reader that stops at the first one it trusts
    /// reads no further.
    pub fn audit_checkpoints_newest_first(
        &self,
        through: u64,
    ) -> BoxStream<'_, Result<CheckpointAgainstEvent, StoreError>> {
        sqlx::query_as::<_, CheckpointAgainstEvent>(&CHECKPOINTS_NEWEST_FIRST)
            .bind(seq_to_db(through))
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
            "SELECT {COLUMNS} FROM audit_events WHERE kind = $1 AND seq > $2
             AND CAST(json_extract(payload, '$.through_seq') AS BIGINT) = $3 ORDER BY seq"
        ))
        .bind(EventKind::AuditPruned.as_str())
        .bind(seq_to_db(after_seq))
        .bind(seq_to_db(through_seq))
        .fetch_all(self.pool())
        .await?)
    }

    /// The newest retention anchor below `seq`, if any.
    pub async fn audit_anchor_before(&self, seq: u64) -> Result<Option<Anchor>, StoreError> {
        self.point(
            "SELECT seq, hash FROM audit_anchors WHERE seq < $1 ORDER BY seq DESC LIMIT 1",
            seq,
        )
        .await
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
        let (mut tx, _held) = self.begin_write().await?;
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
        let tip = tip_on(&mut *tx).await?;
        let (event, checkpoint) = build(&range, &tip);
        insert_on(&mut *tx, std::slice::from_ref(&event)).await?;
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

static CHECKPOINTS_NEWEST_FIRST: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {CHECKPOINT_COLUMNS}, e.hash AS event_hash
         FROM audit_checkpoints c LEFT JOIN audit_events e ON e.seq = c.seq
         WHERE c.seq <= $1 ORDER BY c.seq DESC"
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

/// Events, exactly as hashed.
static INSERT_EVENTS: std::sync::LazyLock<MultiRow> = std::sync::LazyLock::new(|| {
    MultiRow::new(
        "INSERT INTO audit_events (seq, at, session_id, kind, actor, payload, prev_hash, hash)
         VALUES ",
        "($1, $2, $3, $4, $5, $6, $7, $8)",
        "",
    )
});

/// An event's columns for [`INSERT_EVENTS`], in its marks' order.
fn event_params(row: &AuditRow) -> [Param<'_>; 8] {
    [
        Param::Int(seq_to_db(row.seq)),
        Param::from(row.at.as_str()),
        Param::from(row.session_id.as_deref()),
        Param::from(row.kind.as_str()),
        Param::from(row.actor.as_deref()),
        Param::from(row.payload.as_str()),
        Param::from(row.prev_hash.as_str()),
        Param::from(row.hash.as_str()),
    ]
}

/// Stores `rows` in order and folds them into their sessions' summaries, inside the
/// caller's write transaction (so a summary never disagrees with its events), on either
/// lane: the one way events are written.
async fn insert_on(conn: &mut impl Statements, rows: &[AuditRow]) -> Result<(), StoreError> {
    for chunk in rows.chunks(conn.rows_per_statement()) {
        let sql = INSERT_EVENTS.text(chunk.len());
        match chunk {
            // One row binds its values where they are (the direct lane's every append).
            [row] => conn.execute(sql, &event_params(row)).await?,
            _ => {
                let params: Vec<Param<'_>> = chunk.iter().flat_map(event_params).collect();
                conn.execute(sql, &params).await?
            }
        };
    }
    super::audit_query::summarize_on(conn, rows).await
}

/// One append inside the caller's write transaction: the chain tip, the rows `build`
/// makes from it, stored. Both lanes run this.
async fn append_on(
    conn: &mut impl Statements,
    build: impl FnOnce(&Anchor) -> Vec<AuditRow>,
) -> Result<Vec<AuditRow>, StoreError> {
    let tip = tip_on(conn).await?;
    let rows = build(&tip);
    insert_on(conn, &rows).await?;
    Ok(rows)
}

static SELECT_AFTER: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT {COLUMNS} FROM audit_events WHERE seq > $1 ORDER BY seq")
});

static SELECT_BETWEEN: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT {COLUMNS} FROM audit_events WHERE seq > $1 AND seq <= $2 ORDER BY seq")
});

static SELECT_ADMIN_CHANGES: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {COLUMNS} FROM audit_events WHERE kind = $1 \
         AND json_extract(payload, '$.target') = $2 ORDER BY seq DESC LIMIT $3"
    )
});

static SELECT_SESSION_AFTER: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT {COLUMNS} FROM audit_events WHERE session_id = $1 AND seq > $2 ORDER BY seq")
});

const NEWEST_EVENT: &str = "SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1";
const NEWEST_ANCHOR: &str = "SELECT seq, hash FROM audit_anchors ORDER BY seq DESC LIMIT 1";

/// The newest event, else the newest retention anchor, else the genesis.
async fn tip_on(conn: &mut impl Statements) -> Result<Anchor, StoreError> {
    let point = |row: LaneRow<'_>| -> Result<Anchor, StoreError> {
        Ok(Anchor {
            seq: seq_from_db(row.get("seq")?),
            hash: row.get("hash")?,
        })
    };
    if let Some(tip) = conn.fetch_optional(NEWEST_EVENT, &[], point).await? {
        return Ok(tip);
    }
    Ok(conn
        .fetch_optional(NEWEST_ANCHOR, &[], point)
        .await?
        .unwrap_or_else(Anchor::genesis))
}
