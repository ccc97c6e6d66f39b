//! [`UpstreamClient`]: one upstream, connected lazily and restarted when it dies.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, JsonObject, MetaObject, PingRequest,
    RequestMetaObject,
};
use rmcp::service::ServiceError;
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio::time::timeout_at;
use tracing::Instrument as _;

use super::connection::{Connection, request_error};
use super::identity::IdentityWatch;
use super::{UpstreamConfig, UpstreamError};
use crate::model::{ToolSpec, UpstreamIdentity};
use crate::policy::Permit;
use crate::trace::{self, UpstreamTransport};

/// Timeouts and restart backoff of one [`UpstreamClient`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamOptions {
    /// Upper bound of a start (spawn or HTTP connect) plus the MCP handshake.
    pub connect_timeout: Duration,
    /// Upper bound of `tools/list`, which takes no timeout argument.
    pub list_timeout: Duration,
    /// Wait before the second start attempt of an upstream that keeps failing; doubles per
    /// consecutive failure up to `max_backoff`.
    pub min_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for UpstreamOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(30),
            list_timeout: Duration::from_secs(30),
            min_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(30),
        }
    }
}

impl UpstreamOptions {
    fn backoff(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let factor = 1u32.checked_shl(failures - 1).unwrap_or(u32::MAX);
        self.min_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

/// The result of one downstream tool call, passed through unchanged.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    /// Exactly what the upstream returned.
    pub result: CallToolResult,
    /// The upstream's own verdict (`isError`); a tool error is still an outcome.
    pub is_error: bool,
    /// Wall time of the call, including a (re)connect it needed.
    pub duration: Duration,
    /// `result` serialized as JSON: what the audit digests and the size cap measures, made
    /// once per call.
    pub json: Vec<u8>,
}

/// A client for one upstream MCP server.
///
/// The first request starts the process (stdio) or opens the session (HTTP). Requests run
/// concurrently over that one session: the lock below guards only the connection slot and
/// is never held while a request is in flight.
///
/// Supervision: a request that finds the session dead (the child exited, the stream closed)
/// opens a fresh one before sending, so it succeeds transparently. A request already sent
/// when the session dies fails with [`UpstreamError::Disconnected`] and is not retried: tools
/// are not idempotent and the upstream may have run it, so delivery is at most once. Starts
/// that fail, and sessions that die before answering anything, count as consecutive
/// failures; after `n` of them the next start waits `min_backoff * 2^(n-1)` (capped) from
/// the previous start, and requests inside that window get [`UpstreamError::BackingOff`]
/// at once instead of spawning a crash-looping command again.
pub struct UpstreamClient {
    name: String,
    config: UpstreamConfig,
    options: UpstreamOptions,
    slot: Arc<Mutex<Slot>>,
    /// The pinned identity and the one last presented (see [`super::identity`]).
    watch: Arc<IdentityWatch>,
    /// Told when a connection presents another identity than the pinned one, or an
    /// upgrade of it (the same party with another version).
    on_identity_change: Option<IdentityHook>,
}

/// What the pool calls when an upstream (by name) presented an identity other than the
/// pinned one, so the quarantine (or, for a new version alone, the upgrade) is recorded
/// without waiting for the next sync.
pub type IdentityHook = Arc<dyn Fn(&str, UpstreamIdentity) + Send + Sync>;

#[derive(Default)]
struct Slot {
    current: Option<Arc<Connection>>,
    failures: u32,
    not_before: Option<Instant>,
}

impl Slot {
    fn record_failure(&mut self, started_at: Instant, options: &UpstreamOptions) {
        self.failures = self.failures.saturating_add(1);
        self.not_before = Some(started_at + options.backoff(self.failures));
    }
}

impl std::fmt::Debug for UpstreamClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamClient")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl UpstreamClient {
    pub fn new(name: impl Into<String>, config: UpstreamConfig) -> Self {
        Self::with_options(name, config, UpstreamOptions::default())
    }

    pub fn with_options(
        name: impl Into<String>,
        config: UpstreamConfig,
        options: UpstreamOptions,
    ) -> Self {
        Self {
            name: name.into(),
            config,
            options,
            slot: Arc::default(),
            watch: Arc::default(),
            on_identity_change: None,
        }
    }

    /// With `hook` told of every identity change a connection meets.
    pub fn with_identity_hook(mut self, hook: Option<IdentityHook>) -> Self {
        self.on_identity_change = hook;
        self
    }

    /// Sets the identity every new connection must present (`None`: not pinned yet). A
    /// live session is not reopened; a reconnect, or a new TLS connection under it, is
    /// checked against the pin.
    pub fn pin_identity(&self, identity: Option<UpstreamIdentity>) {
        self.watch.pin(identity);
    }

    /// The identity the upstream presented at its last handshake (its certificate's key
    /// as last verified); `None` before the first.
    pub fn seen_identity(&self) -> Option<UpstreamIdentity> {
        self.watch.seen()
    }

