//! The MCP server handler: four platform tools, each a call into the gateway.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    GetSkillRequestParams, GetSkillResult, GetTaskParams, GetTaskResult, Implementation,
    ListResourcesResult, ListSkillsResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use skillgate_core::gateway::skills::{self as served, SkillMethod};
use skillgate_core::gateway::{
    AgentIdentity, CallTask, Cancelled, Gateway, GatewayError, ToolReply,
};
use skillgate_core::policy::DenyCode;
use skillgate_core::trace::{self as otel, TARGET};
use tracing::{Instrument as _, Span};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::auth::AgentCaller;
use super::connection::MCP_SESSION_ID;
use super::core_tasks::AsTask;
use super::tools::{self, ParseError, PlatformCall};
use super::trace::RequestSpan;
use super::workspaces::CallerGateway;
use super::{failures, refusals, skills, tasks};

const INSTRUCTIONS: &str = "Skillgate governs which tools you may use. Call init_skilder first: \
it returns a session_id and the roles your key may learn. Learn the role your task needs with \
learn (path /roles/<role>) to read its instructions and unlock its tools, then run them with \
call_tool. Denials explain why and what is available.";

/// Made afresh for every request (`/mcp` is stateless) and holding nothing: the request
/// carries the gateway of its workspace ([`CallerGateway`], put there by admission), which
/// holds all state.
#[derive(Clone, Copy, Default)]
pub struct McpHandler;

async fn dispatch(
    gateway: &Gateway,
    agent: &AgentIdentity,
    call: PlatformCall,
) -> Result<ToolReply, GatewayError> {
    fault::inject(&call);
    match call {
        PlatformCall::Init { task_summary } => gateway.init(agent, task_summary).await,
        PlatformCall::Learn { path, session_id } => gateway.learn(agent, session_id, &path).await,
        PlatformCall::Call {
            tool,
            arguments,
            session_id,
        } => gateway.call(agent, session_id, &tool, arguments).await,
        PlatformCall::Resume {
            hold_id,
            tool,
            arguments,
            poll,
            session_id,
        } => {
            gateway
                .resume(
                    agent,
                    session_id,
                    &hold_id,
                    tool.as_deref(),
                    arguments,
                    poll,
                )
                .await
        }
        PlatformCall::Feedback {
            skill,
            rating,
            comment,
            session_id,
        } => {
            gateway
                .feedback(agent, session_id, &skill, rating, comment)
                .await
        }
    }
}

/// Fault injection for the test suite: a debug build started with
/// `SKILLGATE_FAULT_PANIC_TOOL=<tool>` panics while handling a `call_tool` of that tool, so
/// the tests can prove a panic is answered, audited and survived. Release builds have none.
mod fault {
    use super::PlatformCall;

    #[cfg(debug_assertions)]
    pub fn inject(call: &PlatformCall) {
        if let (Some(tool), Ok(wanted)) = (
            call.downstream_tool(),
            std::env::var("SKILLGATE_FAULT_PANIC_TOOL"),
        ) && tool == wanted
        {
            panic!("fault injected for `{tool}`");
        }
    }

    #[cfg(not(debug_assertions))]
    pub fn inject(_call: &PlatformCall) {}
}

/// The caller admitted by the auth middleware with the label of its MCP connection, and
/// the gateway of its workspace.
fn admitted(
    context: &RequestContext<RoleServer>,
) -> Result<(AgentIdentity, Arc<Gateway>), McpError> {
    let parts = context.extensions.get::<http::request::Parts>();
    let admitted = parts.and_then(|parts| {
        let caller = parts.extensions.get::<AgentCaller>()?;
        let gateway = parts.extensions.get::<CallerGateway>()?;
        Some((parts, caller, gateway))
    });
    let Some((parts, caller, CallerGateway(gateway))) = admitted else {
        // Only reachable if the handler were served without the auth middleware.
        tracing::error!("an MCP request reached the handler without an admitted caller");
        return Err(McpError::internal_error("internal error", None));
    };
    let connection = parts
        .headers
        .get(MCP_SESSION_ID)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    Ok((caller.identity(connection), gateway.clone()))
}

