//! SQL for `skillgate catalog apply`: the state a plan is made from, and writes that do not
//! check the catalog one entry at a time.
//!
//! An apply changes many entries at once, and an order that keeps every intermediate state
//! valid does not always exist (a skill dropping a tool while its role drops the limit on
//! it). So these writes check nothing themselves: the caller validates the whole resulting
//! catalog before, and the catalog as written inside the transaction after, and rolls
//! back if that fails.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::Tx;
use super::catalog::{
    insert_role, insert_scope, insert_skill, insert_skill_version, load_catalog, make_current,
    overwrite_role, overwrite_scope, skill_head, to_json,
};
use super::{StoreError, stamp};
use crate::model::{Catalog, Role, Scope, Skill, ToolSpec};
use crate::slug::Slug;

/// An agent key as an apply sees it: no hash, no secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKey {
    pub name: String,
    pub scope: String,
    pub prefix: String,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl StoredKey {
    /// Not revoked and not expired at `now`: what an export lists.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|at| now < at)
    }
}

/// Everything a plan compares a file with.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogState {
    /// As loaded for the gateway: built-in curation upstream and tools included.
    pub catalog: Catalog,
    /// Tools no admin has admitted yet (quarantined as new): an upstream's pending offers,
    /// not part of the catalog an export writes.
    pub unadmitted: BTreeSet<String>,
    /// Every agent key, revoked and expired ones too (a name is never reused).
    pub keys: Vec<StoredKey>,
}

fn time(text: Option<String>) -> Result<Option<DateTime<Utc>>, StoreError> {
    text.map(|t| {
        DateTime::parse_from_rfc3339(&t)
            .map(|at| at.with_timezone(&Utc))
            .map_err(|e| StoreError::Corrupt(format!("agent key time `{t}`: {e}")))
    })
    .transpose()
}

