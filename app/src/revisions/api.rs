//! Server functions of skill revisions: the candidate review queue, decisions, wiki
//! patterns, feedback (agents' and reviewers'), SKILL.md uploads and version restores.
//!
//! Reading needs the viewer role; deciding, writing feedback and uploading need reviewer;
//! restoring an old version needs admin. Every check runs on the server.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::shared::ConsoleError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateRow {
    pub id: String,
    pub skill: String,
    pub base_version: u32,
    pub verdict: String,
    pub status: String,
    pub proposer: String,
    pub proposer_kind: String,
    pub created_at: String,
    /// Pending and based on a version that is no longer current.
    pub stale: bool,
}

pub use crate::catalog::DiffLine;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateCheckRow {
    pub condition: String,
    pub passed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CitedSource {
    pub id: String,
    /// `feedback`, `pattern`, `session` or `unknown`.
    pub kind: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceRow {
    pub case: String,
    pub incumbent: String,
    pub candidate: String,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateDetail {
    pub row: CandidateRow,
    pub current_version: u32,
    pub note: String,
    pub description: Option<String>,
    /// The extra `SKILL.md` frontmatter an upload proposes, as JSON (`None`: kept as is).
    pub frontmatter: Option<String>,
    /// The resources a zip upload proposes, `name: title` (`None`: kept as is).
    pub resources: Option<Vec<String>>,
    pub diff: Vec<DiffLine>,
    pub sources: Vec<CitedSource>,
    pub evidence_kind: String,
    pub evidence: Vec<EvidenceRow>,
    pub verdict_summary: String,
    pub verdict_checks: Vec<GateCheckRow>,
    pub decided_by: Option<String>,
    pub reason: Option<String>,
    pub approved_version: Option<u32>,
    /// Whether the signed-in user may decide it now (reviewer, not the proposer, pending).
    pub can_decide: bool,
    /// Why not, when they may not.
    pub cannot_decide: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternRow {
    pub id: String,
    pub name: String,
    pub content: String,
    pub sources: Vec<String>,
    pub created_by: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedbackRow {
    pub id: String,
    pub version: u32,
    pub rating: u8,
    pub comment: Option<String>,
    pub kind: String,
    pub author: Option<String>,
    pub session_id: Option<String>,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillRevisionsData {
    pub skill: String,
    pub current_version: u32,
    pub versions: Vec<u32>,
    pub patterns: Vec<PatternRow>,
    /// All patterns of the skill; `patterns` holds the first of them.
    pub patterns_total: u64,
    /// One page of feedback, oldest first.
    pub feedback: Vec<FeedbackRow>,
    /// The cursor of the next feedback page (`?feedback_after=`), when there is one.
    pub feedback_next: Option<String>,
    /// Whether this feedback page is a later one (a link back to the first is shown).
    pub feedback_paged: bool,
    /// One page of candidates, newest first.
    pub candidates: Vec<CandidateRow>,
    /// The cursor of the next (older) candidates page (`?candidates_before=`).
    pub candidates_next: Option<String>,
    pub candidates_paged: bool,
    pub can_review: bool,
    pub can_restore: bool,
    /// What the bundle upload (a plain form post) left for this page.
    pub notice: Option<crate::components::flash::Notice>,
}

/// Rows per page of the console's candidate and feedback lists.
pub const PAGE_ROWS: u32 = 50;

/// One page of the review queue, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidatesPage {
    pub rows: Vec<CandidateRow>,
    /// The cursor of the next (older) page (`?before=`), when there is one.
    pub next: Option<String>,
}

#[server(prefix = "/console/api")]
pub async fn list_candidates(
    all: bool,
    before: Option<String>,
) -> Result<CandidatesPage, ConsoleError> {
    use skillgate_core::store::revisions::CandidateStatus;
    use skillgate_core::users::ConsoleRole;
    ssr::require_role(ConsoleRole::Viewer).await?;
    let revisions = ssr::revisions();
    let status = (!all).then_some(CandidateStatus::Pending);
    let page = revisions
        .list_candidates(status, None, ssr::cursor(&before), PAGE_ROWS)
        .await
        .map_err(ssr::error)?;
    Ok(CandidatesPage {
        rows: ssr::rows(&revisions, page.items).await?,
        next: page.next,
    })
}

#[server(prefix = "/console/api")]
pub async fn get_candidate(id: String) -> Result<Option<CandidateDetail>, ConsoleError> {
    use skillgate_core::revisions::RevisionError;
    use skillgate_core::users::ConsoleRole;
    let user = ssr::require_role(ConsoleRole::Viewer).await?;
    let revisions = ssr::revisions();
    match revisions.candidate(&id).await {
        Ok(view) => Ok(Some(ssr::detail(&revisions, view, &user).await?)),
        Err(RevisionError::NotFound(_)) => Ok(None),
        Err(e) => Err(ssr::error(e)),
    }
}

/// Approves or rejects a candidate; `decision` is `approve` or `reject`.
#[server(prefix = "/console/api")]
pub async fn decide_candidate(
    id: String,
    decision: String,
    reason: String,
) -> Result<String, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = ssr::require_role(ConsoleRole::Reviewer).await?;
    let revisions = ssr::revisions();
    match decision.as_str() {
        "approve" => {
            let version = revisions
                .approve(&id, &user.name, &reason)
                .await
                .map_err(ssr::error)?;
            Ok(format!(
                "Approved: version {} of {} is now current.",
                version.version, version.skill.slug
            ))
        }
        "reject" => {
            revisions
                .reject(&id, &user.name, &reason)
                .await
                .map_err(ssr::error)?;
            Ok("Rejected.".to_owned())
        }
        other => Err(ConsoleError::Invalid(format!(
            "unknown decision `{other}`: approve or reject"
        ))),
    }
}

#[server(prefix = "/console/api")]
pub async fn skill_revisions(
    skill: String,
    feedback_after: Option<String>,
    candidates_before: Option<String>,
) -> Result<Option<SkillRevisionsData>, ConsoleError> {
    use skillgate_core::revisions::RevisionError;
    use skillgate_core::users::ConsoleRole;
    let user = ssr::require_role(ConsoleRole::Viewer).await?;
    let revisions = ssr::revisions();
    let current = match revisions.get_skill(&skill, None).await {
        Ok(current) => current,
        Err(RevisionError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(ssr::error(e)),
    };
    let slug = current.skill.slug.clone();
    let versions = revisions
        .store()
        .skill_versions(&slug)
        .await
        .map_err(ssr::internal)?
        .into_iter()
        .map(|v| v.version)
        .collect();
    let (patterns, patterns_total) = revisions.list_patterns(&skill).await.map_err(ssr::error)?;
    let patterns = patterns
        .into_iter()
        .map(|p| PatternRow {
            id: p.id,
            name: p.name,
            content: p.content,
            sources: p.sources,
            created_by: p.created_by,
        })
        .collect();
    let feedback_after = ssr::cursor(&feedback_after);
    let feedback = revisions
        .list_feedback(&skill, None, feedback_after, PAGE_ROWS)
        .await
        .map_err(ssr::error)?;
    let feedback_next = feedback.next;
    let feedback = feedback
        .items
        .into_iter()
        .map(|f| FeedbackRow {
            id: f.id,
            version: f.version,
            rating: f.rating,
            comment: f.comment,
            kind: f.kind,
            author: f.author,
            session_id: f.session_id,
            at: f.at,
        })
        .collect();
    let candidates_before = ssr::cursor(&candidates_before);
    let candidates = revisions
        .list_candidates(None, Some(&skill), candidates_before, PAGE_ROWS)
        .await
        .map_err(ssr::error)?;
    Ok(Some(SkillRevisionsData {
        skill,
        current_version: current.version,
        versions,
        patterns,
        patterns_total,
        feedback,
        feedback_next,
        feedback_paged: feedback_after.is_some(),
        candidates: ssr::rows(&revisions, candidates.items).await?,
        candidates_next: candidates.next,
        candidates_paged: candidates_before.is_some(),
        can_review: user.role.allows(ConsoleRole::Reviewer),
        can_restore: user.role.allows(ConsoleRole::Admin),
        notice: crate::components::flash::ssr::take().await?,
    }))
}

/// A reviewer's feedback; `kind` is `general` or `requirement`.
#[server(prefix = "/console/api")]
pub async fn add_feedback(
    skill: String,
    rating: u8,
    comment: String,
    kind: String,
) -> Result<String, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = ssr::require_role(ConsoleRole::Reviewer).await?;
    let requirement = match kind.as_str() {
        "general" => false,
        "requirement" => true,
        other => {
            return Err(ConsoleError::Invalid(format!(
                "unknown feedback kind `{other}`: general or requirement"
            )));
        }
    };
    let id = ssr::revisions()
        .add_human_feedback(&skill, rating, &comment, requirement, &user.name)
        .await
        .map_err(ssr::error)?;
    Ok(format!("Feedback {id} recorded."))
}

/// A candidate from a pasted `SKILL.md` (Agent Skills) and an optional WikiSkill
/// `provenance.json`. A file (a `SKILL.md` or a zip bundle) is uploaded to the plain form
/// handler `POST /console/skills/{skill}/bundle` of the server instead.
#[server(prefix = "/console/api")]
pub async fn upload_skill_md(
    skill: String,
    skill_md: String,
    provenance: String,
) -> Result<String, ConsoleError> {
    use skillgate_core::revisions::Proposal;
    use skillgate_core::store::revisions::Proposer;
    use skillgate_core::users::ConsoleRole;
    let user = ssr::require_role(ConsoleRole::Reviewer).await?;
    let revisions = ssr::revisions();
    let current = revisions
        .get_skill(&skill, None)
        .await
        .map_err(ssr::error)?;
    let mut proposal = Proposal::from_upload(&skill, current.version, &skill_md, Some(&provenance))
        .map_err(ssr::error)?;
    // An admin may paste a skill they wrote without citing sources; a reviewer cites them.
    if user.role.allows(ConsoleRole::Admin) {
        proposal.authorship = skillgate_core::revisions::Authorship::Admin;
    }
    let candidate = revisions
        .propose(proposal, Proposer::User(user.name))
        .await
        .map_err(ssr::error)?;
    Ok(format!(
        "Candidate {} recorded with verdict {}; another reviewer decides it.",
        candidate.id, candidate.verdict
    ))
}

#[server(prefix = "/console/api")]
pub async fn restore_version(skill: String, version: u32) -> Result<String, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = ssr::require_role(ConsoleRole::Admin).await?;
    ssr::revisions()
        .restore(&skill, version, &user.name)
        .await
        .map_err(ssr::error)?;
    Ok(format!("Version {version} of {skill} is current again."))
}

#[cfg(feature = "ssr")]
mod ssr {
    use serde_json::Value;
    use similar::{ChangeTag, TextDiff};
    use skillgate_core::revisions::{CandidateView, RevisionError, Revisions};
    use skillgate_core::store::StoreError;
    use skillgate_core::store::revisions::{CandidateRecord, CandidateStatus, Proposer};
    use skillgate_core::users::{ConsoleRole, ConsoleUser};

    use super::*;
    pub use crate::shared::ssr::internal;

    pub async fn require_role(role: ConsoleRole) -> Result<ConsoleUser, ConsoleError> {
        crate::shared::ssr::require(role).await
    }

    /// The revisions service the server provides next to the console context.
    pub fn revisions() -> Revisions {
        expect_context::<Revisions>()
    }

    /// A page cursor from the query string; an empty one means the first page.
    pub fn cursor(value: &Option<String>) -> Option<&str> {
        value.as_deref().map(str::trim).filter(|v| !v.is_empty())
    }

    /// Refusals the reviewer can act on become sentences; failures stay on the server.
    pub fn error(e: RevisionError) -> ConsoleError {
        match e {
            RevisionError::Store(
                e @ (StoreError::Sqlx(_) | StoreError::Migrate(_) | StoreError::Open { .. }),
            ) => internal(e),
            RevisionError::Audit(e) => internal(e),
            other => ConsoleError::Invalid(other.to_string()),
        }
    }

    async fn current_versions(
        revisions: &Revisions,
    ) -> Result<std::collections::HashMap<String, u32>, ConsoleError> {
        Ok(revisions
            .store()
            .list_skills()
            .await
            .map_err(internal)?
            .into_iter()
            .map(|s| (s.value.skill.slug.to_string(), s.value.version))
            .collect())
    }

    fn row(c: &CandidateRecord, current: Option<u32>) -> CandidateRow {
        CandidateRow {
            id: c.id.clone(),
            skill: c.skill.clone(),
            base_version: c.base_version,
            verdict: c.verdict.clone(),
            status: c.status.as_str().to_owned(),
            proposer: c.proposer.name().to_owned(),
            proposer_kind: c.proposer.kind().to_owned(),
            created_at: c.created_at.clone(),
            stale: c.status == CandidateStatus::Pending
                && current.is_some_and(|v| v != c.base_version),
        }
    }

    pub async fn rows(
        revisions: &Revisions,
        candidates: Vec<CandidateRecord>,
    ) -> Result<Vec<CandidateRow>, ConsoleError> {
        let current = current_versions(revisions).await?;
        Ok(candidates
            .iter()
            .map(|c| row(c, current.get(&c.skill).copied()))
            .collect())
    }

    fn number(v: &Value) -> String {
        match v {
            Value::Null => String::new(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }

    fn evidence_rows(evidence: &Value) -> (String, Vec<EvidenceRow>) {
        if let Some(pairs) = evidence.get("pairs").and_then(Value::as_array) {
            let rows = pairs
                .iter()
                .map(|p| {
                    let mut detail = Vec::new();
                    if let Some(r) = p.get("regressions").and_then(Value::as_array)
                        && !r.is_empty()
                    {
                        detail.push(format!(
                            "regressions: {}",
                            r.iter().map(number).collect::<Vec<_>>().join("; ")
                        ));
                    }
                    if let Some(checks) = p.get("requirement_checks").and_then(Value::as_array) {
                        for c in checks {
                            detail.push(format!(
                                "{} {}: {}",
                                number(&c["source"]),
                                if c["fulfilled"] == Value::Bool(true) {
                                    "fulfilled"
                                } else {
                                    "not fulfilled"
                                },
                                number(&c["evidence"])
                            ));
                        }
                    }
                    EvidenceRow {
                        case: number(&p["case_id"]),
                        incumbent: String::new(),
                        candidate: number(&p["verdict"]),
                        detail: detail.join(" · "),
                    }
                })
                .collect();
            return ("paired".into(), rows);
        }
        if evidence.get("direction").is_some() {
            let mut rows = vec![EvidenceRow {
                case: "overall score".into(),
                incumbent: number(&evidence["incumbent_score"]),
                candidate: number(&evidence["candidate_score"]),
                detail: format!(
                    "{}, min_improvement {}",
                    number(&evidence["direction"]),
                    number(&evidence["min_improvement"])
                ),
            }];
            if let Some(tasks) = evidence.get("tasks").and_then(Value::as_array) {
                rows.extend(tasks.iter().map(|t| EvidenceRow {
                    case: number(&t["id"]),
                    incumbent: number(&t["incumbent"]),
                    candidate: number(&t["candidate"]),
                    detail: String::new(),
                }));
            }
            return ("numeric".into(), rows);
        }
        if evidence.get("no_action").is_some() {
            return ("no action".into(), Vec::new());
        }
        ("none".into(), Vec::new())
    }

    pub async fn detail(
        revisions: &Revisions,
        view: CandidateView,
        user: &ConsoleUser,
    ) -> Result<CandidateDetail, ConsoleError> {
        let stale = view.is_stale();
        let c = &view.candidate;
        let base_text = view
            .base
            .as_ref()
            .map(|b| b.skill.instructions.clone())
            .unwrap_or_default();
        // Both sides end with a newline, so an unchanged last line does not show as changed.
        let (old, new) = (
            format!("{}\n", base_text.trim_end()),
            format!("{}\n", c.instructions.trim_end()),
        );
        let diff = TextDiff::from_lines(&old, &new)
            .iter_all_changes()
            .map(|change| DiffLine {
                tag: match change.tag() {
                    ChangeTag::Equal => "equal",
                    ChangeTag::Insert => "insert",
                    ChangeTag::Delete => "delete",
                }
                .to_owned(),
                text: change.value().trim_end_matches('\n').to_owned(),
            })
            .collect();
        // Only the cited rows: a candidate page reads what it shows, however much
        // feedback the skill has.
        let feedback = revisions
            .store()
            .feedback_by_ids(&c.skill, &c.sources)
            .await
            .map_err(internal)?;
        let patterns = revisions
            .store()
            .patterns_by_ids(&c.skill, &c.sources)
            .await
            .map_err(internal)?;
        let sources = c
            .sources
            .iter()
            .map(|id| {
                if let Some(f) = feedback.iter().find(|f| &f.id == id) {
                    CitedSource {
                        id: id.clone(),
                        kind: if f.kind == "requirement" {
                            "requirement".into()
                        } else {
                            "feedback".into()
                        },
                        text: format!(
                            "{}/5 on v{} by {}: {}",
                            f.rating,
                            f.version,
                            f.author.as_deref().unwrap_or("unknown"),
                            f.comment.as_deref().unwrap_or("(no comment)")
                        ),
                    }
                } else if let Some(p) = patterns.iter().find(|p| &p.id == id) {
                    CitedSource {
                        id: id.clone(),
                        kind: "pattern".into(),
                        text: format!("{}: {}", p.name, p.content),
                    }
                } else {
                    CitedSource {
                        id: id.clone(),
                        kind: "session".into(),
                        text: "a governance session that used this skill".into(),
                    }
                }
            })
            .collect();
        let (evidence_kind, evidence) = evidence_rows(&c.evidence);
        let explanation = &c.verdict_explanation;
        let verdict_checks = explanation["checks"]
            .as_array()
            .map(|checks| {
                checks
                    .iter()
                    .map(|ch| GateCheckRow {
                        condition: number(&ch["condition"]),
                        passed: ch["passed"] == Value::Bool(true),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let cannot_decide = if c.status != CandidateStatus::Pending {
            Some(format!("This candidate was {}.", c.status.as_str()))
        } else if !user.role.allows(ConsoleRole::Reviewer) {
            Some("Deciding needs the reviewer console role.".to_owned())
        } else if c.proposer == Proposer::User(user.name.clone()) {
            Some("You proposed this candidate, so someone else must decide it.".to_owned())
        } else {
            None
        };
        Ok(CandidateDetail {
            row: row(c, Some(view.current_version)),
            current_version: view.current_version,
            note: c.note.clone(),
            description: c.description.clone(),
            frontmatter: c.frontmatter_extra.as_ref().map(|extra| {
                if extra.is_empty() {
                    "(none)".to_owned()
                } else {
                    serde_json::to_string_pretty(extra).unwrap_or_default()
                }
            }),
            resources: c.resources.as_ref().map(|resources| {
                resources
                    .iter()
                    .map(|r| format!("{}: {}", r.name, r.title))
                    .collect()
            }),
            diff,
            sources,
            evidence_kind,
            evidence,
            verdict_summary: number(&explanation["summary"]),
            verdict_checks,
            decided_by: c.decided_by.clone(),
            reason: c.reason.clone(),
            approved_version: c.approved_version,
            can_decide: cannot_decide.is_none(),
            cannot_decide,
        })
        .map(|mut d| {
            d.row.stale = stale;
            d
        })
    }
}
