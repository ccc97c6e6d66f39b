//! Compliance server functions (sessions list, timeline, chain verification, overview,
//! retention) and their wire types. Any console role may read the audit; only an admin
//! changes retention (through the form route in the server binary).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::shared::{ConsoleError, encode};

/// Sessions per page of the sessions list.
pub const SESSIONS_PER_PAGE: u32 = 50;
/// Events shown on one timeline page.
pub const TIMELINE_EVENTS: u32 = 200;

/// The sessions list filters, exactly as they appear in the page's query string.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionQuery {
    pub key: Option<String>,
    pub scope: Option<String>,
    /// `YYYY-MM-DD` or an RFC 3339 time: sessions started at or after it.
    pub from: Option<String>,
    /// `YYYY-MM-DD` (inclusive day) or an RFC 3339 time (exclusive).
    pub to: Option<String>,
    pub role: Option<String>,
    pub tool: Option<String>,
    /// `denial`, `violation` or `error`.
    pub outcome: Option<String>,
    pub q: Option<String>,
    /// The cursor of the next page.
    pub before: Option<u64>,
}

impl SessionQuery {
    /// The query string of these filters (without `before`), for links and exports.
    pub fn to_query_string(&self) -> String {
        let pairs = [
            ("key", &self.key),
            ("scope", &self.scope),
            ("from", &self.from),
            ("to", &self.to),
            ("role", &self.role),
            ("tool", &self.tool),
            ("outcome", &self.outcome),
            ("q", &self.q),
        ];
        pairs
            .iter()
            .filter_map(|(k, v)| v.as_deref().map(|v| format!("{k}={}", encode(v))))
            .collect::<Vec<_>>()
            .join("&")
    }

