//! SQL for the governance catalog: upstreams, tools and their pins, versioned skills,
//! roles, scopes and the inspection policy, one file per entity. This module holds what they share (decoding,
//! revisions, the whole catalog's load and seed) and re-exports their functions, so callers
//! name `store::catalog::…` whatever file a function lives in.
//!
//! Every transaction that writes begins `IMMEDIATE`: a deferred one that reads first and
//! writes later cannot take the write lock while another process holds it, and SQLite
//! answers "database is locked" at once instead of waiting out the busy timeout.

use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::AnyConnection;

use super::Tx;
use super::{Store, StoreError};
use crate::model::{Catalog, CatalogDraft, ToolSpec, Upstream};
use crate::policy::CompiledCatalog;
use crate::slug::Slug;

mod identity;
mod inspection;
mod pins;
mod roles;
mod scopes;
mod skills;
#[cfg(test)]
mod tests;
mod tools;
mod upstreams;

use tools::{list_tools, seed_tools};

pub use identity::{IdentityChange, IdentityPin, identity_digest};
pub use pins::{PinChange, ToolSync};
pub use tools::ToolPin;

pub(crate) use identity::{admit_identity_on, sync_identity_on};
pub(crate) use inspection::{inspection_policy_on, put_inspection_policy_on};
pub(crate) use pins::{admit_tool_on, sync_tools_on};
pub(crate) use roles::{create_role_on, list_roles, update_role_on};
pub(crate) use scopes::{create_scope_on, list_scopes, update_scope_on};
pub(crate) use skills::{
    create_skill_on, list_skills, set_current_skill_version_on, update_skill_from_file_on,
    update_skill_on,
};
pub(crate) use tools::{pin_tools_stored_before_pins, set_sensitive_args_on, tool_pins_of_on};
pub(crate) use upstreams::{
    list_upstreams, set_upstream_credentials_on, upsert_upstream, upstream_credentials_on,
};
// The unchecked writes of `skillgate catalog apply` (store/catalog_code.rs).
pub(in crate::store) use roles::{insert_role, overwrite_role};
pub(in crate::store) use scopes::{insert_scope, overwrite_scope};
pub(in crate::store) use skills::{insert_skill, insert_skill_version, make_current, skill_head};

/// A catalog entry with the revision an update must quote (optimistic concurrency).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Revised<T> {
    pub value: T,
    pub revision: i64,
}

fn decode_err(what: &str, e: impl std::fmt::Display) -> sqlx::Error {
    sqlx::Error::Decode(format!("stored {what} is unreadable: {e}").into())
}

fn from_json<T: DeserializeOwned>(what: &str, text: &str) -> Result<T, sqlx::Error> {
    serde_json::from_str(text).map_err(|e| decode_err(what, e))
}

pub(in crate::store) fn to_json(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("catalog values serialize")
}

fn slug_of(what: &str, text: &str) -> Result<Slug, sqlx::Error> {
    Slug::parse(text).map_err(|e| decode_err(what, e))
}

fn conflict(kind: &str, slug: &str, expected: i64, actual: i64) -> StoreError {
    StoreError::Conflict(format!(
        "{kind} `{slug}` was changed by someone else (now at revision {actual}, your edit is based on {expected}); reload it and try again"
    ))
}

impl Store {
    /// The whole catalog with current skill versions, to compile a snapshot from.
    pub async fn load_catalog(&self) -> Result<Catalog, StoreError> {
        let mut conn = self.pool().acquire().await?;
        load_catalog(Tx::wrap(&mut conn)).await
    }

    /// The catalog generation: a counter that every change to the catalog's tables moves
    /// in the change's own transaction (triggers of migration 0018).
    pub async fn catalog_generation(&self) -> Result<i64, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT n FROM catalog_generation WHERE id = 1")
                .fetch_one(self.pool())
                .await?,
        )
    }

    /// Loads and compiles the catalog: what the MCP layer puts into its `CatalogHandle`.
    pub async fn compiled_catalog(&self) -> Result<CompiledCatalog, StoreError> {
        Ok(CompiledCatalog::compile(self.load_catalog().await?))
    }

    /// Seeds `draft` with its one `upstream` into a database whose catalog has no roles
    /// yet, its tools admitted and pinned as drafted (the trust of a seed). Returns whether
    /// anything was seeded; a catalog that already has roles is left alone.
    pub(crate) async fn seed_catalog(
        &self,
        draft: CatalogDraft,
        upstream: &Upstream,
    ) -> Result<bool, StoreError> {
        let (mut tx, _held) = self.begin_write().await?;
        let roles: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM roles")
            .fetch_one(&mut *tx)
            .await?;
        if roles > 0 {
            return Ok(false);
        }
        draft
            .clone()
            .into_catalog(vec![upstream.clone()])
            .validate()?;
        upsert_upstream(Tx::wrap(&mut tx), upstream).await?;
        let specs: Vec<ToolSpec> = draft
            .tools
            .iter()
            .filter(|t| t.upstream == upstream.name)
            .map(|t| t.spec.clone())
            .collect();
        seed_tools(&mut tx, &upstream.name, &specs).await?;
        for skill in &draft.skills {
            insert_skill(&mut tx, skill).await?;
        }
        for role in &draft.roles {
            insert_role(&mut tx, role).await?;
        }
        for scope in &draft.scopes {
            insert_scope(&mut tx, scope).await?;
        }
        tx.commit().await?;
        Ok(true)
    }
}

pub(crate) async fn load_catalog(tx: &mut Tx) -> Result<Catalog, StoreError> {
    // The built-in curation upstream and its tools live in code, not in the database.
    let (builtin, builtin_tools) = crate::model::curation::builtin_catalog_parts();
    let mut upstreams = list_upstreams(tx).await?;
    upstreams.push(builtin);
    let mut tools = list_tools(tx.conn()).await?;
    tools.extend(builtin_tools);
    Ok(Catalog {
        upstreams,
        tools,
        skills: list_skills(tx)
            .await?
            .into_iter()
            .map(|s| s.value)
            .collect(),
        roles: list_roles(tx).await?.into_iter().map(|r| r.value).collect(),
        scopes: list_scopes(tx)
            .await?
            .into_iter()
            .map(|s| s.value)
            .collect(),
        inspection: inspection_policy_on(tx).await?,
        quarantined_upstreams: identity::quarantined_upstreams(tx.conn()).await?,
    })
}

async fn revision_of(
    conn: &mut AnyConnection,
    table: &'static str,
    kind: &str,
    slug: &Slug,
) -> Result<i64, StoreError> {
    sqlx::query_scalar(&format!("SELECT revision FROM {table} WHERE slug = $1"))
        .bind(slug.as_str())
        .fetch_optional(conn)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("{kind} `{slug}`")))
}
