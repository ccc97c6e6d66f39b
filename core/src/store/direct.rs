//! The hot path's own SQLite connections (rusqlite), beside sqlx's pool.
//!
//! sqlx runs each SQLite connection on a worker thread of its own, so every statement is a
//! hand-off to that thread and back, and on a virtual machine such a wake-up costs more
//! than the statement (BENCHMARKS.md, "Where a governed call's time goes"). The statements
//! every governed call runs go through here instead, on the thread that needs them:
//!
//! - the point reads (the agent key by its hash, the session by its id) run inline on the
//!   calling Tokio worker: a primary-key read of a WAL database takes microseconds and
//!   never waits for a writer;
//! - audit appends run on the audit writer's own thread ([`crate::audit::AuditLog`]), which
//!   may block on `fsync` and on the write lock without stalling a Tokio worker;
//! - the whole audit walk's ranges ([`crate::audit::checkpoint::walk`]) read millions of
//!   rows each on a blocking thread, where a hand-off per row would cost most of the walk.
//!
//! Writes that can wait for the lock never run inline on a Tokio worker; everything else
//! stays on sqlx.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{CachedStatement, Connection, OpenFlags};

use super::StoreError;

/// Idle connections kept for reuse; more are opened when more threads read at once.
const MAX_IDLE: usize = 4;

/// Connections to one database file, handed out one caller at a time.
pub(crate) struct Direct {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direct").field("path", &self.path).finish()
    }
}

impl Direct {
    /// Connections are opened on first use: the file must already exist (sqlx creates and
    /// migrates it).
    pub(crate) fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            idle: Mutex::new(Vec::new()),
        }
    }

    fn connect(&self) -> Result<Connection, StoreError> {
        let open = || -> rusqlite::Result<Connection> {
            let conn = Connection::open_with_flags(
                &self.path,
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?;
            // The same settings as sqlx's connections (store/mod.rs): an acknowledged
            // append survives a power loss.
            conn.busy_timeout(Duration::from_secs(10))?;
            conn.pragma_update(None, "synchronous", "FULL")?;
            conn.pragma_update(None, "foreign_keys", true)?;
            Ok(conn)
        };
        open().map_err(|source| StoreError::OpenDirect {
            path: self.path.clone(),
            source,
        })
    }

    /// Runs `work` on a connection of its own; the connection goes back for reuse after.
    pub(crate) fn with<T>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let pooled = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut conn = match pooled {
            Some(conn) => conn,
            None => self.connect()?,
        };
        let outcome = work(&mut conn);
        // A connection left inside a transaction (an error between BEGIN and COMMIT that
        // rusqlite could not roll back) is closed, never reused.
        if conn.is_autocommit() {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            if idle.len() < MAX_IDLE {
                idle.push(conn);
            }
        }
        outcome
    }
}

/// Prepares (and caches) a statement of the direct lane. The same text runs on sqlx too,
/// and the two number `$N` marks differently: sqlx by their digits, rusqlite in the order
/// the marks first appear. So a statement of both lanes must number its marks in the order
/// they first appear, or rusqlite binds the values to the wrong marks.
pub(crate) fn prepare<'c>(
    conn: &'c Connection,
    sql: &str,
) -> rusqlite::Result<CachedStatement<'c>> {
    debug_assert!(
        numbered_in_order(sql),
        "`$N` marks out of first-appearance order: {sql}"
    );
    conn.prepare_cached(sql)
}

/// True when each `$N` that first appears is the next number (`$1 … $2 … $1 … $3`).
fn numbered_in_order(sql: &str) -> bool {
    let mut next = 1u32;
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let Ok(n) = digits.parse::<u32>() else {
            continue;
        };
        if n == next {
            next += 1;
        } else if n > next {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    #[test]
    fn marks_must_first_appear_in_their_numbers_order() {
        use super::numbered_in_order;
        assert!(numbered_in_order("SELECT $1, $2 WHERE a = $1 AND b = $3"));
        assert!(numbered_in_order("SELECT '$.role' FROM t WHERE x = $1"));
        assert!(!numbered_in_order("SELECT $2 WHERE a = $1"));
    }

    #[tokio::test]
    async fn a_direct_read_sees_what_sqlx_committed_a_moment_before() {
        let store = crate::store::test_store().await;
        sqlx::query("CREATE TABLE t (v TEXT)")
            .execute(store.pool())
            .await
            .unwrap();
        sqlx::query("INSERT INTO t VALUES ('committed')")
            .execute(store.pool())
            .await
            .unwrap();
        let seen: String = store
            .direct()
            .expect("a SQLite store")
            .with(|conn| Ok(conn.query_row("SELECT v FROM t", [], |row| row.get(0))?))
            .unwrap();
        assert_eq!(seen, "committed");
    }

    #[tokio::test]
    async fn a_connection_left_in_a_transaction_is_not_handed_out_again() {
        let store = crate::store::test_store().await;
        let direct = store.direct().expect("a SQLite store");
        direct
            .with(|conn| {
                conn.execute_batch("BEGIN")?;
                Ok(())
            })
            .unwrap();
        let in_transaction = direct.with(|conn| Ok(!conn.is_autocommit())).unwrap();
        assert!(!in_transaction, "a fresh connection is handed out");
    }
}
