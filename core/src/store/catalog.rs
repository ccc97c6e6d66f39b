//! SQL for the governance catalog: upstreams, tools, versioned skills, roles and scopes.
//!
//! Every transaction that writes begins `IMMEDIATE`: a deferred one that reads first and
//! writes later cannot take the write lock while another process holds it, and SQLite
//! answers "database is locked" at once instead of waiting out the busy timeout.

use std::collections::BTreeMap;

use chrono::Utc;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::{AnyConnection, Row};

use super::{Store, StoreError, stamp};
use crate::model::{
    Catalog, CatalogDraft, CatalogError, CatalogTool, Role, Scope, Skill, SkillVersion, ToolSpec,
    Upstream, quarantine_reason,
};
use crate::policy::CompiledCatalog;
use crate::slug::Slug;
use crate::upstream::UpstreamCredentials;

/// A catalog entry with the revision an update must quote (optimistic concurrency).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Revised<T> {
    pub value: T,
    pub revision: i64,
}

fn decode_err(what: &str, e: impl std::fmt::Display) -> sqlx::Error {
    sqlx::Error::Decode(format!("stored {what} is unreadable: {e}").into())
}

fn from_json<T: DeserializeOwned>(what: &str, text: &str) -> Result<T, sqlx::Error> {
    serde_json::from_str(text).map_err(|e| decode_err(what, e))
}

pub(super) fn to_json(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("catalog values serialize")
}

fn slug_of(what: &str, text: &str) -> Result<Slug, sqlx::Error> {
    Slug::parse(text).map_err(|e| decode_err(what, e))
}

fn conflict(kind: &str, slug: &str, expected: i64, actual: i64) -> StoreError {
    StoreError::Conflict(format!(
        "{kind} `{slug}` was changed by someone else (now at revision {actual}, your edit is based on {expected}); reload it and try again"
    ))
}

impl Store {
    /// The whole catalog with current skill versions, to compile a snapshot from.
    pub async fn load_catalog(&self) -> Result<Catalog, StoreError> {
        let mut conn = self.pool().acquire().await?;
        load_catalog(&mut conn).await
    }

    /// The catalog generation: a counter that every change to the catalog's tables moves
    /// in the change's own transaction (triggers of migration 0018).
    pub async fn catalog_generation(&self) -> Result<i64, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT n FROM catalog_generation WHERE id = 1")
                .fetch_one(self.pool())
                .await?,
        )
    }

    /// Loads and compiles the catalog: what the MCP layer puts into its `CatalogHandle`.
    pub async fn compiled_catalog(&self) -> Result<CompiledCatalog, StoreError> {
        Ok(CompiledCatalog::compile(self.load_catalog().await?))
    }

    pub async fn upsert_upstream(&self, upstream: &Upstream) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await?;
        upsert_upstream(&mut conn, upstream).await
    }

    pub async fn list_upstreams(&self) -> Result<Vec<Upstream>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(list_upstreams(&mut conn).await?)
    }

    /// Stores `tools` as the whole tool list of `upstream`, each admitted and pinned as it
    /// is (deleting the upstream's tools not named): the trust of a seed or an operator's
    /// script, unaudited. An upstream's sync does not come this way: it goes through
    /// [`crate::admin::AdminService::sync_tools`], which quarantines what no admin
    /// has reviewed and audits it.
    ///
    /// Sensitive-argument markings are the admin's: an incoming spec without any keeps the
    /// stored ones. A tool name another upstream already provides is a conflict.
    pub async fn seed_tools(&self, upstream: &Slug, tools: &[ToolSpec]) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        seed_tools(&mut tx, upstream, tools).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Marks which arguments of a tool the audit stores as a digest only.
    pub async fn set_sensitive_args(&self, tool: &str, args: &[String]) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await?;
        set_sensitive_args_on(&mut conn, tool, args).await
    }

    /// Flags the tools of `upstream` that its last `tools/list` did not name (keeping the
    /// first time each went missing) and clears the flag of every other one.
    pub async fn mark_missing_tools(
        &self,
        upstream: &Slug,
        missing: &[String],
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        mark_missing_on(&mut tx, upstream, missing).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The pin state of one stored tool (`None`: no such stored tool).
    pub async fn tool_pin(&self, name: &str) -> Result<Option<ToolPin>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(tool_pin(&mut conn, name).await?)
    }

    /// The quarantined tools, by name: new ones and those whose upstream changed them.
    pub async fn quarantined_tools(&self) -> Result<Vec<ToolPin>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(quarantined_tools(&mut conn).await?)
    }

    /// Tools flagged missing from their upstream, with the time they were first missed.
    pub async fn missing_tools(&self) -> Result<BTreeMap<String, String>, StoreError> {
        let rows: Vec<(String, String)> =
            sqlx::query_as("SELECT name, missing_since FROM tools WHERE missing_since IS NOT NULL")
                .fetch_all(self.pool())
                .await?;
        Ok(rows.into_iter().collect())
    }

    /// Replaces the stored credentials of an upstream (`None` removes them).
    pub async fn set_upstream_credentials(
        &self,
        upstream: &Slug,
        credentials: Option<&UpstreamCredentials>,
    ) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await?;
        set_upstream_credentials_on(&mut conn, upstream, credentials).await
    }

    /// Every upstream's stored credentials, by upstream name (upstreams without any are absent).
    pub async fn upstream_credentials(
        &self,
    ) -> Result<BTreeMap<String, UpstreamCredentials>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        upstream_credentials_on(&mut conn).await
    }

    pub async fn list_tools(&self) -> Result<Vec<CatalogTool>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(list_tools(&mut conn).await?)
    }

    /// Creates a skill at version 1.
    pub async fn create_skill(&self, skill: &Skill) -> Result<Revised<SkillVersion>, StoreError> {
        let mut tx = self.begin_write().await?;
        let saved = create_skill_on(&mut tx, skill).await?;
        tx.commit().await?;
        Ok(saved)
    }

    /// Saves a new version of a skill and makes it current. The roles that use the skill
    /// are re-checked, so a save cannot strand a limit on a tool no longer granted.
    pub async fn update_skill(
        &self,
        skill: &Skill,
        expected_revision: i64,
    ) -> Result<Revised<SkillVersion>, StoreError> {
        let mut tx = self.begin_write().await?;
        let saved = update_skill_on(&mut tx, skill, expected_revision).await?;
        tx.commit().await?;
        Ok(saved)
    }

    /// [`Store::update_skill`] for a version approved from an uploaded `SKILL.md`: the file
    /// is kept with the version, for a byte-identical export.
    pub async fn update_skill_from_file(
        &self,
        skill: &Skill,
        expected_revision: i64,
        skill_md: Option<&str>,
    ) -> Result<Revised<SkillVersion>, StoreError> {
        let mut tx = self.begin_write().await?;
        let saved = update_skill_from_file_on(&mut tx, skill, expected_revision, skill_md).await?;
        tx.commit().await?;
        Ok(saved)
    }

    /// The `SKILL.md` version `version` of `slug` was uploaded as, if it was. Whether it
    /// still describes the version is [`crate::revisions::skill_md::skill_md_text`]'s call.
    pub async fn skill_md_file(
        &self,
        slug: &Slug,
        version: u32,
    ) -> Result<Option<String>, StoreError> {
        let text: Option<Option<String>> = sqlx::query_scalar(
            "SELECT skill_md FROM skill_versions WHERE skill = $1 AND version = $2",
        )
        .bind(slug.as_str())
        .bind(i64::from(version))
        .fetch_optional(self.pool())
        .await?;
        Ok(text.flatten())
    }

    /// Makes an earlier (or later) stored version current again; returns the new revision.
    pub async fn set_current_skill_version(
        &self,
        slug: &Slug,
        version: u32,
        expected_revision: i64,
    ) -> Result<i64, StoreError> {
        let mut tx = self.begin_write().await?;
        let saved = set_current_skill_version_on(&mut tx, slug, version, expected_revision).await?;
        tx.commit().await?;
        Ok(saved)
    }

    /// Every stored version of a skill, oldest first.
    pub async fn skill_versions(&self, slug: &Slug) -> Result<Vec<SkillVersion>, StoreError> {
        let rows = sqlx::query(&format!(
            "{SKILL_VERSION_COLUMNS} WHERE v.skill = $1 ORDER BY v.version"
        ))
        .bind(slug.as_str())
        .fetch_all(self.pool())
        .await?;
        Ok(rows
            .iter()
            .map(skill_version_from_row)
            .collect::<Result<_, _>>()?)
    }

    /// Current versions of all skills with their revisions.
    pub async fn list_skills(&self) -> Result<Vec<Revised<SkillVersion>>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(list_skills(&mut conn).await?)
    }

    pub async fn create_role(&self, role: &Role) -> Result<i64, StoreError> {
        let mut tx = self.begin_write().await?;
        let saved = create_role_on(&mut tx, role).await?;
        tx.commit().await?;
        Ok(saved)
    }

    /// Saves a changed role if nobody saved it since `expected_revision`; returns the new revision.
    pub async fn update_role(
        &self,
        role: &Role,
        expected_revision: i64,
    ) -> Result<i64, StoreError> {
        let mut tx = self.begin_write().await?;
        let saved = update_role_on(&mut tx, role, expected_revision).await?;
        tx.commit().await?;
        Ok(saved)
    }

    pub async fn list_roles(&self) -> Result<Vec<Revised<Role>>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(list_roles(&mut conn).await?)
    }

    pub async fn get_role(&self, slug: &Slug) -> Result<Option<Revised<Role>>, StoreError> {
        Ok(self
            .list_roles()
            .await?
            .into_iter()
            .find(|r| r.value.slug == *slug))
    }

    pub async fn create_scope(&self, scope: &Scope) -> Result<i64, StoreError> {
        let mut tx = self.begin_write().await?;
        let saved = create_scope_on(&mut tx, scope).await?;
        tx.commit().await?;
        Ok(saved)
    }

    pub async fn update_scope(
        &self,
        scope: &Scope,
        expected_revision: i64,
    ) -> Result<i64, StoreError> {
        let mut tx = self.begin_write().await?;
        let saved = update_scope_on(&mut tx, scope, expected_revision).await?;
        tx.commit().await?;
        Ok(saved)
    }

    pub async fn list_scopes(&self) -> Result<Vec<Revised<Scope>>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(list_scopes(&mut conn).await?)
    }

    /// Seeds `draft` with its one `upstream` into a database whose catalog has no roles
    /// yet, its tools admitted and pinned as drafted (the trust of a seed). Returns whether
    /// anything was seeded; a catalog that already has roles is left alone.
    pub async fn seed_catalog(
        &self,
        draft: CatalogDraft,
        upstream: &Upstream,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let roles: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM roles")
            .fetch_one(&mut *tx)
            .await?;
        if roles > 0 {
            return Ok(false);
        }
        draft
            .clone()
            .into_catalog(vec![upstream.clone()])
            .validate()?;
        upsert_upstream(&mut tx, upstream).await?;
        let specs: Vec<ToolSpec> = draft
            .tools
            .iter()
            .filter(|t| t.upstream == upstream.name)
            .map(|t| t.spec.clone())
            .collect();
        seed_tools(&mut tx, &upstream.name, &specs).await?;
        for skill in &draft.skills {
            insert_skill(&mut tx, skill).await?;
        }
        for role in &draft.roles {
            insert_role(&mut tx, role).await?;
        }
        for scope in &draft.scopes {
            insert_scope(&mut tx, scope).await?;
        }
        tx.commit().await?;
        Ok(true)
    }
}

