//! SQL for skill revisions: candidates, wiki patterns, feedback as curators read it, the
//! IDs a proposal may cite, and the per-key rate limit windows of agents' writes.
//!
//! Lists are paged by keyset: a page holds at most [`MAX_PAGE`] rows and names the row to
//! continue after, so no request reads more than a page however long the list grows.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::Tx;
use super::{Store, StoreError, stamp};
use crate::model::Resource;

/// The IDs a proposal for one skill may cite.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownSources {
    pub feedback: BTreeSet<String>,
    pub sessions: BTreeSet<String>,
    pub patterns: BTreeSet<String>,
}

impl KnownSources {
    pub fn contains(&self, id: &str) -> bool {
        self.feedback.contains(id) || self.sessions.contains(id) || self.patterns.contains(id)
    }
}

/// Whether a rate-limit slot was reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    Reserved,
    /// The window is full; its oldest slot frees in `retry_in`.
    Refused {
        retry_in: Duration,
    },
}

/// Rows per page when the caller does not say.
pub const DEFAULT_PAGE: u32 = 50;
/// The most rows one page may hold (the curation tools' schemas name it too).
pub use crate::model::curation::MAX_PAGE;
/// The most wiki patterns a skill's readers get at once.
pub const MAX_PATTERNS: u32 = 100;

/// One page of a list and the cursor of the next (`None`: this page is the last).
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// The ID of the last row shown, to pass back as the cursor of the next page.
    pub next: Option<String>,
}

impl<T> Page<T> {
    /// `rows` fetched with a limit of `limit + 1`: the extra row only says there is more.
    fn of(mut rows: Vec<T>, limit: u32, id: impl Fn(&T) -> String) -> Self {
        let more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let next = more.then(|| rows.last().map(&id)).flatten();
        Self { items: rows, next }
    }
}

/// A page size within `1..=MAX_PAGE` (0 and `None` mean the default).
pub fn page_size(requested: Option<u32>) -> u32 {
    match requested {
        None | Some(0) => DEFAULT_PAGE,
        Some(n) => n.min(MAX_PAGE),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CandidateStatus {
    Pending,
    Approved,
    Rejected,
}

impl CandidateStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Rejected => "rejected",
        }
    }

    fn parse(text: &str) -> Result<Self, sqlx::Error> {
        match text {
            "pending" => Ok(Self::Pending),
            "approved" => Ok(Self::Approved),
            "rejected" => Ok(Self::Rejected),
            other => Err(sqlx::Error::Decode(
                format!("unknown candidate status `{other}`").into(),
            )),
        }
    }
}

/// Who proposed a candidate: an agent (its key name) or a console user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proposer {
    Agent(String),
    User(String),
}

impl Proposer {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Agent(_) => "agent",
            Self::User(_) => "user",
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Self::Agent(name) | Self::User(name) => name,
        }
    }
}

/// A candidate row.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateRecord {
    pub id: String,
    pub skill: String,
    pub base_version: u32,
    /// The proposed description; `None` keeps the base version's.
    pub description: Option<String>,
    pub instructions: String,
    pub note: String,
    pub sources: Vec<String>,
    pub evidence: Value,
    pub verdict: String,
    /// The gate's `GateOutcome` as JSON.
    pub verdict_explanation: Value,
    pub proposer: Proposer,
    pub status: CandidateStatus,
    pub decided_by: Option<String>,
    pub reason: Option<String>,
    pub decided_at: Option<String>,
    pub approved_version: Option<u32>,
    pub created_at: String,
    /// The proposed extra `SKILL.md` frontmatter; `None` keeps the base version's.
    pub frontmatter_extra: Option<serde_json::Map<String, Value>>,
    /// The proposed resources; `None` keeps the base version's.
    pub resources: Option<Vec<Resource>>,
    /// The uploaded `SKILL.md`, verbatim.
    pub skill_md: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternRecord {
    pub id: String,
    pub skill: String,
    pub name: String,
    pub content: String,
    pub sources: Vec<String>,
    pub created_by: String,
    pub created_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedbackRecord {
    pub id: String,
    pub skill: String,
    pub version: u32,
    pub rating: u8,
    pub comment: Option<String>,
    pub session_id: Option<String>,
    /// The agent key (agent feedback) or console user (human feedback).
    pub author: Option<String>,
    /// `general` or `requirement`.
    pub kind: String,
    pub at: String,
}

/// Human feedback written in the console.
#[derive(Debug, Clone)]
pub struct NewHumanFeedback<'a> {
    pub id: &'a str,
    pub skill: &'a str,
    pub version: u32,
    pub rating: u8,
    pub comment: &'a str,
    pub requirement: bool,
    pub author: &'a str,
    pub at: DateTime<Utc>,
}

