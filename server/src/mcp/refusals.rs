//! Governed requests the MCP library refuses before our handler runs, audited all the same.
//!
//! rmcp parses and checks a request before it dispatches it: a body whose params do not
//! deserialize (a `resources/read` whose `uri` is missing or not a string, a `tools/call`
//! whose `arguments` is not an object, a JSON-RPC batch), a `skills/get` of a URI that is
//! not a `SKILL.md`, request headers or `_meta` that contradict the body or name an unknown
//! protocol revision, an unacceptable `Accept` or `Content-Type`. It answers those itself
//! (a 4xx or a JSON-RPC error), so the handler, which audits every refusal it decides,
//! never sees them. This layer reads the method of each POST; for `tools/call`,
//! `resources/read`, `skills/get` and `resources/directory/read` it marks the request, the
//! handler flags the mark when it takes the request, and a request the handler never took
//! and that did not succeed is audited here (`INVALID_ARGUMENTS`, with the library's answer
//! as the rule: a `call_denied` of the named tool, or a `learn_denied` of the URI) before the
//! agent gets that answer. The answer is unchanged but for one: rmcp reads a governed
//! method whose params do not deserialize as a request it does not know and answers
//! `-32601` (method not found); the agent gets `-32602` saying what the params must be. If
//! the audit fails, the agent gets a 500 instead: nothing is refused unaudited.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{Method, StatusCode};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use skillgate_core::gateway::skills::SkillMethod;
use skillgate_core::policy::DenyCode;

use super::auth::AgentCaller;
use super::connection::{MCP_SESSION_ID, unreadable_body};
use super::workspaces::CallerGateway;

/// Put on a governed request by [`audit`]; the handler calls [`Self::take`] when it takes
/// the request, which from then on audits its own outcome.
#[derive(Debug, Clone, Default)]
pub struct Governed(Arc<AtomicBool>);

impl Governed {
    pub fn take(&self) {
        self.0.store(true, Ordering::Release);
    }

    fn taken(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// The handler marks the governed requests it takes (see [`Governed`]).
pub fn take(parts: Option<&http::request::Parts>) {
    if let Some(mark) = parts.and_then(|parts| parts.extensions.get::<Governed>()) {
        mark.take();
    }
}

/// The longest answer of the library read back to quote it in the audit.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// What a body asks: a governed method and what it names as sent (the URI or the tool
/// name; the JSON text of one that is not a string, empty when it is missing), the session
/// a `tools/call` names, and the number of messages when it is a batch.
#[derive(Debug, PartialEq, Eq)]
struct Asked {
    method: Asking,
    target: String,
    session: Option<String>,
    batch: Option<usize>,
}

/// The governed methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asking {
    ToolCall,
    Skill(SkillMethod),
}

pub async fn audit(request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    // The body limit layer outside has bounded it already.
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) => return unreadable_body(error),
    };
    let caller = parts.extensions.get::<AgentCaller>().cloned();
    let gateway = parts.extensions.get::<CallerGateway>().cloned();
    let (Some(found), Some((caller, CallerGateway(gateway)))) =
        (governed_message(&bytes), caller.zip(gateway))
    else {
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    let mark = Governed::default();
    parts.extensions.insert(mark.clone());
    let connection = parts
        .headers
        .get(MCP_SESSION_ID)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    if mark.taken() {
        return response;
    }
    let (mut response, refused) = refusal(response).await;
    let Some(Refused {
        rule: mut answer,
        method_not_found,
    }) = refused
    else {
        return response;
    };
    let asked = asked(&bytes, found);
    if let Some(id) = method_not_found.filter(|_| asked.batch.is_none()) {
        let (clearer, message) = invalid_params(id, asked.method);
        response = clearer;
        answer = format!("{message} (the MCP library answered: {answer})");
    }
    let rule = match asked.batch {
        Some(n) => format!("a JSON-RPC batch of {n} messages was refused: {answer}"),
        None => answer,
    };
    let agent = caller.identity(connection);
    tracing::info!(%rule, "the MCP library refused a governed request");
    let audited = match asked.method {
        Asking::ToolCall => {
            gateway
                .record_refusal(
                    &agent,
                    &asked.target,
                    asked.session.as_deref(),
                    DenyCode::InvalidArguments,
                    &rule,
                )
                .await
        }
        Asking::Skill(method) => {
            gateway
                .refuse_skill_request(
                    &agent,
                    &asked.target,
                    method,
                    DenyCode::InvalidArguments,
                    Some(&rule),
                )
                .await
        }
    };
    match audited {
        Ok(()) => response,
        Err(error) => {
            tracing::error!(%error, "a refused request could not be audited");
            (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response()
        }
    }
}

/// Where a governed message is in a body, if it holds one: its method, its index when the
/// body is a batch, and the batch's length. Only the methods are read.
struct Found {
    method: Asking,
    index: Option<usize>,
    batch: Option<usize>,
}

fn governed_message(body: &[u8]) -> Option<Found> {
    #[derive(Deserialize)]
    struct MethodOnly<'a> {
        #[serde(borrow)]
        method: Option<Cow<'a, str>>,
        #[serde(rename = "params")]
        _params: Option<IgnoredAny>,
    }
    let method_of = |m: &MethodOnly| m.method.as_deref().and_then(governed);
    // Decided by the first byte, not an untagged enum, which would buffer every value.
    let is_batch = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    if is_batch {
        let messages: Vec<MethodOnly> = serde_json::from_slice(body).ok()?;
        let (index, method) = messages
            .iter()
            .enumerate()
            .find_map(|(i, m)| method_of(m).map(|method| (i, method)))?;
        Some(Found {
            method,
            index: Some(index),
            batch: Some(messages.len()),
        })
    } else {
        let message: MethodOnly = serde_json::from_slice(body).ok()?;
        Some(Found {
            method: method_of(&message)?,
            index: None,
            batch: None,
        })
    }
}

