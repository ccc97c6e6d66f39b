//! `decide` against what an agent (or an upstream's schema) can throw at it: caps that a
//! second role must not reopen, amounts that are not exact decimals, bound step-order
//! guards, numbers past `f64`, schemas the validator rejects, and arbitrary JSON.

use crate::policy_common;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use policy_common::*;
use proptest::prelude::*;
use rust_decimal::Decimal;
use serde_json::{Value, json};
use skillgate_core::demo::catalog::{DEMO_UPSTREAM, demo_catalog};
use skillgate_core::model::{CatalogDraft, Limit, Scope, Upstream, UpstreamKind};
use skillgate_core::policy::{
    Arguments, CallRequest, CompiledCatalog, Decision, DenyCode, SessionView, compile_schema,
    decide,
};

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

fn demo() -> CompiledCatalog {
    let upstream = Upstream {
        name: slug(DEMO_UPSTREAM),
        kind: UpstreamKind::Stdio {
            command: "skillgate".to_owned(),
            args: vec!["demo-upstream".to_owned()],
        },
    };
    CompiledCatalog::compile(demo_catalog().into_catalog(vec![upstream]))
}

fn demo_session(scope: &str, roles: &[&str], catalog: &CompiledCatalog) -> SessionView {
    let mut session = session(scope, &[]);
    for role in roles {
        session.learn(slug(role), catalog.skill_versions_of(role));
    }
    session
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

// ---- Arbitrary JSON against the demo catalog -------------------------------------------

struct Demo {
    catalog: CompiledCatalog,
    /// Per tool of the catalog: its compiled schema and the scope whose roles grant it.
    tools: Vec<DemoTool>,
    /// Per scope: a session that learned all its roles, fresh and after every tool of the
    /// scope succeeded once with valid arguments.
    sessions: BTreeMap<String, [SessionView; 2]>,
}

struct DemoTool {
    name: String,
    validator: jsonschema::Validator,
    scope: String,
    /// Valid arguments, which the generated ones start from or replace.
    template: Arguments,
    numeric: Vec<String>,
}

/// A valid value for one argument, from its name (for the demo's id patterns) and schema.
fn valid_value(arg: &str, schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|values| values.first()) {
        return first.clone();
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    match types.first().copied() {
        Some("integer") if schema["minimum"].is_number() => schema["minimum"].clone(),
        Some("integer") => json!(1),
        Some("number") => json!(100),
        Some("boolean") => json!(true),
        Some("array") => json!(["text"]),
        Some("object") => json!({}),
        Some("null") => Value::Null,
        _ => match arg {
            "customer_id" => json!("C-1001"),
            "order_id" => json!("O-5001"),
            "user_id" => json!("U-2001"),
            "email" => json!("ada@example.com"),
            "token" => json!("tok_12345678"),
            "since" => json!("2026-01-01T00:00:00Z"),
            _ => json!("text"),
        },
    }
}

/// The tool's numeric arguments, which bounds and caps read.
fn numeric_args(schema: &Value) -> Vec<String> {
    schema["properties"]
        .as_object()
        .map(|props| {
            props
                .iter()
                .filter(|(_, p)| matches!(p["type"].as_str(), Some("number" | "integer")))
                .map(|(name, _)| name.clone())
                .collect()
        })
        .unwrap_or_default()
}

fn decide_at_t0(
    catalog: &CompiledCatalog,
    session: &SessionView,
    tool: &str,
    arguments: Arguments,
) -> Decision {
    decide(
        catalog,
        Some(session),
        CallRequest {
            session_id: SESSION,
            key_id: KEY,
            tool,
            arguments,
            approved: None,
        },
        t0(),
    )
}

static DEMO: LazyLock<Demo> = LazyLock::new(|| {
    let catalog = demo();
    let scope_granting = |tool: &str| {
        catalog
            .catalog()
            .scopes
            .iter()
            .find(|scope| {
                scope.roles.iter().any(|role| {
                    catalog
                        .role_tools(role.as_str())
                        .is_some_and(|tools| tools.contains(tool))
                })
            })
            .map_or_else(|| "support".to_owned(), |s| s.slug.to_string())
    };
    let tools: Vec<DemoTool> = catalog
        .catalog()
        .tools
        .iter()
        .map(|t| {
            let schema = &t.spec.input_schema;
            let template = schema["properties"]
                .as_object()
                .map(|props| {
                    props
                        .iter()
                        .map(|(k, p)| (k.clone(), valid_value(k, p)))
                        .collect()
                })
                .unwrap_or_default();
            DemoTool {
                name: t.spec.name.clone(),
                validator: compile_schema(schema).expect("demo schemas compile"),
                scope: scope_granting(&t.spec.name),
                numeric: numeric_args(schema),
                template,
            }
        })
        .collect();
    let mut sessions = BTreeMap::new();
    for scope in &catalog.catalog().scopes {
        let roles: Vec<&str> = scope.roles.iter().map(|r| r.as_str()).collect();
        let fresh = demo_session(scope.slug.as_str(), &roles, &catalog);
        let mut primed = fresh.clone();
        // Twice, so a tool whose prerequisites come later in catalog order succeeds too.
        for _ in 0..2 {
            for tool in tools.iter().filter(|t| t.scope == scope.slug.as_str()) {
                let mut decision =
                    decide_at_t0(&catalog, &primed, &tool.name, tool.template.clone());
                if let Decision::Allow(permit) = &mut decision {
                    primed.reserve(permit);
                    let note = permit.take_note();
                    primed
                        .record_success(&tool.name, note.outcome(Some(&json!({"eligible": true}))));
                }
            }
        }
        sessions.insert(scope.slug.to_string(), [fresh, primed]);
    }
    Demo {
        catalog,
        tools,
        sessions,
    }
});

fn parsed(text: String) -> Value {
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Numbers as JSON text can write them: past `f64`, past the exact decimal range, tiny,
/// negative zero, and ordinary ones.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec![
            "1e400",
            "-1e400",
            "1e-400",
            "-1e-400",
            "-0",
            "0.0",
            "5e2",
            "1E+308",
            "2e308",
            "4.9e-324",
            "1e-40",
            "1e99999",
            "-1e-99999",
            "500.0000001",
        ])
        .prop_map(|text| parsed(text.to_owned())),
        "-?[1-9][0-9]{0,59}".prop_map(parsed),
        "-?(0|[1-9][0-9]{0,29})\\.[0-9]{1,40}".prop_map(parsed),
        "-?[1-9](\\.[0-9]{1,12})?[eE][+-]?[0-9]{1,4}".prop_map(parsed),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(|f| json!(f)),
    ]
}