/// The trace span of one platform tool's execution (GenAI `execute_tool`), a child of the
/// MCP request's span; disabled when the request is not traced.
fn tool_span(context: &RequestContext<RoleServer>, tool: &'static str) -> Span {
    let parent = context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<RequestSpan>());
    let Some(RequestSpan(parent)) = parent else {
        return Span::none();
    };
    tracing::info_span!(
        target: TARGET,
        parent: parent,
        "platform tool",
        otel.name = format!("execute_tool {tool}"),
        gen_ai.tool.name = tool,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.type = "function",
    )
}

/// What a platform tool's answer says about its outcome, on its span: the decision and the
/// denial's code (a `call_tool` that reached the gateway has recorded its own already), the
/// governance session, and `error.type` for an error result.
fn record_reply(span: &Span, reply: &ToolReply, session: Option<&str>) {
    if span.is_disabled() {
        return;
    }
    if let ToolReply::Gateway {
        structured,
        is_error,
        ..
    } = reply
    {
        if let Some(decision) = structured.get("decision").and_then(|d| d.as_str()) {
            span.set_attribute(otel::DECISION, decision.to_owned());
        }
        if let Some(code) = structured.get("code").and_then(|c| c.as_str()) {
            span.set_attribute(otel::RULE, code.to_owned());
        }
        let started = structured.get("session_id").and_then(|s| s.as_str());
        if let Some(session) = session.or(started) {
            span.set_attribute(otel::SESSION_ID, session.to_owned());
        }
        if *is_error {
            otel::record_error(span, "tool_error", "the tool reported an error");
        }
    } else if let ToolReply::Downstream { result, .. } = reply
        && result.is_error == Some(true)
    {
        otel::record_error(span, "tool_error", "the downstream tool reported an error");
    }
}

/// The store or audit log failed while serving the Skills extension: the agent hears that
/// it failed, and whether the database was away (worth a retry); nothing is served
/// unaudited.
fn skills_failure(error: GatewayError) -> McpError {
    tracing::error!("the gateway failed while serving a skill");
    failures::to_agent(&error)
}

