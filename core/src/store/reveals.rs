//! SQL for one-time reveals of new agent keys (see migrations/0008_authoring.sql).

use chrono::{DateTime, Utc};

use super::{Store, StoreError, stamp};

impl Store {
    /// Keeps `payload` for `user_id` under `token_hash` until `expires_at`; also drops
    /// reveals that expired unread.
    pub async fn insert_key_reveal(
        &self,
        token_hash: &str,
        user_id: i64,
        payload: &str,
        expires_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let (mut tx, _held) = self.begin_write().await?;
        sqlx::query("DELETE FROM agent_key_reveals WHERE expires_at <= $1")
            .bind(stamp(Utc::now()))
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO agent_key_reveals (token_hash, user_id, payload, expires_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(token_hash)
        .bind(user_id)
        .bind(payload)
        .bind(stamp(expires_at))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The payload under `token_hash` if `user_id` stored it and it has not expired; the
    /// row is deleted either way, so a reveal is read at most once.
    pub async fn take_key_reveal(
        &self,
        token_hash: &str,
        user_id: i64,
        now: DateTime<Utc>,
    ) -> Result<Option<String>, StoreError> {
        let row: Option<(i64, String, String)> = sqlx::query_as(
            "DELETE FROM agent_key_reveals WHERE token_hash = $1 RETURNING user_id, payload, expires_at",
        )
        .bind(token_hash)
        .fetch_optional(self.pool())
        .await?;
        Ok(row
            .filter(|(owner, _, expires_at)| *owner == user_id && *expires_at > stamp(now))
            .map(|(_, payload, _)| payload))
    }
}
