//! The console's login sessions, kept in the store's database so that a sign-in on one
//! replica is valid on every other.

use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, ExpiredDeletion, SessionStore};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

/// The table both backends keep console sessions in.
const TABLE: &str = "console_sessions";

/// tower-sessions' SQL store for the backend the store runs on.
#[derive(Clone, Debug)]
pub struct ConsoleSessionStore(Inner);

#[derive(Clone, Debug)]
enum Inner {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl ConsoleSessionStore {
    pub(super) fn sqlite(pool: sqlx::SqlitePool) -> Self {
        let store = SqliteStore::new(pool)
            .with_table_name(TABLE)
            .expect("a constant, valid table name");
        Self(Inner::Sqlite(store))
    }

    pub(super) fn postgres(pool: sqlx::PgPool) -> Self {
        // In the public schema, created by migrations/postgres: the store's own `migrate`
        // creates a schema and a table outside any lock, which replicas starting together
        // would race on.
        let store = PostgresStore::new(pool)
            .with_schema_name("public")
            .and_then(|store| store.with_table_name(TABLE))
            .expect("constant, valid names");
        Self(Inner::Postgres(store))
    }

    /// Creates the session table where the migrations do not (SQLite, where deployments
    /// older than the PostgreSQL backend created it this way).
    pub async fn migrate(&self) -> Result<(), sqlx::Error> {
        match &self.0 {
            Inner::Sqlite(store) => store.migrate().await,
            Inner::Postgres(_) => Ok(()),
        }
    }
}

#[async_trait::async_trait]
impl SessionStore for ConsoleSessionStore {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        match &self.0 {
            Inner::Sqlite(store) => store.create(record).await,
            Inner::Postgres(store) => store.create(record).await,
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        match &self.0 {
            Inner::Sqlite(store) => store.save(record).await,
            Inner::Postgres(store) => store.save(record).await,
        }
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        match &self.0 {
            Inner::Sqlite(store) => store.load(id).await,
            Inner::Postgres(store) => store.load(id).await,
        }
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        match &self.0 {
            Inner::Sqlite(store) => store.delete(id).await,
            Inner::Postgres(store) => store.delete(id).await,
        }
    }
}

#[async_trait::async_trait]
impl ExpiredDeletion for ConsoleSessionStore {
    async fn delete_expired(&self) -> session_store::Result<()> {
        match &self.0 {
            Inner::Sqlite(store) => store.delete_expired().await,
            Inner::Postgres(store) => store.delete_expired().await,
        }
    }
}
