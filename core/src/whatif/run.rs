//! A replay of the stored audit: the window checked, the sessions' history streamed from
//! the store into the [`Replayer`], and the replay itself audited (who, over which window,
//! against which file, what it found). It reads the catalog, the sessions and the audit
//! and writes only its own audit event.

use std::collections::HashSet;

use chrono::{DateTime, SecondsFormat, Utc};
use futures::TryStreamExt;
use serde_json::json;

use super::WhatIfError;
use super::replay::Replayer;
use super::report::{ReplayReport, Verdict};
use super::window::Window;
use crate::audit::{AuditLog, NewEvent};
use crate::policy::CompiledCatalog;
use crate::store::Store;

/// What a replay is asked: the catalogs, the window, and who asks about which file.
pub struct ReplayRequest<'a> {
    pub current: &'a CompiledCatalog,
    pub proposed: &'a CompiledCatalog,
    pub window: &'a Window,
    /// Who asks, as the audit names them (`cli:alice`).
    pub actor: &'a str,
    /// The SHA-256 of the proposed catalog file.
    pub file_digest: &'a str,
}

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Replays the window of `request` from the stored audit; `progress` hears the seq of
/// every event read (a terminal shows how far it got). Bad windows change nothing and
/// are not audited.
#[tracing::instrument(skip_all, fields(actor = request.actor))]
pub async fn replay_stored(
    store: &Store,
    audit: &AuditLog,
    request: ReplayRequest<'_>,
    now: DateTime<Utc>,
    mut progress: impl FnMut(u64),
) -> Result<ReplayReport, WhatIfError> {
    let (from, start, only) = match request.window {
        Window::Last { text, span } => {
            let from = now - *span;
            if let Some(kept) = store.audit_kept_since().await?
                && from < kept
            {
                return Err(WhatIfError::BeyondRetention {
                    from: stamp(from),
                    kept: stamp(kept),
                });
            }
            let (calls, first) = store.replay_window(from, now).await?;
            let Some(first) = first.filter(|_| calls > 0) else {
                return Err(WhatIfError::EmptyWindow {
                    window: text.clone(),
                    from: stamp(from),
                });
            };
            (from, first, None)
        }
        Window::Sessions(ids) => {
            let mut first = u64::MAX;
            for id in ids {
                let seq = store
                    .session_start_seq(id)
                    .await?
                    .ok_or_else(|| WhatIfError::UnknownSession(id.chars().take(64).collect()))?;
                first = first.min(seq);
            }
            if ids.is_empty() {
                return Err(WhatIfError::NoSessions);
            }
            let only: HashSet<&str> = ids.iter().map(String::as_str).collect();
            (DateTime::<Utc>::MIN_UTC, first, Some(only))
        }
    };
    let mut replayer = Replayer::new(request.current, request.proposed, from);
    let mut events = audit.events_after(start.saturating_sub(1));
    while let Some(event) = events.try_next().await? {
        progress(event.seq);
        let wanted = only.as_ref().is_none_or(|only| {
            event
                .session_id
                .as_deref()
                .is_some_and(|id| only.contains(id))
        });
        if wanted {
            replayer.push(&event);
        }
    }
    drop(events);
    let report = replayer.finish();
    audit
        .append(NewEvent::what_if_replay(
            request.actor,
            audit_payload(&request, &report, from, now),
        ))
        .await?;
    Ok(report)
}

fn audit_payload(
    request: &ReplayRequest<'_>,
    report: &ReplayReport,
    from: DateTime<Utc>,
    now: DateTime<Utc>,
) -> serde_json::Value {
    let window = match request.window {
        Window::Last { text, .. } => json!({"last": text, "from": stamp(from), "to": stamp(now)}),
        Window::Sessions(ids) => json!({"sessions": ids}),
    };
    let flips: serde_json::Map<String, serde_json::Value> = [
        (Verdict::Allowed, Verdict::Denied),
        (Verdict::Allowed, Verdict::Held),
        (Verdict::Held, Verdict::Denied),
        (Verdict::Held, Verdict::Allowed),
        (Verdict::Denied, Verdict::Allowed),
        (Verdict::Denied, Verdict::Held),
    ]
    .into_iter()
    .map(|(b, a)| {
        (
            format!("{}_to_{}", b.as_str(), a.as_str()),
            json!(report.count(b, a)),
        )
    })
    .collect();
    json!({
        "window": window,
        "catalog_file_sha256": request.file_digest,
        "sessions": report.sessions,
        "decided": report.decided,
        "changes": report.changes.len(),
        "flips": flips,
        "undecidable": report.undecidable.len(),
        "skipped": report.skipped,
        "decision": "read only: nothing was changed",
    })
}
