//! OpenTelemetry traces, end to end: the real binary exports over OTLP/HTTP to a receiver
//! this test runs, which decodes the protobuf `ExportTraceServiceRequest` with the
//! published types. One governed `call_tool` through an HTTP upstream is checked for its
//! span tree, its attributes, the agent's trace context and its propagation upstream, and
//! for the absence of its argument values.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use common::{Server, init};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::{Span, status};
use prost::Message as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use skillgate_core::model::{ToolSpec, Upstream, UpstreamKind};
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;

const SPAN_DEADLINE: Duration = Duration::from_secs(30);
/// The argument value the agent passes: it must appear in no exported span.
const ACCOUNT: &str = "ACCT-SECRET-7731";
const AGENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const AGENT_SPAN: &str = "00f067aa0ba902b7";

/// An OTLP/HTTP trace receiver on a free loopback port; keeps every export it decoded.
#[derive(Clone, Default)]
struct Receiver {
    exports: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
}

impl Receiver {
    async fn start() -> (Self, String) {
        let receiver = Self::default();
        let router = axum::Router::new()
            .route("/v1/traces", axum::routing::post(receive))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        (receiver, endpoint)
    }

    fn export_count(&self) -> usize {
        self.exports.lock().unwrap().len()
    }

    fn spans(&self) -> Vec<Span> {
        self.exports
            .lock()
            .unwrap()
            .iter()
            .flat_map(|export| &export.resource_spans)
            .flat_map(|resource| &resource.scope_spans)
            .flat_map(|scope| scope.spans.clone())
            .collect()
    }

    fn service_names(&self) -> Vec<String> {
        self.exports
            .lock()
            .unwrap()
            .iter()
            .flat_map(|export| &export.resource_spans)
            .filter_map(|resource| resource.resource.as_ref())
            .filter_map(|resource| {
                resource
                    .attributes
                    .iter()
                    .find(|kv| kv.key == "service.name")
                    .and_then(|kv| string(kv.value.as_ref()?.value.as_ref()?))
            })
            .collect()
    }

    /// Polls until `done` holds for the spans received, or the deadline passes.
    async fn wait_for(&self, what: &str, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let deadline = Instant::now() + SPAN_DEADLINE;
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} within {SPAN_DEADLINE:?}; received: {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn receive(State(receiver): State<Receiver>, body: axum::body::Bytes) -> Response {
    match ExportTraceServiceRequest::decode(body) {
        Ok(export) => {
            receiver.exports.lock().unwrap().push(export);
            (
                [(http::header::CONTENT_TYPE, "application/x-protobuf")],
                ExportTraceServiceResponse::default().encode_to_vec(),
            )
                .into_response()
        }
        Err(error) => (http::StatusCode::BAD_REQUEST, error.to_string()).into_response(),
    }
}

fn string(value: &any_value::Value) -> Option<String> {
    match value {
        any_value::Value::StringValue(text) => Some(text.clone()),
        any_value::Value::IntValue(number) => Some(number.to_string()),
        _ => None,
    }
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| string(kv.value.as_ref()?.value.as_ref()?))
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn only<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found = named(spans, name);
    assert_eq!(
        found.len(),
        1,
        "exactly one span `{name}`; got {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    found[0]
}

/// An HTTP MCP upstream with one tool; remembers the `traceparent` of every request.
#[derive(Clone)]
struct AccountsUpstream;

fn account_schema() -> Value {
    json!({"type": "object", "properties": {"account_id": {"type": "string"}}, "required": ["account_id"]})
}

impl ServerHandler for AccountsUpstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let Value::Object(schema) = account_schema() else {
            unreachable!()
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "find_account",
            "Finds an account.",
            Arc::new(schema),
        )]))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text("found")]).into())
    }
}

async fn record_traceparent(
    State(seen): State<Arc<Mutex<Vec<String>>>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(value) = request.headers().get("traceparent") {
        seen.lock()
            .unwrap()
            .push(value.to_str().unwrap_or_default().to_owned());
    }
    next.run(request).await
}

