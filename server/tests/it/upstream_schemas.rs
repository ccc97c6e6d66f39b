//! Whatever schema an upstream advertises, the gateway starts, compiles the rest of its
//! catalog and decides every call: a bound past `f64` is honoured exactly, and a schema that
//! cannot be compiled leaves only its own tool unusable.

use crate::common;

use std::sync::Arc;

use common::{Server, call, init, learn};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use skillgate_core::model::{ToolSpec, Upstream, UpstreamKind};
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;

/// The schemas of a careless (or hostile) upstream.
fn advertised() -> Vec<(&'static str, Value)> {
    let huge: Value = serde_json::from_str(
        r#"{"type":"object","properties":{"amount":{"type":"number","maximum":1e400}},"required":["amount"]}"#,
    )
    .unwrap();
    vec![
        ("pay_huge", huge),
        ("broken_schema", json!({"type": 12})),
        ("echo", json!({"type": "object"})),
    ]
}

#[derive(Clone)]
struct CarelessUpstream;

impl ServerHandler for CarelessUpstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = advertised()
            .into_iter()
            .map(|(name, schema)| {
                let Value::Object(schema) = schema else {
                    unreachable!()
                };
                Tool::new(name, "a tool of the careless upstream", Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let mut result = CallToolResult::success(vec![ContentBlock::text(arguments.to_string())]);
        result.structured_content = Some(json!({ "tool": request.name, "arguments": arguments }));
        Ok(result.into())
    }
}

async fn serve_careless() -> String {
    let service: StreamableHttpService<CarelessUpstream, LocalSessionManager> =
        StreamableHttpService::new(
            || Ok(CarelessUpstream),
            Arc::default(),
            StreamableHttpServerConfig::default(),
        );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    url
}

fn slug(text: &str) -> Slug {
    Slug::parse(text).unwrap()
}

/// Registers the careless upstream with its tools, a role granting them and a scope, in the
/// database a running server uses (as an admin would, through the store).
async fn register_careless(server: &Server, url: &str) {
    let store = Store::open(&server.database_url()).await.unwrap();
    store
        .upsert_upstream(&Upstream {
            name: slug("careless"),
            kind: UpstreamKind::Http {
                url: url.to_owned(),
                ca_bundle: None,
                allow_plaintext: false,
            },
        })
        .await
        .unwrap();
    let specs: Vec<ToolSpec> = advertised()
        .into_iter()
        .map(|(name, schema)| ToolSpec {
            name: name.to_owned(),
            description: "a tool of the careless upstream".to_owned(),
            input_schema: schema,
            output_schema: None,
            annotations: None,
            sensitive_args: Vec::new(),
        })
        .collect();
    store.seed_tools(&slug("careless"), &specs).await.unwrap();
    common::catalog::grant(
        &store,
        common::catalog::Grant {
            skill: "careless-tools",
            role: "careless-user",
            scope: "careless",
            tools: advertised().iter().map(|(n, _)| (*n).to_owned()).collect(),
        },
    )
    .await;
}

#[tokio::test]
async fn an_upstream_schema_past_f64_or_beyond_compiling_leaves_the_gateway_deciding() {
    let url = serve_careless().await;
    let first = Server::start();
    register_careless(&first, &url).await;
    // A fresh process compiles the stored catalog at start and syncs the upstream.
    let server = first.replica();
    let key = server.create_key("careless-agent", "careless");
    let client = server.connect(&key).await;
    let (session, _) = init(&client).await;
    let learned = learn(&client, &session, "/roles/careless-user").await;
    assert!(!learned.is_error, "{}", learned.text);

    let huge: Map<String, Value> = serde_json::from_str(r#"{"amount":1e400}"#).unwrap();
    let allowed = call(&client, &session, "pay_huge", Value::Object(huge)).await;
    assert!(
        !allowed.is_error,
        "1e400 is within a maximum of 1e400: {}",
        allowed.text
    );
    let over: Map<String, Value> = serde_json::from_str(r#"{"amount":2e400}"#).unwrap();
    let denied = call(&client, &session, "pay_huge", Value::Object(over)).await;
    assert!(denied.is_error);
    assert_eq!(denied.code(), "INVALID_ARGUMENTS", "{}", denied.text);
    assert!(denied.text.contains("amount"), "{}", denied.text);

    let unusable = call(&client, &session, "broken_schema", json!({})).await;
    assert!(unusable.is_error);
    assert_eq!(unusable.code(), "TOOL_UNUSABLE", "{}", unusable.text);
    assert!(
        unusable.text.contains("input schema is invalid"),
        "{}",
        unusable.text
    );

    let echoed = call(&client, &session, "echo", json!({"ok": true})).await;
    assert!(
        !echoed.is_error,
        "the rest of the catalog works: {}",
        echoed.text
    );
    // The demo catalog compiled beside it.
    let demo = server.connect(&server.support_key).await;
    let (demo_session, _) = init(&demo).await;
    assert!(
        !learn(&demo, &demo_session, "/roles/tier-1-support")
            .await
            .is_error
    );
}
