//! The store: every SQL statement of Skillgate lives under this module.
//!
//! SQLite (WAL) is the embedded default. Keeping SQL here, behind typed methods, is what
//! lets a PostgreSQL backend be an addition rather than a rewrite.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

pub mod audit;
pub mod audit_query;
pub mod catalog;
pub mod catalog_code;
mod direct;
pub mod holds;
pub mod keys;
pub mod oauth;
pub mod reveals;
pub mod revisions;
pub mod sessions;
pub(crate) mod users;

pub use users::{LoginAttemptCounts, LoginBudget, UserRecord};

/// Errors at the store boundary.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported database URL `{0}`: use sqlite://PATH")]
    UnsupportedUrl(String),
    #[error("cannot create the database directory {path}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the database file {path}")]
    Open { path: PathBuf, source: sqlx::Error },
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("cannot open the database file {path}")]
    OpenDirect {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("database error: {0}")]
    Sqlx(#[from] sqlx::Error),
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("{0}")]
    Conflict(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Invalid(#[from] crate::model::CatalogError),
    #[error("stored data is unreadable: {0}")]
    Corrupt(String),
}

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// A handle to the database. Cheap to clone (the pools are reference counted).
#[derive(Clone, Debug)]
pub struct Store {
    pool: SqlitePool,
    /// The hot path's connections (see [`direct`]).
    direct: Arc<direct::Direct>,
    /// The directory of a `sqlite::memory:` database, removed with the last clone. Declared
    /// last: fields drop in order, so the connections close before it goes.
    _ephemeral: Option<Arc<tempfile::TempDir>>,
}

impl Store {
    /// Opens (creating if needed) the database at `url` and applies pending migrations.
    ///
    /// `sqlite://PATH` is a database file; `sqlite::memory:` is a private, throwaway one (a
    /// file in a temporary directory that is removed with the last clone of the store), so
    /// it behaves exactly like a file database, direct connections included.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let (options, path, ephemeral) = match sqlite_options(url)? {
            (options, Some(path)) => (options, path, None),
            (_, None) => {
                let dir = tempfile::Builder::new()
                    .prefix("skillgate-memory-")
                    .tempdir()
                    .map_err(|source| StoreError::CreateDir {
                        path: std::env::temp_dir(),
                        source,
                    })?;
                let path = dir.path().join("skillgate.db");
                let (options, _) = sqlite_options(&format!("sqlite://{}", path.display()))?;
                (options, path, Some(Arc::new(dir)))
            }
        };
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let pool = SqlitePoolOptions::new()
            // A SQLite connection is a file handle, not a socket that can drop: the default
            // check before every acquire was one more round trip to the connection's worker
            // thread on every query of the hot path.
            .test_before_acquire(false)
            .max_connections(8)
            .idle_timeout(Some(Duration::from_secs(600)))
            .max_lifetime(Some(Duration::from_secs(3600)))
            .connect_with(options)
            .await
            .map_err(|source| StoreError::Open {
                path: path.clone(),
                source,
            })?;
        MIGRATOR.run(&pool).await?;
        let store = Self {
            pool,
            direct: Arc::new(direct::Direct::new(&path)),
            _ephemeral: ephemeral,
        };
        catalog::pin_tools_stored_before_pins(&store).await?;
        Ok(store)
    }

    /// The underlying pool, for the session store and the store's own submodules.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    pub(crate) fn direct(&self) -> &direct::Direct {
        &self.direct
    }

    /// True when the database answers a trivial query.
    pub async fn ping(&self) -> bool {
        sqlx::query_scalar::<_, i64>("SELECT 1")
            .fetch_one(&self.pool)
            .await
            .is_ok()
    }
}

fn sqlite_options(url: &str) -> Result<(SqliteConnectOptions, Option<PathBuf>), StoreError> {
    let unsupported = || StoreError::UnsupportedUrl(url.to_owned());
    if !url.starts_with("sqlite:") {
        return Err(unsupported());
    }
    let options = SqliteConnectOptions::from_str(url)
        .map_err(|_| unsupported())?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // FULL fsyncs every commit: an audit event that was acknowledged survives a power
        // loss, which DESIGN.md requires of the allowed-event written before an upstream call.
        .synchronous(SqliteSynchronous::Full)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(10));
    let path = options.get_filename();
    let path = if path.as_os_str() == ":memory:" || url.contains(":memory:") {
        None
    } else {
        Some(path.to_path_buf())
    };
    Ok((options, path))
}

/// The one timestamp format of the database: RFC 3339, UTC, microseconds, `Z`.
/// Fixed width, so text comparison in SQL orders timestamps correctly.
pub fn stamp(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

#[cfg(test)]
pub(crate) async fn test_store() -> Store {
    Store::open("sqlite::memory:")
        .await
        .expect("in-memory store opens")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_file_database_is_created_with_its_directory_and_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/dir/sg.db");
        let store = Store::open(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        assert!(store.ping().await);
        assert!(path.exists());
    }

    #[tokio::test]
    async fn a_memory_database_is_private_to_its_store_and_removed_with_its_last_clone() {
        let first = Store::open("sqlite::memory:").await.unwrap();
        let second = Store::open("sqlite::memory:").await.unwrap();
        sqlx::query("CREATE TABLE only_in_first (v INTEGER)")
            .execute(first.pool())
            .await
            .unwrap();
        let in_second: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE name = 'only_in_first'")
                .fetch_one(second.pool())
                .await
                .unwrap();
        assert_eq!(in_second, 0, "two memory stores share nothing");
        let dir = first._ephemeral.as_ref().unwrap().path().to_path_buf();
        assert!(dir.join("skillgate.db").exists());
        let clone = first.clone();
        drop(first);
        assert!(dir.exists(), "a clone keeps the database");
        clone.pool().close().await;
        drop(clone);
        assert!(!dir.exists(), "the last clone removes it");
    }

    #[tokio::test]
    async fn an_unwritable_path_is_an_error_naming_the_path() {
        let err = Store::open("sqlite:///proc/skillgate/sg.db")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("/proc/skillgate"), "{err}");
    }

    #[tokio::test]
    async fn a_non_sqlite_url_is_refused() {
        let err = Store::open("mysql://x").await.unwrap_err();
        assert!(matches!(err, StoreError::UnsupportedUrl(_)));
    }
}