async fn serve_upstream(seen: Arc<Mutex<Vec<String>>>) -> (String, u16) {
    let service: StreamableHttpService<AccountsUpstream, LocalSessionManager> =
        StreamableHttpService::new(
            || Ok(AccountsUpstream),
            Arc::default(),
            StreamableHttpServerConfig::default(),
        );
    let router = axum::Router::new().nest_service("/mcp", service).layer(
        axum::middleware::from_fn_with_state(seen, record_traceparent),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (format!("http://127.0.0.1:{port}/mcp"), port)
}

fn slug(text: &str) -> Slug {
    Slug::parse(text).unwrap()
}

/// The upstream, its tool, a role granting it and a scope, as an admin would set them up.
async fn register_upstream(server: &Server, url: &str) {
    let store = Store::open(&server.database_url()).await.unwrap();
    store
        .upsert_upstream(&Upstream {
            name: slug("accounts"),
            kind: UpstreamKind::Http {
                url: url.to_owned(),
                ca_bundle: None,
                allow_plaintext: false,
            },
        })
        .await
        .unwrap();
    let spec = ToolSpec {
        name: "find_account".to_owned(),
        description: "Finds an account.".to_owned(),
        input_schema: account_schema(),
        output_schema: None,
        annotations: None,
        sensitive_args: Vec::new(),
    };
    store.seed_tools(&slug("accounts"), &[spec]).await.unwrap();
    common::catalog::grant(
        &store,
        common::catalog::Grant {
            skill: "account-lookup",
            role: "account-reader",
            scope: "accounts",
            tools: vec!["find_account".to_owned()],
        },
    )
    .await;
}

/// A plain JSON-RPC POST to `/mcp`, as any MCP client sends it, with the headers given.
struct Agent {
    http: reqwest::Client,
    url: String,
    key: String,
    label: Option<String>,
}

impl Agent {
    async fn post(&self, body: Value, traceparent: Option<&str>) -> (http::HeaderMap, Value) {
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(&self.key)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body);
        if let Some(label) = &self.label {
            request = request.header("mcp-session-id", label);
        }
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        let response = request.send().await.unwrap();
        assert!(response.status().is_success(), "{body}: {response:?}");
        let headers = response.headers().clone();
        (headers, response.json().await.unwrap())
    }

    async fn tool(
        &self,
        id: u32,
        name: &str,
        arguments: Value,
        traceparent: Option<&str>,
    ) -> Value {
        let (_, reply) = self
            .post(
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}}),
                traceparent,
            )
            .await;
        let result = reply["result"].clone();
        assert_eq!(result["isError"], json!(false), "{name}: {reply}");
        result
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_governed_call_is_one_trace_from_the_agents_span_to_the_upstream() {
    let (receiver, endpoint) = Receiver::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (upstream_url, upstream_port) = serve_upstream(seen.clone()).await;
    let primary = Server::start();
    register_upstream(&primary, &upstream_url).await;
    let key = primary.create_key("tracer", "accounts");
    // A second process on that database starts with the upstream, and traces.
    let server = primary.replica_with_env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_SERVICE_NAME", "gateway-under-test"),
        ("OTEL_BSP_SCHEDULE_DELAY", "50"),
    ]);

    let mut agent = Agent {
        http: reqwest::Client::new(),
        url: server.mcp_url(),
        key: key.clone(),
        label: None,
    };
    let (headers, _) = agent
        .post(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "trace-test", "version": "1"}}}),
            None,
        )
        .await;
    let label = headers["mcp-session-id"].to_str().unwrap().to_owned();
    agent.label = Some(label.clone());
    let started = agent.tool(2, "init_skilder", json!({}), None).await;
    let session = started["structuredContent"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    agent
        .tool(
            3,
            "learn",
            json!({"path": "/roles/account-reader", "session_id": session}),
            None,
        )
        .await;
    let traceparent = format!("00-{AGENT_TRACE}-{AGENT_SPAN}-01");
    let result = agent
        .tool(
            42,
            "call_tool",
            json!({"tool": "find_account", "arguments": {"account_id": ACCOUNT}, "session_id": session}),
            Some(&traceparent),
        )
        .await;
    assert_eq!(result["content"][0]["text"], "found", "{result}");

    let trace_id = hex::decode(AGENT_TRACE).unwrap();
    let in_trace = |spans: &[Span]| -> Vec<Span> {
        spans
            .iter()
            .filter(|s| s.trace_id == trace_id)
            .cloned()
            .collect()
    };
    let expected = [
        "tools/call call_tool",
        "execute_tool call_tool",
        "skillgate.decide",
        "skillgate.audit.append call_allowed",
        "skillgate.audit.append call_result",
        "tools/call find_account",
    ];
    let spans = receiver
        .wait_for("span tree of the governed call", |spans| {
            let trace = in_trace(spans);
            expected.iter().all(|name| !named(&trace, name).is_empty())
        })
        .await;
    let trace = in_trace(&spans);

    // The request span: a server span, child of the agent's span.
    let request = only(&trace, "tools/call call_tool");
    assert_eq!(request.kind, SpanKind::Server as i32);
    assert_eq!(request.parent_span_id, hex::decode(AGENT_SPAN).unwrap());
    for (key, value) in [
        ("mcp.method.name", "tools/call"),
        ("jsonrpc.request.id", "42"),
        ("mcp.session.id", label.as_str()),
        ("mcp.protocol.version", "2025-06-18"),
        ("network.transport", "tcp"),
        ("gen_ai.tool.name", "call_tool"),
        ("gen_ai.operation.name", "execute_tool"),
    ] {
        assert_eq!(
            attribute(request, key).as_deref(),
            Some(value),
            "{key} of the request span"
        );
    }

    // The platform tool's span, under the request, with the decision.
    let tool = only(&trace, "execute_tool call_tool");
    assert_eq!(tool.parent_span_id, request.span_id);
    for (key, value) in [
        ("gen_ai.tool.name", "call_tool"),
        ("gen_ai.operation.name", "execute_tool"),
        ("skillgate.decision", "allowed"),
        ("skillgate.role", "account-reader"),
        ("skillgate.session.id", session.as_str()),
    ] {
        assert_eq!(
            attribute(tool, key).as_deref(),
            Some(value),
            "{key} of the tool span"
        );
    }

    // Its children: the decision, both durable audit appends, and the upstream call.
    let decide = only(&trace, "skillgate.decide");
    assert_eq!(decide.parent_span_id, tool.span_id);
    assert_eq!(
        attribute(decide, "skillgate.decision").as_deref(),
        Some("allowed")
    );
    assert_eq!(
        attribute(decide, "skillgate.role").as_deref(),
        Some("account-reader")
    );
    for event in ["call_allowed", "call_result"] {
        let audit = only(&trace, &format!("skillgate.audit.append {event}"));
        assert_eq!(audit.parent_span_id, tool.span_id, "{event}");
        assert_eq!(
            attribute(audit, "skillgate.audit.event").as_deref(),
            Some(event)
        );
    }
    let allowed = only(&trace, "skillgate.audit.append call_allowed");
    let result_event = only(&trace, "skillgate.audit.append call_result");
    let call = only(&trace, "tools/call find_account");
    // The order of the contract: allowed is durable before the upstream runs, the result
    // after it.
    assert!(allowed.end_time_unix_nano <= call.start_time_unix_nano);
    assert!(call.end_time_unix_nano <= result_event.start_time_unix_nano);
    assert_eq!(call.kind, SpanKind::Client as i32);
    assert_eq!(call.parent_span_id, tool.span_id);
    let port = upstream_port.to_string();
    for (key, value) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "find_account"),
        ("gen_ai.operation.name", "execute_tool"),
        ("skillgate.upstream", "accounts"),
        ("server.address", "127.0.0.1"),
        ("server.port", port.as_str()),
        ("network.transport", "tcp"),
    ] {
        assert_eq!(
            attribute(call, key).as_deref(),
            Some(value),
            "{key} of the upstream span"
        );
    }
    for span in [request, tool, decide, allowed, result_event, call] {
        assert!(
            span.status
                .as_ref()
                .is_none_or(|s| s.code != status::StatusCode::Error as i32),
            "{} failed: {:?}",
            span.name,
            span.status
        );
    }

    // The upstream's request carried the trace: same trace, the upstream span as parent.
    let received = seen.lock().unwrap().clone();
    let expected_parent = format!("00-{AGENT_TRACE}-{}-01", hex::encode(&call.span_id));
    assert!(
        received.contains(&expected_parent),
        "the upstream got {received:?}, not {expected_parent}"
    );

    assert!(
        receiver
            .service_names()
            .iter()
            .all(|name| name == "gateway-under-test")
    );
    // No argument value, and no key, anywhere in what was exported.
    let exported = format!("{:?}", receiver.exports.lock().unwrap());
    assert!(
        !exported.contains(ACCOUNT),
        "an argument value was exported"
    );
    assert!(!exported.contains(&key), "the agent key was exported");
}