pub(crate) async fn load_catalog(conn: &mut AnyConnection) -> Result<Catalog, StoreError> {
    // The built-in curation upstream and its tools live in code, not in the database.
    let (builtin, builtin_tools) = crate::model::curation::builtin_catalog_parts();
    let mut upstreams = list_upstreams(conn).await?;
    upstreams.push(builtin);
    let mut tools = list_tools(conn).await?;
    tools.extend(builtin_tools);
    Ok(Catalog {
        upstreams,
        tools,
        skills: list_skills(conn)
            .await?
            .into_iter()
            .map(|s| s.value)
            .collect(),
        roles: list_roles(conn)
            .await?
            .into_iter()
            .map(|r| r.value)
            .collect(),
        scopes: list_scopes(conn)
            .await?
            .into_iter()
            .map(|s| s.value)
            .collect(),
    })
}

/// [`Store::create_skill`] on a given connection: inside the audit writer's transaction, a catalog
/// save commits together with its `admin_change` event.
pub(crate) async fn create_skill_on(
    conn: &mut AnyConnection,
    skill: &Skill,
) -> Result<Revised<SkillVersion>, StoreError> {
    let catalog = load_catalog(&mut *conn).await?;
    catalog.validate_skill(skill)?;
    refuse_unadmitted(&mut *conn, skill).await?;
    if catalog.skill(skill.slug.as_str()).is_some() {
        return Err(StoreError::Conflict(format!(
            "skill `{}` already exists",
            skill.slug
        )));
    }
    let saved = insert_skill(&mut *conn, skill).await?;
    Ok(saved)
}

/// [`Store::update_skill`] on a given connection: inside the audit writer's transaction, a catalog
/// save commits together with its `admin_change` event.
pub(crate) async fn update_skill_on(
    conn: &mut AnyConnection,
    skill: &Skill,
    expected_revision: i64,
) -> Result<Revised<SkillVersion>, StoreError> {
    update_skill_from_file_on(conn, skill, expected_revision, None).await
}

/// [`update_skill_on`], keeping `skill_md` (the file the version was uploaded as) with it.
pub(crate) async fn update_skill_from_file_on(
    conn: &mut AnyConnection,
    skill: &Skill,
    expected_revision: i64,
    skill_md: Option<&str>,
) -> Result<Revised<SkillVersion>, StoreError> {
    let mut catalog = load_catalog(&mut *conn).await?;
    let (latest, revision) = skill_head(&mut *conn, &skill.slug).await?;
    if revision != expected_revision {
        return Err(conflict(
            "skill",
            skill.slug.as_str(),
            expected_revision,
            revision,
        ));
    }
    catalog.validate_skill(skill)?;
    refuse_unadmitted(&mut *conn, skill).await?;
    let version = latest + 1;
    if let Some(existing) = catalog
        .skills
        .iter_mut()
        .find(|s| s.skill.slug == skill.slug)
    {
        *existing = SkillVersion {
            version: version as u32,
            skill: skill.clone(),
        };
    }
    for role in catalog
        .roles
        .iter()
        .filter(|r| r.skills.contains(&skill.slug))
    {
        catalog.validate_role(role)?;
    }
    insert_skill_version(&mut *conn, skill, version, skill_md).await?;
    make_current(conn, &skill.slug, version).await?;
    Ok(Revised {
        value: SkillVersion {
            version: version as u32,
            skill: skill.clone(),
        },
        revision: revision + 1,
    })
}