    /// `error`, or [`UpstreamError::IdentityChanged`] when the upstream presented another
    /// identity than the pinned one (a refused certificate key surfaces as a TLS error
    /// first); the hook is told.
    fn identity_checked(&self, error: UpstreamError) -> UpstreamError {
        let Some(offered) = self.watch.mismatch() else {
            return error;
        };
        let reason = match &error {
            UpstreamError::IdentityChanged { reason, .. } => reason.clone(),
            _ => self
                .watch
                .pinned()
                .map_or_else(String::new, |pinned| pinned.quarantine_reason(&offered)),
        };
        if let Some(hook) = &self.on_identity_change {
            hook(&self.name, offered);
        }
        UpstreamError::IdentityChanged {
            upstream: self.name.clone(),
            reason,
        }
    }

    /// Tells the hook of an upgrade the last handshake met (the pinned party with another
    /// version) and pins it here, so it is reported once; the call goes on.
    fn upgrade_noted(&self) {
        if let Some(upgrade) = self.watch.take_upgrade() {
            tracing::info!(upstream = %self.name, version = %upgrade.server_version, "upstream upgraded");
            self.watch.pin(Some(upgrade.clone()));
            if let Some(hook) = &self.on_identity_change {
                hook(&self.name, upgrade);
            }
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn config(&self) -> &UpstreamConfig {
        &self.config
    }

    /// The tools the upstream advertises (all pages), bounded by `options.list_timeout`.
    pub async fn list_tools(&self) -> Result<Vec<ToolSpec>, UpstreamError> {
        let timeout = self.options.list_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let connection = self.connection_by(deadline, timeout).await?;
        let tools = self
            .request_by(
                deadline,
                timeout,
                "tools/list",
                &connection,
                connection.peer().list_all_tools(),
            )
            .await?;
        Ok(tools
            .into_iter()
            .map(|tool| ToolSpec {
                name: tool.name.into_owned(),
                description: tool.description.map(|d| d.into_owned()).unwrap_or_default(),
                input_schema: serde_json::Value::Object(Arc::unwrap_or_clone(tool.input_schema)),
                output_schema: tool
                    .output_schema
                    .map(|schema| serde_json::Value::Object(Arc::unwrap_or_clone(schema))),
                // All hints absent is no annotations: `{}` and a missing field pin alike.
                annotations: tool
                    .annotations
                    .and_then(|a| serde_json::to_value(a).ok())
                    .filter(|a| a.as_object().is_none_or(|map| !map.is_empty())),
                sensitive_args: Vec::new(),
            })
            .collect())
    }

    /// Executes the call a [`Permit`] allows, consuming it: only the policy engine mints
    /// permits, so nothing reaches an upstream that `decide` did not allow, and each permit
    /// runs at most once. The whole call, including a (re)connect, ends within `timeout` (a
    /// timed-out request is cancelled at the upstream with `notifications/cancelled`).
    ///
    /// `meta` is request `_meta`: how the gateway tells an in-process upstream which agent
    /// is calling (outside upstreams get none of that). When the call is traced, the trace
    /// context joins it (`traceparent`, `tracestate`), for every upstream; an HTTP upstream
    /// also gets it as headers (see [`super::http`]).
    #[tracing::instrument(skip_all, fields(upstream = %self.name, tool = %permit.tool()))]
    pub async fn call(
        &self,
        permit: Permit,
        mut meta: Option<JsonObject>,
        timeout: Duration,
    ) -> Result<CallOutcome, UpstreamError> {
        let transport = match &self.config {
            UpstreamConfig::Http { url, .. } => UpstreamTransport::Http(url),
            UpstreamConfig::Stdio { .. } => UpstreamTransport::Stdio,
            UpstreamConfig::InProcess(_) => UpstreamTransport::InProcess,
        };
        let span = trace::upstream_span(permit.tool(), &self.name, transport);
        trace::inject_into_meta(&span, &mut meta);
        let outcome = self
            .call_traced(permit, meta, timeout)
            .instrument(span.clone())
            .await;
        match &outcome {
            Ok(outcome) if outcome.is_error => {
                trace::record_error(&span, "tool_error", "the tool reported an error")
            }
            Ok(_) => {}
            Err(error) => trace::record_error(&span, error.kind(), error.agent_message()),
        }
        outcome
    }

    async fn call_traced(
        &self,
        permit: Permit,
        meta: Option<JsonObject>,
        timeout: Duration,
    ) -> Result<CallOutcome, UpstreamError> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        let connection = self.connection_by(deadline, timeout).await?;
        let (tool, arguments, _) = permit.into_call();
        let operation = format!("tools/call `{tool}`");
        let mut params = CallToolRequestParams::new(tool).with_arguments(arguments);
        params.meta = meta.map(|m| RequestMetaObject(MetaObject(m)));
        let result = self
            .request_by(
                deadline,
                timeout,
                &operation,
                &connection,
                connection.peer().call_tool(params),
            )
            .await?;
        let json = serde_json::to_vec(&result).unwrap_or_default();
        Ok(CallOutcome {
            is_error: result.is_error.unwrap_or(false),
            duration: started.elapsed(),
            json,
            result,
        })
    }

    /// A `ping` round trip (connecting first if needed); returns its latency.
    pub async fn ping(&self, timeout: Duration) -> Result<Duration, UpstreamError> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        let connection = self.connection_by(deadline, timeout).await?;
        let ping = ClientRequest::PingRequest(PingRequest {
            method: Default::default(),
            extensions: Default::default(),
        });
        self.request_by(
            deadline,
            timeout,
            "ping",
            &connection,
            connection.peer().send_request(ping),
        )
        .await?;
        Ok(started.elapsed())
    }

