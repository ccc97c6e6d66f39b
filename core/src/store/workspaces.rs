//! Workspaces in the store: each workspace is a database of its own beside the platform's
//! (SQLite: a file in `<name>-workspaces/` next to the platform's file; PostgreSQL: a schema
//! `ws_<slug>` in the same database). A [`Store`] opened for a workspace reaches that
//! workspace's tables and nothing else, so no statement can forget to filter by it
//! (docs/architecture.md, "Workspaces").
//!
//! The platform database is also the `default` workspace: a deployment from before
//! workspaces is its default workspace as it stands. It keeps the registry of the others
//! (`workspaces`); every database keeps the workspace it was made for (`this_workspace`),
//! and a database opened as another workspace's is refused.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::Row as _;

use super::{Store, StoreError, Tx, WRITE_LOCK, stamp};
use crate::slug::Slug;

/// The workspace of the platform database, which every deployment has.
pub const DEFAULT_WORKSPACE: &str = "default";

/// A workspace's name is a slug of at most this many characters, so that its PostgreSQL
/// schema name (`ws_` and the slug) stays within PostgreSQL's 63-byte identifiers.
pub const MAX_WORKSPACE_SLUG_LEN: usize = 40;

/// A workspace as registered in the platform database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkspaceRecord {
    pub slug: Slug,
    pub title: String,
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    pub archived_at: Option<DateTime<Utc>>,
}

/// Where a store's database is, and which workspace it is.
#[derive(Clone)]
pub(super) struct Place {
    at: Location,
    /// `None`: the platform database (the `default` workspace).
    pub(super) workspace: Option<Slug>,
}

#[derive(Clone)]
enum Location {
    /// The platform's file (a throwaway database's too: it is a file in a temporary
    /// directory), which the workspaces' files sit beside.
    Sqlite(PathBuf),
    /// The URL may hold a password: it is never printed ([`Place`]'s `Debug` leaves it out).
    Postgres(Arc<str>),
}

impl Place {
    pub(super) fn sqlite(file: PathBuf) -> Self {
        Self {
            at: Location::Sqlite(file),
            workspace: None,
        }
    }

    pub(super) fn postgres(url: &str) -> Self {
        Self {
            at: Location::Postgres(url.into()),
            workspace: None,
        }
    }
}

impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Place");
        match &self.at {
            Location::Sqlite(file) => out.field("sqlite", file),
            Location::Postgres(_) => out.field("postgres", &"(URL withheld)"),
        };
        out.field("workspace", &self.workspace).finish()
    }
}

/// The file of workspace `slug` beside the platform's `file`: `data/skillgate.db` keeps
/// workspace `finance` in `data/skillgate-workspaces/finance.db`.
pub fn workspace_file(platform: &Path, slug: &Slug) -> PathBuf {
    let stem = platform
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_else(|| "skillgate".to_owned());
    platform
        .with_file_name(format!("{stem}-workspaces"))
        .join(format!("{slug}.db"))
}

/// The PostgreSQL schema of workspace `slug`. A slug has lowercase letters, digits and
/// single dashes, so mapping dashes to underscores (which a slug never has) keeps names
/// apart and needs no quoting.
pub fn workspace_schema(slug: &Slug) -> String {
    format!("ws_{}", slug.as_str().replace('-', "_"))
}

/// The advisory lock of a workspace schema's writes: FNV-1a of the schema's name mixed into
/// the platform's key, the same in every replica and process.
pub(super) fn write_lock_key(schema: &str) -> i64 {
    let hash = schema
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
    WRITE_LOCK ^ i64::from_ne_bytes(hash.to_ne_bytes())
}

/// The workspace a freshly opened database says it is (`None`: the platform's).
pub(super) async fn stamp_of(store: &Store) -> Result<Option<Slug>, StoreError> {
    let stamped: Option<String> =
        sqlx::query_scalar("SELECT slug FROM this_workspace WHERE id = 1")
            .fetch_optional(store.pool())
            .await?;
    stamped
        .map(|text| {
            Slug::parse(&text).map_err(|e| StoreError::Corrupt(format!("this_workspace: {e}")))
        })
        .transpose()
}

/// Whether opening a workspace's database may create it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Create {
    Yes,
    No,
}

