//! Limits as data: how they are validated on save, rendered for agents, and stored as JSON.

use crate::policy_common;

use policy_common::*;
use rust_decimal::Decimal;
use serde_json::json;
use skillgate_core::model::{
    ArgCheck, CatalogError, CmpOp, Limit, MAX_ROLE_DESCRIPTION, ResultCheck, Scope,
};

/// `tool` only after a success of `after` for the same `order_id` that answered `eligible: true`.
fn bound_requires(tool: &str, after: &str) -> Limit {
    Limit::Requires {
        tool: tool.into(),
        after: vec![after.into()],
        same_args: vec!["order_id".into()],
        result: Some(ResultCheck {
            pointer: "/eligible".into(),
            equals: json!(true),
        }),
    }
}

fn with_limit(limit: Limit) -> Result<(), CatalogError> {
    let catalog = catalog();
    let mut role = catalog.role("small-refunds").unwrap().clone();
    role.limits = vec![limit];
    catalog.validate_role(&role)
}

#[test]
fn the_synthetic_catalog_is_valid_apart_from_its_deliberately_loose_tool() {
    let mut catalog = catalog();
    assert_eq!(
        catalog.validate(),
        Err(CatalogError::UnknownArgument {
            tool: "loose_refund".into(),
            arg: "amount".into()
        })
    );
    catalog.roles[0]
        .limits
        .retain(|l| l.tool() != "loose_refund");
    assert_eq!(catalog.validate(), Ok(()));
}

#[test]
fn limits_that_make_no_sense_are_refused_naming_the_problem() {
    let cases = [
        (
            bound("refund_everything", "amount", CmpOp::Le, 5),
            CatalogError::UnknownTool("refund_everything".into()),
            "unknown tool `refund_everything`",
        ),
        (
            bound("refund", "amonut", CmpOp::Le, 5),
            CatalogError::UnknownArgument {
                tool: "refund".into(),
                arg: "amonut".into(),
            },
            "tool `refund` has no argument `amonut`",
        ),
        (
            bound("refund", "reason", CmpOp::Le, 5),
            CatalogError::NotNumeric {
                tool: "refund".into(),
                arg: "reason".into(),
            },
            "`refund.reason` is not a number",
        ),
        (
            sum_cap("refund", "reason", 5),
            CatalogError::NotNumeric {
                tool: "refund".into(),
                arg: "reason".into(),
            },
            "cannot be bounded or summed",
        ),
        (
            Limit::ArgBound {
                tool: "refund".into(),
                arg: "amount".into(),
                check: ArgCheck::MaxLength { max: 3 },
            },
            CatalogError::NotString {
                tool: "refund".into(),
                arg: "amount".into(),
            },
            "`refund.amount` is not a string",
        ),
        (
            Limit::ArgBound {
                tool: "note".into(),
                arg: "channel".into(),
                check: ArgCheck::OneOf { values: vec![] },
            },
            CatalogError::EmptyLimit {
                tool: "note".into(),
                what: "no allowed values",
            },
            "no allowed values",
        ),
        (
            bound("ticket", "amount", CmpOp::Le, 5),
            CatalogError::ToolNotGranted {
                role: slug("small-refunds"),
                tool: "ticket".into(),
            },
            "does not grant `ticket`",
        ),
        (
            requires("refund", &["teleport"]),
            CatalogError::UnknownTool("teleport".into()),
            "unknown tool `teleport`",
        ),
        (
            requires("refund", &["refund"]),
            CatalogError::RequiresItself {
                tool: "refund".into(),
            },
            "cannot require itself",
        ),
        (
            requires("refund", &[]),
            CatalogError::EmptyLimit {
                tool: "refund".into(),
                what: "no required tools",
            },
            "no required tools",
        ),
        (
            sum_cap("refund", "amount", -1),
            CatalogError::NegativeCap {
                tool: "refund".into(),
            },
            "must not be negative",
        ),
    ];
    for (limit, expected, message) in cases {
        let err = with_limit(limit.clone()).unwrap_err();
        assert_eq!(err, expected, "{limit}");
        assert!(err.to_string().contains(message), "{err}");
    }
}

