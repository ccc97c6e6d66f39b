//! One live MCP client session with an upstream, and the mapping of rmcp errors.

use std::collections::{BTreeMap, HashMap};
use std::error::Error as StdError;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{ClientInitializeError, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::transport::{DynamicTransportError, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{Peer, RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStderr, Command};

use super::http::{PooledHttp, keep_alive_client_watched, parse_ca_bundle};
use super::identity::IdentityWatch;
use super::{Secret, UpstreamConfig, UpstreamError, check_extra_header};

/// A handshaken session. Dropping it ends the session; for stdio that kills the child.
pub(super) struct Connection {
    peer: Peer<RoleClient>,
    service: RunningService<RoleClient, ClientConfig>,
    pid: Option<u32>,
    started_at: Instant,
    /// Set once the upstream has answered a request after the handshake. A process that
    /// dies before that counts as a failed start for the restart backoff.
    answered: AtomicBool,
}

impl Connection {
    /// Starts or connects to `upstream` and completes the MCP handshake. The identity it
    /// presents (certificate key, `serverInfo`) is recorded in `watch`; one that differs
    /// from the pinned identity closes the connection before any request.
    pub(super) async fn open(
        upstream: &str,
        config: &UpstreamConfig,
        watch: &Arc<IdentityWatch>,
    ) -> Result<Self, UpstreamError> {
        let started_at = Instant::now();
        match config {
            UpstreamConfig::Stdio { command, args, env } => {
                let mut cmd = Command::new(command);
                cmd.args(args).envs(env).kill_on_drop(true);
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|source| UpstreamError::Spawn {
                        upstream: upstream.to_owned(),
                        command: command.clone(),
                        source,
                    })?;
                let pid = transport.id();
                if let Some(stderr) = stderr {
                    tokio::spawn(forward_stderr(upstream.to_owned(), pid, stderr));
                }
                let service = client_config()
                    .serve(transport)
                    .await
                    .map_err(|e| init_error(upstream, config, &e))?;
                tracing::info!(upstream, pid, command = %command, "started stdio upstream");
                check_identity(upstream, &service, watch, false)?;
                Ok(Self::new(service, pid, started_at))
            }
            UpstreamConfig::Http {
                url,
                bearer,
                ca_bundle,
                headers,
                allow_plaintext,
            } => {
                // Again here: a row stored before the check, or around the admin door,
                // must not be dialled in clear.
                crate::model::check_upstream_url(url, *allow_plaintext).map_err(|reason| {
                    UpstreamError::Connect {
                        upstream: upstream.to_owned(),
                        target: url.clone(),
                        reason,
                    }
                })?;
                let mut transport_config =
                    StreamableHttpClientTransportConfig::with_uri(url.as_str())
                        .reinit_on_expired_session(true)
                        .custom_headers(extra_headers(upstream, config, headers)?);
                if let Some(bearer) = bearer {
                    transport_config = transport_config.auth_header(bearer.expose());
                }
                let transport = StreamableHttpClientTransport::with_client(
                    http_client(upstream, config, ca_bundle.as_deref(), watch)?,
                    transport_config,
                );
                let service = client_config()
                    .serve(transport)
                    .await
                    .map_err(|e| init_error(upstream, config, &e))?;
                tracing::info!(upstream, url = %url, "connected to http upstream");
                check_identity(upstream, &service, watch, url.starts_with("https:"))?;
                Ok(Self::new(service, None, started_at))
            }
            UpstreamConfig::InProcess(server) => {
                // Generous buffer: a proposal carries a whole skill's instructions.
                let (client_io, server_io) = tokio::io::duplex(256 * 1024);
                server.start(server_io);
                let service = client_config()
                    .serve(client_io)
                    .await
                    .map_err(|e| init_error(upstream, config, &e))?;
                tracing::info!(upstream, "connected to in-process upstream");
                Ok(Self::new(service, None, started_at))
            }
        }
    }

    fn new(
        service: RunningService<RoleClient, ClientConfig>,
        pid: Option<u32>,
        started_at: Instant,
    ) -> Self {
        Self {
            peer: service.peer().clone(),
            service,
            pid,
            started_at,
            answered: AtomicBool::new(false),
        }
    }

    /// A cheap handle for requests; clones multiplex over the same session.
    pub(super) fn peer(&self) -> &Peer<RoleClient> {
        &self.peer
    }

    pub(super) fn pid(&self) -> Option<u32> {
        self.pid
    }

    pub(super) fn started_at(&self) -> Instant {
        self.started_at
    }

    /// False once the transport has closed (process exited, stream ended).
    pub(super) fn is_alive(&self) -> bool {
        !self.service.is_closed() && !self.peer.is_transport_closed()
    }

    pub(super) fn mark_answered(&self) {
        self.answered.store(true, Ordering::Relaxed);
    }

    pub(super) fn has_answered(&self) -> bool {
        self.answered.load(Ordering::Relaxed)
    }
}

/// Records the identity the handshake of `service` presented; an error when it differs
/// from the pin (the caller drops the session, which closes it).
fn check_identity(
    upstream: &str,
    service: &RunningService<RoleClient, ClientConfig>,
    watch: &IdentityWatch,
    tls: bool,
) -> Result<(), UpstreamError> {
    let (name, version) = service
        .peer_info()
        .and_then(|info| info.server_info.clone())
        .map(|server| (server.name, server.version))
        .unwrap_or_default();
    let (seen, matches) = watch.handshake(tls, &name, &version);
    if matches {
        return Ok(());
    }
    let reason = watch
        .pinned()
        .map_or_else(String::new, |pinned| pinned.quarantine_reason(&seen));
    tracing::warn!(upstream, %reason, "upstream identity changed: connection closed");
    Err(UpstreamError::IdentityChanged {
        upstream: upstream.to_owned(),
        reason,
    })
}

/// The pooled client of an HTTP upstream, trusting its CA bundle beside the system roots,
/// whose TLS verifier records (and checks) the certificate's key in `watch`.
/// The admin door refuses a bundle that does not parse, so failing here means the stored
/// catalog was changed around it.
fn http_client(
    upstream: &str,
    config: &UpstreamConfig,
    ca_bundle: Option<&str>,
    watch: &Arc<IdentityWatch>,
) -> Result<PooledHttp, UpstreamError> {
    let refused = |what: &str, reason: String| UpstreamError::Connect {
        upstream: upstream.to_owned(),
        target: config.target().to_owned(),
        reason: format!("{what}: {reason}"),
    };
    let roots = match ca_bundle {
        Some(pem) => parse_ca_bundle(pem)
            .map_err(|reason| refused("its CA bundle cannot be used", reason))?,
        None => Vec::new(),
    };
    let client = keep_alive_client_watched(&roots, watch.clone())
        .map_err(|reason| refused("its TLS client cannot be built", reason))?;
    let tls = config.target().starts_with("https:");
    Ok(PooledHttp::watched(client, watch.clone(), tls))
}

/// The extra headers as rmcp sends them on every request (checked again: a stored row is
/// not trusted to have come through the admin door).
fn extra_headers(
    upstream: &str,
    config: &UpstreamConfig,
    headers: &BTreeMap<String, Secret>,
) -> Result<HashMap<HeaderName, HeaderValue>, UpstreamError> {
    headers
        .iter()
        .map(|(name, value)| {
            check_extra_header(name, value.expose())
                .and_then(|_| {
                    let name =
                        HeaderName::from_bytes(name.as_bytes()).map_err(|e| e.to_string())?;
                    let mut value =
                        HeaderValue::from_str(value.expose()).map_err(|e| e.to_string())?;
                    value.set_sensitive(true);
                    Ok((name, value))
                })
                .map_err(|reason| UpstreamError::Connect {
                    upstream: upstream.to_owned(),
                    target: config.target().to_owned(),
                    reason: format!("its extra header cannot be sent: {reason}"),
                })
        })
        .collect()
}

fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("skillgate", env!("CARGO_PKG_VERSION")),
    )
}

