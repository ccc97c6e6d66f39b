//! MCP connections that cost the server nothing between requests.
//!
//! `/mcp` is served statelessly: rmcp handles every POST on its own, with no session worker,
//! channels or standing SSE stream per client. That keeps an idle agent at zero bytes of
//! server memory and lets replicas behind a load balancer answer any request, since nothing
//! lives in one process (DESIGN.md, "Storage and scale").
//!
//! One thing the gateway still wants from a connection is its identity: a call that omits
//! `session_id` falls back to the newest governance session *of the same connection*, so two
//! agents sharing a key never act in each other's session. So this layer hands out an
//! `Mcp-Session-Id` at `initialize` and clients echo it on every request. (Revision
//! 2026-07-28 has no `initialize` and no sessions: its clients start with `server/discover`,
//! get no label, and should pass `session_id`.) The id is a label, not server state: the
//! handler reads it from the request headers, and there is nothing for a `DELETE` to end:
//! rmcp answers it `405 Method Not Allowed` (`Allow: POST`), which the transport spec and the
//! official SDKs read as "this server does not let clients terminate sessions" (a `202`
//! made every Python SDK client log a warning on close).
//! Labels are not secrets: the fallback only ever looks at sessions of the caller's own key.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode};
use serde::Deserialize;

/// The header that carries the connection label (the transport's session id header).
pub const MCP_SESSION_ID: &str = "mcp-session-id";

/// The request header of revision 2026-07-28 that repeats the JSON-RPC method.
const MCP_METHOD: &str = "mcp-method";

/// The spec allows visible ASCII only; the bound keeps the label column small.
const MAX_LABEL_LEN: usize = 128;

/// Issues connection labels at `initialize` and checks echoed ones.
///
/// `max_body_bytes` bounds the buffering of an unlabelled POST, which is read once here to
/// see whether it is an `initialize` request (unless its `Mcp-Method` header says not).
pub async fn label(State(max_body_bytes): State<usize>, request: Request, next: Next) -> Response {
    let echoed = request.headers().get(MCP_SESSION_ID).cloned();
    if let Some(label) = &echoed
        && !is_label(label)
    {
        return (
            StatusCode::BAD_REQUEST,
            "Bad Request: Mcp-Session-Id must be 1 to 128 visible ASCII characters",
        )
            .into_response();
    }
    match (request.method(), echoed) {
        // Revision 2026-07-28 names the method in a header (checked against the body by
        // rmcp): a request that says it is not an `initialize` is passed on unread.
        (&Method::POST, None) if names_other_method(request.headers()) => next.run(request).await,
        (&Method::POST, None) => {
            let (parts, body) = request.into_parts();
            let bytes = match axum::body::to_bytes(body, max_body_bytes).await {
                Ok(bytes) => bytes,
                Err(error) => return unreadable_body(error),
            };
            let opens_connection = is_initialize(&bytes);
            let mut response = next
                .run(Request::from_parts(parts, Body::from(bytes)))
                .await;
            if opens_connection && response.status() == StatusCode::OK {
                response.headers_mut().insert(MCP_SESSION_ID, new_label());
            }
            response
        }
        _ => next.run(request).await,
    }
}

/// The `Mcp-Method` header, when present, names a method other than `initialize`.
fn names_other_method(headers: &http::HeaderMap) -> bool {
    headers
        .get(MCP_METHOD)
        .is_some_and(|method| method.as_bytes() != b"initialize")
}

pub(super) fn unreadable_body(error: axum::Error) -> Response {
    // The limit error may come from `to_bytes` or from the body-limit layer below, wrapped.
    let too_large = std::iter::successors(std::error::Error::source(&error), |e| e.source())
        .any(|source| source.is::<http_body_util::LengthLimitError>());
    if too_large {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            "Payload Too Large: the request body exceeds the endpoint's limit",
        )
            .into_response()
    } else {
        tracing::debug!(%error, "an MCP request body could not be read");
        (
            StatusCode::BAD_REQUEST,
            "Bad Request: the request body could not be read",
        )
            .into_response()
    }
}

fn is_label(value: &HeaderValue) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_LABEL_LEN
        && bytes.iter().all(|b| (0x21..=0x7e).contains(b))
}

fn new_label() -> HeaderValue {
    HeaderValue::try_from(uuid::Uuid::new_v4().simple().to_string())
        .expect("a uuid's hex digits are a valid header value")
}

/// True for a single JSON-RPC `initialize` request, whatever version it proposes: the
/// handshake exists only in revisions that have sessions, and the server answers a newer
/// proposal with the newest of those.
///
/// Anything else, malformed bodies included, gets no label; rmcp answers those as it sees fit.
fn is_initialize(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Message<'a> {
        #[serde(borrow)]
        method: Option<&'a str>,
    }
    serde_json::from_slice::<Message>(body)
        .is_ok_and(|message| message.method == Some("initialize"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn initialize(version: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        }))
        .unwrap()
    }

    #[test]
    fn an_initialize_opens_a_labelled_connection_whatever_version_it_proposes() {
        // rmcp's own client proposes 2026-07-28 and settles for 2025-11-25.
        for version in ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"] {
            assert!(is_initialize(&initialize(version)), "{version}");
        }
    }

    #[test]
    fn discovery_other_methods_batches_and_malformed_bodies_get_no_label() {
        let discover = br#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#;
        assert!(!is_initialize(discover));
        let call = br#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#;
        assert!(!is_initialize(call));
        let batch = br#"[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}]"#;
        assert!(!is_initialize(batch));
        assert!(!is_initialize(b"{not json"));
    }

    #[test]
    fn only_a_request_that_names_another_method_skips_the_initialize_check() {
        let mut headers = http::HeaderMap::new();
        assert!(!names_other_method(&headers));
        headers.insert(MCP_METHOD, HeaderValue::from_static("initialize"));
        assert!(!names_other_method(&headers));
        headers.insert(MCP_METHOD, HeaderValue::from_static("tools/call"));
        assert!(names_other_method(&headers));
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_413_and_other_read_failures_are_400() {
        let over = axum::body::to_bytes(Body::from(vec![b'x'; 2048]), 1024).await;
        let response = unreadable_body(over.unwrap_err());
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let broken = Body::from_stream(futures::stream::iter([Err::<axum::body::Bytes, _>(
            std::io::Error::other("connection reset"),
        )]));
        let failed = axum::body::to_bytes(broken, 1024).await;
        assert_eq!(
            unreadable_body(failed.unwrap_err()).status(),
            StatusCode::BAD_REQUEST
        );
    }

    #[test]
    fn a_label_is_one_to_128_visible_ascii_characters() {
        assert!(is_label(&new_label()));
        assert!(is_label(&HeaderValue::from_static("!~")));
        assert!(!is_label(&HeaderValue::from_static("")));
        assert!(!is_label(&HeaderValue::from_static("has space")));
        assert!(!is_label(&HeaderValue::try_from("x".repeat(129)).unwrap()));
    }
}