/// [`Store::set_current_skill_version`] on a given connection: inside the audit writer's transaction, a catalog
/// save commits together with its `admin_change` event.
pub(crate) async fn set_current_skill_version_on(
    conn: &mut AnyConnection,
    slug: &Slug,
    version: u32,
    expected_revision: i64,
) -> Result<i64, StoreError> {
    let (_, revision) = skill_head(&mut *conn, slug).await?;
    if revision != expected_revision {
        return Err(conflict(
            "skill",
            slug.as_str(),
            expected_revision,
            revision,
        ));
    }
    let exists: Option<i64> =
        sqlx::query_scalar("SELECT version FROM skill_versions WHERE skill = $1 AND version = $2")
            .bind(slug.as_str())
            .bind(i64::from(version))
            .fetch_optional(&mut *conn)
            .await?;
    if exists.is_none() {
        return Err(StoreError::NotFound(format!(
            "version {version} of skill `{slug}`"
        )));
    }
    make_current(conn, slug, i64::from(version)).await?;
    Ok(revision + 1)
}

/// Points `slug` at its stored `version` and bumps the skill's revision, unchecked.
pub(super) async fn make_current(
    conn: &mut AnyConnection,
    slug: &Slug,
    version: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE skills SET current_version = $1, revision = revision + 1, updated_at = $2 \
         WHERE slug = $3",
    )
    .bind(version)
    .bind(stamp(Utc::now()))
    .bind(slug.as_str())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// [`Store::create_role`] on a given connection: inside the audit writer's transaction, a catalog
/// save commits together with its `admin_change` event.
pub(crate) async fn create_role_on(
    conn: &mut AnyConnection,
    role: &Role,
) -> Result<i64, StoreError> {
    let catalog = load_catalog(&mut *conn).await?;
    catalog.validate_role(role)?;
    if catalog.role(role.slug.as_str()).is_some() {
        return Err(StoreError::Conflict(format!(
            "role `{}` already exists",
            role.slug
        )));
    }
    insert_role(&mut *conn, role).await?;
    Ok(1)
}

/// [`Store::update_role`] on a given connection: inside the audit writer's transaction, a catalog
/// save commits together with its `admin_change` event.
pub(crate) async fn update_role_on(
    conn: &mut AnyConnection,
    role: &Role,
    expected_revision: i64,
) -> Result<i64, StoreError> {
    let revision = revision_of(&mut *conn, "roles", "role", &role.slug).await?;
    if revision != expected_revision {
        return Err(conflict(
            "role",
            role.slug.as_str(),
            expected_revision,
            revision,
        ));
    }
    load_catalog(&mut *conn).await?.validate_role(role)?;
    overwrite_role(conn, role).await?;
    Ok(revision + 1)
}

/// Writes `role` over the stored role of its slug, unchecked, and bumps its revision.
/// Returns whether there was one to overwrite.
pub(super) async fn overwrite_role(
    conn: &mut AnyConnection,
    role: &Role,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE roles SET title = $1, description = $2, instructions = $3, skills = $4, limits = $5, \
             revision = revision + 1, updated_at = $6 WHERE slug = $7",
    )
    .bind(&role.title)
    .bind(&role.description)
    .bind(&role.instructions)
    .bind(to_json(&role.skills))
    .bind(to_json(&role.limits))
    .bind(stamp(Utc::now()))
    .bind(role.slug.as_str())
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// [`Store::create_scope`] on a given connection: inside the audit writer's transaction, a catalog
/// save commits together with its `admin_change` event.
pub(crate) async fn create_scope_on(
    conn: &mut AnyConnection,
    scope: &Scope,
) -> Result<i64, StoreError> {
    let catalog = load_catalog(&mut *conn).await?;
    catalog.validate_scope(scope)?;
    if catalog.scope(scope.slug.as_str()).is_some() {
        return Err(StoreError::Conflict(format!(
            "scope `{}` already exists",
            scope.slug
        )));
    }
    insert_scope(&mut *conn, scope).await?;
    Ok(1)
}

/// [`Store::update_scope`] on a given connection: inside the audit writer's transaction, a catalog
/// save commits together with its `admin_change` event.
pub(crate) async fn update_scope_on(
    conn: &mut AnyConnection,
    scope: &Scope,
    expected_revision: i64,
) -> Result<i64, StoreError> {
    let revision = revision_of(&mut *conn, "scopes", "scope", &scope.slug).await?;
    if revision != expected_revision {
        return Err(conflict(
            "scope",
            scope.slug.as_str(),
            expected_revision,
            revision,
        ));
    }
    load_catalog(&mut *conn).await?.validate_scope(scope)?;
    overwrite_scope(conn, scope).await?;
    Ok(revision + 1)
}

/// Writes `scope` over the stored scope of its slug, unchecked, and bumps its revision.
/// Returns whether there was one to overwrite.
pub(super) async fn overwrite_scope(
    conn: &mut AnyConnection,
    scope: &Scope,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE scopes SET description = $1, roles = $2, guardrails = $3, revision = revision + 1, \
           updated_at = $4 WHERE slug = $5",
    )
    .bind(&scope.description)
    .bind(to_json(&scope.roles))
    .bind(to_json(&scope.guardrails))
    .bind(stamp(Utc::now()))
    .bind(scope.slug.as_str())
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// [`Store::set_sensitive_args`] on a given connection (see [`create_role_on`]).
pub(crate) async fn set_sensitive_args_on(
    conn: &mut AnyConnection,
    tool: &str,
    args: &[String],
) -> Result<(), StoreError> {
    let done = sqlx::query("UPDATE tools SET sensitive_args = $1, updated_at = $2 WHERE name = $3")
        .bind(to_json(&args))
        .bind(stamp(Utc::now()))
        .bind(tool)
        .execute(conn)
        .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound(format!("tool `{tool}`")));
    }
    Ok(())
}

/// [`Store::set_upstream_credentials`] on a given connection (see [`create_role_on`]).
pub(crate) async fn set_upstream_credentials_on(
    conn: &mut AnyConnection,
    upstream: &Slug,
    credentials: Option<&UpstreamCredentials>,
) -> Result<(), StoreError> {
    let done = sqlx::query("UPDATE upstreams SET credentials = $1 WHERE name = $2")
        .bind(
            credentials
                .filter(|c| !c.is_empty())
                .map(UpstreamCredentials::to_stored_json),
        )
        .bind(upstream.as_str())
        .execute(conn)
        .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound(format!("upstream `{upstream}`")));
    }
    Ok(())
}

/// [`Store::upstream_credentials`] on a given connection.
pub(crate) async fn upstream_credentials_on(
    conn: &mut AnyConnection,
) -> Result<BTreeMap<String, UpstreamCredentials>, StoreError> {
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT name, credentials FROM upstreams WHERE credentials IS NOT NULL")
            .fetch_all(conn)
            .await?;
    rows.into_iter()
        .map(|(name, text)| {
            UpstreamCredentials::from_stored_json(&text)
                .map(|c| (name.clone(), c))
                .map_err(|e| StoreError::Corrupt(format!("credentials of upstream `{name}`: {e}")))
        })
        .collect()
}

pub(crate) async fn upsert_upstream(
    conn: &mut AnyConnection,
    upstream: &Upstream,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO upstreams (name, kind, config, updated_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, config = excluded.config, updated_at = excluded.updated_at",
    )
    .bind(upstream.name.as_str())
    .bind(upstream.kind.label())
    .bind(to_json(&upstream.kind))
    .bind(stamp(Utc::now()))
    .execute(conn)
    .await?;
    Ok(())
}