/// The child's stderr is its log: it goes to tracing, never to our stdout, without the
/// colour codes a child may write even into a pipe.
async fn forward_stderr(upstream: String, pid: Option<u32>, stderr: ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => {
                let line = plain_text(&line);
                tracing::info!(target: "skillgate::upstream::stderr", upstream, pid, "{line}")
            }
            Ok(None) => break,
            Err(error) => {
                tracing::debug!(upstream, pid, %error, "stopped reading upstream stderr");
                break;
            }
        }
    }
}

/// A line of an upstream's stderr without terminal escape sequences.
fn plain_text(line: &str) -> String {
    String::from_utf8_lossy(&strip_ansi_escapes::strip(line)).into_owned()
}

fn init_error(
    upstream: &str,
    config: &UpstreamConfig,
    error: &ClientInitializeError,
) -> UpstreamError {
    let stdio = matches!(config, UpstreamConfig::Stdio { .. });
    let reason = match error {
        // A child that exits early shows up as end of stream or as a broken stdin pipe,
        // depending on who gets there first.
        ClientInitializeError::ConnectionClosed(_) if stdio => {
            "the process exited before completing the MCP handshake".to_owned()
        }
        ClientInitializeError::TransportError { error, .. } if stdio => format!(
            "the process exited before completing the MCP handshake ({})",
            transport_reason(error)
        ),
        ClientInitializeError::TransportError { error, context } => {
            format!("{} (during: {context})", transport_reason(error))
        }
        other => error_chain(other),
    };
    if error.is_authorization_required() || is_auth_status(&reason) {
        return UpstreamError::Unauthorized {
            upstream: upstream.to_owned(),
        };
    }
    let transport: Option<&(dyn StdError + 'static)> = match error {
        ClientInitializeError::TransportError { error, .. } => Some(error.error.as_ref()),
        _ => None,
    };
    if let Some(problem) = transport.and_then(certificate_problem) {
        return UpstreamError::Certificate {
            upstream: upstream.to_owned(),
            reason: problem,
        };
    }
    UpstreamError::Connect {
        upstream: upstream.to_owned(),
        target: config.target().to_owned(),
        reason,
    }
}

