//! SQL for compliance reading of the audit chain: the per-session summary the writer
//! maintains, filtered session lists, timelines, dashboard aggregates and settings.

use std::collections::HashMap;

use futures::stream::{BoxStream, StreamExt};
use serde_json::Value;
use sqlx::any::{AnyArguments, AnyRow};
use sqlx::{Arguments, FromRow, Row};

use super::Tx;
use super::audit_row::{AuditRow, COLUMNS, seq_from_db, seq_to_db};
use super::lane::{MultiRow, Param, Statements};
use super::{Store, StoreError};
use crate::names::EventKind;

/// How one event changes its session's summary.
#[derive(Debug, Default, PartialEq, Eq)]
struct SessionDelta {
    scope: Option<String>,
    task_summary: Option<String>,
    role: Option<String>,
    tool: Option<String>,
    learns: i64,
    calls: i64,
    denials: i64,
    violations: i64,
    errors: i64,
}

/// The rule deciding which refusals count as governance violations and which as denials.
pub const VIOLATION_CODE: &str = "GOVERNANCE_VIOLATION";

fn str_field(payload: &Value, key: &str) -> Option<String> {
    payload.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn session_delta(kind: &str, payload: &str) -> SessionDelta {
    // An unknown kind changes nothing but the event count; verification reports it.
    let Ok(kind) = kind.parse::<EventKind>() else {
        return SessionDelta::default();
    };
    // An unreadable payload still counts as an event; verification reports it.
    let payload: Value = serde_json::from_str(payload).unwrap_or(Value::Null);
    let mut delta = SessionDelta::default();
    match kind {
        EventKind::SessionStarted => {
            delta.scope = str_field(&payload, "scope");
            delta.task_summary = str_field(&payload, "task_summary");
        }
        EventKind::LearnGranted => {
            delta.learns = 1;
            delta.role = str_field(&payload, "role");
        }
        EventKind::LearnDenied => delta.denials = 1,
        EventKind::CallAllowed => {
            delta.calls = 1;
            delta.tool = str_field(&payload, "tool");
        }
        EventKind::CallDenied => {
            delta.tool = str_field(&payload, "tool");
            if payload.get("code").and_then(Value::as_str) == Some(VIOLATION_CODE) {
                delta.violations = 1;
            } else {
                delta.denials = 1;
            }
        }
        // A held call ran nothing yet: it names its tool but counts as a call only when
        // its approved run is allowed. A reviewer's denial refuses the call.
        EventKind::CallHeld
        | EventKind::HoldApproved
        | EventKind::HoldExpired
        | EventKind::HoldWithdrawn => {
            delta.tool = str_field(&payload, "tool");
        }
        EventKind::HoldDenied => {
            delta.tool = str_field(&payload, "tool");
            delta.denials = 1;
        }
        EventKind::CallResult if payload.get("status").and_then(Value::as_str) == Some("error") => {
            delta.errors = 1;
        }
        EventKind::Feedback
            if payload.get("decision").and_then(Value::as_str) == Some("denied") =>
        {
            if payload.get("code").and_then(Value::as_str) == Some(VIOLATION_CODE) {
                delta.violations = 1;
            } else {
                delta.denials = 1;
            }
        }
        _ => {}
    }
    delta
}

/// `' name '`, the membership token of the `roles` and `tools` columns (`' '` for none).
fn token(name: Option<&str>) -> String {
    match name {
        Some(name) if !name.is_empty() => format!(" {} ", name.replace(char::is_whitespace, "_")),
        _ => " ".to_owned(),
    }
}

/// One event's change to its session's summary, as the columns of a row of
/// [`UPSERT_SUMMARIES`] bind it (in field order).
struct SummaryRow<'a> {
    session_id: &'a str,
    seq: i64,
    at: &'a str,
    actor: Option<&'a str>,
    delta: SessionDelta,
    roles: String,
    tools: String,
}

/// The summary change of `row`; `None` when it belongs to no session.
fn summary_row(row: &AuditRow) -> Option<SummaryRow<'_>> {
    let session_id = row.session_id.as_deref()?;
    let delta = session_delta(&row.kind, &row.payload);
    Some(SummaryRow {
        session_id,
        seq: seq_to_db(row.seq),
        at: &row.at,
        actor: row.actor.as_deref(),
        roles: token(delta.role.as_deref()),
        tools: token(delta.tool.as_deref()),
        delta,
    })
}

