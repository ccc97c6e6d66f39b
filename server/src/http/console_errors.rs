//! A console server function's error answered with the HTTP status it means.
//!
//! Leptos answers every server-function error with `500`, so malformed arguments or a
//! viewer's refused change looked like a server fault to clients, proxies and the server's
//! own log (which records 5xx answers as failures). The hydrated console reads any 4xx or
//! 5xx answer as the error, so only the status changes: the body is untouched, and a
//! browser without JavaScript, which gets a redirect back to its form instead, is unaffected.

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::StatusCode;
use leptos::server_fn::error::SERVER_FN_ERROR_HEADER;
use skillgate_app::shared::ConsoleError;

/// An error body is one serialized `ConsoleError`: a sentence or two.
const MAX_ERROR_BYTES: usize = 64 * 1024;

pub async fn status(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if response.status() != StatusCode::INTERNAL_SERVER_ERROR
        || !response.headers().contains_key(SERVER_FN_ERROR_HEADER)
    {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ERROR_BYTES).await else {
        return Response::from_parts(parts, Body::empty());
    };
    if let Ok(error) = serde_json::from_slice::<ConsoleError>(&bytes) {
        parts.status =
            StatusCode::from_u16(error.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    }
    Response::from_parts(parts, Body::from(bytes))
}
