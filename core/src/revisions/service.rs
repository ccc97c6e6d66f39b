//! The revisions service: propose, approve, reject and restore skill versions, add wiki
//! patterns and human feedback. Every change is audited; approval swaps the catalog
//! snapshot so the next `learn` serves the new version while sessions in flight keep the
//! versions they learned.
//!
//! This file holds the service, its error and its reads; `proposal` what a proposal is,
//! `propose` the recording of candidates, patterns and feedback, `decide` the decisions.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::bundle::BundleError;
use super::citations::CitationError;
use super::evidence::EvidenceError;
use super::limits::{RateLimit, Slot};
use super::skill_md::SkillMdError;
use crate::admin::{AdminError, AdminService};
use crate::audit::AuditError;
use crate::model::SkillVersion;
use crate::slug::Slug;
use crate::store::revisions::{
    CandidateRecord, CandidateStatus, FeedbackRecord, Page, PatternRecord,
};
use crate::store::{Store, StoreError};

mod decide;
mod proposal;
mod propose;

pub use proposal::{ADMIN_WITHOUT_EVIDENCE, Authorship, Proposal};

#[derive(Debug, thiserror::Error)]
pub enum RevisionError {
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Citation(#[from] CitationError),
    #[error("evidence is not usable: {0}")]
    Evidence(#[from] EvidenceError),
    #[error("SKILL.md: {0}")]
    SkillMd(#[from] SkillMdError),
    #[error(transparent)]
    Bundle(#[from] BundleError),
    #[error("you proposed this candidate, so someone else must decide it")]
    OwnProposal,
    #[error(
        "this candidate is stale: it is based on version {base} but version {current} is current; propose it again on the current version"
    )]
    Stale { base: u32, current: u32 },
    #[error("this candidate was already {0}")]
    AlreadyDecided(&'static str),
    #[error("a reason is required")]
    ReasonRequired,
    /// A skill no role of the caller's scope includes; a skill that does not exist reads
    /// the same, so a refusal tells nothing about skills outside the scope.
    #[error("there is no skill `{0}` in your scope")]
    OutOfScope(String),
    /// The caller's governance session is missing or not theirs: the curator tools cannot
    /// tell which skills the caller may read.
    #[error("curator tools need the caller's own governance session")]
    NoSession,
    #[error("{message}")]
    RateLimited { message: String, retry_in: Duration },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Audit(#[from] AuditError),
}

impl From<AdminError> for RevisionError {
    fn from(error: AdminError) -> Self {
        match error {
            AdminError::Conflict(m) => Self::Store(StoreError::Conflict(m)),
            AdminError::NotFound(m) => Self::Store(StoreError::NotFound(m)),
            AdminError::Invalid(e) => Self::Store(StoreError::Invalid(e)),
            AdminError::Store(e) => Self::Store(e),
            AdminError::Audit(e) => Self::Audit(e),
            other => Self::Invalid(other.to_string()),
        }
    }
}

/// A candidate with what the review page needs besides the row.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateView {
    pub candidate: CandidateRecord,
    pub current_version: u32,
    pub base: Option<SkillVersion>,
}

impl CandidateView {
    /// Pending and based on a version that is no longer current.
    pub fn is_stale(&self) -> bool {
        self.candidate.status == CandidateStatus::Pending
            && self.candidate.base_version != self.current_version
    }
}

/// The revision workflow. Every record it writes (a candidate, a decision, a pattern, a
/// reviewer's feedback) commits with its `admin_change` event through the admin door, and
/// an approval's new version swaps the live catalog there too.
#[derive(Clone)]
pub struct Revisions {
    store: Store,
    admin: Arc<AdminService>,
}

impl Revisions {
    pub fn new(admin: Arc<AdminService>) -> Self {
        Self {
            store: admin.store().clone(),
            admin,
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The current version number and the store revision of `skill`.
    async fn head(&self, skill: &str) -> Result<(SkillVersion, i64), RevisionError> {
        self.store
            .list_skills()
            .await?
            .into_iter()
            .find(|s| s.value.skill.slug.as_str() == skill)
            .map(|s| (s.value, s.revision))
            .ok_or_else(|| RevisionError::NotFound(format!("skill `{skill}`")))
    }

    /// A stored version of `skill`; the current one when `version` is `None`.
    pub async fn get_skill(
        &self,
        skill: &str,
        version: Option<u32>,
    ) -> Result<SkillVersion, RevisionError> {
        let (current, _) = self.head(skill).await?;
        let Some(version) = version else {
            return Ok(current);
        };
        let slug = Slug::parse(skill).map_err(|e| RevisionError::Invalid(e.to_string()))?;
        self.store
            .skill_versions(&slug)
            .await?
            .into_iter()
            .find(|v| v.version == version)
            .ok_or_else(|| RevisionError::NotFound(format!("version {version} of skill `{skill}`")))
    }

    /// A page of feedback on `skill`, oldest first, after feedback `after`.
    pub async fn list_feedback(
        &self,
        skill: &str,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<FeedbackRecord>, RevisionError> {
        self.head(skill).await?;
        Ok(self.store.list_feedback(skill, since, after, limit).await?)
    }

    /// The first patterns of `skill` (at most [`crate::store::revisions::MAX_PATTERNS`])
    /// and how many it has.
    pub async fn list_patterns(
        &self,
        skill: &str,
    ) -> Result<(Vec<PatternRecord>, u64), RevisionError> {
        Ok(self.store.list_patterns(skill).await?)
    }

    /// The skills of the roles `scope` includes, as the live catalog has them: what a
    /// curator of that scope may read and change.
    pub fn skills_in_scope(&self, scope: &str) -> BTreeSet<String> {
        let catalog = self.admin.live();
        catalog
            .roles_in_scope(scope)
            .iter()
            .flat_map(|role| role.skills.iter().map(|s| s.to_string()))
            .collect()
    }

    /// The scope of the governance session `session_id`, which must be `agent`'s: how the
    /// curator tools learn the caller's reach from what the gateway passes them.
    pub async fn caller_scope(&self, agent: &str, session_id: &str) -> Result<Slug, RevisionError> {
        if session_id.is_empty() {
            return Err(RevisionError::NoSession);
        }
        match self.store.load_session(session_id).await? {
            Some(session) if session.key_name == agent => Ok(session.view.scope),
            _ => Err(RevisionError::NoSession),
        }
    }

    /// Refuses `skill` unless a role of `scope` includes it.
    pub fn check_reach(&self, scope: &str, skill: &str) -> Result<(), RevisionError> {
        if self.skills_in_scope(scope).contains(skill) {
            Ok(())
        } else {
            Err(RevisionError::OutOfScope(skill.to_owned()))
        }
    }

    /// Takes one slot of `limit` for the agent key `agent`, or refuses saying when to retry.
    pub async fn reserve_slot(&self, agent: &str, limit: &RateLimit) -> Result<(), RevisionError> {
        match limit
            .reserve(&self.store, &super::limits::key_subject(agent), Utc::now())
            .await?
        {
            Slot::Reserved => Ok(()),
            Slot::Refused { retry_in } => Err(RevisionError::RateLimited {
                message: limit.refusal(retry_in),
                retry_in,
            }),
        }
    }

    pub async fn candidate(&self, id: &str) -> Result<CandidateView, RevisionError> {
        let candidate = self
            .store
            .get_candidate(id)
            .await?
            .ok_or_else(|| RevisionError::NotFound(format!("candidate `{id}`")))?;
        let (current, _) = self.head(&candidate.skill).await?;
        let base = self
            .get_skill(&candidate.skill, Some(candidate.base_version))
            .await
            .ok();
        Ok(CandidateView {
            current_version: current.version,
            base,
            candidate,
        })
    }

    /// A page of candidates, newest first, after candidate `before`.
    pub async fn list_candidates(
        &self,
        status: Option<CandidateStatus>,
        skill: Option<&str>,
        before: Option<&str>,
        limit: u32,
    ) -> Result<Page<CandidateRecord>, RevisionError> {
        Ok(self
            .store
            .list_candidates(status, skill, before, limit)
            .await?)
    }
}

#[cfg(test)]
mod tests;
