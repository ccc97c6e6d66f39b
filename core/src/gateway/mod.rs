//! The gateway service: the four platform tools (`init_skilder`, `learn`, `call_tool`,
//! `feedback_skill`) as core operations.
//!
//! The MCP adapter in the server authenticates the agent key, then calls these methods
//! and turns a [`ToolReply`] into an MCP `CallToolResult`. Data flows one way:
//! adapter → gateway → policy decision → store / upstream → audit.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::CallToolResult;
use serde_json::Value;

mod call;
mod feedback;
mod init;
mod learn;
mod locks;
mod path;
mod relevance;
pub mod schema_text;

pub use path::{LEARN_PATH_HELP, LearnPath};

use chrono::{DateTime, Utc};

use crate::audit::{AuditError, AuditLog};
use crate::metrics::Metrics;
use crate::policy::{CatalogHandle, Decision, DenyCode};
use crate::slug::Slug;
use crate::store::sessions::StoredSession;
use crate::store::{Store, StoreError};
use crate::upstream::UpstreamPool;

/// Who is calling: the authenticated agent key, its scope, and the MCP connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentIdentity {
    pub key_id: i64,
    /// The key's name, recorded as the audit actor.
    pub key_name: String,
    /// Fixed by the key; never negotiable by the agent.
    pub scope: Slug,
    /// The MCP session id of the connection (`Mcp-Session-Id`), when the transport has one;
    /// a call without `session_id` uses the newest governance session of this connection
    /// and key.
    pub connection: Option<String>,
}

/// What a platform tool returns to the agent.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolReply {
    /// A result the gateway wrote: human-readable text for the model and structured
    /// content for programs. Denials have `is_error: true`.
    Gateway {
        text: String,
        structured: Value,
        is_error: bool,
    },
    /// A downstream tool's result, passed through unchanged.
    Downstream(CallToolResult),
}

/// Failures that are not the agent's fault (the store or audit log failed). Denials are
/// never errors: they are [`ToolReply::Gateway`] with `is_error: true`.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Audit(#[from] AuditError),
}

#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// How long a governance session lives after `init_skilder`.
    pub session_ttl: Duration,
    /// The longest a downstream call may take before the agent gets a timeout error.
    pub call_timeout: Duration,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        Self {
            session_ttl: Duration::from_secs(8 * 3600),
            call_timeout: Duration::from_secs(30),
        }
    }
}

/// The gateway. Cheap to clone; all state that requests depend on lives in the database
/// (sessions, usage), so several processes can share one.
#[derive(Clone)]
pub struct Gateway {
    store: Store,
    catalog: Arc<CatalogHandle>,
    audit: AuditLog,
    upstreams: Arc<UpstreamPool>,
    options: GatewayOptions,
    locks: locks::SessionLocks,
    metrics: Arc<Metrics>,
}

impl Gateway {
    pub fn new(
        store: Store,
        catalog: Arc<CatalogHandle>,
        audit: AuditLog,
        upstreams: Arc<UpstreamPool>,
        options: GatewayOptions,
    ) -> Self {
        Self {
            store,
            catalog,
            audit,
            upstreams,
            options,
            locks: locks::SessionLocks::default(),
            metrics: Arc::new(Metrics::new()),
        }
    }

    /// Records into `metrics` (shared with the HTTP layer, which adds the key check and
    /// whole-request times) instead of a registry of its own.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub fn catalog(&self) -> &CatalogHandle {
        &self.catalog
    }

    pub fn upstreams(&self) -> &UpstreamPool {
        &self.upstreams
    }

    fn now() -> DateTime<Utc> {
        Utc::now()
    }

    /// The session a request names, or the newest one of its connection and key.
    /// `None` when there is none; ownership and expiry are checked by the caller
    /// (by `decide` for calls), so every miss looks the same to the agent.
    async fn resolve_session(
        &self,
        agent: &AgentIdentity,
        session_id: Option<String>,
    ) -> Result<Option<StoredSession>, GatewayError> {
        let id = match session_id.filter(|id| !id.is_empty()) {
            Some(id) => id,
            None => match self
                .store
                .newest_session_id(agent.key_id, agent.connection.as_deref())
                .await?
            {
                Some(id) => id,
                None => return Ok(None),
            },
        };
        Ok(self.store.load_session(&id).await?)
    }

    /// A session the agent may use now: its own and not expired.
    fn usable(
        agent: &AgentIdentity,
        session: Option<StoredSession>,
        now: DateTime<Utc>,
    ) -> Option<StoredSession> {
        session
            .filter(|s| s.view.owner_key_id == agent.key_id.to_string() && now < s.view.expires_at)
    }
}

/// A denial as the agent sees it: `CODE: rule … Available tools: …`, `isError: true`.
pub(crate) fn denial(code: DenyCode, rule: String, available_tools: Vec<String>) -> ToolReply {
    let decision = Decision::Deny {
        code,
        rule,
        role: None,
        available_tools,
    };
    ToolReply::Gateway {
        text: decision.to_string(),
        structured: serde_json::to_value(&decision).expect("a decision serializes"),
        is_error: true,
    }
}

/// The code as `structuredContent` and the audit spell it: `ACCESS_DENIED`, …
pub(crate) fn code_label(code: DenyCode) -> String {
    serde_json::to_value(code)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| code.label().to_owned())
}

pub(crate) const NO_SESSION: &str =
    "The session is unknown, expired or not yours: call `init_skilder` to start a new one.";