    /// The same filters with a different outcome (or none), for the outcome facets.
    pub fn with_outcome(&self, outcome: Option<&str>) -> Self {
        Self {
            outcome: outcome.map(str::to_owned),
            before: None,
            ..self.clone()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Integrity {
    pub events: u64,
    /// `None` when every event checked verifies; otherwise e.g. "event 57 was changed".
    pub first_bad: Option<String>,
    pub first_bad_seq: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRow {
    pub id: String,
    pub started_at: String,
    pub last_at: String,
    pub key: Option<String>,
    pub scope: Option<String>,
    pub task_summary: Option<String>,
    pub events: u64,
    pub calls: u64,
    pub denials: u64,
    pub violations: u64,
    pub errors: u64,
    pub roles: Vec<String>,
    pub tools: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionsList {
    pub rows: Vec<SessionRow>,
    pub sessions: u64,
    pub with_denial: u64,
    pub with_violation: u64,
    pub with_error: u64,
    pub next_cursor: Option<u64>,
    pub integrity: Integrity,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryArgument {
    pub name: String,
    pub value: String,
    pub digest: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub seq: u64,
    pub at: String,
    pub kind: String,
    /// Who the event is attributed to: the agent key (or console user) that caused it.
    pub actor: Option<String>,
    /// `neutral`, `granted`, `allowed`, `denied`, `violation` or `error`.
    pub tone: String,
    pub badge: String,
    pub headline: String,
    pub role: Option<String>,
    /// The role that authorized an allowed call.
    pub authorized_by: Option<String>,
    pub tool: Option<String>,
    pub rule: Option<String>,
    pub arguments: Vec<EntryArgument>,
    pub skill_versions: Vec<String>,
    pub duration_ms: Option<u64>,
    pub detail: Option<String>,
    pub scope_grew: bool,
    pub hash: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    pub session: SessionRow,
    pub entries: Vec<TimelineEntry>,
    /// The seq this page starts after (`None`: the first page).
    pub after: Option<u64>,
    /// The cursor of the next page (`?after=`), when the session has more events.
    pub next_after: Option<u64>,
    pub integrity: Integrity,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FullVerification {
    pub events: u64,
    pub start_seq: u64,
    pub tip_seq: u64,
    pub tip_hash: String,
    pub first_bad: Option<String>,
    pub first_bad_seq: Option<u64>,
    /// What the signed checkpoints say is wrong, one sentence each, led by its kind:
    /// `truncated: …`, `forged anchor: …`, `pruned range mismatch: …`.
    pub checkpoint_problems: Vec<String>,
    pub checkpoints: u64,
    /// The newest checkpoint the server's key signed: its seq and when.
    pub newest_checkpoint: Option<(u64, String)>,
    /// Events after the newest checkpoint.
    pub uncovered_events: u64,
    /// The checkpoint (seq, when signed) a walk since the newest checkpoint started from;
    /// `None` when the whole chain was walked.
    pub since: Option<(u64, String)>,
}

/// One bar group of a chart: label, sessions, denials, violations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    pub label: String,
    pub sessions: u64,
    pub denials: u64,
    pub violations: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverviewFigures {
    pub last_24h: Vec<Bucket>,
    pub last_7d: Vec<Bucket>,
    pub top_denied_tools: Vec<(String, u64)>,
    pub top_violated_rules: Vec<(String, u64)>,
    /// Content-inspection findings by `inspector · action`, most frequent first.
    pub findings: Vec<(String, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionSettings {
    pub days: Option<u32>,
    pub can_change: bool,
    /// The seq the remaining chain starts after (0: nothing pruned yet).
    pub anchor_seq: u64,
}

/// `query` defaults to no filter: a hydrated page with no filters posts an empty body, and
/// an all-`None` struct has no fields to post.
#[server(prefix = "/console/api", endpoint = "list_sessions")]
pub async fn list_sessions(
    #[server(default)] query: SessionQuery,
) -> Result<SessionsList, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let filter = ssr::filter(&query)?;
    let page = ssr::compliance()
        .sessions(&filter, query.before, SESSIONS_PER_PAGE)
        .await
        .map_err(crate::shared::ssr::internal)?;
    Ok(SessionsList {
        rows: page.sessions.into_iter().map(ssr::row).collect(),
        sessions: page.counts.sessions,
        with_denial: page.counts.with_denial,
        with_violation: page.counts.with_violation,
        with_error: page.counts.with_error,
        next_cursor: page.next_cursor,
        integrity: ssr::integrity(&page.integrity),
    })
}

/// One page of a session's events, after seq `after` (the previous page's `next_after`).
#[server(prefix = "/console/api")]
pub async fn session_timeline(
    id: String,
    after: Option<u64>,
) -> Result<Option<Timeline>, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let after = after.filter(|&a| a > 0);
    let Some(timeline) = ssr::compliance()
        .timeline_page(&id, after, TIMELINE_EVENTS)
        .await
        .map_err(crate::shared::ssr::internal)?
    else {
        return Ok(None);
    };
    Ok(Some(Timeline {
        session: ssr::row(timeline.summary),
        entries: timeline.entries.into_iter().map(ssr::entry).collect(),
        after,
        next_after: timeline.next_after,
        integrity: ssr::integrity(&timeline.integrity),
    }))
}

/// Walks the chain (the whole of it, or with `since_checkpoint` only what is newer than the
/// newest checkpoint the server's key signed) and checks it against the signed
/// checkpoints with the server's public key. Read-only, so a GET of the verification page
/// runs it.
#[server(prefix = "/console/api")]
pub async fn verify_audit_chain(
    #[server(default)] since_checkpoint: bool,
) -> Result<FullVerification, ConsoleError> {
    use skillgate_core::audit::{Extent, TrustedKeys};
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    // Without the server's key in context every checkpoint is reported unverifiable.
    let keys = use_context::<TrustedKeys>().unwrap_or_default();
    let report = ssr::compliance()
        .verify_integrity(
            &keys,
            if since_checkpoint {
                Extent::SinceCheckpoint
            } else {
                Extent::Whole
            },
        )
        .await
        .map_err(crate::shared::ssr::internal)?;
    let (chain, checks) = (&report.chain, &report.checkpoints);
    let mut checkpoint_problems: Vec<String> =
        checks.problems.iter().map(ToString::to_string).collect();
    if checks.more_problems > 0 {
        checkpoint_problems.push(format!("{} more checkpoint problems", checks.more_problems));
    }
    Ok(FullVerification {
        events: chain.events,
        start_seq: chain.start.seq,
        tip_seq: chain.verified_tip.seq,
        tip_hash: chain.verified_tip.hash.clone(),
        first_bad: chain.first_bad.as_ref().map(ToString::to_string),
        first_bad_seq: chain.first_bad.as_ref().map(|b| b.seq),
        checkpoint_problems,
        checkpoints: checks.checkpoints,
        newest_checkpoint: checks.newest_valid.as_ref().map(|c| (c.seq, c.at.clone())),
        uncovered_events: checks.uncovered_events(),
        since: report.since.as_ref().map(|c| (c.seq, c.at.clone())),
    })
}

#[server(prefix = "/console/api")]
pub async fn compliance_overview() -> Result<OverviewFigures, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let overview = ssr::compliance()
        .overview(skillgate_core::compliance::utc_now())
        .await
        .map_err(crate::shared::ssr::internal)?;
    let buckets = |series: Vec<(String, u64, u64, u64)>| {
        series
            .into_iter()
            .map(|(label, sessions, denials, violations)| Bucket {
                label,
                sessions,
                denials,
                violations,
            })
            .collect()
    };
    Ok(OverviewFigures {
        last_24h: buckets(overview.last_24h),
        last_7d: buckets(overview.last_7d),
        top_denied_tools: overview.top_denied_tools,
        top_violated_rules: overview.top_violated_rules,
        findings: overview.findings,
    })
}

#[server(prefix = "/console/api")]
pub async fn retention_info() -> Result<RetentionSettings, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    let compliance = ssr::compliance();
    let days = compliance
        .retention_days()
        .await
        .map_err(crate::shared::ssr::internal)?;
    let anchor_seq = crate::shared::ssr::context()
        .store
        .audit_latest_anchor()
        .await
        .map_err(crate::shared::ssr::internal)?
        .map_or(0, |a| a.seq);
    Ok(RetentionSettings {
        days,
        can_change: user.role.allows(ConsoleRole::Admin),
        anchor_seq,
    })
}

#[cfg(feature = "ssr")]
pub mod ssr {
    use skillgate_core::compliance::{self, Compliance, Outcome, SessionFilter, ShownIntegrity};
    use skillgate_core::store::audit_query::SessionSummary;

    use super::*;

    pub fn compliance() -> Compliance {
        Compliance::new(crate::shared::ssr::context().store)
    }

    fn clean(value: &Option<String>) -> Option<String> {
        value
            .as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    }

    /// Turns the page's filters into a store filter; a malformed date or outcome is a
    /// clear error, not an empty list.
    pub fn filter(query: &SessionQuery) -> Result<SessionFilter, ConsoleError> {
        let outcome = match clean(&query.outcome) {
            None => None,
            Some(o) => Some(Outcome::parse(&o).ok_or_else(|| {
                ConsoleError::Invalid(format!(
                    "Unknown outcome “{o}”: use denial, violation or error."
                ))
            })?),
        };
        let time = |value: &Option<String>, end_of_day: bool| {
            clean(value)
                .map(|v| {
                    compliance::parse_time_bound(&v, end_of_day).ok_or_else(|| {
                        ConsoleError::Invalid(format!(
                            "“{v}” is not a date (YYYY-MM-DD) or an RFC 3339 time."
                        ))
                    })
                })
                .transpose()
        };
        Ok(SessionFilter {
            key: clean(&query.key),
            scope: clean(&query.scope),
            from: time(&query.from, false)?,
            to: time(&query.to, true)?,
            role: clean(&query.role),
            tool: clean(&query.tool),
            outcome,
            text: clean(&query.q),
        })
    }

    pub fn row(s: SessionSummary) -> SessionRow {
        SessionRow {
            id: s.session_id,
            started_at: s.started_at,
            last_at: s.last_at,
            key: s.key,
            scope: s.scope,
            task_summary: s.task_summary,
            events: s.events,
            calls: s.calls,
            denials: s.denials,
            violations: s.violations,
            errors: s.errors,
            roles: s.roles,
            tools: s.tools,
        }
    }

    pub fn integrity(shown: &ShownIntegrity) -> Integrity {
        Integrity {
            events: shown.events,
            first_bad: shown.first_bad.as_ref().map(ToString::to_string),
            first_bad_seq: shown.first_bad.as_ref().map(|b| b.seq),
        }
    }

    pub fn entry(e: compliance::TimelineEntry) -> TimelineEntry {
        TimelineEntry {
            seq: e.seq,
            at: e.at,
            kind: e.kind,
            actor: e.actor,
            tone: e.tone.as_str().to_owned(),
            badge: e.badge,
            headline: e.headline,
            role: e.role,
            authorized_by: e.authorized_by,
            tool: e.tool,
            rule: e.rule,
            arguments: e
                .arguments
                .into_iter()
                .map(|a| EntryArgument {
                    name: a.name,
                    value: a.value,
                    digest: a.digest,
                })
                .collect(),
            skill_versions: e.skill_versions,
            duration_ms: e.duration_ms,
            detail: e.detail,
            scope_grew: e.scope_grew,
            hash: e.hash,
        }
    }
}
