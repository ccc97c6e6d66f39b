//! Scopes: the roles a session may take and the guardrails over them.

use chrono::Utc;
use sqlx::{AnyConnection, Row};

use super::super::{Store, StoreError, stamp};
use super::Tx;
use super::{Revised, conflict, from_json, load_catalog, revision_of, slug_of, to_json};
use crate::model::Scope;

impl Store {
    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn create_scope(&self, scope: &Scope) -> Result<i64, StoreError> {
        let (mut tx, _held) = self.begin_write().await?;
        let saved = create_scope_on(Tx::wrap(&mut tx), scope).await?;
        tx.commit().await?;
        Ok(saved)
    }

    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn update_scope(
        &self,
        scope: &Scope,
        expected_revision: i64,
    ) -> Result<i64, StoreError> {
        let (mut tx, _held) = self.begin_write().await?;
        let saved = update_scope_on(Tx::wrap(&mut tx), scope, expected_revision).await?;
        tx.commit().await?;
        Ok(saved)
    }

    pub async fn list_scopes(&self) -> Result<Vec<Revised<Scope>>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(list_scopes(Tx::wrap(&mut conn)).await?)
    }
}

/// [`Store::create_scope`] on a given connection: inside the audit writer's transaction, a catalog
/// save commits together with its `admin_change` event.
pub(crate) async fn create_scope_on(tx: &mut Tx, scope: &Scope) -> Result<i64, StoreError> {
    let catalog = load_catalog(tx).await?;
    catalog.validate_scope(scope)?;
    if catalog.scope(scope.slug.as_str()).is_some() {
        return Err(StoreError::Conflict(format!(
            "scope `{}` already exists",
            scope.slug
        )));
    }
    insert_scope(tx.conn(), scope).await?;
    Ok(1)
}

/// [`Store::update_scope`] on a given connection: inside the audit writer's transaction, a catalog
/// save commits together with its `admin_change` event.
pub(crate) async fn update_scope_on(
    tx: &mut Tx,
    scope: &Scope,
    expected_revision: i64,
) -> Result<i64, StoreError> {
    let revision = revision_of(tx.conn(), "scopes", "scope", &scope.slug).await?;
    if revision != expected_revision {
        return Err(conflict(
            "scope",
            scope.slug.as_str(),
            expected_revision,
            revision,
        ));
    }
    load_catalog(tx).await?.validate_scope(scope)?;
    overwrite_scope(tx.conn(), scope).await?;
    Ok(revision + 1)
}

/// Writes `scope` over the stored scope of its slug, unchecked, and bumps its revision.
/// Returns whether there was one to overwrite.
pub(in crate::store) async fn overwrite_scope(
    conn: &mut AnyConnection,
    scope: &Scope,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE scopes SET description = $1, roles = $2, guardrails = $3, revision = revision + 1, \
           updated_at = $4 WHERE slug = $5",
    )
    .bind(&scope.description)
    .bind(to_json(&scope.roles))
    .bind(to_json(&scope.guardrails))
    .bind(stamp(Utc::now()))
    .bind(scope.slug.as_str())
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() > 0)
}

pub(in crate::store) async fn insert_scope(
    conn: &mut AnyConnection,
    scope: &Scope,
) -> Result<(), StoreError> {
    let now = stamp(Utc::now());
    sqlx::query("INSERT INTO scopes (slug, description, roles, guardrails, revision, created_at, updated_at) VALUES ($1, $2, $3, $4, 1, $5, $6)")
        .bind(scope.slug.as_str())
        .bind(&scope.description)
        .bind(to_json(&scope.roles))
        .bind(to_json(&scope.guardrails))
        .bind(&now)
        .bind(&now)
        .execute(conn)
        .await?;
    Ok(())
}

pub(crate) async fn list_scopes(conn: &mut Tx) -> Result<Vec<Revised<Scope>>, sqlx::Error> {
    let conn = conn.conn();
    let rows = sqlx::query(
        "SELECT slug, description, roles, guardrails, revision FROM scopes ORDER BY slug",
    )
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(Revised {
                value: Scope {
                    slug: slug_of("scope slug", row.try_get("slug")?)?,
                    description: row.try_get("description")?,
                    roles: from_json("scope roles", row.try_get("roles")?)?,
                    guardrails: from_json("scope guardrails", row.try_get("guardrails")?)?,
                },
                revision: row.try_get("revision")?,
            })
        })
        .collect()
}
