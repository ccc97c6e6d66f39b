//! The four platform tools: their definitions (the same for every agent) and the parsing of
//! their arguments into a [`PlatformCall`].

use std::sync::{Arc, LazyLock};

use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::{Map, Value, json};
use skillgate_core::gateway::{CallAnswer, output_schema};
use skillgate_core::policy::{Denial, DenyCode};

pub const INIT_SKILDER: &str = "init_skilder";
pub const LEARN: &str = "learn";
pub const CALL_TOOL: &str = "call_tool";
pub const FEEDBACK_SKILL: &str = "feedback_skill";

/// Kept short on purpose: every agent pays for these bytes in its context window.
static PLATFORM_TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(|| {
    vec![
        tool(
            INIT_SKILDER,
            "Start a session. Returns session_id and the roles you may learn.",
            json!({"task_summary": {"type": "string"}}),
            &[],
        ),
        tool(
            LEARN,
            "Learn a role (/roles/<role>), a skill (/<skill>) or a document (/<skill>/<resource>). Unlocks the role's tools.",
            json!({"path": {"type": "string"}, "session_id": {"type": "string"}}),
            &["path"],
        ),
        tool(
            CALL_TOOL,
            "Call a tool of a learned role, within its limits. To run a call held for approval, pass its hold_id (poll: true only checks it).",
            json!({
                "tool": {"type": "string"},
                "arguments": {"type": "object"},
                "session_id": {"type": "string"},
                "hold_id": {"type": "string"},
                "poll": {"type": "boolean"},
            }),
            &[],
        )
        // Every answer, refusal or result, has this one shape (`gateway::answer`).
        .with_raw_output_schema(Arc::new(output_schema().clone())),
        tool(
            FEEDBACK_SKILL,
            "Rate a skill from 1 to 5, with an optional comment for its curators.",
            json!({
                "skill": {"type": "string"},
                "rating": {"type": "integer", "minimum": 1, "maximum": 5},
                "comment": {"type": "string"},
                "session_id": {"type": "string"},
            }),
            &["skill", "rating"],
        ),
    ]
});

fn tool(
    name: &'static str,
    description: &'static str,
    properties: Value,
    required: &[&str],
) -> Tool {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), properties);
    if !required.is_empty() {
        schema.insert("required".into(), json!(required));
    }
    schema.insert("additionalProperties".into(), json!(false));
    Tool::new(name, description, Arc::new(schema))
}

/// Whether `name` is one of the four platform tools.
pub fn is_platform_tool(name: &str) -> bool {
    [INIT_SKILDER, LEARN, CALL_TOOL, FEEDBACK_SKILL].contains(&name)
}

/// The four platform tools, identical for every agent and connection.
pub fn platform_tools() -> &'static [Tool] {
    &PLATFORM_TOOLS
}

/// A platform tool call with its arguments checked for shape.
#[derive(Debug, Clone, PartialEq)]
pub enum PlatformCall {
    Init {
        task_summary: Option<String>,
    },
    Learn {
        path: String,
        session_id: Option<String>,
    },
    Call {
        tool: String,
        /// Passed on as given, even when it is not an object: the gateway audits and
        /// denies it, so a malformed call still leaves a trace.
        arguments: Value,
        session_id: Option<String>,
    },
    /// `call_tool` naming a `hold_id`: where the hold stands, and its run once approved.
    Resume {
        hold_id: String,
        tool: Option<String>,
        arguments: Option<Value>,
        poll: bool,
        session_id: Option<String>,
    },
    Feedback {
        skill: String,
        rating: i64,
        comment: Option<String>,
        session_id: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("unknown tool `{0}`; the tools are init_skilder, learn, call_tool and feedback_skill")]
    UnknownTool(String),
    #[error("{0}")]
    InvalidArguments(String),
}

impl PlatformCall {
    /// The downstream tool a `call_tool` names, for the trace span.
    pub fn downstream_tool(&self) -> Option<&str> {
        match self {
            Self::Call { tool, .. } => Some(tool),
            Self::Resume { tool, .. } => tool.as_deref(),
            _ => None,
        }
    }

