//! Stored tools: their definitions, sensitive-argument markings and pin state.

use std::collections::BTreeMap;

use chrono::Utc;
use sqlx::{AnyConnection, Row};

use super::super::{Store, StoreError, stamp};
use super::Tx;
use super::{decode_err, from_json, slug_of, to_json};
use crate::model::{CatalogError, CatalogTool, ToolSpec, quarantine_reason};
use crate::slug::Slug;

impl Store {
    /// Stores `tools` as the whole tool list of `upstream`, each admitted and pinned as it
    /// is (deleting the upstream's tools not named): the trust of a seed or an operator's
    /// script, unaudited. An upstream's sync does not come this way: it goes through
    /// [`crate::admin::AdminService::sync_tools`], which quarantines what no admin
    /// has reviewed and audits it.
    ///
    /// Sensitive-argument markings are the admin's: an incoming spec without any keeps the
    /// stored ones. A tool name another upstream already provides is a conflict.
    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn seed_tools(&self, upstream: &Slug, tools: &[ToolSpec]) -> Result<(), StoreError> {
        let (mut tx, _held) = self.begin_write().await?;
        seed_tools(&mut tx, upstream, tools).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Marks which arguments of a tool the audit stores as a digest only.
    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn set_sensitive_args(&self, tool: &str, args: &[String]) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await?;
        set_sensitive_args_on(Tx::wrap(&mut conn), tool, args).await
    }

    /// Flags the tools of `upstream` that its last `tools/list` did not name (keeping the
    /// first time each went missing) and clears the flag of every other one.
    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn mark_missing_tools(
        &self,
        upstream: &Slug,
        missing: &[String],
    ) -> Result<(), StoreError> {
        let (mut tx, _held) = self.begin_write().await?;
        super::pins::mark_missing_on(&mut tx, upstream, missing).await?;
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

    pub async fn list_tools(&self) -> Result<Vec<CatalogTool>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(list_tools(&mut conn).await?)
    }
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

/// A tool row as stored, pin columns included.
pub(super) struct StoredTool {
    pub(super) upstream: String,
    /// The definition columns with the sensitive markings.
    pub(super) spec: ToolSpec,
    pub(super) pin: Option<String>,
    pub(super) offered: Option<String>,
    pub(super) offered_pin: Option<String>,
    pub(super) quarantined_since: Option<String>,
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

pub(super) const TOOL_COLUMNS: &str = "SELECT name, upstream, description, input_schema, output_schema, annotations, \
     sensitive_args, pin, offered, offered_pin, quarantined_since FROM tools";

pub(super) fn stored_tool(row: &sqlx::any::AnyRow) -> Result<StoredTool, sqlx::Error> {
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

pub(super) async fn stored_tools(conn: &mut AnyConnection) -> Result<Vec<StoredTool>, sqlx::Error> {
    let rows = sqlx::query(&format!("{TOOL_COLUMNS} ORDER BY name"))
        .fetch_all(conn)
        .await?;
    rows.iter().map(stored_tool).collect()
}

pub(super) async fn known_upstream(
    conn: &mut AnyConnection,
    upstream: &Slug,
) -> Result<(), StoreError> {
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

pub(super) fn optional_text(value: Option<&serde_json::Value>) -> Option<String> {
    value.map(to_json)
}

/// [`Store::seed_tools`] on a given connection.
pub(super) async fn seed_tools(
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

/// The tools of `upstream` on `tx`, by name, each with its pin and whether it is
/// quarantined.
pub(crate) async fn tool_pins_of_on(
    tx: &mut Tx,
    upstream: &str,
) -> Result<Vec<(String, Option<String>, bool)>, StoreError> {
    let rows: Vec<(String, Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT name, pin, quarantined_since FROM tools WHERE upstream = $1 ORDER BY name",
    )
    .bind(upstream)
    .fetch_all(tx.conn())
    .await?;
    Ok(rows
        .into_iter()
        .map(|(name, pin, since)| (name, pin, since.is_some()))
        .collect())
}

/// [`Store::set_sensitive_args`] on a given connection (see [`create_role_on`]).
pub(crate) async fn set_sensitive_args_on(
    conn: &mut Tx,
    tool: &str,
    args: &[String],
) -> Result<(), StoreError> {
    let conn = conn.conn();
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

/// Pins the tools stored before pins existed, as they are (migration 0015 adds the columns;
/// SQLite cannot hash, so the store finishes the upgrade when it opens the database). A row
/// without a pin that is not quarantined is such a tool: nothing else writes one.
pub(crate) async fn pin_tools_stored_before_pins(store: &Store) -> Result<(), StoreError> {
    let (mut tx, _held) = store.begin_write().await?;
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

pub(super) async fn list_tools(conn: &mut AnyConnection) -> Result<Vec<CatalogTool>, sqlx::Error> {
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
