//! `decide` against what an agent (or an upstream's schema) can throw at it: caps that a
//! second role must not reopen, amounts that are not exact decimals, bound step-order
//! guards, numbers past `f64`, schemas the validator rejects, quarantined tools. Arbitrary
//! JSON is `policy_arbitrary_json`.

use crate::policy_common;

use policy_common::*;
use rust_decimal::Decimal;
use serde_json::{Value, json};
use skillgate_core::model::{CatalogDraft, Limit, Scope};
use skillgate_core::policy::{CompiledCatalog, Decision, DenyCode, SessionView};

fn code(decision: &Decision) -> Option<DenyCode> {
    decision.deny_code()
}

fn refund_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"amount": {"type": "number"}},
        "required": ["amount"],
        "additionalProperties": false
    })
}

/// One tool, `refund`, granted by two roles of scope `desk`: `capped` with `capped_limits`,
/// and `uncapped` with none. The scope has `guardrails`.
fn desk(capped_limits: Vec<Limit>, guardrails: Vec<Limit>) -> CompiledCatalog {
    let draft = CatalogDraft {
        tools: vec![tool("refund", refund_schema())],
        skills: vec![skill("refunds", &["refund"])],
        roles: vec![
            role("capped", &["refunds"], capped_limits),
            role("uncapped", &["refunds"], Vec::new()),
        ],
        scopes: vec![Scope {
            slug: slug("desk"),
            description: String::new(),
            roles: vec![slug("capped"), slug("uncapped")],
            guardrails,
        }],
    };
    CompiledCatalog::compile(draft.into_catalog(vec![upstream()]))
}

