//! The built-in `curation` upstream: an rmcp server inside the skillgate process that serves
//! the curator tools (`list_skill_feedback`, `get_skill`, `add_wiki_pattern`,
//! `propose_skill_revision`). Agents reach it only through the gateway, so the router, the
//! role's limits and the audit govern it like any other upstream; the gateway passes the
//! calling agent's key name in the request `_meta`, which is the proposer identity, and
//! its governance session, whose scope bounds what the tools read: a skill that no role
//! of the caller's scope includes is refused as if it did not exist. Proposals are
//! rate-limited per key ([`super::limits::PROPOSALS`]).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::{Map, Value, json};

use super::limits::{PROPOSALS, retry_after_secs};
use super::service::{Proposal, RevisionError, Revisions};
use crate::store::StoreError;
use crate::store::revisions::{MAX_PAGE, Proposer, page_size};
use crate::upstream::{InProcessServer, UpstreamConfig};

pub use crate::model::curation::{CURATION_UPSTREAM, builtin_catalog_parts, curator_tool_specs};
/// `_meta` key with the calling agent's key name, set by the gateway.
pub const META_AGENT: &str = "skillgate/agent";
/// `_meta` key with the governance session of the call, set by the gateway.
pub const META_SESSION: &str = "skillgate/session";

/// How the upstream pool reaches the curation server: a fresh server task per connection.
pub fn in_process_config(revisions: Revisions) -> UpstreamConfig {
    UpstreamConfig::InProcess(InProcessServer::new(CURATION_UPSTREAM, move |io| {
        let server = CuratorServer::new(revisions.clone());
        tokio::spawn(async move {
            match server.serve(io).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(error) => tracing::error!(%error, "the curation server handshake failed"),
            }
        });
    }))
}

/// The MCP handler of the curation upstream.
pub struct CuratorServer {
    revisions: Revisions,
    tools: Vec<Tool>,
}

impl CuratorServer {
    pub fn new(revisions: Revisions) -> Self {
        let tools = curator_tool_specs()
            .into_iter()
            .map(|spec| {
                let schema = match spec.input_schema {
                    Value::Object(schema) => schema,
                    _ => Map::new(),
                };
                Tool::new(spec.name, spec.description, Arc::new(schema))
            })
            .collect();
        Self { revisions, tools }
    }

    async fn run(
        &self,
        tool: &str,
        args: &JsonObject,
        caller: &Caller,
    ) -> Result<Value, RevisionError> {
        let scope = self
            .revisions
            .caller_scope(&caller.agent, &caller.session)
            .await?;
        // Every proposal attempt counts, refused or not: a loop is stopped either way.
        if tool == "propose_skill_revision" {
            self.revisions
                .reserve_slot(&caller.agent, &PROPOSALS)
                .await?;
        }
        let skill = text(args, "skill").unwrap_or_default();
        self.revisions.check_reach(scope.as_str(), &skill)?;
        match tool {
            "list_skill_feedback" => {
                let since = match text(args, "since") {
                    Some(since) => Some(
                        DateTime::parse_from_rfc3339(&since)
                            .map_err(|e| {
                                RevisionError::Invalid(format!(
                                    "since is not an RFC 3339 time: {e}"
                                ))
                            })?
                            .with_timezone(&Utc),
                    ),
                    None => None,
                };
                let limit = page_size(
                    args.get("limit")
                        .and_then(Value::as_u64)
                        .map(|n| u32::try_from(n).unwrap_or(MAX_PAGE)),
                );
                let after = text(args, "after");
                let page = self
                    .revisions
                    .list_feedback(&skill, since, after.as_deref(), limit)
                    .await?;
                Ok(json!({
                    "skill": skill,
                    "feedback": page.items.iter().map(|f| json!({
                        "feedback_id": f.id, "version": f.version, "rating": f.rating,
                        "comment": f.comment, "session_id": f.session_id, "author": f.author,
                        "kind": f.kind, "at": f.at,
                    })).collect::<Vec<_>>(),
                    "next_after": page.next,
                }))
            }
            "get_skill" => {
                let version = args
                    .get("version")
                    .and_then(Value::as_u64)
                    .and_then(|v| u32::try_from(v).ok());
                let found = self.revisions.get_skill(&skill, version).await?;
                let (patterns, total) = self.revisions.list_patterns(&skill).await?;
                Ok(json!({
                    "skill": skill, "version": found.version,
                    "description": found.skill.description,
                    "instructions": found.skill.instructions,
                    "tools": found.skill.tools,
                    "patterns": patterns.iter().map(|p| json!({
                        "pattern_id": p.id, "name": p.name, "content": p.content, "sources": p.sources,
                    })).collect::<Vec<_>>(),
                    "patterns_total": total,
                }))
            }
            "add_wiki_pattern" => {
                let pattern = self
                    .revisions
                    .add_pattern(
                        &skill,
                        &text(args, "name").unwrap_or_default(),
                        &text(args, "content").unwrap_or_default(),
                        &list(args, "sources"),
                        &caller.agent,
                    )
                    .await?;
                Ok(json!({"pattern_id": pattern.id, "skill": skill, "name": pattern.name}))
            }
            "propose_skill_revision" => {
                let proposal = Proposal {
                    skill: skill.clone(),
                    base_version: args
                        .get("base_version")
                        .and_then(Value::as_u64)
                        .and_then(|v| u32::try_from(v).ok())
                        .unwrap_or(0),
                    description: text(args, "description"),
                    instructions: text(args, "instructions").unwrap_or_default(),
                    note: text(args, "note").unwrap_or_default(),
                    sources: list(args, "sources"),
                    evidence: args.get("evidence").cloned().unwrap_or(Value::Null),
                    ..Proposal::default()
                };
                let candidate = self
                    .revisions
                    .propose(proposal, Proposer::Agent(caller.agent.clone()))
                    .await?;
                Ok(json!({
                    "candidate_id": candidate.id, "skill": skill, "status": "pending",
                    "verdict": candidate.verdict, "explanation": candidate.verdict_explanation,
                }))
            }
            other => Err(RevisionError::NotFound(format!("curator tool `{other}`"))),
        }
    }
}

