//! Versioned skills: each save is a new version; one of them is current.

use chrono::Utc;
use sqlx::{AnyConnection, Row};

use super::super::{Store, StoreError, stamp};
use super::Tx;
use super::{Revised, conflict, decode_err, from_json, load_catalog, slug_of, to_json};
use crate::model::{CatalogError, Skill, SkillVersion};
use crate::slug::Slug;

impl Store {
    /// Creates a skill at version 1.
    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn create_skill(&self, skill: &Skill) -> Result<Revised<SkillVersion>, StoreError> {
        let (mut tx, _held) = self.begin_write().await?;
        let saved = create_skill_on(Tx::wrap(&mut tx), skill).await?;
        tx.commit().await?;
        Ok(saved)
    }

    /// Saves a new version of a skill and makes it current. The roles that use the skill
    /// are re-checked, so a save cannot strand a limit on a tool no longer granted.
    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn update_skill(
        &self,
        skill: &Skill,
        expected_revision: i64,
    ) -> Result<Revised<SkillVersion>, StoreError> {
        let (mut tx, _held) = self.begin_write().await?;
        let saved = update_skill_on(Tx::wrap(&mut tx), skill, expected_revision).await?;
        tx.commit().await?;
        Ok(saved)
    }

    /// [`Store::update_skill`] for a version approved from an uploaded `SKILL.md`: the file
    /// is kept with the version, for a byte-identical export.
    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn update_skill_from_file(
        &self,
        skill: &Skill,
        expected_revision: i64,
        skill_md: Option<&str>,
    ) -> Result<Revised<SkillVersion>, StoreError> {
        let (mut tx, _held) = self.begin_write().await?;
        let saved =
            update_skill_from_file_on(Tx::wrap(&mut tx), skill, expected_revision, skill_md)
                .await?;
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
    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn set_current_skill_version(
        &self,
        slug: &Slug,
        version: u32,
        expected_revision: i64,
    ) -> Result<i64, StoreError> {
        let (mut tx, _held) = self.begin_write().await?;
        let saved =
            set_current_skill_version_on(Tx::wrap(&mut tx), slug, version, expected_revision)
                .await?;
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
        Ok(list_skills(Tx::wrap(&mut conn)).await?)
    }
}

/// [`Store::create_skill`] on a given connection: inside the audit writer's transaction, a catalog
/// save commits together with its `admin_change` event.
pub(crate) async fn create_skill_on(
    tx: &mut Tx,
    skill: &Skill,
) -> Result<Revised<SkillVersion>, StoreError> {
    let catalog = load_catalog(tx).await?;
    catalog.validate_skill(skill)?;
    refuse_unadmitted(tx.conn(), skill).await?;
    if catalog.skill(skill.slug.as_str()).is_some() {
        return Err(StoreError::Conflict(format!(
            "skill `{}` already exists",
            skill.slug
        )));
    }
    let saved = insert_skill(tx.conn(), skill).await?;
    Ok(saved)
}

/// [`Store::update_skill`] on a given connection: inside the audit writer's transaction, a catalog
/// save commits together with its `admin_change` event.
pub(crate) async fn update_skill_on(
    tx: &mut Tx,
    skill: &Skill,
    expected_revision: i64,
) -> Result<Revised<SkillVersion>, StoreError> {
    update_skill_from_file_on(tx, skill, expected_revision, None).await
}

/// [`update_skill_on`], keeping `skill_md` (the file the version was uploaded as) with it.
pub(crate) async fn update_skill_from_file_on(
    tx: &mut Tx,
    skill: &Skill,
    expected_revision: i64,
    skill_md: Option<&str>,
) -> Result<Revised<SkillVersion>, StoreError> {
    let mut catalog = load_catalog(tx).await?;
    let (latest, revision) = skill_head(tx.conn(), &skill.slug).await?;
    if revision != expected_revision {
        return Err(conflict(
            "skill",
            skill.slug.as_str(),
            expected_revision,
            revision,
        ));
    }
    catalog.validate_skill(skill)?;
    refuse_unadmitted(tx.conn(), skill).await?;
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
    insert_skill_version(tx.conn(), skill, version, skill_md).await?;
    make_current(tx.conn(), &skill.slug, version).await?;
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
    conn: &mut Tx,
    slug: &Slug,
    version: u32,
    expected_revision: i64,
) -> Result<i64, StoreError> {
    let conn = conn.conn();
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
pub(in crate::store) async fn make_current(
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

pub(crate) async fn list_skills(conn: &mut Tx) -> Result<Vec<Revised<SkillVersion>>, sqlx::Error> {
    let conn = conn.conn();
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
pub(in crate::store) async fn skill_head(
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

pub(in crate::store) async fn insert_skill(
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

pub(in crate::store) async fn insert_skill_version(
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