#[tokio::test(flavor = "multi_thread")]
async fn spans_still_queued_at_sigterm_are_exported_before_the_server_exits() {
    let (receiver, endpoint) = Receiver::start().await;
    // Far longer than the test: only the flush at shutdown can send them.
    let mut server = Server::start_with_env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "600000"),
    ]);
    let agent = server.connect(&server.support_key).await;
    init(&agent).await;
    assert_eq!(receiver.export_count(), 0, "exported before the shutdown");

    assert!(server.terminate().success());
    let spans = receiver.spans();
    let request = only(&spans, "tools/call init_skilder");
    assert_eq!(
        attribute(request, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    let tool = only(&spans, "execute_tool init_skilder");
    assert_eq!(tool.parent_span_id, request.span_id);
    assert_eq!(receiver.service_names()[0], "skillgate");
}

#[tokio::test(flavor = "multi_thread")]
async fn otel_sdk_disabled_exports_nothing_even_with_an_endpoint() {
    let (receiver, endpoint) = Receiver::start().await;
    let mut server = Server::start_with_env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_SDK_DISABLED", "true"),
        ("OTEL_BSP_SCHEDULE_DELAY", "10"),
    ]);
    let agent = server.connect(&server.support_key).await;
    init(&agent).await;
    // The clean exit flushes whatever a tracer would have queued (see the test above).
    assert!(server.terminate().success());
    assert_eq!(receiver.export_count(), 0);
}
