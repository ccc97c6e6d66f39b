//! The one error type of the `/api/v1` boundary.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::json;
use skillgate_core::gateway::GatewayError;

/// Errors at the `/api/v1` boundary, answered as `{"error", "message"}`.
#[derive(Debug, thiserror::Error)]
pub(super) enum ApiError {
    /// No credential, or one that does not authenticate; says which credential the route
    /// takes.
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    /// The request is well formed but the thing it would change has moved on (a decided
    /// hold).
    #[error("{0}")]
    Conflict(String),
    /// A body that is not JSON, or not sent as JSON.
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unprocessable(String),
    #[error("{message}")]
    TooManyRequests { message: String, retry_after: u64 },
    #[error("{0}")]
    Upstream(String),
    #[error(transparent)]
    Internal(anyhow::Error),
}

impl ApiError {
    /// A JSON body axum could not take: not JSON or not sent as JSON (400), or JSON of the
    /// wrong shape (422).
    pub(super) fn body(rejection: JsonRejection) -> Self {
        match rejection.status() {
            StatusCode::UNPROCESSABLE_ENTITY => Self::Unprocessable(rejection.body_text()),
            _ => Self::BadRequest(rejection.body_text()),
        }
    }
}

impl From<GatewayError> for ApiError {
    fn from(error: GatewayError) -> Self {
        Self::Internal(error.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = match &self {
            Self::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Self::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            Self::Unprocessable(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid"),
            Self::TooManyRequests { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            Self::Upstream(_) => (StatusCode::BAD_GATEWAY, "upstream"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        let message = match &self {
            Self::Internal(error) => {
                tracing::error!(error = %error, "api request failed");
                "the server could not complete the request".to_owned()
            }
            other => other.to_string(),
        };
        let mut response =
            (status, Json(json!({"error": code, "message": message}))).into_response();
        match &self {
            Self::TooManyRequests { retry_after, .. } => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
            }
            Self::Unauthorized(_) => {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"skillgate\""),
                );
            }
            _ => {}
        }
        response
    }
}
