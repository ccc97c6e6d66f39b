//! Copying a whole deployment from one database to another (`skillgate migrate`): a SQLite
//! deployment into an empty PostgreSQL database, or into another SQLite file (a backup).
//!
//! Every row of every table is copied as stored, audit chain included (events, anchors,
//! checkpoints and summaries keep their seqs and hashes, so the copy verifies with the same
//! tip), in one write transaction on the target: a failure leaves it as empty as it was.
//! Column lists come from the target's schema, values are read from the source per the
//! target column's type and inserted with bound values, in batches.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use futures::TryStreamExt as _;
use sqlx::any::AnyRow;
use sqlx::{Any, AnyConnection, Row as _, Transaction};

use super::{Backend, Store, StoreError};

/// Every table `copy_into` copies, parents before children (foreign keys are checked as
/// each batch is inserted): the catalog (upstreams before tools, skills before their
/// versions, candidates and patterns), console users before the scopes they may consent
/// to, agent keys before OAuth grants, then the rest, and the audit chain last.
///
/// A migration that adds a table must add it here or to [`NOT_COPIED`]: `copy_into`
/// refuses a source with a table neither names, and the `store_copy` tests compare both
/// lists with the tables of both schemas.
pub const COPIED_TABLES: &[&str] = &[
    "upstreams",
    "tools",
    "skills",
    "skill_versions",
    "roles",
    "scopes",
    "inspection_policy",
    "upstream_identity",
    "skill_candidates",
    "wiki_patterns",
    "console_users",
    "console_user_identities",
    "console_api_tokens",
    "console_user_scopes",
    "login_failures",
    "agent_keys",
    "oauth_grants",
    "external_subjects",
    "agent_key_reveals",
    "governance_sessions",
    "skill_feedback",
    "holds",
    "hold_notifiers",
    "hold_notifications",
    "call_tasks",
    "rate_limit_slots",
    "oauth_clients",
    "oauth_requests",
    "oauth_codes",
    "oauth_tokens",
    "compliance_settings",
    "workspaces",
    "upstream_shares",
    "audit_events",
    "audit_anchors",
    "audit_checkpoints",
    "audit_session_summaries",
];

/// The tables of the schema that are not copied, and why.
pub const NOT_COPIED: &[(&str, &str)] = &[
    (
        "_sqlx_migrations",
        "the target's own migrations created its schema",
    ),
    (
        "catalog_generation",
        "the target keeps its own counter, moved by the copy's catalog rows",
    ),
    (
        "console_sessions",
        "console sign-ins: people sign in to the console again",
    ),
    (
        "console_sso_logins",
        "sign-ins sent to the provider and not back yet: people sign in again",
    ),
    (
        "this_workspace",
        "each database's own: the workspace it was created for, written when it is created",
    ),
];

/// At most this many rows per `INSERT`, and at most this many bound values: below
/// PostgreSQL's 65535 parameters and SQLite's 32766 variables.
const BATCH_ROWS: usize = 500;
const BATCH_PARAMS: usize = 30_000;
/// A batch is sent once its text and blobs reach this many bytes, so a chain of large
/// payloads is not held in memory whole.
const BATCH_BYTES: usize = 8 << 20;

/// What a copy did: the rows of each table, in copy order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyReport {
    pub tables: Vec<TableRows>,
    /// The tables left out, and why (see [`NOT_COPIED`]).
    pub not_copied: &'static [(&'static str, &'static str)],
}

/// The rows copied into one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRows {
    pub table: &'static str,
    pub rows: u64,
}

impl CopyReport {
    /// The rows copied into `table`; `None` for a table that is not copied.
    pub fn rows(&self, table: &str) -> Option<u64> {
        self.tables
            .iter()
            .find(|t| t.table == table)
            .map(|t| t.rows)
    }

    /// The rows copied into every table together.
    pub fn total_rows(&self) -> u64 {
        self.tables.iter().map(|t| t.rows).sum()
    }
}

/// How a column's values are read and bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Integer,
    Text,
    Blob,
    Double,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Column {
    pub(super) name: String,
    kind: Kind,
}

