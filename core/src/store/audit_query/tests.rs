use super::*;

#[test]
fn a_governance_violation_is_not_counted_as_a_denial() {
    let delta = session_delta(
        "call_denied",
        r#"{"code":"GOVERNANCE_VIOLATION","rule":"max_refund","tool":"issue_refund"}"#,
    );
    assert_eq!((delta.violations, delta.denials), (1, 0));
    assert_eq!(delta.tool.as_deref(), Some("issue_refund"));
    let delta = session_delta("call_denied", r#"{"code":"ACCESS_DENIED","tool":"x"}"#);
    assert_eq!((delta.violations, delta.denials), (0, 1));
}

#[test]
fn a_refused_feedback_counts_as_a_denial_and_a_recorded_one_does_not() {
    let denied = session_delta(
        "feedback",
        r#"{"decision":"denied","code":"ACCESS_DENIED","skill":"s"}"#,
    );
    assert_eq!((denied.violations, denied.denials), (0, 1));
    let limited = session_delta(
        "feedback",
        r#"{"decision":"denied","code":"GOVERNANCE_VIOLATION","skill":"s"}"#,
    );
    assert_eq!((limited.violations, limited.denials), (1, 0));
    let recorded = session_delta("feedback", r#"{"skill":"s","rating":4}"#);
    assert_eq!((recorded.violations, recorded.denials), (0, 0));
}

#[test]
fn a_held_call_names_its_tool_and_counts_as_a_call_only_when_its_approved_run_is_allowed() {
    let held = session_delta(
        "call_held",
        r#"{"hold_id":"h","tool":"process_refund","decision":"pending_approval"}"#,
    );
    assert_eq!(held.tool.as_deref(), Some("process_refund"));
    assert_eq!((held.calls, held.denials, held.violations), (0, 0, 0));
    let approved = session_delta(
        "hold_approved",
        r#"{"hold_id":"h","tool":"process_refund"}"#,
    );
    assert_eq!((approved.calls, approved.denials), (0, 0));
    let expired = session_delta("hold_expired", r#"{"hold_id":"h","tool":"process_refund"}"#);
    assert_eq!((expired.calls, expired.denials), (0, 0));
    let ran = session_delta("call_allowed", r#"{"tool":"process_refund","hold_id":"h"}"#);
    assert_eq!(ran.calls, 1);
}

#[test]
fn a_reviewers_denial_of_a_held_call_counts_as_a_denial() {
    let denied = session_delta("hold_denied", r#"{"hold_id":"h","tool":"process_refund"}"#);
    assert_eq!((denied.calls, denied.denials, denied.violations), (0, 1, 0));
    assert_eq!(denied.tool.as_deref(), Some("process_refund"));
}

#[test]
fn like_wildcards_in_search_text_match_literally() {
    assert_eq!(like_pattern("50%_off"), "%50\\%\\_off%");
}
