//! Per-call bounds on nested arguments and array items: a limit's `arg` may be a JSON
//! Pointer whose `*` steps stand for every item of an array (`/lines/*/amount`). Validated
//! against the schema when the catalog is saved; every value it names must pass, and what
//! cannot be read fails closed.

use crate::policy_common;

use policy_common::*;
use serde_json::json;
use skillgate_core::model::{ArgCheck, Catalog, CatalogDraft, CatalogError, CmpOp, Limit, Scope};
use skillgate_core::policy::{CompiledCatalog, DenyCode};

fn bound(arg: &str, check: ArgCheck) -> Limit {
    Limit::ArgBound {
        tool: "batch".into(),
        arg: arg.into(),
        check,
    }
}

fn amount_at_most_500() -> Limit {
    bound(
        "/lines/*/amount",
        ArgCheck::Compare {
            op: CmpOp::Le,
            value: 500.into(),
        },
    )
}

fn paths_under_root() -> Limit {
    bound(
        "/files/*/path",
        ArgCheck::PathUnder {
            root: "/srv/data".into(),
        },
    )
}

/// One tool, `batch(lines[{amount}], files[{path}], config{callback{url}})`.
fn batch_catalog(limits: Vec<Limit>) -> Catalog {
    let schema = json!({
        "type": "object",
        "properties": {
            "lines": {"type": "array", "items": {"type": "object", "properties": {"amount": {"type": "number"}}}},
            "files": {"type": "array", "items": {"type": "object", "properties": {"path": {"type": "string"}}}},
            "config": {"type": "object", "properties": {"callback": {"type": "object", "properties": {"url": {"type": "string"}}}}}
        }
    });
    CatalogDraft {
        tools: vec![tool("batch", schema)],
        skills: vec![skill("batching", &["batch"])],
        roles: vec![role("batcher", &["batching"], limits)],
        scopes: vec![Scope {
            slug: slug("front"),
            description: String::new(),
            roles: vec![slug("batcher")],
            guardrails: Vec::new(),
        }],
    }
    .into_catalog(vec![upstream()])
}

fn compiled_with(limits: Vec<Limit>) -> CompiledCatalog {
    let catalog = batch_catalog(limits);
    assert_eq!(catalog.validate(), Ok(()));
    CompiledCatalog::compile(catalog)
}

#[test]
fn a_bound_on_every_item_refuses_the_call_when_one_item_fails_and_names_that_item() {
    let catalog = compiled_with(vec![amount_at_most_500(), paths_under_root()]);
    let session = session("front", &["batcher"]);
    let decision = call(
        &catalog,
        &session,
        "batch",
        r#"{"lines": [{"amount": 20}, {"amount": 500.01}, {"amount": 3}]}"#,
    );
    assert_eq!(decision.deny_code(), Some(DenyCode::GovernanceViolation));
    assert!(
        denial(&decision)
            .rule
            .contains("`/lines/1/amount` = 500.01"),
        "{}",
        denial(&decision).rule
    );
    let decision = call(
        &catalog,
        &session,
        "batch",
        r#"{"lines": [], "files": [{"path": "out/a.txt"}, {"path": "/etc/cron.d/x"}]}"#,
    );
    assert!(
        denial(&decision)
            .rule
            .contains("`/files/1/path` resolves outside"),
        "{}",
        denial(&decision).rule
    );
}

#[test]
fn a_bound_on_every_item_passes_when_all_pass_and_when_there_are_none() {
    let catalog = compiled_with(vec![amount_at_most_500(), paths_under_root()]);
    let session = session("front", &["batcher"]);
    for good in [
        r#"{"lines": [{"amount": 500}, {"amount": 0.5}], "files": [{"path": "/srv/data/a"}, {"path": "b/c.txt"}]}"#,
        r#"{"lines": [], "files": []}"#,
    ] {
        permit(&call(&catalog, &session, "batch", good));
    }
}

#[test]
fn a_nested_value_that_is_missing_or_not_an_array_fails_closed() {
    let catalog = compiled_with(vec![
        amount_at_most_500(),
        bound(
            "/config/callback/url",
            ArgCheck::UrlHost {
                hosts: vec!["*".into()],
            },
        ),
    ]);
    let session = session("front", &["batcher"]);
    for (bad, why) in [
        (
            r#"{"lines": [{"amount": 1}, {}], "config": {"callback": {"url": "https://hooks.example.com/"}}}"#,
            "`/lines/1/amount` is missing",
        ),
        (
            r#"{"lines": [], "config": {"callback": {"url": "http://127.0.0.1.nip.io/"}}}"#,
            "`/config/callback/url` names a loopback host",
        ),
        (r#"{"lines": []}"#, "`/config/callback/url` is missing"),
    ] {
        let decision = call(&catalog, &session, "batch", bad);
        assert_eq!(
            decision.deny_code(),
            Some(DenyCode::GovernanceViolation),
            "{bad}"
        );
        assert!(
            denial(&decision).rule.contains(why),
            "{bad}: {}",
            denial(&decision).rule
        );
    }
    // Where the schema does not say `lines` is an array, the limit still refuses a `*` on
    // something else.
    let mut untyped = batch_catalog(vec![amount_at_most_500()]);
    untyped.tools[0].spec.input_schema = json!({
        "type": "object",
        "properties": {"lines": {"items": {"type": "object", "properties": {"amount": {"type": "number"}}}}}
    });
    let untyped = CompiledCatalog::compile(untyped);
    let decision = call(&untyped, &session, "batch", r#"{"lines": {"amount": 1}}"#);
    assert_eq!(decision.deny_code(), Some(DenyCode::GovernanceViolation));
    assert!(
        denial(&decision).rule.contains("`/lines` is not an array"),
        "{}",
        denial(&decision).rule
    );
}

#[test]
fn a_pointer_the_schema_does_not_have_is_refused_when_the_catalog_is_saved() {
    let catalog = batch_catalog(Vec::new());
    let mut role = catalog.role("batcher").unwrap().clone();
    for (arg, check) in [
        ("/lines/*/price", ArgCheck::MaxLength { max: 3 }),
        ("/config/*/url", ArgCheck::NoShell),
        ("/files/*", ArgCheck::NoShell),
    ] {
        role.limits = vec![bound(arg, check)];
        assert!(
            matches!(
                catalog.validate_role(&role),
                Err(CatalogError::UnknownArgument { .. } | CatalogError::NotString { .. })
            ),
            "{arg}: {:?}",
            catalog.validate_role(&role)
        );
    }
    role.limits = vec![bound("/lines/*/amount", ArgCheck::NoShell)];
    assert!(matches!(
        catalog.validate_role(&role),
        Err(CatalogError::NotString { .. })
    ));
}
