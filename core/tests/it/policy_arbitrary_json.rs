//! `decide` against arbitrary JSON: every demo tool gets a decision for any arguments, a
//! denial's rule stays bounded however large they are, and what is allowed or held is
//! exactly what its schema accepts.

use crate::policy_common;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use policy_common::*;
use proptest::prelude::*;
use serde_json::{Value, json};
use skillgate_core::model::{CatalogDraft, Scope};
use skillgate_core::policy::{
    Arguments, CompiledCatalog, Decision, DenyCode, SessionView, compile_schema,
};

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
    assert_eq!(decision.deny_code(), Some(DenyCode::InvalidArguments));
    let length = denial(&decision).rule.chars().count();
    assert!(length <= MAX_RULE, "the rule is {length} characters");
}
