//! SQL for single sign-on to the console (issue #52): which provider account a console user
//! is, and the sign-ins sent to the provider and not yet back.

use chrono::{DateTime, Utc};

use super::users::{UserRecord, user_from_row};
use super::{Store, StoreError, Tx, stamp};

/// A sign-in sent to the provider: what its callback must match.
#[derive(Clone)]
pub struct PendingSsoLogin {
    pub state_hash: String,
    pub browser_hash: String,
    pub nonce: String,
    /// The PKCE verifier: a secret until the code is exchanged, so never printed.
    pub verifier: String,
    pub next_path: String,
    pub expires_at: DateTime<Utc>,
}

impl std::fmt::Debug for PendingSsoLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingSsoLogin")
            .field("next_path", &self.next_path)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Records a sign-in sent to the provider, and drops those that expired.
    pub async fn insert_sso_login(
        &self,
        pending: &PendingSsoLogin,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM console_sso_logins WHERE expires_at < $1")
            .bind(stamp(now))
            .execute(self.pool())
            .await?;
        sqlx::query(
            "INSERT INTO console_sso_logins
                 (state_hash, browser_hash, nonce, verifier, next_path, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&pending.state_hash)
        .bind(&pending.browser_hash)
        .bind(&pending.nonce)
        .bind(&pending.verifier)
        .bind(&pending.next_path)
        .bind(stamp(pending.expires_at))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Takes the sign-in whose state hashes to `state_hash`: it is deleted in the same
    /// statement, so a second callback with the same state finds nothing.
    pub async fn take_sso_login(
        &self,
        state_hash: &str,
    ) -> Result<Option<PendingSsoLogin>, StoreError> {
        use sqlx::Row as _;
        let row = sqlx::query(
            "DELETE FROM console_sso_logins WHERE state_hash = $1
             RETURNING state_hash, browser_hash, nonce, verifier, next_path, expires_at",
        )
        .bind(state_hash)
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let expires_at: String = row.try_get("expires_at")?;
        Ok(Some(PendingSsoLogin {
            state_hash: row.try_get("state_hash")?,
            browser_hash: row.try_get("browser_hash")?,
            nonce: row.try_get("nonce")?,
            verifier: row.try_get("verifier")?,
            next_path: row.try_get("next_path")?,
            expires_at: DateTime::parse_from_rfc3339(&expires_at)
                .map_err(|e| StoreError::Corrupt(format!("console_sso_logins.expires_at: {e}")))?
                .with_timezone(&Utc),
        }))
    }
}

impl Store {
    /// The issuer each console user made by single sign-on signs in with, by user id.
    pub async fn console_user_issuers(
        &self,
    ) -> Result<std::collections::HashMap<i64, String>, StoreError> {
        use sqlx::Row as _;
        let rows = sqlx::query("SELECT user_id, issuer FROM console_user_identities")
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("user_id")?, row.try_get("issuer")?)))
            .collect()
    }
}

/// The issuer console user `name` signs in with, if single sign-on made them.
pub(crate) async fn issuer_of_user_on(
    conn: &mut Tx,
    name: &str,
) -> Result<Option<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT i.issuer FROM console_user_identities i
         JOIN console_users u ON u.id = i.user_id WHERE u.name = $1",
    )
    .bind(name)
    .fetch_optional(conn.conn())
    .await?)
}

/// The console user who is `subject` of `issuer`, inside the door's transaction.
pub(crate) async fn user_by_identity_on(
    conn: &mut Tx,
    issuer: &str,
    subject: &str,
) -> Result<Option<UserRecord>, StoreError> {
    let row = sqlx::query(
        "SELECT u.* FROM console_users u
         JOIN console_user_identities i ON i.user_id = u.id
         WHERE i.issuer = $1 AND i.subject = $2",
    )
    .bind(issuer)
    .bind(subject)
    .fetch_optional(conn.conn())
    .await?;
    Ok(row.as_ref().map(user_from_row).transpose()?)
}

/// Records that console user `user_id` is `subject` of `issuer`.
pub(crate) async fn insert_identity_on(
    conn: &mut Tx,
    user_id: i64,
    issuer: &str,
    subject: &str,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO console_user_identities (user_id, issuer, subject, created_at)
         VALUES ($1, $2, $3, $4)",
    )
    .bind(user_id)
    .bind(issuer)
    .bind(subject)
    .bind(stamp(at))
    .execute(conn.conn())
    .await?;
    Ok(())
}