pub(crate) async fn catalog_state_on(tx: &mut Tx) -> Result<CatalogState, StoreError> {
    let catalog = load_catalog(tx).await?;
    let unadmitted: Vec<String> = sqlx::query_scalar("SELECT name FROM tools WHERE pin IS NULL")
        .fetch_all(tx.conn())
        .await?;
    let rows = sqlx::query(
        "SELECT name, scope, prefix, expires_at, revoked_at FROM agent_keys WHERE kind = 'key' ORDER BY name",
    )
    .fetch_all(tx.conn())
    .await?;
    let keys = rows
        .iter()
        .map(|row| {
            Ok(StoredKey {
                name: row.try_get("name")?,
                scope: row.try_get("scope")?,
                prefix: row.try_get("prefix")?,
                expires_at: time(row.try_get("expires_at")?)?,
                revoked_at: time(row.try_get("revoked_at")?)?,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(CatalogState {
        catalog,
        unadmitted: unadmitted.into_iter().collect(),
        keys,
    })
}

/// Deletes an upstream; its tools go with it (the foreign key cascades), credentials too.
pub(crate) async fn delete_upstream_on(conn: &mut Tx, name: &Slug) -> Result<(), StoreError> {
    let conn = conn.conn();
    sqlx::query("DELETE FROM upstreams WHERE name = $1")
        .bind(name.as_str())
        .execute(conn)
        .await?;
    Ok(())
}

/// Stores `spec` as the admitted definition of a tool of `upstream` (pinned by its hash),
/// creating the tool if needed. What the upstream offers stays what it last offered: if
/// that is not the new definition, the tool is (or stays) quarantined with that offer, as
/// a sync would have left it; if it is, any quarantine is lifted.
pub(crate) async fn put_tool_on(
    conn: &mut Tx,
    upstream: &Slug,
    spec: &ToolSpec,
) -> Result<(), StoreError> {
    let conn = conn.conn();
    let now = stamp(Utc::now());
    let pin = spec.pin();
    let row = sqlx::query(
        "SELECT pin, offered, offered_pin, quarantined_since, description, input_schema, \
           output_schema, annotations FROM tools WHERE name = $1",
    )
    .bind(&spec.name)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        sqlx::query(
            "INSERT INTO tools (name, upstream, description, input_schema, output_schema, annotations, \
               sensitive_args, pin, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&spec.name)
        .bind(upstream.as_str())
        .bind(&spec.description)
        .bind(to_json(&spec.input_schema))
        .bind(spec.output_schema.as_ref().map(to_json))
        .bind(spec.annotations.as_ref().map(to_json))
        .bind(to_json(&spec.sensitive_args))
        .bind(&pin)
        .bind(&now)
        .execute(&mut *conn)
        .await?;
        return Ok(());
    };
    let stored_pin: Option<String> = row.try_get("pin")?;
    let offered: Option<String> = row.try_get("offered")?;
    let offered_pin: Option<String> = row.try_get("offered_pin")?;
    let quarantined: Option<String> = row.try_get("quarantined_since")?;
    // What the upstream offered at its last sync: the stored offer, or else (not
    // quarantined) the pinned definition itself.
    let offer = match (offered, offered_pin) {
        (Some(text), Some(hash)) => Some((text, hash)),
        _ if quarantined.is_none() && stored_pin.is_some() => {
            let current = ToolSpec {
                name: spec.name.clone(),
                description: row.try_get("description")?,
                input_schema: serde_json::from_str(row.try_get("input_schema")?)
                    .map_err(|e| StoreError::Corrupt(format!("tool `{}`: {e}", spec.name)))?,
                output_schema: optional_json(row.try_get("output_schema")?, &spec.name)?,
                annotations: optional_json(row.try_get("annotations")?, &spec.name)?,
                sensitive_args: Vec::new(),
            };
            Some((current.canonical_definition(), current.pin()))
        }
        _ => None,
    };
    sqlx::query(
        "UPDATE tools SET upstream = $1, description = $2, input_schema = $3, output_schema = $4, \
           annotations = $5, sensitive_args = $6, pin = $7, updated_at = $8 WHERE name = $9",
    )
    .bind(upstream.as_str())
    .bind(&spec.description)
    .bind(to_json(&spec.input_schema))
    .bind(spec.output_schema.as_ref().map(to_json))
    .bind(spec.annotations.as_ref().map(to_json))
    .bind(to_json(&spec.sensitive_args))
    .bind(&pin)
    .bind(&now)
    .bind(&spec.name)
    .execute(&mut *conn)
    .await?;
    match offer {
        Some((_, hash)) if hash == pin => {
            sqlx::query(
                "UPDATE tools SET offered = NULL, offered_pin = NULL, quarantined_since = NULL \
                 WHERE name = $1",
            )
            .bind(&spec.name)
            .execute(&mut *conn)
            .await?;
        }
        Some((text, hash)) => {
            sqlx::query(
                "UPDATE tools SET offered = $1, offered_pin = $2, \
                   quarantined_since = COALESCE(quarantined_since, $3) WHERE name = $4",
            )
            .bind(text)
            .bind(hash)
            .bind(&now)
            .bind(&spec.name)
            .execute(&mut *conn)
            .await?;
        }
        // Quarantined without a stored offer: left quarantined (fail closed).
        None => {}
    }
    Ok(())
}

fn optional_json(
    text: Option<String>,
    tool: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    text.map(|t| {
        serde_json::from_str(&t).map_err(|e| StoreError::Corrupt(format!("tool `{tool}`: {e}")))
    })
    .transpose()
}

pub(crate) async fn delete_tool_on(conn: &mut Tx, name: &str) -> Result<(), StoreError> {
    let conn = conn.conn();
    sqlx::query("DELETE FROM tools WHERE name = $1")
        .bind(name)
        .execute(conn)
        .await?;
    Ok(())
}

/// Creates a skill at version 1, or saves `skill` as its next version and makes it current.
/// Returns the version now current.
pub(crate) async fn put_skill_on(conn: &mut Tx, skill: &Skill) -> Result<u32, StoreError> {
    let conn = conn.conn();
    let exists: Option<i64> = sqlx::query_scalar("SELECT revision FROM skills WHERE slug = $1")
        .bind(skill.slug.as_str())
        .fetch_optional(&mut *conn)
        .await?;
    if exists.is_none() {
        insert_skill(&mut *conn, skill).await?;
        return Ok(1);
    }
    let (latest, _) = skill_head(&mut *conn, &skill.slug).await?;
    let version = latest + 1;
    insert_skill_version(&mut *conn, skill, version, None).await?;
    make_current(conn, &skill.slug, version).await?;
    u32::try_from(version).map_err(|e| StoreError::Corrupt(format!("skill version: {e}")))
}

/// Deletes a skill with every version (and, by the foreign keys, its candidates).
pub(crate) async fn delete_skill_on(conn: &mut Tx, slug: &Slug) -> Result<(), StoreError> {
    let conn = conn.conn();
    sqlx::query("DELETE FROM skills WHERE slug = $1")
        .bind(slug.as_str())
        .execute(conn)
        .await?;
    Ok(())
}

pub(crate) async fn put_role_on(conn: &mut Tx, role: &Role) -> Result<(), StoreError> {
    let conn = conn.conn();
    if !overwrite_role(conn, role).await? {
        insert_role(conn, role).await?;
    }
    Ok(())
}

pub(crate) async fn delete_role_on(conn: &mut Tx, slug: &Slug) -> Result<(), StoreError> {
    let conn = conn.conn();
    sqlx::query("DELETE FROM roles WHERE slug = $1")
        .bind(slug.as_str())
        .execute(conn)
        .await?;
    Ok(())
}

pub(crate) async fn put_scope_on(conn: &mut Tx, scope: &Scope) -> Result<(), StoreError> {
    let conn = conn.conn();
    if !overwrite_scope(conn, scope).await? {
        insert_scope(conn, scope).await?;
    }
    Ok(())
}

pub(crate) async fn delete_scope_on(conn: &mut Tx, slug: &Slug) -> Result<(), StoreError> {
    let conn = conn.conn();
    sqlx::query("DELETE FROM scopes WHERE slug = $1")
        .bind(slug.as_str())
        .execute(conn)
        .await?;
    Ok(())
}

/// Sets when an unrevoked key stops authenticating (`None`: never).
pub(crate) async fn set_key_expiry_on(
    conn: &mut Tx,
    name: &str,
    expires_at: Option<DateTime<Utc>>,
) -> Result<(), StoreError> {
    let conn = conn.conn();
    let done =
        sqlx::query("UPDATE agent_keys SET expires_at = $1 WHERE name = $2 AND kind = 'key' AND revoked_at IS NULL")
            .bind(expires_at.map(stamp))
            .bind(name)
            .execute(conn)
            .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound(format!("agent key `{name}`")));
    }
    Ok(())
}
