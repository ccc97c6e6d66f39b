//! The revisions service: propose, approve, reject and restore skill versions, add wiki
//! patterns and human feedback. Every change is audited; approval swaps the catalog
//! snapshot so the next `learn` serves the new version while sessions in flight keep the
//! versions they learned.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::bundle::{Bundle, BundleError};
use super::citations::{CitationError, check_citations};
use super::evidence::{Evidence, EvidenceError};
use super::gate::evaluate;
use super::limits::{RateLimit, Slot};
use super::skill_md::{SkillMd, SkillMdError};
use crate::admin::{AdminError, AdminService, Changed};
use crate::audit::AuditError;
use crate::model::{Resource, SkillVersion};
use crate::slug::Slug;
use crate::store::catalog;
use crate::store::revisions::{
    self, CandidateRecord, CandidateStatus, FeedbackRecord, NewHumanFeedback, Page, PatternRecord,
    Proposer,
};
use crate::store::{Store, StoreError, stamp};

const MAX_INSTRUCTIONS: usize = 64 * 1024;
const MAX_NOTE: usize = 4000;
const MAX_SOURCES: usize = 100;
const MAX_PATTERN: usize = 16 * 1024;

/// Who stands behind a proposal, which decides whether it must cite sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Authorship {
    /// Agents and reviewers: a proposal cites existing feedback, session or pattern IDs.
    #[default]
    Cited,
    /// A console admin, or the operator at the command line, writing the skill themself:
    /// sources are optional (any cited must still exist). Without evidence the gate says
    /// it cannot evaluate, and a reviewer other than the proposer decides as for any
    /// candidate.
    Admin,
}

/// What the gate says of an admin-authored candidate without evidence.
pub const ADMIN_WITHOUT_EVIDENCE: &str = "no evidence: an admin authored this candidate without evaluation \
     evidence, so the gate cannot evaluate it; the reviewer decides";

/// A proposed new version of a skill, as the curator tool, the HTTP API and the upload send it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Proposal {
    /// Whether sources are required; the caller decides from the proposer's role, never
    /// from what the proposal says.
    pub authorship: Authorship,
    pub skill: String,
    pub base_version: u32,
    /// `None` keeps the base version's description.
    pub description: Option<String>,
    pub instructions: String,
    pub note: String,
    pub sources: Vec<String>,
    pub evidence: Value,
    /// The new version's extra `SKILL.md` frontmatter; `None` keeps the base version's.
    pub frontmatter_extra: Option<Map<String, Value>>,
    /// The new version's resources (a zip's `references/`); `None` keeps the base's.
    pub resources: Option<Vec<Resource>>,
    /// The `SKILL.md` exactly as uploaded, exported byte for byte once approved.
    pub skill_md: Option<String>,
}

/// The fields of a WikiSkill `provenance.json` a proposal takes (all optional):
/// `base_version` (or `version`, as an exported folder names the version it holds),
/// `note`, `sources`, `evidence`. `file` names it in errors.
struct Provenance {
    base_version: Option<u32>,
    note: Option<String>,
    sources: Vec<String>,
    evidence: Value,
}

impl Provenance {
    fn parse(file: &str, text: Option<&str>) -> Result<Self, RevisionError> {
        let invalid = |what: &str| RevisionError::Invalid(format!("{file}: {what}"));
        let value: Value = match text.map(str::trim).filter(|p| !p.is_empty()) {
            Some(text) => {
                serde_json::from_str(text).map_err(|e| invalid(&format!("is not JSON: {e}")))?
            }
            None => json!({}),
        };
        if !value.is_object() {
            return Err(invalid("must be a JSON object"));
        }
        let base_version = match value.get("base_version").or_else(|| value.get("version")) {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(|| invalid("base_version must be a version number"))?,
            ),
        };
        let sources = match value.get("sources") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|s| s.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| invalid("sources must be a list of IDs"))?,
            Some(_) => return Err(invalid("sources must be a list of IDs")),
        };
        let note = match value.get("note") {
            None | Some(Value::Null) => None,
            Some(Value::String(note)) => Some(note.clone()),
            Some(_) => return Err(invalid("note must be text")),
        };
        Ok(Self {
            base_version,
            note,
            sources,
            evidence: value.get("evidence").cloned().unwrap_or(Value::Null),
        })
    }
}

