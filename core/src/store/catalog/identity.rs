//! An upstream's pinned identity (its certificate's key and `serverInfo`): pinned at the
//! first sync, quarantined when a sync or a connect sees another party (another key or
//! server name), admitted by an admin; a new version of the same party is an upgrade, taken
//! into the pin and remembered.

use std::collections::BTreeMap;

use chrono::Utc;
use serde_json::{Value, json};
use sqlx::{AnyConnection, Row};

use super::super::{Store, StoreError, Tx, stamp};
use super::to_json;
use crate::model::UpstreamIdentity;
use crate::slug::Slug;

/// The identity row of one upstream, as the console shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentityPin {
    pub upstream: String,
    /// The upstream's config (JSON) the pin was taken at.
    pub endpoint: String,
    pub pinned: UpstreamIdentity,
    /// The identity seen since, when it differs from the pin: what an admin may admit.
    pub offered: Option<UpstreamIdentity>,
    pub pinned_at: String,
    /// Since when calls of the upstream's tools are refused; `None`: not quarantined.
    pub quarantined_since: Option<String>,
    /// The last upgrade: the `server_version` the pin had before, and when it changed.
    pub upgraded_from: Option<(String, String)>,
}

/// One pin, quarantine, release or admission, for its `admin_change` event on target
/// `upstream:<name>`: `before` and `after` are `{"pinned", "offered"}` identities
/// (`before` is `null` for an upstream's first pin, which replaces nothing).
#[derive(Debug, Clone, PartialEq)]
pub struct IdentityChange {
    /// `upstream.identity_pin`, `upstream.identity_quarantine`,
    /// `upstream.identity_unquarantine`, `upstream.identity_version` (an upgrade) or
    /// `upstream.identity_admit`.
    pub action: &'static str,
    pub before: Value,
    pub after: Value,
}

fn state(pinned: Option<&UpstreamIdentity>, offered: Option<&UpstreamIdentity>) -> Value {
    json!({ "pinned": pinned, "offered": offered })
}

/// The fingerprint an admin's admission quotes: lowercase hex SHA-256 of the identity's
/// canonical JSON, so an identity that changed again after the admin looked is not admitted.
pub fn identity_digest(identity: &UpstreamIdentity) -> String {
    let value = serde_json::to_value(identity).unwrap_or(Value::Null);
    crate::audit::chain::sha256_hex(crate::audit::canonical_json(&value).as_bytes())
}

impl Store {
    /// Every upstream's identity row, by upstream name.
    pub async fn upstream_identities(&self) -> Result<Vec<IdentityPin>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        identities(&mut conn, None).await
    }

    /// The identity row of `upstream`, if it was ever synced.
    pub async fn upstream_identity(
        &self,
        upstream: &str,
    ) -> Result<Option<IdentityPin>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(identities(&mut conn, Some(upstream)).await?.pop())
    }
}

const COLUMNS: &str = "SELECT upstream, endpoint, pinned, offered, pinned_at, quarantined_since, \
                       previous_version, version_changed_at FROM upstream_identity";

fn decode(text: &str, upstream: &str) -> Result<UpstreamIdentity, StoreError> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::Corrupt(format!("identity of upstream `{upstream}`: {e}")))
}

async fn identities(
    conn: &mut AnyConnection,
    upstream: Option<&str>,
) -> Result<Vec<IdentityPin>, StoreError> {
    let rows = match upstream {
        Some(name) => {
            sqlx::query(&format!("{COLUMNS} WHERE upstream = $1"))
                .bind(name)
                .fetch_all(&mut *conn)
                .await?
        }
        None => {
            sqlx::query(&format!("{COLUMNS} ORDER BY upstream"))
                .fetch_all(&mut *conn)
                .await?
        }
    };
    rows.iter()
        .map(|row| {
            let upstream: String = row.try_get("upstream")?;
            let offered: Option<String> = row.try_get("offered")?;
            let previous: Option<String> = row.try_get("previous_version")?;
            let changed_at: Option<String> = row.try_get("version_changed_at")?;
            Ok(IdentityPin {
                upgraded_from: previous.zip(changed_at),
                endpoint: row.try_get("endpoint")?,
                pinned: decode(row.try_get("pinned")?, &upstream)?,
                offered: offered.map(|o| decode(&o, &upstream)).transpose()?,
                pinned_at: row.try_get("pinned_at")?,
                quarantined_since: row.try_get("quarantined_since")?,
                upstream,
            })
        })
        .collect()
}

/// The quarantined upstreams with the reason a refused call names: what the compiled
/// catalog carries, so `decide` refuses their calls.
pub(crate) async fn quarantined_upstreams(
    conn: &mut AnyConnection,
) -> Result<BTreeMap<String, String>, StoreError> {
    Ok(identities(conn, None)
        .await?
        .into_iter()
        .filter(|pin| pin.quarantined_since.is_some())
        .filter_map(|pin| {
            let reason = pin.pinned.quarantine_reason(pin.offered.as_ref()?);
            Some((pin.upstream, reason))
        })
        .collect())
}

