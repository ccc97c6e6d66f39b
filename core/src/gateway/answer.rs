//! `call_tool`'s `structuredContent`: one shape on every path (a refusal, a hold, a result
//! withheld, an upstream that failed, a call that ran), so a client acts on it without
//! parsing the text a model reads. Its JSON Schema is `call_tool`'s `outputSchema` and
//! `docs/call_tool.output.schema.json`.
//!
//! The shape follows SEP-2643 (structured authorization denials) where it fits: a code that
//! classifies the refusal, a correlation handle the retry names (`hold_id`), and remediation
//! hints tagged by `type` ([`Remedy`]). It differs in where it travels: a refusal is a tool
//! result with `isError: true`, not a JSON-RPC error, so the model reads it and recovers
//! (DESIGN.md, "The MCP contract"), and its hint types are the policy's own.

use std::sync::LazyLock;

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::ToolReply;
use crate::policy::{Denial, DenyCode, Remedy};

/// What the gateway decided about the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnswerDecision {
    /// The call ran (or ran into an upstream failure): `code` says which.
    Allowed,
    /// Refused: nothing ran.
    Denied,
    /// Held for a reviewer's approval: nothing ran yet.
    PendingApproval,
    /// A reviewer approved the held call; it runs once when the agent resumes it.
    Approved,
    /// The call ran, but a content inspector withheld its result.
    Blocked,
}

/// Every code an answer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AnswerCode {
    /// The tool ran and answered; its own structured result is `result`.
    Allowed,
    /// The tool ran and reported an error of its own (`isError: true`).
    ToolError,
    /// The call was allowed but the upstream did not complete it.
    UpstreamError,
    AccessDenied,
    GovernanceViolation,
    InvalidArguments,
    ToolUnusable,
    InternalError,
    ToolQuarantined,
    UpstreamQuarantined,
    ContentBlocked,
    /// The call waits for a reviewer (`hold_id`); nothing ran.
    ApprovalPending,
    /// The held call was approved and runs once when resumed.
    Approved,
    ApprovalDenied,
    HoldExpired,
    /// The approved call already ran: an approval runs its call once.
    HoldUsed,
    /// The approved call was refused when it came back: the policy changed since.
    HoldRefused,
    /// The agent withdrew the hold (cancelled its task); nothing ran.
    HoldWithdrawn,
}

impl AnswerCode {
    /// The code as `structuredContent` and the audit spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "ALLOWED",
            Self::ToolError => "TOOL_ERROR",
            Self::UpstreamError => "UPSTREAM_ERROR",
            Self::AccessDenied => "ACCESS_DENIED",
            Self::GovernanceViolation => "GOVERNANCE_VIOLATION",
            Self::InvalidArguments => "INVALID_ARGUMENTS",
            Self::ToolUnusable => "TOOL_UNUSABLE",
            Self::InternalError => "INTERNAL_ERROR",
            Self::ToolQuarantined => "TOOL_QUARANTINED",
            Self::UpstreamQuarantined => "UPSTREAM_QUARANTINED",
            Self::ContentBlocked => "CONTENT_BLOCKED",
            Self::ApprovalPending => "APPROVAL_PENDING",
            Self::Approved => "APPROVED",
            Self::ApprovalDenied => "APPROVAL_DENIED",
            Self::HoldExpired => "HOLD_EXPIRED",
            Self::HoldUsed => "HOLD_USED",
            Self::HoldRefused => "HOLD_REFUSED",
            Self::HoldWithdrawn => "HOLD_WITHDRAWN",
        }
    }
}

impl From<DenyCode> for AnswerCode {
    fn from(code: DenyCode) -> Self {
        match code {
            DenyCode::AccessDenied => Self::AccessDenied,
            DenyCode::GovernanceViolation => Self::GovernanceViolation,
            DenyCode::InvalidArguments => Self::InvalidArguments,
            DenyCode::ToolUnusable => Self::ToolUnusable,
            DenyCode::InternalError => Self::InternalError,
            DenyCode::ToolQuarantined => Self::ToolQuarantined,
            DenyCode::UpstreamQuarantined => Self::UpstreamQuarantined,
            DenyCode::ContentBlocked => Self::ContentBlocked,
        }
    }
}

/// What the reviewer of a hold decides on: the Holds page shows them these (the arguments
/// in full there; their canonical digest here).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ApproverSees {
    pub tool: String,
    pub role: String,
    pub rule: String,
    /// The agent key (or console user) that made the call.
    pub key: String,
    pub session_id: String,
    pub arguments_digest: String,
}

/// A `call_tool` call the agent can make next, ready to send.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct NextCall {
    /// Always `call_tool`.
    pub tool: String,
    pub arguments: Map<String, Value>,
}

