//! The errors a demo tool reports to its caller, each with a stable code prefix.

use serde_json::{Value, json};

/// A tool-level failure. It travels back as a tool result with `isError: true`, its text
/// reading `CODE: message`, so both a model and a test can match on the code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    #[error("UNKNOWN_TOOL: the demo upstream serves no tool named {0}")]
    UnknownTool(String),
    #[error("INVALID_ARGUMENTS: {0}")]
    InvalidArguments(String),
    #[error("CUSTOMER_NOT_FOUND: no customer with {0}")]
    CustomerNotFound(String),
    #[error("ORDER_NOT_FOUND: customer {customer_id} has no order {order_id}")]
    OrderNotFound {
        customer_id: String,
        order_id: String,
    },
    #[error("USER_NOT_FOUND: no user with id {0}")]
    UserNotFound(String),
    #[error("NOT_ELIGIBLE: {0}")]
    NotEligible(String),
    #[error("SERVICE_CREDIT_DECLINED: {0}")]
    ServiceCreditDeclined(String),
    #[error("CONFIRMATION_REQUIRED: deleting {0} is irreversible; call again with confirm = true")]
    ConfirmationRequired(String),
    #[error("POLICY_NOT_FOUND: no response policy on {topic}; topics: {available}")]
    PolicyNotFound { topic: String, available: String },
}

impl ToolError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownTool(_) => "UNKNOWN_TOOL",
            Self::InvalidArguments(_) => "INVALID_ARGUMENTS",
            Self::CustomerNotFound(_) => "CUSTOMER_NOT_FOUND",
            Self::OrderNotFound { .. } => "ORDER_NOT_FOUND",
            Self::UserNotFound(_) => "USER_NOT_FOUND",
            Self::NotEligible(_) => "NOT_ELIGIBLE",
            Self::ServiceCreditDeclined(_) => "SERVICE_CREDIT_DECLINED",
            Self::ConfirmationRequired(_) => "CONFIRMATION_REQUIRED",
            Self::PolicyNotFound { .. } => "POLICY_NOT_FOUND",
        }
    }

    pub fn to_structured(&self) -> Value {
        json!({ "error": { "code": self.code(), "message": self.to_string() } })
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::InvalidArguments(message.into())
    }
}
