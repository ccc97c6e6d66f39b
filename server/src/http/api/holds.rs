//! `/api/v1/holds`: the approval queue for people and their automation (a runbook, a chat
//! bot), with a console user's API token (`Authorization: Bearer sgp_…`).
//!
//! - `GET /api/v1/holds?state=pending&before=HOLD_ID`: a page of 50, newest first, and the
//!   cursor of the next;
//! - `GET /api/v1/holds/{id}`: one hold;
//! - `POST /api/v1/holds/{id}/approve` and `…/deny` with `{"reason": "…"}`: the decision,
//!   answered with the hold as it stands after it.
//!
//! Reading takes any console role, deciding the reviewer role, both checked against the
//! user as stored at this request. Decisions go through the same holds service as the
//! console, so the same rules hold (a reason, never your own agent's call, one decision per
//! hold: a second answers 409) and each is audited with its decider and the channel `api`.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use chrono::Utc;
use http::header;
use serde::Deserialize;
use serde_json::json;
use skillgate_core::api_tokens::{ApiTokenError, ApiTokens, TokenHolder};
use skillgate_core::holds::{
    Channel, Decider, HoldError, HoldView, Holds, MAX_ID, PAGE, state_filter,
};
use skillgate_core::users::ConsoleRole;
use tower_http::limit::RequestBodyLimitLayer;

use super::error::ApiError;
use crate::mcp::auth::bearer_token;

/// A decision's body is a reason of at most 2,000 characters: 16 KiB is plenty.
const MAX_BODY_BYTES: usize = 16 * 1024;
const TOKEN_REQUIRED: &str = "an API token is required (Authorization: Bearer sgp_…); a \
     console user issues one on the API tokens page";

#[derive(Debug, Deserialize)]
struct ListQuery {
    state: Option<String>,
    before: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionBody {
    reason: String,
}

impl From<HoldError> for ApiError {
    fn from(error: HoldError) -> Self {
        match error {
            HoldError::NotFound(_) => Self::NotFound(error.to_string()),
            HoldError::OwnHold(_) => Self::Forbidden(error.to_string()),
            HoldError::Settled { .. } => Self::Conflict(error.to_string()),
            HoldError::Reason | HoldError::UnknownState(_) => {
                Self::Unprocessable(error.to_string())
            }
            HoldError::Store(_) | HoldError::Audit(_) => Self::Internal(error.into()),
        }
    }
}

/// Admits a request whose bearer token is an active API token of an enabled user, and
/// hands its holder to the handler. Every request reads the token and the user afresh,
/// so a revocation, a disabled user or a lowered role applies to the very next request.
async fn authenticate(
    State(tokens): State<ApiTokens>,
    mut request: Request,
    next: Next,
) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| bearer_token(value).ok());
    let Some(presented) = presented else {
        return ApiError::Unauthorized(TOKEN_REQUIRED).into_response();
    };
    match tokens.authenticate(presented, Utc::now()).await {
        Ok(holder) => {
            request.extensions_mut().insert(holder);
            next.run(request).await
        }
        Err(ApiTokenError::Invalid) => {
            tracing::warn!("refused an /api/v1/holds request with an invalid API token");
            ApiError::Unauthorized("invalid API token").into_response()
        }
        Err(error) => ApiError::Internal(error.into()).into_response(),
    }
}

/// The token's user as a decider, when their role decides holds; a refusal is audited.
async fn deciding(
    holds: &Holds,
    holder: &TokenHolder,
    id: &str,
    approve: bool,
) -> Result<Decider, ApiError> {
    let decider = Decider::new(&holder.user.name, Channel::Api);
    if !holder.user.role.allows(ConsoleRole::Reviewer) {
        let message = format!(
            "deciding a hold needs the reviewer or admin role; `{}` is {}",
            holder.user.name, holder.user.role
        );
        holds
            .record_refusal(&decider, id, approve, "FORBIDDEN", &message)
            .await?;
        return Err(ApiError::Forbidden(message));
    }
    Ok(decider)
}

/// An id longer than any hold's is not looked up.
fn checked_id(id: &str) -> Result<&str, ApiError> {
    if id.is_empty() || id.chars().count() > MAX_ID {
        // Not echoed: it may be as long as a URL can be.
        return Err(ApiError::NotFound(
            "there is no hold with that id".to_owned(),
        ));
    }
    Ok(id)
}

#[tracing::instrument(skip_all, fields(user = %holder.user.name))]
async fn list(
    State(holds): State<Holds>,
    Extension(holder): Extension<TokenHolder>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let state = state_filter(query.state.as_deref().unwrap_or("pending"))?;
    let before = query.before.as_deref().map(checked_id).transpose()?;
    let page = holds.list(state, before).await?;
    let now = Utc::now();
    let next = (page.len() == PAGE as usize)
        .then(|| page.last().map(|h| h.id.clone()))
        .flatten();
    let views: Vec<HoldView> = page.iter().map(|hold| holds.view(hold, now)).collect();
    Ok(Json(json!({"holds": views, "next": next})).into_response())
}

#[tracing::instrument(skip_all, fields(user = %holder.user.name, hold = %id))]
async fn show(
    State(holds): State<Holds>,
    Extension(holder): Extension<TokenHolder>,
    Path(id): Path<String>,
) -> Result<Json<HoldView>, ApiError> {
    let hold = holds.get(checked_id(&id)?).await?;
    Ok(Json(holds.view(&hold, Utc::now())))
}

async fn approve(
    holds: State<Holds>,
    holder: Extension<TokenHolder>,
    id: Path<String>,
    body: Result<Json<DecisionBody>, JsonRejection>,
) -> Result<Json<HoldView>, ApiError> {
    decide(holds, holder, id, body, true).await
}

async fn deny(
    holds: State<Holds>,
    holder: Extension<TokenHolder>,
    id: Path<String>,
    body: Result<Json<DecisionBody>, JsonRejection>,
) -> Result<Json<HoldView>, ApiError> {
    decide(holds, holder, id, body, false).await
}

#[tracing::instrument(skip_all, fields(user = %holder.user.name, hold = %id, approve))]
async fn decide(
    State(holds): State<Holds>,
    Extension(holder): Extension<TokenHolder>,
    Path(id): Path<String>,
    body: Result<Json<DecisionBody>, JsonRejection>,
    approve: bool,
) -> Result<Json<HoldView>, ApiError> {
    let id = checked_id(&id)?;
    let decider = deciding(&holds, &holder, id, approve).await?;
    let Json(body) = body.map_err(ApiError::body)?;
    let now = Utc::now();
    if approve {
        holds.approve(&decider, id, &body.reason, now).await?;
    } else {
        holds.deny(&decider, id, &body.reason, now).await?;
    }
    let hold = holds.get(id).await?;
    Ok(Json(holds.view(&hold, now)))
}

/// The holds routes, each behind the API token check.
pub(super) fn router(holds: Holds, tokens: ApiTokens) -> Router {
    Router::new()
        .route("/api/v1/holds", get(list))
        .route("/api/v1/holds/{id}", get(show))
        .route("/api/v1/holds/{id}/approve", post(approve))
        .route("/api/v1/holds/{id}/deny", post(deny))
        .route_layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .route_layer(axum::middleware::from_fn_with_state(tokens, authenticate))
        .with_state(holds)
}