/// Saves the identity `seen` when connecting to `upstream` (reached at `endpoint`, its
/// config as JSON) against the pin, the store half of
/// [`crate::admin::AdminService::sync_identity`]:
///
/// - no pin yet, or a pin taken at another endpoint (an admin pointed the upstream
///   elsewhere): `seen` is pinned;
/// - `seen` equal to the pin: nothing, or a release if it was quarantined;
/// - `seen` the pinned party with another version (an upgrade): pinned, with the version it
///   replaces and when, and a release if it was quarantined;
/// - `seen` another party: stored as the offer and the upstream is quarantined (nothing
///   when that offer is already stored).
pub(crate) async fn sync_identity_on(
    tx: &mut Tx,
    upstream: &Slug,
    endpoint: &str,
    seen: &UpstreamIdentity,
) -> Result<Option<IdentityChange>, StoreError> {
    let conn = tx.conn();
    let now = stamp(Utc::now());
    let stored = identities(&mut *conn, Some(upstream.as_str())).await?.pop();
    // A pin taken elsewhere is replaced, and the change names it.
    let replaced = stored
        .as_ref()
        .filter(|pin| pin.endpoint != endpoint)
        .map_or(Value::Null, |pin| {
            state(Some(&pin.pinned), pin.offered.as_ref())
        });
    let Some(pin) = stored.filter(|pin| pin.endpoint == endpoint) else {
        sqlx::query(
            "INSERT INTO upstream_identity (upstream, endpoint, pinned, offered, state, \
               pinned_at, quarantined_since) VALUES ($1, $2, $3, NULL, 'pinned', $4, NULL) \
             ON CONFLICT (upstream) DO UPDATE SET endpoint = excluded.endpoint, \
               pinned = excluded.pinned, offered = NULL, state = 'pinned', \
               pinned_at = excluded.pinned_at, quarantined_since = NULL, \
               previous_version = NULL, version_changed_at = NULL",
        )
        .bind(upstream.as_str())
        .bind(endpoint)
        .bind(to_json(seen))
        .bind(&now)
        .execute(&mut *conn)
        .await?;
        return Ok(Some(IdentityChange {
            action: "upstream.identity_pin",
            before: replaced,
            after: state(Some(seen), None),
        }));
    };
    let before = state(Some(&pin.pinned), pin.offered.as_ref());
    if pin.pinned.same_party(seen) {
        let released = pin.quarantined_since.is_some() || pin.offered.is_some();
        if pin.pinned == *seen {
            if !released {
                return Ok(None);
            }
            sqlx::query(
                "UPDATE upstream_identity SET offered = NULL, state = 'pinned', \
                   quarantined_since = NULL WHERE upstream = $1",
            )
            .bind(upstream.as_str())
            .execute(&mut *conn)
            .await?;
        } else {
            sqlx::query(
                "UPDATE upstream_identity SET pinned = $1, offered = NULL, state = 'pinned', \
                   quarantined_since = NULL, previous_version = $2, version_changed_at = $3 \
                 WHERE upstream = $4",
            )
            .bind(to_json(seen))
            .bind(&pin.pinned.server_version)
            .bind(&now)
            .bind(upstream.as_str())
            .execute(&mut *conn)
            .await?;
        }
        return Ok(Some(IdentityChange {
            action: if released {
                "upstream.identity_unquarantine"
            } else {
                "upstream.identity_version"
            },
            before,
            after: state(Some(seen), None),
        }));
    }
    if pin.offered.as_ref() == Some(seen) && pin.quarantined_since.is_some() {
        return Ok(None);
    }
    sqlx::query(
        "UPDATE upstream_identity SET offered = $1, state = 'quarantined', \
           quarantined_since = COALESCE(quarantined_since, $2) WHERE upstream = $3",
    )
    .bind(to_json(seen))
    .bind(&now)
    .bind(upstream.as_str())
    .execute(&mut *conn)
    .await?;
    Ok(Some(IdentityChange {
        action: "upstream.identity_quarantine",
        before,
        after: state(Some(&pin.pinned), Some(seen)),
    }))
}

/// Pins the identity `upstream` offers, if it is still the one whose [`identity_digest`]
/// is `expected` (what the admin reviewed), and lifts the quarantine.
pub(crate) async fn admit_identity_on(
    tx: &mut Tx,
    upstream: &str,
    expected: &str,
) -> Result<IdentityChange, StoreError> {
    let conn = tx.conn();
    let Some(pin) = identities(&mut *conn, Some(upstream)).await?.pop() else {
        return Err(StoreError::NotFound(format!(
            "the identity of upstream `{upstream}`"
        )));
    };
    let Some(offered) = pin
        .offered
        .as_ref()
        .filter(|_| pin.quarantined_since.is_some())
    else {
        return Err(StoreError::Conflict(format!(
            "upstream `{upstream}` is not quarantined: its identity is the pinned one, so there is nothing to admit"
        )));
    };
    let offered_digest = identity_digest(offered);
    if offered_digest != expected {
        return Err(StoreError::Conflict(format!(
            "the identity upstream `{upstream}` offers changed since you looked (it is now {}, you reviewed {}): review it again",
            offered_digest.get(..12).unwrap_or(&offered_digest),
            expected.get(..12).unwrap_or(expected)
        )));
    }
    sqlx::query(
        "UPDATE upstream_identity SET pinned = $1, offered = NULL, state = 'pinned', \
           pinned_at = $2, quarantined_since = NULL, previous_version = NULL, \
           version_changed_at = NULL WHERE upstream = $3",
    )
    .bind(to_json(offered))
    .bind(stamp(Utc::now()))
    .bind(upstream)
    .execute(&mut *conn)
    .await?;
    Ok(IdentityChange {
        action: "upstream.identity_admit",
        before: state(Some(&pin.pinned), Some(offered)),
        after: state(Some(offered), None),
    })
}