    /// The platform tool this call is a call of.
    pub fn platform_tool(&self) -> &'static str {
        match self {
            Self::Init { .. } => INIT_SKILDER,
            Self::Learn { .. } => LEARN,
            Self::Call { .. } | Self::Resume { .. } => CALL_TOOL,
            Self::Feedback { .. } => FEEDBACK_SKILL,
        }
    }

    /// The session the call names, if any.
    pub fn session_id(&self) -> Option<&str> {
        match self {
            Self::Init { .. } => None,
            Self::Learn { session_id, .. }
            | Self::Call { session_id, .. }
            | Self::Resume { session_id, .. }
            | Self::Feedback { session_id, .. } => session_id.as_deref(),
        }
    }

    pub fn parse(name: &str, arguments: Option<JsonObject>) -> Result<Self, ParseError> {
        let mut args = Args::new(name, arguments.unwrap_or_default());
        let call = match name {
            INIT_SKILDER => Self::Init {
                task_summary: args.opt_string("task_summary")?,
            },
            LEARN => Self::Learn {
                path: args.string("path")?,
                session_id: args.opt_string("session_id")?,
            },
            CALL_TOOL => match args.opt_string("hold_id")? {
                Some(hold_id) => Self::Resume {
                    hold_id,
                    tool: args.opt_string("tool")?,
                    arguments: args.optional("arguments"),
                    poll: args.opt_bool("poll")?.unwrap_or(false),
                    session_id: args.opt_string("session_id")?,
                },
                None => {
                    if args.opt_bool("poll")?.is_some() {
                        return Err(args.invalid("`poll` goes with `hold_id`"));
                    }
                    Self::Call {
                        tool: args.string("tool")?,
                        arguments: args.required("arguments")?,
                        session_id: args.opt_string("session_id")?,
                    }
                }
            },
            FEEDBACK_SKILL => Self::Feedback {
                skill: args.string("skill")?,
                rating: args.rating("rating")?,
                comment: args.opt_string("comment")?,
                session_id: args.opt_string("session_id")?,
            },
            other => return Err(ParseError::UnknownTool(other.to_owned())),
        };
        args.finish()?;
        Ok(call)
    }
}

/// Takes arguments out one by one, so whatever is left at the end was not expected.
struct Args<'a> {
    tool: &'a str,
    map: Map<String, Value>,
}

impl<'a> Args<'a> {
    fn new(tool: &'a str, map: Map<String, Value>) -> Self {
        Self { tool, map }
    }

    fn invalid(&self, message: impl std::fmt::Display) -> ParseError {
        ParseError::InvalidArguments(format!("{}: {message}", self.tool))
    }

    fn required(&mut self, key: &str) -> Result<Value, ParseError> {
        match self.map.remove(key) {
            None | Some(Value::Null) => Err(self.invalid(format_args!("`{key}` is required"))),
            Some(value) => Ok(value),
        }
    }

    fn optional(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key).filter(|v| !v.is_null())
    }

    fn opt_bool(&mut self, key: &str) -> Result<Option<bool>, ParseError> {
        match self.map.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(flag)),
            Some(_) => Err(self.invalid(format_args!("`{key}` must be true or false"))),
        }
    }

    fn string(&mut self, key: &str) -> Result<String, ParseError> {
        match self.required(key)? {
            Value::String(text) => Ok(text),
            _ => Err(self.invalid(format_args!("`{key}` must be a string"))),
        }
    }

    fn opt_string(&mut self, key: &str) -> Result<Option<String>, ParseError> {
        match self.map.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(self.invalid(format_args!("`{key}` must be a string"))),
        }
    }

    /// Any integer: the gateway refuses one outside 1 to 5, and audits the refusal.
    fn rating(&mut self, key: &str) -> Result<i64, ParseError> {
        match self.required(key)?.as_i64() {
            Some(rating) => Ok(rating),
            _ => Err(self.invalid(format_args!("`{key}` must be an integer from 1 to 5"))),
        }
    }

    fn finish(self) -> Result<(), ParseError> {
        match self.map.keys().next() {
            None => Ok(()),
            Some(key) => Err(self.invalid(format_args!("unexpected argument `{key}`"))),
        }
    }
}

