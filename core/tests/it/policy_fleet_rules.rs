//! Fleet rules (`arg_rule`): one limit that protects the arguments of many tools, selected
//! by a property-name glob or by the `format` their schema declares, at any depth, as a
//! role's limit (its own tools) or a scope's guardrail (every call of its sessions).

use crate::policy_common;

use policy_common::*;
use serde_json::json;
use skillgate_core::model::{ArgCheck, Catalog, CatalogDraft, CatalogError, Limit, Scope};
use skillgate_core::policy::{CompiledCatalog, DenyCode};

fn fleet(tools: &str, name: Option<&str>, format: Option<&str>, check: ArgCheck) -> Limit {
    Limit::ArgRule {
        tools: tools.into(),
        name: name.map(str::to_owned),
        format: format.map(str::to_owned),
        check,
    }
}

fn public_hosts_only() -> ArgCheck {
    ArgCheck::UrlHost {
        hosts: vec!["*".into()],
    }
}

/// Three tools of one role: `fetch(url: uri)`, `crm_sync(config{callbackUrl}, retries)`,
/// `crm_export(targets[{href: uri}], note)`; the scope `front` may carry `guardrails`.
fn fleet_catalog(limits: Vec<Limit>, guardrails: Vec<Limit>) -> Catalog {
    let fetch = json!({
        "type": "object",
        "properties": {"url": {"type": "string", "format": "uri"}}
    });
    let sync = json!({
        "type": "object",
        "properties": {
            "config": {"type": "object", "properties": {"callbackUrl": {"type": "string"}}},
            "retries": {"type": "integer"}
        }
    });
    let export = json!({
        "type": "object",
        "properties": {
            "targets": {"type": "array", "items": {"type": "object", "properties": {
                "href": {"type": "string", "format": "uri"}
            }}},
            "note": {"type": "string"}
        }
    });
    CatalogDraft {
        tools: vec![
            tool("fetch", fetch),
            tool("crm_sync", sync),
            tool("crm_export", export),
        ],
        skills: vec![skill("integrating", &["fetch", "crm_sync", "crm_export"])],
        roles: vec![role("integrator", &["integrating"], limits)],
        scopes: vec![Scope {
            slug: slug("front"),
            description: String::new(),
            roles: vec![slug("integrator")],
            guardrails,
        }],
    }
    .into_catalog(vec![upstream()])
}

fn compiled(limits: Vec<Limit>, guardrails: Vec<Limit>) -> CompiledCatalog {
    let catalog = fleet_catalog(limits, guardrails);
    assert_eq!(catalog.validate(), Ok(()));
    CompiledCatalog::compile(catalog)
}