/// Folds events into their sessions' summaries, one row per event; several events (of
/// distinct sessions) share a statement where statements are round trips
/// ([`Statements::rows_per_statement`]).
/// The stored row is named `s`: PostgreSQL reads a bare column in `DO UPDATE` as ambiguous.
static UPSERT_SUMMARIES: std::sync::LazyLock<MultiRow> = std::sync::LazyLock::new(|| {
    MultiRow::new(
        "INSERT INTO audit_session_summaries AS s
            (session_id, first_seq, last_seq, started_at, last_at, actor, scope, task_summary,
             events, learns, calls, denials, violations, errors, roles, tools)
         VALUES ",
        "($1, $2, $2, $3, $3, $4, $5, $6, 1, $7, $8, $9, $10, $11, $12, $13)",
        "
         ON CONFLICT (session_id) DO UPDATE SET
            last_seq = excluded.last_seq,
            last_at = excluded.last_at,
            events = s.events + 1,
            actor = COALESCE(s.actor, excluded.actor),
            scope = COALESCE(s.scope, excluded.scope),
            task_summary = COALESCE(s.task_summary, excluded.task_summary),
            learns = s.learns + excluded.learns,
            calls = s.calls + excluded.calls,
            denials = s.denials + excluded.denials,
            violations = s.violations + excluded.violations,
            errors = s.errors + excluded.errors,
            roles = CASE WHEN excluded.roles = ' ' OR instr(s.roles, excluded.roles) > 0
                         THEN s.roles ELSE s.roles || substr(excluded.roles, 2) END,
            tools = CASE WHEN excluded.tools = ' ' OR instr(s.tools, excluded.tools) > 0
                         THEN s.tools ELSE s.tools || substr(excluded.tools, 2) END",
    )
});

impl SummaryRow<'_> {
    /// The values of one row of [`UPSERT_SUMMARIES`], in its marks' order.
    fn params(&self) -> [Param<'_>; 13] {
        let d = &self.delta;
        [
            Param::from(self.session_id),
            Param::Int(self.seq),
            Param::from(self.at),
            Param::from(self.actor),
            Param::from(d.scope.as_deref()),
            Param::from(d.task_summary.as_deref()),
            Param::Int(d.learns),
            Param::Int(d.calls),
            Param::Int(d.denials),
            Param::Int(d.violations),
            Param::Int(d.errors),
            Param::from(self.roles.as_str()),
            Param::from(self.tools.as_str()),
        ]
    }
}

/// Folds appended rows into their sessions' summaries (rows without a session are
/// skipped), on either lane (see [`super::lane`]): the one summary upsert.
///
/// A statement may name a session once (PostgreSQL refuses an `ON CONFLICT DO UPDATE`
/// that would change a row twice), so where rows share statements they go in waves: the
/// first event of each session, then the second of each, and so on; each session's events
/// stay in order.
pub(crate) async fn summarize_on(
    conn: &mut impl Statements,
    rows: &[AuditRow],
) -> Result<(), StoreError> {
    let per_statement = conn.rows_per_statement();
    if per_statement == 1 {
        // A row per statement, in order (the direct lane's every append): no waves to
        // build, and the values bound where they are.
        for summary in rows.iter().filter_map(summary_row) {
            conn.execute(UPSERT_SUMMARIES.text(1), &summary.params())
                .await?;
        }
        return Ok(());
    }
    let mut waves: Vec<Vec<SummaryRow<'_>>> = Vec::new();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for summary in rows.iter().filter_map(summary_row) {
        let wave = seen.entry(summary.session_id).or_insert(0);
        if *wave == waves.len() {
            waves.push(Vec::new());
        }
        waves[*wave].push(summary);
        *wave += 1;
    }
    for wave in &waves {
        for chunk in wave.chunks(per_statement) {
            let params: Vec<Param<'_>> = chunk.iter().flat_map(SummaryRow::params).collect();
            conn.execute(UPSERT_SUMMARIES.text(chunk.len()), &params)
                .await?;
        }
    }
    Ok(())
}

/// Which sessions a list or an export covers. Empty fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFilter {
    /// The agent key name (the events' actor).
    pub key: Option<String>,
    pub scope: Option<String>,
    /// Sessions started at or after this RFC 3339 stamp.
    pub from: Option<String>,
    /// Sessions started before this RFC 3339 stamp.
    pub to: Option<String>,
    /// A role the session learned.
    pub role: Option<String>,
    /// A tool the session called (allowed or denied).
    pub tool: Option<String>,
    pub outcome: Option<Outcome>,
    /// Case-insensitive substring of the task summary or of a called tool's name.
    pub text: Option<String>,
}