/// Strings: empty, long, any unicode, and ones shaped like the demo's ids and enums.
fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        prop::collection::vec(any::<char>(), 0..4000).prop_map(String::from_iter),
        "[COU]-[0-9]{4}",
        prop::sample::select(vec!["low", "high", "critical", "urgent", "", "\u{0}", "é"])
            .prop_map(str::to_owned),
        (1usize..20_000).prop_map(|n| "x".repeat(n)),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        string().prop_map(Value::String),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "customer_id", "order_id", "user_id", "email", "amount", "months", "days",
            "priority", "severity", "confirm", "token", "reason", "subject", "summary",
            "topic", "description", "skill", "instructions",
        ])
        .prop_map(str::to_owned),
        1 => any::<String>(),
    ]
}

/// Any JSON value of modest depth and width.
fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(6, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// A value nested up to 100 arrays and objects deep.
fn deep() -> impl Strategy<Value = Value> {
    (leaf(), prop::collection::vec(any::<bool>(), 1..=100)).prop_map(|(leaf, levels)| {
        levels.into_iter().fold(leaf, |inner, as_array| {
            if as_array {
                Value::Array(vec![inner])
            } else {
                json!({ "amount": inner })
            }
        })
    })
}

/// How the generated arguments are made for each tool.
#[derive(Debug, Clone)]
enum Shape {
    /// The tool's valid template (or nothing) with these entries set on top; an entry with
    /// an index sets one of the tool's own arguments, else the key given.
    Entries {
        from_template: bool,
        entries: Vec<(Option<prop::sample::Index>, String, Value)>,
    },
    /// The tool's valid template with one of its numeric arguments (if it has any)
    /// replaced: what bounds and caps read.
    Number {
        which: prop::sample::Index,
        number: Value,
    },
    /// JSON text with one key written several times; serde_json keeps the last.
    Duplicated { key: String, values: Vec<Value> },
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        4 => (
            any::<bool>(),
            prop::collection::vec(
                (
                    prop::option::of(any::<prop::sample::Index>()),
                    key(),
                    prop_oneof![3 => value(), 1 => deep()],
                ),
                0..6,
            ),
        )
            .prop_map(|(from_template, entries)| Shape::Entries { from_template, entries }),
        3 => (any::<prop::sample::Index>(), number())
            .prop_map(|(which, number)| Shape::Number { which, number }),
        2 => (key(), prop::collection::vec(prop_oneof![value(), number()], 2..4))
            .prop_map(|(key, values)| Shape::Duplicated { key, values }),
    ]
}

fn arguments_for(tool: &DemoTool, shape: &Shape) -> Arguments {
    match shape {
        Shape::Entries {
            from_template,
            entries,
        } => {
            let mut args = if *from_template {
                tool.template.clone()
            } else {
                Arguments::new()
            };
            let own: Vec<&String> = tool.template.keys().collect();
            for (which, key, value) in entries {
                let key = match which {
                    Some(which) if !own.is_empty() => which.get(&own).to_string(),
                    _ => key.clone(),
                };
                args.insert(key, value.clone());
            }
            args
        }
        Shape::Number { which, number } => {
            let mut args = tool.template.clone();
            if !tool.numeric.is_empty() {
                args.insert(which.get(&tool.numeric).clone(), number.clone());
            }
            args
        }
        Shape::Duplicated { key, values } => {
            let key = Value::String(key.clone()).to_string();
            let mut entries: Vec<String> = tool
                .template
                .iter()
                .map(|(k, v)| format!("{}: {v}", Value::String(k.clone())))
                .collect();
            entries.extend(values.iter().map(|v| format!("{key}: {v}")));
            let text = format!("{{{}}}", entries.join(", "));
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
        }
    }
}

