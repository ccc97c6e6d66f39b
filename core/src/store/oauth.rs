//! SQL of the OAuth authorization server: clients, pending requests, grants, codes and
//! tokens. Codes and tokens are stored as SHA-256 digests only.

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use super::Tx;
use super::lane::Param;
use super::{Store, StoreError, stamp};
use crate::slug::Slug;

fn time(what: &str, text: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("oauth {what}: {e}")))
}

fn optional_time(what: &str, text: Option<String>) -> Result<Option<DateTime<Utc>>, StoreError> {
    text.map(|text| time(what, &text)).transpose()
}

/// A client as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRow {
    pub client_id: String,
    /// `dynamic` or `metadata_document`.
    pub registration: String,
    pub name: String,
    pub redirect_uris: Vec<String>,
    /// `none`, `client_secret_post` or `client_secret_basic`.
    pub auth_method: String,
    pub secret_hash: Option<String>,
    /// The registration or document as the client sent it.
    pub metadata: String,
    pub created_at: DateTime<Utc>,
}

fn client_from_row(row: &AnyRow) -> Result<ClientRow, StoreError> {
    let uris: String = row.try_get("redirect_uris")?;
    Ok(ClientRow {
        client_id: row.try_get("client_id")?,
        registration: row.try_get("registration")?,
        name: row.try_get("name")?,
        redirect_uris: serde_json::from_str(&uris)
            .map_err(|e| StoreError::Corrupt(format!("oauth client redirect_uris: {e}")))?,
        auth_method: row.try_get("auth_method")?,
        secret_hash: row.try_get("secret_hash")?,
        metadata: row.try_get("metadata")?,
        created_at: time(
            "client created_at",
            &row.try_get::<String, _>("created_at")?,
        )?,
    })
}

/// An authorization request waiting for sign-in and consent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRow {
    pub id: String,
    pub client_id: String,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub code_challenge: String,
    pub resource: String,
    pub requested_scope: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

fn request_from_row(row: &AnyRow) -> Result<RequestRow, StoreError> {
    Ok(RequestRow {
        id: row.try_get("id")?,
        client_id: row.try_get("client_id")?,
        redirect_uri: row.try_get("redirect_uri")?,
        state: row.try_get("state")?,
        code_challenge: row.try_get("code_challenge")?,
        resource: row.try_get("resource")?,
        requested_scope: row.try_get("requested_scope")?,
        created_at: time(
            "request created_at",
            &row.try_get::<String, _>("created_at")?,
        )?,
        expires_at: time(
            "request expires_at",
            &row.try_get::<String, _>("expires_at")?,
        )?,
    })
}

/// A consent as listed: the grant, its credential row's state and its live tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantRow {
    pub key_id: i64,
    /// The credential row's name: the audit actor of the grant's calls.
    pub key_name: String,
    pub user_id: i64,
    pub user_name: String,
    pub client_id: String,
    pub client_name: String,
    pub scope: Slug,
    pub resource: String,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// Access tokens not expired, used up or revoked at the time of the listing.
    pub live_access_tokens: i64,
    /// The expiry of the grant's current refresh token, when it has one.
    pub refresh_expires_at: Option<DateTime<Utc>>,
}

const GRANT_COLUMNS: &str =
    "g.key_id, k.name AS key_name, g.user_id, g.user_name, g.client_id, g.client_name,
    k.scope, g.resource, g.created_at, k.last_used_at, k.revoked_at,
    (SELECT COUNT(*) FROM oauth_tokens t WHERE t.key_id = g.key_id AND t.kind = 'access'
        AND t.revoked_at IS NULL AND t.expires_at > $1) AS live_access_tokens,
    (SELECT MAX(t.expires_at) FROM oauth_tokens t WHERE t.key_id = g.key_id
        AND t.kind = 'refresh' AND t.revoked_at IS NULL AND t.used_at IS NULL
        AND t.expires_at > $1) AS refresh_expires_at";

