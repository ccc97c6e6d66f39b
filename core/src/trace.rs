//! Trace spans for the trace exporter, named and attributed after OpenTelemetry's semantic
//! conventions for MCP and GenAI tool execution, and the W3C trace context an upstream call
//! carries.
//!
//! These spans have their own target, [`TARGET`]: the binary exports exactly them (and
//! keeps them out of its log), so a trace shows the governed call and nothing of the
//! log's bookkeeping. Without a trace exporter no layer wants the target and every span
//! here is disabled, which costs a relaxed load per callsite. Attributes carry names,
//! decisions and ids, never argument values, results or credentials.

use std::collections::HashMap;

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::{Status, TraceContextExt as _};
use opentelemetry::{Context, KeyValue, global};
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Map, Value};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::names::EventKind;

/// The `tracing` target of every span meant for the trace exporter.
pub const TARGET: &str = "otel";

/// `skillgate.decision`: `allowed`, `denied`, `pending_approval`.
pub const DECISION: &str = "skillgate.decision";
/// `skillgate.rule`: the rule a denial or hold names.
pub const RULE: &str = "skillgate.rule";
/// `skillgate.role`: the role that authorised the call.
pub const ROLE: &str = "skillgate.role";
/// `skillgate.session.id`: the governance session (`init_skilder`'s `session_id`).
pub const SESSION_ID: &str = "skillgate.session.id";

/// The span around one `decide` (the policy decision; pure, so this is its whole time).
pub fn decide_span() -> Span {
    tracing::info_span!(target: TARGET, "decide", otel.name = "skillgate.decide")
}

/// The span around the content inspectors of one call's `stage` (`arguments`, `result`).
pub fn inspect_span(stage: &'static str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "inspect",
        otel.name = format!("skillgate.inspect {stage}"),
        skillgate.inspect.stage = stage,
    )
}

/// The span around one durable audit append of `event` (`call_allowed`, `call_result`, …).
pub fn audit_span(kind: EventKind) -> Span {
    let event = kind.as_str();
    tracing::info_span!(
        target: TARGET,
        "audit append",
        otel.name = format!("skillgate.audit.append {event}"),
        skillgate.audit.event = event,
    )
}

/// How a gateway-to-upstream call travels, for `network.transport` and `server.*`.
pub enum UpstreamTransport<'a> {
    /// Streamable HTTP to this URL (only its host and port are recorded).
    Http(&'a str),
    /// A child process's stdin and stdout.
    Stdio,
    /// An upstream served inside this process.
    InProcess,
}

/// The MCP client span of a downstream `tools/call` of `tool` on `upstream`.
pub fn upstream_span(tool: &str, upstream: &str, transport: UpstreamTransport<'_>) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "upstream call",
        otel.name = format!("tools/call {tool}"),
        otel.kind = "client",
        mcp.method.name = "tools/call",
        gen_ai.tool.name = tool,
        gen_ai.operation.name = "execute_tool",
        skillgate.upstream = upstream,
        network.transport = tracing::field::Empty,
        server.address = tracing::field::Empty,
        server.port = tracing::field::Empty,
    );
    if span.is_disabled() {
        return span;
    }
    match transport {
        UpstreamTransport::Http(url) => {
            span.record("network.transport", "tcp");
            // The host and port only: a URL may carry credentials in its userinfo or query.
            if let Ok(url) = reqwest::Url::parse(url) {
                if let Some(host) = url.host_str() {
                    span.record("server.address", host);
                }
                if let Some(port) = url.port_or_known_default() {
                    span.record("server.port", i64::from(port));
                }
            }
        }
        UpstreamTransport::Stdio => {
            span.record("network.transport", "pipe");
        }
        UpstreamTransport::InProcess => {
            span.record("network.transport", "inproc");
        }
    }
    span
}

