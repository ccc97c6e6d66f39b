//! A hold as a decider reads it outside the console (the HTTP API's JSON, the command
//! line): what the call would do, with every sensitive argument shown only as its digest.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::audit::redact_sensitive;
use crate::policy::CompiledCatalog;
use crate::store::holds::{HoldRow, HoldState};

/// One hold for a decider. Built from the stored row and the live catalog; never holds a
/// sensitive argument in clear.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HoldView {
    pub id: String,
    pub session_id: String,
    /// The agent key (or `console:…` try-it) whose session raised it.
    pub key: String,
    pub scope: String,
    pub role: String,
    pub tool: String,
    /// The limit that held the call.
    pub rule: String,
    /// Where it stands now: a pending or approved hold past its expiry reads `expired`
    /// even before the sweep records it.
    pub state: &'static str,
    /// The held call's arguments as they will run; a sensitive one as
    /// `{"sha256": "…"}`.
    pub arguments: Map<String, Value>,
    /// The digest of the canonical arguments: what an approval binds.
    pub arguments_digest: String,
    /// How long an approval lets the call run, in minutes.
    pub minutes: u32,
    pub catalog_revision: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl HoldView {
    pub fn new(hold: &HoldRow, catalog: &CompiledCatalog, now: DateTime<Utc>) -> Self {
        Self {
            id: hold.id.clone(),
            session_id: hold.session_id.clone(),
            key: hold.key_name.clone(),
            scope: hold.scope.clone(),
            role: hold.role.clone(),
            tool: hold.tool.clone(),
            rule: hold.rule.clone(),
            state: shown_state(hold, now).as_str(),
            arguments: shown_arguments(hold, catalog),
            arguments_digest: hold.arguments_digest.clone(),
            minutes: hold.minutes,
            catalog_revision: hold.catalog_revision.clone(),
            created_at: hold.created_at,
            expires_at: hold.expires_at,
            decided_by: hold.decided_by.clone(),
            decided_at: hold.decided_at,
            reason: hold.reason.clone(),
            finished_at: hold.finished_at,
        }
    }
}

/// The state a decider should see at `now`: a hold past its expiry can no longer be
/// decided or run, whether or not the sweep has recorded that yet.
pub fn shown_state(hold: &HoldRow, now: DateTime<Utc>) -> HoldState {
    if hold.is_due(now) {
        HoldState::Expired
    } else {
        hold.state
    }
}

/// The names of the held call's arguments that may not be shown in clear: those its tool
/// marks sensitive, or all of them when the live catalog no longer has the tool (what it
/// marked is unknown, so nothing is shown).
pub fn sensitive_arguments(hold: &HoldRow, catalog: &CompiledCatalog) -> Vec<String> {
    match catalog.tool(&hold.tool) {
        Some(tool) => tool.spec.sensitive_args.clone(),
        None => match &hold.arguments {
            Value::Object(map) => map.keys().cloned().collect(),
            _ => Vec::new(),
        },
    }
}

/// The held call's arguments with every sensitive one replaced by `{"sha256": …}`.
pub fn shown_arguments(hold: &HoldRow, catalog: &CompiledCatalog) -> Map<String, Value> {
    let sensitive = sensitive_arguments(hold, catalog);
    match redact_sensitive(&hold.arguments, &sensitive) {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Catalog;
    use crate::policy::HeldUsage;
    use serde_json::json;

    fn held(tool: &str, arguments: Value) -> HoldRow {
        let now = Utc::now();
        HoldRow {
            id: "hold_1".to_owned(),
            session_id: "s".to_owned(),
            key_id: 1,
            key_name: "bot".to_owned(),
            scope: "support".to_owned(),
            role: "refunds".to_owned(),
            tool: tool.to_owned(),
            arguments,
            arguments_digest: "d".to_owned(),
            usage: HeldUsage::default(),
            rule: "approval".to_owned(),
            minutes: 15,
            catalog_revision: "r".to_owned(),
            state: HoldState::Pending,
            created_at: now,
            expires_at: now + chrono::Duration::minutes(15),
            decided_by: None,
            decided_at: None,
            reason: None,
            decided_revision: None,
            finished_at: None,
        }
    }

    #[test]
    fn a_tool_the_catalog_no_longer_has_shows_no_argument_in_clear() {
        let catalog = CompiledCatalog::compile(Catalog::default());
        let hold = held("gone", json!({"amount": 300, "note": "secret"}));
        let view = HoldView::new(&hold, &catalog, Utc::now());
        assert!(view.arguments.values().all(|v| v.get("sha256").is_some()));
        assert!(!serde_json::to_string(&view).unwrap().contains("secret"));
    }

    #[test]
    fn a_pending_hold_past_its_expiry_reads_expired() {
        let catalog = CompiledCatalog::compile(Catalog::default());
        let hold = held("gone", json!({}));
        let later = hold.expires_at + chrono::Duration::seconds(1);
        assert_eq!(HoldView::new(&hold, &catalog, later).state, "expired");
        assert_eq!(HoldView::new(&hold, &catalog, Utc::now()).state, "pending");
    }
}