fn json_list(text: &str) -> Result<Vec<String>, sqlx::Error> {
    serde_json::from_str(text)
        .map_err(|e| sqlx::Error::Decode(format!("stored source list is unreadable: {e}").into()))
}

fn json_value(text: Option<String>) -> Result<Value, sqlx::Error> {
    text.map_or(Ok(Value::Null), |t| {
        serde_json::from_str(&t)
            .map_err(|e| sqlx::Error::Decode(format!("stored JSON is unreadable: {e}").into()))
    })
}

fn optional_json<T: serde::de::DeserializeOwned>(
    text: Option<String>,
) -> Result<Option<T>, sqlx::Error> {
    text.map(|t| {
        serde_json::from_str(&t)
            .map_err(|e| sqlx::Error::Decode(format!("stored JSON is unreadable: {e}").into()))
    })
    .transpose()
}

fn version(row: &AnyRow, column: &str) -> Result<u32, sqlx::Error> {
    let v: i64 = row.try_get(column)?;
    u32::try_from(v).map_err(|_| sqlx::Error::Decode(format!("bad {column} {v}").into()))
}

fn candidate_from_row(row: &AnyRow) -> Result<CandidateRecord, sqlx::Error> {
    let proposer: String = row.try_get("proposer")?;
    let kind: String = row.try_get("proposer_kind")?;
    let approved: Option<i64> = row.try_get("approved_version")?;
    Ok(CandidateRecord {
        id: row.try_get("id")?,
        skill: row.try_get("skill")?,
        base_version: version(row, "base_version")?,
        description: row.try_get("description")?,
        instructions: row.try_get("instructions")?,
        note: row.try_get("note")?,
        sources: json_list(row.try_get("sources")?)?,
        evidence: json_value(row.try_get("evidence")?)?,
        verdict: row.try_get("verdict")?,
        verdict_explanation: json_value(Some(row.try_get("verdict_explanation")?))?,
        proposer: if kind == "user" {
            Proposer::User(proposer)
        } else {
            Proposer::Agent(proposer)
        },
        status: CandidateStatus::parse(row.try_get("status")?)?,
        decided_by: row.try_get("decided_by")?,
        reason: row.try_get("reason")?,
        decided_at: row.try_get("decided_at")?,
        approved_version: approved.and_then(|v| u32::try_from(v).ok()),
        created_at: row.try_get("created_at")?,
        frontmatter_extra: optional_json(row.try_get("frontmatter")?)?,
        resources: optional_json(row.try_get("resources")?)?,
        skill_md: row.try_get("skill_md")?,
    })
}

const CANDIDATE_COLUMNS: &str = "SELECT id, skill, base_version, description, instructions, note, sources, evidence, \
     verdict, verdict_explanation, proposer_kind, proposer, status, decided_by, reason, decided_at, \
     approved_version, created_at, frontmatter, resources, skill_md FROM skill_candidates";

impl Store {
    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn insert_human_feedback(&self, f: &NewHumanFeedback<'_>) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await?;
        insert_human_feedback_on(Tx::wrap(&mut conn), f).await
    }

