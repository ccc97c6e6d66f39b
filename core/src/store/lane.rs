//! The seam of the hot statements: the ones every governed call runs (the agent key and
//! token lookups, the session read, the audit append and its summary upsert).
//!
//! Each is written once, against [`Statements`], whose two implementations are the two
//! lanes a store reaches its database by: [`OnDirect`], a direct SQLite connection
//! (rusqlite, on the calling thread: see [`super::direct`]), and `AnyConnection`, sqlx's
//! pool (every PostgreSQL store, and SQLite outside the hot path). [`Store::lane`] is the
//! one place that picks between them.
//!
//! The direct lane never waits: its futures are ready at their first poll, so
//! [`ready`] runs them on the spot, inside the connection's `with`.

use std::future::Future;

use futures::FutureExt as _;
use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, AnyPool};

use super::direct::{self, Direct};
use super::{Store, StoreError};

/// A value bound to a `$N` mark of a statement of both lanes. Borrowed, so binding
/// allocates nothing on either lane.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Param<'a> {
    Int(i64),
    Text(Option<&'a str>),
}

impl From<i64> for Param<'_> {
    fn from(value: i64) -> Self {
        Self::Int(value)
    }
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(value: &'a str) -> Self {
        Self::Text(Some(value))
    }
}

impl<'a> From<Option<&'a str>> for Param<'a> {
    fn from(value: Option<&'a str>) -> Self {
        Self::Text(value)
    }
}

impl ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match *self {
            Self::Int(value) => ValueRef::Integer(value),
            Self::Text(Some(text)) => ValueRef::Text(text.as_bytes()),
            Self::Text(None) => ValueRef::Null,
        }))
    }
}

/// A row a hot statement returned, from either lane.
pub(crate) enum LaneRow<'r> {
    Direct(&'r rusqlite::Row<'r>),
    Pool(&'r AnyRow),
}

impl LaneRow<'_> {
    /// The column `name`, decoded the same way on both lanes.
    pub(crate) fn get<T: Column>(&self, name: &str) -> Result<T, StoreError> {
        Ok(match self {
            Self::Direct(row) => T::from_direct(row, name)?,
            Self::Pool(row) => T::from_pool(row, name)?,
        })
    }
}

/// A column type both lanes read.
pub(crate) trait Column: Sized {
    fn from_direct(row: &rusqlite::Row<'_>, name: &str) -> rusqlite::Result<Self>;
    fn from_pool(row: &AnyRow, name: &str) -> Result<Self, sqlx::Error>;
}

macro_rules! column {
    ($($ty:ty),*) => {$(
        impl Column for $ty {
            fn from_direct(row: &rusqlite::Row<'_>, name: &str) -> rusqlite::Result<Self> {
                row.get(name)
            }
            fn from_pool(row: &AnyRow, name: &str) -> Result<Self, sqlx::Error> {
                sqlx::Row::try_get(row, name)
            }
        }
    )*};
}

column!(i64, String, Option<String>, Option<i64>);

/// Flags are integers 0/1 on both backends.
impl Column for bool {
    fn from_direct(row: &rusqlite::Row<'_>, name: &str) -> rusqlite::Result<Self> {
        Ok(row.get::<_, i64>(name)? != 0)
    }
    fn from_pool(row: &AnyRow, name: &str) -> Result<Self, sqlx::Error> {
        super::flag(row, name)
    }
}

/// What a hot statement needs of a connection. The statements number their `$N` marks in
/// the order they first appear (see [`direct::prepare`]).
pub(crate) trait Statements {
    /// Runs a statement that returns no rows; how many rows it changed.
    async fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, StoreError>;

    /// The first row of a query, if any, decoded by `decode`.
    async fn fetch_optional<T>(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        decode: impl FnOnce(LaneRow<'_>) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError>;

    /// How many rows one [`MultiRow`] statement carries on this connection. On the pool's
    /// lane each statement is a round trip (to PostgreSQL, or to sqlx's SQLite worker
    /// thread), made inside the write lock when it writes, so rows share one; on the direct
    /// lane a statement is a function call, and one row per statement keeps rusqlite's
    /// statement cache to one text.
    fn rows_per_statement(&self) -> usize;
}

/// A multi-row statement, `HEAD (marks), (marks), … TAIL`, for 1 to
/// [`MultiRow::MAX_ROWS`] rows, its text made once per row count. Row `r`'s marks are the
/// template's shifted by `r` times the template's highest mark, so marks still appear in
/// increasing order (see [`direct::prepare`]).
pub(crate) struct MultiRow {
    /// `texts[n - 1]` carries `n` rows.
    texts: Vec<String>,
}

impl MultiRow {
    /// Also bounds the texts a pool connection prepares and caches for one statement.
    pub(crate) const MAX_ROWS: usize = 16;

    /// `marks` is one row's parenthesised values with `$1`… marks (repeats and constants
    /// allowed).
    pub(crate) fn new(head: &str, marks: &str, tail: &str) -> Self {
        let width = mark_numbers(marks).max().unwrap_or(0);
        let texts = (1..=Self::MAX_ROWS)
            .map(|rows| {
                let values: Vec<String> =
                    (0..rows).map(|r| shift_marks(marks, r * width)).collect();
                format!("{head}{}{tail}", values.join(", "))
            })
            .collect();
        Self { texts }
    }

    /// The text for `rows` rows (1 to [`Self::MAX_ROWS`]).
    pub(crate) fn text(&self, rows: usize) -> &str {
        &self.texts[rows.clamp(1, Self::MAX_ROWS) - 1]
    }
}

/// The numbers of the `$N` marks of `sql`, in order.
fn mark_numbers(sql: &str) -> impl Iterator<Item = usize> + '_ {
    sql.split('$').skip(1).filter_map(|rest| {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        rest[..digits].parse().ok()
    })
}

/// `sql` with every `$N` mark renumbered `$(N + by)`.
fn shift_marks(sql: &str, by: usize) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut parts = sql.split('$');
    out.push_str(parts.next().unwrap_or_default());
    for rest in parts {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        match rest[..digits].parse::<usize>() {
            Ok(n) => {
                out.push('$');
                out.push_str(&(n + by).to_string());
                out.push_str(&rest[digits..]);
            }
            Err(_) => {
                out.push('$');
                out.push_str(rest);
            }
        }
    }
    out
}

/// The direct lane: a rusqlite connection (or a transaction on one, through `Deref`).
pub(crate) struct OnDirect<'c>(pub(crate) &'c rusqlite::Connection);

