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

    #[error("upstream `{upstream}`: its TLS certificate is not trusted: {reason}")]
    Certificate { upstream: String, reason: String },

    /// The upstream presented another identity than the pinned one (another certificate
    /// key, another `serverInfo`): the connection was closed before any request.
    #[error("upstream `{upstream}`: its identity differs from the pinned one ({reason})")]
    IdentityChanged { upstream: String, reason: String },

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
            | Self::Certificate { upstream, .. }
            | Self::IdentityChanged { upstream, .. }
            | Self::Unauthorized { upstream }
            | Self::Disconnected { upstream, .. }
            | Self::Timeout { upstream, .. }
            | Self::BackingOff { upstream, .. }
            | Self::Rpc { upstream, .. }
            | Self::Protocol { upstream, .. } => upstream,
        }
    }

    /// A low-cardinality name of the kind of failure (a trace's `error.type`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unknown { .. } => "unknown_upstream",
            Self::Spawn { .. } => "spawn",
            Self::Connect { .. } => "connect",
            Self::Certificate { .. } => "certificate",
            Self::IdentityChanged { .. } => "identity_changed",
            Self::Unauthorized { .. } => "unauthorized",
            Self::Disconnected { .. } => "disconnected",
            Self::Timeout { .. } => "timeout",
            Self::BackingOff { .. } => "backing_off",
            Self::Rpc { .. } => "rpc",
            Self::Protocol { .. } => "protocol",
        }
    }
}

impl UpstreamError {
    /// What the agent is told: the kind of failure and the upstream's name, never a command
    /// line, URL, header, token or the upstream's own error text (those stay in the log and
    /// the audit, through `Display`).
    pub fn agent_message(&self) -> String {
        match self {
            Self::Unknown { upstream } => {
                format!("the upstream `{upstream}` of this tool is not configured")
            }
            Self::Spawn { upstream, .. } => {
                format!("the upstream `{upstream}` could not be started")
            }
            Self::Connect { upstream, .. } => {
                format!("the upstream `{upstream}` could not be reached")
            }
            Self::Certificate { upstream, .. } => format!(
                "the TLS certificate of the upstream `{upstream}` was not trusted by the gateway"
            ),
            Self::IdentityChanged { upstream, .. } => format!(
                "the upstream `{upstream}` presented another identity than the pinned one; \
                 it is quarantined until an admin admits it"
            ),
            Self::Unauthorized { upstream } => {
                format!("the upstream `{upstream}` refused the gateway's credentials")
            }
            Self::Disconnected { upstream, .. } => format!(
                "the connection to the upstream `{upstream}` was lost during the call; \
                 it may or may not have run and was not retried"
            ),
            Self::Timeout { upstream, .. } => {
                format!("the upstream `{upstream}` did not answer in time")
            }
            Self::BackingOff { upstream, retry_in } => format!(
                "the upstream `{upstream}` is restarting after repeated failures; retry in {} s",
                retry_in.as_secs().max(1)
            ),
            Self::Rpc { upstream, code, .. } => {
                format!("the upstream `{upstream}` answered with an error (JSON-RPC code {code})")
            }
            Self::Protocol { upstream, .. } => {
                format!("the upstream `{upstream}` sent an answer the gateway could not use")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMAND: &str = "/opt/acme/bin/crm-mcp";
    const URL: &str = "http://crm.internal:8443/mcp?api_key=sk-live-4242";
    const TOKEN: &str = "sk-live-4242";

    /// One error of every variant, each carrying a command line, URL or token where the
    /// variant has room for one.
    fn every_variant() -> Vec<UpstreamError> {
        let upstream = || "crm".to_owned();
        let secret = format!("{COMMAND} --token {TOKEN} ({URL})");
        vec![
            UpstreamError::Unknown {
                upstream: upstream(),
            },
            UpstreamError::Spawn {
                upstream: upstream(),
                command: format!("{COMMAND} --token {TOKEN}"),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, secret.clone()),
            },
            UpstreamError::Connect {
                upstream: upstream(),
                target: URL.to_owned(),
                reason: format!(
                    "error sending request for url ({URL}): Authorization: Bearer {TOKEN}"
                ),
            },
            UpstreamError::Certificate {
                upstream: upstream(),
                reason: format!("invalid peer certificate: UnknownIssuer ({URL})"),
            },
            UpstreamError::Unauthorized {
                upstream: upstream(),
            },
            UpstreamError::Disconnected {
                upstream: upstream(),
                reason: secret.clone(),
            },
            UpstreamError::Timeout {
                upstream: upstream(),
                operation: format!("tools/call `x` at {URL}"),
                timeout: Duration::from_secs(30),
            },
            UpstreamError::BackingOff {
                upstream: upstream(),
                retry_in: Duration::from_millis(1500),
            },
            UpstreamError::Rpc {
                upstream: upstream(),
                code: -32603,
                message: secret.clone(),
            },
            UpstreamError::Protocol {
                upstream: upstream(),
                reason: secret.clone(),
            },
            UpstreamError::IdentityChanged {
                upstream: upstream(),
                reason: secret,
            },
        ]
    }

    #[test]
    fn the_agent_message_names_the_kind_of_failure_and_no_command_url_or_token() {
        for error in every_variant() {
            let message = error.agent_message();
            for leak in [COMMAND, URL, TOKEN, "crm.internal", "--token", "Bearer"] {
                assert!(
                    !message.contains(leak),
                    "{error:?} tells the agent `{leak}`: {message}"
                );
            }
            assert!(message.contains("`crm`"), "{message}");
        }
    }

    #[test]
    fn the_full_detail_stays_in_the_display_text_for_the_log_and_audit() {
        let spawn = &every_variant()[1];
        assert!(spawn.to_string().contains(COMMAND), "{spawn}");
        assert_eq!(
            spawn.agent_message(),
            "the upstream `crm` could not be started"
        );
    }

    #[test]
    fn each_kind_of_failure_reads_differently() {
        let messages: std::collections::BTreeSet<String> = every_variant()
            .iter()
            .map(UpstreamError::agent_message)
            .collect();
        assert_eq!(messages.len(), every_variant().len());
        assert!(
            every_variant()[6]
                .agent_message()
                .contains("did not answer in time")
        );
        assert!(every_variant()[7].agent_message().ends_with("retry in 1 s"));
    }
}
