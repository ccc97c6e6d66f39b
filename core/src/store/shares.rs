//! An upstream shared into workspaces (docs/architecture.md, "Sharing one upstream into
//! several workspaces"): the platform database's registry of shares, and the copy of the
//! upstream's rows each of those workspaces holds, marked `shared_from`.
//!
//! The copy is the upstream's rows as stored (the `upstreams` row with its credentials,
//! its `tools` rows with their pins and quarantine state, its `upstream_identity` row),
//! read and written column by column like `skillgate migrate` copies a table, so a column
//! a later migration adds is shared without a change here.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sqlx::{AnyConnection, Row as _};

use super::copy::{Cell, Rows};
use super::{Backend, Store, StoreError, Tx, stamp};

/// The tables an upstream's copy is made of, parents first, with the column naming the
/// upstream in each.
const UPSTREAM_TABLES: [(&str, &str); 3] = [
    ("upstreams", "name"),
    ("tools", "upstream"),
    ("upstream_identity", "upstream"),
];

/// The column that marks a copy; never copied itself (the platform's row has none).
const SHARED_FROM: &str = "shared_from";

/// One upstream shared into one workspace, as the platform's registry holds it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UpstreamShare {
    pub upstream: String,
    pub workspace: String,
    pub shared_by: String,
    pub shared_at: DateTime<Utc>,
}

/// Every stored row of one upstream. Not `Debug`: it holds the upstream's credentials.
#[derive(Clone, PartialEq)]
pub struct UpstreamRows {
    name: String,
    tables: Vec<Rows>,
}

impl UpstreamRows {
    /// The rows of upstream `name` on `conn`; `None` when there is no such upstream.
    async fn read(
        backend: Backend,
        conn: &mut AnyConnection,
        name: &str,
    ) -> Result<Option<Self>, StoreError> {
        let mut tables = Vec::with_capacity(UPSTREAM_TABLES.len());
        for (table, key) in UPSTREAM_TABLES {
            tables.push(Rows::read(backend, conn, table, key, name, &[SHARED_FROM]).await?);
        }
        if tables[0].rows.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self {
            name: name.to_owned(),
            tables,
        }))
    }

    pub fn upstream(&self) -> &str {
        &self.name
    }

    /// The names of the upstream's tools.
    pub fn tools(&self) -> Vec<String> {
        let tools = &self.tables[1];
        let Some(index) = tools.columns.iter().position(|c| c.name == "name") else {
            return Vec::new();
        };
        tools
            .rows
            .iter()
            .filter_map(|row| match row.get(index) {
                Some(Cell::Text(Some(name))) => Some(name.clone()),
                _ => None,
            })
            .collect()
    }
}

impl Store {
    /// Every upstream of this (the platform's) database shared into a workspace, by
    /// upstream and workspace.
    pub async fn upstream_shares(&self) -> Result<Vec<UpstreamShare>, StoreError> {
        self.with_conn(|tx| Box::pin(shares_on(tx))).await
    }

    /// The rows of upstream `name`, read in one snapshot; `None` when there is none.
    pub async fn upstream_rows(&self, name: &str) -> Result<Option<UpstreamRows>, StoreError> {
        let mut snapshot = self.begin_snapshot().await?;
        let rows = UpstreamRows::read(self.backend(), &mut snapshot, name).await?;
        snapshot.rollback().await?;
        Ok(rows)
    }

    /// The upstreams of this database that are copies of another workspace's, each with the
    /// workspace it comes from.
    pub async fn shared_upstreams(&self) -> Result<BTreeMap<String, String>, StoreError> {
        self.with_conn(|tx| Box::pin(shared_upstreams_on(tx))).await
    }
}

pub(crate) async fn shares_on(tx: &mut Tx) -> Result<Vec<UpstreamShare>, StoreError> {
    let rows = sqlx::query(
        "SELECT upstream, workspace, shared_by, shared_at FROM upstream_shares \
         ORDER BY upstream, workspace",
    )
    .fetch_all(tx.conn())
    .await?;
    rows.iter()
        .map(|row| {
            let at: String = row.try_get("shared_at")?;
            Ok(UpstreamShare {
                upstream: row.try_get("upstream")?,
                workspace: row.try_get("workspace")?,
                shared_by: row.try_get("shared_by")?,
                shared_at: DateTime::parse_from_rfc3339(&at)
                    .map_err(|e| StoreError::Corrupt(format!("upstream share time `{at}`: {e}")))?
                    .with_timezone(&Utc),
            })
        })
        .collect()
}