/// One value in transit. Not `Debug`: a row may hold an upstream's stored credentials.
#[derive(Clone, PartialEq)]
pub(super) enum Cell {
    Integer(Option<i64>),
    Text(Option<String>),
    Blob(Option<Vec<u8>>),
    Double(Option<f64>),
}

impl Cell {
    fn read(row: &AnyRow, index: usize, kind: Kind) -> Result<Self, sqlx::Error> {
        Ok(match kind {
            Kind::Integer => Cell::Integer(row.try_get(index)?),
            Kind::Text => Cell::Text(row.try_get(index)?),
            Kind::Blob => Cell::Blob(row.try_get(index)?),
            Kind::Double => Cell::Double(row.try_get(index)?),
        })
    }

    /// Roughly what the value weighs in memory.
    fn bytes(&self) -> usize {
        match self {
            Cell::Text(Some(text)) => text.len(),
            Cell::Blob(Some(blob)) => blob.len(),
            _ => 8,
        }
    }
}

impl Store {
    /// Copies every row of this store's database into `target`, which must hold no row in
    /// any table of [`COPIED_TABLES`] (a freshly migrated database), in one write
    /// transaction on the target. Each identity sequence of a PostgreSQL target is moved
    /// past the copied ids. The source is read in one snapshot; stop the servers on it
    /// first, since what they write afterwards is not in the copy.
    #[tracing::instrument(skip_all)]
    pub async fn copy_into(&self, target: &Store) -> Result<CopyReport, StoreError> {
        let unknown: Vec<String> = self
            .table_names()
            .await?
            .into_iter()
            .filter(|table| !is_listed(table))
            .collect();
        if !unknown.is_empty() {
            return Err(StoreError::Conflict(format!(
                "the source database has tables this version of Skillgate does not know \
                 ({}); their rows would not be copied, so nothing was copied",
                unknown.join(", ")
            )));
        }

        let (mut tx, _held) = target.begin_write().await?;
        let mut occupied = Vec::new();
        for table in COPIED_TABLES {
            let sql = format!(
                "SELECT COUNT(*) FROM (SELECT 1 FROM {} LIMIT 1) AS any_row",
                quoted(table)
            );
            let rows: i64 = sqlx::query_scalar(&sql).fetch_one(&mut *tx).await?;
            if rows > 0 {
                occupied.push(*table);
            }
        }
        if !occupied.is_empty() {
            return Err(StoreError::Conflict(format!(
                "the target database is not empty ({} hold rows): a copy goes into an empty, \
                 freshly created database only, so nothing was copied",
                occupied.join(", ")
            )));
        }

        let mut source = self.begin_snapshot().await?;
        let mut tables = Vec::with_capacity(COPIED_TABLES.len());
        for &table in COPIED_TABLES {
            let rows = copy_table(
                table,
                self.backend(),
                &mut source,
                target.backend(),
                &mut tx,
            )
            .await?;
            tracing::info!(table, rows, "copied");
            tables.push(TableRows { table, rows });
        }
        if target.backend() == Backend::Postgres {
            move_identity_sequences(&mut tx).await?;
        }
        source.rollback().await?;
        tx.commit().await?;
        Ok(CopyReport {
            tables,
            not_copied: NOT_COPIED,
        })
    }

    /// The tables of this store's schema, by name: on PostgreSQL the base tables of the
    /// current schema, on SQLite every table but SQLite's own.
    pub async fn table_names(&self) -> Result<Vec<String>, StoreError> {
        let sql = match self.backend() {
            Backend::Sqlite => {
                "SELECT name FROM sqlite_master WHERE type = 'table' \
                 AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
            }
            Backend::Postgres => {
                "SELECT CAST(table_name AS TEXT) FROM information_schema.tables \
                 WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' \
                 ORDER BY table_name"
            }
        };
        Ok(sqlx::query_scalar(sql).fetch_all(self.pool()).await?)
    }

