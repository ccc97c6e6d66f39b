//! `call_tool`: decide, reserve, audit, execute downstream, audit the result.
//!
//! Ordering is the contract of DESIGN.md: the `call_allowed` event is durable before the
//! upstream is called, and the `call_result` event is durable before the agent gets its
//! answer, so no executed call is ever missing from the audit log.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use opentelemetry::KeyValue;
use tracing::Instrument as _;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::hold::HoldOutcome;
use super::{AgentIdentity, Gateway, GatewayError, Place, ToolReply, bounds, code_label, refusal};
use crate::audit::{CallOutcome, NewEvent, redact_sensitive};
use crate::metrics::{Outcome, Phase};
use crate::model::UpstreamKind;
use crate::policy::{
    Arguments, CallRequest, CompiledCatalog, Decision, Denial, DenyCode, Permit, SessionView,
    SuccessNote, decide,
};
use crate::revisions::curator::{META_AGENT, META_SESSION};
use crate::slug::Slug;
use crate::trace;
use crate::upstream::UpstreamError;

/// How often a decision is retried when another process changed the session in between.
const SAVE_ATTEMPTS: usize = 8;

impl Gateway {
    /// `call_tool`: executes `tool` downstream only if a learned role grants it and every
    /// limit that binds the call passes; otherwise a denial naming the rule. Every outcome,
    /// including a refusal of the request's shape, is audited before the agent hears it.
    #[tracing::instrument(skip_all, fields(key = %agent.key_name, tool = %bounds::audited_tool(tool)))]
    pub async fn call(
        &self,
        agent: &AgentIdentity,
        session_id: Option<String>,
        tool: &str,
        arguments: Value,
    ) -> Result<ToolReply, GatewayError> {
        let now = Self::now();
        let metrics = &self.metrics;
        let timer = Instant::now();
        let named = session_id.filter(|id| !id.is_empty());
        let oversized = bounds::session_id(named.as_deref())
            .and_then(|()| bounds::tool_name(tool))
            .and_then(|()| bounds::arguments(&arguments));
        if let Err(rule) = oversized {
            // Nothing of it is looked up: the refusal stays with the caller.
            let denied = Denied {
                place: Place::caller_naming(named.as_deref()),
                denial: Denial::new(DenyCode::InvalidArguments, rule),
                session_time: timer.elapsed(),
            };
            let arguments = bounds::audited_arguments(arguments);
            return self
                .record_denial(agent, &bounds::audited_tool(tool), arguments, denied)
                .await;
        }
        // Only the id here: the session is loaded once, under its lock, below.
        let sid = match named {
            Some(id) => id,
            None => self
                .store
                .newest_session_id(agent.key_id, agent.connection.as_deref())
                .await?
                .unwrap_or_default(),
        };
        let mut session_time = timer.elapsed();
        if !sid.is_empty() {
            trace::record_current([KeyValue::new(trace::SESSION_ID, sid.clone())]);
        }
        let catalog = self.catalog.load();
        let sensitive = catalog
            .tool(tool)
            .map(|t| t.spec.sensitive_args.clone())
            .unwrap_or_default();
        let audited_arguments = redact_sensitive(&arguments, &sensitive);
        let key_id = agent.key_id.to_string();
        // One representation from here to the upstream: the JSON object the agent sent.
        let mut arguments: Result<Arguments, ()> = match arguments {
            Value::Object(map) => Ok(map),
            _ => Err(()),
        };

        // Decide and reserve under the session's lock; the revision check on save makes
        // the reservation exact across processes too.
        // Waiting for another call on the same session counts as session time.
        let timer = Instant::now();
        let _guard = self.locks.lock(&sid).await;
        session_time += timer.elapsed();
        let mut attempts = 0;
        let (permit, view) = loop {
            let timer = Instant::now();
            let current = if sid.is_empty() {
                None
            } else {
                self.store.load_session(&sid).await?
            };
            session_time += timer.elapsed();
            let owned = current
                .as_ref()
                .is_some_and(|s| s.view.owner_key_id == key_id);
            let place = Place::of(&sid, owned);
            let Ok(args) = arguments else {
                let denied = Denied {
                    place,
                    denial: Denial::new(
                        DenyCode::InvalidArguments,
                        "`arguments` must be a JSON object of the tool's arguments.",
                    ),
                    session_time,
                };
                return self
                    .record_denial(agent, tool, audited_arguments, denied)
                    .await;
            };
            let request = CallRequest {
                session_id: &sid,
                key_id: &key_id,
                tool,
                arguments: args,
                approved: None,
            };
            let timer = Instant::now();
            let decide_span = trace::decide_span();
            let decision = decide_span
                .in_scope(|| decide(&catalog, current.as_ref().map(|s| &s.view), request, now));
            metrics.observe(Phase::Decide, timer.elapsed());
            record_decision(&decide_span, &decision);
            let permit = match decision {
                Decision::Deny(denial) => {
                    let denied = Denied {
                        place,
                        denial,
                        session_time,
                    };
                    return self
                        .record_denial(agent, tool, audited_arguments, denied)
                        .await;
                }
                Decision::Hold(hold) => {
                    let Some(stored) = current else {
                        unreachable!("decide holds only in a stored session")
                    };
                    metrics.observe(Phase::Session, session_time);
                    match self
                        .hold_call(agent, &catalog, stored, hold, &audited_arguments, now)
                        .await?
                    {
                        HoldOutcome::Answered(reply) => return Ok(reply),
                        HoldOutcome::Resume(row) => {
                            return self.resume_locked(agent, &catalog, *row, now).await;
                        }
                        HoldOutcome::Conflict(args) => {
                            attempts += 1;
                            if attempts >= SAVE_ATTEMPTS {
                                let denied = Denied {
                                    place,
                                    denial: Denial::new(
                                        DenyCode::AccessDenied,
                                        "The session is too busy to hold this call safely; try again.",
                                    ),
                                    session_time,
                                };
                                return self
                                    .record_denial(agent, tool, audited_arguments, denied)
                                    .await;
                            }
                            arguments = Ok(args);
                            continue;
                        }
                    }
                }
                Decision::Allow(permit) => permit,
            };
            let Some(mut stored) = current else {
                unreachable!("decide allows only in a stored session")
            };
            if !permit.reserves_usage() {
                break (permit, stored.view);
            }
            stored.view.reserve(&permit);
            let timer = Instant::now();
            let saved = self
                .store
                .save_session_state(&stored.view, stored.revision)
                .await?;
            metrics.observe(Phase::Reserve, timer.elapsed());
            if saved {
                break (permit, stored.view);
            }
            attempts += 1;
            if attempts >= SAVE_ATTEMPTS {
                // A decision like any other: it is counted and audited.
                let denied = Denied {
                    place,
                    denial: Denial::new(
                        DenyCode::AccessDenied,
                        "The session is too busy to reserve this call safely; try again.",
                    ),
                    session_time,
                };
                return self
                    .record_denial(agent, tool, audited_arguments, denied)
                    .await;
            }
            arguments = Ok(permit.into_arguments());
        };
        metrics.observe(Phase::Session, session_time);
        metrics.count_decision(Outcome::Allowed);

        let timer = Instant::now();
        self.audit
            .append(NewEvent::call_allowed(
                &sid,
                &agent.key_name,
                &permit,
                audited_arguments,
                &learned_versions(&view, permit.role()),
            ))
            .instrument(trace::audit_span("call_allowed"))
            .await?;
        metrics.observe(Phase::AuditDecision, timer.elapsed());

        self.run_permitted(agent, &catalog, &sid, &view, permit)
            .await
    }

