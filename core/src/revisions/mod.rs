//! Skill revisions (WikiSkill candidates): evidence, the gate verdict, citation checks,
//! `SKILL.md` validation, and the service that proposes, approves, rejects and restores.
//!
//! `evidence`, `gate`, `citations`, `skill_md` and `bundle` are pure; `service` does the I/O.

pub mod bundle;
pub mod citations;
pub mod curator;
pub mod evidence;
pub mod export;
pub mod gate;
pub mod limits;
pub mod service;
pub mod skill_md;

pub use bundle::{Bundle, BundleError};
pub use citations::{CITE_EXISTING, CitationError, KnownSources, check_citations};
pub use evidence::{Evidence, EvidenceError};
pub use gate::{GateOutcome, GateRule, Verdict, evaluate};
pub use limits::{RateLimit, Slot};
pub use service::{
    ADMIN_WITHOUT_EVIDENCE, Authorship, CandidateView, Proposal, RevisionError, Revisions,
};
pub use skill_md::{SkillMd, SkillMdError};