impl Proposal {
    /// A proposal from a pasted `SKILL.md` and optional WikiSkill `provenance.json`
    /// (`base_version`, `note`, `sources`, `evidence`; all optional).
    pub fn from_upload(
        skill: &str,
        current_version: u32,
        skill_md: &str,
        provenance: Option<&str>,
    ) -> Result<Self, RevisionError> {
        let md = SkillMd::parse(skill_md, skill)?;
        let provenance = Provenance::parse("provenance.json", provenance)?;
        Ok(Self {
            skill: skill.to_owned(),
            base_version: provenance.base_version.unwrap_or(current_version),
            description: Some(md.description),
            instructions: md.instructions,
            note: provenance
                .note
                .unwrap_or_else(|| "Uploaded as SKILL.md.".to_owned()),
            sources: provenance.sources,
            evidence: provenance.evidence,
            frontmatter_extra: Some(md.extra),
            resources: None,
            skill_md: Some(skill_md.to_owned()),
            authorship: Authorship::Cited,
        })
    }

    /// A proposal from an uploaded bundle (a `SKILL.md` or a zip of the skill's folder)
    /// for skill `skill`. A zip's references replace the skill's resources; a plain
    /// `SKILL.md` keeps them.
    pub fn from_bundle(
        skill: &str,
        current_version: u32,
        bundle: Bundle,
    ) -> Result<Self, RevisionError> {
        bundle.check_skill(skill)?;
        let (file, text) = match &bundle.provenance {
            Some((file, text)) => (file.as_str(), Some(text.as_str())),
            None => ("provenance.json", None),
        };
        let provenance = Provenance::parse(file, text)?;
        let default_note = if bundle.resources.is_some() {
            format!(
                "Uploaded as an Agent Skills bundle ({}).",
                bundle.skill_md_path
            )
        } else {
            format!("Uploaded as {}.", bundle.skill_md_path)
        };
        Ok(Self {
            skill: skill.to_owned(),
            base_version: provenance.base_version.unwrap_or(current_version),
            description: Some(bundle.skill_md.description),
            instructions: bundle.skill_md.instructions,
            note: provenance.note.unwrap_or(default_note),
            sources: provenance.sources,
            evidence: provenance.evidence,
            frontmatter_extra: Some(bundle.skill_md.extra),
            resources: bundle.resources,
            skill_md: Some(bundle.skill_md_text),
            authorship: Authorship::Cited,
        })
    }
}

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

