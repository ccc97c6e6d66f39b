//! What a replay of a proposed edit found, as the panel shows it, and (on the server) the
//! one way an editor's proposal is replayed.

use serde::{Deserialize, Serialize};

/// The calls shown per group; the count says how many there are in all.
pub const CALLS_SHOWN: usize = 10;

/// The windows the panel offers; the first is the default.
pub const WINDOWS: &[(&str, &str)] = &[
    ("7d", "the last 7 days"),
    ("1d", "the last day"),
    ("30d", "the last 30 days"),
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhatIfView {
    /// What was replayed, in words ("the last 7 days").
    pub window: String,
    pub sessions: usize,
    pub decided: usize,
    pub skipped: usize,
    /// Decisions the two catalogs disagree on that the log cannot settle.
    pub undecidable: usize,
    pub groups: Vec<FlipGroup>,
    /// Why nothing was replayed (no calls in the window), when so.
    pub nothing: Option<String>,
}

/// Calls that flip the same way for the same reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlipGroup {
    pub before: String,
    pub after: String,
    /// `call process_refund` or `learn tier-1-support`.
    pub subject: String,
    pub key: String,
    pub role: Option<String>,
    pub rule: Option<String>,
    pub count: usize,
    /// The first [`CALLS_SHOWN`] calls: session id and the seq of the decision's event.
    pub calls: Vec<(String, u64)>,
}

impl WhatIfView {
    pub fn flipped(&self) -> usize {
        self.groups.iter().map(|g| g.count).sum()
    }
}

#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use skillgate_core::model::Catalog;
    use skillgate_core::whatif::{Subject, WhatIfError, Window};

    use super::*;
    use crate::shared::ConsoleError;
    use crate::shared::ssr::{ConsoleContext, internal};

    /// Replays `window` (one of [`WINDOWS`], default the first) under `proposed`, the live
    /// catalog with the editor's change, as `actor`.
    pub async fn replay(
        ctx: &ConsoleContext,
        actor: &str,
        proposed: Catalog,
        window: Option<String>,
    ) -> Result<WhatIfView, ConsoleError> {
        let text = window.filter(|w| !w.is_empty());
        let (text, words) = WINDOWS
            .iter()
            .find(|(w, _)| text.as_deref().is_none_or(|t| t == *w))
            .copied()
            .ok_or_else(|| ConsoleError::Field {
                field: "window".into(),
                message: "Pick one of the offered windows.".into(),
            })?;
        let window = Window::last(text).map_err(internal)?;
        let report = match ctx.authoring.what_if(actor, proposed, &window).await {
            Ok(report) => report,
            Err(e @ (WhatIfError::EmptyWindow { .. } | WhatIfError::BeyondRetention { .. })) => {
                return Ok(WhatIfView {
                    window: words.to_owned(),
                    sessions: 0,
                    decided: 0,
                    skipped: 0,
                    undecidable: 0,
                    groups: Vec::new(),
                    nothing: Some(e.to_string()),
                });
            }
            Err(e) => return Err(internal(e)),
        };
        let groups = report
            .groups()
            .into_iter()
            .map(|g| FlipGroup {
                before: g.before.as_str().to_owned(),
                after: g.after.as_str().to_owned(),
                subject: match g.subject {
                    Subject::Call { tool } => format!("call {tool}"),
                    Subject::Learn { role } => format!("learn {role}"),
                },
                key: g.key,
                role: g.role,
                rule: g.rule,
                count: g.calls.len(),
                calls: g.calls.into_iter().take(CALLS_SHOWN).collect(),
            })
            .collect();
        Ok(WhatIfView {
            window: words.to_owned(),
            sessions: report.sessions,
            decided: report.decided,
            skipped: report.skipped,
            undecidable: report.undecidable.len(),
            groups,
            nothing: None,
        })
    }
}
