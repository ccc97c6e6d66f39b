//! `call_tool`: decide, reserve, audit, execute downstream, audit the result.
//!
//! Ordering is the contract of DESIGN.md: the `call_allowed` event is durable before the
//! upstream is called, and the `call_result` event is durable before the agent gets its
//! answer, so no executed call is ever missing from the audit log.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rmcp::model::ContentBlock;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{AgentIdentity, Gateway, GatewayError, ToolReply, code_label, denial};
use crate::audit::{CallOutcome, NewEvent, redact_sensitive};
use crate::metrics::{Outcome, Phase};
use crate::model::Limit;
use crate::model::UpstreamKind;
use crate::policy::{CallRequest, CompiledCatalog, Decision, DenyCode, SessionView, decide};
use crate::revisions::curator::{META_AGENT, META_SESSION};
use crate::slug::Slug;
use crate::upstream::UpstreamError;

/// How often a decision is retried when another process changed the session in between.
const SAVE_ATTEMPTS: usize = 8;

impl Gateway {
    /// `call_tool`: executes `tool` downstream only if a learned role grants it and that
    /// role's limits pass; otherwise a denial naming the rule.
    #[tracing::instrument(skip_all, fields(key = %agent.key_name, tool = %tool))]
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
        // Only the id here: the session is loaded once, under its lock, below.
        let sid = match session_id.filter(|id| !id.is_empty()) {
            Some(id) => id,
            None => self
                .store
                .newest_session_id(agent.key_id, agent.connection.as_deref())
                .await?
                .unwrap_or_default(),
        };
        let mut session_time = timer.elapsed();
        let catalog = self.catalog.load();
        let sensitive = catalog
            .tool(tool)
            .map(|t| t.spec.sensitive_args.clone())
            .unwrap_or_default();
        let audited_arguments = redact_sensitive(&arguments, &sensitive);
        let key_id = agent.key_id.to_string();

        // Decide and reserve under the session's lock; the revision check on save makes
        // the reservation exact across processes too.
        // Waiting for another call on the same session counts as session time.
        let timer = Instant::now();
        let _guard = self.locks.lock(&sid).await;
        session_time += timer.elapsed();
        let mut attempts = 0;
        let (role, view) = loop {
            let timer = Instant::now();
            let current = if sid.is_empty() {
                None
            } else {
                self.store.load_session(&sid).await?
            };
            session_time += timer.elapsed();
            let request = CallRequest {
                session_id: &sid,
                key_id: &key_id,
                tool,
                arguments: &arguments,
            };
            let timer = Instant::now();
            let decision = decide(&catalog, current.as_ref().map(|s| &s.view), &request, now);
            metrics.observe(Phase::Decide, timer.elapsed());
            match decision {
                decision @ Decision::Deny { .. } => {
                    let Decision::Deny { code, rule, .. } = &decision else {
                        unreachable!()
                    };
                    let denied = Denied {
                        sid: &sid,
                        code: *code,
                        rule,
                        session_time,
                    };
                    self.record_denial(agent, tool, audited_arguments, denied)
                        .await?;
                    return Ok(ToolReply::Gateway {
                        text: decision.to_string(),
                        structured: serde_json::to_value(&decision).expect("a decision serializes"),
                        is_error: true,
                    });
                }
                Decision::Allow { role, reservation } => {
                    let mut stored = current.expect("an allowed call has a session");
                    // Usage that no limit of the authorizing role reads need not be stored:
                    // skipping the write keeps unlimited tools (lookups) at two commits
                    // per call, both of them audit group commits.
                    if !usage_is_limited(&catalog, &role, tool) {
                        break (role, stored.view);
                    }
                    stored.view.reserve(&reservation);
                    let timer = Instant::now();
                    let saved = self
                        .store
                        .save_session_state(&stored.view, stored.revision)
                        .await?;
                    metrics.observe(Phase::Reserve, timer.elapsed());
                    if saved {
                        break (role, stored.view);
                    }
                    attempts += 1;
                    if attempts >= SAVE_ATTEMPTS {
                        // A decision like any other: it is counted and audited.
                        let code = DenyCode::AccessDenied;
                        let rule = "the session is too busy to reserve this call safely; try again";
                        let denied = Denied {
                            sid: &sid,
                            code,
                            rule,
                            session_time,
                        };
                        self.record_denial(agent, tool, audited_arguments, denied)
                            .await?;
                        return Ok(denial(code, rule.to_owned(), Vec::new()));
                    }
                }
            }
        };
        metrics.observe(Phase::Session, session_time);
        metrics.count_decision(Outcome::Allowed);

