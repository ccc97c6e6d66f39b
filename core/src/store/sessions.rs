//! SQL for governance sessions and skill feedback.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::Tx;
use super::lane::Param;
use super::{Store, StoreError, stamp};
use crate::policy::SessionView;

/// A stored session: its policy view plus the revision it was loaded at.
#[derive(Debug, Clone)]
pub struct StoredSession {
    pub view: SessionView,
    pub key_name: String,
    pub revision: i64,
}

/// What a new session row holds besides its view.
#[derive(Debug, Clone)]
pub struct NewSession<'a> {
    pub view: &'a SessionView,
    pub key_id: i64,
    pub key_name: &'a str,
    pub connection: Option<&'a str>,
    pub task_summary: Option<&'a str>,
    pub created_at: DateTime<Utc>,
}

/// One rating of a skill by an agent (or, later, a person).
#[derive(Debug, Clone)]
pub struct NewFeedback<'a> {
    pub id: &'a str,
    pub skill: &'a str,
    pub version: u32,
    pub rating: u8,
    pub comment: Option<&'a str>,
    pub session_id: Option<&'a str>,
    pub key_id: Option<i64>,
    pub key_name: Option<&'a str>,
    pub at: DateTime<Utc>,
}

/// [`Store::load_session`] on a given connection, e.g. inside a transaction that changes it.
pub async fn load_session_on(conn: &mut Tx, id: &str) -> Result<Option<StoredSession>, StoreError> {
    let conn = conn.conn();
    let row = sqlx::query(LOAD_SESSION)
        .bind(id)
        .fetch_optional(conn)
        .await?;
    let Some(row) = row else { return Ok(None) };
    stored_session(
        id,
        row.try_get("key_name")?,
        &row.try_get::<String, _>("state")?,
        row.try_get("revision")?,
    )
    .map(Some)
}

const LOAD_SESSION: &str =
    "SELECT key_name, state, revision FROM governance_sessions WHERE id = $1";

fn stored_session(
    id: &str,
    key_name: String,
    state: &str,
    revision: i64,
) -> Result<StoredSession, StoreError> {
    let view: SessionView = serde_json::from_str(state).map_err(|e| {
        StoreError::Conflict(format!("stored state of session {id} is unreadable: {e}"))
    })?;
    Ok(StoredSession {
        view,
        key_name,
        revision,
    })
}

/// [`Store::insert_session`] on a given connection, e.g. inside the audit writer's
/// transaction, so a session and its `session_started` event commit together.
pub async fn insert_session_on(conn: &mut Tx, session: &NewSession<'_>) -> Result<(), StoreError> {
    let conn = conn.conn();
    sqlx::query(
        "INSERT INTO governance_sessions
           (id, key_id, key_name, scope, connection, task_summary, created_at, expires_at, state, revision)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0)",
    )
    .bind(&session.view.id)
    .bind(session.key_id)
    .bind(session.key_name)
    .bind(session.view.scope.as_str())
    .bind(session.connection)
    .bind(session.task_summary)
    .bind(stamp(session.created_at))
    .bind(stamp(session.view.expires_at))
    .bind(state_json(session.view)?)
    .execute(conn)
    .await?;
    Ok(())
}

/// [`Store::save_session_state`] on a given connection, e.g. inside the audit writer's
/// transaction, so a learned role and its `learn_granted` event commit together.
pub async fn save_session_state_on(
    conn: &mut Tx,
    view: &SessionView,
    expected_revision: i64,
) -> Result<bool, StoreError> {
    let conn = conn.conn();
    let done = sqlx::query(
        "UPDATE governance_sessions SET state = $1, revision = revision + 1
         WHERE id = $2 AND revision = $3",
    )
    .bind(state_json(view)?)
    .bind(&view.id)
    .bind(expected_revision)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

fn state_json(view: &SessionView) -> Result<String, StoreError> {
    serde_json::to_string(view)
        .map_err(|e| StoreError::Conflict(format!("session state does not serialize: {e}")))
}

impl Store {
    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn insert_session(&self, session: &NewSession<'_>) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await?;
        insert_session_on(Tx::wrap(&mut conn), session).await
    }

    /// The session `id` as stored now. Every governed call reads it, so it reads inline
    /// on a direct connection (see [`super::direct`]); inside a change, use
    /// [`load_session_on`].
    pub async fn load_session(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        let columns = self
            .lane()
            .fetch_optional(LOAD_SESSION, &[Param::from(id)], |row| {
                Ok((
                    row.get::<String>("key_name")?,
                    row.get::<String>("state")?,
                    row.get::<i64>("revision")?,
                ))
            })
            .await?;
        columns
            .map(|(key_name, state, revision)| stored_session(id, key_name, &state, revision))
            .transpose()
    }

    /// The newest session that this key opened on this MCP connection.
    pub async fn newest_session_id(
        &self,
        key_id: i64,
        connection: Option<&str>,
    ) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM governance_sessions
             WHERE key_id = $1 AND connection IS NOT DISTINCT FROM $2
             ORDER BY created_at DESC, rowid DESC LIMIT 1",
        )
        .bind(key_id)
        .bind(connection)
        .fetch_optional(self.pool())
        .await?)
    }

    /// Stores `view` if the row is still at `expected_revision`. Returns false when another
    /// writer got there first; the caller reloads and decides again.
    pub(crate) async fn save_session_state(
        &self,
        view: &SessionView,
        expected_revision: i64,
    ) -> Result<bool, StoreError> {
        let mut conn = self.pool().acquire().await?;
        save_session_state_on(Tx::wrap(&mut conn), view, expected_revision).await
    }

    pub(crate) async fn insert_feedback(
        &self,
        feedback: &NewFeedback<'_>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO skill_feedback
               (id, skill, version, rating, comment, session_id, key_id, key_name, at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(feedback.id)
        .bind(feedback.skill)
        .bind(i64::from(feedback.version))
        .bind(i64::from(feedback.rating))
        .bind(feedback.comment)
        .bind(feedback.session_id)
        .bind(feedback.key_id)
        .bind(feedback.key_name)
        .bind(stamp(feedback.at))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    pub async fn count_feedback(&self, skill: &str) -> Result<i64, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) FROM skill_feedback WHERE skill = $1")
                .bind(skill)
                .fetch_one(self.pool())
                .await?,
        )
    }
}
