//! The one error type of the upstream boundary.

use std::time::Duration;

/// Why an upstream operation did not produce a result.
///
/// A downstream tool that reports an error (`isError: true`) is not an `UpstreamError`: it is
/// a successful [`CallOutcome`](super::CallOutcome) whose `is_error` is set.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    #[error("no upstream named `{upstream}` is configured")]
    Unknown { upstream: String },

    #[error("upstream `{upstream}`: cannot start `{command}`: {source}")]
    Spawn {
        upstream: String,
        command: String,
        #[source]
        source: std::io::Error,
    },

    #[error("upstream `{upstream}`: cannot connect to {target}: {reason}")]
    Connect {
        upstream: String,
        target: String,
        reason: String,
    },

    #[error("upstream `{upstream}` refused our credentials (HTTP 401/403)")]
    Unauthorized { upstream: String },

    #[error(
        "upstream `{upstream}`: the connection was lost during the request ({reason}); \
         the call may or may not have run and was not retried"
    )]
    Disconnected { upstream: String, reason: String },

    #[error("upstream `{upstream}`: {operation} did not finish within {timeout:?}")]
    Timeout {
        upstream: String,
        operation: String,
        timeout: Duration,
    },

    #[error("upstream `{upstream}` is restarting after repeated failures; retry in {retry_in:?}")]
    BackingOff {
        upstream: String,
        retry_in: Duration,
    },

    #[error("upstream `{upstream}` answered with an error: {message} (JSON-RPC code {code})")]
    Rpc {
        upstream: String,
        code: i32,
        message: String,
    },

    #[error("upstream `{upstream}`: {reason}")]
    Protocol { upstream: String, reason: String },
}

impl UpstreamError {
    /// The upstream the error is about.
    pub fn upstream(&self) -> &str {
        match self {
            Self::Unknown { upstream }
            | Self::Spawn { upstream, .. }
            | Self::Connect { upstream, .. }
            | Self::Unauthorized { upstream }
            | Self::Disconnected { upstream, .. }
            | Self::Timeout { upstream, .. }
            | Self::BackingOff { upstream, .. }
            | Self::Rpc { upstream, .. }
            | Self::Protocol { upstream, .. } => upstream,
        }
    }
}
