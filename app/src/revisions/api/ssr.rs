//! What the server functions of both pages share: the role check, the service, cursors,
//! errors and the candidate rows.

use leptos::prelude::expect_context;
use skillgate_core::revisions::{RevisionError, Revisions};
use skillgate_core::store::StoreError;
use skillgate_core::store::revisions::{CandidateRecord, CandidateStatus};
use skillgate_core::users::{ConsoleRole, ConsoleUser};

use super::CandidateRow;
use crate::shared::ConsoleError;
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

pub fn row(c: &CandidateRecord, current: Option<u32>) -> CandidateRow {
    CandidateRow {
        id: c.id.clone(),
        skill: c.skill.clone(),
        base_version: c.base_version,
        verdict: c.verdict.clone(),
        status: c.status.as_str().to_owned(),
        proposer: c.proposer.name().to_owned(),
        proposer_kind: c.proposer.kind().to_owned(),
        created_at: c.created_at.clone(),
        stale: c.status == CandidateStatus::Pending && current.is_some_and(|v| v != c.base_version),
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
