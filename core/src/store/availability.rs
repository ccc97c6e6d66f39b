//! Which store failures mean "the database cannot serve right now" rather than "this
//! statement or its data is wrong".
//!
//! The difference is what a caller is told: an unavailable database (a restart, a lost
//! connection, a pool with no connection free within its wait) is transient and not the
//! request's fault, so the MCP endpoint answers it as such (503 at admission, a retryable
//! error in a call) instead of a bare internal error; anything else stays an internal error.

use sqlx::error::DatabaseError;
use sqlx::postgres::PgDatabaseError;
use sqlx::sqlite::SqliteError;

use super::StoreError;

impl StoreError {
    /// Whether the database could not serve the statement at all right now: no pool
    /// connection free within the acquire timeout, the connection refused or lost, the
    /// server shutting down or starting up, too many connections, or SQLite's file busy
    /// past its busy timeout. What the failed transaction wrote is rolled back, but for the
    /// one case no client can rule out: a connection lost while its COMMIT was on the way,
    /// which the server may have committed.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Unavailable(_) => true,
            Self::Sqlx(error) | Self::Open { source: error, .. } => sqlx_unavailable(error),
            Self::Sqlite(error) => matches!(
                error.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            ),
            _ => false,
        }
    }
}

fn sqlx_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(error) => database_unavailable(error.as_ref()),
        _ => false,
    }
}

/// A server's refusal that is about the server, not the statement.
fn database_unavailable(error: &dyn DatabaseError) -> bool {
    if let Some(error) = error.try_downcast_ref::<PgDatabaseError>() {
        return postgres_unavailable(error.code());
    }
    if let Some(error) = error.try_downcast_ref::<SqliteError>() {
        // Extended result codes keep the primary code in their low byte.
        return error
            .code()
            .and_then(|code| code.parse::<i32>().ok())
            .is_some_and(|code| {
                matches!(
                    code & 0xff,
                    rusqlite::ffi::SQLITE_BUSY | rusqlite::ffi::SQLITE_LOCKED
                )
            });
    }
    false
}

/// SQLSTATEs of a PostgreSQL server that cannot serve now (Appendix A of its manual):
/// class 08 (connection exception), 53300 (too many connections), 57P01 (admin shutdown:
/// a restart ended the connection), 57P02 (crash shutdown), 57P03 (cannot connect now:
/// starting up or shutting down).
fn postgres_unavailable(sqlstate: &str) -> bool {
    sqlstate.starts_with("08") || matches!(sqlstate, "53300" | "57P01" | "57P02" | "57P03")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_restart_a_lost_connection_and_an_overloaded_server_are_unavailable_and_data_errors_are_not()
     {
        for state in ["08006", "08001", "53300", "57P01", "57P02", "57P03"] {
            assert!(postgres_unavailable(state), "{state}");
        }
        // Unique violation, serialization failure, undefined table, lock not available.
        for state in ["23505", "40001", "42P01", "55P03"] {
            assert!(!postgres_unavailable(state), "{state}");
        }
    }

    #[test]
    fn a_pool_wait_that_timed_out_is_unavailable_and_a_missing_row_is_not() {
        assert!(StoreError::Sqlx(sqlx::Error::PoolTimedOut).is_unavailable());
        assert!(StoreError::Unavailable("gone".to_owned()).is_unavailable());
        assert!(!StoreError::Sqlx(sqlx::Error::RowNotFound).is_unavailable());
        assert!(!StoreError::Conflict("stale".to_owned()).is_unavailable());
        assert!(!StoreError::NotFound("role".to_owned()).is_unavailable());
    }

    #[tokio::test]
    async fn a_database_nothing_listens_for_is_unavailable() {
        // A port that was free a moment ago: the connection is refused.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pool = sqlx::postgres::PgPoolOptions::new()
            .acquire_timeout(Duration::from_secs(2))
            .connect_lazy(&format!("postgres://postgres@127.0.0.1:{port}/none"))
            .unwrap();
        let error = sqlx::query("SELECT 1").execute(&pool).await.unwrap_err();
        let error = StoreError::Sqlx(error);
        assert!(error.is_unavailable(), "{error:?}");
    }

    #[tokio::test]
    async fn a_sqlite_file_held_by_another_writer_past_the_busy_timeout_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("busy.db");
        let holder = rusqlite::Connection::open(&path).unwrap();
        holder
            .execute_batch("CREATE TABLE t (x INTEGER); BEGIN IMMEDIATE; INSERT INTO t VALUES (1);")
            .unwrap();
        let other = rusqlite::Connection::open(&path).unwrap();
        other.busy_timeout(Duration::from_millis(10)).unwrap();
        let error = other.execute("INSERT INTO t VALUES (2)", []).unwrap_err();
        assert!(StoreError::Sqlite(error).is_unavailable());

        let url = format!("sqlite://{}", path.display());
        let options: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .connect_with(options.busy_timeout(Duration::from_millis(10)))
            .await
            .unwrap();
        let error = sqlx::query("INSERT INTO t VALUES (3)")
            .execute(&pool)
            .await
            .unwrap_err();
        let error = StoreError::Sqlx(error);
        assert!(error.is_unavailable(), "{error:?}");
    }
}
