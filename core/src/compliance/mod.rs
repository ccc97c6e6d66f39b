//! Compliance reading of the audit chain: filtered session lists, per-session timelines
//! decoded for display, integrity checks over what is shown, exports, dashboard figures
//! and retention.

mod timeline;

use std::collections::BTreeSet;
use std::io::Write;

use chrono::{DateTime, Duration, Utc};
use futures::TryStreamExt;

use crate::audit::chain::event_hash;
use crate::audit::export::{ExportError, ExportWriter};
use crate::audit::{
    Anchor, AuditRow, BadEvent, BadReason, CheckpointSigner, ExportFormat, Extent, GENESIS_HASH,
    IntegrityReport, PruneError, Pruned, TrustedKeys, VerifyReport,
};
use crate::store::audit_query::{OutcomeCounts, SessionSummary};
use crate::store::{Store, StoreError, stamp};

pub use crate::store::audit_query::{Outcome, SessionFilter};
pub use timeline::{Argument, TimelineEntry, Tone, decode_entries, decode_entries_after};

/// The settings key of the retention period, in days.
pub(crate) const RETENTION_KEY: &str = "audit_retention_days";
/// Retention prunes whole segments of this many events, so anchors sit on round seqs.
pub const SEGMENT: u64 = 1000;
/// The most events a sessions page checks the chain over: the first events of the
/// sessions shown, so one session with a huge history cannot make a page read all of it.
pub const MAX_CHECKED_EVENTS: u32 = 10_000;
/// The most events one timeline page holds.
pub const MAX_TIMELINE_PAGE: u32 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum ComplianceError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error(transparent)]
    Prune(#[from] PruneError),
    #[error("{0}")]
    Invalid(String),
}

/// A `Write` target whose bytes another owner can take out between rows.
#[derive(Clone, Default)]
struct SharedBuffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl SharedBuffer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        // A panic while holding this lock cannot leave the bytes inconsistent.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn len(&self) -> usize {
        self.lock().len()
    }

    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.lock())
    }
}

impl Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Whether the events on a page hash correctly and link to their stored neighbours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownIntegrity {
    pub events: u64,
    pub first_bad: Option<BadEvent>,
}

impl ShownIntegrity {
    pub fn is_intact(&self) -> bool {
        self.first_bad.is_none()
    }
}

/// One page of the sessions list.
#[derive(Debug, Clone)]
pub struct SessionsPage {
    pub sessions: Vec<SessionSummary>,
    pub counts: OutcomeCounts,
    /// Pass as `before` to get the next (older) page.
    pub next_cursor: Option<u64>,
    pub integrity: ShownIntegrity,
}

/// One page of a session's timeline.
#[derive(Debug, Clone)]
pub struct Timeline {
    pub summary: SessionSummary,
    pub entries: Vec<TimelineEntry>,
    /// Events of the session beyond those shown.
    pub more: bool,
    /// Pass as `after` to get the next page (the seq of the last event shown), when `more`.
    pub next_after: Option<u64>,
    pub integrity: ShownIntegrity,
}

/// Dashboard figures: `(bucket, sessions, denials, violations)` per hour and per day.
#[derive(Debug, Clone, Default)]
pub struct Overview {
    pub last_24h: Vec<(String, u64, u64, u64)>,
    pub last_7d: Vec<(String, u64, u64, u64)>,
    pub top_denied_tools: Vec<(String, u64)>,
    pub top_violated_rules: Vec<(String, u64)>,
    /// Content-inspection findings, as `inspector · action` (`secrets · redact`), most
    /// frequent first.
    pub findings: Vec<(String, u64)>,
}

/// The most finding events the dashboard reads for its count: a week of them on a busy
/// gateway is bounded by this, newest first.
pub const MAX_COUNTED_FINDING_EVENTS: u32 = 5000;

/// Counts the findings of `inspection_finding` payloads by inspector and action, most
/// frequent first; unreadable payloads count nothing.
pub fn count_findings<S: AsRef<str>>(payloads: &[S]) -> Vec<(String, u64)> {
    let mut counts: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for payload in payloads {
        let Ok(payload) = serde_json::from_str::<serde_json::Value>(payload.as_ref()) else {
            continue;
        };
        let findings = payload
            .get("findings")
            .and_then(serde_json::Value::as_array);
        for finding in findings.into_iter().flatten() {
            let field = |key: &str| {
                finding
                    .get(key)
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("?")
                    .to_owned()
            };
            *counts
                .entry(format!("{} · {}", field("inspector"), field("action")))
                .or_default() += 1;
        }
    }
    let mut counts: Vec<(String, u64)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts
}

