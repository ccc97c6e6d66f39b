//! `decide`: every rule, every fail-closed case, in DESIGN.md's order.

use crate::policy_common;

use chrono::Duration;
use policy_common::*;
use serde_json::json;
use skillgate_core::model::Catalog;
use skillgate_core::policy::{
    CallRequest, CatalogHandle, CompiledCatalog, Decision, DenyCode, SessionView, decide,
};

fn code(decision: &Decision) -> Option<DenyCode> {
    decision.deny_code()
}

fn rule(decision: &Decision) -> &str {
    &denial(decision).rule
}

fn authorizing_role(decision: &Decision) -> &str {
    permit(decision).role().as_str()
}

/// A front session that learned `small-refunds` and already checked eligibility.
fn checked_small_session() -> SessionView {
    let mut session = session("front", &["small-refunds"]);
    session.record_success("check", None);
    session
}

#[test]
fn a_session_the_store_does_not_know_is_access_denied_without_listing_tools() {
    let request = CallRequest {
        session_id: SESSION,
        key_id: KEY,
        tool: "check",
        arguments: args("{}"),
        approved: None,
    };
    let decision = decide(&compiled(), None, request, t0());
    assert_eq!(code(&decision), Some(DenyCode::AccessDenied));
    let denial = denial(&decision);
    assert!(denial.available_tools.is_empty(), "{denial}");
    assert_eq!(denial.role, None);
    assert_eq!(denial.guardrail_of, None);
}

#[test]
fn expired_foreign_or_mismatched_sessions_are_access_denied_alike() {
    let catalog = compiled();
    let session = session("front", &["small-refunds"]);
    let at_expiry = session.expires_at;
    let cases: [(&str, &str, chrono::DateTime<chrono::Utc>); 4] = [
        ("expired", KEY, at_expiry),
        ("long expired", KEY, at_expiry + Duration::days(1)),
        ("owned by another key", "key-2", t0()),
        ("another session's id", KEY, t0()),
    ];
    let mut rules = Vec::new();
    for (case, key, now) in cases {
        let session_id = if case == "another session's id" {
            "s-2"
        } else {
            SESSION
        };
        let request = CallRequest {
            session_id,
            key_id: key,
            tool: "check",
            arguments: args("{}"),
            approved: None,
        };
        let decision = decide(&catalog, Some(&session), request, now);
        assert_eq!(code(&decision), Some(DenyCode::AccessDenied), "{case}");
        rules.push(rule(&decision).to_owned());
    }
    rules.dedup();
    assert_eq!(
        rules.len(),
        1,
        "the denials must not reveal which check failed: {rules:?}"
    );
    let just_before = at_expiry - Duration::seconds(1);
    let request = CallRequest {
        session_id: SESSION,
        key_id: KEY,
        tool: "check",
        arguments: args("{}"),
        approved: None,
    };
    assert!(decide(&catalog, Some(&session), request, just_before).is_allowed());
}

#[test]
fn an_unknown_tool_is_access_denied_with_the_tools_that_are_available() {
    let decision = call(
        &compiled(),
        &session("front", &["small-refunds"]),
        "drop_database",
        "{}",
    );
    assert_eq!(code(&decision), Some(DenyCode::AccessDenied));
    assert!(
        rule(&decision).contains("`drop_database` is not unlocked"),
        "{}",
        shown(&decision)
    );
    assert_eq!(
        denial(&decision).available_tools,
        ["check", "loose_refund", "note", "refund"]
    );
}

#[test]
fn a_tool_of_an_unlearned_role_in_scope_is_access_denied_and_names_the_role_to_learn() {
    let decision = call(
        &compiled(),
        &session("front", &["small-refunds"]),
        "ticket",
        "{}",
    );
    assert_eq!(code(&decision), Some(DenyCode::AccessDenied));
    assert!(
        rule(&decision).contains("`/roles/retention`"),
        "{}",
        shown(&decision)
    );
}

#[test]
fn a_tool_of_a_role_outside_the_scope_is_denied_without_naming_that_role() {
    let decision = call(
        &compiled(),
        &session("front", &["small-refunds"]),
        "lookup",
        "{}",
    );
    assert_eq!(code(&decision), Some(DenyCode::AccessDenied));
    assert!(
        !rule(&decision).contains("outsider"),
        "{}",
        shown(&decision)
    );
}