pub(crate) async fn list_upstreams(conn: &mut AnyConnection) -> Result<Vec<Upstream>, sqlx::Error> {
    let rows = sqlx::query("SELECT name, config FROM upstreams ORDER BY name")
        .fetch_all(conn)
        .await?;
    rows.iter()
        .map(|row| {
            Ok(Upstream {
                name: slug_of("upstream name", row.try_get("name")?)?,
                kind: from_json("upstream config", row.try_get("config")?)?,
            })
        })
        .collect()
}

/// The pin state of one stored tool: what the console shows and an admin admits.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolPin {
    pub tool: String,
    pub upstream: Slug,
    /// The admitted definition (with the admin's sensitive markings); `None` for a tool no
    /// admin has admitted yet.
    pub pinned: Option<ToolSpec>,
    /// Hex SHA-256 of the pinned definition ([`ToolSpec::pin`]); `None`: never admitted.
    pub pin: Option<String>,
    /// What the upstream offers now, while it is not the pinned definition.
    pub offered: Option<ToolSpec>,
    /// Since when calls are refused; `None`: not quarantined.
    pub quarantined_since: Option<String>,
}

impl ToolPin {
    /// Quarantined because no admin has admitted it yet (rather than because it changed).
    pub fn is_new(&self) -> bool {
        self.pin.is_none()
    }

    pub fn offered_pin(&self) -> Option<String> {
        self.offered.as_ref().map(ToolSpec::pin)
    }
}

/// One quarantine, lift or admission, for its `admin_change` event on target `tool:<name>`:
/// `before` and `after` are `{"pin", "offered"}` hashes (`null` where there is none).
#[derive(Debug, Clone, PartialEq)]
pub struct PinChange {
    pub tool: String,
    /// `tool.quarantine`, `tool.unquarantine`, `tool.admit`, `tool.missing` (its upstream
    /// stopped listing it) or `tool.returned` (listed again).
    pub action: &'static str,
    pub before: serde_json::Value,
    pub after: serde_json::Value,
}

fn pin_state(pin: Option<&str>, offered: Option<&str>) -> serde_json::Value {
    serde_json::json!({ "pin": pin, "offered": offered })
}

/// What a sync of one upstream's `tools/list` changed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolSync {
    /// Distinct tools the upstream listed.
    pub listed: usize,
    /// Stored tools of the upstream it no longer lists (kept with their definition, flagged).
    pub missing: Vec<String>,
    /// Quarantines and lifts, by tool name.
    pub changes: Vec<PinChange>,
}

/// A tool row as stored, pin columns included.
struct StoredTool {
    upstream: String,
    /// The definition columns with the sensitive markings.
    spec: ToolSpec,
    pin: Option<String>,
    offered: Option<String>,
    offered_pin: Option<String>,
    quarantined_since: Option<String>,
}

impl StoredTool {
    fn into_pin(self) -> Result<ToolPin, sqlx::Error> {
        let offered = self
            .offered
            .as_deref()
            .map(ToolSpec::from_definition)
            .transpose()
            .map_err(|e| decode_err("offered tool definition", e))?;
        let upstream = slug_of("tool upstream", &self.upstream)?;
        Ok(ToolPin {
            tool: self.spec.name.clone(),
            upstream,
            pinned: self.pin.is_some().then(|| self.spec.clone()),
            pin: self.pin,
            offered,
            quarantined_since: self.quarantined_since,
        })
    }
}

const TOOL_COLUMNS: &str = "SELECT name, upstream, description, input_schema, output_schema, annotations, \
     sensitive_args, pin, offered, offered_pin, quarantined_since FROM tools";

fn stored_tool(row: &sqlx::any::AnyRow) -> Result<StoredTool, sqlx::Error> {
    let optional_json =
        |column: &str, what: &str| -> Result<Option<serde_json::Value>, sqlx::Error> {
            row.try_get::<Option<String>, _>(column)?
                .map(|text| from_json(what, &text))
                .transpose()
        };
    Ok(StoredTool {
        upstream: row.try_get("upstream")?,
        spec: ToolSpec {
            name: row.try_get("name")?,
            description: row.try_get("description")?,
            input_schema: from_json("tool input schema", row.try_get("input_schema")?)?,
            output_schema: optional_json("output_schema", "tool output schema")?,
            annotations: optional_json("annotations", "tool annotations")?,
            sensitive_args: from_json("tool sensitive arguments", row.try_get("sensitive_args")?)?,
        },
        pin: row.try_get("pin")?,
        offered: row.try_get("offered")?,
        offered_pin: row.try_get("offered_pin")?,
        quarantined_since: row.try_get("quarantined_since")?,
    })
}

async fn stored_tools(conn: &mut AnyConnection) -> Result<Vec<StoredTool>, sqlx::Error> {
    let rows = sqlx::query(&format!("{TOOL_COLUMNS} ORDER BY name"))
        .fetch_all(conn)
        .await?;
    rows.iter().map(stored_tool).collect()
}

async fn known_upstream(conn: &mut AnyConnection, upstream: &Slug) -> Result<(), StoreError> {
    let known: Option<String> = sqlx::query_scalar("SELECT name FROM upstreams WHERE name = $1")
        .bind(upstream.as_str())
        .fetch_optional(conn)
        .await?;
    match known {
        Some(_) => Ok(()),
        None => Err(StoreError::Invalid(CatalogError::UnknownUpstream(
            upstream.clone(),
        ))),
    }
}

fn optional_text(value: Option<&serde_json::Value>) -> Option<String> {
    value.map(to_json)
}