/// Longest rule a denial may carry, however large the arguments: it goes to the agent and
/// into the audit log.
const MAX_RULE: usize = 2048;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_json_arguments_always_get_a_decision_for_every_demo_tool(shape in shape(), primed in any::<bool>()) {
        let demo = &*DEMO;
        for tool in &demo.tools {
            let args = arguments_for(tool, &shape);
            let instance = Value::Object(args.clone());
            let valid = tool.validator.is_valid(&instance);
            let first_error = tool.validator.iter_errors(&instance).next().map(|e| e.to_string());
            prop_assert_eq!(valid, first_error.is_none(), "{}: {:?}", tool.name, first_error);
            prop_assert_eq!(valid, tool.validator.validate(&instance).is_ok(), "{}", tool.name);

            let mut session = demo.sessions[&tool.scope][usize::from(primed)].clone();
            let mut decision = decide_at_t0(&demo.catalog, &session, &tool.name, args.clone());
            match &mut decision {
                Decision::Deny(refused) => {
                    let text = refused.to_string();
                    prop_assert!(refused.rule.chars().count() <= MAX_RULE, "{}: {} chars", tool.name, refused.rule.chars().count());
                    prop_assert!(text.starts_with(refused.code.label()), "{text}");
                    prop_assert_ne!(refused.code, DenyCode::ToolUnusable, "{}", tool.name);
                    prop_assert_ne!(refused.code, DenyCode::InternalError, "{}", tool.name);
                    if !valid {
                        prop_assert_eq!(refused.code, DenyCode::InvalidArguments, "{}: {}", tool.name, text);
                    }
                }
                Decision::Allow(permit) => {
                    prop_assert!(valid, "{} allowed arguments its schema rejects", tool.name);
                    prop_assert_eq!(permit.tool(), tool.name.as_str());
                    prop_assert_eq!(permit.arguments(), &args, "the upstream gets what was decided on");
                    let before = session.usage.clone();
                    session.reserve(permit);
                    for (name, usage) in before.entries() {
                        prop_assert!(session.usage.count(name) >= usage.count);
                        for arg in usage.sums.keys() {
                            prop_assert!(session.usage.sum(name, arg) >= before.sum(name, arg));
                        }
                    }
                    let note = permit.take_note();
                    session.record_success(&tool.name, note.outcome(Some(&instance)));
                    prop_assert!(session.usage.has_succeeded(&tool.name));
                }
                Decision::Hold(hold) => {
                    prop_assert!(valid, "{} held arguments its schema rejects", tool.name);
                    prop_assert_eq!(hold.permit().arguments(), &args, "a hold keeps the exact call");
                    prop_assert!(hold.rule().contains("approval"), "{}", hold.rule());
                }
            }
        }
    }
}

#[test]
fn a_schema_error_under_a_huge_key_names_a_bounded_place() {
    // An upstream schema that types the values of arbitrary keys: the failing place is the
    // key the agent chose, which may be as long as the 64 KiB the gateway accepts.
    let draft = CatalogDraft {
        tools: vec![tool(
            "tally",
            json!({"type": "object", "additionalProperties": {"type": "integer"}}),
        )],
        skills: vec![skill("tallying", &["tally"])],
        roles: vec![role("tallier", &["tallying"], Vec::new())],
        scopes: vec![Scope {
            slug: slug("edge"),
            description: String::new(),
            roles: vec![slug("tallier")],
            guardrails: Vec::new(),
        }],
    };
    let catalog = CompiledCatalog::compile(draft.into_catalog(vec![upstream()]));
    let session = session("edge", &["tallier"]);
    let key = "k".repeat(60_000);
    let decision = call(
        &catalog,
        &session,
        "tally",
        &json!({ key: "not an integer" }).to_string(),
    );
    assert_eq!(code(&decision), Some(DenyCode::InvalidArguments));
    let length = denial(&decision).rule.chars().count();
    assert!(length <= MAX_RULE, "the rule is {length} characters");
}

#[test]
fn a_quarantined_tool_is_denied_as_quarantined_and_no_longer_listed_as_available() {
    let upstream = Upstream {
        name: slug(DEMO_UPSTREAM),
        kind: UpstreamKind::Stdio {
            command: "skillgate".to_owned(),
            args: vec!["demo-upstream".to_owned()],
        },
    };
    let mut catalog = demo_catalog().into_catalog(vec![upstream]);
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
