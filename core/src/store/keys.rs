//! SQL for agent keys. Rows hold the SHA-256 of a key, never the key itself.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::any::AnyRow;

use super::Tx;
use super::lane::{LaneRow, Param};
use super::{Store, StoreError, stamp};
use crate::slug::Slug;

/// A key as listed: everything but the secret, so it may be serialized and logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentKeyInfo {
    pub id: i64,
    pub name: String,
    pub scope: Slug,
    /// The first characters of the key (`keys::DISPLAY_PREFIX_LEN`), to recognise it by.
    pub prefix: String,
    pub created_at: DateTime<Utc>,
    pub created_by: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

impl AgentKeyInfo {
    /// True when the key may authenticate at `now`: not revoked and not expired.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|expires| now < expires)
    }
}

/// What the store needs to insert a key: everything but the clear key.
#[derive(Debug, Clone)]
pub struct AgentKeyRow<'a> {
    pub name: &'a str,
    pub scope: &'a Slug,
    pub key_hash: &'a str,
    pub prefix: &'a str,
    pub created_at: DateTime<Utc>,
    pub created_by: Option<&'a str>,
    pub expires_at: Option<DateTime<Utc>>,
}

pub(super) const COLUMNS: &str =
    "id, name, scope, prefix, created_at, created_by, expires_at, revoked_at, last_used_at";

static FIND_BY_HASH: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT {COLUMNS} FROM agent_keys WHERE key_hash = $1 AND kind = 'key'")
});

/// A key row's columns as stored, whichever driver read them: one decoding for both.
struct KeyColumns {
    id: i64,
    name: String,
    scope: String,
    prefix: String,
    created_at: String,
    created_by: Option<String>,
    expires_at: Option<String>,
    revoked_at: Option<String>,
    last_used_at: Option<String>,
}

impl KeyColumns {
    fn from_lane(row: &LaneRow<'_>) -> Result<Self, StoreError> {
        Ok(Self {
            id: row.get("id")?,
            name: row.get("name")?,
            scope: row.get("scope")?,
            prefix: row.get("prefix")?,
            created_at: row.get("created_at")?,
            created_by: row.get("created_by")?,
            expires_at: row.get("expires_at")?,
            revoked_at: row.get("revoked_at")?,
            last_used_at: row.get("last_used_at")?,
        })
    }

    fn decode(self) -> Result<AgentKeyInfo, StoreError> {
        let unreadable = |what: &str, e: &dyn std::fmt::Display| {
            StoreError::Corrupt(format!("agent key {what}: {e}"))
        };
        let time = |what: &str, text: &str| {
            DateTime::parse_from_rfc3339(text)
                .map(|at| at.with_timezone(&Utc))
                .map_err(|e| unreadable(what, &e))
        };
        let optional =
            |what: &str, text: Option<String>| text.map(|text| time(what, &text)).transpose();
        Ok(AgentKeyInfo {
            id: self.id,
            scope: Slug::parse(&self.scope).map_err(|e| unreadable("scope", &e))?,
            created_at: time("created_at", &self.created_at)?,
            expires_at: optional("expires_at", self.expires_at)?,
            revoked_at: optional("revoked_at", self.revoked_at)?,
            last_used_at: optional("last_used_at", self.last_used_at)?,
            name: self.name,
            prefix: self.prefix,
            created_by: self.created_by,
        })
    }
}

pub(super) fn key_from_row(row: &AnyRow) -> Result<AgentKeyInfo, StoreError> {
    KeyColumns::from_lane(&LaneRow::Pool(row))?.decode()
}

impl Store {
    /// Inserts a key; a taken name is a [`StoreError::Conflict`] and inserts nothing.
    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn insert_agent_key(
        &self,
        key: &AgentKeyRow<'_>,
    ) -> Result<AgentKeyInfo, StoreError> {
        let mut conn = self.pool().acquire().await?;
        insert_agent_key_on(Tx::wrap(&mut conn), key).await
    }

