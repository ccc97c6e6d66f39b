//! Server functions of skill revisions: the candidate review queue and decisions
//! ([`candidates`]), and a skill's own page: versions, wiki patterns, feedback (agents' and
//! reviewers') and restores ([`skill`]).
//!
//! Reading needs the viewer role; deciding, writing feedback and uploading need reviewer;
//! restoring an old version needs admin. Every check runs on the server.

use serde::{Deserialize, Serialize};

mod candidates;
mod skill;
#[cfg(feature = "ssr")]
mod ssr;

pub use candidates::*;
pub use skill::*;

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

/// Rows per page of the console's candidate and feedback lists.
pub const PAGE_ROWS: u32 = 50;
