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

mod answer;
mod bounds;
mod call;
mod feedback;
mod hold;
mod init;
mod learn;
mod locks;
mod path;
mod pipeline;
mod relevance;
pub mod schema_text;
pub mod skills;
mod task;

pub use answer::{
    AnswerCode, AnswerDecision, ApproverSees, CallAnswer, HoldStatus, NextCall, answer_schema,
    output_schema,
};
pub use bounds::{MAX_ARGUMENTS_BYTES, MAX_LEARN_PATH, MAX_SESSION_ID, MAX_TOOL_NAME};
pub use path::{LEARN_PATH_HELP, LearnPath};
pub use task::{CallTask, Cancelled, POLL_INTERVAL_MS, TASK_PAGE, TaskPage};

use chrono::{DateTime, Utc};

use crate::audit::{AuditError, AuditLog, NewEvent};
use crate::metrics::Metrics;
use crate::policy::{CatalogHandle, Denial, DenyCode};
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

/// The audit actor of a console user acting through the console's try-it panel:
/// `console:<username>`. Agent key names are letters, digits, `.`, `_` and `-`, so no key
/// can ever be named like this.
pub use crate::names::CONSOLE_ACTOR_PREFIX;

/// The audit actor of the console user `username` (see [`AgentIdentity::console_user`]).
pub fn console_actor(username: &str) -> String {
    crate::names::Actor::console(username).to_string()
}

impl AgentIdentity {
    /// A signed-in console user acting as an agent of `scope` (the Connect page's try-it
    /// panel), so their calls are decided, limited, held and audited exactly as an agent's.
    ///
    /// Why not a new principal type: sessions, holds, feedback and rate limits all key
    /// their owner by `key_id` and name the caller by `key_name`, and the pure policy
    /// compares the session owner by that id; a second principal kind would have to be
    /// threaded through every one of them (and the stored columns), for the same rule.
    /// Instead a console user takes the *negative* of their user id as `key_id`, a range
    /// no agent key has (keys are SQLite rowids, from 1; the anonymous scope is 0), so:
    /// a try-it session belongs to no agent key and no key can continue it (nor the user
    /// continue an agent's session); two console users never share one; and the actor,
    /// `console:<username>`, cannot be a key name. The key path is untouched: `/mcp`
    /// still builds identities only from authenticated keys, and only the console's
    /// admin-only server function builds this one. `None` for an id that is not a
    /// stored user's (not positive).
    pub fn console_user(user_id: i64, username: &str, scope: Slug) -> Option<Self> {
        (user_id > 0).then(|| Self {
            key_id: -user_id,
            key_name: console_actor(username),
            scope,
            connection: None,
        })
    }

    /// True for a console user acting through try-it, not an agent key.
    pub fn is_console_user(&self) -> bool {
        self.key_id < 0
    }
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
    /// A downstream tool's result, as it came (after the result inspectors), with the tool
    /// and the role that authorized it.
    Downstream {
        result: CallToolResult,
        tool: String,
        role: Slug,
    },
}

impl ToolReply {
    /// The MCP tool result an agent receives: the text as one text block, the structured
    /// content, `isError` for denials; a downstream result with its content unchanged and
    /// its structured result inside `call_tool`'s answer ([`CallAnswer::ran`]). The MCP
    /// handler and the console's try-it panel both answer with this, so they cannot drift
    /// apart.
    pub fn into_call_result(self) -> CallToolResult {
        match self {
            Self::Gateway {
                text,
                structured,
                is_error,
            } => {
                let content = vec![rmcp::model::ContentBlock::text(text)];
                let mut result = if is_error {
                    CallToolResult::error(content)
                } else {
                    CallToolResult::success(content)
                };
                result.structured_content = Some(structured);
                result
            }
            Self::Downstream { result, tool, role } => {
                CallAnswer::ran(&tool, role.as_str(), result)
            }
        }
    }
}

/// Failures that are not the agent's fault (the store or audit log failed). Denials are
/// never errors: they are [`ToolReply::Gateway`] with `is_error: true`.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The call reached its upstream, then what had to follow (its `call_result`, the
    /// session's record of it) failed: the agent gets no result, and must not take the call
    /// as not executed.
    #[error("the call was executed, then it could not be fully recorded: {0}")]
    AfterExecution(Box<GatewayError>),
}

