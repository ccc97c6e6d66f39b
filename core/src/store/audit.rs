//! SQL for the audit chain: appends, the chain tip, streaming reads, retention anchors.

use futures::stream::{BoxStream, StreamExt};
use sqlx::sqlite::SqliteRow;
use sqlx::{FromRow, Row, Sqlite, Transaction};

use super::{Store, StoreError};

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

impl<'r> FromRow<'r, SqliteRow> for AuditRow {
    fn from_row(row: &'r SqliteRow) -> Result<Self, sqlx::Error> {
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
            hash: crate::audit::GENESIS_HASH.to_owned(),
        }
    }
}

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
    /// Returns once the rows are committed.
    pub async fn audit_append_with<F>(&self, build: F) -> Result<Vec<AuditRow>, StoreError>
    where
        F: FnOnce(&Anchor) -> Vec<AuditRow>,
    {
        let mut tx = self.pool().begin_with("BEGIN IMMEDIATE").await?;
        let tip = audit_tip_in(&mut tx).await?;
        let rows = build(&tip);
        for row in &rows {
            sqlx::query(
                "INSERT INTO audit_events (seq, at, session_id, kind, actor, payload, prev_hash, hash)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(seq_to_db(row.seq))
            .bind(&row.at)
            .bind(&row.session_id)
            .bind(&row.kind)
            .bind(&row.actor)
            .bind(&row.payload)
            .bind(&row.prev_hash)
            .bind(&row.hash)
            .execute(&mut *tx)
            .await?;
            // Same transaction: the compliance summary of a session never disagrees
            // with its events.
            super::audit_query::summarize_in(&mut tx, row).await?;
        }
        tx.commit().await?;
        Ok(rows)
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
                sqlx::query_scalar("SELECT COUNT(*) FROM audit_events WHERE session_id = ?")
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

    /// Deletes events up to and including `seq` and records them as an anchor, in one
    /// transaction.
    pub async fn audit_prune_through(&self, seq: u64, now: &str) -> Result<Anchor, StoreError> {
        let mut tx = self.pool().begin_with("BEGIN IMMEDIATE").await?;
        let hash: Option<String> =
            sqlx::query_scalar("SELECT hash FROM audit_events WHERE seq = ?")
                .bind(seq_to_db(seq))
                .fetch_optional(&mut *tx)
                .await?;
        let hash = hash.ok_or_else(|| StoreError::NotFound(format!("audit event {seq}")))?;
        sqlx::query("INSERT INTO audit_anchors (seq, hash, pruned_at) VALUES (?, ?, ?)")
            .bind(seq_to_db(seq))
            .bind(&hash)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM audit_events WHERE seq <= ?")
            .bind(seq_to_db(seq))
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM audit_session_summaries WHERE last_seq <= ?")
            .bind(seq_to_db(seq))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Anchor { seq, hash })
    }
}

static SELECT_AFTER: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT {COLUMNS} FROM audit_events WHERE seq > ? ORDER BY seq")
});

static SELECT_ADMIN_CHANGES: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {COLUMNS} FROM audit_events WHERE kind = 'admin_change' \
         AND json_extract(payload, '$.target') = ? ORDER BY seq DESC LIMIT ?"
    )
});

static SELECT_SESSION_AFTER: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT {COLUMNS} FROM audit_events WHERE session_id = ? AND seq > ? ORDER BY seq")
});

async fn audit_tip_in(tx: &mut Transaction<'static, Sqlite>) -> Result<Anchor, StoreError> {
    let newest: Option<(i64, String)> =
        sqlx::query_as("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1")
            .fetch_optional(&mut **tx)
            .await?;
    let newest = match newest {
        Some(row) => Some(row),
        None => {
            sqlx::query_as("SELECT seq, hash FROM audit_anchors ORDER BY seq DESC LIMIT 1")
                .fetch_optional(&mut **tx)
                .await?
        }
    };
    Ok(newest.map_or_else(Anchor::genesis, |(seq, hash)| Anchor {
        seq: seq_from_db(seq),
        hash,
    }))
}
