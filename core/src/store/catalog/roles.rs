//! Roles: the skills an agent is granted and the limits it is held to.

use chrono::Utc;
use sqlx::{AnyConnection, Row};

use super::super::{Store, StoreError, stamp};
use super::Tx;
use super::{Revised, conflict, from_json, load_catalog, revision_of, slug_of, to_json};
use crate::model::Role;
use crate::slug::Slug;

impl Store {
    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn create_role(&self, role: &Role) -> Result<i64, StoreError> {
        let (mut tx, _held) = self.begin_write().await?;
        let saved = create_role_on(Tx::wrap(&mut tx), role).await?;
        tx.commit().await?;
        Ok(saved)
    }

    /// Saves a changed role if nobody saved it since `expected_revision`; returns the new revision.
    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn update_role(
        &self,
        role: &Role,
        expected_revision: i64,
    ) -> Result<i64, StoreError> {
        let (mut tx, _held) = self.begin_write().await?;
        let saved = update_role_on(Tx::wrap(&mut tx), role, expected_revision).await?;
        tx.commit().await?;
        Ok(saved)
    }

    pub async fn list_roles(&self) -> Result<Vec<Revised<Role>>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(list_roles(Tx::wrap(&mut conn)).await?)
    }

    pub async fn get_role(&self, slug: &Slug) -> Result<Option<Revised<Role>>, StoreError> {
        Ok(self
            .list_roles()
            .await?
            .into_iter()
            .find(|r| r.value.slug == *slug))
    }
}

/// [`Store::create_role`] on a given connection: inside the audit writer's transaction, a catalog
/// save commits together with its `admin_change` event.
pub(crate) async fn create_role_on(tx: &mut Tx, role: &Role) -> Result<i64, StoreError> {
    let catalog = load_catalog(tx).await?;
    catalog.validate_role(role)?;
    if catalog.role(role.slug.as_str()).is_some() {
        return Err(StoreError::Conflict(format!(
            "role `{}` already exists",
            role.slug
        )));
    }
    insert_role(tx.conn(), role).await?;
    Ok(1)
}

/// [`Store::update_role`] on a given connection: inside the audit writer's transaction, a catalog
/// save commits together with its `admin_change` event.
pub(crate) async fn update_role_on(
    tx: &mut Tx,
    role: &Role,
    expected_revision: i64,
) -> Result<i64, StoreError> {
    let revision = revision_of(tx.conn(), "roles", "role", &role.slug).await?;
    if revision != expected_revision {
        return Err(conflict(
            "role",
            role.slug.as_str(),
            expected_revision,
            revision,
        ));
    }
    load_catalog(tx).await?.validate_role(role)?;
    overwrite_role(tx.conn(), role).await?;
    Ok(revision + 1)
}

/// Writes `role` over the stored role of its slug, unchecked, and bumps its revision.
/// Returns whether there was one to overwrite.
pub(in crate::store) async fn overwrite_role(
    conn: &mut AnyConnection,
    role: &Role,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE roles SET title = $1, description = $2, instructions = $3, skills = $4, limits = $5, \
             revision = revision + 1, updated_at = $6 WHERE slug = $7",
    )
    .bind(&role.title)
    .bind(&role.description)
    .bind(&role.instructions)
    .bind(to_json(&role.skills))
    .bind(to_json(&role.limits))
    .bind(stamp(Utc::now()))
    .bind(role.slug.as_str())
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() > 0)
}

pub(in crate::store) async fn insert_role(
    conn: &mut AnyConnection,
    role: &Role,
) -> Result<(), StoreError> {
    let now = stamp(Utc::now());
    sqlx::query(
        "INSERT INTO roles (slug, title, description, instructions, skills, limits, revision, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8)",
    )
    .bind(role.slug.as_str())
    .bind(&role.title)
    .bind(&role.description)
    .bind(&role.instructions)
    .bind(to_json(&role.skills))
    .bind(to_json(&role.limits))
    .bind(&now)
    .bind(&now)
    .execute(conn)
    .await?;
    Ok(())
}

pub(crate) async fn list_roles(conn: &mut Tx) -> Result<Vec<Revised<Role>>, sqlx::Error> {
    let conn = conn.conn();
    let rows = sqlx::query("SELECT slug, title, description, instructions, skills, limits, revision FROM roles ORDER BY slug")
        .fetch_all(conn)
        .await?;
    rows.iter()
        .map(|row| {
            Ok(Revised {
                value: Role {
                    slug: slug_of("role slug", row.try_get("slug")?)?,
                    title: row.try_get("title")?,
                    description: row.try_get("description")?,
                    instructions: row.try_get("instructions")?,
                    skills: from_json("role skills", row.try_get("skills")?)?,
                    limits: from_json("role limits", row.try_get("limits")?)?,
                },
                revision: row.try_get("revision")?,
            })
        })
        .collect()
}
