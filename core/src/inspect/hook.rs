//! External guardrail hooks: the signed request that asks an operator's web service about
//! one stage of a call, and the reading of its answer (`allow`, `deny`, or `modify` with a
//! replacement result). The one part of inspection that does I/O; what an answer does to
//! the call is the pipeline's, as for the built-in inspectors.
//!
//! A request is `POST <url>` with a JSON body, `skillgate-timestamp: <unix seconds>` and
//! `skillgate-signature: v1=<hex HMAC-SHA256(secret, timestamp "." body)>`, the secret read
//! from the hook's environment variable when the request is made.

use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use rmcp::model::CallToolResult;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;

use crate::limited_read::{BodyError, read_body_limited};
use crate::model::{GuardrailHook, HookStage, check_upstream_url};

/// The version of the request format, sent as `version`.
pub const VERSION: u32 = 1;
pub const TIMESTAMP_HEADER: &str = "skillgate-timestamp";
pub const SIGNATURE_HEADER: &str = "skillgate-signature";
/// The largest answer read: it may carry a whole replacement result.
pub const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// A hook's reason is shown to the agent and audited: it is cut to this many characters.
const MAX_REASON_CHARS: usize = 500;

/// No redirects (a hook's URL is an admin's; a redirect elsewhere is an error), the
/// system's trust roots.
static CLIENT: LazyLock<reqwest::Client> = LazyLock::new(crate::upstream::keep_alive_client);

/// The call a hook is asked about.
#[derive(Debug, Serialize)]
pub struct HookCall<'a> {
    pub tool: &'a str,
    pub upstream: &'a str,
    /// The role that authorised the call: none at the argument stage (before deciding).
    pub role: Option<&'a str>,
    pub scope: Option<&'a str>,
    pub session_id: &'a str,
    pub arguments: &'a Value,
}

#[derive(Serialize)]
struct Request<'a> {
    version: u32,
    hook: &'a str,
    stage: HookStage,
    call: &'a HookCall<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a CallToolResult>,
}

/// A hook's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Allow,
    Deny {
        reason: Option<String>,
    },
    /// The result stage only: the result the agent gets instead.
    Modify {
        result: Box<CallToolResult>,
        reason: Option<String>,
    },
}

impl Answer {
    /// `allow`, `deny` or `modify`: the `outcome` label of the hook's latency metric.
    pub fn outcome(&self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny { .. } => "deny",
            Self::Modify { .. } => "modify",
        }
    }
}

/// Why a hook gave no usable answer. The text is audited: it never holds the secret.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("its signing secret `{0}` is not set in the gateway's environment")]
    SecretUnset(String),
    #[error("its URL is refused: {0}")]
    Url(String),
    #[error("no answer within {0} ms")]
    Timeout(u64),
    #[error("could not be reached: {0}")]
    Unreachable(String),
    #[error("answered HTTP {0}")]
    Status(u16),
    #[error("answered more than {MAX_ANSWER_BYTES} bytes")]
    TooLarge,
    #[error("answered something other than a decision: {0}")]
    BadAnswer(String),
}

#[derive(Deserialize)]
struct RawAnswer {
    decision: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    result: Option<Value>,
}

/// `v1=<hex HMAC-SHA256(secret, timestamp "." body)>`.
pub fn sign(secret: &[u8], timestamp: &str, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret).expect("HMAC-SHA256 takes a key of any length");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// Reads a hook's answer to a request about `stage`. `modify` must carry a `result` (an
/// MCP `CallToolResult`) and is an answer of the result stage only.
pub fn parse_answer(stage: HookStage, body: &[u8]) -> Result<Answer, HookError> {
    let bad = |message: String| HookError::BadAnswer(message);
    let raw: RawAnswer = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
    let reason = raw
        .reason
        .map(|r| r.chars().take(MAX_REASON_CHARS).collect::<String>())
        .filter(|r| !r.trim().is_empty());
    match raw.decision.as_str() {
        "allow" => Ok(Answer::Allow),
        "deny" => Ok(Answer::Deny { reason }),
        "modify" if stage == HookStage::Arguments => Err(bad(
            "`modify` answers a result; arguments are never rewritten on the agent's behalf"
                .to_owned(),
        )),
        "modify" => {
            let result = raw
                .result
                .ok_or_else(|| bad("`modify` without a `result`".to_owned()))?;
            let result: CallToolResult = serde_json::from_value(result)
                .map_err(|e| bad(format!("`result` is not a CallToolResult: {e}")))?;
            Ok(Answer::Modify {
                result: Box::new(result),
                reason,
            })
        }
        other => Err(bad(format!(
            "`decision` is `{other}`, not allow, deny or modify"
        ))),
    }
}