#[test]
fn sensible_limits_of_every_kind_are_accepted() {
    let ok = [
        bound("refund", "amount", CmpOp::Gt, 0),
        sum_cap("refund", "amount", 1000),
        count_cap("refund", 3),
        requires("refund", &["check"]),
        // A prerequisite may be a tool of another role: success is tracked per session.
        requires("refund", &["ticket"]),
        Limit::ArgBound {
            tool: "note".into(),
            arg: "text".into(),
            check: ArgCheck::MaxLength { max: 280 },
        },
        Limit::ArgBound {
            tool: "note".into(),
            arg: "channel".into(),
            check: ArgCheck::OneOf {
                values: vec![json!("email")],
            },
        },
    ];
    for limit in ok {
        assert_eq!(with_limit(limit.clone()), Ok(()), "{limit}");
    }
}

#[test]
fn roles_and_scopes_with_dangling_or_oversized_parts_are_refused() {
    let catalog = catalog();
    let mut role = catalog.role("big-refunds").unwrap().clone();
    role.description = "x".repeat(MAX_ROLE_DESCRIPTION + 1);
    assert_eq!(
        catalog.validate_role(&role),
        Err(CatalogError::DescriptionTooLong(501))
    );
    role.description = "é".repeat(MAX_ROLE_DESCRIPTION);
    assert_eq!(
        catalog.validate_role(&role),
        Ok(()),
        "the bound counts characters, not bytes"
    );
    role.skills.push(slug("juggling"));
    assert_eq!(
        catalog.validate_role(&role),
        Err(CatalogError::UnknownSkill(slug("juggling")))
    );
    role.skills = vec![slug("refunds"), slug("refunds")];
    assert_eq!(
        catalog.validate_role(&role),
        Err(CatalogError::Duplicate("refunds".into()))
    );
    role.skills = vec![slug("refunds")];
    role.title = "  ".into();
    assert_eq!(
        catalog.validate_role(&role),
        Err(CatalogError::Empty("role title"))
    );

    let scope = Scope {
        slug: slug("x"),
        description: String::new(),
        roles: vec![slug("ghost")],
        guardrails: Vec::new(),
    };
    assert_eq!(
        catalog.validate_scope(&scope),
        Err(CatalogError::UnknownRole(slug("ghost")))
    );
    let mut skill = catalog.skill("refunds").unwrap().skill.clone();
    skill.tools.push("teleport".into());
    assert_eq!(
        catalog.validate_skill(&skill),
        Err(CatalogError::UnknownTool("teleport".into()))
    );
}

#[test]
fn every_limit_renders_as_one_readable_sentence() {
    let text = |max| Limit::ArgBound {
        tool: "note".into(),
        arg: "text".into(),
        check: ArgCheck::MaxLength { max },
    };
    let cases = [
        (
            bound("process_refund", "amount", CmpOp::Le, 500),
            "Each call to `process_refund` must have `amount` at most 500.",
        ),
        (
            bound("process_refund", "amount", CmpOp::Lt, 500),
            "Each call to `process_refund` must have `amount` less than 500.",
        ),
        (
            bound("process_refund", "amount", CmpOp::Ge, 1),
            "Each call to `process_refund` must have `amount` at least 1.",
        ),
        (
            bound("process_refund", "amount", CmpOp::Gt, 0),
            "Each call to `process_refund` must have `amount` greater than 0.",
        ),
        (
            bound("offer_extension", "months", CmpOp::Eq, 1),
            "Each call to `offer_extension` must have `months` exactly 1.",
        ),
        (
            Limit::ArgBound {
                tool: "create_ticket".into(),
                arg: "priority".into(),
                check: ArgCheck::OneOf {
                    values: vec![json!("low"), json!("normal"), json!("high")],
                },
            },
            "Each call to `create_ticket` must have `priority` set to one of \"low\", \"normal\" or \"high\".",
        ),
        (
            text(280),
            "Each call to `note` must have `text` of at most 280 characters.",
        ),
        (
            sum_cap("process_refund", "amount", 1000),
            "The `amount` of all allowed `process_refund` calls in a session must add up to at most 1000.",
        ),
        (
            count_cap("process_refund", 3),
            "`process_refund` may be called at most 3 times per session.",
        ),
        (
            count_cap("delete_user_account", 1),
            "`delete_user_account` may be called at most once per session.",
        ),
        (
            requires("flag_account", &["investigate_account_activity"]),
            "`flag_account` may run only after `investigate_account_activity` has succeeded earlier in the same session.",
        ),
        (
            requires(
                "process_refund",
                &["create_ticket", "offer_extension", "apply_service_credit"],
            ),
            "`process_refund` may run only after `create_ticket`, `offer_extension` and `apply_service_credit` have succeeded earlier in the same session.",
        ),
        (
            bound_requires("process_refund", "check_refund_eligibility"),
            "`process_refund` may run only after `check_refund_eligibility` has succeeded earlier in the same session for the same `order_id` with a result whose `/eligible` is true.",
        ),
    ];
    for (limit, sentence) in cases {
        assert_eq!(limit.sentence(), sentence);
    }
}

