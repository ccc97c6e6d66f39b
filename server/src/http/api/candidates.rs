//! Proposals of skill revisions by agents, admitted by the same Host, Origin and agent-key
//! checks as `/mcp`.
//!
//! `POST /api/v1/skills/{skill}/candidates` records a proposed revision by driving the
//! gateway exactly as an MCP agent would, with the caller's key: `init_skilder`, `learn
//! /roles/skill-curator`, then `call_tool propose_skill_revision`. So the proposal is
//! decided by the router and the role's limits, rate-limited per key and audited (a
//! session with its `session_started`, `learn_granted`/`learn_denied`, `call_allowed` and
//! `call_result` events, plus the `skill_candidate.propose` change) like the MCP call.

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use skillgate_core::gateway::ToolReply;
use skillgate_core::metrics::Metrics;

use super::error::ApiError;

use crate::mcp::auth::{ANONYMOUS_KEY_ID, AgentCaller, admit};
use crate::mcp::workspaces::{CallerGateway, Workspaces};
use crate::mcp::{McpOptions, admission};

/// The role a key's scope must include to propose revisions.
pub const CURATOR_ROLE: &str = "skill-curator";
/// The curator tool a proposal runs.
const PROPOSE_TOOL: &str = "propose_skill_revision";
/// The connection label of sessions the API starts, so an MCP client's fallback to "the
/// newest session of my connection" never picks one of them up.
const API_CONNECTION: &str = "http-api";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProposalBody {
    base_version: u32,
    instructions: String,
    note: String,
    #[serde(default)]
    sources: Vec<String>,
    #[serde(default)]
    evidence: Value,
    #[serde(default)]
    description: Option<String>,
}

fn text(value: &Value, key: &str) -> String {
    value[key].as_str().unwrap_or_default().to_owned()
}

/// A refusal of the gateway (`call_tool` or `learn`) as an HTTP error.
fn gateway_refusal(structured: &Value, text: String) -> ApiError {
    match structured["code"].as_str() {
        Some("INVALID_ARGUMENTS") => ApiError::Unprocessable(text),
        Some("ACCESS_DENIED" | "GOVERNANCE_VIOLATION") => ApiError::Forbidden(text),
        Some("UPSTREAM_ERROR") => ApiError::Upstream(text),
        _ => ApiError::Internal(anyhow::anyhow!("unexpected gateway refusal: {text}")),
    }
}

/// A refusal of the curator tool (its `structuredContent` `code`) as an HTTP error.
fn curator_refusal(structured: &Value) -> ApiError {
    let message = text(structured, "error");
    match structured["code"].as_str() {
        Some("RATE_LIMITED") => ApiError::TooManyRequests {
            message,
            retry_after: structured["retry_after_secs"].as_u64().unwrap_or(1),
        },
        Some("NOT_FOUND") => ApiError::NotFound(message),
        Some("ACCESS_DENIED") => ApiError::Forbidden(message),
        _ => ApiError::Unprocessable(message),
    }
}

#[tracing::instrument(skip_all, fields(key = %caller.key_name))]
async fn propose(
    Extension(caller): Extension<AgentCaller>,
    Extension(CallerGateway(gateway)): Extension<CallerGateway>,
    Path(skill): Path<String>,
    body: Result<Json<ProposalBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    // An anonymous caller has no identity to propose under.
    if caller.key_id == ANONYMOUS_KEY_ID {
        return Err(ApiError::Unauthorized("an agent key is required"));
    }
    let Json(body) = body.map_err(|e| ApiError::Unprocessable(e.body_text()))?;
    let agent = caller.identity(Some(API_CONNECTION.to_owned()));

    let started = gateway
        .init(
            &agent,
            Some(format!("HTTP API: propose a revision of skill {skill}")),
        )
        .await?;
    let session_id = match &started {
        ToolReply::Gateway { structured, .. } => {
            structured["session_id"].as_str().map(str::to_owned)
        }
        ToolReply::Downstream { .. } => None,
    }
    .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("init_skilder returned no session_id")))?;

    let learned = gateway
        .learn(
            &agent,
            Some(session_id.clone()),
            &format!("/roles/{CURATOR_ROLE}"),
        )
        .await?;
    if let ToolReply::Gateway { is_error: true, .. } = learned {
        return Err(ApiError::Forbidden(format!(
            "this key's scope does not include the `{CURATOR_ROLE}` role"
        )));
    }

    let mut arguments = json!({
        "skill": skill,
        "base_version": body.base_version,
        "instructions": body.instructions,
        "note": body.note,
        "sources": body.sources,
        "evidence": body.evidence,
    });
    if let Some(description) = body.description {
        arguments["description"] = json!(description);
    }
    let reply = gateway
        .call(&agent, Some(session_id), PROPOSE_TOOL, arguments)
        .await?;
    let result = match reply {
        ToolReply::Gateway {
            text, structured, ..
        } => return Err(gateway_refusal(&structured, text)),
        ToolReply::Downstream { result, .. } => result,
    };
    let structured = result.structured_content.unwrap_or(Value::Null);
    if result.is_error == Some(true) {
        return Err(curator_refusal(&structured));
    }
    Ok((StatusCode::CREATED, Json(structured)).into_response())
}

/// `POST /api/v1/skills/{skill}/candidates`, admitted by agent key.
pub(super) fn router(
    workspaces: Arc<Workspaces>,
    options: &McpOptions,
    metrics: Arc<Metrics>,
) -> Router {
    Router::new()
        .route("/api/v1/skills/{skill}/candidates", post(propose))
        .route_layer(tower_http::limit::RequestBodyLimitLayer::new(
            options.max_body_bytes,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            // OAuth access tokens are bound to /mcp (RFC 8707): refused here.
            admission(workspaces, None, options, metrics),
            admit,
        ))
}