impl SessionFilter {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A learn or call refused for access (not a governance violation).
    Denial,
    Violation,
    /// A downstream call that failed.
    Error,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Denial => "denial",
            Outcome::Violation => "violation",
            Outcome::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Outcome::Denial, Outcome::Violation, Outcome::Error]
            .into_iter()
            .find(|o| o.as_str() == s)
    }

    fn column(self) -> &'static str {
        match self {
            Outcome::Denial => "denials",
            Outcome::Violation => "violations",
            Outcome::Error => "errors",
        }
    }
}

/// One session as the sessions list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    pub session_id: String,
    pub first_seq: u64,
    pub last_seq: u64,
    pub started_at: String,
    pub last_at: String,
    pub key: Option<String>,
    pub scope: Option<String>,
    pub task_summary: Option<String>,
    pub events: u64,
    pub learns: u64,
    pub calls: u64,
    pub denials: u64,
    pub violations: u64,
    pub errors: u64,
    pub roles: Vec<String>,
    pub tools: Vec<String>,
}

fn count(row: &AnyRow, column: &str) -> Result<u64, sqlx::Error> {
    Ok(seq_from_db(row.try_get(column)?))
}

fn names(text: String) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

impl<'r> FromRow<'r, AnyRow> for SessionSummary {
    fn from_row(row: &'r AnyRow) -> Result<Self, sqlx::Error> {
        Ok(Self {
            session_id: row.try_get("session_id")?,
            first_seq: count(row, "first_seq")?,
            last_seq: count(row, "last_seq")?,
            started_at: row.try_get("started_at")?,
            last_at: row.try_get("last_at")?,
            key: row.try_get("actor")?,
            scope: row.try_get("scope")?,
            task_summary: row.try_get("task_summary")?,
            events: count(row, "events")?,
            learns: count(row, "learns")?,
            calls: count(row, "calls")?,
            denials: count(row, "denials")?,
            violations: count(row, "violations")?,
            errors: count(row, "errors")?,
            roles: names(row.try_get("roles")?),
            tools: names(row.try_get("tools")?),
        })
    }
}

/// How many sessions of a filtered set had each outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutcomeCounts {
    pub sessions: u64,
    pub with_denial: u64,
    pub with_violation: u64,
    pub with_error: u64,
}

/// A SQL text with its bound values, kept together so a stream can borrow both.
#[derive(Debug, Clone)]
pub struct BoundQuery {
    sql: String,
    binds: Vec<Bind>,
}

#[derive(Debug, Clone)]
enum Bind {
    Text(String),
    Int(i64),
}

impl BoundQuery {
    /// `sql` is assembled from parts that mark each value `?`; they are numbered here.
    fn new(sql: &str, binds: Vec<Bind>) -> Self {
        Self {
            sql: super::numbered(sql),
            binds,
        }
    }

    fn arguments(&self) -> AnyArguments<'_> {
        let mut args = AnyArguments::default();
        for bind in &self.binds {
            // Adding a text or an integer to SQLite arguments cannot fail.
            let _ = match bind {
                Bind::Text(text) => args.add(text.as_str()),
                Bind::Int(int) => args.add(*int),
            };
        }
        args
    }
}

fn like_pattern(text: &str) -> String {
    let escaped = text
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("%{}%", escaped.to_lowercase())
}

/// ` AND …` conditions on `audit_session_summaries` for `filter`.
fn conditions(filter: &SessionFilter, with_outcome: bool, binds: &mut Vec<Bind>) -> String {
    let mut sql = String::new();
    let mut text = |cond: &str, value: String, sql: &mut String| {
        sql.push_str(" AND ");
        sql.push_str(cond);
        binds.push(Bind::Text(value));
    };
    if let Some(key) = &filter.key {
        text("actor = ?", key.clone(), &mut sql);
    }
    if let Some(scope) = &filter.scope {
        text("scope = ?", scope.clone(), &mut sql);
    }
    if let Some(from) = &filter.from {
        text("started_at >= ?", from.clone(), &mut sql);
    }
    if let Some(to) = &filter.to {
        text("started_at < ?", to.clone(), &mut sql);
    }
    if let Some(role) = &filter.role {
        text("instr(roles, ?) > 0", token(Some(role)), &mut sql);
    }
    if let Some(tool) = &filter.tool {
        text("instr(tools, ?) > 0", token(Some(tool)), &mut sql);
    }
    if let Some(q) = &filter.text {
        let pattern = like_pattern(q);
        text(
            // Lowered on both sides: SQLite's LIKE ignores ASCII case, PostgreSQL's does not.
            "(LOWER(task_summary) LIKE ? ESCAPE '\\' OR LOWER(tools) LIKE ? ESCAPE '\\')",
            pattern.clone(),
            &mut sql,
        );
        binds.push(Bind::Text(pattern));
    }
    if with_outcome && let Some(outcome) = filter.outcome {
        sql.push_str(&format!(" AND {} > 0", outcome.column()));
    }
    sql
}