    /// Executes a permitted call whose `call_allowed` event is durable: the upstream call,
    /// its durable `call_result`, and the success guards wait for.
    pub(super) async fn run_permitted(
        &self,
        agent: &AgentIdentity,
        catalog: &CompiledCatalog,
        sid: &str,
        view: &SessionView,
        mut permit: Permit,
    ) -> Result<ToolReply, GatewayError> {
        let metrics = &self.metrics;
        let tool = permit.tool().to_owned();
        let tool = tool.as_str();
        let role = permit.role().clone();
        let note = permit.take_note();
        let upstream = catalog
            .tool(tool)
            .map(|t| t.upstream.to_string())
            .unwrap_or_default();
        let started = Instant::now();
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
        let outcome = match self.upstreams.get(&upstream) {
            Ok(client) => client.call(permit, meta, self.options.call_timeout).await,
            Err(error) => Err(error),
        };
        metrics.observe(Phase::Upstream, started.elapsed());
        let timer = Instant::now();
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
                self.audit
                    .append(NewEvent::call_result(
                        sid,
                        &agent.key_name,
                        tool,
                        outcome.duration.as_millis() as u64,
                        &audited,
                    ))
                    .instrument(trace::audit_span("call_result"))
                    .await?;
                metrics.observe(Phase::AuditResult, timer.elapsed());
                if !outcome.is_error {
                    self.record_success(sid, tool, view, &note, &outcome.result)
                        .await?;
                }
                Ok(ToolReply::Downstream(outcome.result))
            }
            Err(error) => {
                let message = upstream_message(&error);
                tracing::warn!(%error, %upstream, "downstream call failed");
                self.audit
                    .append(NewEvent::call_result(
                        sid,
                        &agent.key_name,
                        tool,
                        started.elapsed().as_millis() as u64,
                        &CallOutcome::Error {
                            message: error.to_string(),
                        },
                    ))
                    .instrument(trace::audit_span("call_result"))
                    .await?;
                metrics.observe(Phase::AuditResult, timer.elapsed());
                Ok(ToolReply::Gateway {
                    text: format!(
                        "UPSTREAM ERROR: `{tool}` was allowed but did not complete: {message}"
                    ),
                    structured: json!({
                        "decision": "allowed",
                        "code": "UPSTREAM_ERROR",
                        "tool": tool,
                        "role": role,
                        "message": message,
                    }),
                    is_error: true,
                })
            }
        }
    }

    /// Counts a denial, makes its `call_denied` event durable where it belongs, and answers
    /// the agent with it.
    pub(super) async fn record_denial(
        &self,
        agent: &AgentIdentity,
        tool: &str,
        audited_arguments: Value,
        denied: Denied,
    ) -> Result<ToolReply, GatewayError> {
        let Denied {
            place,
            denial,
            session_time,
        } = denied;
        self.metrics.observe(Phase::Session, session_time);
        self.metrics.count_decision(Outcome::Denied(denial.code));
        trace::record_decision(
            &tracing::Span::none(),
            "denied",
            Some(&code_label(denial.code)),
            denial.role.as_ref().map(Slug::as_str),
        );
        let timer = Instant::now();
        let event = NewEvent::call_denied(
            &agent.key_name,
            tool,
            audited_arguments,
            &code_label(denial.code),
            Some(&bounds::audited_rule(&denial.rule)),
        );
        self.audit
            .append(place.place(event))
            .instrument(trace::audit_span("call_denied"))
            .await?;
        self.metrics.observe(Phase::AuditDecision, timer.elapsed());
        Ok(refusal(denial))
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

/// Puts a decision on the trace: its kind, the class of rule that denied or held it (the
/// rule's sentence can quote argument values, so it stays in the audit log) and the role.
fn record_decision(span: &tracing::Span, decision: &Decision) {
    match decision {
        Decision::Allow(permit) => {
            trace::record_decision(span, "allowed", None, Some(permit.role().as_str()));
        }
        Decision::Hold(hold) => trace::record_decision(
            span,
            "pending_approval",
            Some("REQUIRES_APPROVAL"),
            Some(hold.permit().role().as_str()),
        ),
        Decision::Deny(denial) => trace::record_decision(
            span,
            "denied",
            Some(&code_label(denial.code)),
            denial.role.as_ref().map(Slug::as_str),
        ),
    }
}

/// A denial as `record_denial` counts, places and audits it.
pub(super) struct Denied {
    pub place: Place,
    pub denial: Denial,
    pub session_time: Duration,
}

pub(super) fn learned_versions(view: &SessionView, role: &Slug) -> BTreeMap<String, u32> {
    view.learned
        .iter()
        .find(|l| &l.role == role)
        .map(|l| {
            l.skills
                .iter()
                .map(|s| (s.skill.to_string(), s.version))
                .collect()
        })
        .unwrap_or_default()
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

/// What the agent is told about a failed downstream call: the kind of failure, never a
/// command line, URL or credential (the audit keeps the detail).
fn upstream_message(error: &UpstreamError) -> String {
    error.agent_message()
}