    /// Whether a live session exists right now (no connect is attempted).
    pub async fn is_connected(&self) -> bool {
        let slot = self.slot.lock().await;
        slot.current.as_ref().is_some_and(|c| c.is_alive())
    }

    /// The pid of the running stdio child, if there is one.
    pub async fn process_id(&self) -> Option<u32> {
        let slot = self.slot.lock().await;
        slot.current
            .as_ref()
            .filter(|c| c.is_alive())
            .and_then(|c| c.pid())
    }

    async fn connection_by(
        &self,
        deadline: tokio::time::Instant,
        timeout: Duration,
    ) -> Result<Arc<Connection>, UpstreamError> {
        let connection = timeout_at(deadline, self.connection())
            .await
            .map_err(|_| UpstreamError::Timeout {
                upstream: self.name.clone(),
                operation: "connecting".to_owned(),
                timeout,
            })?
            .map_err(|error| self.identity_checked(error))?;
        self.upgrade_noted();
        Ok(connection)
    }

    async fn request_by<T>(
        &self,
        deadline: tokio::time::Instant,
        timeout: Duration,
        operation: &str,
        connection: &Connection,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, UpstreamError> {
        match timeout_at(deadline, request).await {
            Ok(Ok(value)) => {
                connection.mark_answered();
                // A new session under the connection (an HTTP upstream that restarted) may
                // have met an upgrade.
                self.upgrade_noted();
                Ok(value)
            }
            Ok(Err(error)) => {
                if matches!(error, ServiceError::McpError(_)) {
                    connection.mark_answered();
                }
                // A new TLS connection under the session met another certificate key.
                Err(self.identity_checked(request_error(&self.name, error)))
            }
            Err(_) => Err(UpstreamError::Timeout {
                upstream: self.name.clone(),
                operation: operation.to_owned(),
                timeout,
            }),
        }
    }

    /// The live session, opening one if there is none or the last one died.
    async fn connection(&self) -> Result<Arc<Connection>, UpstreamError> {
        let mut slot = self.slot.clone().lock_owned().await;
        if let Some(dead) = slot.current.take_if(|c| !c.is_alive()) {
            if dead.has_answered() {
                slot.failures = 0;
            } else {
                slot.record_failure(dead.started_at(), &self.options);
            }
            tracing::warn!(upstream = %self.name, pid = dead.pid(), "upstream session ended; starting a new one");
        }
        if let Some(live) = &slot.current {
            return Ok(live.clone());
        }
        if let Some(not_before) = slot.not_before {
            let now = Instant::now();
            if now < not_before {
                return Err(UpstreamError::BackingOff {
                    upstream: self.name.clone(),
                    retry_in: not_before - now,
                });
            }
        }
        // The start runs in its own task, which owns the lock: a caller that gives up (its
        // timeout, a dropped request) neither aborts a start other callers wait for nor
        // skips recording its failure.
        let task = tokio::spawn(open_into(
            slot,
            self.name.clone(),
            self.config.clone(),
            self.options.clone(),
            self.watch.clone(),
        ));
        task.await.unwrap_or_else(|join_error| {
            Err(UpstreamError::Protocol {
                upstream: self.name.clone(),
                reason: format!("the connect task failed: {join_error}"),
            })
        })
    }
}

async fn open_into(
    mut slot: OwnedMutexGuard<Slot>,
    name: String,
    config: UpstreamConfig,
    options: UpstreamOptions,
    watch: Arc<IdentityWatch>,
) -> Result<Arc<Connection>, UpstreamError> {
    let started_at = Instant::now();
    let open = Connection::open(&name, &config, &watch);
    let opened = match tokio::time::timeout(options.connect_timeout, open).await {
        Ok(opened) => opened,
        Err(_) => Err(UpstreamError::Timeout {
            upstream: name.clone(),
            operation: "starting and the MCP handshake".to_owned(),
            timeout: options.connect_timeout,
        }),
    };
    match opened {
        Ok(connection) => {
            let connection = Arc::new(connection);
            slot.current = Some(connection.clone());
            Ok(connection)
        }
        Err(error) => {
            slot.record_failure(started_at, &options);
            tracing::warn!(upstream = %name, %error, failures = slot.failures, "upstream start failed");
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_minimum_and_is_capped() {
        let options = UpstreamOptions {
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(500),
            ..UpstreamOptions::default()
        };
        let waits: Vec<_> = (0..6).map(|n| options.backoff(n).as_millis()).collect();
        assert_eq!(waits, [0, 100, 200, 400, 500, 500]);
        assert_eq!(options.backoff(u32::MAX), Duration::from_millis(500));
    }
}
