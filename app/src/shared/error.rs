//! Errors at the console's server-function boundary.

use leptos::server_fn::codec::JsonEncoding;
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};

/// Errors at the console's server-function boundary. What the browser sees: no internals.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum ConsoleError {
    #[error("Your session has ended. Sign in again.")]
    Unauthorized,
    #[error("This needs the {needed} console role; you are signed in as {actual}.")]
    Forbidden { needed: String, actual: String },
    #[error("{0}")]
    Invalid(String),
    /// Input refused because of one form field: the form shows `message` next to `field`.
    #[error("{message}")]
    Field { field: String, message: String },
    #[error("Something went wrong on the server; the error is in the server log.")]
    Internal,
    #[error("{0}")]
    Transport(String),
}

impl FromServerFnError for ConsoleError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        match value {
            // The caller sent arguments the function cannot take: bad input, not a fault.
            ServerFnErrorErr::Args(detail) => {
                ConsoleError::Invalid(format!("The request's arguments are malformed: {detail}"))
            }
            ServerFnErrorErr::MissingArg(name) => {
                ConsoleError::Invalid(format!("The request lacks the argument `{name}`."))
            }
            other => ConsoleError::Transport(other.to_string()),
        }
    }
}

impl ConsoleError {
    /// The HTTP status a server function answers this error with: the caller's fault is a
    /// 4xx, so clients, proxies and the server's log tell it from a failure of the server.
    pub fn http_status(&self) -> u16 {
        match self {
            ConsoleError::Unauthorized => 401,
            ConsoleError::Forbidden { .. } => 403,
            ConsoleError::Invalid(_) | ConsoleError::Field { .. } => 400,
            ConsoleError::Internal | ConsoleError::Transport(_) => 500,
        }
    }
}
