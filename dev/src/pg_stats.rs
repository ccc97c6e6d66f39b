//! What PostgreSQL did for one database over a measured window, from its own counters
//! (`pg_stat_statements`): how many statements the replicas sent, how many write
//! transactions committed, and how long statements waited for the store's write lock.
//!
//! The store sends each statement on its own (extended protocol, statements prepared once
//! per connection, `BEGIN`/`COMMIT`/savepoints as simple queries) and never pipelines, so a
//! statement is one round trip: statements per governed call is round trips per call.
//! The write lock is a transaction-scoped advisory lock taken by one statement of its own
//! (`core::store::Store::begin_write`), so that statement's execution time is time spent
//! waiting for the lock.

use anyhow::Context as _;
use skillgate_testpg::TempPostgres;

/// Server settings that make PostgreSQL keep the counters: the module is loaded at start.
pub const SETTINGS: [&str; 2] = [
    "shared_preload_libraries=pg_stat_statements",
    // BEGIN, COMMIT and savepoints are round trips too.
    "pg_stat_statements.track_utility=on",
];

/// Counters of one database, as totals since the server started.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    pub statements: f64,
    pub commits: f64,
    /// Acquisitions of the store's write lock.
    pub lock_acquisitions: f64,
    /// Milliseconds spent in them, which is waiting for the lock.
    pub lock_wait_ms: f64,
}

impl std::ops::Sub for Counters {
    type Output = Counters;

    fn sub(self, before: Counters) -> Counters {
        Counters {
            statements: self.statements - before.statements,
            commits: self.commits - before.commits,
            lock_acquisitions: self.lock_acquisitions - before.lock_acquisitions,
            lock_wait_ms: self.lock_wait_ms - before.lock_wait_ms,
        }
    }
}

/// Makes the counters readable (the view lives in the database it is created in).
pub fn enable(postgres: &TempPostgres) -> anyhow::Result<()> {
    postgres
        .psql(
            "postgres",
            "CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
        )
        .context("creating the pg_stat_statements extension (is the module preloaded?)")?;
    Ok(())
}

/// The database a `postgres://…/NAME` URL names.
pub fn database_of(url: &str) -> anyhow::Result<&str> {
    url.rsplit_once('/')
        .map(|(_, name)| name.split('?').next().unwrap_or(name))
        .filter(|name| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .with_context(|| format!("no plain database name at the end of {url}"))
}

/// The counters of `database` now.
pub fn read(postgres: &TempPostgres, database: &str) -> anyhow::Result<Counters> {
    // `database` is checked to be a plain identifier by `database_of`.
    let sql = format!(
        "SELECT coalesce(sum(calls), 0), \
                coalesce(sum(calls) FILTER (WHERE query = 'COMMIT'), 0), \
                coalesce(sum(calls) FILTER (WHERE query LIKE '%pg_advisory_xact_lock%'), 0), \
                coalesce(sum(total_exec_time) FILTER (WHERE query LIKE '%pg_advisory_xact_lock%'), 0) \
         FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid \
         WHERE d.datname = '{database}'"
    );
    let row = postgres.psql("postgres", &sql)?;
    let fields: Vec<f64> = row
        .split('|')
        .map(|field| field.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("unexpected pg_stat_statements row `{row}`"))?;
    let [statements, commits, lock_acquisitions, lock_wait_ms] = fields[..] else {
        anyhow::bail!("unexpected pg_stat_statements row `{row}`");
    };
    Ok(Counters {
        statements,
        commits,
        lock_acquisitions,
        lock_wait_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_is_the_last_segment_of_its_url() {
        assert_eq!(
            database_of("postgres://postgres@127.0.0.1:5432/skillgate_test_12_3").unwrap(),
            "skillgate_test_12_3"
        );
        assert_eq!(
            database_of("postgres://127.0.0.1/db?sslmode=disable").unwrap(),
            "db"
        );
    }

    #[test]
    fn a_database_name_that_is_not_a_plain_identifier_is_refused() {
        assert!(database_of("postgres://127.0.0.1/x';drop").is_err());
        assert!(database_of("postgres://127.0.0.1/").is_err());
    }
}