/// Records a decision on `span` and on the innermost span of the current trace context
/// (the platform tool's span while the gateway serves a `call_tool`).
pub fn record_decision(span: &Span, decision: &str, rule: Option<&str>, role: Option<&str>) {
    let mut attributes = vec![KeyValue::new(DECISION, decision.to_owned())];
    if let Some(rule) = rule {
        attributes.push(KeyValue::new(RULE, rule.to_owned()));
    }
    if let Some(role) = role {
        attributes.push(KeyValue::new(ROLE, role.to_owned()));
    }
    for attribute in &attributes {
        span.set_attribute(attribute.key.clone(), attribute.value.clone());
    }
    record_current(attributes);
}

/// Sets attributes on the innermost span of the current trace context, if there is one.
pub fn record_current(attributes: impl IntoIterator<Item = KeyValue>) {
    let cx = Context::current();
    let span = cx.span();
    if span.span_context().is_valid() {
        span.set_attributes(attributes);
    }
}

/// Marks `span` as failed with a low-cardinality `error.type` and a description.
pub fn record_error(span: &Span, error_type: &str, description: impl Into<String>) {
    span.set_attribute("error.type", error_type.to_owned());
    span.set_status(Status::error(description.into()));
}

/// Writes the trace context of `span` into `meta` (a request's `_meta`), as the MCP
/// semantic conventions propagate it: unprefixed `traceparent` and `tracestate` keys.
/// Nothing is written when `span` is in no trace.
pub fn inject_into_meta(span: &Span, meta: &mut Option<Map<String, Value>>) {
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return;
    }
    let mut carrier = MetaCarrier(meta.take().unwrap_or_default());
    global::get_text_map_propagator(|propagator| propagator.inject_context(&cx, &mut carrier));
    *meta = Some(carrier.0).filter(|map| !map.is_empty());
}

/// The trace context a request's `_meta` carries, if any.
pub fn extract_from_meta(meta: &Map<String, Value>) -> Context {
    global::get_text_map_propagator(|propagator| propagator.extract(&MetaRef(meta)))
}

/// Copies the trace context a request's `_meta` carries into HTTP request headers
/// (`traceparent`, `tracestate`), so an HTTP upstream's own tracing joins the trace.
pub fn meta_to_headers(meta: &Map<String, Value>, headers: &mut HashMap<HeaderName, HeaderValue>) {
    let cx = extract_from_meta(meta);
    if !cx.span().span_context().is_valid() {
        return;
    }
    global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&cx, &mut HeaderCarrier(headers));
    });
}

struct HeaderCarrier<'a>(&'a mut HashMap<HeaderName, HeaderValue>);

impl Injector for HeaderCarrier<'_> {
    fn set(&mut self, key: &str, value: String) {
        if value.is_empty() {
            return;
        }
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// `_meta` as a propagation carrier: string values under the propagator's keys.
struct MetaCarrier(Map<String, Value>);

impl Injector for MetaCarrier {
    fn set(&mut self, key: &str, value: String) {
        // The W3C propagator writes an empty `tracestate` when there is none.
        if !value.is_empty() {
            self.0.insert(key.to_owned(), Value::String(value));
        }
    }
}

struct MetaRef<'a>(&'a Map<String, Value>);

impl Extractor for MetaRef<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::propagation::TextMapPropagator as _;
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    use opentelemetry_sdk::propagation::TraceContextPropagator;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_traceparent_round_trips_through_meta() {
        let span_context = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let cx = Context::new().with_remote_span_context(span_context);
        let mut carrier = MetaCarrier(Map::new());
        TraceContextPropagator::new().inject_context(&cx, &mut carrier);
        assert_eq!(
            Value::Object(carrier.0.clone()),
            json!({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
        );
        let back = TraceContextPropagator::new().extract(&MetaRef(&carrier.0));
        assert_eq!(
            back.span().span_context().trace_id(),
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
        );
    }

    #[test]
    fn a_span_in_no_trace_writes_no_meta() {
        let mut meta = None;
        inject_into_meta(&Span::none(), &mut meta);
        assert!(meta.is_none());
        let mut kept = Some(Map::from_iter([("agent".to_owned(), json!("a"))]));
        inject_into_meta(&Span::none(), &mut kept);
        assert_eq!(kept.unwrap().len(), 1);
    }
}
