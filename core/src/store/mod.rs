//! The store: every SQL statement of Skillgate lives under this module.
//!
//! SQLite (WAL) is the embedded default. Keeping SQL here, behind typed methods, is what
//! lets a PostgreSQL backend be an addition rather than a rewrite.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Any, AnyPool, Executor as _, PgPool, SqlitePool, Transaction};

pub mod api_tokens;
pub mod audit;
pub mod audit_query;
mod audit_row;
mod availability;
pub mod catalog;
pub mod catalog_code;
pub mod console_sessions;
pub mod console_sso;
pub mod copy;
mod direct;
pub(crate) mod external_subjects;
pub mod holds;
pub mod keys;
mod lane;
pub mod notifications;
pub mod oauth;
pub mod replay;
pub mod reveals;
pub mod revisions;
pub mod sessions;
pub mod shares;
pub mod tasks;
#[cfg(feature = "test-support")]
pub mod testing;
mod tx;
pub(crate) mod users;
pub mod workspaces;
mod write_lock;

pub use console_sessions::ConsoleSessionStore;
pub use tx::Tx;
pub use users::{LoginAttemptCounts, LoginBudget, UserRecord};
pub use workspaces::WorkspaceRecord;
use write_lock::Held;
pub use write_lock::WriteLockTimes;

/// Errors at the store boundary.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported database URL `{0}`: use sqlite://PATH or postgres://USER@HOST/DATABASE")]
    UnsupportedUrl(String),
    #[error("cannot create the database directory {path}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the database {target}")]
    Open { target: String, source: sqlx::Error },
    #[error("cannot read the file {parameter}={path} of the database URL")]
    TlsFile {
        parameter: String,
        path: PathBuf,
        source: std::io::Error,
    },
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
    /// A workspace's database is missing, or is not the workspace it was opened as.
    #[error("{0}")]
    Workspace(String),
    /// The database could not serve (see [`StoreError::is_unavailable`]), told to several
    /// callers at once (a group commit's), so by its message.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
}

/// The main pool of a store: how many connections it keeps at most, and how long a
/// statement waits for one before it fails as unavailable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSettings {
    /// `None`: the backend's default ([`PoolSettings::POSTGRES_CONNECTIONS`] on PostgreSQL,
    /// [`PoolSettings::SQLITE_CONNECTIONS`] on SQLite).
    pub max_connections: Option<u32>,
    pub acquire_timeout: Duration,
}

impl PoolSettings {
    pub const POSTGRES_CONNECTIONS: u32 = 16;
    /// SQLite's hot path has direct connections of its own (`direct`); this pool serves
    /// the rest.
    pub const SQLITE_CONNECTIONS: u32 = 8;
    pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
}

impl Default for PoolSettings {
    fn default() -> Self {
        Self {
            max_connections: None,
            acquire_timeout: Self::ACQUIRE_TIMEOUT,
        }
    }
}

/// The SQLite schema, in `migrations/sqlite`.
pub static SQLITE_MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");
/// The same schema for PostgreSQL, in `migrations/postgres`: same versions, same tables and
/// columns, so one set of statements (and `skillgate migrate`) serves both.
pub static POSTGRES_MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// Which database a store runs on; chosen by the URL scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The key of the PostgreSQL advisory lock that every write transaction takes (see
/// [`Store::begin_write`]): ASCII "skillgat".
const WRITE_LOCK: i64 = 0x736b_696c_6c67_6174;

/// A handle to the database. Cheap to clone (the pools are reference counted).
///
/// Every statement runs on one `sqlx::Any` pool, so each is written once for both
/// backends (docs/architecture.md, "Storage"). The typed pool beside it serves what the
/// `Any` driver cannot: migrations and the console's session store.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    pools: Pools,
    /// The hot statements take the pool even on SQLite (see [`Store::on_pool_lane`]).
    hot_on_pool: bool,
    /// How long writes wait for and hold the write lock, for `/metrics`.
    write_lock: WriteLockTimes,
    /// The PostgreSQL advisory lock [`Store::begin_write`] takes: [`WRITE_LOCK`] for the
    /// platform's schema, one of its own for each workspace's (their writes never contend).
    write_lock_key: i64,
    /// Where the database is, and which workspace it is (see [`workspaces`]).
    place: workspaces::Place,
    /// How the main pool is sized, for the workspaces' databases opened beside this one.
    settings: PoolSettings,
    /// The directory of a `sqlite::memory:` database, removed with the last clone. Declared
    /// last: fields drop in order, so the connections close before it goes.
    _ephemeral: Option<Arc<tempfile::TempDir>>,
}

