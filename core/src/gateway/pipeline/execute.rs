//! The execute and settle stages: the upstream call of a permitted, durably recorded
//! call; its `call_result`, durable before the agent hears the answer; then the success
//! record step-order guards read.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tracing::Instrument as _;

use super::SAVE_ATTEMPTS;
use crate::audit::{CallOutcome, EventKind, NewEvent};
use crate::gateway::{AgentIdentity, Gateway, GatewayError, ToolReply};
use crate::metrics::Phase;
use crate::model::UpstreamKind;
use crate::policy::{CompiledCatalog, Permit, SessionView, SuccessNote};
use crate::revisions::curator::{META_AGENT, META_SESSION};
use crate::trace;

impl Gateway {
    /// Executes a permitted call whose `call_allowed` event is durable, then settles it.
    pub(super) async fn execute(
        &self,
        agent: &AgentIdentity,
        catalog: &CompiledCatalog,
        sid: &str,
        view: &SessionView,
        mut permit: Permit,
    ) -> Result<ToolReply, GatewayError> {
        let tool = permit.tool().to_owned();
        let tool = tool.as_str();
        let role = permit.role().clone();
        let note = permit.take_note();
        let upstream = catalog
            .tool(tool)
            .map(|t| t.upstream.to_string())
            .unwrap_or_default();
        // A built-in upstream learns who is calling (the curator's proposer identity);
        // outside upstreams never see the agent's key name.
        let builtin = catalog
            .catalog()
            .upstreams
            .iter()
            .any(|u| u.name.as_str() == upstream && u.kind == UpstreamKind::Builtin);
        let meta = builtin.then(|| {
            let mut meta = serde_json::Map::new();
            meta.insert(META_AGENT.to_owned(), json!(agent.key_name));
            meta.insert(META_SESSION.to_owned(), json!(sid));
            meta
        });
        let stage = self.metrics.stage(Phase::Upstream);
        let outcome = match self.upstreams.get(&upstream) {
            Ok(client) => client.call(permit, meta, self.options.call_timeout).await,
            Err(error) => Err(error),
        };
        let upstream_time = stage.elapsed();
        drop(stage);
        match outcome {
            Ok(outcome) => {
                let audited = if outcome.is_error {
                    CallOutcome::Error {
                        message: first_text(&outcome.result.content),
                    }
                } else {
                    let bytes = serde_json::to_vec(&outcome.result).unwrap_or_default();
                    CallOutcome::Ok {
                        result_size: bytes.len() as u64,
                        result_digest: hex::encode(Sha256::digest(&bytes)),
                    }
                };
                let millis = outcome.duration.as_millis() as u64;
                self.settle(agent, sid, tool, millis, &audited).await?;
                if !outcome.is_error {
                    self.record_success(sid, tool, view, &note, &outcome.result)
                        .await?;
                }
                Ok(ToolReply::Downstream(outcome.result))
            }
            Err(error) => {
                let message = error.agent_message();
                tracing::warn!(%error, %upstream, "downstream call failed");
                let audited = CallOutcome::Error {
                    message: error.to_string(),
                };
                let millis = upstream_time.as_millis() as u64;
                self.settle(agent, sid, tool, millis, &audited).await?;
                Ok(upstream_error(tool, &role, message))
            }
        }
    }

    /// The settle stage: the call's `call_result`, durable before the agent's answer.
    async fn settle(
        &self,
        agent: &AgentIdentity,
        sid: &str,
        tool: &str,
        millis: u64,
        outcome: &CallOutcome,
    ) -> Result<(), GatewayError> {
        let stage = self
            .metrics
            .stage(Phase::AuditResult)
            .traced(trace::audit_span(EventKind::CallResult));
        let event = NewEvent::call_result(sid, &agent.key_name, tool, millis, outcome);
        self.audit
            .append(event)
            .instrument(stage.span().clone())
            .await?;
        Ok(())
    }

    /// Records a success for step-order guards: that `tool` succeeded once (plain guards),
    /// and what it succeeded with when a bound guard compares against it.
    async fn record_success(
        &self,
        sid: &str,
        tool: &str,
        view: &SessionView,
        note: &SuccessNote,
        result: &CallToolResult,
    ) -> Result<(), GatewayError> {
        let outcome = if note.is_watched() {
            note.outcome(structured_result(result).as_ref())
        } else {
            None
        };
        // The common case, a tool already recorded and watched by no bound guard, writes nothing.
        if outcome.is_none() && view.usage.has_succeeded(tool) {
            return Ok(());
        }
        for _ in 0..SAVE_ATTEMPTS {
            let Some(mut stored) = self.store.load_session(sid).await? else {
                return Ok(());
            };
            if !stored.view.record_success(tool, outcome.clone()) {
                return Ok(());
            }
            if self
                .store
                .save_session_state(&stored.view, stored.revision)
                .await?
            {
                return Ok(());
            }
        }
        tracing::warn!(
            session = sid,
            tool,
            "could not record a success after retries"
        );
        Ok(())
    }
}

/// What the agent is told about a failed downstream call: the kind of failure, never a
/// command line, URL or credential (the audit keeps the detail).
fn upstream_error(tool: &str, role: &crate::slug::Slug, message: String) -> ToolReply {
    ToolReply::Gateway {
        text: format!("UPSTREAM ERROR: `{tool}` was allowed but did not complete: {message}"),
        structured: json!({
            "decision": "allowed",
            "code": "UPSTREAM_ERROR",
            "tool": tool,
            "role": role,
            "message": message,
        }),
        is_error: true,
    }
}

/// The structured result a guard's condition reads: `structuredContent`, or else a single
/// text block that is a JSON object (how many servers answer).
fn structured_result(result: &CallToolResult) -> Option<Value> {
    if let Some(structured) = &result.structured_content {
        return Some(structured.clone());
    }
    match result.content.as_slice() {
        [only] => only
            .as_text()
            .and_then(|t| serde_json::from_str::<Value>(&t.text).ok())
            .filter(Value::is_object),
        _ => None,
    }
}

fn first_text(content: &[ContentBlock]) -> String {
    content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.chars().take(500).collect()))
        .unwrap_or_else(|| "the tool reported an error".to_owned())
}
