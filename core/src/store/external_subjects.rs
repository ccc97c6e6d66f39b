//! Credential rows of the subjects of trusted external issuers (issue #52): an
//! `agent_keys` row of kind `external` and the `external_subjects` row naming its issuer and
//! subject. Written only through the admin door ([`crate::admin::AdminService::external_credential`]).

use chrono::{DateTime, Utc};

use super::keys::{AgentKeyInfo, COLUMNS, key_from_row};
use super::{Store, StoreError, Tx, stamp};
use crate::slug::Slug;

/// What the store needs to make a subject's credential row.
#[derive(Debug, Clone)]
pub struct NewExternalSubject<'a> {
    pub issuer: &'a str,
    pub subject: &'a str,
    /// The credential's name, as the audit shows the agent.
    pub name: &'a str,
    pub scope: &'a Slug,
    /// The digest of a random secret nobody is shown: the row can never be presented as a
    /// key.
    pub key_hash: &'a str,
    pub at: DateTime<Utc>,
}

fn by_subject() -> String {
    format!(
        "SELECT {COLUMNS} FROM agent_keys WHERE kind = 'external' AND id =
             (SELECT key_id FROM external_subjects WHERE issuer = $1 AND subject = $2)"
    )
}

impl Store {
    /// Every subject's credential row, by name (`SUBJECT@ISSUER`).
    pub async fn list_external_subjects(&self) -> Result<Vec<AgentKeyInfo>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM agent_keys WHERE kind = 'external' ORDER BY name"
        ))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(key_from_row).collect()
    }

    /// The credential row of `subject` of `issuer`, whatever its state (revoked included).
    pub async fn external_subject(
        &self,
        issuer: &str,
        subject: &str,
    ) -> Result<Option<AgentKeyInfo>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        external_subject_on(Tx::wrap(&mut conn), issuer, subject).await
    }
}

/// The subject's credential row as it is inside the door's transaction.
pub(crate) async fn external_subject_on(
    conn: &mut Tx,
    issuer: &str,
    subject: &str,
) -> Result<Option<AgentKeyInfo>, StoreError> {
    let row = sqlx::query(&by_subject())
        .bind(issuer)
        .bind(subject)
        .fetch_optional(conn.conn())
        .await?;
    row.as_ref().map(key_from_row).transpose()
}

/// Makes the subject's credential row and its `external_subjects` row.
pub(crate) async fn insert_external_subject_on(
    conn: &mut Tx,
    new: &NewExternalSubject<'_>,
) -> Result<AgentKeyInfo, StoreError> {
    let conn = conn.conn();
    let row = sqlx::query(&format!(
        "INSERT INTO agent_keys (name, scope, key_hash, prefix, created_at, created_by, kind)
         VALUES ($1, $2, $3, 'external', $4, $5, 'external')
         RETURNING {COLUMNS}"
    ))
    .bind(new.name)
    .bind(new.scope.as_str())
    .bind(new.key_hash)
    .bind(stamp(new.at))
    .bind(new.issuer)
    .fetch_one(&mut *conn)
    .await
    .map_err(|error| match error {
        sqlx::Error::Database(e) if e.is_unique_violation() => {
            StoreError::Conflict(format!("a credential named `{}` already exists", new.name))
        }
        other => other.into(),
    })?;
    let info = key_from_row(&row)?;
    sqlx::query(
        "INSERT INTO external_subjects (key_id, issuer, subject, created_at)
         VALUES ($1, $2, $3, $4)",
    )
    .bind(info.id)
    .bind(new.issuer)
    .bind(new.subject)
    .bind(stamp(new.at))
    .execute(&mut *conn)
    .await?;
    Ok(info)
}

/// Moves a subject's credential row to `scope` (its claims map elsewhere now).
pub(crate) async fn set_external_scope_on(
    conn: &mut Tx,
    key_id: i64,
    scope: &Slug,
) -> Result<AgentKeyInfo, StoreError> {
    let row = sqlx::query(&format!(
        "UPDATE agent_keys SET scope = $1 WHERE id = $2 AND kind = 'external' RETURNING {COLUMNS}"
    ))
    .bind(scope.as_str())
    .bind(key_id)
    .fetch_one(conn.conn())
    .await?;
    key_from_row(&row)
}