fn grant_from_row(row: &AnyRow) -> Result<GrantRow, StoreError> {
    let scope: String = row.try_get("scope")?;
    Ok(GrantRow {
        key_id: row.try_get("key_id")?,
        key_name: row.try_get("key_name")?,
        user_id: row.try_get("user_id")?,
        user_name: row.try_get("user_name")?,
        client_id: row.try_get("client_id")?,
        client_name: row.try_get("client_name")?,
        scope: Slug::parse(&scope)
            .map_err(|e| StoreError::Corrupt(format!("oauth grant scope: {e}")))?,
        resource: row.try_get("resource")?,
        created_at: time("grant created_at", &row.try_get::<String, _>("created_at")?)?,
        last_used_at: optional_time("grant last_used_at", row.try_get("last_used_at")?)?,
        revoked_at: optional_time("grant revoked_at", row.try_get("revoked_at")?)?,
        live_access_tokens: row.try_get("live_access_tokens")?,
        refresh_expires_at: optional_time(
            "grant refresh_expires_at",
            row.try_get("refresh_expires_at")?,
        )?,
    })
}

/// An authorization code as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeRow {
    pub key_id: i64,
    pub client_id: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub expires_at: DateTime<Utc>,
    pub used_at: Option<DateTime<Utc>>,
}

/// A token as stored, with the grant it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRow {
    pub kind: String,
    pub key_id: i64,
    pub expires_at: DateTime<Utc>,
    pub used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub client_id: String,
}

/// What an access token at `/mcp` authenticates as, read in one statement with everything
/// that can end it: the token, the grant's credential row, the person and their scopes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRow {
    pub key_id: i64,
    /// The credential row's name: the audit actor of the grant's calls.
    pub key_name: String,
    pub scope: Slug,
    pub user_name: String,
    pub client_name: String,
    pub resource: String,
    pub expires_at: DateTime<Utc>,
    /// False when the token, the grant or the person was revoked or disabled, or the scope
    /// is no longer allowed to the person.
    pub usable: bool,
    pub last_used_at: Option<DateTime<Utc>>,
}

/// A new grant's rows: its credential row and the consent.
#[derive(Debug, Clone)]
pub struct NewGrant<'a> {
    /// The credential row's name (unique, never shown as a key).
    pub name: &'a str,
    pub key_hash: &'a str,
    pub scope: &'a Slug,
    pub user_id: i64,
    pub user_name: &'a str,
    pub client_id: &'a str,
    pub client_name: &'a str,
    pub resource: &'a str,
    pub at: DateTime<Utc>,
}

impl Store {
    pub async fn insert_oauth_client(&self, client: &ClientRow) -> Result<(), StoreError> {
        let uris = serde_json::to_string(&client.redirect_uris)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        // A metadata document's row is its newest fetch: it replaces the last one.
        sqlx::query(
            "INSERT INTO oauth_clients
                 (client_id, registration, name, redirect_uris, auth_method, secret_hash,
                  metadata, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (client_id) DO UPDATE SET
                 name = excluded.name, redirect_uris = excluded.redirect_uris,
                 auth_method = excluded.auth_method, metadata = excluded.metadata
             WHERE oauth_clients.registration = 'metadata_document'",
        )
        .bind(&client.client_id)
        .bind(&client.registration)
        .bind(&client.name)
        .bind(uris)
        .bind(&client.auth_method)
        .bind(&client.secret_hash)
        .bind(&client.metadata)
        .bind(stamp(client.created_at))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    pub async fn oauth_client(&self, client_id: &str) -> Result<Option<ClientRow>, StoreError> {
        let row = sqlx::query("SELECT * FROM oauth_clients WHERE client_id = $1")
            .bind(client_id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(client_from_row).transpose()
    }

    /// Stores a checked authorization request, and drops the ones that expired.
    pub async fn insert_oauth_request(&self, request: &RequestRow) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        sqlx::query("DELETE FROM oauth_requests WHERE expires_at <= $1")
            .bind(stamp(request.created_at))
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO oauth_requests
                 (id, client_id, redirect_uri, state, code_challenge, resource,
                  requested_scope, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&request.id)
        .bind(&request.client_id)
        .bind(&request.redirect_uri)
        .bind(&request.state)
        .bind(&request.code_challenge)
        .bind(&request.resource)
        .bind(&request.requested_scope)
        .bind(stamp(request.created_at))
        .bind(stamp(request.expires_at))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The request `id` while it has not expired at `now`.
    pub async fn oauth_request(
        &self,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<RequestRow>, StoreError> {
        let row = sqlx::query("SELECT * FROM oauth_requests WHERE id = $1 AND expires_at > $2")
            .bind(id)
            .bind(stamp(now))
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(request_from_row).transpose()
    }

    /// Drops a pending request the person refused (a refusal is no change to audit).
    pub async fn delete_oauth_request(&self, id: &str) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await?;
        take_request_on(Tx::wrap(&mut conn), id).await?;
        Ok(())
    }

    /// Allowed scopes of a console user, sorted.
    pub async fn console_user_scopes(&self, user_id: i64) -> Result<Vec<Slug>, StoreError> {
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT scope FROM console_user_scopes WHERE user_id = $1 ORDER BY scope",
        )
        .bind(user_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|s| Slug::parse(s).map_err(|e| StoreError::Corrupt(format!("user scope: {e}"))))
            .collect()
    }

    /// Every grant, newest first; of one person when `user_id` is given.
    pub async fn oauth_grants(
        &self,
        user_id: Option<i64>,
        now: DateTime<Utc>,
    ) -> Result<Vec<GrantRow>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {GRANT_COLUMNS} FROM oauth_grants g JOIN agent_keys k ON k.id = g.key_id
             WHERE $2 IS NULL OR g.user_id = $2
             ORDER BY g.created_at DESC, g.key_id DESC"
        ))
        .bind(stamp(now))
        .bind(user_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(grant_from_row).collect()
    }