/// The current time, for callers without their own clock dependency.
pub fn utc_now() -> DateTime<Utc> {
    Utc::now()
}

/// A filter bound as a stored timestamp: `YYYY-MM-DD` is the start of that day (or, with
/// `end_of_day`, the start of the next, so a `to` date includes its day); an RFC 3339 time
/// is taken as is. `None` when the text is neither.
pub fn parse_time_bound(text: &str, end_of_day: bool) -> Option<String> {
    if let Ok(day) = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        let day = if end_of_day { day.succ_opt()? } else { day };
        return Some(stamp(day.and_hms_opt(0, 0, 0)?.and_utc()));
    }
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|at| stamp(at.with_timezone(&Utc)))
}

/// The compliance service over the store.
#[derive(Debug, Clone)]
pub struct Compliance {
    store: Store,
}

impl Compliance {
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// A page of sessions, newest first, with outcome counts and a chain check over every
    /// event of the sessions shown.
    #[tracing::instrument(skip(self))]
    pub async fn sessions(
        &self,
        filter: &SessionFilter,
        before: Option<u64>,
        limit: u32,
    ) -> Result<SessionsPage, ComplianceError> {
        let limit = limit.clamp(1, 200);
        let mut sessions = self.store.audit_sessions(filter, before, limit + 1).await?;
        let next_cursor = if sessions.len() > limit as usize {
            sessions.truncate(limit as usize);
            sessions.last().map(|s| s.first_seq)
        } else {
            None
        };
        let counts = self.store.audit_session_counts(filter).await?;
        let ids: Vec<String> = sessions.iter().map(|s| s.session_id.clone()).collect();
        let rows = self
            .store
            .audit_rows_of_sessions(&ids, MAX_CHECKED_EVENTS)
            .await?;
        let integrity = self.check_shown(&rows).await?;
        Ok(SessionsPage {
            sessions,
            counts,
            next_cursor,
            integrity,
        })
    }

    /// The first `limit` events of a session, decoded, with a chain check over them.
    pub async fn timeline(
        &self,
        session_id: &str,
        limit: u32,
    ) -> Result<Option<Timeline>, ComplianceError> {
        self.timeline_page(session_id, None, limit).await
    }

