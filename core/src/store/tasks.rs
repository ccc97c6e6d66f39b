//! SQL for call tasks: a held call offered to an MCP client as a task. Each change of a
//! task is one conditional `UPDATE` from `working`, so of two replicas (or two polls)
//! that finish the same task only the first writes its result.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Store, StoreError, stamp};

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Its hold waits for a reviewer, or was approved and has not run yet.
    Working,
    /// `result` is the call's MCP result: what ran, or the refusal that ended it.
    Completed,
    /// Its agent withdrew it.
    Cancelled,
    /// The gateway failed while running it.
    Failed,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::Completed => "completed",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [
            Self::Working,
            Self::Completed,
            Self::Cancelled,
            Self::Failed,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }

    pub fn is_terminal(self) -> bool {
        self != Self::Working
    }
}

/// One stored task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    /// Random and unguessable; only its key's requests find it.
    pub id: String,
    /// The hold the task waits on; none for a call that was not held, whose task was
    /// finished when it was made.
    pub hold_id: Option<String>,
    pub key_id: i64,
    pub status: TaskStatus,
    /// The MCP `CallToolResult` as JSON, once completed.
    pub result: Option<serde_json::Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, hold_id, key_id, status, result, created_at, updated_at, expires_at";

fn decode(what: &str, e: impl std::fmt::Display) -> sqlx::Error {
    sqlx::Error::Decode(format!("stored task {what} is unreadable: {e}").into())
}

fn time(row: &AnyRow, column: &str) -> Result<DateTime<Utc>, sqlx::Error> {
    let text: String = row.try_get(column)?;
    DateTime::parse_from_rfc3339(&text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| decode(column, e))
}

fn task_from_row(row: &AnyRow) -> Result<TaskRow, sqlx::Error> {
    let status: String = row.try_get("status")?;
    let result: Option<String> = row.try_get("result")?;
    Ok(TaskRow {
        id: row.try_get("id")?,
        hold_id: row.try_get("hold_id")?,
        key_id: row.try_get("key_id")?,
        status: TaskStatus::parse(&status).ok_or_else(|| decode("status", &status))?,
        result: result
            .map(|text| serde_json::from_str(&text).map_err(|e| decode("result", e)))
            .transpose()?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
        expires_at: time(row, "expires_at")?,
    })
}

impl Store {
    /// Stores a new task.
    pub async fn insert_task(&self, task: &TaskRow) -> Result<(), StoreError> {
        sqlx::query(&format!(
            "INSERT INTO call_tasks ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        ))
        .bind(&task.id)
        .bind(&task.hold_id)
        .bind(task.key_id)
        .bind(task.status.as_str())
        .bind(task.result.as_ref().map(ToString::to_string))
        .bind(stamp(task.created_at))
        .bind(stamp(task.updated_at))
        .bind(stamp(task.expires_at))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The task `id` of key `key_id`, unless it expired at `now`: another key's task is
    /// not found, exactly as one that never existed.
    pub async fn task_of(
        &self,
        id: &str,
        key_id: i64,
        now: DateTime<Utc>,
    ) -> Result<Option<TaskRow>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM call_tasks WHERE id = $1 AND key_id = $2 AND expires_at > $3"
        ))
        .bind(id)
        .bind(key_id)
        .bind(stamp(now))
        .fetch_optional(self.pool())
        .await?;
        Ok(row.as_ref().map(task_from_row).transpose()?)
    }

    /// A page of the live tasks of key `key_id` in creation order: at most `limit`, after
    /// the task `after` (a task of the same key, as `tasks/list`'s cursor names it).
    pub async fn tasks_of_key(
        &self,
        key_id: i64,
        now: DateTime<Utc>,
        after: Option<&TaskRow>,
        limit: u32,
    ) -> Result<Vec<TaskRow>, StoreError> {
        let rows = match after {
            None => {
                sqlx::query(&format!(
                    "SELECT {COLUMNS} FROM call_tasks WHERE key_id = $1 AND expires_at > $2
                     ORDER BY created_at, id LIMIT $3"
                ))
                .bind(key_id)
                .bind(stamp(now))
                .bind(i64::from(limit))
                .fetch_all(self.pool())
                .await?
            }
            Some(after) => {
                let created = stamp(after.created_at);
                sqlx::query(&format!(
                    "SELECT {COLUMNS} FROM call_tasks WHERE key_id = $1 AND expires_at > $2
                     AND (created_at > $3 OR (created_at = $3 AND id > $4))
                     ORDER BY created_at, id LIMIT $5"
                ))
                .bind(key_id)
                .bind(stamp(now))
                .bind(created)
                .bind(&after.id)
                .bind(i64::from(limit))
                .fetch_all(self.pool())
                .await?
            }
        };
        Ok(rows
            .iter()
            .map(task_from_row)
            .collect::<Result<_, sqlx::Error>>()?)
    }

    /// Ends a working task as `status` with `result`; false when it was no longer working
    /// (another poll or replica ended it first), in which case nothing changes.
    pub async fn finish_task(
        &self,
        id: &str,
        status: TaskStatus,
        result: Option<&serde_json::Value>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE call_tasks SET status = $1, result = $2, updated_at = $3
             WHERE id = $4 AND status = 'working'",
        )
        .bind(status.as_str())
        .bind(result.map(ToString::to_string))
        .bind(stamp(now))
        .bind(id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Completes every working task of `hold_id` with `result`: the request that ran the
    /// held call (or had it refused on resume) stores what it answered.
    pub async fn finish_tasks_of_hold(
        &self,
        hold_id: &str,
        result: &serde_json::Value,
        now: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE call_tasks SET status = 'completed', result = $1, updated_at = $2
             WHERE hold_id = $3 AND status = 'working'",
        )
        .bind(result.to_string())
        .bind(stamp(now))
        .bind(hold_id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// Removes the tasks that ended before `now`. Returns how many.
    pub async fn prune_tasks(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        let done = sqlx::query("DELETE FROM call_tasks WHERE expires_at <= $1")
            .bind(stamp(now))
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }
}