/// Where a hold stands and how to go on, on the answers about one.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct HoldStatus {
    /// `pending`, `approved`, `denied`, `expired`, `executed` or `refused`.
    pub state: String,
    /// Until when the hold can be decided, or its approval run (RFC 3339, UTC).
    pub expires_at: String,
    /// The reviewer's reason, once one decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approver_sees: Option<ApproverSees>,
    /// The call that runs the held call once approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume: Option<NextCall>,
    /// The call that only asks where the hold stands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll: Option<NextCall>,
}

/// The `structuredContent` of every `call_tool` result. The first ten members are always
/// there (`null` or empty where they do not apply), so a client reads the same shape on
/// every path; `hold` and `findings` come with the answers they describe, `result` with a
/// tool's own structured result.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(title = "Skillgate call_tool answer", deny_unknown_fields)]
pub struct CallAnswer {
    pub decision: AnswerDecision,
    pub code: AnswerCode,
    /// The sentence a model reads (the text content says it too).
    pub message: String,
    /// The downstream tool the call named.
    pub tool: Option<String>,
    /// The rule that refused or held the call, as a sentence.
    pub rule: Option<String>,
    /// The learned role whose rule refused or held the call, or that authorized it.
    pub role: Option<String>,
    /// The scope whose guardrail refused the call.
    pub guardrail_of: Option<String>,
    /// What would satisfy the rule, where something the caller can do would.
    pub remedy: Option<Remedy>,
    /// The tools the session's learned roles unlock, on a refusal that lists them.
    pub available_tools: Vec<String>,
    /// The approval hold this answer is about (the handle a resume names).
    pub hold_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold: Option<HoldStatus>,
    /// What a content inspector found in a withheld result: inspector, kind and place,
    /// never the content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings: Option<Vec<Value>>,
    /// The tool's own `structuredContent`, passed through unchanged, when it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
}

impl CallAnswer {
    /// An answer with `decision`, `code` and `message`, and nothing else yet.
    pub fn new(decision: AnswerDecision, code: AnswerCode, message: impl Into<String>) -> Self {
        Self {
            decision,
            code,
            message: message.into(),
            tool: None,
            rule: None,
            role: None,
            guardrail_of: None,
            remedy: None,
            available_tools: Vec::new(),
            hold_id: None,
            hold: None,
            findings: None,
            result: None,
        }
    }

    /// A refusal by the policy, or by the gateway before the policy was asked.
    pub fn denied(denial: Denial) -> Self {
        let message = denial.to_string();
        let Denial {
            code,
            rule,
            role,
            guardrail_of,
            available_tools,
            remedy,
        } = denial;
        Self {
            rule: Some(rule),
            role: role.map(|r| r.to_string()),
            guardrail_of: guardrail_of.map(|s| s.to_string()),
            remedy,
            available_tools,
            ..Self::new(AnswerDecision::Denied, code.into(), message)
        }
    }

    /// A call that ran: the tool's result, its content untouched, with this answer as its
    /// `structuredContent` and the tool's own structured result inside as `result`.
    pub fn ran(tool: &str, role: &str, mut result: CallToolResult) -> CallToolResult {
        let (code, message) = if result.is_error == Some(true) {
            (
                AnswerCode::ToolError,
                format!("`{tool}` ran under role {role} and reported an error."),
            )
        } else {
            (
                AnswerCode::Allowed,
                format!("`{tool}` ran under role {role}."),
            )
        };
        let answer = Self {
            tool: Some(tool.to_owned()),
            role: Some(role.to_owned()),
            ..Self::new(AnswerDecision::Allowed, code, message)
        };
        // The tool's structured result is moved in after serializing, not serialized
        // along: that would deep-copy it, on every call, however large it is.
        let mut structured = answer.to_value();
        if let (Value::Object(members), Some(own)) =
            (&mut structured, result.structured_content.take())
        {
            members.insert("result".to_owned(), own);
        }
        result.structured_content = Some(structured);
        result
    }

    pub fn tool(mut self, tool: &str) -> Self {
        self.tool = Some(tool.to_owned());
        self
    }

    pub fn role(mut self, role: &str) -> Self {
        self.role = Some(role.to_owned());
        self
    }

    pub fn rule(mut self, rule: &str) -> Self {
        self.rule = Some(rule.to_owned());
        self
    }

    pub fn remedy(mut self, remedy: Remedy) -> Self {
        self.remedy = Some(remedy);
        self
    }

    pub fn hold(mut self, id: &str, state: HoldStatus) -> Self {
        self.hold_id = Some(id.to_owned());
        self.hold = Some(state);
        self
    }

