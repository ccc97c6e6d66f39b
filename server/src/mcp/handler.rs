//! The MCP server handler: four platform tools, each a call into the gateway.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use skillgate_core::gateway::{AgentIdentity, Gateway, GatewayError, ToolReply};

use super::auth::AgentCaller;
use super::connection::MCP_SESSION_ID;
use super::tools::{self, ParseError, PlatformCall};

const INSTRUCTIONS: &str = "Skillgate governs which tools you may use. Call init_skilder first: \
it returns a session_id and the roles your key may learn. Learn the role your task needs with \
learn (path /roles/<role>) to read its instructions and unlock its tools, then run them with \
call_tool. Denials explain why and what is available.";

/// Made afresh for every request (`/mcp` is stateless); all state is in the gateway.
#[derive(Clone)]
pub struct McpHandler {
    gateway: Gateway,
}

impl McpHandler {
    pub fn new(gateway: Gateway) -> Self {
        Self { gateway }
    }

    async fn dispatch(
        &self,
        agent: &AgentIdentity,
        call: PlatformCall,
    ) -> Result<ToolReply, GatewayError> {
        match call {
            PlatformCall::Init { task_summary } => self.gateway.init(agent, task_summary).await,
            PlatformCall::Learn { path, session_id } => {
                self.gateway.learn(agent, session_id, &path).await
            }
            PlatformCall::Call {
                tool,
                arguments,
                session_id,
            } => self.gateway.call(agent, session_id, &tool, arguments).await,
            PlatformCall::Feedback {
                skill,
                rating,
                comment,
                session_id,
            } => {
                self.gateway
                    .feedback(agent, session_id, &skill, rating, comment)
                    .await
            }
        }
    }
}

/// The caller admitted by the auth middleware, and the label of its MCP connection.
fn identity(context: &RequestContext<RoleServer>) -> Result<AgentIdentity, McpError> {
    let parts = context.extensions.get::<http::request::Parts>();
    let caller = parts.and_then(|parts| parts.extensions.get::<AgentCaller>());
    let Some((parts, caller)) = parts.zip(caller) else {
        // Only reachable if the handler were served without the auth middleware.
        tracing::error!("an MCP request reached the handler without an admitted caller");
        return Err(McpError::internal_error("internal error", None));
    };
    let connection = parts
        .headers
        .get(MCP_SESSION_ID)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    Ok(caller.identity(connection))
}

fn server_info() -> ServerConfig {
    ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        .with_server_info(Implementation::new("skillgate", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
}

pub fn to_call_result(reply: ToolReply) -> CallToolResult {
    match reply {
        ToolReply::Gateway {
            text,
            structured,
            is_error,
        } => {
            let content = vec![ContentBlock::text(text)];
            let mut result = if is_error {
                CallToolResult::error(content)
            } else {
                CallToolResult::success(content)
            };
            result.structured_content = Some(structured);
            result
        }
        ToolReply::Downstream(result) => result,
    }
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        server_info()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(
            tools::platform_tools().to_vec(),
        ))
    }

    #[tracing::instrument(
        skip_all,
        fields(tool = %request.name, downstream = tracing::field::Empty, key = tracing::field::Empty)
    )]
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let agent = identity(&context)?;
        let span = tracing::Span::current();
        span.record("key", agent.key_name.as_str());
        let call = match PlatformCall::parse(&request.name, request.arguments) {
            Ok(call) => call,
            Err(error @ ParseError::UnknownTool(_)) => {
                return Err(McpError::invalid_params(error.to_string(), None));
            }
            Err(ParseError::InvalidArguments(message)) => {
                tracing::info!(%message, "invalid platform tool arguments");
                return Ok(tools::invalid_arguments(&message).into());
            }
        };
        if let Some(downstream) = call.downstream_tool() {
            span.record("downstream", downstream);
        }
        let reply = self.dispatch(&agent, call).await.map_err(|error| {
            tracing::error!(%error, "the gateway failed");
            McpError::internal_error("internal error", None)
        })?;
        Ok(to_call_result(reply).into())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_gateway_reply_becomes_text_plus_structured_content() {
        let result = to_call_result(ToolReply::Gateway {
            text: "GOVERNANCE VIOLATION: amount".into(),
            structured: json!({"decision": "denied", "code": "GOVERNANCE_VIOLATION"}),
            is_error: true,
        });
        assert_eq!(result.is_error, Some(true));
        assert_eq!(result.content.len(), 1);
        assert_eq!(
            result.content[0].as_text().map(|t| t.text.as_str()),
            Some("GOVERNANCE VIOLATION: amount")
        );
        assert_eq!(
            result.structured_content.unwrap()["code"],
            "GOVERNANCE_VIOLATION"
        );
    }

    #[test]
    fn a_downstream_result_passes_through_unchanged() {
        let downstream = CallToolResult::success(vec![ContentBlock::text("{\"ok\":true}")]);
        assert_eq!(
            to_call_result(ToolReply::Downstream(downstream.clone())),
            downstream
        );
    }

    #[test]
    fn the_server_introduces_itself_as_skillgate_with_tools_and_instructions() {
        let info = server_info();
        assert_eq!(info.server_info.name, "skillgate");
        assert!(info.capabilities.tools.is_some());
        assert!(INSTRUCTIONS.contains("init_skilder"));
        assert!(INSTRUCTIONS.len() < 400);
    }
}