/// What the governed message `found` names, read once it was refused.
fn asked(body: &[u8], found: Found) -> Asked {
    let Found {
        method,
        index,
        batch,
    } = found;
    // The whole message is parsed only for a refusal, never on the way in.
    let message: Value = serde_json::from_slice(body).unwrap_or_default();
    let message = match index {
        Some(i) => message.get(i).cloned().unwrap_or_default(),
        None => message,
    };
    let params = message.get("params");
    let text = |value: Option<&Value>| match value {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let (target, session) = match method {
        Asking::ToolCall => {
            let named = params
                .and_then(|p| p.get("arguments"))
                .and_then(|a| a.get("session_id"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            (text(params.and_then(|p| p.get("name"))), named)
        }
        Asking::Skill(_) => (text(params.and_then(|p| p.get("uri"))), None),
    };
    Asked {
        method,
        target,
        session,
        batch,
    }
}

fn governed(method: &str) -> Option<Asking> {
    if method == "tools/call" {
        return Some(Asking::ToolCall);
    }
    [
        SkillMethod::Read,
        SkillMethod::Get,
        SkillMethod::DirectoryRead,
    ]
    .into_iter()
    .find(|m| m.as_str() == method)
    .map(Asking::Skill)
}

/// What the library answered, when it refused.
struct Refused {
    /// Its JSON-RPC error (`JSON-RPC error CODE: message`) or HTTP status and text.
    rule: String,
    /// The request id of a `-32601` answer: rmcp read a governed method whose params did
    /// not deserialize as a request of its own, and said the method does not exist.
    method_not_found: Option<Value>,
}

/// What the library answered, when it refused; `None` for a success. The response is
/// handed back whole.
async fn refusal(response: Response) -> (Response, Option<Refused>) {
    use axum::body::HttpBody as _;
    let status = response.status();
    let small = response
        .body()
        .size_hint()
        .upper()
        .is_some_and(|n| n <= MAX_ANSWER_BYTES as u64);
    if !small {
        // Not quoted: an answer of unknown length is passed on as it streams.
        let refused = (!status.is_success()).then(|| Refused {
            rule: format!("HTTP {}", status.as_u16()),
            method_not_found: None,
        });
        return (response, refused);
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ANSWER_BYTES).await else {
        let refused = Refused {
            rule: format!("HTTP {}: the answer could not be read", status.as_u16()),
            method_not_found: None,
        };
        return (Response::from_parts(parts, Body::empty()), Some(refused));
    };
    let error = json_rpc_error(&bytes);
    let refused = match error {
        Some((code, message, id)) => Some(Refused {
            rule: if status.is_success() {
                format!("JSON-RPC error {code}: {message}")
            } else {
                format!("HTTP {}, JSON-RPC error {code}: {message}", status.as_u16())
            },
            method_not_found: (code == METHOD_NOT_FOUND).then_some(id),
        }),
        None if status.is_success() => None,
        None => Some(Refused {
            rule: format!(
                "HTTP {}: {}",
                status.as_u16(),
                String::from_utf8_lossy(&bytes).trim()
            ),
            method_not_found: None,
        }),
    };
    (Response::from_parts(parts, Body::from(bytes)), refused)
}

const METHOD_NOT_FOUND: i64 = -32601;

/// The JSON-RPC error of an answer (a JSON body, or the first `data:` of an event stream):
/// code, message and request id.
fn json_rpc_error(bytes: &[u8]) -> Option<(i64, String, Value)> {
    #[derive(Deserialize)]
    struct Reply {
        #[serde(default)]
        id: Value,
        error: Option<ErrorObject>,
    }
    #[derive(Deserialize)]
    struct ErrorObject {
        code: i64,
        message: String,
    }
    let text = std::str::from_utf8(bytes).ok()?;
    let json = text
        .lines()
        .find_map(|line| line.strip_prefix("data:"))
        .unwrap_or(text);
    let reply: Reply = serde_json::from_str(json.trim()).ok()?;
    let id = reply.id;
    reply.error.map(|error| (error.code, error.message, id))
}

/// The clearer answer to a governed method rmcp called unknown (`-32601`) because its
/// params were malformed: `-32602`, saying what the params must be.
fn invalid_params(id: Value, method: Asking) -> (Response, String) {
    let (name, needs) = match method {
        Asking::ToolCall => (
            "tools/call",
            "`params.name` must be a string and `params.arguments`, when given, an object",
        ),
        Asking::Skill(method) => (method.as_str(), "`params.uri` must be a string"),
    };
    let message = format!("invalid params for {name}: {needs}");
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": -32602, "message": message },
    });
    let response = (
        [(http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response();
    (response, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_governed_requests_are_picked_out_whatever_their_params() {
        let read = |body: &str| {
            governed_message(body.as_bytes()).map(|found| asked(body.as_bytes(), found))
        };
        assert_eq!(
            read(
                r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"skill://a/b/SKILL.md"}}"#
            ),
            Some(Asked {
                method: Asking::Skill(SkillMethod::Read),
                target: "skill://a/b/SKILL.md".into(),
                session: None,
                batch: None
            })
        );
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":7}}"#)
                .map(|a| a.target),
            Some("7".into())
        );
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","id":1,"method":"skills/get"}"#).map(|a| a.method),
            Some(Asking::Skill(SkillMethod::Get))
        );
        assert_eq!(
            read(
                r#"[{"jsonrpc":"2.0","method":"x"},{"jsonrpc":"2.0","id":2,"method":"resources/directory/read","params":{"uri":"skill://a"}}]"#
            ),
            Some(Asked {
                method: Asking::Skill(SkillMethod::DirectoryRead),
                target: "skill://a".into(),
                session: None,
                batch: Some(2)
            })
        );
        assert_eq!(
            read(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"call_tool","arguments":{"session_id":"ses_1"}}}"#
            ),
            Some(Asked {
                method: Asking::ToolCall,
                target: "call_tool".into(),
                session: Some("ses_1".into()),
                batch: None
            })
        );
        for other in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
            "not json",
            "[]",
        ] {
            assert_eq!(read(other), None, "{other}");
        }
    }

    #[test]
    fn a_json_rpc_error_is_read_from_json_or_an_event_stream() {
        let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad uri"}}"#;
        assert_eq!(
            json_rpc_error(error.as_bytes()),
            Some((-32602, "bad uri".to_owned(), Value::from(1)))
        );
        let stream = format!("id: 0\ndata: {error}\n\n");
        assert!(json_rpc_error(stream.as_bytes()).is_some());
        assert_eq!(
            json_rpc_error(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            None
        );
    }
}