    pub async fn get_candidate(&self, id: &str) -> Result<Option<CandidateRecord>, StoreError> {
        let row = sqlx::query(&format!("{CANDIDATE_COLUMNS} WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.as_ref().map(candidate_from_row).transpose()?)
    }

    /// A page of candidates, newest first, optionally of one status and/or one skill,
    /// continuing after candidate `before` (the previous page's `next`). An unknown
    /// cursor is [`StoreError::NotFound`].
    pub async fn list_candidates(
        &self,
        status: Option<CandidateStatus>,
        skill: Option<&str>,
        before: Option<&str>,
        limit: u32,
    ) -> Result<Page<CandidateRecord>, StoreError> {
        let limit = page_size(Some(limit));
        let cursor: Option<String> = match before {
            None => None,
            Some(id) => Some(
                sqlx::query_scalar("SELECT created_at FROM skill_candidates WHERE id = $1")
                    .bind(id)
                    .fetch_optional(self.pool())
                    .await?
                    .ok_or_else(|| {
                        StoreError::NotFound(format!("candidate `{id}` (the page cursor)"))
                    })?,
            ),
        };
        let rows = sqlx::query(&format!(
            "{CANDIDATE_COLUMNS} WHERE ($1 IS NULL OR status = $1) AND ($2 IS NULL OR skill = $2) \
             AND ($3 IS NULL OR created_at < $3 OR (created_at = $3 AND id < $4)) \
             ORDER BY created_at DESC, id DESC LIMIT $5"
        ))
        .bind(status.map(CandidateStatus::as_str))
        .bind(skill)
        .bind(cursor)
        .bind(before)
        .bind(i64::from(limit) + 1)
        .fetch_all(self.pool())
        .await?;
        let rows = rows
            .iter()
            .map(candidate_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Page::of(rows, limit, |c| c.id.clone()))
    }

    /// The candidate whose approval made `version` of `skill`, if one did.
    pub async fn candidate_approved_as(
        &self,
        skill: &str,
        version: u32,
    ) -> Result<Option<CandidateRecord>, StoreError> {
        let row = sqlx::query(&format!(
            "{CANDIDATE_COLUMNS} WHERE skill = $1 AND status = 'approved' AND approved_version = $2 LIMIT 1"
        ))
        .bind(skill)
        .bind(i64::from(version))
        .fetch_optional(self.pool())
        .await?;
        Ok(row.as_ref().map(candidate_from_row).transpose()?)
    }

    /// The first [`MAX_PATTERNS`] wiki patterns of `skill`, oldest first, and how many it
    /// has in all.
    pub async fn list_patterns(
        &self,
        skill: &str,
    ) -> Result<(Vec<PatternRecord>, u64), StoreError> {
        let rows = sqlx::query(
            "SELECT id, skill, name, content, sources, created_by, created_at FROM wiki_patterns \
             WHERE skill = $1 ORDER BY created_at, id LIMIT $2",
        )
        .bind(skill)
        .bind(i64::from(MAX_PATTERNS))
        .fetch_all(self.pool())
        .await?;
        let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM wiki_patterns WHERE skill = $1")
            .bind(skill)
            .fetch_one(self.pool())
            .await?;
        let patterns = rows
            .iter()
            .map(pattern_from_row)
            .collect::<Result<_, sqlx::Error>>()?;
        Ok((patterns, u64::try_from(total).unwrap_or(0)))
    }

    /// The patterns of `skill` among `ids` (a candidate's citations), in `ids` order.
    pub async fn patterns_by_ids(
        &self,
        skill: &str,
        ids: &[String],
    ) -> Result<Vec<PatternRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, skill, name, content, sources, created_by, created_at FROM wiki_patterns \
             WHERE skill = $1 AND id IN (SELECT value FROM json_each($2))",
        )
        .bind(skill)
        .bind(id_list(ids))
        .fetch_all(self.pool())
        .await?;
        let mut found = rows
            .iter()
            .map(pattern_from_row)
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        found.sort_by_key(|p| ids.iter().position(|id| *id == p.id));
        Ok(found)
    }