    pub async fn oauth_grant(
        &self,
        key_id: i64,
        now: DateTime<Utc>,
    ) -> Result<Option<GrantRow>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {GRANT_COLUMNS} FROM oauth_grants g JOIN agent_keys k ON k.id = g.key_id
             WHERE g.key_id = $2"
        ))
        .bind(stamp(now))
        .bind(key_id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(grant_from_row).transpose()
    }

    pub async fn oauth_code(&self, code_hash: &str) -> Result<Option<CodeRow>, StoreError> {
        let row = sqlx::query("SELECT * FROM oauth_codes WHERE code_hash = $1")
            .bind(code_hash)
            .fetch_optional(self.pool())
            .await?;
        row.map(|row| {
            Ok(CodeRow {
                key_id: row.try_get("key_id")?,
                client_id: row.try_get("client_id")?,
                redirect_uri: row.try_get("redirect_uri")?,
                code_challenge: row.try_get("code_challenge")?,
                expires_at: time("code expires_at", &row.try_get::<String, _>("expires_at")?)?,
                used_at: optional_time("code used_at", row.try_get("used_at")?)?,
            })
        })
        .transpose()
    }

    /// Marks the code used at `at`; false when it already was (a replay, or a race lost).
    pub async fn use_oauth_code(
        &self,
        code_hash: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE oauth_codes SET used_at = $1 WHERE code_hash = $2 AND used_at IS NULL",
        )
        .bind(stamp(at))
        .bind(code_hash)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn oauth_token(&self, token_hash: &str) -> Result<Option<TokenRow>, StoreError> {
        let row = sqlx::query(
            "SELECT t.kind, t.key_id, t.expires_at, t.used_at, t.revoked_at, g.client_id
             FROM oauth_tokens t JOIN oauth_grants g ON g.key_id = t.key_id
             WHERE t.token_hash = $1",
        )
        .bind(token_hash)
        .fetch_optional(self.pool())
        .await?;
        row.map(|row| {
            Ok(TokenRow {
                kind: row.try_get("kind")?,
                key_id: row.try_get("key_id")?,
                expires_at: time("token expires_at", &row.try_get::<String, _>("expires_at")?)?,
                used_at: optional_time("token used_at", row.try_get("used_at")?)?,
                revoked_at: optional_time("token revoked_at", row.try_get("revoked_at")?)?,
                client_id: row.try_get("client_id")?,
            })
        })
        .transpose()
    }

    /// Rotates a refresh token: marks it used and stores the new pair, in one transaction.
    /// False (and nothing stored) when it was used or revoked meanwhile.
    pub async fn rotate_oauth_refresh(
        &self,
        old_hash: &str,
        key_id: i64,
        pair: &TokenPair<'_>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(
            "UPDATE oauth_tokens SET used_at = $1
             WHERE token_hash = $2 AND kind = 'refresh' AND used_at IS NULL AND revoked_at IS NULL",
        )
        .bind(stamp(pair.at))
        .bind(old_hash)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        insert_pair_on(&mut tx, key_id, pair).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Stores a token pair for a grant (the first, after a code exchange).
    pub async fn insert_oauth_tokens(
        &self,
        key_id: i64,
        pair: &TokenPair<'_>,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        insert_pair_on(&mut tx, key_id, pair).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Revokes one token (an access token handed back by its client).
    pub async fn revoke_oauth_token(
        &self,
        token_hash: &str,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE oauth_tokens SET revoked_at = COALESCE(revoked_at, $1) WHERE token_hash = $2",
        )
        .bind(stamp(at))
        .bind(token_hash)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// What the access token with this digest authenticates as at `now`. Every `/mcp`
    /// request with a token asks, so, like the agent key lookup, it reads inline on a
    /// direct connection (see [`super::direct`]).
    pub async fn oauth_access(
        &self,
        token_hash: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<AccessRow>, StoreError> {
        type Columns = (
            i64,
            String,
            String,
            String,
            String,
            String,
            String,
            Option<String>,
            bool,
        );
        let stamped = stamp(now);
        let columns: Option<Columns> = self
            .lane()
            .fetch_optional(
                ACCESS,
                &[Param::from(stamped.as_str()), Param::from(token_hash)],
                |row| {
                    Ok((
                        row.get("key_id")?,
                        row.get("name")?,
                        row.get("scope")?,
                        row.get("user_name")?,
                        row.get("client_name")?,
                        row.get("resource")?,
                        row.get("expires_at")?,
                        row.get("last_used_at")?,
                        row.get("usable")?,
                    ))
                },
            )
            .await?;
        let Some((
            key_id,
            key_name,
            scope,
            user_name,
            client_name,
            resource,
            expires_at,
            last_used_at,
            usable,
        )) = columns
        else {
            return Ok(None);
        };
        Ok(Some(AccessRow {
            key_id,
            key_name,
            scope: Slug::parse(&scope)
                .map_err(|e| StoreError::Corrupt(format!("oauth grant scope: {e}")))?,
            user_name,
            client_name,
            resource,
            expires_at: time("token expires_at", &expires_at)?,
            usable,
            last_used_at: optional_time("grant last_used_at", last_used_at)?,
        }))
    }
}

/// The access token lookup: the token with everything that can end it, in one read.
/// Its marks are numbered in the order they first appear, as the direct lane needs
/// ([`super::direct::prepare`]).
const ACCESS: &str = "SELECT t.key_id, k.name, k.scope, g.user_name, g.client_name, g.resource,
        t.expires_at, k.last_used_at,
        CASE WHEN t.revoked_at IS NULL AND k.revoked_at IS NULL AND u.disabled = 0
         AND (k.expires_at IS NULL OR k.expires_at > $1)
         AND EXISTS (SELECT 1 FROM console_user_scopes s
                     WHERE s.user_id = g.user_id AND s.scope = k.scope)
         THEN 1 ELSE 0 END AS usable
    FROM oauth_tokens t
    JOIN agent_keys k ON k.id = t.key_id AND k.kind = 'oauth'
    JOIN oauth_grants g ON g.key_id = t.key_id
    JOIN console_users u ON u.id = g.user_id
    WHERE t.token_hash = $2 AND t.kind = 'access'";

/// A freshly issued access and refresh token, as digests.
#[derive(Debug, Clone)]
pub struct TokenPair<'a> {
    pub access_hash: &'a str,
    pub access_expires_at: DateTime<Utc>,
    pub refresh_hash: &'a str,
    pub refresh_expires_at: DateTime<Utc>,
    pub at: DateTime<Utc>,
}

