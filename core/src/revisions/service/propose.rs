//! Proposing: a candidate version of a skill, a wiki pattern and a reviewer's feedback,
//! each checked (citations, the gate verdict, sizes) and recorded through the admin door.

use chrono::Utc;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{ADMIN_WITHOUT_EVIDENCE, Authorship, Proposal, RevisionError, Revisions};
use crate::admin::Changed;
use crate::revisions::bundle::Bundle;
use crate::revisions::citations::{CitationError, check_citations};
use crate::revisions::evidence::Evidence;
use crate::revisions::gate::evaluate;
use crate::store::revisions::{
    self, CandidateRecord, CandidateStatus, NewHumanFeedback, PatternRecord, Proposer,
};
use crate::store::stamp;

const MAX_INSTRUCTIONS: usize = 64 * 1024;
const MAX_NOTE: usize = 4000;
const MAX_SOURCES: usize = 100;
const MAX_PATTERN: usize = 16 * 1024;
fn trimmed(text: &str) -> String {
    text.trim().to_owned()
}

impl Revisions {
    /// Proposes an uploaded file (a `SKILL.md` or a zip bundle, see [`Bundle`]) as a
    /// candidate of `skill`, or of the skill its `SKILL.md` names when `skill` is `None`.
    /// The console's upload and `skillgate skill import` both come through here.
    #[tracing::instrument(skip(self, bytes), fields(size = bytes.len(), proposer = proposer.name()))]
    pub async fn propose_file(
        &self,
        skill: Option<&str>,
        file_name: &str,
        bytes: &[u8],
        proposer: Proposer,
        authorship: Authorship,
    ) -> Result<CandidateRecord, RevisionError> {
        let bundle = Bundle::read(file_name, bytes)?;
        let skill = skill.unwrap_or(bundle.skill_md.name.as_str()).to_owned();
        let (current, _) = self.head(&skill).await.map_err(|e| match e {
            RevisionError::NotFound(_) => RevisionError::Invalid(format!(
                "there is no skill `{skill}`: an upload proposes a new version of an existing \
                 skill; create the skill in the catalog first (`skillgate catalog apply`)"
            )),
            other => other,
        })?;
        let mut proposal = Proposal::from_bundle(&skill, current.version, bundle)?;
        proposal.authorship = authorship;
        self.propose(proposal, proposer).await
    }