    /// A page of feedback on `skill` at or after `since` (all when `None`), oldest first,
    /// continuing after feedback `after` (the previous page's `next`). A cursor that is not
    /// feedback of this skill is [`StoreError::NotFound`].
    pub async fn list_feedback(
        &self,
        skill: &str,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<FeedbackRecord>, StoreError> {
        let limit = page_size(Some(limit));
        let cursor: Option<String> = match after {
            None => None,
            Some(id) => Some(
                sqlx::query_scalar("SELECT at FROM skill_feedback WHERE id = $1 AND skill = $2")
                    .bind(id)
                    .bind(skill)
                    .fetch_optional(self.pool())
                    .await?
                    .ok_or_else(|| {
                        StoreError::NotFound(format!(
                            "feedback `{id}` of skill `{skill}` (the page cursor)"
                        ))
                    })?,
            ),
        };
        let rows = sqlx::query(&format!(
            "{FEEDBACK_COLUMNS} WHERE skill = $1 AND ($2 IS NULL OR at >= $2) \
             AND ($3 IS NULL OR at > $3 OR (at = $3 AND id > $4)) ORDER BY at, id LIMIT $5"
        ))
        .bind(skill)
        .bind(since.map(stamp))
        .bind(cursor)
        .bind(after)
        .bind(i64::from(limit) + 1)
        .fetch_all(self.pool())
        .await?;
        let rows = rows
            .iter()
            .map(feedback_from_row)
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        Ok(Page::of(rows, limit, |f| f.id.clone()))
    }

    /// The feedback of `skill` among `ids` (a candidate's citations), in `ids` order.
    pub async fn feedback_by_ids(
        &self,
        skill: &str,
        ids: &[String],
    ) -> Result<Vec<FeedbackRecord>, StoreError> {
        let rows = sqlx::query(&format!(
            "{FEEDBACK_COLUMNS} WHERE skill = $1 AND id IN (SELECT value FROM json_each($2))"
        ))
        .bind(skill)
        .bind(id_list(ids))
        .fetch_all(self.pool())
        .await?;
        let mut found = rows
            .iter()
            .map(feedback_from_row)
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        found.sort_by_key(|f| ids.iter().position(|id| *id == f.id));
        Ok(found)
    }

    /// Explicit requirements raised against `base_version` of `skill` or later: the ones a
    /// candidate built on that version still has to answer.
    pub async fn pending_requirements(
        &self,
        skill: &str,
        base_version: u32,
    ) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM skill_feedback WHERE skill = $1 AND kind = 'requirement' AND version >= $2 \
             ORDER BY at, rowid",
        )
        .bind(skill)
        .bind(i64::from(base_version))
        .fetch_all(self.pool())
        .await?)
    }

    /// Which of `cited` a proposal for `skill` may cite: its feedback, the sessions that
    /// learned it or rated it, and its wiki patterns. Reads only the cited IDs, so the cost
    /// does not grow with the skill's history.
    pub async fn known_sources(
        &self,
        skill: &str,
        cited: &[&str],
    ) -> Result<KnownSources, StoreError> {
        let ids = serde_json::to_string(cited).expect("strings serialize");
        let feedback: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM skill_feedback WHERE skill = $1 AND id IN (SELECT value FROM json_each($2))",
        )
        .bind(skill)
        .bind(&ids)
        .fetch_all(self.pool())
        .await?;
        let sessions: Vec<String> = sqlx::query_scalar(
            "SELECT session_id FROM skill_feedback WHERE skill = $1 \
               AND session_id IN (SELECT value FROM json_each($2)) \
             UNION SELECT g.id FROM governance_sessions g \
             WHERE g.id IN (SELECT value FROM json_each($2)) AND EXISTS ( \
               SELECT 1 FROM json_each(g.state, '$.learned') AS l, json_each(l.value, '$.skills') AS s \
               WHERE json_extract(s.value, '$.skill') = $1)",
        )
        .bind(skill)
        .bind(&ids)
        .fetch_all(self.pool())
        .await?;
        let patterns: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM wiki_patterns WHERE skill = $1 AND id IN (SELECT value FROM json_each($2))",
        )
        .bind(skill)
        .bind(&ids)
        .fetch_all(self.pool())
        .await?;
        Ok(KnownSources {
            feedback: feedback.into_iter().collect(),
            sessions: sessions.into_iter().collect(),
            patterns: patterns.into_iter().collect(),
        })
    }

    /// Reserves one slot of the `action` rate limit (`max` per `window`) for `subject` (an
    /// agent key) at `now`, in one statement that counts the slots of the last `window`
    /// and inserts only when fewer than `max` are taken. The count and the insert run
    /// under the write lock ([`Store::begin_write`]), so the count is exact whichever
    /// process or replica asks.
    pub async fn reserve_rate_slot(
        &self,
        subject: &str,
        (action, max, window): (&str, u32, Duration),
        now: DateTime<Utc>,
    ) -> Result<Slot, StoreError> {
        let now_ms = now.timestamp_millis();
        let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
        let since = now_ms.saturating_sub(window_ms);
        let (mut tx, _held) = self.begin_write().await?;
        let reserved = sqlx::query(
            "INSERT INTO rate_limit_slots (subject, action, at_ms) SELECT $1, $2, $3 \
             WHERE (SELECT COUNT(*) FROM rate_limit_slots \
                    WHERE subject = $1 AND action = $2 AND at_ms > $4) < $5",
        )
        .bind(subject)
        .bind(action)
        .bind(now_ms)
        .bind(since)
        .bind(i64::from(max))
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        // Slots out of the window count for nothing, whoever took them: the table holds at
        // most `max` rows a subject that asked within the window, and none of the others.
        sqlx::query("DELETE FROM rate_limit_slots WHERE action = $1 AND at_ms <= $2")
            .bind(action)
            .bind(since)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        if reserved {
            return Ok(Slot::Reserved);
        }
        // Only for the message: the refusal itself was decided by the statement above.
        let oldest: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(at_ms) FROM rate_limit_slots WHERE subject = $1 AND action = $2 AND at_ms > $3",
        )
        .bind(subject)
        .bind(action)
        .bind(since)
        .fetch_one(self.pool())
        .await?;
        let frees_at = oldest.unwrap_or(now_ms).saturating_add(window_ms);
        let retry_in = u64::try_from(frees_at.saturating_sub(now_ms)).unwrap_or(0);
        Ok(Slot::Refused {
            retry_in: std::time::Duration::from_millis(retry_in),
        })
    }
}

