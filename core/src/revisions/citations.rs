//! Citation checks: every source of a proposal must be an existing feedback, session or
//! pattern ID of the skill it proposes to change.

use std::collections::BTreeSet;

/// The words an agent or reviewer sees when a citation is refused.
pub const CITE_EXISTING: &str = "cite existing feedback, session or pattern IDs";

pub use crate::store::revisions::KnownSources;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CitationError {
    #[error("{CITE_EXISTING}: the proposal cites none")]
    None,
    #[error("{CITE_EXISTING} of skill `{skill}`; unknown: {}", unknown.join(", "))]
    Unknown { skill: String, unknown: Vec<String> },
}

/// Checks `cited` against what exists for `skill`. At least one source is required: a
/// proposal with nothing behind it is an opinion, not a revision.
pub fn check_citations<'a>(
    skill: &str,
    cited: impl IntoIterator<Item = &'a str>,
    known: &KnownSources,
) -> Result<(), CitationError> {
    let cited: BTreeSet<&str> = cited.into_iter().map(str::trim).collect();
    if cited.is_empty() {
        return Err(CitationError::None);
    }
    let unknown: Vec<String> = cited
        .into_iter()
        .filter(|id| !known.contains(id))
        .map(str::to_owned)
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(CitationError::Unknown {
            skill: skill.to_owned(),
            unknown,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> KnownSources {
        KnownSources {
            feedback: ["fb_1".to_owned()].into(),
            sessions: ["sess_1".to_owned()].into(),
            patterns: ["pat_1".to_owned()].into(),
        }
    }

    #[test]
    fn feedback_session_and_pattern_ids_of_the_skill_are_accepted() {
        assert_eq!(
            check_citations("s", ["fb_1", "sess_1", "pat_1"], &known()),
            Ok(())
        );
    }

    #[test]
    fn an_unknown_id_is_refused_naming_it() {
        let e = check_citations("refund-handling", ["fb_1", "fb_404"], &known()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cite existing feedback, session or pattern IDs of skill `refund-handling`; unknown: fb_404"
        );
    }

    #[test]
    fn a_proposal_without_sources_is_refused() {
        let e = check_citations("s", Vec::<&str>::new(), &known()).unwrap_err();
        assert!(e.to_string().starts_with(CITE_EXISTING), "{e}");
    }
}