impl Statements for OnDirect<'_> {
    fn rows_per_statement(&self) -> usize {
        1
    }

    async fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, StoreError> {
        let changed =
            direct::prepare(self.0, sql)?.execute(rusqlite::params_from_iter(params.iter()))?;
        Ok(u64::try_from(changed).unwrap_or(u64::MAX))
    }

    async fn fetch_optional<T>(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        decode: impl FnOnce(LaneRow<'_>) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let mut query = direct::prepare(self.0, sql)?;
        let mut rows = query.query(rusqlite::params_from_iter(params.iter()))?;
        rows.next()?
            .map(|row| decode(LaneRow::Direct(row)))
            .transpose()
    }
}

fn bound<'q>(
    sql: &'q str,
    params: &[Param<'q>],
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    params
        .iter()
        .fold(sqlx::query(sql), |query, param| match *param {
            Param::Int(value) => query.bind(value),
            Param::Text(text) => query.bind(text),
        })
}

/// The pool's lane: a connection of sqlx's pool, or a transaction (or savepoint) on one.
impl Statements for AnyConnection {
    fn rows_per_statement(&self) -> usize {
        MultiRow::MAX_ROWS
    }

    async fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, StoreError> {
        Ok(bound(sql, params).execute(self).await?.rows_affected())
    }

    async fn fetch_optional<T>(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        decode: impl FnOnce(LaneRow<'_>) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        bound(sql, params)
            .fetch_optional(self)
            .await?
            .as_ref()
            .map(|row| decode(LaneRow::Pool(row)))
            .transpose()
    }
}

/// Runs a future of the direct lane, which is ready at its first poll: rusqlite never
/// yields. A future that is not ready would be a bug of this module; it fails rather than
/// block.
pub(crate) fn ready<T>(work: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    work.now_or_never().unwrap_or_else(|| {
        Err(StoreError::Corrupt(
            "a statement of the direct lane waited; nothing was done".to_owned(),
        ))
    })
}

/// The lane of a store's hot reads, as [`Store::lane`] chose it.
#[derive(Clone, Copy)]
pub(crate) enum Lane<'s> {
    /// SQLite: inline, on a direct connection of the calling thread.
    Direct(&'s Direct),
    /// PostgreSQL: a connection of the pool.
    Pool(&'s AnyPool),
}

impl Lane<'_> {
    /// [`Statements::fetch_optional`] on a connection of this lane.
    pub(crate) async fn fetch_optional<T>(
        self,
        sql: &str,
        params: &[Param<'_>],
        decode: impl FnOnce(LaneRow<'_>) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        match self {
            Self::Direct(direct) => {
                direct.with(|conn| ready(OnDirect(conn).fetch_optional(sql, params, decode)))
            }
            Self::Pool(pool) => {
                let mut conn = pool.acquire().await?;
                conn.fetch_optional(sql, params, decode).await
            }
        }
    }
}

impl Store {
    /// The lane the hot statements take: the one place that chooses. A SQLite store reads
    /// on its direct connections, whatever else it runs on the pool; a PostgreSQL store
    /// has only the pool.
    pub(crate) fn lane(&self) -> Lane<'_> {
        match self.direct() {
            Some(direct) => Lane::Direct(direct),
            None => Lane::Pool(self.pool()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_row_statement_numbers_each_rows_marks_after_the_rows_before() {
        let insert = MultiRow::new("INSERT INTO t (a, b, c) VALUES ", "($1, $2, $2, 1, $3)", "");
        assert_eq!(
            insert.text(1),
            "INSERT INTO t (a, b, c) VALUES ($1, $2, $2, 1, $3)"
        );
        assert_eq!(
            insert.text(3),
            "INSERT INTO t (a, b, c) VALUES ($1, $2, $2, 1, $3), ($4, $5, $5, 1, $6), \
             ($7, $8, $8, 1, $9)"
        );
        // Marks of ten and more, and a tail that is not shifted.
        let wide = MultiRow::new("V ", "($9, $10)", " ON CONFLICT DO NOTHING");
        assert_eq!(
            wide.text(2),
            "V ($9, $10), ($19, $20) ON CONFLICT DO NOTHING"
        );
        assert_eq!(
            wide.text(MultiRow::MAX_ROWS + 5),
            wide.text(MultiRow::MAX_ROWS)
        );
    }
}
