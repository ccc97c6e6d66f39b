//! Where a test's database lives: the same tests run on both backends.
//!
//! `SKILLGATE_TEST_DATABASE=postgres` puts every database a test asks for in a throwaway
//! PostgreSQL (started once per test process by `skillgate-testpg`, one fresh database per
//! call); unset or `sqlite`, a SQLite file. `make test` runs the store's tests both ways.

use std::path::Path;

use super::Backend;

/// The backend the tests of this process run on.
pub fn backend() -> Backend {
    match std::env::var("SKILLGATE_TEST_DATABASE").as_deref() {
        Ok("postgres") => Backend::Postgres,
        Ok("sqlite") | Err(_) => Backend::Sqlite,
        Ok(other) => panic!("SKILLGATE_TEST_DATABASE is `{other}`: use sqlite or postgres"),
    }
}

/// The URL of a new, empty database: the file `name` in `dir` on SQLite, a fresh database
/// on PostgreSQL. Opening the URL again reaches the same database.
pub fn database_url(dir: &Path, name: &str) -> String {
    match backend() {
        Backend::Sqlite => format!("sqlite://{}", dir.join(name).display()),
        Backend::Postgres => skillgate_testpg::TempPostgres::shared().fresh_database(),
    }
}

/// A fresh PostgreSQL database URL, whatever the backend of the run: for tests that are
/// about PostgreSQL itself (replicas, `skillgate migrate`).
pub fn postgres_url() -> String {
    skillgate_testpg::TempPostgres::shared().fresh_database()
}

/// True (and says so on stderr) when this run is on PostgreSQL: for the few tests about
/// SQLite itself (its file, its older schemas), which return early then.
pub fn sqlite_only(test: &str) -> bool {
    let skip = backend() == Backend::Postgres;
    if skip {
        eprintln!("{test}: about SQLite files, not run on PostgreSQL");
    }
    skip
}

/// A pool of its own on the database at `url`, as a second process (a replica, an attacker
/// with database access) would open it.
pub async fn raw_pool(url: &str) -> sqlx::AnyPool {
    sqlx::any::install_default_drivers();
    sqlx::AnyPool::connect(url)
        .await
        .expect("the test database opens")
}

/// What a trigger made by [`add_refusing_trigger`] does to the rows it matches.
#[derive(Debug, Clone, Copy)]
pub enum Refusal<'a> {
    /// Fails the statement with this message, as a full disk would.
    Abort(&'a str),
    /// Skips the row silently: the statement changes nothing.
    Skip,
}

/// Makes the database refuse `event` (`INSERT`, `UPDATE`, `DELETE`) on `table` for the rows
/// where `when` (an expression over `NEW`/`OLD`) holds, on either backend.
pub async fn add_refusing_trigger(
    pool: &sqlx::AnyPool,
    name: &str,
    event: &str,
    table: &str,
    when: Option<&str>,
    refusal: Refusal<'_>,
) {
    use sqlx::Executor as _;
    let row = if event == "DELETE" { "OLD" } else { "NEW" };
    let sql = match backend() {
        Backend::Sqlite => {
            let when = when.map(|w| format!("WHEN {w}")).unwrap_or_default();
            let action = match refusal {
                Refusal::Abort(message) => format!("SELECT RAISE(ABORT, '{message}')"),
                Refusal::Skip => "SELECT RAISE(IGNORE)".to_owned(),
            };
            format!("CREATE TRIGGER {name} BEFORE {event} ON {table} {when} BEGIN {action}; END")
        }
        Backend::Postgres => {
            let action = match refusal {
                Refusal::Abort(message) => format!("RAISE EXCEPTION '{message}';"),
                Refusal::Skip => "RETURN NULL;".to_owned(),
            };
            let when = when.unwrap_or("true");
            format!(
                "CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN IF {when} THEN {action} END IF; RETURN {row}; END $$; \
                 CREATE TRIGGER {name} BEFORE {event} ON {table} \
                 FOR EACH ROW EXECUTE FUNCTION {name}();"
            )
        }
    };
    pool.execute(sql.as_str())
        .await
        .expect("the refusing trigger is created");
}

/// Removes a trigger made by [`add_refusing_trigger`].
pub async fn drop_refusing_trigger(pool: &sqlx::AnyPool, name: &str, table: &str) {
    use sqlx::Executor as _;
    let sql = match backend() {
        Backend::Sqlite => format!("DROP TRIGGER {name}"),
        Backend::Postgres => {
            format!("DROP TRIGGER {name} ON {table}; DROP FUNCTION {name}();")
        }
    };
    pool.execute(sql.as_str())
        .await
        .expect("the refusing trigger is dropped");
}

/// A connection of its own to the PostgreSQL database at `url` that holds the lock every
/// write of the store takes ([`super::Store::begin_write`]) until it is dropped or
/// [`WriteLockHolder::release`]d: every write of every replica waits for it meanwhile,
/// holding its pool connection, as behind a slow or stuck transaction.
pub struct WriteLockHolder(sqlx::PgConnection);

impl WriteLockHolder {
    pub async fn take(url: &str) -> Self {
        use sqlx::Connection as _;
        let mut connection = sqlx::PgConnection::connect(url)
            .await
            .expect("the test database opens");
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(super::WRITE_LOCK)
            .execute(&mut connection)
            .await
            .expect("the write lock is taken");
        Self(connection)
    }

    /// How many sessions of the holder's database wait for a lock right now.
    pub async fn waiting(&mut self) -> i64 {
        sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut self.0)
        .await
        .expect("pg_stat_activity reads")
    }

    pub async fn release(mut self) {
        use sqlx::Connection as _;
        sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(super::WRITE_LOCK)
            .execute(&mut self.0)
            .await
            .expect("the write lock is released");
        let _ = self.0.close().await;
    }
}
