//! The review queue: candidates listed, read with their diff, evidence and gate verdict,
//! decided, and proposed from a pasted `SKILL.md`.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::PAGE_ROWS;
use super::{CandidateRow, DiffLine};
use crate::shared::ConsoleError;

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

#[cfg(feature = "ssr")]
mod ssr {
    use serde_json::Value;
    use similar::{ChangeTag, TextDiff};
    use skillgate_core::revisions::{CandidateView, Revisions};
    use skillgate_core::store::revisions::{CandidateStatus, Proposer};
    use skillgate_core::users::{ConsoleRole, ConsoleUser};

    use super::*;
    pub use crate::revisions::api::ssr::*;

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