#[derive(Clone, Debug)]
enum Pools {
    Sqlite {
        typed: SqlitePool,
        /// The hot path's connections (see [`direct`]).
        direct: Arc<direct::Direct>,
    },
    Postgres {
        typed: PgPool,
    },
}

impl Store {
    /// Opens the database at `url` and applies pending migrations.
    ///
    /// `sqlite://PATH` is a database file, created if needed; `sqlite::memory:` is a
    /// private, throwaway one (a file in a temporary directory that is removed with the
    /// last clone of the store), so it behaves exactly like a file database, direct
    /// connections included. `postgres://…` (or `postgresql://…`) is an existing
    /// PostgreSQL database; several replicas may open it at once.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(url, PoolSettings::default()).await
    }

    /// [`Store::open`] with the main pool's size and wait set.
    #[tracing::instrument(skip_all, fields(backend))]
    pub async fn open_with(url: &str, settings: PoolSettings) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Self::open_postgres(url, settings, None).await
        } else {
            Self::open_sqlite(url, settings).await
        }
    }

    async fn open_sqlite(url: &str, settings: PoolSettings) -> Result<Self, StoreError> {
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
        let open_error = |source| StoreError::Open {
            target: path.display().to_string(),
            source,
        };
        // The typed pool creates the file, switches it to WAL (a setting the file keeps)
        // and migrates; it stays small, for the console's sessions.
        let typed = SqlitePoolOptions::new()
            .test_before_acquire(false)
            .max_connections(2)
            .idle_timeout(Some(Duration::from_secs(600)))
            .connect_with(options)
            .await
            .map_err(open_error)?;
        SQLITE_MIGRATOR.run(&typed).await?;
        let any_url = format!("sqlite://{}", path.display());
        let pool = AnyPoolOptions::new()
            // A SQLite connection is a file handle, not a socket that can drop: the default
            // check before every acquire was one more round trip to the connection's worker
            // thread on every query of the hot path.
            .test_before_acquire(false)
            .max_connections(
                settings
                    .max_connections
                    .unwrap_or(PoolSettings::SQLITE_CONNECTIONS),
            )
            .acquire_timeout(settings.acquire_timeout)
            .idle_timeout(Some(Duration::from_secs(600)))
            .max_lifetime(Some(Duration::from_secs(3600)))
            // The `Any` driver opens SQLite from the URL alone; the settings that are per
            // connection are made here. FULL fsyncs every commit: an audit event that was
            // acknowledged survives a power loss, which DESIGN.md requires of the allowed
            // event written before an upstream call.
            .after_connect(|conn, _| {
                Box::pin(async move {
                    conn.execute(
                        "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; \
                         PRAGMA busy_timeout = 10000;",
                    )
                    .await?;
                    Ok(())
                })
            })
            .connect(&any_url)
            .await
            .map_err(open_error)?;
        let mut store = Self {
            pool,
            pools: Pools::Sqlite {
                typed,
                direct: Arc::new(direct::Direct::new(&path)),
            },
            hot_on_pool: false,
            write_lock: WriteLockTimes::default(),
            write_lock_key: WRITE_LOCK,
            place: workspaces::Place::sqlite(path),
            settings,
            _ephemeral: ephemeral,
        };
        store.place.workspace = workspaces::stamp_of(&store).await?;
        catalog::pin_tools_stored_before_pins(&store).await?;
        Ok(store)
    }

    /// Opens the PostgreSQL database at `url`; with `schema`, a workspace's schema in it
    /// (see [`workspaces`]): both pools then name only that schema in their `search_path`,
    /// so every statement, and the migrator's own table, stays inside it.
    async fn open_postgres(
        url: &str,
        settings: PoolSettings,
        schema: Option<&str>,
    ) -> Result<Self, StoreError> {
        let unsupported = || StoreError::UnsupportedUrl(url.to_owned());
        // Both pools below read `sslmode`, `sslrootcert`, `sslcert` and `sslkey` from the
        // URL (TLS through rustls; `PGSSLMODE`/`PGSSLROOTCERT` when the URL is silent).
        let mut options = PgConnectOptions::from_str(url).map_err(|_| unsupported())?;
        if let Some(schema) = schema {
            options = options.options([("search_path", schema)]);
        }
        check_tls_files(url)?;
        // The database named in a URL, without its password, for messages.
        let target = format!(
            "{}:{}/{}",
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or("")
        );
        let open_error = |source| StoreError::Open {
            target: target.clone(),
            source,
        };
        let typed = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(open_error)?;
        // sqlx's PostgreSQL migrator holds an advisory lock while it runs, so replicas
        // starting together migrate once.
        POSTGRES_MIGRATOR.run(&typed).await?;
        let collation: String = sqlx::query_scalar(
            "SELECT datcollate::text FROM pg_database WHERE datname = current_database()",
        )
        .fetch_one(&typed)
        .await?;
        if collation != "C" && collation != "POSIX" {
            // Names would sort by the locale's rules, not byte by byte as on SQLite.
            tracing::warn!(
                %collation,
                "the database's collation is not C: lists sorted by name may order differently \
                 than on SQLite (docs/operations.md, \"Collation\")"
            );
        }
        // The `Any` driver connects from the URL alone: a workspace's schema is set on each
        // new connection instead.
        let search_path = schema.map(|schema| format!("SET search_path TO {schema}"));
        let pool = AnyPoolOptions::new()
            .max_connections(
                settings
                    .max_connections
                    .unwrap_or(PoolSettings::POSTGRES_CONNECTIONS),
            )
            .acquire_timeout(settings.acquire_timeout)
            .idle_timeout(Some(Duration::from_secs(600)))
            .max_lifetime(Some(Duration::from_secs(3600)))
            .after_connect(move |conn, _| {
                let search_path = search_path.clone();
                Box::pin(async move {
                    if let Some(statement) = search_path {
                        conn.execute(statement.as_str()).await?;
                    }
                    Ok(())
                })
            })
            .connect(url)
            .await
            .map_err(open_error)?;
        let mut store = Self {
            pool,
            pools: Pools::Postgres { typed },
            hot_on_pool: false,
            write_lock: WriteLockTimes::default(),
            write_lock_key: schema.map_or(WRITE_LOCK, workspaces::write_lock_key),
            place: workspaces::Place::postgres(url),
            settings,
            _ephemeral: None,
        };
        store.place.workspace = workspaces::stamp_of(&store).await?;
        // Replicas starting together run this at once; it is idempotent and takes the
        // write lock.
        catalog::pin_tools_stored_before_pins(&store).await?;
        Ok(store)
    }

    pub fn backend(&self) -> Backend {
        match self.pools {
            Pools::Sqlite { .. } => Backend::Sqlite,
            Pools::Postgres { .. } => Backend::Postgres,
        }
    }

    /// The pool every statement of the store runs on. It never leaves the store.
    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// The pool, for tests that tamper with stored rows the way an attacker with the
    /// database file would. Only with the `test-support` feature.
    #[cfg(feature = "test-support")]
    pub fn test_pool(&self) -> &AnyPool {
        &self.pool
    }

    /// True where long reads can take the direct SQLite lane (see
    /// [`Store::audit_visit_direct`]).
    pub(crate) fn has_direct_lane(&self) -> bool {
        self.direct().is_some()
    }

    /// The direct SQLite lane of the hot path; `None` on PostgreSQL, where the same reads
    /// go through the pool. [`Store::lane`] is what the statements ask.
    pub(crate) fn direct(&self) -> Option<&direct::Direct> {
        match &self.pools {
            Pools::Sqlite { direct, .. } if !self.hot_on_pool => Some(direct),
            _ => None,
        }
    }

    /// A clone of this store whose hot statements (see [`lane`](self::lane)) take the pool even on
    /// SQLite, as they do on PostgreSQL: for the contract tests, which run each rule on
    /// both lanes. Only with the `test-support` feature.
    #[cfg(feature = "test-support")]
    pub fn on_pool_lane(&self) -> Self {
        Self {
            hot_on_pool: true,
            ..self.clone()
        }
    }

    /// Begins a transaction that writes. Writers take turns, on both backends: SQLite's
    /// `BEGIN IMMEDIATE` takes the file's write lock, and on PostgreSQL every such
    /// transaction first takes one advisory lock, held to its commit. So a read-then-write
    /// inside (the audit chain's tip, a session's usage against its caps, a revision
    /// check) sees no other writer's change between its read and its write, whichever
    /// replica the other writer runs in.
    ///
    /// The [`Held`] beside the transaction times how long the lock is held: keep it to the
    /// end of the transaction's scope.
    pub(crate) async fn begin_write(
        &self,
    ) -> Result<(Transaction<'static, Any>, Held), StoreError> {
        match self.pools {
            Pools::Sqlite { .. } => {
                let asked = Instant::now();
                let tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
                Ok((tx, self.write_lock.acquired(asked.elapsed())))
            }
            Pools::Postgres { .. } => {
                let mut tx = self.pool.begin().await?;
                let asked = Instant::now();
                // The lock's own result is `void`, a type the `Any` driver cannot read.
                sqlx::query("SELECT 1 FROM (SELECT pg_advisory_xact_lock($1)) AS locked")
                    .bind(self.write_lock_key)
                    .execute(&mut *tx)
                    .await?;
                Ok((tx, self.write_lock.acquired(asked.elapsed())))
            }
        }
    }

    /// How long this store's writes (all its clones') waited for and held the write lock.
    pub fn write_lock_times(&self) -> &WriteLockTimes {
        &self.write_lock
    }

    /// The console's session store, on the same database.
    pub fn console_sessions(&self) -> ConsoleSessionStore {
        match &self.pools {
            Pools::Sqlite { typed, .. } => ConsoleSessionStore::sqlite(typed.clone()),
            Pools::Postgres { typed } => ConsoleSessionStore::postgres(typed.clone()),
        }
    }

    /// True when the database answers a trivial query.
    pub async fn ping(&self) -> bool {
        sqlx::query_scalar::<_, i64>("SELECT CAST(1 AS BIGINT)")
            .fetch_one(&self.pool)
            .await
            .is_ok()
    }

    /// Closes every connection; later queries fail.
    pub async fn close(&self) {
        self.pool.close().await;
        match &self.pools {
            Pools::Sqlite { typed, .. } => typed.close().await,
            Pools::Postgres { typed } => typed.close().await,
        }
    }
}