/// Records that `share.upstream` is shared into `share.workspace` (again: nothing).
pub(crate) async fn put_share_on(tx: &mut Tx, share: &UpstreamShare) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO upstream_shares (upstream, workspace, shared_by, shared_at) \
         VALUES ($1, $2, $3, $4) ON CONFLICT (upstream, workspace) DO NOTHING",
    )
    .bind(&share.upstream)
    .bind(&share.workspace)
    .bind(&share.shared_by)
    .bind(stamp(share.shared_at))
    .execute(tx.conn())
    .await?;
    Ok(())
}

/// Forgets a share; whether there was one.
pub(crate) async fn delete_share_on(
    tx: &mut Tx,
    upstream: &str,
    workspace: &str,
) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM upstream_shares WHERE upstream = $1 AND workspace = $2")
        .bind(upstream)
        .bind(workspace)
        .execute(tx.conn())
        .await?;
    Ok(done.rows_affected() > 0)
}

/// The upstreams on `tx` that are copies, with the workspace each comes from.
pub(crate) async fn shared_upstreams_on(
    tx: &mut Tx,
) -> Result<BTreeMap<String, String>, StoreError> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT name, shared_from FROM upstreams WHERE shared_from IS NOT NULL ORDER BY name",
    )
    .fetch_all(tx.conn())
    .await?;
    Ok(rows.into_iter().collect())
}

/// The workspace the upstream of tool `tool` is shared from, when it is a copy.
pub(crate) async fn tool_shared_from_on(
    tx: &mut Tx,
    tool: &str,
) -> Result<Option<(String, String)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT u.name, u.shared_from FROM tools t JOIN upstreams u ON u.name = t.upstream \
         WHERE t.name = $1 AND u.shared_from IS NOT NULL",
    )
    .bind(tool)
    .fetch_optional(tx.conn())
    .await?)
}

/// The rows of the copy of `name` on `tx` (without its mark), to compare with the
/// platform's; `None` when there is no upstream of that name.
pub(crate) async fn copy_rows_on(
    tx: &mut Tx,
    backend: Backend,
    name: &str,
) -> Result<Option<UpstreamRows>, StoreError> {
    UpstreamRows::read(backend, tx.conn(), name).await
}

/// Writes `rows` as the copy of their upstream on `tx`, marked as shared from workspace
/// `from`, in place of the copy there was. Refused, with nothing written, when the
/// workspace has an upstream of that name of its own, or a tool of one of the upstream's
/// names from another upstream.
pub(crate) async fn project_on(
    tx: &mut Tx,
    rows: &UpstreamRows,
    from: &str,
) -> Result<(), StoreError> {
    let conn = tx.conn();
    let name = rows.upstream();
    let own: Option<Option<String>> =
        sqlx::query_scalar("SELECT shared_from FROM upstreams WHERE name = $1")
            .bind(name)
            .fetch_optional(&mut *conn)
            .await?;
    if let Some(None) = own {
        return Err(StoreError::Conflict(format!(
            "this workspace has an upstream named `{name}` of its own"
        )));
    }
    let mut taken = Vec::new();
    for tool in rows.tools() {
        let provider: Option<String> =
            sqlx::query_scalar("SELECT upstream FROM tools WHERE name = $1 AND upstream <> $2")
                .bind(&tool)
                .bind(name)
                .fetch_optional(&mut *conn)
                .await?;
        if let Some(provider) = provider {
            taken.push(format!("`{tool}` (from upstream `{provider}`)"));
        }
    }
    if !taken.is_empty() {
        return Err(StoreError::Conflict(format!(
            "this workspace has tools of the names upstream `{name}` provides: {}",
            taken.join(", ")
        )));
    }
    remove_copy_rows(conn, name).await?;
    for table in &rows.tables {
        table.insert_into(&mut *conn).await?;
    }
    sqlx::query("UPDATE upstreams SET shared_from = $1 WHERE name = $2")
        .bind(from)
        .bind(name)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Removes the copy of upstream `name` from `tx` (nothing when there is none; an
/// upstream of the workspace's own is never removed here).
pub(crate) async fn remove_copy_on(tx: &mut Tx, name: &str) -> Result<bool, StoreError> {
    let conn = tx.conn();
    let shared: Option<String> = sqlx::query_scalar(
        "SELECT name FROM upstreams WHERE name = $1 AND shared_from IS NOT NULL",
    )
    .bind(name)
    .fetch_optional(&mut *conn)
    .await?;
    if shared.is_none() {
        return Ok(false);
    }
    remove_copy_rows(conn, name).await?;
    Ok(true)
}

/// Children first, so no foreign key depends on its cascade.
async fn remove_copy_rows(conn: &mut AnyConnection, name: &str) -> Result<(), StoreError> {
    for (table, key) in UPSTREAM_TABLES.iter().rev() {
        sqlx::query(&format!("DELETE FROM {table} WHERE {key} = $1"))
            .bind(name)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}