/// Who calls, as the gateway passes it in the request `_meta`.
struct Caller {
    /// The agent key's name: the proposer identity and the rate limit's subject.
    agent: String,
    /// The governance session the call was allowed in; its scope bounds the reach.
    session: String,
}

/// The code a refusal's `structuredContent` carries, for programs (the HTTP API maps it
/// to a status).
pub fn refusal_code(error: &RevisionError) -> &'static str {
    match error {
        RevisionError::OutOfScope(_) | RevisionError::NotFound(_) => "NOT_FOUND",
        RevisionError::Store(StoreError::NotFound(_)) => "NOT_FOUND",
        RevisionError::RateLimited { .. } => "RATE_LIMITED",
        RevisionError::NoSession => "ACCESS_DENIED",
        _ => "INVALID",
    }
}

fn text(args: &JsonObject, field: &str) -> Option<String> {
    args.get(field).and_then(Value::as_str).map(str::to_owned)
}

fn list(args: &JsonObject, field: &str) -> Vec<String> {
    args.get(field)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn summary(tool: &str, value: &Value) -> String {
    match tool {
        "add_wiki_pattern" => format!(
            "Pattern {} recorded.",
            value["pattern_id"].as_str().unwrap_or("")
        ),
        "propose_skill_revision" => format!(
            "Candidate {} recorded for review; gate verdict {}. A human reviewer decides whether it becomes the new version.\n\n{}",
            value["candidate_id"].as_str().unwrap_or(""),
            value["verdict"].as_str().unwrap_or(""),
            value["explanation"]["summary"].as_str().unwrap_or(""),
        ),
        _ => serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string()),
    }
}

impl ServerHandler for CuratorServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "skillgate-curation",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Skill curation: read feedback, record cited patterns, propose revisions.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // Only the gateway sets this; a call without it did not come through the router.
        // rmcp moves the request's `_meta` into the context.
        let meta = &context.meta.0;
        let Some(agent) = meta
            .get(META_AGENT)
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return Err(McpError::invalid_request(
                "curator tools are served only through the skillgate gateway",
                None,
            ));
        };
        let caller = Caller {
            agent,
            session: meta
                .get(META_SESSION)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        };
        let arguments = request.arguments.unwrap_or_default();
        let result = match self.run(&request.name, &arguments, &caller).await {
            Ok(value) => {
                let mut result = CallToolResult::success(vec![ContentBlock::text(summary(
                    &request.name,
                    &value,
                ))]);
                result.structured_content = Some(value);
                result
            }
            Err(RevisionError::Store(
                error @ (StoreError::Sqlx(_) | StoreError::Migrate(_) | StoreError::Open { .. }),
            )) => {
                tracing::error!(%error, tool = %request.name, "curator tool failed");
                return Err(McpError::internal_error("the curation store failed", None));
            }
            Err(RevisionError::Audit(error)) => {
                tracing::error!(%error, tool = %request.name, "curator tool failed");
                return Err(McpError::internal_error("the audit log failed", None));
            }
            Err(refused) => {
                let message = refused.to_string();
                let mut structured = json!({"error": message, "code": refusal_code(&refused)});
                if let RevisionError::RateLimited { retry_in, .. } = &refused {
                    structured["retry_after_secs"] = json!(retry_after_secs(*retry_in));
                }
                let mut result = CallToolResult::error(vec![ContentBlock::text(message)]);
                result.structured_content = Some(structured);
                result
            }
        };
        Ok(result.into())
    }
}
