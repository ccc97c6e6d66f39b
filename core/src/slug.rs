//! Slugs: the lowercase kebab-case identifiers of roles, skills and scopes.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest slug we accept; long enough for any sensible name, short enough for a URL path segment.
pub const MAX_SLUG_LEN: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlugError {
    #[error("a slug must not be empty")]
    Empty,
    #[error("a slug is at most {MAX_SLUG_LEN} characters, `{0}` is longer")]
    TooLong(String),
    #[error(
        "`{0}` is not a slug: use lowercase letters, digits and single hyphens, not at the start or end"
    )]
    Invalid(String),
}

/// A validated slug. The only way to build one is [`Slug::parse`], so holding a `Slug`
/// means the text was checked at the edge.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Slug(String);

impl Slug {
    pub fn parse(text: &str) -> Result<Self, SlugError> {
        if text.is_empty() {
            return Err(SlugError::Empty);
        }
        if text.len() > MAX_SLUG_LEN {
            return Err(SlugError::TooLong(text.to_owned()));
        }
        let well_formed = text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !text.starts_with('-')
            && !text.ends_with('-')
            && !text.contains("--");
        if !well_formed {
            return Err(SlugError::Invalid(text.to_owned()));
        }
        Ok(Self(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Slug {
    type Error = SlugError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<Slug> for String {
    fn from(slug: Slug) -> Self {
        slug.0
    }
}

impl fmt::Display for Slug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kebab_case_names_are_accepted() {
        for ok in ["tier-1-support", "a", "billing-admin", "x9"] {
            assert_eq!(Slug::parse(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn malformed_names_are_refused_with_the_reason() {
        assert_eq!(Slug::parse(""), Err(SlugError::Empty));
        for bad in ["Tier", "a_b", "-a", "a-", "a--b", "a b", "../x", "é"] {
            assert!(
                matches!(Slug::parse(bad), Err(SlugError::Invalid(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            Slug::parse(&"a".repeat(65)),
            Err(SlugError::TooLong(_))
        ));
    }
}