/// [`Store::seed_tools`] on a given connection.
async fn seed_tools(
    conn: &mut AnyConnection,
    upstream: &Slug,
    tools: &[ToolSpec],
) -> Result<(), StoreError> {
    known_upstream(&mut *conn, upstream).await?;
    let now = stamp(Utc::now());
    for tool in tools {
        let done = sqlx::query(
            "INSERT INTO tools (name, upstream, description, input_schema, output_schema, annotations, \
               sensitive_args, pin, offered, offered_pin, quarantined_since, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL, NULL, NULL, $9) \
             ON CONFLICT (name) DO UPDATE SET description = excluded.description, \
               input_schema = excluded.input_schema, output_schema = excluded.output_schema, \
               annotations = excluded.annotations, pin = excluded.pin, offered = NULL, \
               offered_pin = NULL, quarantined_since = NULL, updated_at = excluded.updated_at, \
               sensitive_args = CASE WHEN excluded.sensitive_args = '[]' THEN tools.sensitive_args \
                                     ELSE excluded.sensitive_args END \
             WHERE tools.upstream = excluded.upstream",
        )
        .bind(&tool.name)
        .bind(upstream.as_str())
        .bind(&tool.description)
        .bind(to_json(&tool.input_schema))
        .bind(optional_text(tool.output_schema.as_ref()))
        .bind(optional_text(tool.annotations.as_ref()))
        .bind(to_json(&tool.sensitive_args))
        .bind(tool.pin())
        .bind(&now)
        .execute(&mut *conn)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Conflict(format!(
                "tool `{}` is already provided by another upstream",
                tool.name
            )));
        }
    }
    let stored: Vec<String> = sqlx::query_scalar("SELECT name FROM tools WHERE upstream = $1")
        .bind(upstream.as_str())
        .fetch_all(&mut *conn)
        .await?;
    for gone in stored
        .iter()
        .filter(|name| !tools.iter().any(|t| &t.name == *name))
    {
        sqlx::query("DELETE FROM tools WHERE name = $1")
            .bind(gone)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Saves what `upstream`'s `tools/list` offered, against the pins (the sync's store half;
/// [`crate::admin::AdminService::sync_tools`] commits it with its events):
///
/// - a tool it starts offering is stored quarantined, its offer as its definition, no pin;
/// - a pinned tool whose offer hashes otherwise is quarantined at once: its definition stays
///   the pinned one and the offer is stored beside it; an offer equal to the pin lifts it;
/// - tools it no longer lists are flagged missing (kept as they are), the others unflagged.
///
/// A name listed twice counts once, with its last listing; a name another upstream
/// provides is a conflict and nothing is saved.
pub(crate) async fn sync_tools_on(
    conn: &mut AnyConnection,
    upstream: &Slug,
    listed: &[ToolSpec],
) -> Result<ToolSync, StoreError> {
    known_upstream(&mut *conn, upstream).await?;
    let offers: BTreeMap<&str, &ToolSpec> = listed.iter().map(|t| (t.name.as_str(), t)).collect();
    let stored: BTreeMap<String, StoredTool> = stored_tools(&mut *conn)
        .await?
        .into_iter()
        .map(|t| (t.spec.name.clone(), t))
        .collect();
    let now = stamp(Utc::now());
    let mut changes = Vec::new();
    for (&name, &offer) in &offers {
        let offered_pin = offer.pin();
        let quarantine = |before: serde_json::Value, pin: Option<&str>| PinChange {
            tool: name.to_owned(),
            action: "tool.quarantine",
            before,
            after: pin_state(pin, Some(&offered_pin)),
        };
        let Some(row) = stored.get(name) else {
            sqlx::query(
                "INSERT INTO tools (name, upstream, description, input_schema, output_schema, annotations, \
                   sensitive_args, pin, offered, offered_pin, quarantined_since, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, '[]', NULL, $7, $8, $9, $10)",
            )
            .bind(name)
            .bind(upstream.as_str())
            .bind(&offer.description)
            .bind(to_json(&offer.input_schema))
            .bind(optional_text(offer.output_schema.as_ref()))
            .bind(optional_text(offer.annotations.as_ref()))
            .bind(offer.canonical_definition())
            .bind(&offered_pin)
            .bind(&now)
            .bind(&now)
            .execute(&mut *conn)
            .await?;
            changes.push(quarantine(pin_state(None, None), None));
            continue;
        };
        if row.upstream != upstream.as_str() {
            return Err(StoreError::Conflict(format!(
                "tool `{name}` is already provided by another upstream"
            )));
        }
        let before = pin_state(row.pin.as_deref(), row.offered_pin.as_deref());
        match row.pin.as_deref() {
            // Never admitted: what agents would read is only ever the latest offer.
            None => {
                if row.offered_pin.as_deref() == Some(offered_pin.as_str()) {
                    continue;
                }
                sqlx::query(
                    "UPDATE tools SET description = $1, input_schema = $2, output_schema = $3, \
                       annotations = $4, offered = $5, offered_pin = $6, \
                       quarantined_since = COALESCE(quarantined_since, $7), updated_at = $8 \
                     WHERE name = $9",
                )
                .bind(&offer.description)
                .bind(to_json(&offer.input_schema))
                .bind(optional_text(offer.output_schema.as_ref()))
                .bind(optional_text(offer.annotations.as_ref()))
                .bind(offer.canonical_definition())
                .bind(&offered_pin)
                .bind(&now)
                .bind(&now)
                .bind(name)
                .execute(&mut *conn)
                .await?;
                changes.push(quarantine(before, None));
            }
            Some(pin) if pin == offered_pin => {
                if row.offered.is_none() && row.quarantined_since.is_none() {
                    continue;
                }
                sqlx::query(
                    "UPDATE tools SET offered = NULL, offered_pin = NULL, quarantined_since = NULL, \
                       updated_at = $1 WHERE name = $2",
                )
                .bind(&now)
                .bind(name)
                .execute(&mut *conn)
                .await?;
                changes.push(PinChange {
                    tool: name.to_owned(),
                    action: "tool.unquarantine",
                    before,
                    after: pin_state(Some(pin), None),
                });
            }
            Some(pin) => {
                if row.offered_pin.as_deref() == Some(offered_pin.as_str()) {
                    continue;
                }
                sqlx::query(
                    "UPDATE tools SET offered = $1, offered_pin = $2, \
                       quarantined_since = COALESCE(quarantined_since, $3), updated_at = $4 \
                     WHERE name = $5",
                )
                .bind(offer.canonical_definition())
                .bind(&offered_pin)
                .bind(&now)
                .bind(&now)
                .bind(name)
                .execute(&mut *conn)
                .await?;
                changes.push(quarantine(before, Some(pin)));
            }
        }
    }
    let missing: Vec<String> = stored
        .values()
        .filter(|t| t.upstream == upstream.as_str() && !offers.contains_key(t.spec.name.as_str()))
        .map(|t| t.spec.name.clone())
        .collect();
    changes.extend(mark_missing_on(&mut *conn, upstream, &missing).await?);
    Ok(ToolSync {
        listed: offers.len(),
        missing,
        changes,
    })
}

/// [`Store::mark_missing_tools`] on a given connection. Returns one change per tool whose
/// flag it raised (`tool.missing`) or lowered (`tool.returned`), for the audit.
async fn mark_missing_on(
    conn: &mut AnyConnection,
    upstream: &Slug,
    missing: &[String],
) -> Result<Vec<PinChange>, StoreError> {
    let flagged: Vec<(String, String)> = sqlx::query_as(
        "SELECT name, missing_since FROM tools \
         WHERE upstream = $1 AND missing_since IS NOT NULL ORDER BY name",
    )
    .bind(upstream.as_str())
    .fetch_all(&mut *conn)
    .await?;
    let now = stamp(Utc::now());
    let flag = |tool: &str, action, before, after| PinChange {
        tool: tool.to_owned(),
        action,
        before: serde_json::json!({ "missing_since": before }),
        after: serde_json::json!({ "missing_since": after }),
    };
    let mut changes: Vec<PinChange> = flagged
        .iter()
        .filter(|(name, _)| !missing.contains(name))
        .map(|(name, since)| flag(name, "tool.returned", Some(since.clone()), None))
        .collect();
    sqlx::query(
        "UPDATE tools SET missing_since = NULL \
         WHERE upstream = $1 AND name NOT IN (SELECT value FROM json_each($2))",
    )
    .bind(upstream.as_str())
    .bind(to_json(&missing))
    .execute(&mut *conn)
    .await?;
    for name in missing {
        let raised = sqlx::query(
            "UPDATE tools SET missing_since = $1 \
             WHERE name = $2 AND upstream = $3 AND missing_since IS NULL",
        )
        .bind(&now)
        .bind(name)
        .bind(upstream.as_str())
        .execute(&mut *conn)
        .await?;
        if raised.rows_affected() > 0 {
            changes.push(flag(name, "tool.missing", None, Some(now.clone())));
        }
    }
    Ok(changes)
}

/// Re-pins `tool` to the definition its upstream offers, if that is still the one hashing to
/// `expected_offer` (what the admin reviewed). The offer must be usable: its input schema
/// compiles and the limits of the roles and scopes that bound the tool still apply to it.
pub(crate) async fn admit_tool_on(
    conn: &mut AnyConnection,
    tool: &str,
    expected_offer: &str,
) -> Result<PinChange, StoreError> {
    let row = sqlx::query(&format!("{TOOL_COLUMNS} WHERE name = $1"))
        .bind(tool)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("tool `{tool}`")))?;
    let row = stored_tool(&row)?;
    let (Some(offered), Some(offered_pin)) = (row.offered.as_deref(), row.offered_pin.as_deref())
    else {
        return Err(StoreError::Conflict(format!(
            "`{tool}` is not quarantined: its upstream offers the pinned definition, so there is nothing to admit"
        )));
    };
    if offered_pin != expected_offer {
        return Err(StoreError::Conflict(format!(
            "the definition `{tool}`'s upstream offers changed since you looked (it is now {}, you reviewed {}): review it again",
            short_pin(offered_pin),
            short_pin(expected_offer)
        )));
    }
    let mut offer = ToolSpec::from_definition(offered)
        .map_err(|e| StoreError::Corrupt(format!("offered definition of `{tool}`: {e}")))?;
    offer.sensitive_args = row.spec.sensitive_args.clone();
    let mut catalog = load_catalog(&mut *conn).await?;
    let Some(entry) = catalog.tools.iter_mut().find(|t| t.spec.name == tool) else {
        return Err(StoreError::NotFound(format!("tool `{tool}`")));
    };
    entry.spec = offer.clone();
    entry.quarantine = None;
    let entry = entry.clone();
    catalog.validate_tool(&entry)?;
    for role in catalog
        .roles
        .iter()
        .filter(|r| r.limits.iter().any(|l| l.tool() == tool))
    {
        catalog.validate_role(role)?;
    }
    for scope in catalog
        .scopes
        .iter()
        .filter(|s| s.guardrails.iter().any(|l| l.tool() == tool))
    {
        catalog.validate_scope(scope)?;
    }
    sqlx::query(
        "UPDATE tools SET description = $1, input_schema = $2, output_schema = $3, annotations = $4, \
           pin = $5, offered = NULL, offered_pin = NULL, quarantined_since = NULL, updated_at = $6 \
         WHERE name = $7",
    )
    .bind(&offer.description)
    .bind(to_json(&offer.input_schema))
    .bind(optional_text(offer.output_schema.as_ref()))
    .bind(optional_text(offer.annotations.as_ref()))
    .bind(offered_pin)
    .bind(stamp(Utc::now()))
    .bind(tool)
    .execute(&mut *conn)
    .await?;
    Ok(PinChange {
        tool: tool.to_owned(),
        action: "tool.admit",
        before: pin_state(row.pin.as_deref(), Some(offered_pin)),
        after: pin_state(Some(offered_pin), None),
    })
}