#[test]
fn a_learned_role_outside_the_session_scope_grants_nothing() {
    // However the session came to list it, a role its scope does not allow unlocks nothing.
    let decision = call(
        &compiled(),
        &session("front", &["outsider"]),
        "lookup",
        "{}",
    );
    assert_eq!(code(&decision), Some(DenyCode::AccessDenied));
    let decision = call(&compiled(), &session("ops", &["outsider"]), "lookup", "{}");
    assert!(decision.is_allowed(), "{}", shown(&decision));
}

#[test]
fn a_role_removed_from_the_scope_or_catalog_stops_granting_at_once() {
    let session = session("front", &["retention"]);
    let mut narrowed = catalog();
    narrowed.scopes[0]
        .roles
        .retain(|r| r.as_str() != "retention");
    assert_eq!(
        code(&call(
            &CompiledCatalog::compile(narrowed),
            &session,
            "ticket",
            "{}"
        )),
        Some(DenyCode::AccessDenied)
    );
    let mut removed = catalog();
    removed.roles.retain(|r| r.slug.as_str() != "retention");
    assert_eq!(
        code(&call(
            &CompiledCatalog::compile(removed),
            &session,
            "ticket",
            "{}"
        )),
        Some(DenyCode::AccessDenied)
    );
}

#[test]
fn arguments_that_break_the_input_schema_are_invalid_arguments() {
    let catalog = compiled();
    let session = checked_small_session();
    let cases = [
        ("string for a number", r#"{"amount": "600"}"#, "amount"),
        ("missing required amount", r#"{"reason": "late"}"#, "amount"),
        ("null amount", r#"{"amount": null}"#, "amount"),
        (
            "unknown argument",
            r#"{"amount": 5, "currency": "EUR"}"#,
            "currency",
        ),
    ];
    for (case, args, mentioned) in cases {
        let decision = call(&catalog, &session, "refund", args);
        assert_eq!(
            code(&decision),
            Some(DenyCode::InvalidArguments),
            "{case}: {}",
            shown(&decision)
        );
        assert!(
            rule(&decision).contains(mentioned),
            "{case}: {}",
            shown(&decision)
        );
    }
}

#[test]
fn a_refund_above_the_per_call_bound_is_a_governance_violation_naming_rule_and_role() {
    let decision = call(
        &compiled(),
        &checked_small_session(),
        "refund",
        r#"{"amount": 600}"#,
    );
    assert_eq!(code(&decision), Some(DenyCode::GovernanceViolation));
    let denial = denial(&decision);
    assert_eq!(
        denial.role.as_ref().map(|r| r.as_str()),
        Some("small-refunds")
    );
    assert_eq!(denial.guardrail_of, None);
    assert_eq!(
        denial.rule,
        "Each call to `refund` must have `amount` at most 500. This call has `amount` = 600."
    );
    assert!(denial.available_tools.contains(&"refund".to_owned()));
}

#[test]
fn per_call_bounds_compare_amounts_exactly() {
    let catalog = compiled();
    let session = checked_small_session();
    let cases = [
        ("500", true),
        ("500.0", true),
        ("499.9999999999", true),
        ("5e2", true),
        ("500.0000001", false),
        ("500.0000000000000000000000001", false),
        ("5.000000001e2", false),
        ("600", false),
        ("1e400", false),
        ("-1e400", false),
        ("123456789012345678901234567890123", false),
    ];
    for (amount, allowed) in cases {
        let decision = call(
            &catalog,
            &session,
            "refund",
            &format!(r#"{{"amount": {amount}}}"#),
        );
        assert_eq!(
            decision.is_allowed(),
            allowed,
            "amount {amount}: {}",
            shown(&decision)
        );
        if !allowed {
            assert_ne!(
                code(&decision),
                Some(DenyCode::AccessDenied),
                "amount {amount}"
            );
        }
    }
}

#[test]
fn every_comparison_operator_bounds_as_written() {
    use skillgate_core::model::CmpOp::*;
    let cases = [
        (Lt, "499", true),
        (Lt, "500", false),
        (Le, "500", true),
        (Gt, "500", false),
        (Gt, "500.01", true),
        (Ge, "500", true),
        (Ge, "499.99", false),
        (Eq, "500.00", true),
        (Eq, "500.001", false),
    ];
    for (op, amount, allowed) in cases {
        let mut catalog = catalog();
        catalog.roles[1].limits = vec![bound("refund", "amount", op, 500)];
        let decision = call(
            &CompiledCatalog::compile(catalog),
            &session("front", &["big-refunds"]),
            "refund",
            &format!(r#"{{"amount": {amount}}}"#),
        );
        assert_eq!(
            decision.is_allowed(),
            allowed,
            "{op:?} {amount}: {}",
            shown(&decision)
        );
    }
}

#[test]
fn a_limit_that_cannot_be_evaluated_denies() {
    // `loose_refund` has no typed schema, so these reach the limit itself.
    let catalog = compiled();
    let session = checked_small_session();
    let cases = [
        ("missing", r#"{}"#, "missing"),
        ("string number", r#"{"amount": "600"}"#, "not a number"),
        (
            "string below the bound",
            r#"{"amount": "5"}"#,
            "not a number",
        ),
        ("NaN-like", r#"{"amount": "NaN"}"#, "not a number"),
        ("infinity-like", r#"{"amount": "Infinity"}"#, "not a number"),
        ("null", r#"{"amount": null}"#, "not a number"),
        ("bool", r#"{"amount": true}"#, "not a number"),
        ("too large", r#"{"amount": 1e400}"#, "out of the range"),
        ("too precise", r#"{"amount": 1e-400}"#, "out of the range"),
    ];
    for (case, args, reason) in cases {
        let decision = call(&catalog, &session, "loose_refund", args);
        assert_eq!(
            code(&decision),
            Some(DenyCode::GovernanceViolation),
            "{case}: {}",
            shown(&decision)
        );
        assert!(
            rule(&decision).contains(reason),
            "{case}: {}",
            shown(&decision)
        );
    }
    assert!(call(&catalog, &session, "loose_refund", r#"{"amount": 5}"#).is_allowed());
}

#[test]
fn string_length_and_one_of_bounds_deny_what_they_do_not_list() {
    let catalog = compiled();
    let session = checked_small_session();
    let cases = [
        (r#"{"text": "short", "channel": "email", "rank": 1}"#, true),
        (
            r#"{"text": "ten chars!", "channel": "email", "rank": 1}"#,
            true,
        ),
        (
            r#"{"text": "éééééééééé", "channel": "email", "rank": 1}"#,
            true,
        ),
        (
            r#"{"text": "eleven char", "channel": "email", "rank": 1}"#,
            false,
        ),
        (r#"{"text": 12, "channel": "email", "rank": 1}"#, false),
        (r#"{"text": "ok", "channel": "fax", "rank": 1}"#, false),
        (r#"{"text": "ok", "channel": "phone", "rank": 1.0}"#, true),
        (r#"{"text": "ok", "channel": "phone", "rank": 2}"#, false),
        (r#"{"text": "ok", "channel": "phone", "rank": 2.50}"#, true),
        (r#"{"text": "ok", "channel": "phone", "rank": "1"}"#, false),
        (r#"{"channel": "email", "rank": 1}"#, false),
        (r#"{"text": "ok", "rank": 1}"#, false),
    ];
    for (args, allowed) in cases {
        let decision = call(&catalog, &session, "note", args);
        assert_eq!(
            decision.is_allowed(),
            allowed,
            "{args}: {}",
            shown(&decision)
        );
    }
}

#[test]
fn the_session_sum_cap_stops_the_refund_that_would_cross_it() {
    let catalog = compiled();
    let mut session = checked_small_session();
    assert!(call_and_run(&catalog, &mut session, "refund", r#"{"amount": 500}"#).is_allowed());
    assert!(call_and_run(&catalog, &mut session, "refund", r#"{"amount": 499.99}"#).is_allowed());
    let decision = call_and_run(&catalog, &mut session, "refund", r#"{"amount": 0.02}"#);
    assert_eq!(code(&decision), Some(DenyCode::GovernanceViolation));
    assert!(
        rule(&decision).starts_with(
            "The `amount` of all allowed `refund` calls in a session must add up to at most 1000."
        ),
        "{}",
        shown(&decision)
    );
    assert!(
        rule(&decision).contains("999.99 already used"),
        "{}",
        shown(&decision)
    );
    assert!(call_and_run(&catalog, &mut session, "refund", r#"{"amount": 0.01}"#).is_allowed());
    assert_eq!(
        session.usage.sum("refund", "amount"),
        "1000.00".parse().unwrap()
    );
}

#[test]
fn a_negative_amount_cannot_lower_a_session_sum() {
    let catalog = compiled();
    let mut session = checked_small_session();
    assert!(call_and_run(&catalog, &mut session, "refund", r#"{"amount": 500}"#).is_allowed());
    let decision = call_and_run(&catalog, &mut session, "refund", r#"{"amount": -400}"#);
    assert_eq!(code(&decision), Some(DenyCode::GovernanceViolation));
    assert!(rule(&decision).contains("negative"), "{}", shown(&decision));
    assert!(call_and_run(&catalog, &mut session, "refund", r#"{"amount": 0}"#).is_allowed());
}

#[test]
fn the_call_count_cap_stops_the_call_after_the_last_allowed() {
    let catalog = compiled();
    let mut session = checked_small_session();
    for _ in 0..3 {
        assert!(call_and_run(&catalog, &mut session, "refund", r#"{"amount": 1}"#).is_allowed());
    }
    let decision = call_and_run(&catalog, &mut session, "refund", r#"{"amount": 1}"#);
    assert_eq!(code(&decision), Some(DenyCode::GovernanceViolation));
    assert!(
        rule(&decision).starts_with("`refund` may be called at most 3 times per session."),
        "{}",
        shown(&decision)
    );
}

#[test]
fn a_guarded_tool_runs_only_after_its_prerequisites_succeeded() {
    let catalog = compiled();
    let mut session = session("front", &["small-refunds"]);
    let decision = call(&catalog, &session, "refund", r#"{"amount": 10}"#);
    assert_eq!(code(&decision), Some(DenyCode::GovernanceViolation));
    assert!(
        rule(&decision).contains("Not yet succeeded: `check`"),
        "{}",
        shown(&decision)
    );

    // An allowed check whose upstream call failed does not satisfy the guard.
    let decision = call(&catalog, &session, "check", "{}");
    session.reserve(permit(&decision));
    assert!(!call(&catalog, &session, "refund", r#"{"amount": 10}"#).is_allowed());
    session.record_success("check", None);
    assert!(call(&catalog, &session, "refund", r#"{"amount": 10}"#).is_allowed());
}

#[test]
fn the_retention_refund_waits_for_ticket_extension_and_credit() {
    let catalog = compiled();
    let mut session = session("front", &["retention"]);
    for (done, missing) in [("ticket", "`extend`, `credit`"), ("extend", "`credit`")] {
        assert!(call_and_run(&catalog, &mut session, done, "{}").is_allowed());
        let decision = call(&catalog, &session, "refund", r#"{"amount": 10}"#);
        assert!(
            rule(&decision).ends_with(&format!("Not yet succeeded: {missing}.")),
            "{}",
            shown(&decision)
        );
    }
    assert!(call_and_run(&catalog, &mut session, "credit", "{}").is_allowed());
    assert_eq!(
        authorizing_role(&call(&catalog, &session, "refund", r#"{"amount": 10}"#)),
        "retention"
    );
}

#[test]
fn guards_are_checked_before_bounds_and_bounds_before_caps_whatever_the_declared_order() {
    let catalog = compiled();
    let unchecked = session("front", &["small-refunds"]);
    assert!(
        rule(&call(&catalog, &unchecked, "refund", r#"{"amount": 600}"#))
            .contains("may run only after")
    );
    let mut session = checked_small_session();
    call_and_run(&catalog, &mut session, "refund", r#"{"amount": 500}"#);
    call_and_run(&catalog, &mut session, "refund", r#"{"amount": 500}"#);
    assert!(
        rule(&call(&catalog, &session, "refund", r#"{"amount": 600}"#))
            .starts_with("Each call to `refund`")
    );
    assert!(
        rule(&call(&catalog, &session, "refund", r#"{"amount": 1}"#))
            .starts_with("The `amount` of all")
    );
}

#[test]
fn the_first_role_in_learn_order_whose_rules_pass_authorizes() {
    let catalog = compiled();
    let mut small_first = session("front", &["small-refunds", "big-refunds"]);
    small_first.record_success("check", None);
    assert_eq!(
        authorizing_role(&call(
            &catalog,
            &small_first,
            "refund",
            r#"{"amount": 400}"#
        )),
        "small-refunds"
    );
    assert_eq!(
        authorizing_role(&call(
            &catalog,
            &small_first,
            "refund",
            r#"{"amount": 600}"#
        )),
        "big-refunds"
    );

    let mut big_first = session("front", &["big-refunds", "small-refunds"]);
    big_first.record_success("check", None);
    assert_eq!(
        authorizing_role(&call(&catalog, &big_first, "refund", r#"{"amount": 400}"#)),
        "big-refunds"
    );
}

#[test]
fn when_no_granting_role_passes_the_first_in_learn_order_is_named() {
    let catalog = compiled();
    let mut session = session("front", &["small-refunds", "big-refunds"]);
    session.record_success("check", None);
    let decision = call(&catalog, &session, "refund", r#"{"amount": 6000}"#);
    assert!(
        matches!(&decision, Decision::Deny(denial) if denial.code == DenyCode::GovernanceViolation
            && denial.role.as_ref().is_some_and(|r| r.as_str() == "small-refunds")),
        "{}",
        shown(&decision)
    );
}

#[test]
fn a_cap_counts_the_calls_every_role_authorized() {
    // Usage is the session's: a refund another role authorised fills this role's cap too.
    let catalog = compiled();
    let mut session = session("front", &["small-refunds", "big-refunds"]);
    session.record_success("check", None);
    assert_eq!(
        authorizing_role(&call_and_run(
            &catalog,
            &mut session,
            "refund",
            r#"{"amount": 3000}"#
        )),
        "big-refunds"
    );
    assert_eq!(session.usage.sum("refund", "amount"), 3000.into());
    assert_eq!(session.usage.count("refund"), 1);
    assert_eq!(
        authorizing_role(&call_and_run(
            &catalog,
            &mut session,
            "refund",
            r#"{"amount": 500}"#
        )),
        "big-refunds",
        "small-refunds' sum cap already counts the 3000"
    );
    assert_eq!(session.usage.sum("refund", "amount"), 3500.into());
    let mut small_only = session.clone();
    small_only
        .learned
        .retain(|l| l.role.as_str() == "small-refunds");
    let decision = call(&catalog, &small_only, "refund", r#"{"amount": 1}"#);
    assert_eq!(code(&decision), Some(DenyCode::GovernanceViolation));
    assert!(
        rule(&decision).contains("3500 already used"),
        "{}",
        shown(&decision)
    );
}

#[test]
fn an_allow_reserves_exactly_the_capped_amounts() {
    let decision = call(
        &compiled(),
        &checked_small_session(),
        "refund",
        r#"{"amount": 123.45, "reason": "late"}"#,
    );
    let permit = permit(&decision);
    assert_eq!(permit.role().as_str(), "small-refunds");
    assert_eq!(permit.tool(), "refund");
    assert!(permit.reserves_usage());
    assert!(
        permit.reservation().counts(),
        "small-refunds caps the count"
    );
    assert_eq!(permit.arguments()["reason"], "late");
    let amounts: Vec<_> = permit
        .reservation()
        .amounts()
        .iter()
        .map(|a| (a.arg.as_str(), a.amount.to_string()))
        .collect();
    assert_eq!(amounts, [("amount", "123.45".to_owned())]);
}

#[test]
fn a_tool_whose_schema_does_not_compile_is_unusable_for_every_call() {
    let mut broken: Catalog = catalog();
    broken.tools[2].spec.input_schema = json!({"type": "no-such-type"});
    let catalog = CompiledCatalog::compile(broken);
    assert_eq!(catalog.broken_tools().len(), 1);
    let decision = call(
        &catalog,
        &session("front", &["small-refunds"]),
        "check",
        "{}",
    );
    assert_eq!(
        code(&decision),
        Some(DenyCode::ToolUnusable),
        "{}",
        shown(&decision)
    );
    assert!(rule(&decision).contains("`check`"), "{}", shown(&decision));
}

#[test]
fn a_tool_granted_by_a_skill_but_missing_from_the_catalog_is_access_denied() {
    let mut catalog = catalog();
    catalog.tools.retain(|t| t.spec.name != "check");
    let decision = call(
        &CompiledCatalog::compile(catalog),
        &session("front", &["small-refunds"]),
        "check",
        "{}",
    );
    assert_eq!(
        code(&decision),
        Some(DenyCode::AccessDenied),
        "{}",
        shown(&decision)
    );
}

fn remedy(decision: &Decision) -> serde_json::Value {
    serde_json::to_value(&denial(decision).remedy).unwrap()
}

#[test]
fn each_refusal_says_what_would_satisfy_its_rule() {
    let catalog = compiled();
    let unknown = CallRequest {
        session_id: SESSION,
        key_id: KEY,
        tool: "check",
        arguments: args("{}"),
        approved: None,
    };
    assert_eq!(
        remedy(&decide(&catalog, None, unknown, t0())),
        json!({"type": "start_session"})
    );
    let front = session("front", &["small-refunds"]);
    assert_eq!(
        remedy(&call(&catalog, &front, "ticket", "{}")),
        json!({"type": "learn", "path": "/roles/retention"})
    );
    assert_eq!(
        remedy(&call(&catalog, &front, "lookup", "{}")),
        serde_json::Value::Null,
        "a role outside the scope is never named"
    );
    assert_eq!(
        remedy(&call(&catalog, &front, "refund", r#"{"amount": 10}"#)),
        json!({"type": "succeed_first", "tools": ["check"], "same_args": []})
    );
    let mut checked = checked_small_session();
    assert_eq!(
        remedy(&call(&catalog, &checked, "refund", r#"{"amount": 600}"#)),
        json!({"type": "argument", "at": "amount", "bound": {"check": "compare", "op": "<=", "limit": "500"}})
    );
    call_and_run(&catalog, &mut checked, "refund", r#"{"amount": 500}"#);
    call_and_run(&catalog, &mut checked, "refund", r#"{"amount": 499.5}"#);
    assert_eq!(
        remedy(&call(&catalog, &checked, "refund", r#"{"amount": 1}"#)),
        json!({"type": "cap", "arg": "amount", "max": "1000", "used": "999.5", "remaining": "0.5"})
    );
    call_and_run(&catalog, &mut checked, "refund", r#"{"amount": 0.5}"#);
    assert_eq!(
        remedy(&call(&catalog, &checked, "refund", r#"{"amount": 0}"#)),
        json!({"type": "call_count", "max": 3, "used": 3})
    );
}

#[test]
fn a_denial_reads_as_label_rule_and_available_tools() {
    let decision = call(
        &compiled(),
        &checked_small_session(),
        "refund",
        r#"{"amount": 600}"#,
    );
    assert_eq!(
        denial(&decision).to_string(),
        "GOVERNANCE VIOLATION (role small-refunds): Each call to `refund` must have `amount` at most 500. \
         This call has `amount` = 600. Available tools: check, loose_refund, note, refund."
    );
}

#[test]
fn a_swapped_catalog_reaches_new_decisions_while_old_snapshots_stay_intact() {
    let handle = CatalogHandle::new(compiled());
    let before = handle.load();
    let mut stricter = catalog();
    stricter.roles[0].limits.push(bound(
        "refund",
        "amount",
        skillgate_core::model::CmpOp::Le,
        100,
    ));
    handle.replace(CompiledCatalog::compile(stricter));
    let session = checked_small_session();
    assert!(call(&before, &session, "refund", r#"{"amount": 300}"#).is_allowed());
    assert!(!call(&handle.load(), &session, "refund", r#"{"amount": 300}"#).is_allowed());
}

#[test]
fn learning_a_role_again_keeps_its_place_in_learn_order() {
    let mut session = session("front", &["small-refunds", "big-refunds"]);
    session.learn(slug("small-refunds"), Vec::new());
    let order: Vec<&str> = session.learned.iter().map(|l| l.role.as_str()).collect();
    assert_eq!(order, ["small-refunds", "big-refunds"]);
}

#[test]
fn learning_records_the_current_version_of_each_skill_of_the_role() {
    let mut catalog = catalog();
    catalog.skills[1].version = 4;
    let catalog = CompiledCatalog::compile(catalog);
    let learned: Vec<(String, u32)> = catalog
        .skill_versions_of("small-refunds")
        .into_iter()
        .map(|s| (s.skill.to_string(), s.version))
        .collect();
    assert_eq!(
        learned,
        [("refunds".to_owned(), 1), ("notes".to_owned(), 4)]
    );
    assert!(catalog.skill_versions_of("ghost").is_empty());
    assert!(catalog.scope_allows("front", "retention"));
    assert!(!catalog.scope_allows("front", "outsider"));
    assert!(!catalog.scope_allows("nowhere", "retention"));
}
