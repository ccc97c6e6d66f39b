//! The execute and settle stages: the upstream call of a permitted, durably recorded
//! call; the result's inspection; its `call_result` (with what the inspection found),
//! durable before the agent hears the answer; then the success record step-order guards
//! and the secret-flow inspector read.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tracing::Instrument as _;

use super::SAVE_ATTEMPTS;
use super::inspect::{Inspection, inspect_result, run_hooks};
use crate::audit::{CallOutcome, EventKind, InspectedPart, NewEvent, redact_sensitive};
use crate::gateway::{
    AgentIdentity, AnswerCode, AnswerDecision, CallAnswer, Gateway, GatewayError, ToolReply,
};
use crate::inspect::Inspectors;
use crate::inspect::hook::HookCall;
use crate::metrics::Phase;
use crate::model::{CallScope, HookStage, Inspector, UpstreamKind};
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
        let scope = CallScope {
            tool,
            role: Some(role.as_str()),
            scope: Some(view.scope.as_str()),
        };
        // What a result hook is told the call carried (the permit goes to the upstream),
        // sensitive arguments by their digest, as the audit keeps them.
        let hooked = catalog
            .catalog()
            .inspection
            .hooks_for(HookStage::Result, &scope)
            .next()
            .is_some()
            .then(|| {
                let sensitive = catalog
                    .tool(tool)
                    .map(|t| t.spec.sensitive_args.as_slice())
                    .unwrap_or_default();
                redact_sensitive(&Value::Object(permit.arguments().clone()), sensitive)
            });
        let stage = self.metrics.stage(Phase::Upstream);
        let outcome = match self.upstreams.get(&upstream) {
            Ok(client) => client.call(permit, meta, self.options.call_timeout).await,
            Err(error) => Err(error),
        };
        let upstream_time = stage.elapsed();
        drop(stage);
        match outcome {
            Ok(mut outcome) => {
                // The client serialized the result once; the digest reads those bytes.
                let digest = (!outcome.is_error).then(|| CallOutcome::Ok {
                    result_size: outcome.json.len() as u64,
                    result_digest: hex::encode(Sha256::digest(&outcome.json)),
                });
                let hooked = hooked.as_ref().map(|arguments| HookCall {
                    tool,
                    upstream: &upstream,
                    role: scope.role,
                    scope: scope.scope,
                    session_id: sid,
                    arguments,
                });
                let inspection = self
                    .inspect_result_stage(
                        catalog,
                        &scope,
                        hooked.as_ref(),
                        &mut outcome.result,
                        outcome.json.len(),
                    )
                    .await;
                let audited = match digest {
                    Some(digest) => digest,
                    None => CallOutcome::Error {
                        message: error_message(&outcome.result, &inspection),
                    },
                };
                let millis = outcome.duration.as_millis() as u64;
                let found = inspection
                    .event(&agent.key_name, tool, InspectedPart::Result)
                    .map(|event| event.in_session(sid));
                self.settle(agent, sid, tool, millis, &audited, found)
                    .await
                    .map_err(GatewayError::after_execution)?;
                inspection.count(&self.metrics);
                let succeeded = (!outcome.is_error).then_some(&outcome.result);
                let seen = (upstream.as_str(), inspection.secret_fingerprints());
                self.record_success(sid, tool, view, &note, succeeded, seen)
                    .await
                    .map_err(GatewayError::after_execution)?;
                if inspection.blocked() {
                    return Ok(inspection.blocked_result_reply(tool));
                }
                Ok(ToolReply::Downstream {
                    result: outcome.result,
                    tool: tool.to_owned(),
                    role,
                })
            }
            Err(error) => {
                let message = error.agent_message();
                tracing::warn!(%error, %upstream, "downstream call failed");
                let audited = CallOutcome::Error {
                    message: error.to_string(),
                };
                let millis = upstream_time.as_millis() as u64;
                self.settle(agent, sid, tool, millis, &audited, None)
                    .await
                    .map_err(GatewayError::after_execution)?;
                Ok(upstream_error(tool, &role, message))
            }
        }
    }

    /// The result inspection stage: timed and traced, under the catalog's policy: the
    /// built-in inspectors, then the hooks (`hooked`: the call, when a hook reads it).
    async fn inspect_result_stage(
        &self,
        catalog: &CompiledCatalog,
        scope: &CallScope<'_>,
        hooked: Option<&HookCall<'_>>,
        result: &mut CallToolResult,
        bytes: usize,
    ) -> Inspection {
        let stage = self
            .metrics
            .stage(Phase::Inspect)
            .traced(trace::inspect_span(InspectedPart::Result.as_str()));
        let policy = &catalog.catalog().inspection;
        let mut inspection = stage
            .span()
            .in_scope(|| inspect_result(policy, scope, result, bytes));
        if let Some(call) = hooked {
            let asked = inspection.len();
            run_hooks(
                policy,
                scope,
                call,
                Some(result),
                &self.metrics,
                &mut inspection,
            )
            .instrument(stage.span().clone())
            .await;
            // A hook's replacement is new content: the built-in inspectors read it too, so
            // a hook cannot bring back what they redacted or add what they would refuse.
            if inspection.replaced_since(asked) && !inspection.blocked() {
                let bytes = serde_json::to_vec(&*result).map_or(usize::MAX, |json| json.len());
                let again = stage
                    .span()
                    .in_scope(|| inspect_result(policy, scope, result, bytes));
                inspection.absorb(again);
            }
        }
        inspection
    }

    /// The settle stage: the call's `call_result`, durable before the agent's answer, in
    /// one append with what the result's inspection found.
    async fn settle(
        &self,
        agent: &AgentIdentity,
        sid: &str,
        tool: &str,
        millis: u64,
        outcome: &CallOutcome,
        found: Option<NewEvent>,
    ) -> Result<(), GatewayError> {
        let stage = self
            .metrics
            .stage(Phase::AuditResult)
            .traced(trace::audit_span(EventKind::CallResult));
        let event = NewEvent::call_result(sid, &agent.key_name, tool, millis, outcome);
        self.audit
            .append_batch(found.into_iter().chain([event]).collect())
            .instrument(stage.span().clone())
            .await?;
        Ok(())
    }

    /// Records a success for step-order guards: that `tool` succeeded once (plain guards),
    /// and what it succeeded with when a bound guard compares against it; and the secrets
    /// the result brought into the session (`seen`: the upstream and their fingerprints),
    /// which the secret-flow inspector reads, whether or not the call succeeded.
    async fn record_success(
        &self,
        sid: &str,
        tool: &str,
        view: &SessionView,
        note: &SuccessNote,
        succeeded: Option<&CallToolResult>,
        seen: (&str, Vec<&str>),
    ) -> Result<(), GatewayError> {
        let outcome = match succeeded {
            Some(result) if note.is_watched() => note.outcome(structured_result(result).as_ref()),
            _ => None,
        };
        let (upstream, secrets) = seen;
        let records = succeeded.is_some() && (outcome.is_some() || !view.usage.has_succeeded(tool));
        // The common case, a tool already recorded and watched by no bound guard, and no
        // secret in its result, writes nothing.
        if !records && secrets.is_empty() {
            return Ok(());
        }
        for _ in 0..SAVE_ATTEMPTS {
            let Some(mut stored) = self.store.load_session(sid).await? else {
                return Ok(());
            };
            let recorded = succeeded.is_some() && stored.view.record_success(tool, outcome.clone());
            let remembered = stored.view.see_secrets(upstream, secrets.iter().copied());
            if !recorded && !remembered {
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
/// command line, URL or credential (the audit keeps the detail). No remedy: the upstream
/// may have acted before it failed (a timeout), so calling again is not advice to give.
fn upstream_error(tool: &str, role: &crate::slug::Slug, message: String) -> ToolReply {
    CallAnswer::new(
        AnswerDecision::Allowed,
        AnswerCode::UpstreamError,
        format!("UPSTREAM ERROR: `{tool}` was allowed but did not complete: {message}"),
    )
    .tool(tool)
    .role(role.as_str())
    .into_reply()
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

/// What the audit keeps of a tool's error: its first text, with any secret the inspection
/// found redacted even where the policy only flags it (the audit never stores one).
fn error_message(result: &CallToolResult, inspection: &Inspection) -> String {
    if inspection.found(Inspector::Secrets) {
        let mut copy = result.clone();
        Inspectors::shared().redact_result(&mut copy, &[Inspector::Secrets]);
        return first_text(&copy.content);
    }
    first_text(&result.content)
}

fn first_text(content: &[ContentBlock]) -> String {
    content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.chars().take(500).collect()))
        .unwrap_or_else(|| "the tool reported an error".to_owned())
}