#[test]
fn a_name_glob_guards_every_matching_argument_of_every_tool_at_any_depth() {
    let catalog = compiled(
        vec![fleet("*", Some("*url*"), None, public_hosts_only())],
        Vec::new(),
    );
    let session = session("front", &["integrator"]);
    let refused = [
        (
            "fetch",
            r#"{"url": "http://169.254.169.254/latest/meta-data/"}"#,
        ),
        (
            "crm_sync",
            r#"{"config": {"callbackUrl": "http://10.0.0.5/hook"}}"#,
        ),
    ];
    for (tool, arguments) in refused {
        let decision = call(&catalog, &session, tool, arguments);
        assert_eq!(
            decision.deny_code(),
            Some(DenyCode::GovernanceViolation),
            "{tool}: {}",
            shown(&decision)
        );
        assert!(
            denial(&decision)
                .rule
                .contains("every argument named like `*url*`"),
            "{}",
            denial(&decision).rule
        );
    }
    let callback = call(
        &catalog,
        &session,
        "crm_sync",
        r#"{"config": {"callbackUrl": "http://10.0.0.5/hook"}}"#,
    );
    assert!(
        denial(&callback).rule.contains("/config/callbackUrl"),
        "the rule names the place: {}",
        denial(&callback).rule
    );
    for (tool, arguments) in [
        ("fetch", r#"{"url": "https://example.com/page"}"#),
        (
            "crm_sync",
            r#"{"config": {"callbackUrl": "https://hooks.example.com/x"}, "retries": 3}"#,
        ),
        // Not selected: no matching name, or an argument left out.
        (
            "crm_export",
            r#"{"note": "see http://10.0.0.5/ for details"}"#,
        ),
        ("crm_sync", r#"{"retries": 2}"#),
    ] {
        let decision = call(&catalog, &session, tool, arguments);
        assert!(decision.is_allowed(), "{tool}: {}", shown(&decision));
    }
}

#[test]
fn a_format_selects_the_places_each_schema_declares_it_even_in_array_items() {
    let catalog = compiled(
        vec![fleet("*", None, Some("uri"), public_hosts_only())],
        Vec::new(),
    );
    let session = session("front", &["integrator"]);
    let decision = call(
        &catalog,
        &session,
        "crm_export",
        r#"{"targets": [{"href": "https://ok.example.com/"}, {"href": "http://127.0.0.1:8080/"}]}"#,
    );
    assert_eq!(decision.deny_code(), Some(DenyCode::GovernanceViolation));
    assert!(
        denial(&decision).rule.contains("/targets/1/href"),
        "{}",
        denial(&decision).rule
    );
    // `crm_sync`'s callback declares no format: this rule does not read it.
    let undeclared = call(
        &catalog,
        &session,
        "crm_sync",
        r#"{"config": {"callbackUrl": "http://10.0.0.5/hook"}}"#,
    );
    assert!(undeclared.is_allowed(), "{}", shown(&undeclared));
}

#[test]
fn a_tool_glob_binds_only_the_tools_it_matches_and_values_of_another_type_are_not_read() {
    let catalog = compiled(
        vec![fleet(
            "crm_*",
            Some("*"),
            None,
            ArgCheck::MaxLength { max: 10 },
        )],
        Vec::new(),
    );
    let session = session("front", &["integrator"]);
    let long = call(
        &catalog,
        &session,
        "crm_export",
        r#"{"note": "far longer than ten characters"}"#,
    );
    assert_eq!(long.deny_code(), Some(DenyCode::GovernanceViolation));
    // A number is not text: `max_length` leaves it alone, as it leaves `fetch` alone.
    let number = call(
        &catalog,
        &session,
        "crm_sync",
        r#"{"retries": 123456789012}"#,
    );
    assert!(number.is_allowed(), "{}", shown(&number));
    let other_tool = call(
        &catalog,
        &session,
        "fetch",
        r#"{"url": "https://example.com/a/very/long/path"}"#,
    );
    assert!(other_tool.is_allowed(), "{}", shown(&other_tool));
}

#[test]
fn a_scope_guardrail_fleet_rule_binds_every_call_of_its_sessions() {
    let catalog = compiled(
        Vec::new(),
        vec![fleet("*", Some("*url*"), Some("uri"), public_hosts_only())],
    );
    let session = session("front", &["integrator"]);
    let decision = call(
        &catalog,
        &session,
        "fetch",
        r#"{"url": "http://localhost:9000/admin"}"#,
    );
    assert_eq!(decision.deny_code(), Some(DenyCode::GovernanceViolation));
    let sentences = catalog.guardrail_sentences("front", None);
    assert_eq!(
        sentences,
        [
            "Each call to any tool must have every argument named like `*url*` and every argument of format `uri` an http or https URL on any public host, never a loopback, private, link-local or cloud metadata address."
        ]
    );
}

#[test]
fn a_fleet_rule_without_a_selector_or_tools_or_with_a_bad_check_is_refused() {
    for (limit, expected) in [
        (
            fleet("*", None, None, ArgCheck::NoShell),
            "no argument selector",
        ),
        (
            fleet(" ", Some("*cmd*"), None, ArgCheck::NoShell),
            "no tool glob",
        ),
        (
            fleet("*", Some(""), None, ArgCheck::NoShell),
            "an empty argument selector",
        ),
        (
            fleet(
                "*",
                Some("*url*"),
                None,
                ArgCheck::UrlHost { hosts: Vec::new() },
            ),
            "no allowed hosts",
        ),
    ] {
        let error = fleet_catalog(vec![limit], Vec::new())
            .validate()
            .unwrap_err();
        assert!(
            matches!(&error, CatalogError::EmptyLimit { what, .. } if what.contains(expected)),
            "{expected}: {error:?}"
        );
    }
    let relative_root = fleet(
        "*",
        Some("*path*"),
        None,
        ArgCheck::PathUnder {
            root: "data".into(),
        },
    );
    assert!(matches!(
        fleet_catalog(vec![relative_root], Vec::new()).validate(),
        Err(CatalogError::InvalidArgCheck { .. })
    ));
}