    /// Names the hold a refused resume was about.
    pub fn of_hold(mut self, id: &str) -> Self {
        self.hold_id = Some(id.to_owned());
        self
    }

    pub fn findings(mut self, findings: Vec<Value>) -> Self {
        self.findings = Some(findings);
        self
    }

    fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|e| {
            // Strings, lists and JSON values cannot fail to serialize; should one, the
            // agent still gets an answer of the published shape rather than a panic.
            json!({
                "decision": "denied", "code": "INTERNAL_ERROR", "message": e.to_string(),
                "tool": null, "rule": null, "role": null, "guardrail_of": null,
                "remedy": null, "available_tools": [], "hold_id": null,
            })
        })
    }

    /// The answer as a tool result the gateway wrote. `isError` is true: a call that ran
    /// is answered by [`CallAnswer::ran`], and on every other path the call the agent asked
    /// for gave no result (a client that trusts the flag must not believe it did).
    pub fn into_reply(self) -> ToolReply {
        ToolReply::Gateway {
            text: self.message.clone(),
            structured: self.to_value(),
            is_error: true,
        }
    }
}

/// The members every answer carries, `null` or empty where they do not apply.
const ALWAYS: [&str; 10] = [
    "decision",
    "code",
    "message",
    "tool",
    "rule",
    "role",
    "guardrail_of",
    "remedy",
    "available_tools",
    "hold_id",
];

/// The JSON Schema of [`CallAnswer`], with its descriptions: `docs/call_tool.output.schema.json`.
///
/// Rust's integer formats (`uint32`) are left out of the derived schema: no JSON Schema
/// validator knows them, and the TypeScript SDK's Ajv prints a warning for each.
pub fn answer_schema() -> &'static Map<String, Value> {
    static SCHEMA: LazyLock<Map<String, Value>> = LazyLock::new(|| {
        let mut schema = serde_json::to_value(schemars::schema_for!(CallAnswer))
            .expect("a derived schema serializes to JSON");
        walk(&mut schema, &mut |map| {
            if map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| f.starts_with("uint") || f.starts_with("int"))
            {
                map.remove("format");
            }
        });
        let mut schema = match schema {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        // Derived, an `Option` member is optional; these are present on every answer.
        schema.insert("required".into(), json!(ALWAYS));
        schema
    });
    &SCHEMA
}

/// `call_tool`'s `outputSchema`: [`answer_schema`] without its descriptions (a third of the
/// size), sent on every `tools/list`. Definitions stay inline under `$defs`, so a client's
/// validator resolves every `$ref` within the document.
pub fn output_schema() -> &'static Map<String, Value> {
    static SCHEMA: LazyLock<Map<String, Value>> = LazyLock::new(|| {
        let mut schema = Value::Object(answer_schema().clone());
        walk(&mut schema, &mut |map| {
            map.remove("description");
        });
        match schema {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    });
    &SCHEMA
}