    /// Records a proposal: checks citations, computes the gate verdict, stores, audits.
    /// A refused proposal stores nothing.
    #[tracing::instrument(skip(self, proposal), fields(skill = %proposal.skill, proposer = proposer.name()))]
    pub async fn propose(
        &self,
        proposal: Proposal,
        proposer: Proposer,
    ) -> Result<CandidateRecord, RevisionError> {
        let (current, _) = self.head(&proposal.skill).await?;
        if proposal.base_version == 0 || proposal.base_version > current.version {
            return Err(RevisionError::Invalid(format!(
                "base_version {} is not a version of skill `{}` (current is {})",
                proposal.base_version, proposal.skill, current.version
            )));
        }
        let instructions = trimmed(&proposal.instructions);
        if instructions.is_empty() || instructions.len() > MAX_INSTRUCTIONS {
            return Err(RevisionError::Invalid(format!(
                "instructions must be 1 to {MAX_INSTRUCTIONS} bytes of markdown"
            )));
        }
        let note = trimmed(&proposal.note);
        if note.is_empty() || note.chars().count() > MAX_NOTE {
            return Err(RevisionError::Invalid(format!(
                "note must say why, in 1 to {MAX_NOTE} characters"
            )));
        }
        if let Some(d) = &proposal.description {
            let n = d.trim().chars().count();
            if n == 0 || n > crate::revisions::skill_md::MAX_DESCRIPTION {
                return Err(RevisionError::Invalid(
                    "description must be 1 to 1024 characters".into(),
                ));
            }
        }
        if proposal.sources.len() > MAX_SOURCES {
            return Err(RevisionError::Invalid(format!(
                "cite at most {MAX_SOURCES} sources"
            )));
        }
        let evidence = Evidence::parse(&proposal.evidence)?;
        let cited: Vec<&str> = proposal
            .sources
            .iter()
            .map(|s| s.trim())
            .chain(evidence.requirement_sources().into_iter().map(str::trim))
            .collect();
        let known = self.store.known_sources(&proposal.skill, &cited).await?;
        let admin = proposal.authorship == Authorship::Admin;
        match check_citations(&proposal.skill, cited.iter().copied(), &known) {
            Err(CitationError::None) if admin => {}
            checked => checked?,
        }
        let pending = self
            .store
            .pending_requirements(&proposal.skill, proposal.base_version)
            .await?;
        let mut outcome = evaluate(&evidence, &pending);
        if admin && matches!(evidence, Evidence::None) {
            outcome.summary = ADMIN_WITHOUT_EVIDENCE.to_owned();
        }
        let candidate = CandidateRecord {
            id: format!("cand_{}", Uuid::new_v4().simple()),
            skill: proposal.skill.clone(),
            base_version: proposal.base_version,
            description: proposal.description.as_deref().map(trimmed),
            instructions,
            note,
            sources: proposal.sources.iter().map(|s| trimmed(s)).collect(),
            evidence: proposal.evidence.clone(),
            verdict: outcome.verdict.as_str().to_owned(),
            verdict_explanation: serde_json::to_value(&outcome).expect("an outcome serializes"),
            proposer: proposer.clone(),
            status: CandidateStatus::Pending,
            decided_by: None,
            reason: None,
            decided_at: None,
            approved_version: None,
            created_at: stamp(Utc::now()),
            frontmatter_extra: proposal.frontmatter_extra.clone(),
            resources: proposal.resources.clone(),
            skill_md: proposal.skill_md.clone(),
        };
        let after = json!({
            "candidate": candidate.id,
            "proposer_kind": proposer.kind(),
            "base_version": candidate.base_version,
            "verdict": candidate.verdict,
            "sources": candidate.sources,
            "admin_authored": admin,
        });
        let changed = Changed::new(
            "skill_candidate.propose",
            format!("skill:{}", candidate.skill),
            Value::Null,
            after,
        );
        let record = candidate.clone();
        self.admin
            .record(
                proposer.name(),
                Box::new(move |conn| {
                    Box::pin(async move {
                        revisions::insert_candidate_on(conn, &record).await?;
                        Ok(((), vec![changed]))
                    })
                }),
            )
            .await?;
        Ok(candidate)
    }
    /// Adds a cited wiki pattern to a skill.
    #[tracing::instrument(skip(self, content, sources))]
    pub async fn add_pattern(
        &self,
        skill: &str,
        name: &str,
        content: &str,
        sources: &[String],
        created_by: &str,
    ) -> Result<PatternRecord, RevisionError> {
        self.head(skill).await?;
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 120 {
            return Err(RevisionError::Invalid(
                "a pattern name is 1 to 120 characters".into(),
            ));
        }
        let content = content.trim();
        if content.is_empty() || content.len() > MAX_PATTERN {
            return Err(RevisionError::Invalid(format!(
                "pattern content is 1 to {MAX_PATTERN} bytes"
            )));
        }
        if sources.len() > MAX_SOURCES {
            return Err(RevisionError::Invalid(format!(
                "cite at most {MAX_SOURCES} sources"
            )));
        }
        let cited: Vec<&str> = sources.iter().map(|s| s.trim()).collect();
        let known = self.store.known_sources(skill, &cited).await?;
        check_citations(skill, cited.iter().copied(), &known)?;
        let pattern = PatternRecord {
            id: format!("pat_{}", Uuid::new_v4().simple()),
            skill: skill.to_owned(),
            name: name.to_owned(),
            content: content.to_owned(),
            sources: sources.iter().map(|s| trimmed(s)).collect(),
            created_by: created_by.to_owned(),
            created_at: stamp(Utc::now()),
        };
        let changed = Changed::new(
            "wiki_pattern.add",
            format!("skill:{skill}"),
            Value::Null,
            json!({ "pattern": pattern.id, "name": pattern.name, "sources": pattern.sources }),
        );
        let record = pattern.clone();
        self.admin
            .record(
                created_by,
                Box::new(move |conn| {
                    Box::pin(async move {
                        revisions::insert_pattern_on(conn, &record).await?;
                        Ok(((), vec![changed]))
                    })
                }),
            )
            .await?;
        Ok(pattern)
    }

    /// A reviewer's feedback on the current version: general, or an explicit requirement.
    #[tracing::instrument(skip(self, comment))]
    pub async fn add_human_feedback(
        &self,
        skill: &str,
        rating: u8,
        comment: &str,
        requirement: bool,
        author: &str,
    ) -> Result<String, RevisionError> {
        let (current, _) = self.head(skill).await?;
        if !(1..=5).contains(&rating) {
            return Err(RevisionError::Invalid("rating must be from 1 to 5".into()));
        }
        let comment = comment.trim();
        if comment.is_empty() || comment.chars().count() > MAX_NOTE {
            return Err(RevisionError::Invalid(format!(
                "feedback text is 1 to {MAX_NOTE} characters"
            )));
        }
        let id = format!("fb_{}", Uuid::new_v4().simple());
        let changed = Changed::new(
            "feedback.add",
            format!("skill:{skill}"),
            Value::Null,
            json!({
                "feedback_id": id,
                "kind": if requirement { "requirement" } else { "general" },
                "version": current.version,
                "rating": rating,
            }),
        );
        let (fid, skill, comment, author) = (
            id.clone(),
            skill.to_owned(),
            comment.to_owned(),
            author.to_owned(),
        );
        let version = current.version;
        self.admin
            .record(
                &author.clone(),
                Box::new(move |conn| {
                    Box::pin(async move {
                        revisions::insert_human_feedback_on(
                            conn,
                            &NewHumanFeedback {
                                id: &fid,
                                skill: &skill,
                                version,
                                rating,
                                comment: &comment,
                                requirement,
                                author: &author,
                                at: Utc::now(),
                            },
                        )
                        .await?;
                        Ok(((), vec![changed]))
                    })
                }),
            )
            .await?;
        Ok(id)
    }
}