/// Asks `hook` about `stage` of `call` (with the `result`, at the result stage), within the
/// hook's timeout.
pub async fn ask(
    hook: &GuardrailHook,
    stage: HookStage,
    call: &HookCall<'_>,
    result: Option<&CallToolResult>,
) -> Result<Answer, HookError> {
    let secret = std::env::var(&hook.secret_env)
        .ok()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| HookError::SecretUnset(hook.secret_env.clone()))?;
    check_upstream_url(&hook.url, false).map_err(HookError::Url)?;
    let body = serde_json::to_vec(&Request {
        version: VERSION,
        hook: hook.name.as_str(),
        stage,
        call,
        result,
    })
    .map_err(|e| HookError::BadAnswer(format!("the request could not be written: {e}")))?;
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        .to_string();
    let signature = sign(secret.as_bytes(), &timestamp, &body);
    let exchange = exchange(&hook.url, timestamp, signature, body);
    let answer = tokio::time::timeout(Duration::from_millis(hook.timeout_ms), exchange)
        .await
        .map_err(|_| HookError::Timeout(hook.timeout_ms))??;
    parse_answer(stage, &answer)
}

/// The request and the answer's body, read up to [`MAX_ANSWER_BYTES`].
async fn exchange(
    url: &str,
    timestamp: String,
    signature: String,
    body: Vec<u8>,
) -> Result<Vec<u8>, HookError> {
    let unreachable = |e: reqwest::Error| HookError::Unreachable(e.without_url().to_string());
    let response = CLIENT
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(TIMESTAMP_HEADER, timestamp)
        .header(SIGNATURE_HEADER, signature)
        .body(body)
        .send()
        .await
        .map_err(unreachable)?;
    if !response.status().is_success() {
        return Err(HookError::Status(response.status().as_u16()));
    }
    read_body_limited(response, MAX_ANSWER_BYTES)
        .await
        .map_err(|e| match e {
            BodyError::TooLarge(_) => HookError::TooLarge,
            BodyError::Read(e) => unreachable(e),
        })
}

#[cfg(test)]
mod tests {
    use rmcp::model::ContentBlock;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_signature_is_the_hmac_of_the_timestamp_a_dot_and_the_body() {
        // Computed apart: Python's `hmac.new(b"Jefe", b'1700000000.{"version":1}', sha256)`.
        assert_eq!(
            sign(b"Jefe", "1700000000", br#"{"version":1}"#),
            "v1=11c6a57e329385bb25185175112f9105b5e1927c400fbcc7bc64da526d7232c5"
        );
        assert_ne!(sign(b"other", "1", b"{}"), sign(b"Jefe", "1", b"{}"));
        assert_ne!(sign(b"Jefe", "2", b"{}"), sign(b"Jefe", "1", b"{}"));
    }

    #[test]
    fn allow_and_deny_are_read_with_the_reason_cut_to_size() {
        assert_eq!(
            parse_answer(HookStage::Arguments, br#"{"decision":"allow"}"#).unwrap(),
            Answer::Allow
        );
        let long = "x".repeat(2000);
        let body = json!({"decision": "deny", "reason": long}).to_string();
        let Answer::Deny { reason } = parse_answer(HookStage::Result, body.as_bytes()).unwrap()
        else {
            panic!("a deny")
        };
        assert_eq!(reason.unwrap().len(), MAX_REASON_CHARS);
        assert_eq!(
            parse_answer(HookStage::Result, br#"{"decision":"deny","reason":" "}"#).unwrap(),
            Answer::Deny { reason: None }
        );
    }

    #[test]
    fn modify_carries_the_replacement_result_at_the_result_stage_only() {
        let replacement = CallToolResult::success(vec![ContentBlock::text("[withheld]")]);
        let body = json!({"decision": "modify", "result": replacement}).to_string();
        let Answer::Modify { result, .. } =
            parse_answer(HookStage::Result, body.as_bytes()).unwrap()
        else {
            panic!("a modify")
        };
        assert_eq!(*result, replacement);
        assert!(matches!(
            parse_answer(HookStage::Arguments, body.as_bytes()),
            Err(HookError::BadAnswer(_))
        ));
        assert!(matches!(
            parse_answer(HookStage::Result, br#"{"decision":"modify"}"#),
            Err(HookError::BadAnswer(_))
        ));
    }

    #[test]
    fn anything_but_a_decision_is_an_error() {
        for body in [
            &b"not json"[..],
            br#"{"reason":"no decision"}"#,
            br#"{"decision":"maybe"}"#,
            br#"{"decision":"modify","result":{"content":"not a list"}}"#,
        ] {
            assert!(
                matches!(
                    parse_answer(HookStage::Result, body),
                    Err(HookError::BadAnswer(_))
                ),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
