//! The trace span of each MCP request on `/mcp`, after OpenTelemetry's MCP semantic
//! conventions: a server span named `{mcp.method.name} {target}` (e.g. `tools/call
//! call_tool`), child of the agent's span when the request carries W3C trace context.
//!
//! Its parent is the context in `params._meta` (`traceparent`, `tracestate`), as the
//! conventions ask of an MCP server, else the HTTP request's `traceparent` header; when
//! both are present and differ, the HTTP one is kept as a link. Only the method, the request
//! id, the tool name and, for `resources/read`, the resource URI are read from the body: no
//! argument is ever looked at. Without a trace exporter the span is disabled and the
//! request passes through untouched.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::middleware::Next;
use axum::response::Response;
use http::HeaderMap;
use opentelemetry::propagation::Extractor;
use opentelemetry::trace::TraceContextExt as _;
use serde::Deserialize;
use serde_json::{Map, Value};
use skillgate_core::trace::{TARGET, extract_from_meta, record_error};
use tracing::{Instrument as _, Span};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::connection::{MCP_SESSION_ID, unreadable_body};
use super::tools;
use crate::client_addr::ClientAddr;

/// The request header that names the MCP revision of a request.
const MCP_PROTOCOL_VERSION: &str = "mcp-protocol-version";

/// The span of the MCP request being served; the handler parents its tool spans on it
/// (rmcp runs the handler on a task of its own).
#[derive(Clone)]
pub struct RequestSpan(pub Span);

/// The middleware: opens the request span, serves the request inside it, and records how
/// it ended.
pub async fn request_span(request: Request, next: Next) -> Response {
    if request.method() != http::Method::POST
        || !tracing::enabled!(target: TARGET, tracing::Level::INFO)
    {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    // The body limit layer outside has bounded it already.
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) => return unreadable_body(error),
    };
    let Ok(message) = serde_json::from_slice::<Message>(&bytes) else {
        // Not a single JSON-RPC message: rmcp answers it; there is no MCP request to trace.
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    let Some(method) = message.method.as_deref() else {
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    let span = open(&message, method, &parts.headers, &parts.extensions);
    parts.extensions.insert(RequestSpan(span.clone()));
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .instrument(span.clone())
        .await;
    finish(&span, response).await
}

fn open(
    message: &Message,
    method: &str,
    headers: &HeaderMap,
    extensions: &http::Extensions,
) -> Span {
    let params = message.params.as_ref();
    // Only a platform tool names the span: an agent's made-up name would make names unbounded.
    let tool = params
        .and_then(|p| p.name.as_deref())
        .filter(|name| method == "tools/call" && tools::is_platform_tool(name));
    let name = match tool {
        Some(tool) => format!("{method} {tool}"),
        None => method.to_owned(),
    };
    let span = tracing::info_span!(
        target: TARGET,
        "mcp request",
        otel.name = name,
        otel.kind = "server",
        mcp.method.name = method,
        network.transport = "tcp",
        network.protocol.name = "http",
    );
    if let Some(id) = message.id.as_ref().and_then(request_id) {
        span.set_attribute("jsonrpc.request.id", id);
    }
    if let Some(tool) = tool {
        span.set_attribute("gen_ai.tool.name", tool.to_owned());
        span.set_attribute("gen_ai.operation.name", "execute_tool");
    }
    if method == "resources/read"
        && let Some(uri) = params.and_then(|p| p.uri.as_deref())
    {
        span.set_attribute("mcp.resource.uri", uri.to_owned());
    }
    if let Some(session) = header(headers, MCP_SESSION_ID) {
        span.set_attribute("mcp.session.id", session.to_owned());
    }
    let version = header(headers, MCP_PROTOCOL_VERSION)
        .map(str::to_owned)
        .or_else(|| {
            // `initialize` names the version it proposes in its params instead.
            params
                .and_then(|p| p.protocol_version.as_deref())
                .map(str::to_owned)
        });
    if let Some(version) = version {
        span.set_attribute("mcp.protocol.version", version);
    }
    if let Some(ConnectInfo(peer)) = extensions.get::<ConnectInfo<SocketAddr>>() {
        // Behind a trusted proxy, the client it forwarded for; the port is the peer's.
        let client = extensions
            .get::<ClientAddr>()
            .map_or(peer.ip(), |client| client.0);
        span.set_attribute("client.address", client.to_string());
        if client == peer.ip().to_canonical() {
            span.set_attribute("client.port", i64::from(peer.port()));
        }
    }
    set_parent(&span, params.and_then(|p| p.meta.as_ref()), headers);
    span
}

/// The parent from `params._meta`, else from the HTTP headers; the other kept as a link.
fn set_parent(span: &Span, meta: Option<&Map<String, Value>>, headers: &HeaderMap) {
    let from_meta = meta.map(extract_from_meta);
    let from_headers = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&HeaderCarrier(headers))
    });
    let meta_valid = from_meta
        .as_ref()
        .is_some_and(|cx| cx.span().span_context().is_valid());
    let headers_context = from_headers.span().span_context().clone();
    let parent = match from_meta {
        Some(cx) if meta_valid => {
            if headers_context.is_valid() && headers_context != *cx.span().span_context() {
                span.add_link(headers_context);
            }
            cx
        }
        _ => from_headers,
    };
    // Fails only when the span is disabled or already started, neither of which it is here.
    let _ = span.set_parent(parent);
}

