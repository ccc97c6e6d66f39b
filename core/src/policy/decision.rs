//! What `decide` returns: an allow carrying the usage to reserve, or a denial naming the rule.

use std::fmt;

use rust_decimal::Decimal;
use serde::Serialize;

use crate::slug::Slug;

/// Why a call was denied, in the codes the MCP `structuredContent` carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DenyCode {
    AccessDenied,
    GovernanceViolation,
    InvalidArguments,
}

impl DenyCode {
    /// The words a model reads at the start of a denial.
    pub fn label(self) -> &'static str {
        match self {
            Self::AccessDenied => "ACCESS DENIED",
            Self::GovernanceViolation => "GOVERNANCE VIOLATION",
            Self::InvalidArguments => "INVALID ARGUMENTS",
        }
    }
}

/// An amount a call adds to a cumulative cap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReservedAmount {
    pub arg: String,
    pub amount: Decimal,
}

/// The usage an allowed call takes. Only the policy engine creates one, so an `Allow`
/// cannot be forged outside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reservation {
    role: Slug,
    tool: String,
    amounts: Vec<ReservedAmount>,
}

impl Reservation {
    pub(super) fn new(role: Slug, tool: String, amounts: Vec<ReservedAmount>) -> Self {
        Self {
            role,
            tool,
            amounts,
        }
    }

    pub fn role(&self) -> &Slug {
        &self.role
    }

    pub fn tool(&self) -> &str {
        &self.tool
    }

    pub fn amounts(&self) -> &[ReservedAmount] {
        &self.amounts
    }
}

/// The outcome of [`super::decide`]. Serializes to the `structuredContent` of a result:
/// `{"decision":"denied","code":"ACCESS_DENIED",…}` or `{"decision":"allowed",…}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decision")]
pub enum Decision {
    #[serde(rename = "allowed")]
    Allow {
        role: Slug,
        reservation: Reservation,
    },
    #[serde(rename = "denied")]
    Deny {
        code: DenyCode,
        /// A sentence naming the rule that denied, for the model and the audit.
        rule: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        role: Option<Slug>,
        available_tools: Vec<String>,
    },
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Self::Allow { .. })
    }

    pub fn deny_code(&self) -> Option<DenyCode> {
        match self {
            Self::Deny { code, .. } => Some(*code),
            Self::Allow { .. } => None,
        }
    }
}

/// The text a model reads: `GOVERNANCE VIOLATION (role tier-1-support): … Available tools: …`.
impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Allow { role, reservation } => {
                write!(
                    f,
                    "ALLOWED: `{}` authorized by role {role}",
                    reservation.tool()
                )
            }
            Self::Deny {
                code,
                rule,
                role,
                available_tools,
            } => {
                f.write_str(code.label())?;
                if let Some(role) = role {
                    write!(f, " (role {role})")?;
                }
                write!(f, ": {rule}")?;
                if !available_tools.is_empty() {
                    write!(f, " Available tools: {}.", available_tools.join(", "))?;
                }
                Ok(())
            }
        }
    }
}
