//! How a gateway failure (not a denial: the store or the audit log failed) reaches the
//! agent: a JSON-RPC error whose message a model can act on and whose `data` a program can.
//!
//! Two things matter to whoever called: whether to try again, and whether the call may
//! already have taken effect. A database that cannot serve right now (a restart, a lost
//! connection, no pool connection free within its wait) is worth retrying; a failure after
//! the upstream ran means the call may have taken effect, so it must not be retried blindly.
//! Anything else stays a bare internal error: its details are in the server's log, not for
//! the agent.

use rmcp::ErrorData as McpError;
use rmcp::model::ErrorCode;
use serde_json::json;
use skillgate_core::gateway::GatewayError;

/// `data.reason` of a failure because the database could not serve.
pub const DATABASE_UNAVAILABLE: &str = "database_unavailable";
/// `data.reason` of any other failure after the upstream ran (its `call_result`, or the
/// session's record of what it returned, which later guards and inspectors read).
pub const RESULT_UNRECORDED: &str = "result_unrecorded";

const NOT_EXECUTED: &str = "The gateway's database is unavailable, so the call was not \
executed. Try again shortly.";
const UNAVAILABLE_AFTER_EXECUTION: &str = "The tool ran, but the gateway's database became \
unavailable before the call was fully recorded, so its result is withheld. The call may have \
taken effect: check before you try it again.";
const UNRECORDED: &str = "The tool ran, but the call could not be fully recorded, so its \
result is withheld. The call may have taken effect: check before you try it again.";

/// The agent's answer to `error`, logged here once with what the agent is not told.
pub fn to_agent(error: &GatewayError) -> McpError {
    let executed = error.executed();
    let (message, reason) = match (error.is_unavailable(), executed) {
        (true, false) => (NOT_EXECUTED, DATABASE_UNAVAILABLE),
        (true, true) => (UNAVAILABLE_AFTER_EXECUTION, DATABASE_UNAVAILABLE),
        (false, true) => (UNRECORDED, RESULT_UNRECORDED),
        (false, false) => {
            tracing::error!(%error, "the gateway failed");
            return McpError::internal_error("internal error", None);
        }
    };
    tracing::error!(%error, executed, "the gateway failed: {reason}");
    McpError::new(
        ErrorCode::INTERNAL_ERROR,
        message,
        Some(json!({
            "reason": reason,
            "executed": executed,
            "retryable": !executed,
        })),
    )
}

#[cfg(test)]
mod tests {
    use skillgate_core::store::StoreError;

    use super::*;

    fn unavailable() -> GatewayError {
        GatewayError::Store(StoreError::Unavailable("connection refused".to_owned()))
    }

    #[test]
    fn an_unavailable_database_before_the_upstream_ran_says_nothing_was_executed_and_to_retry() {
        let error = to_agent(&unavailable());
        assert_eq!(error.code, ErrorCode::INTERNAL_ERROR);
        assert!(error.message.contains("not executed"), "{}", error.message);
        let data = error.data.unwrap();
        assert_eq!(data["reason"], DATABASE_UNAVAILABLE);
        assert_eq!(data["executed"], false);
        assert_eq!(data["retryable"], true);
    }

    #[test]
    fn a_failure_after_the_upstream_ran_says_the_call_may_have_taken_effect_and_not_to_retry() {
        for (error, reason) in [
            (unavailable(), DATABASE_UNAVAILABLE),
            (
                GatewayError::Store(StoreError::Corrupt("bad row".to_owned())),
                RESULT_UNRECORDED,
            ),
        ] {
            let error = to_agent(&GatewayError::AfterExecution(Box::new(error)));
            assert!(
                error.message.contains("may have taken effect"),
                "{}",
                error.message
            );
            let data = error.data.unwrap();
            assert_eq!(data["reason"], reason);
            assert_eq!(data["executed"], true);
            assert_eq!(data["retryable"], false);
        }
    }

    #[test]
    fn any_other_failure_is_a_bare_internal_error_that_tells_the_agent_nothing_more() {
        let error = to_agent(&GatewayError::Store(StoreError::Corrupt(
            "secret detail".to_owned(),
        )));
        assert_eq!(error.message, "internal error");
        assert!(error.data.is_none());
    }
}