impl Store {
    /// The workspace this store's database is; `default` for the platform's.
    pub fn workspace_slug(&self) -> &str {
        self.place
            .workspace
            .as_ref()
            .map_or(DEFAULT_WORKSPACE, Slug::as_str)
    }

    /// True for the platform database, which is the `default` workspace and keeps the
    /// registry of the others.
    pub fn is_platform(&self) -> bool {
        self.place.workspace.is_none()
    }

    /// The store of workspace `slug`: this store for `default`, else the workspace's own
    /// database, opened beside this one. A workspace that is not registered, or archived,
    /// is not found; one whose database is missing or belongs to another workspace is an
    /// error that names it. Only the platform store opens workspaces.
    #[tracing::instrument(skip(self), fields(backend = ?self.backend()))]
    pub async fn workspace(&self, slug: &Slug) -> Result<Store, StoreError> {
        self.platform_only()?;
        if slug.as_str() == DEFAULT_WORKSPACE {
            return Ok(self.clone());
        }
        match self.workspace_record(slug).await? {
            Some(record) if record.archived_at.is_none() => {
                self.open_workspace_database(slug, Create::No).await
            }
            _ => Err(StoreError::NotFound(format!("workspace `{slug}`"))),
        }
    }

    /// Creates (or opens, when a creation was interrupted) the database of workspace
    /// `slug`, migrated and stamped with its name. Registering it is the caller's: the
    /// admin door does it in the platform database's own transaction, and `skillgate
    /// migrate` copies the registry with the platform's tables.
    pub async fn create_workspace_database(&self, slug: &Slug) -> Result<Store, StoreError> {
        self.platform_only()?;
        self.open_workspace_database(slug, Create::Yes).await
    }

    fn platform_only(&self) -> Result<(), StoreError> {
        match &self.place.workspace {
            None => Ok(()),
            Some(this) => Err(StoreError::Workspace(format!(
                "this database is workspace `{this}`'s: workspaces are opened from the platform database"
            ))),
        }
    }

    async fn open_workspace_database(
        &self,
        slug: &Slug,
        create: Create,
    ) -> Result<Store, StoreError> {
        let missing = |at: String| {
            StoreError::Workspace(format!(
                "workspace `{slug}` is registered but its database {at} is missing"
            ))
        };
        let mut store = match &self.place.at {
            Location::Sqlite(platform) => {
                let file = workspace_file(platform, slug);
                if create == Create::No && !file.exists() {
                    return Err(missing(file.display().to_string()));
                }
                let mut store =
                    Store::open_with(&format!("sqlite://{}", file.display()), self.settings)
                        .await?;
                // A throwaway platform database's workspaces live in its temporary
                // directory, and go with it.
                store._ephemeral = self._ephemeral.clone();
                store
            }
            Location::Postgres(url) => {
                let schema = workspace_schema(slug);
                if create == Create::Yes {
                    sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
                        .execute(self.pool())
                        .await?;
                } else {
                    let found: i64 = sqlx::query_scalar(
                        "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = $1",
                    )
                    .bind(&schema)
                    .fetch_one(self.pool())
                    .await?;
                    if found == 0 {
                        return Err(missing(format!("(schema {schema})")));
                    }
                }
                Store::open_postgres(url, self.settings, Some(&schema)).await?
            }
        };
        match (&store.place.workspace, create) {
            (Some(stamped), _) if stamped == slug => {}
            (None, Create::Yes) => {
                sqlx::query(
                    "INSERT INTO this_workspace (id, slug) VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
                )
                .bind(slug.as_str())
                .execute(store.pool())
                .await?;
                store.place.workspace = stamp_of(&store).await?;
                if store.place.workspace.as_ref() != Some(slug) {
                    return Err(StoreError::Workspace(format!(
                        "the new database of workspace `{slug}` was stamped by another writer as `{}`",
                        store.workspace_slug()
                    )));
                }
            }
            (stamped, _) => {
                return Err(StoreError::Workspace(format!(
                    "the database opened as workspace `{slug}` is workspace `{}`'s",
                    stamped.as_ref().map_or(DEFAULT_WORKSPACE, Slug::as_str)
                )));
            }
        }
        Ok(store)
    }

