//! SQL for approval holds. Every state change is one conditional `UPDATE`, so two replicas
//! (or two resumes of one agent) can never both approve, execute or expire the same hold.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use super::Tx;
use super::{Store, StoreError, stamp};
use crate::policy::HeldUsage;

/// Where a hold stands. `Refused` is an approved hold whose call the policy refused when
/// the agent came back for it (the catalog tightened in between); it ran nothing.
/// `Withdrawn`: the agent cancelled the task waiting on it; it ran nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldState {
    Pending,
    Approved,
    Denied,
    Expired,
    Executed,
    Refused,
    Withdrawn,
}

impl HoldState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
            Self::Executed => "executed",
            Self::Refused => "refused",
            Self::Withdrawn => "withdrawn",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            Self::Pending,
            Self::Approved,
            Self::Denied,
            Self::Expired,
            Self::Executed,
            Self::Refused,
            Self::Withdrawn,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }

    /// Whether the hold still reserves usage in its session.
    pub fn reserves(self) -> bool {
        matches!(self, Self::Pending | Self::Approved)
    }
}

/// One stored hold.
#[derive(Debug, Clone, PartialEq)]
pub struct HoldRow {
    pub id: String,
    pub session_id: String,
    pub key_id: i64,
    pub key_name: String,
    pub scope: String,
    pub role: String,
    pub tool: String,
    /// The call's arguments in full: what runs once approved.
    pub arguments: Value,
    pub arguments_digest: String,
    pub usage: HeldUsage,
    pub rule: String,
    pub minutes: u32,
    pub catalog_revision: String,
    pub state: HoldState,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
    pub decided_revision: Option<String>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl HoldRow {
    /// Still waiting or approved, and past its expiry at `now`.
    pub fn is_due(&self, now: DateTime<Utc>) -> bool {
        self.state.reserves() && self.expires_at <= now
    }
}

const COLUMNS: &str = "id, session_id, key_id, key_name, scope, role, tool, arguments, \
    arguments_digest, usage, rule, minutes, catalog_revision, state, created_at, expires_at, \
    decided_by, decided_at, reason, decided_revision, finished_at";

fn decode(what: &str, e: impl std::fmt::Display) -> sqlx::Error {
    sqlx::Error::Decode(format!("stored hold {what} is unreadable: {e}").into())
}

fn time(what: &str, text: &str) -> Result<DateTime<Utc>, sqlx::Error> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| decode(what, e))
}

fn optional_time(row: &AnyRow, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    row.try_get::<Option<String>, _>(column)?
        .map(|text| time(column, &text))
        .transpose()
}

fn hold_from_row(row: &AnyRow) -> Result<HoldRow, sqlx::Error> {
    let arguments: String = row.try_get("arguments")?;
    let usage: String = row.try_get("usage")?;
    let state: String = row.try_get("state")?;
    let minutes: i64 = row.try_get("minutes")?;
    Ok(HoldRow {
        id: row.try_get("id")?,
        session_id: row.try_get("session_id")?,
        key_id: row.try_get("key_id")?,
        key_name: row.try_get("key_name")?,
        scope: row.try_get("scope")?,
        role: row.try_get("role")?,
        tool: row.try_get("tool")?,
        arguments: serde_json::from_str(&arguments).map_err(|e| decode("arguments", e))?,
        arguments_digest: row.try_get("arguments_digest")?,
        usage: serde_json::from_str(&usage).map_err(|e| decode("usage", e))?,
        rule: row.try_get("rule")?,
        minutes: u32::try_from(minutes).map_err(|e| decode("minutes", e))?,
        catalog_revision: row.try_get("catalog_revision")?,
        state: HoldState::parse(&state).ok_or_else(|| decode("state", &state))?,
        created_at: time("created_at", &row.try_get::<String, _>("created_at")?)?,
        expires_at: time("expires_at", &row.try_get::<String, _>("expires_at")?)?,
        decided_by: row.try_get("decided_by")?,
        decided_at: optional_time(row, "decided_at")?,
        reason: row.try_get("reason")?,
        decided_revision: row.try_get("decided_revision")?,
        finished_at: optional_time(row, "finished_at")?,
    })
}