fn short_pin(pin: &str) -> &str {
    pin.get(..12).unwrap_or(pin)
}

/// Refuses a skill that uses a tool no admin has admitted: it could never be called, and
/// granting it would let an unreviewed definition reach agents the day it is admitted
/// without anyone having looked at where it is granted.
async fn refuse_unadmitted(conn: &mut AnyConnection, skill: &Skill) -> Result<(), StoreError> {
    let unadmitted: Option<String> = sqlx::query_scalar(
        "SELECT name FROM tools WHERE pin IS NULL AND quarantined_since IS NOT NULL \
           AND name IN (SELECT value FROM json_each($1)) ORDER BY name LIMIT 1",
    )
    .bind(to_json(&skill.tools))
    .fetch_optional(conn)
    .await?;
    match unadmitted {
        Some(tool) => Err(StoreError::Invalid(CatalogError::ToolNotAdmitted(tool))),
        None => Ok(()),
    }
}

/// Pins the tools stored before pins existed, as they are (migration 0015 adds the columns;
/// SQLite cannot hash, so the store finishes the upgrade when it opens the database). A row
/// without a pin that is not quarantined is such a tool: nothing else writes one.
pub(crate) async fn pin_tools_stored_before_pins(store: &Store) -> Result<(), StoreError> {
    let mut tx = store.begin_write().await?;
    let rows = sqlx::query(&format!(
        "{TOOL_COLUMNS} WHERE pin IS NULL AND quarantined_since IS NULL"
    ))
    .fetch_all(&mut *tx)
    .await?;
    for row in &rows {
        let tool = stored_tool(row)?;
        sqlx::query("UPDATE tools SET pin = $1 WHERE name = $2 AND pin IS NULL")
            .bind(tool.spec.pin())
            .bind(&tool.spec.name)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

async fn list_tools(conn: &mut AnyConnection) -> Result<Vec<CatalogTool>, sqlx::Error> {
    stored_tools(conn)
        .await?
        .into_iter()
        .map(|tool| {
            let quarantine = match (&tool.quarantined_since, &tool.offered) {
                (None, _) => None,
                (Some(_), Some(offered)) => {
                    let offered = ToolSpec::from_definition(offered)
                        .map_err(|e| decode_err("offered tool definition", e))?;
                    let pinned = tool.pin.is_some().then_some(&tool.spec);
                    Some(quarantine_reason(pinned, &offered))
                }
                // Quarantined without a stored offer: still refused, fail closed.
                (Some(_), None) => {
                    Some("it is quarantined and its offered definition is not stored".to_owned())
                }
            };
            Ok(CatalogTool {
                upstream: slug_of("tool upstream", &tool.upstream)?,
                spec: tool.spec,
                quarantine,
            })
        })
        .collect()
}

async fn tool_pin(conn: &mut AnyConnection, name: &str) -> Result<Option<ToolPin>, sqlx::Error> {
    sqlx::query(&format!("{TOOL_COLUMNS} WHERE name = $1"))
        .bind(name)
        .fetch_optional(conn)
        .await?
        .map(|row| stored_tool(&row)?.into_pin())
        .transpose()
}

async fn quarantined_tools(conn: &mut AnyConnection) -> Result<Vec<ToolPin>, sqlx::Error> {
    let rows = sqlx::query(&format!(
        "{TOOL_COLUMNS} WHERE quarantined_since IS NOT NULL ORDER BY name"
    ))
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|row| stored_tool(row)?.into_pin())
        .collect()
}

const SKILL_VERSION_COLUMNS: &str = "SELECT v.skill, v.version, v.description, v.instructions, v.tools, v.resources, v.frontmatter, s.revision \
     FROM skill_versions v JOIN skills s ON s.slug = v.skill";

fn skill_version_from_row(row: &sqlx::any::AnyRow) -> Result<SkillVersion, sqlx::Error> {
    let version: i64 = row.try_get("version")?;
    Ok(SkillVersion {
        version: u32::try_from(version).map_err(|e| decode_err("skill version", e))?,
        skill: Skill {
            slug: slug_of("skill slug", row.try_get("skill")?)?,
            description: row.try_get("description")?,
            instructions: row.try_get("instructions")?,
            tools: from_json("skill tools", row.try_get("tools")?)?,
            resources: from_json("skill resources", row.try_get("resources")?)?,
            frontmatter_extra: from_json("skill frontmatter", row.try_get("frontmatter")?)?,
        },
    })
}

pub(crate) async fn list_skills(
    conn: &mut AnyConnection,
) -> Result<Vec<Revised<SkillVersion>>, sqlx::Error> {
    let rows = sqlx::query(&format!(
        "{SKILL_VERSION_COLUMNS} AND v.version = s.current_version ORDER BY v.skill"
    ))
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(Revised {
                value: skill_version_from_row(row)?,
                revision: row.try_get("revision")?,
            })
        })
        .collect()
}

/// The latest version number and the revision of a stored skill. New versions number
/// after the latest one, even when an older version was restored as current.
pub(super) async fn skill_head(
    conn: &mut AnyConnection,
    slug: &Slug,
) -> Result<(i64, i64), StoreError> {
    let revision: i64 = sqlx::query_scalar("SELECT revision FROM skills WHERE slug = $1")
        .bind(slug.as_str())
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("skill `{slug}`")))?;
    let latest: i64 =
        sqlx::query_scalar("SELECT MAX(version) FROM skill_versions WHERE skill = $1")
            .bind(slug.as_str())
            .fetch_one(&mut *conn)
            .await?;
    Ok((latest, revision))
}