/// IDs as the JSON array `json_each` reads.
fn id_list(ids: &[String]) -> String {
    serde_json::to_string(ids).expect("strings serialize")
}

fn pattern_from_row(row: &AnyRow) -> Result<PatternRecord, sqlx::Error> {
    Ok(PatternRecord {
        id: row.try_get("id")?,
        skill: row.try_get("skill")?,
        name: row.try_get("name")?,
        content: row.try_get("content")?,
        sources: json_list(row.try_get("sources")?)?,
        created_by: row.try_get("created_by")?,
        created_at: row.try_get("created_at")?,
    })
}

const FEEDBACK_COLUMNS: &str = "SELECT id, skill, version, rating, comment, session_id, \
     COALESCE(author, key_name) AS author, kind, at FROM skill_feedback";

fn feedback_from_row(row: &AnyRow) -> Result<FeedbackRecord, sqlx::Error> {
    let rating: i64 = row.try_get("rating")?;
    Ok(FeedbackRecord {
        id: row.try_get("id")?,
        skill: row.try_get("skill")?,
        version: version(row, "version")?,
        rating: u8::try_from(rating).unwrap_or(0),
        comment: row.try_get("comment")?,
        session_id: row.try_get("session_id")?,
        author: row.try_get("author")?,
        kind: row.try_get("kind")?,
        at: row.try_get("at")?,
    })
}

