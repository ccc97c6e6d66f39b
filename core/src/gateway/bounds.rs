//! Size limits on what an agent's request puts into the audit log and the session store.
//!
//! Everything a platform tool records comes from the agent, so each field has a ceiling: a
//! request over one is refused with a clear error (and that refusal is audited with a
//! digest in place of the oversized value), never stored in full.

use std::io::Write;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// MCP tool names are 1–128 characters.
pub const MAX_TOOL_NAME: usize = 128;
/// Session ids Skillgate issues are 36 characters; anything this long is not one.
pub const MAX_SESSION_ID: usize = 128;
/// The JSON text of one call's arguments.
pub const MAX_ARGUMENTS_BYTES: usize = 64 * 1024;
/// A learn path: `/<skill>/<resource>` of two slugs.
pub const MAX_LEARN_PATH: usize = 512;

pub(crate) fn session_id(id: Option<&str>) -> Result<(), String> {
    match id {
        Some(id) if id.chars().count() > MAX_SESSION_ID => Err(format!(
            "`session_id` is longer than {MAX_SESSION_ID} characters; pass the id `init_skilder` returned."
        )),
        _ => Ok(()),
    }
}

pub(crate) fn tool_name(tool: &str) -> Result<(), String> {
    let length = tool.chars().count();
    if length == 0 {
        return Err("`tool` must name a tool.".to_owned());
    }
    if length > MAX_TOOL_NAME {
        return Err(format!(
            "`tool` is {length} characters; tool names have at most {MAX_TOOL_NAME}."
        ));
    }
    Ok(())
}

pub(crate) fn arguments(arguments: &Value) -> Result<(), String> {
    let size = json_size(arguments);
    if size > MAX_ARGUMENTS_BYTES {
        return Err(format!(
            "`arguments` is {size} bytes of JSON; at most {MAX_ARGUMENTS_BYTES} are accepted."
        ));
    }
    Ok(())
}

pub(crate) fn learn_path(path: &str) -> Result<(), String> {
    let length = path.chars().count();
    if length > MAX_LEARN_PATH {
        return Err(format!(
            "`path` is {length} characters; learn paths have at most {MAX_LEARN_PATH}."
        ));
    }
    Ok(())
}

/// A tool name as the audit keeps it: whole when within the limit, else its beginning
/// marked with `…`, so the events' `tool` stays a short string.
pub(crate) fn audited_tool(tool: &str) -> String {
    shortened(tool, MAX_TOOL_NAME)
}

/// A learn path as the audit keeps it (see [`audited_tool`]).
pub(crate) fn audited_path(path: &str) -> String {
    shortened(path, MAX_LEARN_PATH)
}

/// A refusal's rule as the audit keeps it: it may quote what the agent sent.
pub(crate) fn audited_rule(rule: &str) -> String {
    shortened(rule, 1000)
}

fn shortened(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head}…")
}

/// Arguments as the audit keeps them: whole when within the limit, else size and digest.
pub(crate) fn audited_arguments(arguments: Value) -> Value {
    let size = json_size(&arguments);
    if size <= MAX_ARGUMENTS_BYTES {
        return arguments;
    }
    let text = serde_json::to_vec(&arguments).unwrap_or_default();
    json!({ "omitted": { "bytes": size, "sha256": hex::encode(Sha256::digest(&text)) } })
}

/// The length of a value's JSON text, counted without building it.
fn json_size(value: &Value) -> usize {
    struct Count(usize);
    impl Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_within_their_limits_pass_and_longer_ones_are_refused_by_name() {
        assert!(tool_name("process_refund").is_ok());
        assert!(tool_name("").unwrap_err().contains("`tool`"));
        assert!(tool_name(&"t".repeat(129)).unwrap_err().contains("129"));
        assert!(session_id(Some(&"s".repeat(128))).is_ok());
        assert!(
            session_id(Some(&"s".repeat(129)))
                .unwrap_err()
                .contains("session_id")
        );
        let big = json!({ "note": "x".repeat(MAX_ARGUMENTS_BYTES) });
        assert!(arguments(&big).unwrap_err().contains("`arguments`"));
        assert!(arguments(&json!({"amount": 400})).is_ok());
    }

    #[test]
    fn oversized_values_are_audited_as_a_digest() {
        let big = json!({ "note": "x".repeat(MAX_ARGUMENTS_BYTES) });
        let audited = audited_arguments(big);
        assert_eq!(audited["omitted"]["sha256"].as_str().unwrap().len(), 64);
        assert!(audited.to_string().len() < 200);
        let shown = audited_tool(&"t".repeat(1000));
        assert_eq!(shown.chars().count(), MAX_TOOL_NAME + 1);
        assert_eq!(audited_tool("lookup"), "lookup");
    }
}