    /// Up to `limit` (at most [`MAX_TIMELINE_PAGE`]) events of a session after seq `after`
    /// (the previous page's `next_after`), decoded, with a chain check over them.
    #[tracing::instrument(skip(self))]
    pub async fn timeline_page(
        &self,
        session_id: &str,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Option<Timeline>, ComplianceError> {
        let Some(summary) = self.store.audit_session(session_id).await? else {
            return Ok(None);
        };
        let limit = limit.clamp(1, MAX_TIMELINE_PAGE);
        let after = after.unwrap_or(0);
        let mut rows = self
            .store
            .audit_session_rows(session_id, after, limit + 1)
            .await?;
        let more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let integrity = self.check_shown(&rows).await?;
        // A later page still marks where the scope grew: it starts from the roles learned
        // on the pages before it.
        let learned = if after == 0 {
            Vec::new()
        } else {
            self.store
                .audit_roles_learned_through(session_id, after)
                .await?
        };
        Ok(Some(Timeline {
            summary,
            entries: decode_entries_after(&rows, learned),
            more,
            next_after: more.then(|| rows.last().map(|r| r.seq)).flatten(),
            integrity,
        }))
    }

    /// Checks each row's own hash and its links to the stored events just before and
    /// after it. This covers the events shown; only [`Compliance::verify_all`] proves the
    /// whole chain.
    pub async fn check_shown(&self, rows: &[AuditRow]) -> Result<ShownIntegrity, StoreError> {
        let mut neighbours = BTreeSet::new();
        for row in rows {
            neighbours.insert(row.seq + 1);
            if row.seq > 1 {
                neighbours.insert(row.seq - 1);
            }
        }
        let neighbours: Vec<u64> = neighbours.into_iter().collect();
        let links = self.store.audit_links_at(&neighbours).await?;
        let anchor = self
            .store
            .audit_latest_anchor()
            .await?
            .unwrap_or_else(Anchor::genesis);
        let mut first_bad: Option<BadEvent> = None;
        let mut note = |seq: u64, reason: BadReason| {
            if first_bad.as_ref().is_none_or(|bad| seq < bad.seq) {
                first_bad = Some(BadEvent { seq, reason });
            }
        };
        for row in rows {
            if event_hash(row).as_deref() != Some(row.hash.as_str()) {
                note(row.seq, BadReason::Changed);
                continue;
            }
            let prev_seq = row.seq - 1;
            let expected_prev = if prev_seq == anchor.seq {
                Some(anchor.hash.as_str())
            } else if prev_seq == 0 {
                Some(GENESIS_HASH)
            } else {
                links.get(&prev_seq).map(|(hash, _)| hash.as_str())
            };
            match expected_prev {
                None => note(prev_seq, BadReason::Removed),
                Some(hash) if hash != row.prev_hash => note(prev_seq, BadReason::Changed),
                Some(_) => {}
            }
            // A row rewritten together with its own hash still breaks its successor's link.
            if let Some((_, next_prev)) = links.get(&(row.seq + 1))
                && *next_prev != row.hash
            {
                note(row.seq, BadReason::Changed);
            }
        }
        Ok(ShownIntegrity {
            events: rows.len() as u64,
            first_bad,
        })
    }

    /// Walks the whole stored chain from the newest retention anchor, in constant memory.
    #[tracing::instrument(skip(self))]
    pub async fn verify_all(&self) -> Result<VerifyReport, StoreError> {
        crate::audit::checkpoint::walk::walk_all(&self.store).await
    }

    /// The walk (whole, or since the newest trusted checkpoint) and the signed
    /// checkpoints: truncation, forged anchors and pruned ranges that do not match,
    /// trusting only `keys`.
    #[tracing::instrument(skip_all)]
    pub async fn verify_integrity(
        &self,
        keys: &TrustedKeys,
        extent: Extent,
    ) -> Result<IntegrityReport, StoreError> {
        crate::audit::verify_integrity(&self.store, keys, extent).await
    }

    /// Streams the events of one session, of the sessions matching `filter`, or (with
    /// neither) the whole chain to `writer`, one row at a time. Returns the event count.
    pub async fn export<W: Write + Send>(
        &self,
        session_id: Option<&str>,
        filter: &SessionFilter,
        format: ExportFormat,
        writer: W,
    ) -> Result<u64, ComplianceError> {
        let mut out = ExportWriter::new(format, writer)?;
        let count = self
            .export_rows(session_id, filter, |row| Ok(out.write(row)?))
            .await?;
        out.finish()?;
        Ok(count)
    }

    /// Like [`Compliance::export`], but sends the output in chunks of about `chunk` bytes
    /// to `chunks` (an HTTP response body), waiting whenever the receiver lags, so memory
    /// stays flat however large the export. Stops early when the receiver goes away.
    pub async fn export_chunks(
        &self,
        session_id: Option<&str>,
        filter: &SessionFilter,
        format: ExportFormat,
        chunk: usize,
        chunks: tokio::sync::mpsc::Sender<Vec<u8>>,
    ) -> Result<u64, ComplianceError> {
        let buffer = SharedBuffer::default();
        let mut out = ExportWriter::new(format, buffer.clone())?;
        let mut count = 0u64;
        let query = (session_id.is_none() && !filter.is_empty())
            .then(|| Store::audit_filtered_events_query(filter));
        let mut rows = match &query {
            Some(query) => self.store.audit_query_rows(query),
            None => self.store.audit_events(0, session_id),
        };
        while let Some(row) = rows.try_next().await? {
            out.write(&row)?;
            count += 1;
            out.flush()?;
            if buffer.len() >= chunk && chunks.send(buffer.take()).await.is_err() {
                return Ok(count);
            }
        }
        out.finish()?;
        let rest = buffer.take();
        if !rest.is_empty() {
            let _ = chunks.send(rest).await;
        }
        Ok(count)
    }

    async fn export_rows(
        &self,
        session_id: Option<&str>,
        filter: &SessionFilter,
        mut each: impl FnMut(&AuditRow) -> Result<(), ComplianceError>,
    ) -> Result<u64, ComplianceError> {
        let query = (session_id.is_none() && !filter.is_empty())
            .then(|| Store::audit_filtered_events_query(filter));
        let mut rows = match &query {
            Some(query) => self.store.audit_query_rows(query),
            None => self.store.audit_events(0, session_id),
        };
        let mut count = 0;
        while let Some(row) = rows.try_next().await? {
            each(&row)?;
            count += 1;
        }
        Ok(count)
    }

    /// Sessions, denials and violations per hour (24 h) and per day (7 d), top denied
    /// tools and top violated rules over 7 days.
    #[tracing::instrument(skip(self))]
    pub async fn overview(&self, now: DateTime<Utc>) -> Result<Overview, StoreError> {
        let day = stamp(now - Duration::hours(24));
        let week = stamp(now - Duration::days(7));
        let hours = (0..24)
            .rev()
            .map(|h| stamp(now - Duration::hours(h))[..13].to_owned())
            .collect();
        let days = (0..7)
            .rev()
            .map(|d| stamp(now - Duration::days(d))[..10].to_owned())
            .collect();
        Ok(Overview {
            last_24h: self.series(&day, 13, hours).await?,
            last_7d: self.series(&week, 10, days).await?,
            top_denied_tools: self.store.audit_top_refused(&week, false, 5).await?,
            top_violated_rules: self.store.audit_top_refused(&week, true, 5).await?,
            findings: count_findings(
                &self
                    .store
                    .audit_payloads_since(
                        crate::audit::EventKind::InspectionFinding,
                        &week,
                        MAX_COUNTED_FINDING_EVENTS,
                    )
                    .await?,
            ),
        })
    }

    async fn series(
        &self,
        since: &str,
        len: u8,
        buckets: Vec<String>,
    ) -> Result<Vec<(String, u64, u64, u64)>, StoreError> {
        let sessions = self.store.audit_sessions_per_bucket(since, len).await?;
        let refusals = self.store.audit_refusals_per_bucket(since, len).await?;
        Ok(buckets
            .into_iter()
            .map(|bucket| {
                let s = sessions
                    .iter()
                    .find(|(b, _)| *b == bucket)
                    .map_or(0, |(_, n)| *n);
                let (d, v) = refusals
                    .iter()
                    .find(|(b, _, _)| *b == bucket)
                    .map_or((0, 0), |(_, d, v)| (*d, *v));
                (bucket, s, d, v)
            })
            .collect())
    }

    /// The configured retention period in days (`None`: keep everything).
    pub async fn retention_days(&self) -> Result<Option<u32>, StoreError> {
        Ok(self
            .store
            .compliance_setting(RETENTION_KEY)
            .await?
            .and_then(|v| v.parse().ok()))
    }

    /// Deletes whole segments of [`SEGMENT`] events whose every event is older than
    /// `days` days, keeping the hash of the last deleted event as the anchor later
    /// verification starts from, and appends the `audit_pruned` event `signer` signs, by
    /// `actor`. Returns what was pruned, or `None` when nothing is old enough to fill a
    /// segment.
    #[tracing::instrument(skip(self, signer))]
    pub async fn prune_older_than(
        &self,
        days: u32,
        now: DateTime<Utc>,
        signer: &CheckpointSigner,
        actor: &str,
    ) -> Result<Option<Pruned>, ComplianceError> {
        if days == 0 {
            return Err(ComplianceError::Invalid(
                "The retention period must be at least one day.".into(),
            ));
        }
        let cutoff = stamp(now - Duration::days(i64::from(days)));
        let Some(newest_old) = self.store.audit_last_seq_before(&cutoff).await? else {
            return Ok(None);
        };
        let through = newest_old / SEGMENT * SEGMENT;
        let start = self
            .store
            .audit_latest_anchor()
            .await?
            .map_or(0, |anchor| anchor.seq);
        if through <= start {
            return Ok(None);
        }
        Ok(Some(
            crate::audit::checkpoint::prune_through(&self.store, signer, through, actor, now)
                .await?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_are_counted_by_inspector_and_action_most_frequent_first() {
        let payloads = [
            r#"{"findings":[{"inspector":"secrets","action":"redact"},{"inspector":"injection","action":"flag"}]}"#,
            r#"{"findings":[{"inspector":"secrets","action":"redact"}]}"#,
            "not json",
        ];
        assert_eq!(
            count_findings(&payloads),
            [
                ("secrets · redact".to_owned(), 2),
                ("injection · flag".to_owned(), 1)
            ]
        );
    }

    #[test]
    fn a_to_date_includes_its_whole_day_and_times_are_normalised_to_utc() {
        assert_eq!(
            parse_time_bound("2026-11-30", false).as_deref(),
            Some("2026-11-30T00:00:00.000000Z")
        );
        assert_eq!(
            parse_time_bound("2026-11-30", true).as_deref(),
            Some("2026-12-01T00:00:00.000000Z")
        );
        assert_eq!(
            parse_time_bound("2026-11-30T10:00:00+02:00", false).as_deref(),
            Some("2026-11-30T08:00:00.000000Z")
        );
        assert_eq!(parse_time_bound("yesterday", false), None);
    }
}