fn trimmed(text: &str) -> String {
    text.trim().to_owned()
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
            if n == 0 || n > super::skill_md::MAX_DESCRIPTION {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::EventKind;
    use crate::store::test_store;

    async fn service() -> Revisions {
        let store = test_store().await;
        assert!(store.seed_demo("/usr/bin/skillgate").await.unwrap());
        Revisions::new(Arc::new(AdminService::open(store).await.unwrap()))
    }

    async fn feedback(revisions: &Revisions, requirement: bool) -> String {
        revisions
            .add_human_feedback(
                "refund-handling",
                3,
                "Confirm the order id first.",
                requirement,
                "rita",
            )
            .await
            .unwrap()
    }

    fn proposal(sources: Vec<String>, evidence: Value) -> Proposal {
        Proposal {
            skill: "refund-handling".into(),
            base_version: 1,
            description: None,
            instructions: "# Refunds\n\nConfirm the order id, then check eligibility.".into(),
            note: "Wrong orders were refunded.".into(),
            sources,
            evidence,
            ..Proposal::default()
        }
    }

    async fn admin_actions(revisions: &Revisions) -> Vec<String> {
        let store = revisions.store();
        let rows: Vec<String> =
            sqlx::query_scalar("SELECT payload FROM audit_events WHERE kind = $1 ORDER BY seq")
                .bind(EventKind::AdminChange.as_str())
                .fetch_all(store.pool())
                .await
                .unwrap();
        rows.iter()
            .map(|p| {
                serde_json::from_str::<Value>(p).unwrap()["action"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }

    #[tokio::test]
    async fn approval_makes_the_candidate_the_current_version_and_swaps_the_catalog() {
        let revisions = service().await;
        let fb = feedback(&revisions, false).await;
        let candidate = revisions
            .propose(
                proposal(
                    vec![fb],
                    json!({"pairs": [{"case_id": "c1", "verdict": "better"}]}),
                ),
                Proposer::User("paula".into()),
            )
            .await
            .unwrap();
        assert_eq!(candidate.verdict, "ACCEPT");
        let version = revisions
            .approve(&candidate.id, "rita", "Matches the policy.")
            .await
            .unwrap();
        assert_eq!(version.version, 2);
        let served = revisions.admin.live();
        let skill = served.catalog().skill("refund-handling").unwrap();
        assert_eq!(skill.version, 2);
        assert!(skill.skill.instructions.contains("Confirm the order id"));
        let stored = revisions.candidate(&candidate.id).await.unwrap().candidate;
        assert_eq!(
            (
                stored.status,
                stored.approved_version,
                stored.decided_by.as_deref()
            ),
            (CandidateStatus::Approved, Some(2), Some("rita"))
        );
        assert!(matches!(
            revisions
                .reject(&candidate.id, "rita", "changed my mind")
                .await,
            Err(RevisionError::AlreadyDecided("approved"))
        ));
        let actions = admin_actions(&revisions).await;
        assert!(
            actions.ends_with(&[
                "skill_candidate.propose".into(),
                "skill_candidate.approve".into()
            ]),
            "{actions:?}"
        );
    }

    #[tokio::test]
    async fn a_console_user_cannot_decide_what_they_proposed_through_try_it() {
        let revisions = service().await;
        let fb = feedback(&revisions, false).await;
        let candidate = revisions
            .propose(
                proposal(vec![fb], Value::Null),
                Proposer::Agent(crate::gateway::console_actor("paula")),
            )
            .await
            .unwrap();
        assert!(matches!(
            revisions.approve(&candidate.id, "paula", "mine").await,
            Err(RevisionError::OwnProposal)
        ));
        revisions
            .reject(&candidate.id, "rita", "Not yet.")
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn the_proposer_cannot_decide_their_own_candidate_and_a_reason_is_required() {
        let revisions = service().await;
        let fb = feedback(&revisions, false).await;
        let candidate = revisions
            .propose(
                proposal(vec![fb], Value::Null),
                Proposer::User("paula".into()),
            )
            .await
            .unwrap();
        assert_eq!(candidate.verdict, "UNEVALUATED");
        assert!(matches!(
            revisions.approve(&candidate.id, "paula", "mine").await,
            Err(RevisionError::OwnProposal)
        ));
        assert!(matches!(
            revisions.reject(&candidate.id, "paula", "mine").await,
            Err(RevisionError::OwnProposal)
        ));
        assert!(matches!(
            revisions.reject(&candidate.id, "rita", "  ").await,
            Err(RevisionError::ReasonRequired)
        ));
        revisions
            .reject(&candidate.id, "rita", "No evidence.")
            .await
            .unwrap();
        assert_eq!(
            revisions
                .get_skill("refund-handling", None)
                .await
                .unwrap()
                .version,
            1
        );
    }

    #[tokio::test]
    async fn a_candidate_on_a_version_that_is_no_longer_current_is_stale_and_cannot_be_approved() {
        let revisions = service().await;
        let fb = feedback(&revisions, false).await;
        let first = revisions
            .propose(
                proposal(vec![fb.clone()], Value::Null),
                Proposer::Agent("bot".into()),
            )
            .await
            .unwrap();
        let second = revisions
            .propose(
                proposal(vec![fb], Value::Null),
                Proposer::Agent("bot".into()),
            )
            .await
            .unwrap();
        revisions.approve(&first.id, "rita", "ok").await.unwrap();
        let view = revisions.candidate(&second.id).await.unwrap();
        assert!(view.is_stale());
        assert!(matches!(
            revisions.approve(&second.id, "rita", "ok").await,
            Err(RevisionError::Stale {
                base: 1,
                current: 2
            })
        ));
        assert_eq!(
            revisions
                .get_skill("refund-handling", None)
                .await
                .unwrap()
                .version,
            2
        );
    }

    #[tokio::test]
    async fn an_admin_authored_proposal_may_cite_nothing_and_the_gate_says_the_reviewer_decides() {
        let revisions = service().await;
        let admin_authored = |sources: Vec<String>| Proposal {
            authorship: Authorship::Admin,
            ..proposal(sources, Value::Null)
        };
        let candidate = revisions
            .propose(admin_authored(Vec::new()), Proposer::User("ada".into()))
            .await
            .unwrap();
        assert_eq!(candidate.verdict, "UNEVALUATED");
        assert_eq!(
            candidate.verdict_explanation["summary"],
            json!(ADMIN_WITHOUT_EVIDENCE)
        );
        assert!(matches!(
            revisions.approve(&candidate.id, "ada", "mine").await,
            Err(RevisionError::OwnProposal)
        ));
        revisions
            .approve(&candidate.id, "rita", "Reads right.")
            .await
            .unwrap();
        // An admin's citations must still exist; everyone else must cite.
        assert!(matches!(
            revisions
                .propose(
                    admin_authored(vec!["fb_nope".into()]),
                    Proposer::User("ada".into())
                )
                .await,
            Err(RevisionError::Citation(CitationError::Unknown { .. }))
        ));
        assert!(matches!(
            revisions
                .propose(
                    proposal(Vec::new(), Value::Null),
                    Proposer::User("rita".into())
                )
                .await,
            Err(RevisionError::Citation(CitationError::None))
        ));
    }

    #[tokio::test]
    async fn a_bad_citation_stores_nothing_and_names_the_unknown_id() {
        let revisions = service().await;
        let err = revisions
            .propose(
                proposal(vec!["fb_nope".into()], Value::Null),
                Proposer::Agent("bot".into()),
            )
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cite existing feedback, session or pattern IDs"),
            "{err}"
        );
        assert!(err.to_string().contains("fb_nope"), "{err}");
        assert!(
            revisions
                .list_candidates(None, None, None, 50)
                .await
                .unwrap()
                .items
                .is_empty()
        );
        assert!(admin_actions(&revisions).await.is_empty());
    }

    #[tokio::test]
    async fn feedback_on_another_skill_cannot_be_cited() {
        let revisions = service().await;
        let other = revisions
            .add_human_feedback("customer-lookup", 4, "Fine.", false, "rita")
            .await
            .unwrap();
        let err = revisions
            .propose(
                proposal(vec![other], Value::Null),
                Proposer::Agent("bot".into()),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, RevisionError::Citation(_)), "{err}");
    }

    #[tokio::test]
    async fn a_pending_human_requirement_holds_paired_evidence_to_the_requirement_gate() {
        let revisions = service().await;
        let req = feedback(&revisions, true).await;
        let unanswered = revisions
            .propose(
                proposal(
                    vec![req.clone()],
                    json!({"pairs": [{"case_id": "c1", "verdict": "better"}]}),
                ),
                Proposer::Agent("bot".into()),
            )
            .await
            .unwrap();
        assert_eq!(unanswered.verdict, "REVISION_REQUIRED");
        let answered = revisions
            .propose(
                proposal(
                    vec![req.clone()],
                    json!({"pairs": [{"case_id": "c1", "verdict": "better", "requirement_checks": [
                        {"source": req, "fulfilled": true, "evidence": "step 1 confirms the order id"}]}]}),
                ),
                Proposer::Agent("bot".into()),
            )
            .await
            .unwrap();
        assert_eq!(answered.verdict, "ACCEPT");
    }

    #[tokio::test]
    async fn an_earlier_version_can_be_restored() {
        let revisions = service().await;
        let fb = feedback(&revisions, false).await;
        let c = revisions
            .propose(
                proposal(vec![fb], Value::Null),
                Proposer::Agent("bot".into()),
            )
            .await
            .unwrap();
        revisions.approve(&c.id, "rita", "ok").await.unwrap();
        revisions
            .restore("refund-handling", 1, "rita")
            .await
            .unwrap();
        assert_eq!(
            revisions
                .admin
                .live()
                .catalog()
                .skill("refund-handling")
                .unwrap()
                .version,
            1
        );
        assert!(matches!(
            revisions.restore("refund-handling", 7, "rita").await,
            Err(RevisionError::Store(StoreError::NotFound(_)))
        ));
    }

    #[tokio::test]
    async fn patterns_need_existing_citations_and_unique_names() {
        let revisions = service().await;
        let fb = feedback(&revisions, false).await;
        assert!(matches!(
            revisions
                .add_pattern("refund-handling", "p", "content", &["x".into()], "bot")
                .await,
            Err(RevisionError::Citation(_))
        ));
        let p = revisions
            .add_pattern(
                "refund-handling",
                "p",
                "content",
                std::slice::from_ref(&fb),
                "bot",
            )
            .await
            .unwrap();
        assert!(matches!(
            revisions
                .add_pattern("refund-handling", "p", "again", &[fb], "bot")
                .await,
            Err(RevisionError::Store(StoreError::Conflict(_)))
        ));
        // A pattern is itself citable.
        revisions
            .propose(
                proposal(vec![p.id], Value::Null),
                Proposer::Agent("bot".into()),
            )
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn an_uploaded_skill_md_with_provenance_becomes_a_proposal() {
        let md = "---\nname: refund-handling\ndescription: Refunds, carefully.\n---\n# Refunds\n\nConfirm first.\n";
        let p = Proposal::from_upload(
            "refund-handling",
            3,
            md,
            Some(r#"{"note": "from eval", "sources": ["fb_1"], "evidence": {"no_action": true}}"#),
        )
        .unwrap();
        assert_eq!(
            (p.base_version, p.note.as_str(), p.sources.as_slice()),
            (3, "from eval", &["fb_1".to_owned()][..])
        );
        assert_eq!(p.description.as_deref(), Some("Refunds, carefully."));
        assert!(matches!(
            Proposal::from_upload("customer-lookup", 1, md, None),
            Err(RevisionError::SkillMd(SkillMdError::WrongSkill { .. }))
        ));
        assert!(matches!(
            Proposal::from_upload("refund-handling", 1, md, Some("{not json")),
            Err(RevisionError::Invalid(_))
        ));
    }

    #[tokio::test]
    async fn an_approved_bundle_keeps_its_skill_md_references_and_frontmatter_until_an_edit() {
        use crate::revisions::bundle::zip_archive;
        use crate::revisions::skill_md::skill_md_text;
        let revisions = service().await;
        let fb = feedback(&revisions, false).await;
        let provenance = json!({"note": "Agents refunded wrong orders.", "sources": [fb]});
        let md = "---\nname: refund-handling\ndescription: >-\n  Refunds, carefully.\nlicense: Apache-2.0\nmetadata: {owner: support}\n---\n\n# Refunds\n\nConfirm first.\n";
        let zip = zip_archive(&[
            ("refund-handling/SKILL.md".into(), md.as_bytes().to_vec()),
            (
                "refund-handling/references/refund-policy.md".into(),
                b"# Refund policy\n\n30 days.\n".to_vec(),
            ),
            (
                "refund-handling/provenance.json".into(),
                provenance.to_string().into_bytes(),
            ),
        ])
        .unwrap();
        let bundle = Bundle::read("refund-handling.zip", &zip).unwrap();
        let proposal = Proposal::from_bundle("refund-handling", 1, bundle).unwrap();
        assert_eq!(proposal.note, "Agents refunded wrong orders.");
        let candidate = revisions
            .propose(proposal, Proposer::User("paula".into()))
            .await
            .unwrap();
        let version = revisions
            .approve(&candidate.id, "rita", "Matches the policy.")
            .await
            .unwrap();
        assert_eq!(version.skill.resources[0].title, "Refund policy");
        assert_eq!(
            version.skill.frontmatter_extra.get("license"),
            Some(&json!("Apache-2.0"))
        );
        let slug = version.skill.slug.clone();
        let stored = revisions
            .store()
            .skill_md_file(&slug, version.version)
            .await
            .unwrap();
        assert_eq!(stored.as_deref(), Some(md));
        let served = revisions.get_skill("refund-handling", None).await.unwrap();
        assert_eq!(skill_md_text(&served.skill, stored.as_deref()), md);

        // An edit (as the console saves one) keeps the extra fields, not the old file.
        let (head, revision) = revisions.head("refund-handling").await.unwrap();
        let mut edited = head.skill.clone();
        edited.instructions = "# Refunds\n\nConfirm the order id first.".into();
        let saved = revisions
            .store()
            .update_skill(&edited, revision)
            .await
            .unwrap();
        assert_eq!(
            revisions
                .store()
                .skill_md_file(&slug, saved.value.version)
                .await
                .unwrap(),
            None
        );
        let text = skill_md_text(&saved.value.skill, None);
        assert!(text.contains("license: Apache-2.0"), "{text}");
        assert!(text.contains("Confirm the order id first."), "{text}");
    }

    #[tokio::test]
    async fn a_bundle_for_another_skill_or_with_a_bad_provenance_is_refused_by_file() {
        let md = "---\nname: refund-handling\ndescription: Refunds.\n---\nBody.\n";
        let zip = |provenance: &str| {
            crate::revisions::bundle::zip_archive(&[
                ("SKILL.md".into(), md.as_bytes().to_vec()),
                ("provenance.json".into(), provenance.as_bytes().to_vec()),
            ])
            .unwrap()
        };
        let read = |bytes: &[u8]| Bundle::read("b.zip", bytes).unwrap();
        let plain = Bundle::read("SKILL.md", md.as_bytes()).unwrap();
        let p = Proposal::from_bundle("refund-handling", 1, plain).unwrap();
        assert_eq!(
            (p.note.as_str(), p.resources.is_none()),
            ("Uploaded as SKILL.md.", true)
        );
        let err = Proposal::from_bundle("customer-lookup", 1, read(&zip("{}"))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "SKILL.md: frontmatter name is `refund-handling` but this is skill `customer-lookup`"
        );
        let err = Proposal::from_bundle(
            "refund-handling",
            1,
            read(&zip(r#"{"base_version": "two"}"#)),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "provenance.json: base_version must be a version number"
        );
        // An exported folder's provenance names the version it holds: the base.
        let p =
            Proposal::from_bundle("refund-handling", 4, read(&zip(r#"{"version": 2}"#))).unwrap();
        assert_eq!(p.base_version, 2);
    }
}
