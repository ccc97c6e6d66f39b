//! The demo upstream: an MCP server (stdio, or streamable HTTP with `--http`) with the
//! fifteen customer-support tools of the demo company, over fixture data held in memory
//! (and, with `bench_tools`, a benchmark tool: see `bench.rs`).
//!
//! Tool failures are tool results with `isError: true` and a text `CODE: message`
//! (`CUSTOMER_NOT_FOUND`, `ORDER_NOT_FOUND`, `USER_NOT_FOUND`, `NOT_ELIGIBLE`,
//! `SERVICE_CREDIT_DECLINED`, `CONFIRMATION_REQUIRED`, `POLICY_NOT_FOUND`,
//! `INVALID_ARGUMENTS`). A name the upstream does not serve gets an `UNKNOWN_TOOL` tool
//! result too, so a model behind a misconfigured gateway can read what went wrong; such a
//! call executes nothing and is not written to the executions log. Every call to a served
//! tool is logged, including ones rejected for their arguments: the log shows what reached
//! the upstream.

mod args;
mod bench;
mod error;
mod executions;
mod fixtures;
mod handlers;
mod http;
mod policies;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use chrono::Utc;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::{Map, Value};
use skillgate_core::demo::tools::tool_specs;
use skillgate_core::model::ToolSpec;
use tokio::sync::Mutex;

use self::args::Args;
pub use self::bench::{BENCH_PAYLOAD, specs as bench_specs};
use self::error::ToolError;
use self::executions::{ExecutionsLog, ExecutionsLogError};
use self::fixtures::Company;
pub use self::http::{router as http_router, serve_http};

/// Read when `DemoUpstreamOptions::executions_log` is not set.
pub const EXECUTIONS_LOG_ENV: &str = "SKILLGATE_DEMO_EXECUTIONS_LOG";

#[derive(Debug, Clone, Default)]
pub struct DemoUpstreamOptions {
    /// Append one JSON line per executed tool call to this file.
    pub executions_log: Option<PathBuf>,
    /// Serve the benchmark tool `bench_payload` beside the fifteen (see `bench.rs`).
    pub bench_tools: bool,
}

impl DemoUpstreamOptions {
    /// Fills `executions_log` from [`EXECUTIONS_LOG_ENV`] when it is not set.
    pub fn with_env_defaults(self) -> Self {
        Self {
            executions_log: self
                .executions_log
                .or_else(|| std::env::var_os(EXECUTIONS_LOG_ENV).map(PathBuf::from)),
            ..self
        }
    }
}

/// Serves the demo upstream on stdin/stdout until the client disconnects.
pub async fn serve_stdio(options: DemoUpstreamOptions) -> anyhow::Result<()> {
    let upstream = DemoUpstream::new(options.with_env_defaults())?;
    tracing::info!(
        tools = upstream.specs.len(),
        "demo upstream serving on stdio"
    );
    let service = upstream
        .serve(rmcp::transport::stdio())
        .await
        .context("the MCP handshake on stdio failed")?;
    let reason = service
        .waiting()
        .await
        .context("the demo upstream stopped unexpectedly")?;
    tracing::info!(?reason, "demo upstream stopped");
    Ok(())
}

/// The MCP handler. Each instance has its own copy of the books.
pub struct DemoUpstream {
    specs: Vec<ToolSpec>,
    tools: Vec<Tool>,
    company: Mutex<Company>,
    executions_log: Option<ExecutionsLog>,
}

impl DemoUpstream {
    pub fn new(options: DemoUpstreamOptions) -> Result<Self, ExecutionsLogError> {
        let executions_log = options
            .executions_log
            .as_deref()
            .map(ExecutionsLog::open)
            .transpose()?;
        let mut specs = tool_specs();
        if options.bench_tools {
            specs.extend(bench::specs());
        }
        let tools = specs.iter().map(to_mcp_tool).collect();
        Ok(Self {
            specs,
            tools,
            company: Mutex::new(Company::seeded(Utc::now())),
            executions_log,
        })
    }

    async fn execute(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
    ) -> Result<Result<Answer, ToolError>, ExecutionsLogError> {
        let Some(spec) = self.specs.iter().find(|s| s.name == name) else {
            return Ok(Err(ToolError::UnknownTool(name.to_owned())));
        };
        let mut company = self.company.lock().await;
        let now = Utc::now();
        let outcome = Args::check(spec, arguments).and_then(|args| match name {
            bench::BENCH_PAYLOAD => bench::payload(&args).map(Answer::Text),
            _ => handlers::call(&mut company, &spec.name, &args, now).map(Answer::Json),
        });
        if let Some(log) = &self.executions_log {
            log.record(spec, arguments, outcome.is_ok(), now)?;
        }
        Ok(outcome)
    }
}

impl ServerHandler for DemoUpstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "skillgate-demo-upstream",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Customer-support tools of the Skillgate demo company, over fixture data.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = request.arguments.unwrap_or_default();
        let outcome = self
            .execute(&request.name, &arguments)
            .await
            .map_err(|err| {
                tracing::error!(error = %err, source = ?std::error::Error::source(&err), "executions log");
                McpError::internal_error("the demo upstream could not record the call", None)
            })?;
        match &outcome {
            Ok(_) => tracing::debug!(tool = %request.name, "tool call succeeded"),
            Err(err) => {
                tracing::debug!(tool = %request.name, code = err.code(), "tool call failed")
            }
        }
        Ok(to_call_result(outcome).into())
    }
}

/// A catalog tool definition as an MCP `Tool` (also what `skillgate-dev context-cost` lists flat).
pub fn to_mcp_tool(spec: &ToolSpec) -> Tool {
    let schema = match &spec.input_schema {
        Value::Object(schema) => schema.clone(),
        _ => Map::new(),
    };
    Tool::new(
        spec.name.clone(),
        spec.description.clone(),
        Arc::new(schema),
    )
}

/// What a tool answers: the demo company's JSON (as text and structured content), or
/// plain text (the benchmark payload, whose size is the text's).
enum Answer {
    Json(Value),
    Text(String),
}

fn to_call_result(outcome: Result<Answer, ToolError>) -> CallToolResult {
    let (text, structured, is_error) = match outcome {
        Ok(Answer::Text(text)) => {
            return CallToolResult::success(vec![ContentBlock::text(text)]);
        }
        Ok(Answer::Json(value)) => (
            serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string()),
            value,
            false,
        ),
        Err(err) => (err.to_string(), err.to_structured(), true),
    };
    let mut result = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    result.structured_content = Some(structured);
    result
}
