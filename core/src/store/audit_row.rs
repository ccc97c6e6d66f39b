//! One stored audit event as a row, and the column list and seq conversions every audit
//! statement shares: below both the chain's SQL ([`super::audit`]) and the compliance
//! reads ([`super::audit_query`]), so neither has to import the other for them.

use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

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

pub(crate) const COLUMNS: &str = "seq, at, session_id, kind, actor, payload, prev_hash, hash";

// SQLite integers are i64; seqs start at 1 and never approach i64::MAX.
pub(crate) fn seq_from_db(seq: i64) -> u64 {
    u64::try_from(seq).unwrap_or(0)
}

pub(crate) fn seq_to_db(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}