    /// The key whose SHA-256 is `key_hash`, whatever its state (revoked, expired). Every
    /// request to `/mcp` asks, so it reads inline on a direct connection (see [`super::direct`]).
    pub async fn find_agent_key_by_hash(
        &self,
        key_hash: &str,
    ) -> Result<Option<AgentKeyInfo>, StoreError> {
        let columns = self
            .lane()
            .fetch_optional(&FIND_BY_HASH, &[Param::from(key_hash)], |row| {
                KeyColumns::from_lane(&row)
            })
            .await?;
        columns.map(KeyColumns::decode).transpose()
    }

    /// The key with this id, whatever its state.
    pub async fn agent_key_by_id(&self, id: i64) -> Result<Option<AgentKeyInfo>, StoreError> {
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM agent_keys WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(key_from_row).transpose()
    }

    pub async fn list_agent_keys(&self) -> Result<Vec<AgentKeyInfo>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM agent_keys WHERE kind = 'key' ORDER BY name"
        ))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(key_from_row).collect()
    }

    /// Marks the key `name` revoked at `at`, unless it already is (the first revocation
    /// time stands). Returns the key as stored afterwards, `None` if there is no such key.
    pub(crate) async fn revoke_agent_key(
        &self,
        name: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<AgentKeyInfo>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        revoke_agent_key_on(Tx::wrap(&mut conn), name, at).await
    }

    /// Records a use of key `id` at `at`, only if the stored time is older than
    /// `stale_before` (or absent). The condition keeps concurrent requests from moving the
    /// time backwards. Returns whether a row was written.
    pub async fn touch_agent_key(
        &self,
        id: i64,
        at: DateTime<Utc>,
        stale_before: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE agent_keys SET last_used_at = $1
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

/// [`Store::insert_agent_key`] on a given connection: inside the audit writer's transaction,
/// a key and its `admin_change` event commit together.
pub(crate) async fn insert_agent_key_on(
    conn: &mut Tx,
    key: &AgentKeyRow<'_>,
) -> Result<AgentKeyInfo, StoreError> {
    let conn = conn.conn();
    let result = sqlx::query(&format!(
        "INSERT INTO agent_keys
             (name, scope, key_hash, prefix, created_at, created_by, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         RETURNING {COLUMNS}"
    ))
    .bind(key.name)
    .bind(key.scope.as_str())
    .bind(key.key_hash)
    .bind(key.prefix)
    .bind(stamp(key.created_at))
    .bind(key.created_by)
    .bind(key.expires_at.map(stamp))
    .fetch_one(conn)
    .await;
    match result {
        Ok(row) => key_from_row(&row),
        // Only the name is worth reporting: a clash of two 256-bit keys' hashes means a
        // broken random source, which must surface as the database error it is.
        // SQLite names the column in its message; PostgreSQL names the constraint.
        Err(sqlx::Error::Database(e))
            if e.is_unique_violation()
                && (e.message().contains("agent_keys.name")
                    || e.constraint() == Some("agent_keys_name_key")) =>
        {
            Err(StoreError::Conflict(format!(
                "an agent key named `{}` already exists",
                key.name
            )))
        }
        Err(e) => Err(e.into()),
    }
}

/// [`Store::revoke_agent_key`] on a given connection (see [`insert_agent_key_on`]). A
/// key, or a trusted issuer's subject (`SUBJECT@ISSUER`), whose tokens are then refused;
/// an OAuth grant is revoked through its own door.
pub(crate) async fn revoke_agent_key_on(
    conn: &mut Tx,
    name: &str,
    at: DateTime<Utc>,
) -> Result<Option<AgentKeyInfo>, StoreError> {
    let conn = conn.conn();
    let row = sqlx::query(&format!(
        "UPDATE agent_keys SET revoked_at = COALESCE(revoked_at, $1)
         WHERE name = $2 AND kind IN ('key', 'external')
         RETURNING {COLUMNS}"
    ))
    .bind(stamp(at))
    .bind(name)
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(key_from_row).transpose()
}
