//! The admit stage: what is checked before anything is looked up or locked.

use serde_json::Value;

use super::{Admitted, Entry, Inspection, Refusal};
use crate::audit::redact_sensitive;
use crate::gateway::{AgentIdentity, Gateway, GatewayError, Place, bounds};
use crate::policy::{CompiledCatalog, Denial, DenyCode};
use crate::store::holds::HoldRow;
use crate::trace;

impl Gateway {
    /// Admits an entry: the request's bounds, its session id (only the id: the session is
    /// read once, under its lock), its arguments as the audit records them. A refusal here
    /// stays with the caller when nothing of the request was looked up.
    pub(super) async fn admit(
        &self,
        agent: &AgentIdentity,
        catalog: &CompiledCatalog,
        entry: Entry<'_>,
    ) -> Result<Result<Admitted, Refusal>, GatewayError> {
        let (session_id, tool, arguments) = match entry {
            Entry::Call {
                session_id,
                tool,
                arguments,
            } => (session_id, tool, arguments),
            Entry::Resume(hold) => return Ok(Admitted::resuming(*hold, catalog).map_err(|r| *r)),
        };
        let named = session_id.filter(|id| !id.is_empty());
        let oversized = bounds::session_id(named.as_deref())
            .and_then(|()| bounds::tool_name(tool))
            .and_then(|()| bounds::arguments(&arguments));
        if let Err(rule) = oversized {
            return Ok(Err(Refusal::new(
                Place::caller_naming(named.as_deref()),
                &bounds::audited_tool(tool),
                bounds::audited_arguments(arguments),
                Denial::new(DenyCode::InvalidArguments, rule),
            )));
        }
        let sid = match named {
            Some(id) => id,
            None => self
                .store
                .newest_session_id(agent.key_id, agent.connection.as_deref())
                .await?
                .unwrap_or_default(),
        };
        if !sid.is_empty() {
            trace::record_current([opentelemetry::KeyValue::new(trace::SESSION_ID, sid.clone())]);
        }
        let audited = redact_sensitive(&arguments, sensitive_args(catalog, tool));
        Ok(Ok(Admitted {
            sid,
            tool: tool.to_owned(),
            arguments: match arguments {
                Value::Object(map) => Some(map),
                _ => None,
            },
            audited,
            resumes: None,
            noted: Inspection::default(),
        }))
    }
}

impl Admitted {
    /// An approved hold, admitted to run: its session, tool and held arguments.
    pub(super) fn resuming(hold: HoldRow, catalog: &CompiledCatalog) -> Result<Self, Box<Refusal>> {
        let Value::Object(arguments) = hold.arguments.clone() else {
            return Err(Box::new(
                Refusal::new(
                    Place::Session(hold.session_id.clone()),
                    &hold.tool,
                    Value::Null,
                    Denial::new(
                        DenyCode::InternalError,
                        "the held call's arguments are unreadable",
                    ),
                )
                .of_hold(&hold.id),
            ));
        };
        Ok(Self {
            sid: hold.session_id.clone(),
            tool: hold.tool.clone(),
            audited: redact_sensitive(&hold.arguments, sensitive_args(catalog, &hold.tool)),
            arguments: Some(arguments),
            resumes: Some(hold),
            noted: Inspection::default(),
        })
    }
}

/// The argument names whose values the audit log never stores, for `tool`.
fn sensitive_args<'c>(catalog: &'c CompiledCatalog, tool: &str) -> &'c [String] {
    catalog
        .tool(tool)
        .map(|t| t.spec.sensitive_args.as_slice())
        .unwrap_or_default()
}