/// Records a JSON-RPC error, or a tool result with `isError`, as the conventions ask.
async fn finish(span: &Span, response: Response) -> Response {
    span.set_attribute(
        "http.response.status_code",
        i64::from(response.status().as_u16()),
    );
    let is_json = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|t| t.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"));
    if !is_json {
        if !response.status().is_success() {
            record_error(span, response.status().as_str(), "HTTP error");
        }
        return response;
    }
    // A JSON answer is one message, already whole in memory.
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        record_error(span, "_OTHER", "the response body could not be read");
        return Response::from_parts(parts, Body::empty());
    };
    if let Ok(reply) = serde_json::from_slice::<Reply>(&bytes) {
        if let Some(error) = reply.error {
            let code = error.code.to_string();
            span.set_attribute("rpc.response.status_code", code.clone());
            record_error(span, &code, error.message);
        } else if reply.result.is_some_and(|r| r.is_error == Some(true)) {
            record_error(span, "tool_error", "the tool reported an error");
        }
    }
    Response::from_parts(parts, Body::from(bytes))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// A JSON-RPC id as a string; none for `null` (the conventions record no attribute then).
fn request_id(id: &Value) -> Option<String> {
    match id {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

/// What the span reads of a request: never `arguments`.
#[derive(Deserialize)]
struct Message {
    method: Option<String>,
    id: Option<Value>,
    params: Option<Params>,
}

#[derive(Deserialize)]
struct Params {
    name: Option<String>,
    uri: Option<String>,
    #[serde(rename = "protocolVersion")]
    protocol_version: Option<String>,
    #[serde(rename = "_meta")]
    meta: Option<Map<String, Value>>,
}

/// What the span reads of an answer.
#[derive(Deserialize)]
struct Reply {
    result: Option<ReplyResult>,
    error: Option<ReplyError>,
}

#[derive(Deserialize)]
struct ReplyResult {
    #[serde(rename = "isError")]
    is_error: Option<bool>,
}

#[derive(Deserialize)]
struct ReplyError {
    code: i64,
    message: String,
}

struct HeaderCarrier<'a>(&'a HeaderMap);

impl Extractor for HeaderCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        header(self.0, key)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_request_is_read_for_its_method_id_and_tool_and_never_its_arguments() {
        let body = json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "call_tool", "arguments": {"tool": "x", "arguments": {"customer_id": "C-1"}},
                       "_meta": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
        });
        let message: Message = serde_json::from_value(body).unwrap();
        assert_eq!(message.method.as_deref(), Some("tools/call"));
        assert_eq!(
            message.id.as_ref().and_then(request_id).as_deref(),
            Some("7")
        );
        let params = message.params.unwrap();
        assert_eq!(params.name.as_deref(), Some("call_tool"));
        assert!(params.meta.unwrap().contains_key("traceparent"));
    }

    #[test]
    fn a_null_or_missing_id_records_no_request_id() {
        assert_eq!(request_id(&json!(null)), None);
        assert_eq!(request_id(&json!("req-1")).as_deref(), Some("req-1"));
    }
}