    /// A read transaction that sees one snapshot of the database to its end.
    pub(super) async fn begin_snapshot(&self) -> Result<Transaction<'static, Any>, StoreError> {
        Ok(match self.backend() {
            // A deferred transaction on a WAL file reads one snapshot from its first read.
            Backend::Sqlite => self.pool().begin_with("BEGIN").await?,
            Backend::Postgres => {
                self.pool()
                    .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    .await?
            }
        })
    }
}

fn is_listed(table: &str) -> bool {
    COPIED_TABLES.contains(&table) || NOT_COPIED.iter().any(|(name, _)| *name == table)
}

/// Copies one table; returns its rows.
async fn copy_table(
    table: &'static str,
    source_backend: Backend,
    source: &mut AnyConnection,
    target_backend: Backend,
    target: &mut AnyConnection,
) -> Result<u64, StoreError> {
    let columns = columns(target_backend, target, table).await?;
    if columns.is_empty() {
        return Err(StoreError::Conflict(format!(
            "the target database has no table {table}"
        )));
    }
    // By name only: the target's column decides how a value is read.
    let source_columns = column_types(source_backend, source, table).await?;
    let wanted: BTreeSet<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    let offered: BTreeSet<&str> = source_columns
        .iter()
        .map(|(name, _)| name.as_str())
        .collect();
    if wanted != offered {
        let missing: Vec<&str> = wanted.difference(&offered).copied().collect();
        let extra: Vec<&str> = offered.difference(&wanted).copied().collect();
        return Err(StoreError::Conflict(format!(
            "table {table} has other columns in the source than in the target \
             (only in the target: [{}]; only in the source: [{}]), so nothing was copied",
            missing.join(", "),
            extra.join(", ")
        )));
    }

    let list = column_list(&columns);
    let order = source_order(source_backend, source, table).await?;
    let select = format!("SELECT {list} FROM {}{order}", quoted(table));
    let per_batch = (BATCH_PARAMS / columns.len()).clamp(1, BATCH_ROWS);

    let mut copied = 0u64;
    let mut batch: Vec<Vec<Cell>> = Vec::with_capacity(per_batch);
    let mut bytes = 0usize;
    let mut rows = sqlx::query(&select).fetch(&mut *source);
    while let Some(row) = rows.try_next().await? {
        let mut cells = Vec::with_capacity(columns.len());
        for (index, column) in columns.iter().enumerate() {
            let cell = Cell::read(&row, index, column.kind).map_err(|error| {
                StoreError::Corrupt(format!("{table}.{}: {error}", column.name))
            })?;
            bytes += cell.bytes();
            cells.push(cell);
        }
        batch.push(cells);
        if batch.len() == per_batch || bytes >= BATCH_BYTES {
            copied += insert(table, &list, columns.len(), &mut batch, target).await?;
            bytes = 0;
        }
    }
    drop(rows);
    copied += insert(table, &list, columns.len(), &mut batch, target).await?;
    Ok(copied)
}

/// Some rows of one table, read with the columns they were read as.
#[derive(Clone, PartialEq)]
pub(super) struct Rows {
    pub(super) table: &'static str,
    pub(super) columns: Vec<Column>,
    pub(super) rows: Vec<Vec<Cell>>,
}

impl Rows {
    /// Reads the rows of `table` whose `key` column is `value`, in key order, with every
    /// column but those in `skip`: the rows of one entity, to be written into another
    /// database of the same schema ([`Self::insert_into`]).
    pub(super) async fn read(
        backend: Backend,
        conn: &mut AnyConnection,
        table: &'static str,
        key: &str,
        value: &str,
        skip: &[&str],
    ) -> Result<Self, StoreError> {
        let columns: Vec<Column> = columns(backend, conn, table)
            .await?
            .into_iter()
            .filter(|c| !skip.contains(&c.name.as_str()))
            .collect();
        let list = column_list(&columns);
        let order = source_order(backend, conn, table).await?;
        let select = format!(
            "SELECT {list} FROM {} WHERE {} = $1{order}",
            quoted(table),
            quoted(key)
        );
        let found = sqlx::query(&select)
            .bind(value)
            .fetch_all(&mut *conn)
            .await?;
        let mut rows = Vec::with_capacity(found.len());
        for row in &found {
            let mut cells = Vec::with_capacity(columns.len());
            for (index, column) in columns.iter().enumerate() {
                cells.push(Cell::read(row, index, column.kind).map_err(|error| {
                    StoreError::Corrupt(format!("{table}.{}: {error}", column.name))
                })?);
            }
            rows.push(cells);
        }
        Ok(Self {
            table,
            columns,
            rows,
        })
    }