/// Inserts a new pending hold.
pub async fn insert_hold_on(conn: &mut Tx, hold: &HoldRow) -> Result<(), StoreError> {
    let conn = conn.conn();
    let usage = serde_json::to_string(&hold.usage)
        .map_err(|e| StoreError::Conflict(format!("hold usage does not serialize: {e}")))?;
    sqlx::query(&format!(
        "INSERT INTO holds ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)"
    ))
    .bind(&hold.id)
    .bind(&hold.session_id)
    .bind(hold.key_id)
    .bind(&hold.key_name)
    .bind(&hold.scope)
    .bind(&hold.role)
    .bind(&hold.tool)
    .bind(hold.arguments.to_string())
    .bind(&hold.arguments_digest)
    .bind(usage)
    .bind(&hold.rule)
    .bind(i64::from(hold.minutes))
    .bind(&hold.catalog_revision)
    .bind(hold.state.as_str())
    .bind(stamp(hold.created_at))
    .bind(stamp(hold.expires_at))
    .bind(&hold.decided_by)
    .bind(hold.decided_at.map(stamp))
    .bind(&hold.reason)
    .bind(&hold.decided_revision)
    .bind(hold.finished_at.map(stamp))
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn hold_on(conn: &mut AnyConnection, id: &str) -> Result<Option<HoldRow>, StoreError> {
    let row = sqlx::query(&format!("SELECT {COLUMNS} FROM holds WHERE id = $1"))
        .bind(id)
        .fetch_optional(conn)
        .await?;
    Ok(row.as_ref().map(hold_from_row).transpose()?)
}

/// A reviewer's decision: only a pending hold that has not expired can be decided.
/// `approved_until` (an approval) restarts the clock: the call must run before it; `None`
/// denies.
pub async fn decide_hold_on(
    conn: &mut Tx,
    id: &str,
    approved_until: Option<DateTime<Utc>>,
    reviewer: &str,
    reason: &str,
    revision: &str,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let conn = conn.conn();
    let done = sqlx::query(
        "UPDATE holds SET state = $1, decided_by = $2, decided_at = $3, reason = $4,
                decided_revision = $5, expires_at = COALESCE($6, expires_at), finished_at = $7
         WHERE id = $8 AND state = 'pending' AND expires_at > $9",
    )
    .bind(if approved_until.is_some() {
        "approved"
    } else {
        "denied"
    })
    .bind(reviewer)
    .bind(stamp(now))
    .bind(reason)
    .bind(revision)
    .bind(approved_until.map(stamp))
    .bind(approved_until.is_none().then(|| stamp(now)))
    .bind(id)
    .bind(stamp(now))
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Moves a hold from `from` to `to` at `now`; false when it was not in `from` (someone else
/// got there first) or, for `approved`, when its approval has expired.
pub async fn finish_hold_on(
    conn: &mut Tx,
    id: &str,
    from: &[HoldState],
    to: HoldState,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let conn = conn.conn();
    let states: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
    let live_only = matches!(to, HoldState::Executed | HoldState::Refused);
    let done = sqlx::query(
        "UPDATE holds SET state = $1, finished_at = $2
         WHERE id = $3 AND state IN (SELECT value FROM json_each($4))
           AND (NOT $5 OR expires_at > $6)",
    )
    .bind(to.as_str())
    .bind(stamp(now))
    .bind(id)
    .bind(serde_json::to_string(&states).unwrap_or_else(|_| "[]".into()))
    .bind(live_only)
    .bind(stamp(now))
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

impl Store {
    pub async fn hold(&self, id: &str) -> Result<Option<HoldRow>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        hold_on(&mut conn, id).await
    }

    /// The newest hold of this exact call (session, tool, arguments) that still reserves
    /// usage: a repeated call resumes it instead of raising another.
    pub async fn live_hold_of_call(
        &self,
        session_id: &str,
        tool: &str,
        arguments_digest: &str,
    ) -> Result<Option<HoldRow>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM holds
             WHERE session_id = $1 AND tool = $2 AND arguments_digest = $3
               AND state IN ('pending', 'approved')
             ORDER BY created_at DESC LIMIT 1"
        ))
        .bind(session_id)
        .bind(tool)
        .bind(arguments_digest)
        .fetch_optional(self.pool())
        .await?;
        Ok(row.as_ref().map(hold_from_row).transpose()?)
    }

    /// Holds in `state` (all when `None`), newest first, `limit` at most, created before
    /// the hold `before` when given: the reviewers' queue, a page at a time.
    pub async fn list_holds(
        &self,
        state: Option<HoldState>,
        before: Option<&str>,
        limit: u32,
    ) -> Result<Vec<HoldRow>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM holds
             WHERE ($1 IS NULL OR state = $2)
               AND ($3 IS NULL OR (created_at, id) < (SELECT created_at, id FROM holds WHERE id = $4))
             ORDER BY created_at DESC, id DESC LIMIT $5"
        ))
        .bind(state.map(HoldState::as_str))
        .bind(state.map(HoldState::as_str))
        .bind(before)
        .bind(before)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        Ok(rows.iter().map(hold_from_row).collect::<Result<_, _>>()?)
    }

    /// Holds still reserving usage whose expiry has passed at `now`.
    pub async fn due_holds(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<HoldRow>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM holds
             WHERE state IN ('pending', 'approved') AND expires_at <= $1
             ORDER BY expires_at LIMIT $2"
        ))
        .bind(stamp(now))
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        Ok(rows.iter().map(hold_from_row).collect::<Result<_, _>>()?)
    }
}