pub(crate) async fn insert_candidate_on(
    conn: &mut Tx,
    c: &CandidateRecord,
) -> Result<(), StoreError> {
    let conn = conn.conn();
    sqlx::query(
        "INSERT INTO skill_candidates (id, skill, base_version, description, instructions, note, sources, \
         evidence, verdict, verdict_explanation, proposer_kind, proposer, status, created_at, \
         frontmatter, resources, skill_md) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'pending', $13, $14, $15, $16)",
    )
    .bind(&c.id)
    .bind(&c.skill)
    .bind(i64::from(c.base_version))
    .bind(&c.description)
    .bind(&c.instructions)
    .bind(&c.note)
    .bind(serde_json::to_string(&c.sources).expect("strings serialize"))
    .bind((!c.evidence.is_null()).then(|| c.evidence.to_string()))
    .bind(&c.verdict)
    .bind(c.verdict_explanation.to_string())
    .bind(c.proposer.kind())
    .bind(c.proposer.name())
    .bind(&c.created_at)
    .bind(c.frontmatter_extra.as_ref().map(|m| Value::Object(m.clone()).to_string()))
    .bind(
        c.resources
            .as_ref()
            .map(|r| serde_json::to_string(r).expect("resources serialize")),
    )
    .bind(&c.skill_md)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Records the decision on a pending candidate. False when it was no longer pending
/// (someone else decided first), in which case nothing changed.
pub(crate) async fn decide_candidate_on(
    conn: &mut Tx,
    id: &str,
    status: CandidateStatus,
    decided_by: &str,
    reason: &str,
    approved_version: Option<u32>,
    at: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let conn = conn.conn();
    let done = sqlx::query(
        "UPDATE skill_candidates SET status = $1, decided_by = $2, reason = $3, decided_at = $4, \
         approved_version = $5 WHERE id = $6 AND status = 'pending'",
    )
    .bind(status.as_str())
    .bind(decided_by)
    .bind(reason)
    .bind(stamp(at))
    .bind(approved_version.map(i64::from))
    .bind(id)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub(crate) async fn insert_pattern_on(conn: &mut Tx, p: &PatternRecord) -> Result<(), StoreError> {
    let conn = conn.conn();
    sqlx::query(
        "INSERT INTO wiki_patterns (id, skill, name, content, sources, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&p.id)
    .bind(&p.skill)
    .bind(&p.name)
    .bind(&p.content)
    .bind(serde_json::to_string(&p.sources).expect("strings serialize"))
    .bind(&p.created_by)
    .bind(&p.created_at)
    .execute(&mut *conn)
    .await
    .map_err(|e| match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::Conflict(format!(
            "skill `{}` already has a pattern named `{}`",
            p.skill, p.name
        )),
        _ => StoreError::Sqlx(e),
    })?;
    Ok(())
}

pub(crate) async fn insert_human_feedback_on(
    conn: &mut Tx,
    f: &NewHumanFeedback<'_>,
) -> Result<(), StoreError> {
    let conn = conn.conn();
    sqlx::query(
        "INSERT INTO skill_feedback (id, skill, version, rating, comment, kind, author, at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(f.id)
    .bind(f.skill)
    .bind(i64::from(f.version))
    .bind(i64::from(f.rating))
    .bind(f.comment)
    .bind(if f.requirement {
        "requirement"
    } else {
        "general"
    })
    .bind(f.author)
    .bind(stamp(f.at))
    .execute(&mut *conn)
    .await?;
    Ok(())
}