/// The newest day-or-hour buckets of a dashboard series: `(bucket start, count)`.
pub type Buckets = Vec<(String, u64)>;

impl Store {
    /// Sessions matching `filter`, newest first, starting below `before_seq` (the cursor:
    /// the `first_seq` of the last session of the previous page).
    pub async fn audit_sessions(
        &self,
        filter: &SessionFilter,
        before_seq: Option<u64>,
        limit: u32,
    ) -> Result<Vec<SessionSummary>, StoreError> {
        let mut binds = Vec::new();
        let mut sql = String::from("SELECT * FROM audit_session_summaries WHERE 1 = 1");
        sql.push_str(&conditions(filter, true, &mut binds));
        if let Some(before) = before_seq {
            sql.push_str(" AND first_seq < ?");
            binds.push(Bind::Int(seq_to_db(before)));
        }
        sql.push_str(" ORDER BY first_seq DESC LIMIT ?");
        binds.push(Bind::Int(i64::from(limit)));
        let query = BoundQuery::new(&sql, binds);
        Ok(
            sqlx::query_as_with::<_, SessionSummary, _>(&query.sql, query.arguments())
                .fetch_all(self.pool())
                .await?,
        )
    }

    /// Outcome counts over the sessions matching `filter`, ignoring its outcome field (so
    /// the counts work as facets of the list).
    pub async fn audit_session_counts(
        &self,
        filter: &SessionFilter,
    ) -> Result<OutcomeCounts, StoreError> {
        let mut binds = Vec::new();
        let mut sql = String::from(
            "SELECT COUNT(*),
                    CAST(COALESCE(SUM(CASE WHEN denials > 0 THEN 1 ELSE 0 END), 0) AS BIGINT),
                    CAST(COALESCE(SUM(CASE WHEN violations > 0 THEN 1 ELSE 0 END), 0) AS BIGINT),
                    CAST(COALESCE(SUM(CASE WHEN errors > 0 THEN 1 ELSE 0 END), 0) AS BIGINT)
             FROM audit_session_summaries WHERE 1 = 1",
        );
        sql.push_str(&conditions(filter, false, &mut binds));
        let query = BoundQuery::new(&sql, binds);
        let (sessions, denial, violation, error): (i64, i64, i64, i64) =
            sqlx::query_as_with(&query.sql, query.arguments())
                .fetch_one(self.pool())
                .await?;
        Ok(OutcomeCounts {
            sessions: seq_from_db(sessions),
            with_denial: seq_from_db(denial),
            with_violation: seq_from_db(violation),
            with_error: seq_from_db(error),
        })
    }

    pub async fn audit_session(
        &self,
        session_id: &str,
    ) -> Result<Option<SessionSummary>, StoreError> {
        Ok(
            sqlx::query_as("SELECT * FROM audit_session_summaries WHERE session_id = $1")
                .bind(session_id)
                .fetch_optional(self.pool())
                .await?,
        )
    }

