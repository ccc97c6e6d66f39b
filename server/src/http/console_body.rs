//! Console server functions answer `413 Payload Too Large` for a body past the console's
//! form limit.
//!
//! Leptos server functions read their whole request body into memory with no bound, and
//! a read that fails becomes an internal error (500). So:
//!
//! - [`declared_limit`], outermost on the console, refuses a declared `Content-Length` past
//!   the console guard's form limit before the session is loaded or a byte of the body is
//!   read. No console route accepts more (the bundle upload's own limit is smaller).
//! - [`limit`], innermost, reads a server function's body (`/console/api/`) up to that limit
//!   before Leptos does, so a chunked body is refused as soon as it passes it.
//!
//! - `http::router` sets axum's `DefaultBodyLimit` to the same limit on the console, so
//!   the extractor Leptos reads a server function's body with does not stop at axum's 2 MiB
//!   default (which answered 500 between the two limits).
//!
//! The other console routes read their bodies with axum's extractors or the guard, which
//! answer 413 themselves.

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};

use crate::http::console_guard::MAX_FORM_BYTES;

/// Where the console's server functions are served (`#[server(prefix = …)]` in app/).
const SERVER_FUNCTIONS: &str = "/console/api/";

/// Refuses a request whose declared `Content-Length` is past the limit, unread.
pub async fn declared_limit(request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_FORM_BYTES as u64) {
        return too_large();
    }
    next.run(request).await
}

/// Reads a server function's body up to the limit before Leptos reads it unbounded.
pub async fn limit(request: Request, next: Next) -> Response {
    if !request.uri().path().starts_with(SERVER_FUNCTIONS) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    match axum::body::to_bytes(body, MAX_FORM_BYTES).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(error) => {
            let past_limit =
                std::iter::successors(std::error::Error::source(&error), |e| e.source())
                    .any(|source| source.is::<http_body_util::LengthLimitError>());
            if past_limit {
                too_large()
            } else {
                tracing::debug!(%error, "a console request body could not be read");
                (
                    StatusCode::BAD_REQUEST,
                    "Bad Request: the request body could not be read.\n",
                )
                    .into_response()
            }
        }
    }
}

fn too_large() -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        [(header::CONNECTION, "close")],
        format!(
            "Payload Too Large: a console request body may be at most {} MiB ({MAX_FORM_BYTES} \
             bytes).\n",
            MAX_FORM_BYTES / (1024 * 1024)
        ),
    )
        .into_response()
}