/// Maps a failed request.
pub(super) fn request_error(upstream: &str, error: ServiceError) -> UpstreamError {
    let upstream = upstream.to_owned();
    match error {
        ServiceError::McpError(data) => UpstreamError::Rpc {
            upstream,
            code: data.code.0,
            message: data.message.into_owned(),
        },
        ServiceError::TransportSend(ref transport) => {
            let reason = transport_reason(transport);
            if error.is_authorization_required() || is_auth_status(&reason) {
                UpstreamError::Unauthorized { upstream }
            } else if let Some(problem) = certificate_problem(transport.error.as_ref()) {
                UpstreamError::Certificate {
                    upstream,
                    reason: problem,
                }
            } else {
                UpstreamError::Disconnected { upstream, reason }
            }
        }
        ServiceError::TransportClosed | ServiceError::Cancelled { .. } => {
            UpstreamError::Disconnected {
                upstream,
                reason: error_chain(&error),
            }
        }
        ServiceError::Timeout { timeout } => UpstreamError::Timeout {
            upstream,
            operation: "the request".to_owned(),
            timeout,
        },
        other => UpstreamError::Protocol {
            upstream,
            reason: error_chain(&other),
        },
    }
}

/// rmcp classifies a 401/403 as "authorization required" only when it carries a
/// `WWW-Authenticate` challenge; a bare one arrives as an unexpected response.
fn is_auth_status(reason: &str) -> bool {
    reason.contains("unexpected server response: HTTP 401")
        || reason.contains("unexpected server response: HTTP 403")
}

/// What was wrong with the upstream's certificate, when the TLS handshake rejected it
/// (unknown issuer, wrong host name, expired …). Two links of the chain hide what they
/// wrap from `source()`: rmcp's `StreamableHttpError::Client` (the reqwest error) and the
/// `io::Error`s (nested) around rustls' error, so both are looked into.
fn certificate_problem(error: &(dyn StdError + 'static)) -> Option<String> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(StreamableHttpError::Client(inner)) =
            error.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            current = Some(inner);
            continue;
        }
        if let Some(inner) = error
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            current = Some(inner);
            continue;
        }
        let tls = error.downcast_ref::<rustls::Error>();
        if let Some(
            tls @ (rustls::Error::InvalidCertificate(_)
            | rustls::Error::NoCertificatesPresented
            | rustls::Error::UnsupportedNameType),
        ) = tls
        {
            return Some(tls.to_string());
        }
        current = error.source();
    }
    None
}

/// The transport's own error chain, without rmcp's wrapper (which names the transport's
/// generic type).
fn transport_reason(error: &DynamicTransportError) -> String {
    error_chain(error.error.as_ref())
}

/// `outer: inner: root`, skipping a source whose text the outer message already contains.
fn error_chain(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(current) = source {
        let part = current.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = current.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_coloured_stderr_line_of_an_upstream_is_relayed_as_plain_text() {
        let coloured = "\u{1b}[2m2026-12-01T12:00:00Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m ready";
        assert_eq!(
            super::plain_text(coloured),
            "2026-12-01T12:00:00Z  INFO ready"
        );
        assert_eq!(super::plain_text("no colour here"), "no colour here");
    }
}
