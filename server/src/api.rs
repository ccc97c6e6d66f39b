//! `/api/v1`: HTTP endpoints for agents, admitted by the same Host, Origin and agent-key
//! checks as `/mcp`.
//!
//! `POST /api/v1/skills/{skill}/candidates` records a proposed revision, exactly as the
//! curator tool `propose_skill_revision` does, for a key whose scope includes the
//! `skill-curator` role.

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use skillgate_core::keys::AgentKeys;
use skillgate_core::metrics::Metrics;
use skillgate_core::policy::CatalogHandle;
use skillgate_core::revisions::{Proposal, RevisionError, Revisions};
use skillgate_core::store::StoreError;
use skillgate_core::store::revisions::Proposer;
use tower_http::limit::RequestBodyLimitLayer;

use crate::mcp::auth::{ANONYMOUS_KEY_ID, AgentCaller, admit};
use crate::mcp::{McpOptions, admission};

/// The role a key's scope must include to propose revisions.
pub const CURATOR_ROLE: &str = "skill-curator";

#[derive(Clone)]
struct ApiState {
    revisions: Revisions,
    catalog: Arc<CatalogHandle>,
}

/// Errors at the `/api/v1` boundary, answered as `{"error", "message"}`.
#[derive(Debug, thiserror::Error)]
enum ApiError {
    #[error("an agent key is required")]
    Unauthorized,
    #[error("this key's scope does not include the `{CURATOR_ROLE}` role")]
    Forbidden,
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Unprocessable(String),
    #[error(transparent)]
    Internal(anyhow::Error),
}

impl From<RevisionError> for ApiError {
    fn from(error: RevisionError) -> Self {
        match error {
            RevisionError::NotFound(what) => Self::NotFound(format!("{what} not found")),
            RevisionError::Store(StoreError::NotFound(what)) => {
                Self::NotFound(format!("{what} not found"))
            }
            RevisionError::Store(
                e @ (StoreError::Sqlx(_) | StoreError::Migrate(_) | StoreError::Open { .. }),
            ) => Self::Internal(e.into()),
            RevisionError::Audit(e) => Self::Internal(e.into()),
            other => Self::Unprocessable(other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = match &self {
            Self::Unauthorized => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::Forbidden => (StatusCode::FORBIDDEN, "forbidden"),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Self::Unprocessable(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        let message = match &self {
            Self::Internal(error) => {
                tracing::error!(error = %error, "api request failed");
                "the server could not complete the request".to_owned()
            }
            other => other.to_string(),
        };
        (status, Json(json!({"error": code, "message": message}))).into_response()
    }
}

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

#[tracing::instrument(skip_all, fields(skill = %skill, key = %caller.key_name))]
async fn propose(
    State(state): State<ApiState>,
    Extension(caller): Extension<AgentCaller>,
    Path(skill): Path<String>,
    body: Result<Json<ProposalBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    // An anonymous caller has no identity to propose under.
    if caller.key_id == ANONYMOUS_KEY_ID {
        return Err(ApiError::Unauthorized);
    }
    if !state
        .catalog
        .load()
        .scope_allows(caller.scope.as_str(), CURATOR_ROLE)
    {
        return Err(ApiError::Forbidden);
    }
    let Json(body) = body.map_err(|e| ApiError::Unprocessable(e.body_text()))?;
    let candidate = state
        .revisions
        .propose(
            Proposal {
                skill,
                base_version: body.base_version,
                description: body.description,
                instructions: body.instructions,
                note: body.note,
                sources: body.sources,
                evidence: body.evidence,
            },
            Proposer::Agent(caller.key_name),
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "candidate_id": candidate.id,
            "skill": candidate.skill,
            "status": "pending",
            "verdict": candidate.verdict,
            "explanation": candidate.verdict_explanation,
        })),
    )
        .into_response())
}

/// The `/api/v1` routes, ready to merge into the server's router.
pub fn router(
    revisions: Revisions,
    catalog: Arc<CatalogHandle>,
    keys: AgentKeys,
    options: &McpOptions,
    metrics: Arc<Metrics>,
) -> Router {
    Router::new()
        .route("/api/v1/skills/{skill}/candidates", post(propose))
        .with_state(ApiState { revisions, catalog })
        .route_layer(RequestBodyLimitLayer::new(options.max_body_bytes))
        .route_layer(axum::middleware::from_fn_with_state(
            admission(keys, options, metrics),
            admit,
        ))
}