    /// Up to `limit` events of one session after `after_seq`, in chain order.
    pub async fn audit_session_rows(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<AuditRow>, StoreError> {
        Ok(sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM audit_events WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
        ))
        .bind(session_id)
        .bind(seq_to_db(after_seq))
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?)
    }

    /// The first `limit` events of the listed sessions, in chain order.
    pub async fn audit_rows_of_sessions(
        &self,
        session_ids: &[String],
        limit: u32,
    ) -> Result<Vec<AuditRow>, StoreError> {
        if session_ids.is_empty() {
            return Ok(Vec::new());
        }
        let marks = vec!["?"; session_ids.len()].join(",");
        let sql = super::numbered(&format!(
            "SELECT {COLUMNS} FROM audit_events WHERE session_id IN ({marks}) ORDER BY seq LIMIT ?"
        ));
        let mut query = sqlx::query_as::<_, AuditRow>(&sql);
        for id in session_ids {
            query = query.bind(id);
        }
        Ok(query.bind(i64::from(limit)).fetch_all(self.pool()).await?)
    }

    /// The roles a session learned at or before `seq`, in the order first learned: what a
    /// timeline page that starts after `seq` needs to mark where the scope grew.
    pub async fn audit_roles_learned_through(
        &self,
        session_id: &str,
        seq: u64,
    ) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT role FROM (
               SELECT json_extract(payload, '$.role') AS role, MIN(seq) AS first
               FROM audit_events
               WHERE session_id = $1 AND kind = $3 AND seq <= $2
               GROUP BY role) AS learned
             WHERE role IS NOT NULL ORDER BY first",
        )
        .bind(session_id)
        .bind(seq_to_db(seq))
        .bind(EventKind::LearnGranted.as_str())
        .fetch_all(self.pool())
        .await?)
    }

    /// `(hash, prev_hash)` of each listed seq that exists.
    pub async fn audit_links_at(
        &self,
        seqs: &[u64],
    ) -> Result<HashMap<u64, (String, String)>, StoreError> {
        let mut links = HashMap::with_capacity(seqs.len());
        // Bounded batches keep far below SQLite's limit on bound parameters.
        for chunk in seqs.chunks(500) {
            let marks = vec!["?"; chunk.len()].join(",");
            let sql = super::numbered(&format!(
                "SELECT seq, hash, prev_hash FROM audit_events WHERE seq IN ({marks})"
            ));
            let mut query = sqlx::query_as::<_, (i64, String, String)>(&sql);
            for seq in chunk {
                query = query.bind(seq_to_db(*seq));
            }
            for (seq, hash, prev) in query.fetch_all(self.pool()).await? {
                links.insert(seq_from_db(seq), (hash, prev));
            }
        }
        Ok(links)
    }

    /// The query of every event of the sessions matching `filter`, in chain order; stream
    /// it with [`Store::audit_query_rows`].
    pub fn audit_filtered_events_query(filter: &SessionFilter) -> BoundQuery {
        let mut binds = Vec::new();
        let conds = conditions(filter, true, &mut binds);
        BoundQuery::new(
            &format!(
                "SELECT {COLUMNS} FROM audit_events WHERE session_id IN
                   (SELECT session_id FROM audit_session_summaries WHERE 1 = 1{conds})
                 ORDER BY seq"
            ),
            binds,
        )
    }

    /// Streams the rows of a query built by this module, without loading them all.
    pub fn audit_query_rows<'a>(
        &'a self,
        query: &'a BoundQuery,
    ) -> BoxStream<'a, Result<AuditRow, StoreError>> {
        sqlx::query_as_with::<_, AuditRow, _>(&query.sql, query.arguments())
            .fetch(self.pool())
            .map(|row| row.map_err(StoreError::from))
            .boxed()
    }

    /// Sessions started per bucket since `since`; `bucket_len` is 13 (hour) or 10 (day)
    /// characters of the timestamp.
    pub async fn audit_sessions_per_bucket(
        &self,
        since: &str,
        bucket_len: u8,
    ) -> Result<Buckets, StoreError> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT substr(started_at, 1, CAST($1 AS INTEGER)) AS bucket, COUNT(*)
             FROM audit_session_summaries
             WHERE started_at >= $2 GROUP BY bucket ORDER BY bucket",
        )
        .bind(i64::from(bucket_len))
        .bind(since)
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(|(b, n)| (b, seq_from_db(n))).collect())
    }

    /// Refusals per bucket since `since`: `(bucket, denials, violations)`.
    pub async fn audit_refusals_per_bucket(
        &self,
        since: &str,
        bucket_len: u8,
    ) -> Result<Vec<(String, u64, u64)>, StoreError> {
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT substr(at, 1, CAST($1 AS INTEGER)) AS bucket,
                    CAST(SUM(CASE WHEN kind = $4
                                    OR json_extract(payload, '$.code') IS DISTINCT FROM $3
                             THEN 1 ELSE 0 END) AS BIGINT),
                    CAST(SUM(CASE WHEN kind = $5 AND json_extract(payload, '$.code') = $3
                             THEN 1 ELSE 0 END) AS BIGINT)
             FROM audit_events
             WHERE kind IN ($5, $4) AND at >= $2
             GROUP BY bucket ORDER BY bucket",
        )
        .bind(i64::from(bucket_len))
        .bind(since)
        .bind(VIOLATION_CODE)
        .bind(EventKind::LearnDenied.as_str())
        .bind(EventKind::CallDenied.as_str())
        .fetch_all(self.pool())
        .await?;
        Ok(rows
            .into_iter()
            .map(|(b, d, v)| (b, seq_from_db(d), seq_from_db(v)))
            .collect())
    }

    /// The most refused tools (`violations_only = false`) or the most violated rules
    /// since `since`, most frequent first.
    pub async fn audit_top_refused(
        &self,
        since: &str,
        violations_only: bool,
        limit: u32,
    ) -> Result<Vec<(String, u64)>, StoreError> {
        let sql = if violations_only {
            "SELECT json_extract(payload, '$.rule') AS name, COUNT(*) AS n FROM audit_events
             WHERE kind = $4 AND at >= $1 AND json_extract(payload, '$.code') = $2
               AND json_extract(payload, '$.rule') IS NOT NULL
             GROUP BY name ORDER BY n DESC, name LIMIT $3"
        } else {
            "SELECT json_extract(payload, '$.tool') AS name, COUNT(*) AS n FROM audit_events
             WHERE kind = $4 AND at >= $1
               AND json_extract(payload, '$.code') IS DISTINCT FROM $2
               AND json_extract(payload, '$.tool') IS NOT NULL
             GROUP BY name ORDER BY n DESC, name LIMIT $3"
        };
        let rows: Vec<(String, i64)> = sqlx::query_as(sql)
            .bind(since)
            .bind(VIOLATION_CODE)
            .bind(i64::from(limit))
            .bind(EventKind::CallDenied.as_str())
            .fetch_all(self.pool())
            .await?;
        Ok(rows.into_iter().map(|(n, c)| (n, seq_from_db(c))).collect())
    }

    /// The payloads of the newest `limit` events of `kind` since `since`, newest first.
    pub async fn audit_payloads_since(
        &self,
        kind: EventKind,
        since: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT payload FROM audit_events WHERE kind = $1 AND at >= $2
             ORDER BY seq DESC LIMIT $3",
        )
        .bind(kind.as_str())
        .bind(since)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?)
    }

    /// The newest event appended before `cutoff`, if any.
    pub async fn audit_last_seq_before(&self, cutoff: &str) -> Result<Option<u64>, StoreError> {
        // `at` grows with seq (one writer stamps each group), so the first event at or
        // after the cutoff bounds every older one.
        let first_kept: Option<i64> =
            sqlx::query_scalar("SELECT MIN(seq) FROM audit_events WHERE at >= $1")
                .bind(cutoff)
                .fetch_one(self.pool())
                .await?;
        let newest_old: Option<i64> = match first_kept {
            Some(kept) => {
                sqlx::query_scalar("SELECT MAX(seq) FROM audit_events WHERE seq < $1")
                    .bind(kept)
                    .fetch_one(self.pool())
                    .await?
            }
            None => {
                sqlx::query_scalar("SELECT MAX(seq) FROM audit_events")
                    .fetch_one(self.pool())
                    .await?
            }
        };
        Ok(newest_old.map(seq_from_db))
    }

    pub async fn compliance_setting(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT value FROM compliance_settings WHERE key = $1")
                .bind(key)
                .fetch_optional(self.pool())
                .await?,
        )
    }

    pub async fn set_compliance_setting(
        &self,
        key: &str,
        value: Option<&str>,
    ) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await?;
        set_compliance_setting_on(Tx::wrap(&mut conn), key, value).await
    }
}

/// [`Store::set_compliance_setting`] on a given connection (inside an admin change).
pub(crate) async fn set_compliance_setting_on(
    conn: &mut Tx,
    key: &str,
    value: Option<&str>,
) -> Result<(), StoreError> {
    let conn = conn.conn();
    match value {
        Some(value) => {
            sqlx::query(
                "INSERT INTO compliance_settings (key, value) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )
            .bind(key)
            .bind(value)
            .execute(&mut *conn)
            .await?;
        }
        None => {
            sqlx::query("DELETE FROM compliance_settings WHERE key = $1")
                .bind(key)
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(())
}

/// A compliance setting read on a given connection.
pub(crate) async fn compliance_setting_on(
    conn: &mut Tx,
    key: &str,
) -> Result<Option<String>, StoreError> {
    let conn = conn.conn();
    Ok(
        sqlx::query_scalar("SELECT value FROM compliance_settings WHERE key = $1")
            .bind(key)
            .fetch_optional(&mut *conn)
            .await?,
    )
}

#[cfg(test)]
mod tests;