    /// Inserts these rows into the same table of `conn`'s database.
    pub(super) async fn insert_into(&self, conn: &mut AnyConnection) -> Result<u64, StoreError> {
        let list = column_list(&self.columns);
        let mut inserted = 0;
        for chunk in self
            .rows
            .chunks((BATCH_PARAMS / self.columns.len().max(1)).clamp(1, BATCH_ROWS))
        {
            let mut batch = chunk.to_vec();
            inserted += insert(self.table, &list, self.columns.len(), &mut batch, conn).await?;
        }
        Ok(inserted)
    }
}

fn column_list(columns: &[Column]) -> String {
    columns
        .iter()
        .map(|c| quoted(&c.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Inserts and empties `batch`; returns the rows inserted.
async fn insert(
    table: &str,
    list: &str,
    width: usize,
    batch: &mut Vec<Vec<Cell>>,
    target: &mut AnyConnection,
) -> Result<u64, StoreError> {
    if batch.is_empty() {
        return Ok(0);
    }
    let mut sql = format!("INSERT INTO {} ({list}) VALUES ", quoted(table));
    let mut n = 0;
    for row in 0..batch.len() {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        for column in 0..width {
            n += 1;
            let separator = if column == 0 { "" } else { ", " };
            let _ = write!(sql, "{separator}${n}");
        }
        sql.push(')');
    }
    let expected = batch.len() as u64;
    let mut query = sqlx::query(&sql);
    for cell in batch.drain(..).flatten() {
        query = match cell {
            Cell::Integer(v) => query.bind(v),
            Cell::Text(v) => query.bind(v),
            Cell::Blob(v) => query.bind(v),
            Cell::Double(v) => query.bind(v),
        };
    }
    let inserted = query.execute(&mut *target).await?.rows_affected();
    if inserted != expected {
        return Err(StoreError::Conflict(format!(
            "the target stored {inserted} of {expected} rows of {table} (a trigger or rule \
             of the target skipped some), so nothing was copied"
        )));
    }
    Ok(inserted)
}

/// The columns of `table` a copy writes, in the target schema's order, with how each is
/// read and bound.
async fn columns(
    backend: Backend,
    conn: &mut AnyConnection,
    table: &str,
) -> Result<Vec<Column>, StoreError> {
    column_types(backend, conn, table)
        .await?
        .into_iter()
        .map(|(name, declared)| {
            let kind = match backend {
                Backend::Sqlite => sqlite_kind(&declared),
                Backend::Postgres => postgres_kind(&declared),
            }
            .ok_or_else(|| {
                StoreError::Conflict(format!(
                    "column {table}.{name} has type {declared}, which a copy cannot carry"
                ))
            })?;
            Ok(Column { name, kind })
        })
        .collect()
}

/// The columns of `table` and their declared types, in the schema's order; on PostgreSQL
/// without `GENERATED ALWAYS` identity columns (the database numbers those itself, in
/// insertion order, which is the source's order).
async fn column_types(
    backend: Backend,
    conn: &mut AnyConnection,
    table: &str,
) -> Result<Vec<(String, String)>, StoreError> {
    let sql = match backend {
        Backend::Sqlite => "SELECT name, type FROM pragma_table_info($1) ORDER BY cid",
        Backend::Postgres => {
            "SELECT CAST(column_name AS TEXT), CAST(data_type AS TEXT) \
             FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = $1 \
               AND is_generated = 'NEVER' \
               AND NOT (is_identity = 'YES' AND identity_generation = 'ALWAYS') \
             ORDER BY ordinal_position"
        }
    };
    Ok(sqlx::query_as(sql)
        .bind(table)
        .fetch_all(&mut *conn)
        .await?)
}

/// The `ORDER BY` that reads the source in the order its rows were written, which tables
/// without a key of their own (and PostgreSQL's `rowid` of the copy) keep: SQLite's rowid,
/// else a PostgreSQL source's `rowid` column or primary key.
async fn source_order(
    backend: Backend,
    conn: &mut AnyConnection,
    table: &str,
) -> Result<String, StoreError> {
    if backend == Backend::Sqlite {
        return Ok(" ORDER BY rowid".to_owned());
    }
    let has_rowid: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name = $1 AND column_name = 'rowid'",
    )
    .bind(table)
    .fetch_one(&mut *conn)
    .await?;
    let keys: Vec<String> = if has_rowid > 0 {
        vec!["rowid".to_owned()]
    } else {
        sqlx::query_scalar(
            "SELECT CAST(k.column_name AS TEXT) \
             FROM information_schema.table_constraints c \
             JOIN information_schema.key_column_usage k \
               ON k.constraint_schema = c.constraint_schema \
              AND k.constraint_name = c.constraint_name \
             WHERE c.table_schema = current_schema() AND c.table_name = $1 \
               AND c.constraint_type = 'PRIMARY KEY' \
             ORDER BY k.ordinal_position",
        )
        .bind(table)
        .fetch_all(&mut *conn)
        .await?
    };
    if keys.is_empty() {
        return Ok(String::new());
    }
    let keys: Vec<String> = keys.iter().map(|k| quoted(k)).collect();
    Ok(format!(" ORDER BY {}", keys.join(", ")))
}

/// Moves every `GENERATED BY DEFAULT` identity sequence of a copied table past the ids the
/// copy inserted, so the next row the application adds gets a fresh id.
async fn move_identity_sequences(conn: &mut AnyConnection) -> Result<(), StoreError> {
    let identities: Vec<(String, String)> = sqlx::query_as(
        "SELECT CAST(table_name AS TEXT), CAST(column_name AS TEXT) \
         FROM information_schema.columns \
         WHERE table_schema = current_schema() AND is_identity = 'YES' \
           AND identity_generation = 'BY DEFAULT' \
         ORDER BY table_name, column_name",
    )
    .fetch_all(&mut *conn)
    .await?;
    for (table, column) in identities {
        if !COPIED_TABLES.contains(&table.as_str()) {
            continue;
        }
        // `false`: the next value handed out is exactly MAX + 1 (1 for an empty table).
        let sql = format!(
            "SELECT setval(pg_get_serial_sequence($1, $2), COALESCE(MAX({}), 0) + 1, false) \
             FROM {}",
            quoted(&column),
            quoted(&table)
        );
        let next: i64 = sqlx::query_scalar(&sql)
            .bind(quoted(&table))
            .bind(&column)
            .fetch_one(&mut *conn)
            .await?;
        tracing::debug!(table, column, next, "moved the identity sequence");
    }
    Ok(())
}

/// A column's kind from its SQLite declared type, by SQLite's affinity rules.
fn sqlite_kind(declared: &str) -> Option<Kind> {
    let t = declared.to_ascii_uppercase();
    if t.contains("INT") {
        Some(Kind::Integer)
    } else if t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") {
        Some(Kind::Text)
    } else if t.contains("BLOB") || t.is_empty() {
        Some(Kind::Blob)
    } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
        Some(Kind::Double)
    } else {
        None
    }
}

/// A column's kind from its PostgreSQL `information_schema` data type.
fn postgres_kind(data_type: &str) -> Option<Kind> {
    match data_type {
        "bigint" | "integer" | "smallint" => Some(Kind::Integer),
        "text" | "character varying" | "character" => Some(Kind::Text),
        "bytea" => Some(Kind::Blob),
        "double precision" | "real" => Some(Kind::Double),
        _ => None,
    }
}

/// An identifier, double-quoted for both backends.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
