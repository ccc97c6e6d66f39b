//! SQL for what-if replay: which sessions a window covers, where their history starts, and
//! how far back the audit still reaches. Reads only.

use chrono::{DateTime, Utc};

use super::audit::seq_from_db;
use super::{Store, StoreError, stamp};
use crate::names::EventKind;

/// The call events a window is made of.
const CALL_KINDS: [EventKind; 3] = [
    EventKind::CallAllowed,
    EventKind::CallHeld,
    EventKind::CallDenied,
];

impl Store {
    /// How many audited calls of a session fall in `[from, to)`, and the seq of the
    /// earliest start of a session that has one (its history is replayed from there).
    pub async fn replay_window(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<(u64, Option<u64>), StoreError> {
        let calls: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM audit_events
             WHERE kind IN ($1, $2, $3) AND at >= $4 AND at < $5 AND session_id IS NOT NULL",
        )
        .bind(CALL_KINDS[0].as_str())
        .bind(CALL_KINDS[1].as_str())
        .bind(CALL_KINDS[2].as_str())
        .bind(stamp(from))
        .bind(stamp(to))
        .fetch_one(self.pool())
        .await?;
        let first: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(s.seq) FROM audit_events s
             WHERE s.kind = $1 AND s.session_id IN (
                 SELECT c.session_id FROM audit_events c
                 WHERE c.kind IN ($2, $3, $4) AND c.at >= $5 AND c.at < $6
                   AND c.session_id IS NOT NULL)",
        )
        .bind(EventKind::SessionStarted.as_str())
        .bind(CALL_KINDS[0].as_str())
        .bind(CALL_KINDS[1].as_str())
        .bind(CALL_KINDS[2].as_str())
        .bind(stamp(from))
        .bind(stamp(to))
        .fetch_one(self.pool())
        .await?;
        Ok((calls.try_into().unwrap_or(0), first.map(seq_from_db)))
    }

    /// The seq of a session's start, when the audit holds it.
    pub async fn session_start_seq(&self, session_id: &str) -> Result<Option<u64>, StoreError> {
        let seq: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(seq) FROM audit_events WHERE kind = $1 AND session_id = $2",
        )
        .bind(EventKind::SessionStarted.as_str())
        .bind(session_id)
        .fetch_one(self.pool())
        .await?;
        Ok(seq.map(seq_from_db))
    }

    /// When retention deleted older events: the time of the oldest event kept. `None` when
    /// nothing was ever pruned (the audit reaches back to its start).
    pub async fn audit_kept_since(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let pruned: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_events WHERE kind = $1")
            .bind(EventKind::AuditPruned.as_str())
            .fetch_one(self.pool())
            .await?;
        if pruned == 0 {
            return Ok(None);
        }
        let oldest: Option<String> = sqlx::query_scalar("SELECT MIN(at) FROM audit_events")
            .fetch_one(self.pool())
            .await?;
        Ok(oldest
            .and_then(|at| DateTime::parse_from_rfc3339(&at).ok())
            .map(|at| at.with_timezone(&Utc)))
    }
}