        let timer = Instant::now();
        self.audit
            .append(NewEvent::call_allowed(
                &sid,
                &agent.key_name,
                tool,
                audited_arguments,
                role.as_str(),
                &learned_versions(&view, &role),
            ))
            .await?;
        metrics.observe(Phase::AuditDecision, timer.elapsed());

        let upstream = catalog
            .tool(tool)
            .map(|t| t.upstream.to_string())
            .unwrap_or_default();
        let arguments = match arguments {
            Value::Object(map) => map,
            _ => Default::default(), // unreachable: decide checked the object schema
        };
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
            Ok(client) => {
                client
                    .call_tool_with_meta(tool, arguments, meta, self.options.call_timeout)
                    .await
            }
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
                        &sid,
                        &agent.key_name,
                        tool,
                        outcome.duration.as_millis() as u64,
                        &audited,
                    ))
                    .await?;
                metrics.observe(Phase::AuditResult, timer.elapsed());
                // Step-order guards only ask whether a tool ever succeeded: record it once.
                if !outcome.is_error && !view.usage.has_succeeded(tool) {
                    self.record_success(&sid, tool).await?;
                }
                Ok(ToolReply::Downstream(outcome.result))
            }
            Err(error) => {
                let message = upstream_message(&error);
                tracing::warn!(%error, %upstream, "downstream call failed");
                self.audit
                    .append(NewEvent::call_result(
                        &sid,
                        &agent.key_name,
                        tool,
                        started.elapsed().as_millis() as u64,
                        &CallOutcome::Error {
                            message: message.clone(),
                        },
                    ))
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

    /// Counts a denial and makes its `call_denied` event durable.
    async fn record_denial(
        &self,
        agent: &AgentIdentity,
        tool: &str,
        audited_arguments: Value,
        denied: Denied<'_>,
    ) -> Result<(), GatewayError> {
        self.metrics.observe(Phase::Session, denied.session_time);
        self.metrics.count_decision(Outcome::Denied(denied.code));
        let timer = Instant::now();
        self.audit
            .append(NewEvent::call_denied(
                denied.sid,
                &agent.key_name,
                tool,
                audited_arguments,
                &code_label(denied.code),
                Some(denied.rule),
            ))
            .await?;
        self.metrics.observe(Phase::AuditDecision, timer.elapsed());
        Ok(())
    }

    /// Marks `tool` as having succeeded in the session, for step-order guards.
    async fn record_success(&self, sid: &str, tool: &str) -> Result<(), GatewayError> {
        for _ in 0..SAVE_ATTEMPTS {
            let Some(mut stored) = self.store.load_session(sid).await? else {
                return Ok(());
            };
            stored.view.record_success(tool);
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

/// A denial as `record_denial` counts and audits it.
struct Denied<'a> {
    sid: &'a str,
    code: DenyCode,
    rule: &'a str,
    session_time: Duration,
}

/// True when a limit of `role` caps the sum or count of `tool`, so its usage must be kept.
fn usage_is_limited(catalog: &CompiledCatalog, role: &Slug, tool: &str) -> bool {
    catalog.role(role.as_str()).is_some_and(|role| {
        role.limits.iter().any(|limit| {
            matches!(limit, Limit::SumCap { tool: t, .. } | Limit::CountCap { tool: t, .. } if t == tool)
        })
    })
}

fn learned_versions(view: &SessionView, role: &Slug) -> BTreeMap<String, u32> {
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

fn first_text(content: &[ContentBlock]) -> String {
    content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.chars().take(500).collect()))
        .unwrap_or_else(|| "the tool reported an error".to_owned())
}

/// What the agent is told about a failed downstream call: the kind of failure, without
/// internal details such as command lines.
fn upstream_message(error: &UpstreamError) -> String {
    match error {
        UpstreamError::Timeout { .. } => "the upstream did not answer in time".to_owned(),
        other => other.to_string(),
    }
}