pub(super) async fn insert_skill(
    conn: &mut AnyConnection,
    skill: &Skill,
) -> Result<Revised<SkillVersion>, StoreError> {
    sqlx::query(
        "INSERT INTO skills (slug, current_version, revision, updated_at) VALUES ($1, 1, 1, $2)",
    )
    .bind(skill.slug.as_str())
    .bind(stamp(Utc::now()))
    .execute(&mut *conn)
    .await?;
    insert_skill_version(conn, skill, 1, None).await?;
    Ok(Revised {
        value: SkillVersion {
            version: 1,
            skill: skill.clone(),
        },
        revision: 1,
    })
}

pub(super) async fn insert_skill_version(
    conn: &mut AnyConnection,
    skill: &Skill,
    version: i64,
    skill_md: Option<&str>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO skill_versions (skill, version, description, instructions, tools, resources, \
         frontmatter, skill_md, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(skill.slug.as_str())
    .bind(version)
    .bind(&skill.description)
    .bind(&skill.instructions)
    .bind(to_json(&skill.tools))
    .bind(to_json(&skill.resources))
    .bind(to_json(&skill.frontmatter_extra))
    .bind(skill_md)
    .bind(stamp(Utc::now()))
    .execute(conn)
    .await?;
    Ok(())
}

pub(super) async fn insert_role(conn: &mut AnyConnection, role: &Role) -> Result<(), StoreError> {
    let now = stamp(Utc::now());
    sqlx::query(
        "INSERT INTO roles (slug, title, description, instructions, skills, limits, revision, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8)",
    )
    .bind(role.slug.as_str())
    .bind(&role.title)
    .bind(&role.description)
    .bind(&role.instructions)
    .bind(to_json(&role.skills))
    .bind(to_json(&role.limits))
    .bind(&now)
    .bind(&now)
    .execute(conn)
    .await?;
    Ok(())
}

pub(crate) async fn list_roles(
    conn: &mut AnyConnection,
) -> Result<Vec<Revised<Role>>, sqlx::Error> {
    let rows = sqlx::query("SELECT slug, title, description, instructions, skills, limits, revision FROM roles ORDER BY slug")
        .fetch_all(conn)
        .await?;
    rows.iter()
        .map(|row| {
            Ok(Revised {
                value: Role {
                    slug: slug_of("role slug", row.try_get("slug")?)?,
                    title: row.try_get("title")?,
                    description: row.try_get("description")?,
                    instructions: row.try_get("instructions")?,
                    skills: from_json("role skills", row.try_get("skills")?)?,
                    limits: from_json("role limits", row.try_get("limits")?)?,
                },
                revision: row.try_get("revision")?,
            })
        })
        .collect()
}

pub(super) async fn insert_scope(
    conn: &mut AnyConnection,
    scope: &Scope,
) -> Result<(), StoreError> {
    let now = stamp(Utc::now());
    sqlx::query("INSERT INTO scopes (slug, description, roles, guardrails, revision, created_at, updated_at) VALUES ($1, $2, $3, $4, 1, $5, $6)")
        .bind(scope.slug.as_str())
        .bind(&scope.description)
        .bind(to_json(&scope.roles))
        .bind(to_json(&scope.guardrails))
        .bind(&now)
        .bind(&now)
        .execute(conn)
        .await?;
    Ok(())
}

pub(crate) async fn list_scopes(
    conn: &mut AnyConnection,
) -> Result<Vec<Revised<Scope>>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT slug, description, roles, guardrails, revision FROM scopes ORDER BY slug",
    )
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(Revised {
                value: Scope {
                    slug: slug_of("scope slug", row.try_get("slug")?)?,
                    description: row.try_get("description")?,
                    roles: from_json("scope roles", row.try_get("roles")?)?,
                    guardrails: from_json("scope guardrails", row.try_get("guardrails")?)?,
                },
                revision: row.try_get("revision")?,
            })
        })
        .collect()
}

