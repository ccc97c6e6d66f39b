//! A skill's revisions page: its versions, wiki patterns, feedback and candidates, a
//! reviewer's feedback, and an admin's restore of an old version.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use super::CandidateRow;
#[cfg(feature = "ssr")]
use super::{PAGE_ROWS, ssr};
use crate::shared::ConsoleError;

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