fn refund(amount: &str) -> String {
    format!(r#"{{"amount": {amount}}}"#)
}

fn only(session: &SessionView, role: &str) -> SessionView {
    let mut narrowed = session.clone();
    narrowed.learned.retain(|l| l.role.as_str() == role);
    narrowed
}

#[test]
fn a_refund_a_second_role_authorises_still_counts_toward_the_session_sum() {
    let catalog = desk(vec![sum_cap("refund", "amount", 1000)], Vec::new());
    let mut session = session("desk", &["capped", "uncapped"]);
    for _ in 0..2 {
        let decision = call_and_run(&catalog, &mut session, "refund", &refund("400"));
        assert_eq!(permit(&decision).role().as_str(), "capped");
    }
    assert_eq!(session.usage.sum("refund", "amount"), Decimal::from(800));

    let decision = call_and_run(&catalog, &mut session, "refund", &refund("400"));
    let third = permit(&decision);
    assert_eq!(
        third.role().as_str(),
        "uncapped",
        "capped's cap is full, uncapped has none"
    );
    let reserved: Vec<_> = third
        .reservation()
        .amounts()
        .iter()
        .map(|a| (a.arg.as_str(), a.amount))
        .collect();
    assert_eq!(reserved, [("amount", Decimal::from(400))]);
    assert_eq!(session.usage.sum("refund", "amount"), Decimal::from(1200));

    // The capped role reads the session's sum, including what uncapped authorised.
    let decision = call(&catalog, &only(&session, "capped"), "refund", &refund("1"));
    assert_eq!(code(&decision), Some(DenyCode::GovernanceViolation));
    let refused = denial(&decision);
    assert_eq!(refused.role.as_ref().map(|r| r.as_str()), Some("capped"));
    assert!(refused.rule.contains("1200 already used"), "{refused}");
}

#[test]
fn a_scope_guardrail_on_the_sum_denies_what_no_role_caps_and_names_the_guardrail() {
    let guardrail = sum_cap("refund", "amount", 1000);
    let catalog = desk(vec![sum_cap("refund", "amount", 1000)], vec![guardrail]);
    let mut session = session("desk", &["capped", "uncapped"]);
    for _ in 0..2 {
        assert!(call_and_run(&catalog, &mut session, "refund", &refund("400")).is_allowed());
    }
    let decision = call_and_run(&catalog, &mut session, "refund", &refund("400"));
    assert_eq!(code(&decision), Some(DenyCode::GovernanceViolation));
    let refused = denial(&decision);
    assert_eq!(
        refused.guardrail_of.as_ref().map(|s| s.as_str()),
        Some("desk")
    );
    assert!(
        refused.to_string().contains("guardrail of scope desk"),
        "{refused}"
    );
    assert!(
        refused.rule.starts_with(
            "The `amount` of all allowed `refund` calls in a session must add up to at most 1000."
        ),
        "{refused}"
    );
    assert!(refused.rule.contains("800 already used"), "{refused}");
    assert_eq!(session.usage.sum("refund", "amount"), Decimal::from(800));
    // Up to the guardrail is still allowed.
    assert!(call_and_run(&catalog, &mut session, "refund", &refund("200")).is_allowed());
    assert_eq!(session.usage.sum("refund", "amount"), Decimal::from(1000));
}

#[test]
fn a_call_a_second_role_authorises_still_counts_toward_the_session_count() {
    let catalog = desk(vec![count_cap("refund", 2)], Vec::new());
    let mut session = session("desk", &["capped", "uncapped"]);
    for _ in 0..2 {
        let decision = call_and_run(&catalog, &mut session, "refund", &refund("1"));
        assert_eq!(permit(&decision).role().as_str(), "capped");
    }
    let decision = call_and_run(&catalog, &mut session, "refund", &refund("1"));
    let third = permit(&decision);
    assert_eq!(third.role().as_str(), "uncapped");
    assert!(third.reservation().counts());
    assert_eq!(session.usage.count("refund"), 3);

    let decision = call(&catalog, &only(&session, "capped"), "refund", &refund("1"));
    assert_eq!(code(&decision), Some(DenyCode::GovernanceViolation));
    assert!(
        denial(&decision)
            .rule
            .contains("Already called 3 times in this session."),
        "{}",
        shown(&decision)
    );
}

#[test]
fn a_scope_guardrail_on_the_count_denies_what_no_role_caps_and_names_the_guardrail() {
    let catalog = desk(vec![count_cap("refund", 2)], vec![count_cap("refund", 2)]);
    let mut session = session("desk", &["capped", "uncapped"]);
    for _ in 0..2 {
        assert!(call_and_run(&catalog, &mut session, "refund", &refund("1")).is_allowed());
    }
    let decision = call_and_run(&catalog, &mut session, "refund", &refund("1"));
    assert_eq!(code(&decision), Some(DenyCode::GovernanceViolation));
    let refused = denial(&decision);
    assert_eq!(
        refused.guardrail_of.as_ref().map(|s| s.as_str()),
        Some("desk")
    );
    assert!(
        refused.to_string().contains("guardrail of scope desk"),
        "{refused}"
    );
    assert!(
        refused
            .rule
            .starts_with("`refund` may be called at most 2 times per session."),
        "{refused}"
    );
    assert_eq!(session.usage.count("refund"), 2);
}

#[test]
fn a_negative_amount_under_a_role_without_caps_never_lowers_the_session_sum() {
    // Only `uncapped` is learned; `capped`'s cap is what makes the sum tracked at all.
    let catalog = desk(vec![sum_cap("refund", "amount", 1000)], Vec::new());
    let mut session = session("desk", &["uncapped"]);
    assert!(call_and_run(&catalog, &mut session, "refund", &refund("500")).is_allowed());
    for negative in ["-400", "-0.01", "-1e20", "0", "-0"] {
        let decision = call_and_run(&catalog, &mut session, "refund", &refund(negative));
        let permit = permit(&decision);
        assert!(
            permit.reservation().amounts().is_empty(),
            "{negative} reserves nothing: {permit:?}"
        );
        assert_eq!(
            session.usage.sum("refund", "amount"),
            Decimal::from(500),
            "{negative}"
        );
    }
    // Had a negative lowered the sum, capped would now allow 501 more.
    let mut capped = session.clone();
    capped.learn(slug("capped"), Vec::new());
    let decision = call(&catalog, &only(&capped, "capped"), "refund", &refund("501"));
    assert_eq!(
        code(&decision),
        Some(DenyCode::GovernanceViolation),
        "{}",
        shown(&decision)
    );
    assert!(call(&catalog, &only(&capped, "capped"), "refund", &refund("500")).is_allowed());
}

#[test]
fn an_amount_another_roles_cap_tracks_that_is_not_an_exact_decimal_is_invalid_arguments() {
    let inexact = [
        "1e-40",
        "1234567890123456789012345678901234567890",
        "0.0000000000000000000000000000000000000001",
        "1e400",
    ];
    let tracked = desk(vec![sum_cap("refund", "amount", 1000)], Vec::new());
    let mut session = session("desk", &["uncapped"]);
    for amount in inexact {
        let decision = call_and_run(&tracked, &mut session, "refund", &refund(amount));
        assert_eq!(
            code(&decision),
            Some(DenyCode::InvalidArguments),
            "{amount}: {}",
            shown(&decision)
        );
        let rule = &denial(&decision).rule;
        assert!(
            rule.contains("`amount`") && rule.contains("caps on `refund`"),
            "{amount}: {rule}"
        );
    }
    assert_eq!(session.usage.sum("refund", "amount"), Decimal::ZERO);
    // Where no cap reads the amount, nothing needs it exact.
    let untracked = desk(Vec::new(), Vec::new());
    for amount in inexact {
        assert!(
            call(&untracked, &session, "refund", &refund(amount)).is_allowed(),
            "{amount}"
        );
    }
}

fn check(order: &str) -> String {
    format!(r#"{{"customer_id": "C-1001", "order_id": "{order}"}}"#)
}

fn demo_refund(order: &str) -> String {
    format!(
        r#"{{"customer_id": "C-1001", "order_id": "{order}", "amount": 100, "reason": "late"}}"#
    )
}

/// Decides the eligibility check of `order` and records the success the upstream answered
/// with `result`, through the permit's own note: the path the gateway takes.
fn checked(catalog: &CompiledCatalog, session: &mut SessionView, order: &str, result: Value) {
    let decision = call_and_succeed(
        catalog,
        session,
        "check_refund_eligibility",
        &check(order),
        Some(&result),
    );
    assert!(decision.is_allowed(), "{}", shown(&decision));
}

#[test]
fn a_bound_guard_needs_a_success_of_the_same_order_that_answered_eligible() {
    let catalog = demo();
    let mut session = demo_session("support", &["tier-1-support"], &catalog);
    let refused = |session: &SessionView, order: &str| {
        let decision = call(&catalog, session, "process_refund", &demo_refund(order));
        assert_eq!(
            code(&decision),
            Some(DenyCode::GovernanceViolation),
            "{}",
            shown(&decision)
        );
        let rule = denial(&decision).rule.clone();
        assert!(
            rule.contains("No matching success of `check_refund_eligibility`"),
            "{rule}"
        );
    };
    refused(&session, "O-5001");

    // A check whose permit notes the order and the result pointer the guard reads.
    let mut decision = call(
        &catalog,
        &session,
        "check_refund_eligibility",
        &check("O-5001"),
    );
    let Decision::Allow(check_permit) = &mut decision else {
        panic!("{}", shown(&decision))
    };
    let note = check_permit.take_note();
    assert!(note.is_watched());
    assert_eq!(note.tool(), "check_refund_eligibility");

    checked(
        &catalog,
        &mut session,
        "O-5001",
        json!({"eligible": false, "max_amount": 0}),
    );
    refused(&session, "O-5001");

    checked(
        &catalog,
        &mut session,
        "O-5002",
        json!({"eligible": true, "max_amount": 300}),
    );
    refused(&session, "O-5001");
    assert!(call(&catalog, &session, "process_refund", &demo_refund("O-5002")).is_allowed());

    // A success with no structured result proves nothing about eligibility.
    let decision = call_and_succeed(
        &catalog,
        &mut session,
        "check_refund_eligibility",
        &check("O-5001"),
        None,
    );
    assert!(decision.is_allowed());
    refused(&session, "O-5001");

    checked(
        &catalog,
        &mut session,
        "O-5001",
        json!({"eligible": true, "max_amount": 300}),
    );
    let decision = call(&catalog, &session, "process_refund", &demo_refund("O-5001"));
    assert_eq!(
        permit(&decision).role().as_str(),
        "tier-1-support",
        "{}",
        shown(&decision)
    );
}

#[test]
fn a_plain_guard_still_waits_only_for_any_success_of_its_prerequisite() {
    let catalog = demo();
    let mut session = demo_session("support", &["security-fraud"], &catalog);
    let flag =
        r#"{"customer_id": "C-2002", "reason": "logins from three countries", "severity": "high"}"#;
    let decision = call(&catalog, &session, "flag_account", flag);
    assert_eq!(code(&decision), Some(DenyCode::GovernanceViolation));
    assert!(
        denial(&decision)
            .rule
            .ends_with("Not yet succeeded: `investigate_account_activity`."),
        "{}",
        shown(&decision)
    );

    // An allowed investigation whose upstream call failed records nothing.
    let investigate = r#"{"customer_id": "C-1001", "days": 30}"#;
    let mut decision = call(
        &catalog,
        &session,
        "investigate_account_activity",
        investigate,
    );
    let Decision::Allow(investigation) = &mut decision else {
        panic!("{}", shown(&decision))
    };
    assert!(
        !investigation.take_note().is_watched(),
        "no bound guard reads it"
    );
    assert!(!call(&catalog, &session, "flag_account", flag).is_allowed());

    // Any success opens the way, even for another customer: plain guards bind no argument.
    let decision = call_and_succeed(
        &catalog,
        &mut session,
        "investigate_account_activity",
        investigate,
        Some(&json!({"findings": []})),
    );
    assert!(decision.is_allowed());
    assert!(
        session
            .usage
            .outcomes("investigate_account_activity")
            .is_empty()
    );
    let decision = call(&catalog, &session, "flag_account", flag);
    assert_eq!(
        permit(&decision).role().as_str(),
        "security-fraud",
        "{}",
        shown(&decision)
    );
}

#[test]
fn numbers_past_f64_are_decided_naming_the_argument() {
    let catalog = demo();
    let mut session = demo_session("support", &["tier-1-support", "retention-desk"], &catalog);
    checked(&catalog, &mut session, "O-5001", json!({"eligible": true}));
    let refund_of = |amount: &str| {
        format!(
            r#"{{"customer_id": "C-1001", "order_id": "O-5001", "amount": {amount}, "reason": "late"}}"#
        )
    };
    let extension = |months: &str| format!(r#"{{"customer_id": "C-1001", "months": {months}}}"#);
    let cases = [
        // Valid for the schema, so the scope's guardrail is the first to read it.
        (
            "process_refund",
            refund_of("1e400"),
            DenyCode::GovernanceViolation,
            "`amount`",
        ),
        (
            "process_refund",
            refund_of("-1e400"),
            DenyCode::InvalidArguments,
            "`amount`",
        ),
        (
            "offer_extension",
            extension("1e400"),
            DenyCode::InvalidArguments,
            "`months`",
        ),
        (
            "offer_extension",
            extension("-1e400"),
            DenyCode::InvalidArguments,
            "`months`",
        ),
    ];
    for (tool, args, expected, named) in cases {
        let decision = call(&catalog, &session, tool, &args);
        assert_eq!(
            code(&decision),
            Some(expected),
            "{args}: {}",
            shown(&decision)
        );
        assert!(
            denial(&decision).rule.contains(named),
            "{args}: {}",
            shown(&decision)
        );
    }
    let decision = call(&catalog, &session, "process_refund", &refund_of("1e400"));
    assert_eq!(
        denial(&decision).guardrail_of.as_ref().map(|s| s.as_str()),
        Some("support")
    );
}

/// Tools with edge-case schemas, all granted by one role: `huge` has `maximum: 1e400`,
/// `broken` a schema jsonschema rejects, `fine` an ordinary one.
fn edge_schemas() -> CompiledCatalog {
    // Parsed from text: a Rust float literal could not hold 1e400.
    let huge: Value = serde_json::from_str(
        r#"{"type": "object", "properties": {"n": {"type": "number", "maximum": 1e400}}, "required": ["n"]}"#,
    )
    .unwrap();
    let draft = CatalogDraft {
        tools: vec![
            tool("huge", huge),
            tool("broken", json!({"type": 12})),
            tool("fine", no_args()),
        ],
        skills: vec![skill("edges", &["huge", "broken", "fine"])],
        roles: vec![role("edger", &["edges"], Vec::new())],
        scopes: vec![Scope {
            slug: slug("edge"),
            description: String::new(),
            roles: vec![slug("edger")],
            guardrails: Vec::new(),
        }],
    };
    CompiledCatalog::compile(draft.into_catalog(vec![upstream()]))
}

#[test]
fn a_schema_with_a_maximum_past_f64_compiles_and_compares_exactly() {
    let catalog = edge_schemas();
    assert!(
        catalog
            .broken_tools()
            .iter()
            .all(|(tool, _)| *tool != "huge"),
        "{:?}",
        catalog.broken_tools()
    );
    let session = session("edge", &["edger"]);
    for n in ["5", "-1e400", "1e399", "1e400", "9.99999e399"] {
        let decision = call(&catalog, &session, "huge", &format!(r#"{{"n": {n}}}"#));
        assert!(decision.is_allowed(), "{n}: {}", shown(&decision));
    }
    for n in ["1.0000000000000000001e400", "2e400", "1e401"] {
        let decision = call(&catalog, &session, "huge", &format!(r#"{{"n": {n}}}"#));
        assert_eq!(
            code(&decision),
            Some(DenyCode::InvalidArguments),
            "{n}: {}",
            shown(&decision)
        );
        assert!(
            denial(&decision).rule.contains("`n`"),
            "{n}: {}",
            shown(&decision)
        );
    }
}

#[test]
fn a_schema_jsonschema_rejects_makes_only_its_own_tool_unusable() {
    let catalog = edge_schemas();
    let broken: Vec<&str> = catalog
        .broken_tools()
        .iter()
        .map(|(tool, _)| *tool)
        .collect();
    assert_eq!(broken, ["broken"]);
    let session = session("edge", &["edger"]);
    let decision = call(&catalog, &session, "broken", "{}");
    assert_eq!(
        code(&decision),
        Some(DenyCode::ToolUnusable),
        "{}",
        shown(&decision)
    );
    let refused = denial(&decision);
    assert!(refused.rule.contains("`broken`"), "{refused}");
    assert!(
        refused.to_string().starts_with("TOOL UNUSABLE"),
        "{refused}"
    );
    assert!(call(&catalog, &session, "fine", "{}").is_allowed());
    assert!(call(&catalog, &session, "huge", r#"{"n": 1}"#).is_allowed());
}

#[test]
fn a_quarantined_tool_is_denied_as_quarantined_and_no_longer_listed_as_available() {
    let mut catalog = demo_uncompiled();
    let lookup = catalog
        .tools
        .iter_mut()
        .find(|t| t.spec.name == "lookup_customer")
        .unwrap();
    lookup.quarantine = Some("its description changed since it was pinned".to_owned());
    let catalog = CompiledCatalog::compile(catalog);
    let session = demo_session("support", &["tier-1-support"], &catalog);
    let decision = call(
        &catalog,
        &session,
        "lookup_customer",
        r#"{"customer_id": "C-1001"}"#,
    );
    assert_eq!(
        code(&decision),
        Some(DenyCode::ToolQuarantined),
        "{}",
        shown(&decision)
    );
    let denial = denial(&decision);
    assert!(denial.to_string().starts_with("ACCESS DENIED"), "{denial}");
    assert!(
        denial.rule.contains("description changed"),
        "{}",
        denial.rule
    );
    assert!(
        !denial
            .available_tools
            .contains(&"lookup_customer".to_owned())
    );
    assert!(
        denial
            .available_tools
            .contains(&"get_order_history".to_owned())
    );
    let other = call(
        &catalog,
        &session,
        "get_order_history",
        r#"{"customer_id": "C-1001"}"#,
    );
    assert!(other.is_allowed(), "{}", shown(&other));
}
