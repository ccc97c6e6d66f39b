//! A small MCP server for the upstream connector tests, served over HTTP in-process and
//! over stdio by the `upstream_stdio` test binary.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::watch;

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