/// Calls `edit` on every object of a schema, depth first.
fn walk(value: &mut Value, edit: &mut impl FnMut(&mut Map<String, Value>)) {
    match value {
        Value::Object(map) => {
            edit(map);
            map.values_mut().for_each(|v| walk(v, edit));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| walk(v, edit)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slug::Slug;

    fn validator() -> jsonschema::Validator {
        jsonschema::validator_for(&Value::Object(output_schema().clone()))
            .expect("the published schema compiles")
    }

    #[test]
    fn the_wire_schema_is_the_documented_one_without_descriptions_and_is_small() {
        let wire = serde_json::to_string(output_schema()).unwrap();
        assert!(!wire.contains("\"description\""));
        assert!(!wire.contains("uint"), "{wire}");
        assert!(wire.len() < 5_000, "{} bytes", wire.len());
        let documented =
            jsonschema::validator_for(&Value::Object(answer_schema().clone())).unwrap();
        let denial = Denial::new(DenyCode::AccessDenied, "no");
        let (answer, _) = structured(CallAnswer::denied(denial).into_reply());
        assert!(documented.is_valid(&answer) && validator().is_valid(&answer));
        assert_eq!(output_schema()["required"], json!(ALWAYS));
    }

    fn structured(reply: ToolReply) -> (Value, bool) {
        match reply {
            ToolReply::Gateway {
                structured,
                is_error,
                ..
            } => (structured, is_error),
            ToolReply::Downstream { .. } => panic!("a gateway answer"),
        }
    }

    #[test]
    fn a_denial_answer_has_every_member_even_when_empty_and_fits_the_schema() {
        let denial = Denial::new(DenyCode::AccessDenied, "not unlocked");
        let (answer, is_error) = structured(CallAnswer::denied(denial).tool("refund").into_reply());
        assert!(is_error);
        for member in ALWAYS {
            assert!(
                answer.get(member).is_some(),
                "{member} missing from {answer}"
            );
        }
        assert_eq!(answer["decision"], "denied");
        assert_eq!(answer["code"], "ACCESS_DENIED");
        assert_eq!(answer["role"], Value::Null);
        assert!(validator().is_valid(&answer), "{answer}");
    }

    #[test]
    fn a_role_denial_names_the_role_and_its_remedy_and_fits_the_schema() {
        let denial = Denial::new(DenyCode::GovernanceViolation, "Refunds at most 500.")
            .by_role(Slug::parse("tier-1-support").unwrap())
            .with_remedy(Some(Remedy::CallCount { max: 3, used: 3 }))
            .with_available(vec!["refund".into()]);
        let (answer, _) = structured(CallAnswer::denied(denial).into_reply());
        assert_eq!(answer["role"], "tier-1-support");
        assert_eq!(answer["remedy"]["type"], "call_count");
        assert_eq!(answer["available_tools"], json!(["refund"]));
        assert!(
            answer["message"]
                .as_str()
                .unwrap()
                .starts_with("GOVERNANCE VIOLATION (role tier-1-support)")
        );
        assert!(validator().is_valid(&answer), "{answer}");
    }

    #[test]
    fn a_call_that_ran_keeps_its_content_and_carries_its_structured_result_inside() {
        let mut downstream =
            CallToolResult::success(vec![rmcp::model::ContentBlock::text("refunded")]);
        downstream.structured_content = Some(json!({"decision": "denied", "id": 7}));
        let result = CallAnswer::ran("refund", "tier-1-support", downstream);
        assert_eq!(result.is_error, Some(false));
        assert_eq!(
            result.content[0].as_text().map(|t| t.text.as_str()),
            Some("refunded")
        );
        let answer = result.structured_content.unwrap();
        assert_eq!(
            answer["decision"], "allowed",
            "the tool's own `decision` is not ours"
        );
        assert_eq!(answer["code"], "ALLOWED");
        assert_eq!(answer["result"], json!({"decision": "denied", "id": 7}));
        assert!(validator().is_valid(&answer), "{answer}");

        let failed = CallToolResult::error(vec![rmcp::model::ContentBlock::text("no such order")]);
        let answer = CallAnswer::ran("refund", "tier-1-support", failed)
            .structured_content
            .unwrap();
        assert_eq!(answer["code"], "TOOL_ERROR");
        assert!(answer.get("result").is_none());
        assert!(validator().is_valid(&answer), "{answer}");
    }

    #[test]
    fn the_schema_refuses_an_answer_missing_a_member_or_with_an_unknown_code() {
        let denial = Denial::new(DenyCode::AccessDenied, "no");
        let (answer, _) = structured(CallAnswer::denied(denial).into_reply());
        let mut missing = answer.clone();
        missing.as_object_mut().unwrap().remove("hold_id");
        assert!(!validator().is_valid(&missing));
        let mut unknown = answer;
        unknown["code"] = json!("SOMETHING_ELSE");
        assert!(!validator().is_valid(&unknown));
    }

    #[test]
    fn each_code_is_spelled_as_it_serializes() {
        for code in [
            AnswerCode::Allowed,
            AnswerCode::ToolError,
            AnswerCode::UpstreamError,
            AnswerCode::AccessDenied,
            AnswerCode::GovernanceViolation,
            AnswerCode::InvalidArguments,
            AnswerCode::ToolUnusable,
            AnswerCode::InternalError,
            AnswerCode::ToolQuarantined,
            AnswerCode::UpstreamQuarantined,
            AnswerCode::ContentBlocked,
            AnswerCode::ApprovalPending,
            AnswerCode::Approved,
            AnswerCode::ApprovalDenied,
            AnswerCode::HoldExpired,
            AnswerCode::HoldUsed,
            AnswerCode::HoldRefused,
            AnswerCode::HoldWithdrawn,
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), json!(code.as_str()));
        }
    }

    #[test]
    fn the_published_schema_file_is_the_derived_schema() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/call_tool.output.schema.json"
        );
        let derived = Value::Object(answer_schema().clone());
        if std::env::var_os("SKILLGATE_BLESS").is_some() {
            let text = serde_json::to_string_pretty(&derived).unwrap() + "\n";
            std::fs::write(path, text).unwrap();
        }
        let published: Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(
            published, derived,
            "docs/call_tool.output.schema.json is stale: run \
             `SKILLGATE_BLESS=1 cargo test -p skillgate-core --lib answer` to write it again"
        );
    }
}
