//! A tool's pin: an upstream's `tools/list` synced against the admitted definitions
//! (quarantine, lift, missing) and an admin's admission of an offer.

use std::collections::BTreeMap;

use chrono::Utc;
use sqlx::AnyConnection;

use super::super::{StoreError, stamp};
use super::Tx;
use super::load_catalog;
use super::to_json;
use super::tools::{
    StoredTool, TOOL_COLUMNS, known_upstream, optional_text, stored_tool, stored_tools,
};
use crate::model::ToolSpec;
use crate::slug::Slug;

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
    conn: &mut Tx,
    upstream: &Slug,
    listed: &[ToolSpec],
) -> Result<ToolSync, StoreError> {
    let conn = conn.conn();
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
pub(super) async fn mark_missing_on(
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
    tx: &mut Tx,
    tool: &str,
    expected_offer: &str,
) -> Result<PinChange, StoreError> {
    let row = sqlx::query(&format!("{TOOL_COLUMNS} WHERE name = $1"))
        .bind(tool)
        .fetch_optional(tx.conn())
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
    let mut catalog = load_catalog(tx).await?;
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
        .filter(|r| r.limits.iter().any(|l| l.bounds(tool)))
    {
        catalog.validate_role(role)?;
    }
    for scope in catalog
        .scopes
        .iter()
        .filter(|s| s.guardrails.iter().any(|l| l.bounds(tool)))
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
    .execute(tx.conn())
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
