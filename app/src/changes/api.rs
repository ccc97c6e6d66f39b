//! The change log of one catalog entity, read from the audit log.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::shared::ConsoleError;

/// One entry of an entity's change log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeRow {
    pub seq: u64,
    pub at: String,
    pub actor: String,
    pub action: String,
    /// Top-level fields that differ between before and after, e.g. `limits`, `title`.
    pub changed: Vec<String>,
    pub before: String,
    pub after: String,
}

/// The change log of one entity: `kind` is `role`, `scope`, `skill`, `tool` or `agent_key`.
#[server(prefix = "/console/api", endpoint = "change_log")]
pub async fn change_log(kind: String, name: String) -> Result<Vec<ChangeRow>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    if !matches!(
        kind.as_str(),
        "role" | "scope" | "skill" | "tool" | "agent_key" | "upstream"
    ) {
        return Err(ConsoleError::Invalid(format!(
            "There is no change log for `{kind}`."
        )));
    }
    let events = crate::shared::ssr::context()
        .authoring
        .history(&skillgate_core::admin::target(&kind, &name))
        .await
        .map_err(crate::shared::ssr::internal)?;
    Ok(events.iter().map(ssr::change_row).collect())
}

#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    #[allow(unused_imports)]
    pub(crate) use crate::catalog::authoring::*;
    use std::collections::BTreeMap;

    use leptos::serde_json::{self, Value};
    use skillgate_core::audit::AuditEvent;

    use super::ChangeRow;

    pub fn change_row(event: &AuditEvent) -> ChangeRow {
        let payload = &event.payload;
        let before = &payload["before"];
        let after = &payload["after"];
        let fields = |v: &Value| -> BTreeMap<String, Value> {
            let inner = v.get("value").unwrap_or(v);
            inner
                .as_object()
                .map(|o| o.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default()
        };
        let (b, a) = (fields(before), fields(after));
        let changed = a
            .keys()
            .chain(b.keys())
            .filter(|k| a.get(*k) != b.get(*k))
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let pretty = |v: &Value| {
            if v.is_null() {
                String::new()
            } else {
                serde_json::to_string_pretty(v).unwrap_or_default()
            }
        };
        ChangeRow {
            seq: event.seq,
            at: event.at.format(STAMP).to_string(),
            actor: event.actor.clone().unwrap_or_default(),
            action: payload["action"].as_str().unwrap_or_default().to_owned(),
            changed,
            before: pretty(before),
            after: pretty(after),
        }
    }
}
