//! SQL for console users' API tokens. Rows hold the SHA-256 of a token, never the token.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::users::{UserRecord, user_from_row};
use super::{Store, StoreError, Tx, stamp};

/// A token as listed: everything but the secret, so it may be serialized and logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiTokenInfo {
    pub id: i64,
    /// The console user the token acts as.
    pub user: String,
    pub name: String,
    /// The first characters of the token, to recognise it by.
    pub prefix: String,
    pub created_at: DateTime<Utc>,
    /// Who issued it: the user themselves, or an admin for them.
    pub created_by: String,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

impl ApiTokenInfo {
    /// True when the token may authenticate at `now`: not revoked and not expired.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|expires| now < expires)
    }
}

/// What the store needs to insert a token: everything but the clear token.
#[derive(Debug, Clone)]
pub struct ApiTokenRow<'a> {
    pub user_id: i64,
    pub name: &'a str,
    pub token_hash: &'a str,
    pub prefix: &'a str,
    pub created_at: DateTime<Utc>,
    pub created_by: &'a str,
    pub expires_at: Option<DateTime<Utc>>,
}

const SELECT: &str = "SELECT t.id, u.name AS user_name, t.name, t.prefix, t.created_at, \
     t.created_by, t.expires_at, t.revoked_at, t.last_used_at \
     FROM console_api_tokens t JOIN console_users u ON u.id = t.user_id";

fn time(what: &str, text: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("API token {what}: {e}")))
}

fn optional_time(row: &AnyRow, column: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
    row.try_get::<Option<String>, _>(column)?
        .map(|text| time(column, &text))
        .transpose()
}

fn token_from_row(row: &AnyRow) -> Result<ApiTokenInfo, StoreError> {
    Ok(ApiTokenInfo {
        id: row.try_get("id")?,
        user: row.try_get("user_name")?,
        name: row.try_get("name")?,
        prefix: row.try_get("prefix")?,
        created_at: time("created_at", &row.try_get::<String, _>("created_at")?)?,
        created_by: row.try_get("created_by")?,
        expires_at: optional_time(row, "expires_at")?,
        revoked_at: optional_time(row, "revoked_at")?,
        last_used_at: optional_time(row, "last_used_at")?,
    })
}

impl Store {
    /// Every token, or those of the user `user_id`, by user then name.
    pub async fn list_api_tokens(
        &self,
        user_id: Option<i64>,
    ) -> Result<Vec<ApiTokenInfo>, StoreError> {
        let rows = sqlx::query(&format!(
            "{SELECT} WHERE ($1 IS NULL OR t.user_id = $2) ORDER BY u.name, t.name"
        ))
        .bind(user_id)
        .bind(user_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(token_from_row).collect()
    }

    /// The token `id`, whatever its state.
    pub async fn api_token(&self, id: i64) -> Result<Option<ApiTokenInfo>, StoreError> {
        let row = sqlx::query(&format!("{SELECT} WHERE t.id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(token_from_row).transpose()
    }

    /// The token whose SHA-256 is `token_hash`, whatever its state, with its user as stored
    /// now (role, disabled): the caller decides whether it authenticates.
    pub async fn api_token_holder(
        &self,
        token_hash: &str,
    ) -> Result<Option<(ApiTokenInfo, UserRecord)>, StoreError> {
        let Some(token) = sqlx::query(&format!("{SELECT} WHERE t.token_hash = $1"))
            .bind(token_hash)
            .fetch_optional(self.pool())
            .await?
        else {
            return Ok(None);
        };
        let token = token_from_row(&token)?;
        let user = sqlx::query(
            "SELECT u.* FROM console_users u JOIN console_api_tokens t ON t.user_id = u.id \
             WHERE t.id = $1",
        )
        .bind(token.id)
        .fetch_one(self.pool())
        .await?;
        Ok(Some((token, user_from_row(&user)?)))
    }

    /// Records a use of token `id` at `at`, only if the stored time is older than
    /// `stale_before` (or absent), so authenticating writes at most once a minute per token.
    pub async fn touch_api_token(
        &self,
        id: i64,
        at: DateTime<Utc>,
        stale_before: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE console_api_tokens SET last_used_at = $1
             WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $3)",
        )
        .bind(stamp(at))
        .bind(id)
        .bind(stamp(stale_before))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }
}

/// Inserts a token inside the caller's transaction (with its `admin_change` event); a name
/// the user already has is a [`StoreError::Conflict`].
pub(crate) async fn insert_api_token_on(
    conn: &mut Tx,
    token: &ApiTokenRow<'_>,
) -> Result<ApiTokenInfo, StoreError> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO console_api_tokens
             (user_id, name, token_hash, prefix, created_at, created_by, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         RETURNING id",
    )
    .bind(token.user_id)
    .bind(token.name)
    .bind(token.token_hash)
    .bind(token.prefix)
    .bind(stamp(token.created_at))
    .bind(token.created_by)
    .bind(token.expires_at.map(stamp))
    .fetch_one(&mut *conn.conn())
    .await
    .map_err(|e| match e {
        // The only unique column a person chooses is the name; a clash of two 256-bit
        // tokens' hashes means a broken random source and surfaces as the database error.
        sqlx::Error::Database(d)
            if d.is_unique_violation()
                && (d.message().contains("console_api_tokens.name")
                    || d.constraint() == Some("console_api_tokens_user_id_name_key")) =>
        {
            StoreError::Conflict(format!(
                "an API token named `{}` already exists",
                token.name
            ))
        }
        e => e.into(),
    })?;
    api_token_on(conn, id)
        .await?
        .ok_or_else(|| StoreError::Corrupt("an inserted API token is gone".to_owned()))
}

/// The token `id` as stored, inside the caller's transaction.
pub(crate) async fn api_token_on(
    conn: &mut Tx,
    id: i64,
) -> Result<Option<ApiTokenInfo>, StoreError> {
    let row = sqlx::query(&format!("{SELECT} WHERE t.id = $1"))
        .bind(id)
        .fetch_optional(&mut *conn.conn())
        .await?;
    row.as_ref().map(token_from_row).transpose()
}

/// Marks token `id` revoked at `at`, unless it already is (the first revocation stands).
pub(crate) async fn revoke_api_token_on(
    conn: &mut Tx,
    id: i64,
    at: DateTime<Utc>,
) -> Result<Option<ApiTokenInfo>, StoreError> {
    sqlx::query(
        "UPDATE console_api_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL",
    )
    .bind(stamp(at))
    .bind(id)
    .execute(&mut *conn.conn())
    .await?;
    api_token_on(conn, id).await
}
