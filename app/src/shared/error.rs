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
        ConsoleError::Transport(value.to_string())
    }
}
