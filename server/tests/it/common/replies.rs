//! Reading `/mcp`'s answers in tests: a raw `initialize` over HTTP and the JSON-RPC message
//! of its answer (JSON or a one-event SSE stream), and assertions on a tool's reply.

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{Value, json};

use super::{Reply, Server};

/// The body of an `initialize` request for protocol `version`.
pub fn initialize_body(version: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "mcp-endpoint-test", "version": "0"}
        }
    })
    .to_string()
}

/// A raw `initialize` POST to `/mcp`; `key` goes into `Authorization: Bearer`.
pub fn raw_initialize(
    server: &Server,
    key: Option<&str>,
    version: &str,
) -> reqwest::RequestBuilder {
    let request = reqwest::Client::new()
        .post(server.mcp_url())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .body(initialize_body(version));
    match key {
        Some(key) => request.header(AUTHORIZATION, format!("Bearer {key}")),
        None => request,
    }
}

/// The JSON-RPC message of a response that is either JSON or a one-event SSE stream.
pub fn json_rpc(body: &str) -> Value {
    let data: String = if body.trim_start().starts_with('{') {
        body.to_owned()
    } else {
        body.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(str::trim)
            .find(|data| data.starts_with('{'))
            .unwrap_or_else(|| panic!("no JSON-RPC message in {body}"))
            .to_owned()
    };
    serde_json::from_str(&data).expect("a JSON-RPC message")
}

pub fn role_names(reply: &Reply) -> Vec<String> {
    reply.structured["roles"]
        .as_array()
        .unwrap_or_else(|| panic!("init lists roles: {:?}", reply.structured))
        .iter()
        .map(|role| role["name"].as_str().unwrap().to_owned())
        .collect()
}

pub fn assert_denied(reply: &Reply, prefix: &str, code: &str) {
    assert!(reply.is_error, "expected a denial: {}", reply.text);
    assert!(
        reply.text.starts_with(prefix),
        "expected `{prefix}`: {}",
        reply.text
    );
    assert_eq!(reply.code(), code, "{}", reply.text);
}

pub fn assert_allowed(reply: &Reply) {
    assert!(!reply.is_error, "expected success: {}", reply.text);
}