impl GatewayError {
    /// Whether the database could not serve (see [`StoreError::is_unavailable`]): a
    /// transient failure to retry later, not a fault of the request or the gateway.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Store(error) => error.is_unavailable(),
            Self::Audit(error) => error.is_unavailable(),
            Self::AfterExecution(error) => error.is_unavailable(),
        }
    }

    /// Whether the call reached its upstream before the failure.
    pub fn executed(&self) -> bool {
        matches!(self, Self::AfterExecution(_))
    }

    /// Marks a failure that came after the upstream was called.
    pub(crate) fn after_execution(error: impl Into<GatewayError>) -> Self {
        match error.into() {
            executed @ Self::AfterExecution(_) => executed,
            error => Self::AfterExecution(Box::new(error)),
        }
    }
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

    /// Audits a request whose handling failed unexpectedly (a panic in the gateway), under
    /// the caller alone: the session it named may be the very thing that failed to load.
    /// `tool` is the downstream tool of a `call_tool`, else the platform tool's name.
    pub async fn record_internal_error(
        &self,
        agent: &AgentIdentity,
        tool: &str,
        named_session: Option<&str>,
    ) -> Result<(), GatewayError> {
        self.metrics.count_panic();
        self.record_refusal(
            agent,
            tool,
            named_session,
            DenyCode::InternalError,
            "the gateway failed while handling this request",
        )
        .await
    }

    /// Audits and counts a request the MCP adapter refused before any platform tool ran
    /// (malformed arguments, an unknown platform tool), under the caller alone.
    #[tracing::instrument(skip_all, fields(key = %agent.key_name, code = code.as_str()))]
    pub async fn record_refusal(
        &self,
        agent: &AgentIdentity,
        tool: &str,
        named_session: Option<&str>,
        code: DenyCode,
        rule: &str,
    ) -> Result<(), GatewayError> {
        self.metrics
            .count_decision(crate::metrics::Outcome::Denied(code));
        let named = named_session.filter(|id| id.chars().count() <= bounds::MAX_SESSION_ID);
        let event = NewEvent::call_denied(
            &agent.key_name,
            &bounds::audited_tool(tool),
            serde_json::Value::Null,
            code.as_str(),
            Some(&bounds::audited_rule(rule)),
        );
        self.audit
            .append(Place::caller_naming(named).place(event))
            .await?;
        Ok(())
    }

    /// A session the agent may use now: its own, of the scope it acts in, and not expired.
    /// A key's scope is fixed, so the scope check only ever refuses a console user whose
    /// request names another scope than their try-it session started in: `learn` reads
    /// the caller's scope, and a session must never learn outside the scope it began with.
    fn usable(
        agent: &AgentIdentity,
        session: Option<StoredSession>,
        now: DateTime<Utc>,
    ) -> Option<StoredSession> {
        session.filter(|s| {
            s.view.owner_key_id == agent.key_id.to_string()
                && s.view.scope == agent.scope
                && now < s.view.expires_at
        })
    }
}

/// A denial as the agent sees it: `CODE: rule … Available tools: …`, `isError: true`.
pub(crate) fn denial(code: DenyCode, rule: String, available_tools: Vec<String>) -> ToolReply {
    refusal(Denial::new(code, rule).with_available(available_tools))
}

/// Any [`Denial`] as the tool result the agent reads.
pub(crate) fn refusal(denial: Denial) -> ToolReply {
    CallAnswer::denied(denial).into_reply()
}

/// The code as `structuredContent` and the audit spell it: `ACCESS_DENIED`, …
pub(crate) fn code_label(code: DenyCode) -> String {
    code.as_str().to_owned()
}

pub(crate) const NO_SESSION: &str =
    "The session is unknown, expired or not yours: call `init_skilder` to start a new one.";

/// Where the events of one request belong: in the caller's own session, or, when the
/// request names a session the caller does not own (or none that exists), with the caller
/// alone, recording only a digest of the id it named. A foreign session's timeline and
/// export never carry another key's events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Place {
    Session(String),
    Caller { named: Option<String> },
}

impl Place {
    /// `owned` says whether a stored session `sid` exists and belongs to the caller.
    pub(crate) fn of(sid: &str, owned: bool) -> Self {
        if owned {
            Self::Session(sid.to_owned())
        } else if sid.is_empty() {
            Self::Caller { named: None }
        } else {
            Self::Caller {
                named: Some(sid.to_owned()),
            }
        }
    }

    /// The place of a request whose named session was never looked up.
    pub(crate) fn caller_naming(named: Option<&str>) -> Self {
        Self::Caller {
            named: named.filter(|id| !id.is_empty()).map(str::to_owned),
        }
    }

    pub(crate) fn place(&self, event: NewEvent) -> NewEvent {
        match self {
            Self::Session(sid) => event.in_session(sid.clone()),
            Self::Caller { named: Some(named) } => event.naming_session(named),
            Self::Caller { named: None } => event,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn events_of_a_foreign_or_unknown_session_stay_with_the_caller() {
        let event = || NewEvent::learn_denied("mallory", "/roles/x", "ACCESS_DENIED");
        let own = Place::of("ses_1", true).place(event());
        assert_eq!(own.session_id.as_deref(), Some("ses_1"));
        let foreign = Place::of("ses_victim", false).place(event());
        assert_eq!(foreign.session_id, None);
        assert!(foreign.payload["named_session_digest"].is_string());
        let none = Place::of("", false).place(event());
        assert_eq!(none.session_id, None);
        assert_eq!(none.payload.get("named_session_digest"), None);
        assert_eq!(none.payload["path"], json!("/roles/x"));
    }
}