async fn insert_pair_on(
    conn: &mut AnyConnection,
    key_id: i64,
    pair: &TokenPair<'_>,
) -> Result<(), StoreError> {
    // Expired tokens of the grant are of no use to anyone: dropped as new ones come.
    sqlx::query("DELETE FROM oauth_tokens WHERE key_id = $1 AND expires_at <= $2")
        .bind(key_id)
        .bind(stamp(pair.at))
        .execute(&mut *conn)
        .await?;
    for (kind, hash, expires) in [
        ("access", pair.access_hash, pair.access_expires_at),
        ("refresh", pair.refresh_hash, pair.refresh_expires_at),
    ] {
        sqlx::query(
            "INSERT INTO oauth_tokens (token_hash, kind, key_id, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(hash)
        .bind(kind)
        .bind(key_id)
        .bind(stamp(pair.at))
        .bind(stamp(expires))
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Creates a grant with its credential row and first authorization code, inside the admin
/// door's transaction (so the consent and its audit event commit together). Returns the
/// credential row's id.
pub(crate) async fn insert_grant_on(
    conn: &mut Tx,
    grant: &NewGrant<'_>,
    code: &NewCode<'_>,
) -> Result<i64, StoreError> {
    let conn = conn.conn();
    let key_id: i64 = sqlx::query_scalar(
        "INSERT INTO agent_keys (name, scope, key_hash, prefix, created_at, created_by, kind)
         VALUES ($1, $2, $3, 'oauth', $4, $5, 'oauth')
         RETURNING id",
    )
    .bind(grant.name)
    .bind(grant.scope.as_str())
    .bind(grant.key_hash)
    .bind(stamp(grant.at))
    .bind(grant.user_name)
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO oauth_grants
             (key_id, user_id, user_name, client_id, client_name, resource, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(key_id)
    .bind(grant.user_id)
    .bind(grant.user_name)
    .bind(grant.client_id)
    .bind(grant.client_name)
    .bind(grant.resource)
    .bind(stamp(grant.at))
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO oauth_codes
             (code_hash, key_id, client_id, redirect_uri, code_challenge, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(code.code_hash)
    .bind(key_id)
    .bind(grant.client_id)
    .bind(code.redirect_uri)
    .bind(code.code_challenge)
    .bind(stamp(code.expires_at))
    .execute(&mut *conn)
    .await?;
    Ok(key_id)
}

/// The authorization code a consent creates.
#[derive(Debug, Clone)]
pub struct NewCode<'a> {
    pub code_hash: &'a str,
    pub redirect_uri: &'a str,
    pub code_challenge: &'a str,
    pub expires_at: DateTime<Utc>,
}

/// Deletes a pending request (consent given or refused); false when it was gone already.
pub(crate) async fn take_request_on(conn: &mut Tx, id: &str) -> Result<bool, StoreError> {
    let conn = conn.conn();
    let done = sqlx::query("DELETE FROM oauth_requests WHERE id = $1")
        .bind(id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Revokes a grant's credential row and every token of it. Returns the grant's state
/// before, `None` when there is no such grant.
pub(crate) async fn revoke_grant_on(
    conn: &mut Tx,
    key_id: i64,
    at: DateTime<Utc>,
) -> Result<Option<Option<DateTime<Utc>>>, StoreError> {
    let conn = conn.conn();
    let before: Option<Option<String>> = sqlx::query_scalar(
        "SELECT k.revoked_at FROM agent_keys k JOIN oauth_grants g ON g.key_id = k.id
         WHERE k.id = $1",
    )
    .bind(key_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(before) = before else {
        return Ok(None);
    };
    sqlx::query("UPDATE agent_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2")
        .bind(stamp(at))
        .bind(key_id)
        .execute(&mut *conn)
        .await?;
    sqlx::query("UPDATE oauth_tokens SET revoked_at = COALESCE(revoked_at, $1) WHERE key_id = $2")
        .bind(stamp(at))
        .bind(key_id)
        .execute(&mut *conn)
        .await?;
    Ok(Some(optional_time("grant revoked_at", before)?))
}

/// Replaces a console user's allowed scopes; returns the ones before.
pub(crate) async fn set_user_scopes_on(
    conn: &mut Tx,
    user_id: i64,
    scopes: &[Slug],
) -> Result<Vec<String>, StoreError> {
    let conn = conn.conn();
    let before: Vec<String> = sqlx::query_scalar(
        "SELECT scope FROM console_user_scopes WHERE user_id = $1 ORDER BY scope",
    )
    .bind(user_id)
    .fetch_all(&mut *conn)
    .await?;
    sqlx::query("DELETE FROM console_user_scopes WHERE user_id = $1")
        .bind(user_id)
        .execute(&mut *conn)
        .await?;
    for scope in scopes {
        sqlx::query("INSERT INTO console_user_scopes (user_id, scope) VALUES ($1, $2) ON CONFLICT DO NOTHING")
            .bind(user_id)
            .bind(scope.as_str())
            .execute(&mut *conn)
            .await?;
    }
    Ok(before)
}
