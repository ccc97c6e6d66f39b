//! Skill revisions: candidates for review and a skill's revision history.

pub mod api;
pub(crate) mod candidates;
mod skill_revisions;

pub use candidates::{CandidatePage, CandidatesPage};
pub use skill_revisions::SkillRevisions;