/// The four platform tools, and the Skills extension (SEP-2640) with directory reads over
/// the resources that carry the skill files.
fn server_info() -> ServerConfig {
    let capabilities = ServerCapabilities::builder()
        .enable_tools()
        .enable_resources()
        .enable_skills_with_directory_read()
        .enable_tasks()
        .build();
    ServerConfig::new(capabilities)
        .with_server_info(Implementation::new("skillgate", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
}

/// Leaves the call's task for the 2025-11-25 layer, which answers it in its own wire
/// form; the 2026-07-28 form returned here is never sent.
fn offer(
    slot: &AsTask,
    task: Result<CallTask, GatewayError>,
) -> Result<CallToolResponse, McpError> {
    let task = task.map_err(|error| {
        tracing::error!(%error, "the call could not be offered as a task");
        McpError::internal_error("internal error", None)
    })?;
    let created = tasks::created(&task);
    slot.fill(task);
    Ok(CallToolResponse::Task(created))
}

pub fn to_call_result(reply: ToolReply) -> CallToolResult {
    reply.into_call_result()
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
        let parts = context.extensions.get::<http::request::Parts>();
        refusals::take(parts);
        // A 2025-11-25 client asked for a task: whatever the call answers becomes one.
        let core_task = parts.and_then(|p| p.extensions.get::<AsTask>()).cloned();
        let (agent, gateway) = admitted(&context)?;
        let span = tracing::Span::current();
        span.record("key", agent.key_name.as_str());
        let call = match PlatformCall::parse(&request.name, request.arguments) {
            Ok(call) => call,
            Err(error) => {
                // Refused before any platform tool ran: audited under the caller all the same.
                let message = error.to_string();
                tracing::info!(%message, "refused platform tool call");
                gateway
                    .record_refusal(
                        &agent,
                        &request.name,
                        None,
                        DenyCode::InvalidArguments,
                        &message,
                    )
                    .await
                    .map_err(|error| {
                        tracing::error!("the refusal could not be audited");
                        failures::to_agent(&error)
                    })?;
                return match error {
                    ParseError::UnknownTool(_) => Err(McpError::invalid_params(message, None)),
                    ParseError::InvalidArguments(message) => {
                        let refused = tools::invalid_arguments(&message);
                        match core_task {
                            Some(slot) => {
                                let task = gateway.finished_task(&agent, refused).await;
                                offer(&slot, task)
                            }
                            None => Ok(refused.into()),
                        }
                    }
                };
            }
        };
        if let Some(downstream) = call.downstream_tool() {
            span.record("downstream", downstream);
        }
        let tool = call
            .downstream_tool()
            .unwrap_or(request.name.as_ref())
            .to_owned();
        let named_session = call.session_id().map(str::to_owned);
        // A call of a downstream tool may be held; a client that declared the tasks
        // extension then waits on it as a task.
        let as_task = matches!(call, PlatformCall::Call { .. })
            && context
                .client_capabilities()
                .is_some_and(|caps| caps.supports_tasks());
        let traced = tool_span(&context, call.platform_tool());
        // A panic anywhere below must not take the request down silently (the client would
        // wait for an answer that never comes, and the decision would go unaudited): it is
        // answered as an internal error, audited and counted, and the server keeps serving.
        let dispatched = AssertUnwindSafe(dispatch(&gateway, &agent, call))
            .catch_unwind()
            .instrument(traced.clone())
            .await;
        let reply = match dispatched {
            Ok(reply) => reply.map_err(|error| {
                otel::record_error(&traced, "internal_error", "the gateway failed");
                failures::to_agent(&error)
            })?,
            Err(panic) => {
                otel::record_error(&traced, "internal_error", "the request handler panicked");
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(panic = %message, %tool, "an MCP request handler panicked");
                if let Err(error) = gateway
                    .record_internal_error(&agent, &tool, named_session.as_deref())
                    .await
                {
                    tracing::error!(%error, "the failed request could not be audited");
                }
                return Err(McpError::internal_error("internal error", None));
            }
        };
        record_reply(&traced, &reply, named_session.as_deref());
        if let Some(slot) = core_task {
            let task = gateway.task_for_call(&agent, reply).await;
            return offer(&slot, task);
        }
        if as_task {
            let offered = gateway
                .task_for_reply(&agent, &reply)
                .await
                .map_err(|error| {
                    tracing::error!(%error, "the held call could not be offered as a task");
                    McpError::internal_error("internal error", None)
                })?;
            if let Some(task) = offered {
                return Ok(CallToolResponse::Task(tasks::created(&task)));
            }
        }
        Ok(to_call_result(reply).into())
    }

    #[tracing::instrument(skip_all, fields(key = tracing::field::Empty))]
    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        refusals::take(context.extensions.get::<http::request::Parts>());
        let (agent, gateway) = admitted(&context)?;
        tracing::Span::current().record("key", agent.key_name.as_str());
        match tasks::settle(&gateway, &agent, &request.task_id).await? {
            Some(task) => Ok(GetTaskResult::new(tasks::detailed(&task))),
            None => Err(tasks::not_found(&request.task_id)),
        }
    }

    #[tracing::instrument(skip_all, fields(key = tracing::field::Empty))]
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        refusals::take(context.extensions.get::<http::request::Parts>());
        let (agent, gateway) = admitted(&context)?;
        tracing::Span::current().record("key", agent.key_name.as_str());
        // A task that already ended acknowledges as one just cancelled: the extension
        // makes cancel idempotent, and the next tasks/get says how it ended.
        match gateway.cancel_task(&agent, &request.task_id).await {
            Ok(Cancelled::Now(_) | Cancelled::AlreadyFinished(_)) => Ok(()),
            Ok(Cancelled::NotFound) => Err(tasks::not_found(&request.task_id)),
            Err(error) => Err(tasks::failure_of(error)),
        }
    }

    #[tracing::instrument(skip_all, fields(key = tracing::field::Empty))]
    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        refusals::take(context.extensions.get::<http::request::Parts>());
        let (agent, gateway) = admitted(&context)?;
        tracing::Span::current().record("key", agent.key_name.as_str());
        // Only whether the task exists: an update never settles it (nothing runs).
        match gateway.has_task(&agent, &request.task_id).await {
            Ok(true) => Err(tasks::no_input(&request.task_id)),
            Ok(false) => Err(tasks::not_found(&request.task_id)),
            Err(error) => Err(tasks::failure_of(error)),
        }
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        let (agent, gateway) = admitted(&context)?;
        let cursor = request.and_then(|r| r.cursor);
        skills::list_skills(&gateway.skills_for(&agent), cursor.as_ref())
    }

    #[tracing::instrument(skip_all, fields(key = tracing::field::Empty))]
    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        refusals::take(context.extensions.get::<http::request::Parts>());
        let (agent, gateway) = admitted(&context)?;
        tracing::Span::current().record("key", agent.key_name.as_str());
        let found = gateway.skill_for(&agent, &request.uri);
        match found.filter(|s| s.uri() == request.uri) {
            Some(found) => Ok(skills::get_skill(&found)),
            None => {
                gateway
                    .refuse_skill(&agent, &request.uri, SkillMethod::Get)
                    .await
                    .map_err(skills_failure)?;
                Err(skills::unknown(&request.uri))
            }
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let (agent, gateway) = admitted(&context)?;
        let cursor = request.and_then(|r| r.cursor);
        skills::list_resources(&gateway.skills_for(&agent), cursor.as_ref())
    }

    #[tracing::instrument(skip_all, fields(key = tracing::field::Empty))]
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        refusals::take(context.extensions.get::<http::request::Parts>());
        let (agent, gateway) = admitted(&context)?;
        tracing::Span::current().record("key", agent.key_name.as_str());
        match gateway
            .read_skill_file(&agent, &request.uri)
            .await
            .map_err(skills_failure)?
        {
            Some((_, file)) => Ok(skills::read_file(&file).into()),
            None => Err(skills::unknown(&request.uri)),
        }
    }

    #[tracing::instrument(skip_all, fields(key = tracing::field::Empty))]
    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, McpError> {
        refusals::take(context.extensions.get::<http::request::Parts>());
        let (agent, gateway) = admitted(&context)?;
        tracing::Span::current().record("key", agent.key_name.as_str());
        if let Some(skill) = gateway.skill_for(&agent, &request.uri) {
            let directories = served::directories(std::slice::from_ref(&skill));
            if let Some(children) = directories.get(request.uri.trim_end_matches('/')) {
                return skills::read_directory(children, request.cursor.as_ref());
            }
            // A file the key may read is simply not a directory: nothing was withheld.
            if skill.file(&request.uri).is_some() {
                return Err(McpError::invalid_params(
                    format!("{} is a file, not a directory", request.uri),
                    None,
                ));
            }
        }
        gateway
            .refuse_skill(&agent, &request.uri, SkillMethod::DirectoryRead)
            .await
            .map_err(skills_failure)?;
        Err(skills::unknown(&request.uri))
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::ContentBlock;
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
    fn a_downstream_result_keeps_its_content_and_its_structured_result_inside_the_answer() {
        let mut downstream = CallToolResult::success(vec![ContentBlock::text("{\"ok\":true}")]);
        downstream.structured_content = Some(json!({"ok": true}));
        let result = to_call_result(ToolReply::Downstream {
            result: downstream.clone(),
            tool: "lookup_customer".into(),
            role: skillgate_core::slug::Slug::parse("tier-1-support").unwrap(),
        });
        assert_eq!(result.content, downstream.content);
        assert_eq!(result.is_error, Some(false));
        let answer = result.structured_content.unwrap();
        assert_eq!(answer["decision"], "allowed");
        assert_eq!(answer["role"], "tier-1-support");
        assert_eq!(answer["result"], json!({"ok": true}));
    }

    #[test]
    fn the_server_introduces_itself_as_skillgate_with_tools_and_instructions() {
        let info = server_info();
        assert_eq!(info.server_info.name, "skillgate");
        assert!(info.capabilities.tools.is_some());
        assert!(info.capabilities.resources.is_some());
        assert!(info.capabilities.supports_skills());
        assert!(INSTRUCTIONS.contains("init_skilder"));
        assert!(INSTRUCTIONS.len() < 400);
    }
}
