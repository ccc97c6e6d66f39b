//! Why a catalog entry was refused when it was saved.

use crate::slug::Slug;

/// A catalog entry that cannot be saved. Every variant names the offending item so the
/// console can show the admin what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    #[error("the role description is {0} characters; at most {max} are allowed", max = super::MAX_ROLE_DESCRIPTION)]
    DescriptionTooLong(usize),
    #[error("the {0} must not be empty")]
    Empty(&'static str),
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    #[error(
        "tool `{0}` is new and quarantined: an admin must admit it on its tool page before a skill can use it"
    )]
    ToolNotAdmitted(String),
    #[error("unknown skill `{0}`")]
    UnknownSkill(Slug),
    #[error("unknown role `{0}`")]
    UnknownRole(Slug),
    #[error("unknown upstream `{0}`")]
    UnknownUpstream(Slug),
    #[error("the limit on `{tool}` does not apply: role `{role}` does not grant `{tool}`")]
    ToolNotGranted { role: Slug, tool: String },
    #[error("tool `{tool}` has no argument `{arg}`")]
    UnknownArgument { tool: String, arg: String },
    #[error("`{tool}.{arg}` is not a number, so it cannot be bounded or summed")]
    NotNumeric { tool: String, arg: String },
    #[error("`{tool}.{arg}` is not a string, so a text check cannot apply to it")]
    NotString { tool: String, arg: String },
    #[error("`{tool}` cannot require itself to have succeeded first")]
    RequiresItself { tool: String },
    #[error("the limit on `{tool}` is empty: {what}")]
    EmptyLimit { tool: String, what: &'static str },
    #[error("a cap on `{tool}` must not be negative")]
    NegativeCap { tool: String },
    #[error("the input schema of `{tool}` is not a valid JSON Schema: {reason}")]
    InvalidSchema { tool: String, reason: String },
    #[error("`{pointer}` in the guard on `{tool}` is not a JSON Pointer (write `/field/sub`)")]
    InvalidPointer { tool: String, pointer: String },
    #[error("the result value in the guard on `{tool}` is longer than {max} characters")]
    ResultValueTooLong { tool: String, max: usize },
    #[error("an approval of `{tool}` must be valid for 1 to {max} minutes")]
    ApprovalExpiry { tool: String, max: u32 },
    #[error("`{0}` is listed twice")]
    Duplicate(String),
    #[error("the check on `{tool}.{arg}` is not valid: {reason}")]
    InvalidArgCheck {
        tool: String,
        arg: String,
        reason: String,
    },
}

impl CatalogError {
    /// The field of an entry's form (and of the catalog file's entity) the error is about,
    /// so a console form shows it next to that field rather than guessing from the text.
    pub fn field(&self) -> &'static str {
        match self {
            Self::DescriptionTooLong(_) => "description",
            Self::Empty("role title") => "title",
            Self::Empty("upstream command") => "command",
            Self::Empty(_) => "instructions",
            Self::UnknownSkill(_) => "skills",
            Self::UnknownRole(_) => "roles",
            Self::UnknownTool(_) | Self::ToolNotAdmitted(_) | Self::ToolNotGranted { .. } => "tool",
            Self::UnknownArgument { .. } | Self::NotNumeric { .. } | Self::NotString { .. } => {
                "arg"
            }
            Self::RequiresItself { .. } => "after",
            Self::EmptyLimit { what, .. } if what.contains("tools") => "after",
            Self::EmptyLimit { .. } | Self::NegativeCap { .. } | Self::InvalidArgCheck { .. } => {
                "value"
            }
            Self::InvalidSchema { .. } | Self::UnknownUpstream(_) | Self::Duplicate(_) => "form",
            Self::InvalidPointer { .. } | Self::ResultValueTooLong { .. } => "result",
            Self::ApprovalExpiry { .. } => "minutes",
        }
    }
}
