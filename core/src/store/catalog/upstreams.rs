//! Upstreams: where tools come from, and the credentials Skillgate calls them with.

use std::collections::BTreeMap;

use chrono::Utc;
use sqlx::Row;

use super::super::{Store, StoreError, stamp};
use super::Tx;
use super::{from_json, slug_of, to_json};
use crate::model::Upstream;
use crate::slug::Slug;
use crate::upstream::UpstreamCredentials;

impl Store {
    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn upsert_upstream(&self, upstream: &Upstream) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await?;
        upsert_upstream(Tx::wrap(&mut conn), upstream).await
    }

    pub async fn list_upstreams(&self) -> Result<Vec<Upstream>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(list_upstreams(Tx::wrap(&mut conn)).await?)
    }

    /// Replaces the stored credentials of an upstream (`None` removes them).
    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn set_upstream_credentials(
        &self,
        upstream: &Slug,
        credentials: Option<&UpstreamCredentials>,
    ) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await?;
        set_upstream_credentials_on(Tx::wrap(&mut conn), upstream, credentials).await
    }

    /// Every upstream's stored credentials, by upstream name (upstreams without any are absent).
    pub async fn upstream_credentials(
        &self,
    ) -> Result<BTreeMap<String, UpstreamCredentials>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        upstream_credentials_on(Tx::wrap(&mut conn)).await
    }
}

/// [`Store::set_upstream_credentials`] on a given connection (see [`create_role_on`]).
pub(crate) async fn set_upstream_credentials_on(
    conn: &mut Tx,
    upstream: &Slug,
    credentials: Option<&UpstreamCredentials>,
) -> Result<(), StoreError> {
    let conn = conn.conn();
    let done = sqlx::query("UPDATE upstreams SET credentials = $1 WHERE name = $2")
        .bind(
            credentials
                .filter(|c| !c.is_empty())
                .map(UpstreamCredentials::to_stored_json),
        )
        .bind(upstream.as_str())
        .execute(conn)
        .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound(format!("upstream `{upstream}`")));
    }
    Ok(())
}

/// [`Store::upstream_credentials`] on a given connection.
pub(crate) async fn upstream_credentials_on(
    conn: &mut Tx,
) -> Result<BTreeMap<String, UpstreamCredentials>, StoreError> {
    let conn = conn.conn();
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT name, credentials FROM upstreams WHERE credentials IS NOT NULL")
            .fetch_all(conn)
            .await?;
    rows.into_iter()
        .map(|(name, text)| {
            UpstreamCredentials::from_stored_json(&text)
                .map(|c| (name.clone(), c))
                .map_err(|e| StoreError::Corrupt(format!("credentials of upstream `{name}`: {e}")))
        })
        .collect()
}

pub(crate) async fn upsert_upstream(conn: &mut Tx, upstream: &Upstream) -> Result<(), StoreError> {
    let conn = conn.conn();
    sqlx::query(
        "INSERT INTO upstreams (name, kind, config, updated_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, config = excluded.config, updated_at = excluded.updated_at",
    )
    .bind(upstream.name.as_str())
    .bind(upstream.kind.label())
    .bind(to_json(&upstream.kind))
    .bind(stamp(Utc::now()))
    .execute(conn)
    .await?;
    Ok(())
}

pub(crate) async fn list_upstreams(conn: &mut Tx) -> Result<Vec<Upstream>, sqlx::Error> {
    let conn = conn.conn();
    let rows = sqlx::query("SELECT name, config FROM upstreams ORDER BY name")
        .fetch_all(conn)
        .await?;
    rows.iter()
        .map(|row| {
            Ok(Upstream {
                name: slug_of("upstream name", row.try_get("name")?)?,
                kind: from_json("upstream config", row.try_get("config")?)?,
            })
        })
        .collect()
}