/// Numbers the `?` marks of a statement assembled from parts as `$1`, `$2`, … in order,
/// the one placeholder syntax both backends read.
pub(crate) fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// A row's column read as a flag: flags are integers 0/1 on both backends.
pub(crate) fn flag(row: &AnyRow, column: &str) -> Result<bool, sqlx::Error> {
    use sqlx::Row as _;
    Ok(row.try_get::<i64, _>(column)? != 0)
}

/// The URL parameters naming a certificate or key file, as sqlx reads them.
const TLS_FILE_PARAMETERS: [&str; 7] = [
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
];

/// Checks that the certificate and key files a PostgreSQL URL names (and `PGSSLROOTCERT`
/// when the URL names no CA) can be read: sqlx reads them at each connection and reports a
/// missing one as "No such file or directory", without saying which.
fn check_tls_files(url: &str) -> Result<(), StoreError> {
    let Ok(parsed) = url::Url::parse(url) else {
        return Ok(());
    };
    let mut files: Vec<(String, String)> = parsed
        .query_pairs()
        .filter(|(name, _)| TLS_FILE_PARAMETERS.contains(&name.as_ref()))
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect();
    let names_ca = files
        .iter()
        .any(|(name, _)| matches!(name.as_str(), "sslrootcert" | "ssl-root-cert" | "ssl-ca"));
    if !names_ca && let Ok(path) = std::env::var("PGSSLROOTCERT") {
        files.push(("PGSSLROOTCERT".to_owned(), path));
    }
    for (parameter, path) in files {
        // sqlx takes a value that is itself PEM as the certificate, not a path.
        if path.trim_start().starts_with("-----BEGIN") {
            continue;
        }
        if let Err(source) = std::fs::File::open(&path) {
            return Err(StoreError::TlsFile {
                parameter,
                path: PathBuf::from(path),
                source,
            });
        }
    }
    Ok(())
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

/// The file a SQLite URL names: `Ok(None)` for an in-memory database, an error for a URL
/// that is not SQLite's or does not parse. What the tools beside the store (the audit
/// signing key's default place, `migrate --from`) need, without reading sqlx's options.
pub fn sqlite_file(url: &str) -> Result<Option<PathBuf>, StoreError> {
    sqlite_options(url).map(|(_, path)| path)
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
        clone.close().await;
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