    /// The registered workspaces besides `default`, by name.
    pub async fn list_workspaces(&self) -> Result<Vec<WorkspaceRecord>, StoreError> {
        self.platform_only()?;
        let rows = sqlx::query(
            "SELECT slug, title, created_at, created_by, archived_at FROM workspaces ORDER BY slug",
        )
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(decode).collect()
    }

    /// Workspace `slug` as registered (archived ones too).
    pub async fn workspace_record(
        &self,
        slug: &Slug,
    ) -> Result<Option<WorkspaceRecord>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        workspace_record_on(Tx::wrap(&mut conn), slug).await
    }
}

pub(crate) async fn workspace_record_on(
    tx: &mut Tx,
    slug: &Slug,
) -> Result<Option<WorkspaceRecord>, StoreError> {
    let row = sqlx::query(
        "SELECT slug, title, created_at, created_by, archived_at FROM workspaces WHERE slug = $1",
    )
    .bind(slug.as_str())
    .fetch_optional(tx.conn())
    .await?;
    row.as_ref().map(decode).transpose()
}

/// Registers `record` in the platform database; a workspace of that name is a conflict.
pub(crate) async fn insert_workspace_on(
    tx: &mut Tx,
    record: &WorkspaceRecord,
) -> Result<(), StoreError> {
    if workspace_record_on(tx, &record.slug).await?.is_some() {
        return Err(StoreError::Conflict(format!(
            "a workspace named `{}` exists already",
            record.slug
        )));
    }
    sqlx::query(
        "INSERT INTO workspaces (slug, title, created_at, created_by, archived_at) \
         VALUES ($1, $2, $3, $4, NULL)",
    )
    .bind(record.slug.as_str())
    .bind(&record.title)
    .bind(stamp(record.created_at))
    .bind(&record.created_by)
    .execute(tx.conn())
    .await?;
    Ok(())
}

fn decode(row: &sqlx::any::AnyRow) -> Result<WorkspaceRecord, StoreError> {
    let unreadable = |what: &str, e: &dyn std::fmt::Display| {
        StoreError::Corrupt(format!("workspace {what}: {e}"))
    };
    let time = |what: &str, text: &str| {
        DateTime::parse_from_rfc3339(text)
            .map(|at| at.with_timezone(&Utc))
            .map_err(|e| unreadable(what, &e))
    };
    let slug: String = row.try_get("slug")?;
    let created_at: String = row.try_get("created_at")?;
    let archived_at: Option<String> = row.try_get("archived_at")?;
    Ok(WorkspaceRecord {
        slug: Slug::parse(&slug).map_err(|e| unreadable("slug", &e))?,
        title: row.try_get("title")?,
        created_at: time("created_at", &created_at)?,
        created_by: row.try_get("created_by")?,
        archived_at: archived_at
            .map(|text| time("archived_at", &text))
            .transpose()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slug(text: &str) -> Slug {
        Slug::parse(text).unwrap()
    }

    #[test]
    fn a_workspace_file_sits_in_a_folder_named_after_the_platform_file() {
        assert_eq!(
            workspace_file(Path::new("data/skillgate.db"), &slug("finance")),
            PathBuf::from("data/skillgate-workspaces/finance.db")
        );
    }

    #[test]
    fn schema_names_keep_distinct_workspaces_apart_and_need_no_quoting() {
        assert_eq!(workspace_schema(&slug("support-eu")), "ws_support_eu");
        assert_ne!(
            workspace_schema(&slug("a-b")),
            workspace_schema(&slug("ab"))
        );
        let longest = slug(&"a".repeat(MAX_WORKSPACE_SLUG_LEN));
        assert!(workspace_schema(&longest).len() <= 63);
    }

    #[test]
    fn each_workspace_schema_has_a_write_lock_of_its_own() {
        let finance = write_lock_key(&workspace_schema(&slug("finance")));
        let support = write_lock_key(&workspace_schema(&slug("support")));
        assert_ne!(finance, support);
        assert_ne!(finance, WRITE_LOCK);
        assert_eq!(finance, write_lock_key("ws_finance"), "stable across calls");
    }

    #[test]
    fn a_postgres_place_never_prints_its_url() {
        let place = Place::postgres("postgres://app:hunter2@db/skillgate");
        let printed = format!("{place:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
    }
}