/// The revision of a role or scope row; `table` is one of our own constants, never input.
async fn revision_of(
    conn: &mut AnyConnection,
    table: &'static str,
    kind: &str,
    slug: &Slug,
) -> Result<i64, StoreError> {
    sqlx::query_scalar(&format!("SELECT revision FROM {table} WHERE slug = $1"))
        .bind(slug.as_str())
        .fetch_optional(conn)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("{kind} `{slug}`")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::demo::catalog::demo_catalog;
    use crate::model::{ArgCheck, CmpOp, Limit, UpstreamKind};
    use crate::policy::{CallRequest, Decision, Outcome, SessionView, decide, value_digest};
    use crate::store::test_store;

    fn slug(text: &str) -> Slug {
        Slug::parse(text).unwrap()
    }

    async fn seeded() -> Store {
        let store = test_store().await;
        assert!(store.seed_demo("/usr/bin/skillgate").await.unwrap());
        store
    }

    #[tokio::test]
    async fn seeding_an_empty_database_stores_the_demo_catalog_as_drafted() {
        let store = seeded().await;
        let mut loaded = store.load_catalog().await.unwrap();
        // Built-in tools follow the stored ones; compare as sets.
        loaded.tools.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        let upstream = Upstream {
            name: slug("demo"),
            kind: UpstreamKind::Stdio {
                command: "/usr/bin/skillgate".into(),
                args: vec!["demo-upstream".into()],
            },
        };
        let mut expected = demo_catalog().into_catalog(vec![upstream]);
        expected.tools.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        expected
            .skills
            .sort_by(|a, b| a.skill.slug.cmp(&b.skill.slug));
        expected.roles.sort_by(|a, b| a.slug.cmp(&b.slug));
        expected.scopes.sort_by(|a, b| a.slug.cmp(&b.slug));
        assert_eq!(loaded, expected);
    }

    #[tokio::test]
    async fn seeding_again_changes_nothing() {
        let store = seeded().await;
        let before = store.load_catalog().await.unwrap();
        assert!(!store.seed_demo("/elsewhere/skillgate").await.unwrap());
        assert_eq!(store.load_catalog().await.unwrap(), before);
    }

    #[tokio::test]
    async fn the_seeded_catalog_compiles_and_enforces_tier_1_refund_limits() {
        let catalog = seeded().await.compiled_catalog().await.unwrap();
        assert!(catalog.broken_tools().is_empty());
        let now = chrono::Utc::now();
        let mut session =
            SessionView::new("s", "k", slug("support"), now + chrono::Duration::hours(1));
        session.learn(slug("tier-1-support"), vec![]);
        let mut eligible = Outcome::default();
        eligible
            .args
            .insert("order_id".into(), value_digest(&json!("O-5001")));
        eligible
            .results
            .insert("/eligible".into(), value_digest(&json!(true)));
        session.record_success("check_refund_eligibility", Some(eligible));
        let args =
            json!({"customer_id": "C-1001", "order_id": "O-5001", "amount": 600, "reason": "late"});
        let request = CallRequest {
            session_id: "s",
            key_id: "k",
            tool: "process_refund",
            arguments: args.as_object().unwrap().clone(),
            approved: None,
        };
        let decision = decide(&catalog, Some(&session), request, now);
        assert!(
            matches!(&decision, Decision::Deny(denial) if denial.rule.contains("at most 500")),
            "{decision:?}"
        );
    }

    #[tokio::test]
    async fn a_role_update_from_a_stale_revision_is_a_conflict_and_changes_nothing() {
        let store = seeded().await;
        let stored = store
            .get_role(&slug("billing-admin"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.revision, 1);
        let mut edited = stored.value.clone();
        edited.description = "Billing, carefully.".into();
        assert_eq!(store.update_role(&edited, 1).await.unwrap(), 2);
        let mut late = stored.value.clone();
        late.title = "Someone else's edit".into();
        let err = store.update_role(&late, 1).await.unwrap_err();
        assert!(matches!(err, StoreError::Conflict(_)), "{err}");
        assert!(err.to_string().contains("billing-admin"), "{err}");
        let now = store
            .get_role(&slug("billing-admin"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (now.value.description.as_str(), now.revision),
            ("Billing, carefully.", 2)
        );
    }

    #[tokio::test]
    async fn a_role_with_an_invalid_limit_is_refused_naming_the_problem() {
        let store = seeded().await;
        let mut role = store
            .get_role(&slug("tier-1-support"))
            .await
            .unwrap()
            .unwrap()
            .value;
        role.limits.push(Limit::ArgBound {
            tool: "process_refund".into(),
            arg: "reason".into(),
            check: ArgCheck::Compare {
                op: CmpOp::Le,
                value: 5.into(),
            },
        });
        let err = store.update_role(&role, 1).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("`process_refund.reason` is not a number"),
            "{err}"
        );
        let unchanged = store
            .get_role(&slug("tier-1-support"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((unchanged.value.limits.len(), unchanged.revision), (4, 1));
    }

    #[tokio::test]
    async fn creating_a_role_twice_or_updating_a_missing_one_fails_clearly() {
        let store = seeded().await;
        let role = store
            .get_role(&slug("system-admin"))
            .await
            .unwrap()
            .unwrap()
            .value;
        assert!(matches!(
            store.create_role(&role).await,
            Err(StoreError::Conflict(_))
        ));
        let mut ghost = role.clone();
        ghost.slug = slug("ghost");
        assert!(matches!(
            store.update_role(&ghost, 1).await,
            Err(StoreError::NotFound(_))
        ));
        assert_eq!(store.create_role(&ghost).await.unwrap(), 1);
    }

    #[tokio::test]
    async fn each_skill_save_is_a_new_current_version_and_an_old_one_can_be_restored() {
        let store = seeded().await;
        let slug = slug("customer-lookup");
        let mut skill = store
            .load_catalog()
            .await
            .unwrap()
            .skill("customer-lookup")
            .unwrap()
            .skill
            .clone();
        skill
            .instructions
            .push_str("\n\nAlways greet the customer by name.");
        let saved = store.update_skill(&skill, 1).await.unwrap();
        assert_eq!((saved.value.version, saved.revision), (2, 2));
        assert!(matches!(
            store.update_skill(&skill, 1).await,
            Err(StoreError::Conflict(_))
        ));
        assert_eq!(
            store
                .skill_versions(&slug)
                .await
                .unwrap()
                .iter()
                .map(|v| v.version)
                .collect::<Vec<_>>(),
            [1, 2]
        );
        assert_eq!(
            store.set_current_skill_version(&slug, 1, 2).await.unwrap(),
            3
        );
        let current = store
            .load_catalog()
            .await
            .unwrap()
            .skill("customer-lookup")
            .unwrap()
            .clone();
        assert_eq!(current.version, 1);
        assert!(!current.skill.instructions.contains("greet"));
        let next = store.update_skill(&skill, 3).await.unwrap();
        assert_eq!(
            next.value.version, 3,
            "new versions number after the latest, not the current"
        );
        assert!(matches!(
            store.set_current_skill_version(&slug, 9, 4).await,
            Err(StoreError::NotFound(_))
        ));
    }

    #[tokio::test]
    async fn a_skill_save_that_strands_a_role_limit_is_refused() {
        let store = seeded().await;
        let mut skill = store
            .load_catalog()
            .await
            .unwrap()
            .skill("refund-handling")
            .unwrap()
            .skill
            .clone();
        skill.tools.retain(|t| t != "process_refund");
        let err = store.update_skill(&skill, 1).await.unwrap_err();
        assert!(
            err.to_string().contains("does not grant `process_refund`"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_scope_with_an_unknown_role_is_refused_and_a_good_one_saved() {
        let store = seeded().await;
        let mut scope = Scope {
            slug: slug("night-shift"),
            description: "Nights.".into(),
            roles: vec![slug("ghost")],
            guardrails: Vec::new(),
        };
        assert!(matches!(
            store.create_scope(&scope).await,
            Err(StoreError::Invalid(CatalogError::UnknownRole(_)))
        ));
        scope.roles = vec![slug("tier-1-support")];
        assert_eq!(store.create_scope(&scope).await.unwrap(), 1);
        scope.roles.push(slug("billing-admin"));
        assert_eq!(store.update_scope(&scope, 1).await.unwrap(), 2);
        assert!(matches!(
            store.update_scope(&scope, 1).await,
            Err(StoreError::Conflict(_))
        ));
        let stored = store
            .list_scopes()
            .await
            .unwrap()
            .into_iter()
            .find(|s| s.value.slug == scope.slug)
            .unwrap();
        assert_eq!(stored.value, scope);
    }

    #[tokio::test]
    async fn refreshing_an_upstream_tool_list_replaces_it_but_keeps_sensitive_markings() {
        let store = seeded().await;
        let mut specs: Vec<ToolSpec> = crate::demo::tools::tool_specs()
            .into_iter()
            .filter(|t| t.name != "delete_user_account")
            .collect();
        for spec in &mut specs {
            spec.sensitive_args.clear();
            if spec.name == "lookup_customer" {
                spec.description = "Find a customer.".into();
            }
        }
        store.seed_tools(&slug("demo"), &specs).await.unwrap();
        let tools = store.list_tools().await.unwrap();
        assert_eq!(tools.len(), 14);
        assert!(tools.iter().all(|t| t.spec.name != "delete_user_account"));
        let lookup = tools
            .iter()
            .find(|t| t.spec.name == "lookup_customer")
            .unwrap();
        assert_eq!(lookup.spec.description, "Find a customer.");
        let payment = tools
            .iter()
            .find(|t| t.spec.name == "update_payment_method")
            .unwrap();
        assert_eq!(payment.spec.sensitive_args, ["token"]);
    }

    #[tokio::test]
    async fn a_tool_name_another_upstream_provides_is_a_conflict() {
        let store = seeded().await;
        let other = Upstream {
            name: slug("other"),
            kind: UpstreamKind::Http {
                url: "http://other.invalid/mcp".into(),
                ca_bundle: None,
            },
        };
        store.upsert_upstream(&other).await.unwrap();
        let clash = ToolSpec {
            name: "process_refund".into(),
            description: "x".into(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: None,
            sensitive_args: vec![],
        };
        let err = store.seed_tools(&other.name, &[clash]).await.unwrap_err();
        assert!(matches!(err, StoreError::Conflict(_)), "{err}");
        assert_eq!(store.list_upstreams().await.unwrap().len(), 2);
        assert!(matches!(
            store.seed_tools(&slug("nowhere"), &[]).await,
            Err(StoreError::Invalid(CatalogError::UnknownUpstream(_)))
        ));
    }

    #[tokio::test]
    async fn sensitive_arguments_can_be_marked_on_a_stored_tool() {
        let store = seeded().await;
        store
            .set_sensitive_args("lookup_customer", &["email".to_owned()])
            .await
            .unwrap();
        let tools = store.list_tools().await.unwrap();
        assert_eq!(
            tools
                .iter()
                .find(|t| t.spec.name == "lookup_customer")
                .unwrap()
                .spec
                .sensitive_args,
            ["email"]
        );
        assert!(matches!(
            store.set_sensitive_args("nope", &[]).await,
            Err(StoreError::NotFound(_))
        ));
    }
}
