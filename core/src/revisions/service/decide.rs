//! Deciding: approving a candidate (a new current version, swapped into the live catalog
//! in the same transaction), rejecting it, and restoring an earlier version.

use chrono::Utc;
use serde_json::{Value, json};

use super::{CandidateView, RevisionError, Revisions};
use crate::admin::{AdminError, Changed};
use crate::model::SkillVersion;
use crate::store::StoreError;
use crate::store::catalog;
use crate::store::revisions::{self, CandidateStatus, Proposer};

/// Why a decision's transaction refused to commit when the candidate was decided by
/// someone else after it was read.
const DECIDED_ELSEWHERE: &str = "the candidate was decided by someone else";

fn decision_error(error: AdminError) -> RevisionError {
    match error {
        AdminError::Conflict(m) if m == DECIDED_ELSEWHERE => {
            RevisionError::AlreadyDecided("decided by someone else")
        }
        other => other.into(),
    }
}
impl Revisions {
    fn check_decision(
        view: &CandidateView,
        reviewer: &str,
        reason: &str,
    ) -> Result<(), RevisionError> {
        if reason.trim().is_empty() {
            return Err(RevisionError::ReasonRequired);
        }
        if view.candidate.status != CandidateStatus::Pending {
            return Err(RevisionError::AlreadyDecided(
                view.candidate.status.as_str(),
            ));
        }
        // A proposal made through the console's try-it panel is the reviewer's own too.
        let own = match &view.candidate.proposer {
            Proposer::User(name) => name == reviewer,
            Proposer::Agent(name) => *name == crate::gateway::console_actor(reviewer),
        };
        if own {
            return Err(RevisionError::OwnProposal);
        }
        Ok(())
    }

    /// Makes the candidate the skill's new current version. Refused for the proposer
    /// themself, without a reason, and when the base version is no longer current.
    #[tracing::instrument(skip(self, reason))]
    pub async fn approve(
        &self,
        id: &str,
        reviewer: &str,
        reason: &str,
    ) -> Result<SkillVersion, RevisionError> {
        // A new current version is catalog authoring: a catalog file in charge owns it.
        self.admin.authorable()?;
        let view = self.candidate(id).await?;
        Self::check_decision(&view, reviewer, reason)?;
        let (current, revision) = self.head(&view.candidate.skill).await?;
        if view.candidate.base_version != current.version {
            return Err(RevisionError::Stale {
                base: view.candidate.base_version,
                current: current.version,
            });
        }
        let mut skill = current.skill.clone();
        skill.instructions = view.candidate.instructions.clone();
        if let Some(description) = &view.candidate.description {
            skill.description = description.clone();
        }
        if let Some(extra) = &view.candidate.frontmatter_extra {
            skill.frontmatter_extra = extra.clone();
        }
        if let Some(resources) = &view.candidate.resources {
            skill.resources = resources.clone();
        }
        let (id, reviewer_name, reason) =
            (id.to_owned(), reviewer.to_owned(), reason.trim().to_owned());
        let (verdict, proposer) = (
            view.candidate.verdict.clone(),
            view.candidate.proposer.name().to_owned(),
        );
        let skill_md = view.candidate.skill_md.clone();
        let base = current.version;
        let saved = self
            .admin
            .commit(
                reviewer,
                Box::new(move |conn| {
                    Box::pin(async move {
                        let saved = catalog::update_skill_from_file_on(
                            conn,
                            &skill,
                            revision,
                            skill_md.as_deref(),
                        )
                        .await?;
                        let version = saved.value.version;
                        let decided = revisions::decide_candidate_on(
                            conn,
                            &id,
                            CandidateStatus::Approved,
                            &reviewer_name,
                            &reason,
                            Some(version),
                            Utc::now(),
                        )
                        .await?;
                        if !decided {
                            // Someone decided it between our read and now: the new
                            // version rolls back with the transaction.
                            return Err(StoreError::Conflict(DECIDED_ELSEWHERE.into()));
                        }
                        let changed = Changed::new(
                            "skill_candidate.approve",
                            format!("skill:{}", skill.slug),
                            json!({ "version": base }),
                            json!({
                                "version": version,
                                "candidate": id,
                                "verdict": verdict,
                                "proposer": proposer,
                                "reason": reason,
                            }),
                        );
                        Ok((saved, vec![changed]))
                    })
                }),
            )
            .await
            .map_err(decision_error)?;
        Ok(saved.value)
    }

    #[tracing::instrument(skip(self, reason))]
    pub async fn reject(
        &self,
        id: &str,
        reviewer: &str,
        reason: &str,
    ) -> Result<(), RevisionError> {
        let view = self.candidate(id).await?;
        Self::check_decision(&view, reviewer, reason)?;
        let (id, reviewer_name, reason) =
            (id.to_owned(), reviewer.to_owned(), reason.trim().to_owned());
        let changed = Changed::new(
            "skill_candidate.reject",
            format!("skill:{}", view.candidate.skill),
            Value::Null,
            json!({ "candidate": id, "verdict": view.candidate.verdict, "reason": reason }),
        );
        self.admin
            .record(
                reviewer,
                Box::new(move |conn| {
                    Box::pin(async move {
                        let decided = revisions::decide_candidate_on(
                            conn,
                            &id,
                            CandidateStatus::Rejected,
                            &reviewer_name,
                            &reason,
                            None,
                            Utc::now(),
                        )
                        .await?;
                        if !decided {
                            return Err(StoreError::Conflict(DECIDED_ELSEWHERE.into()));
                        }
                        Ok(((), vec![changed]))
                    })
                }),
            )
            .await
            .map_err(decision_error)?;
        Ok(())
    }

    /// Makes a stored version current again.
    #[tracing::instrument(skip(self))]
    pub async fn restore(
        &self,
        skill: &str,
        version: u32,
        actor: &str,
    ) -> Result<(), RevisionError> {
        // A new current version is catalog authoring: a catalog file in charge owns it.
        self.admin.authorable()?;
        let (current, revision) = self.head(skill).await?;
        self.admin
            .restore_skill_version(actor, &current.skill.slug, version, revision)
            .await?;
        Ok(())
    }
}
