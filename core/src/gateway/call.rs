//! `call_tool`: the agent's entry into the governed-call pipeline (`pipeline/`).
//!
//! Ordering is the contract of DESIGN.md: the `call_allowed` event is durable before the
//! upstream is called, and the `call_result` event is durable before the agent gets its
//! answer, so no executed call is ever missing from the audit log.

use serde_json::Value;

use super::pipeline::Entry;
use super::{AgentIdentity, Gateway, GatewayError, ToolReply, bounds};

impl Gateway {
    /// `call_tool`: executes `tool` downstream only if a learned role grants it and every
    /// limit that binds the call passes; otherwise a denial naming the rule. Every outcome,
    /// including a refusal of the request's shape, is audited before the agent hears it.
    #[tracing::instrument(skip_all, fields(key = %agent.key_name, tool = %bounds::audited_tool(tool)))]
    pub async fn call(
        &self,
        agent: &AgentIdentity,
        session_id: Option<String>,
        tool: &str,
        arguments: Value,
    ) -> Result<ToolReply, GatewayError> {
        let entry = Entry::Call {
            session_id,
            tool,
            arguments,
        };
        self.govern(agent, entry).await
    }
}
