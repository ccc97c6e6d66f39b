use serde::{Deserialize, Serialize};

/// The definition of one downstream tool as an upstream advertises it.
///
/// `input_schema` is the JSON Schema of the tool's arguments (an object schema);
/// `sensitive_args` names top-level arguments the audit stores as a digest only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
    #[serde(default)]
    pub sensitive_args: Vec<String>,
}
