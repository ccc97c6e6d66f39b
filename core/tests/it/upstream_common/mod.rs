//! A small MCP server for the upstream connector tests, served over HTTP in-process and
//! over stdio by the `upstream_stdio` test binary.

// `upstream_stdio` includes this module too and uses only part of it.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use skillgate_core::model::{
    CatalogDraft, CatalogTool, Role, Scope, Skill, ToolSpec, Upstream, UpstreamKind,
};
use skillgate_core::policy::{CallRequest, CompiledCatalog, Decision, Permit, SessionView, decide};
use skillgate_core::slug::Slug;
use tokio::sync::watch;

fn slug(text: &str) -> Slug {
    Slug::parse(text).unwrap()
}

/// A permit to call `tool` with `arguments`, minted the only way permits are: by `decide`,
/// against a minimal catalog (one upstream offering only `tool`, with an open object
/// schema, one skill and role granting it, one scope) for a session that learned the role.
/// The connector tests exercise the upstream, so the policy here allows whatever they send.
pub fn permit(tool: &str, arguments: Map<String, Value>) -> Permit {
    let draft = CatalogDraft {
        tools: vec![CatalogTool {
            upstream: slug("test"),
            spec: ToolSpec {
                name: tool.to_owned(),
                description: format!("{tool}, as the test upstream serves it"),
                input_schema: json!({"type": "object"}),
                output_schema: None,
                annotations: None,
                sensitive_args: Vec::new(),
            },
            quarantine: None,
        }],
        skills: vec![Skill {
            slug: slug("calling"),
            description: "Calls the test tool.".to_owned(),
            instructions: "Call it.".to_owned(),
            tools: vec![tool.to_owned()],
            resources: Vec::new(),
            frontmatter_extra: Default::default(),
        }],
        roles: vec![Role {
            slug: slug("caller"),
            title: "Caller".to_owned(),
            description: "Calls the test tool.".to_owned(),
            instructions: "Call it.".to_owned(),
            skills: vec![slug("calling")],
            limits: Vec::new(),
        }],
        scopes: vec![Scope {
            slug: slug("tests"),
            description: String::new(),
            roles: vec![slug("caller")],
            guardrails: Vec::new(),
        }],
    };
    let upstream = Upstream {
        name: slug("test"),
        kind: UpstreamKind::Http {
            url: "http://upstream.invalid/mcp".to_owned(),
            ca_bundle: None,
            allow_plaintext: false,
        },
    };
    let catalog = CompiledCatalog::compile(draft.into_catalog(vec![upstream]));
    let now = chrono::Utc::now();
    let mut session = SessionView::new("s", "k", slug("tests"), now + chrono::Duration::hours(1));
    session.learn(slug("caller"), catalog.skill_versions_of("caller"));
    let request = CallRequest {
        session_id: "s",
        key_id: "k",
        tool,
        arguments,
        approved: None,
    };
    match decide(&catalog, Some(&session), request, now) {
        Decision::Allow(permit) => permit,
        Decision::Deny(denial) => panic!("the test catalog allows `{tool}`: {denial}"),
        Decision::Hold(hold) => panic!("the test catalog holds nothing: {}", hold.rule()),
    }
}

/// Tools: `echo` returns its arguments as structured content; `slow` sleeps `ms`
/// milliseconds; `fail` is a tool error; `gather` waits until `n` gather calls are in
/// flight at once (it proves calls run concurrently without timing them); `exit_process`
/// (not listed) ends the serving process in the middle of the request.
#[derive(Clone, Default)]
pub struct TestUpstream {
    gathered: Arc<watch::Sender<u64>>,
}

fn object_schema(properties: Value) -> Arc<serde_json::Map<String, Value>> {
    let Value::Object(schema) = json!({ "type": "object", "properties": properties }) else {
        unreachable!()
    };
    Arc::new(schema)
}

pub fn tools() -> Vec<Tool> {
    vec![
        Tool::new("echo", "Returns its arguments", object_schema(json!({}))),
        Tool::new(
            "slow",
            "Sleeps for `ms` milliseconds",
            object_schema(json!({ "ms": { "type": "integer" } })),
        ),
        Tool::new(
            "fail",
            "Always reports a tool error",
            object_schema(json!({})),
        ),
        Tool::new(
            "gather",
            "Returns once `n` gather calls are in flight together",
            object_schema(json!({ "n": { "type": "integer" } })),
        ),
    ]
}

impl ServerHandler for TestUpstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let number = |key: &str| arguments.get(key).and_then(Value::as_u64).unwrap_or(0);
        let result = match request.name.as_ref() {
            "echo" => CallToolResult::structured(Value::Object(arguments.clone())),
            "slow" => {
                tokio::time::sleep(Duration::from_millis(number("ms"))).await;
                CallToolResult::success(vec![ContentBlock::text("done")])
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text("the tool failed")]),
            // Only for the stdio tests, where the server is a child process.
            "exit_process" => std::process::exit(3),
            "gather" => {
                let wanted = number("n");
                self.gathered.send_modify(|arrived| *arrived += 1);
                let mut arrived = self.gathered.subscribe();
                match tokio::time::timeout(
                    Duration::from_secs(10),
                    arrived.wait_for(|count| *count >= wanted),
                )
                .await
                {
                    Ok(_) => CallToolResult::success(vec![ContentBlock::text("all here")]),
                    Err(_) => {
                        CallToolResult::error(vec![ContentBlock::text("calls were serialized")])
                    }
                }
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool `{other}`"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }
}