/// The tool result for arguments of the wrong shape: a denial the model can read and fix,
/// of the shape every `call_tool` answer has.
pub fn invalid_arguments(message: &str) -> CallToolResult {
    CallAnswer::denied(Denial::new(DenyCode::InvalidArguments, message))
        .into_reply()
        .into_call_result()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> Option<JsonObject> {
        match value {
            Value::Object(map) => Some(map),
            _ => panic!("an object"),
        }
    }

    fn invalid(name: &str, value: Value) -> String {
        match PlatformCall::parse(name, object(value)) {
            Err(ParseError::InvalidArguments(message)) => message,
            other => panic!("expected invalid arguments, got {other:?}"),
        }
    }

    #[test]
    fn what_a_model_reads_of_the_four_definitions_is_under_two_kilobytes() {
        // Clients hand a model the names, descriptions and input schemas; `outputSchema`
        // is for the client's own validation.
        let read: Vec<Value> = platform_tools()
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema}))
            .collect();
        let bytes = serde_json::to_vec(&read).unwrap();
        assert!(bytes.len() < 2_000, "{} bytes", bytes.len());
    }

    #[test]
    fn call_tool_alone_publishes_the_answer_schema_as_its_output_schema() {
        for tool in platform_tools() {
            match tool.name.as_ref() {
                CALL_TOOL => assert_eq!(tool.output_schema.as_deref(), Some(output_schema())),
                _ => assert!(tool.output_schema.is_none(), "{}", tool.name),
            }
        }
    }

    #[test]
    fn the_tool_list_names_exactly_the_four_platform_tools() {
        let names: Vec<&str> = platform_tools().iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, [INIT_SKILDER, LEARN, CALL_TOOL, FEEDBACK_SKILL]);
        for tool in platform_tools() {
            assert_eq!(tool.input_schema["type"], "object");
            assert_eq!(tool.input_schema["additionalProperties"], false);
        }
    }

    #[test]
    fn init_takes_an_optional_task_summary() {
        assert_eq!(
            PlatformCall::parse(INIT_SKILDER, None).unwrap(),
            PlatformCall::Init { task_summary: None }
        );
        assert_eq!(
            PlatformCall::parse(INIT_SKILDER, object(json!({"task_summary": "refund"}))).unwrap(),
            PlatformCall::Init {
                task_summary: Some("refund".into())
            }
        );
    }

    #[test]
    fn call_tool_passes_non_object_arguments_on_to_the_gateway() {
        let call = PlatformCall::parse(
            CALL_TOOL,
            object(json!({"tool": "lookup_customer", "arguments": "C-1001", "session_id": "s"})),
        )
        .unwrap();
        assert_eq!(
            call,
            PlatformCall::Call {
                tool: "lookup_customer".into(),
                arguments: json!("C-1001"),
                session_id: Some("s".into()),
            }
        );
        assert_eq!(call.downstream_tool(), Some("lookup_customer"));
    }

    #[test]
    fn wrong_shapes_are_invalid_arguments_that_name_the_field() {
        assert!(invalid(LEARN, json!({})).contains("`path` is required"));
        assert!(invalid(LEARN, json!({"path": 7})).contains("`path` must be a string"));
        assert!(invalid(CALL_TOOL, json!({"tool": "x"})).contains("`arguments` is required"));
        assert!(invalid(LEARN, json!({"path": "/roles/a", "extra": 1})).contains("`extra`"));
        assert!(invalid(INIT_SKILDER, json!({"session_id": ["a"]})).contains("`session_id`"));
        for rating in [json!(2.5), json!("3")] {
            let message = invalid(FEEDBACK_SKILL, json!({"skill": "s", "rating": rating}));
            assert!(message.contains("1 to 5"), "{message}");
        }
    }

    #[test]
    fn feedback_takes_a_rating_from_one_to_five() {
        assert_eq!(
            PlatformCall::parse(
                FEEDBACK_SKILL,
                object(json!({"skill": "refund-handling", "rating": 5, "comment": "clear"}))
            )
            .unwrap(),
            PlatformCall::Feedback {
                skill: "refund-handling".into(),
                rating: 5,
                comment: Some("clear".into()),
                session_id: None,
            }
        );
    }

    #[test]
    fn a_tool_that_is_not_a_platform_tool_is_unknown() {
        assert_eq!(
            PlatformCall::parse("process_refund", None),
            Err(ParseError::UnknownTool("process_refund".into()))
        );
    }

    #[test]
    fn an_invalid_arguments_result_is_a_structured_denial() {
        let result = invalid_arguments("learn: `path` is required");
        assert_eq!(result.is_error, Some(true));
        let structured = result.structured_content.unwrap();
        assert_eq!(structured["decision"], "denied");
        assert_eq!(structured["code"], "INVALID_ARGUMENTS");
    }
}