#[test]
fn limits_display_in_the_compact_notation_admins_write() {
    let cases = [
        (
            bound("process_refund", "amount", CmpOp::Le, 500),
            "process_refund.amount <= 500",
        ),
        (
            bound("process_refund", "amount", CmpOp::Gt, 0),
            "process_refund.amount > 0",
        ),
        (
            sum_cap("process_refund", "amount", 1000),
            "sum(process_refund.amount) <= 1000",
        ),
        (count_cap("process_refund", 3), "count(process_refund) <= 3"),
        (
            requires("process_refund", &["create_ticket", "offer_extension"]),
            "process_refund requires create_ticket, offer_extension",
        ),
        (
            bound_requires("process_refund", "check_refund_eligibility"),
            "process_refund requires check_refund_eligibility (same order_id) where /eligible == true",
        ),
    ];
    for (limit, notation) in cases {
        assert_eq!(limit.to_string(), notation);
    }
}

#[test]
fn limits_are_stored_as_tagged_json_with_exact_decimal_strings() {
    let limit = Limit::ArgBound {
        tool: "process_refund".into(),
        arg: "amount".into(),
        check: ArgCheck::Compare {
            op: CmpOp::Le,
            value: "500.0000001".parse::<Decimal>().unwrap(),
        },
    };
    let json = serde_json::to_value(&limit).unwrap();
    assert_eq!(
        json,
        json!({"kind": "arg_bound", "tool": "process_refund", "arg": "amount", "check": "compare", "op": "<=", "value": "500.0000001"})
    );
    assert_eq!(serde_json::from_value::<Limit>(json).unwrap(), limit);
    let all = [
        sum_cap("t", "a", 10),
        count_cap("t", 2),
        requires("t", &["u"]),
        bound_requires("t", "u"),
    ];
    for limit in all {
        let text = serde_json::to_string(&limit).unwrap();
        assert_eq!(
            serde_json::from_str::<Limit>(&text).unwrap(),
            limit,
            "{text}"
        );
    }
    assert_eq!(
        serde_json::to_value(count_cap("t", 2)).unwrap(),
        json!({"kind": "count_cap", "tool": "t", "max": 2})
    );
}

#[test]
fn a_limit_written_with_a_json_number_keeps_its_digits() {
    let limit: Limit =
        serde_json::from_str(r#"{"kind": "sum_cap", "tool": "t", "arg": "a", "max": 1000.50}"#)
            .unwrap();
    assert_eq!(
        limit,
        Limit::SumCap {
            tool: "t".into(),
            arg: "a".into(),
            max: "1000.50".parse().unwrap()
        }
    );
}

#[test]
fn an_unknown_limit_kind_does_not_deserialize() {
    let err = serde_json::from_value::<Limit>(json!({"kind": "vibes", "tool": "t"})).unwrap_err();
    assert!(err.to_string().contains("vibes"), "{err}");
}
