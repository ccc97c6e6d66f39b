//! A small synthetic catalog shared by the policy tests, and the demo catalog.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{Value, json};
use skillgate_core::demo::catalog::{DEMO_UPSTREAM, demo_catalog};
use skillgate_core::model::{
    ArgCheck, Catalog, CatalogDraft, CatalogTool, CmpOp, Limit, Role, Scope, Skill, ToolSpec,
    Upstream, UpstreamKind,
};
use skillgate_core::policy::{
    Arguments, CallRequest, CompiledCatalog, Decision, Denial, Permit, SessionView, decide,
};
use skillgate_core::slug::Slug;

pub fn slug(text: &str) -> Slug {
    Slug::parse(text).unwrap()
}

pub fn tool(name: &str, input_schema: Value) -> CatalogTool {
    CatalogTool {
        upstream: slug("up"),
        spec: ToolSpec {
            name: name.to_owned(),
            description: format!("{name} does a thing"),
            input_schema,
            output_schema: None,
            annotations: None,
            sensitive_args: Vec::new(),
        },
        quarantine: None,
    }
}

pub fn no_args() -> Value {
    json!({"type": "object", "additionalProperties": false})
}

pub fn skill(name: &str, tools: &[&str]) -> Skill {
    Skill {
        slug: slug(name),
        description: format!("{name} skill"),
        instructions: format!("# {name}\n\nDo it well."),
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        resources: Vec::new(),
        frontmatter_extra: Default::default(),
    }
}

pub fn role(name: &str, skills: &[&str], limits: Vec<Limit>) -> Role {
    Role {
        slug: slug(name),
        title: name.to_owned(),
        description: format!("The {name} role."),
        instructions: "Follow the skills.".to_owned(),
        skills: skills.iter().map(|s| slug(s)).collect(),
        limits,
    }
}

pub fn bound(tool: &str, arg: &str, op: CmpOp, value: i64) -> Limit {
    Limit::ArgBound {
        tool: tool.to_owned(),
        arg: arg.to_owned(),
        check: ArgCheck::Compare {
            op,
            value: value.into(),
        },
    }
}

pub fn sum_cap(tool: &str, arg: &str, max: i64) -> Limit {
    Limit::SumCap {
        tool: tool.to_owned(),
        arg: arg.to_owned(),
        max: max.into(),
    }
}

pub fn count_cap(tool: &str, max: u32) -> Limit {
    Limit::CountCap {
        tool: tool.to_owned(),
        max,
    }
}

pub fn requires(tool: &str, after: &[&str]) -> Limit {
    Limit::Requires {
        tool: tool.to_owned(),
        after: after.iter().map(|t| (*t).to_owned()).collect(),
        same_args: Vec::new(),
        result: None,
    }
}

/// Roles: `small-refunds` (refund <= 500, sum <= 1000, count <= 3, after `check`; notes
/// with a length bound and a one-of), `big-refunds` (refund <= 5000), `retention`
/// (refund after ticket, extend and credit), `outsider` (lookup, in another scope).
pub fn catalog() -> Catalog {
    let refund_schema = json!({
        "type": "object",
        "properties": {"amount": {"type": "number"}, "reason": {"type": "string"}},
        "required": ["amount"],
        "additionalProperties": false
    });
    let note_schema = json!({
        "type": "object",
        "properties": {"text": {"type": "string"}, "channel": {"type": "string"}, "rank": {"type": "number"}}
    });
    let draft = CatalogDraft {
        tools: vec![
            tool("refund", refund_schema),
            // A schema that types nothing: the limits on it must still fail closed.
            tool("loose_refund", json!({"type": "object"})),
            tool("check", no_args()),
            tool("ticket", no_args()),
            tool("extend", no_args()),
            tool("credit", no_args()),
            tool("lookup", no_args()),
            tool("note", note_schema),
        ],
        skills: vec![
            skill("refunds", &["check", "refund"]),
            skill("notes", &["note", "loose_refund"]),
            skill("retention", &["ticket", "extend", "credit", "refund"]),
            skill("lookup", &["lookup"]),
        ],
        roles: vec![
            role(
                "small-refunds",
                &["refunds", "notes"],
                vec![
                    sum_cap("refund", "amount", 1000),
                    count_cap("refund", 3),
                    bound("refund", "amount", CmpOp::Le, 500),
                    requires("refund", &["check"]),
                    bound("loose_refund", "amount", CmpOp::Le, 500),
                    Limit::ArgBound {
                        tool: "note".into(),
                        arg: "text".into(),
                        check: ArgCheck::MaxLength { max: 10 },
                    },
                    Limit::ArgBound {
                        tool: "note".into(),
                        arg: "channel".into(),
                        check: ArgCheck::OneOf {
                            values: vec![json!("email"), json!("phone")],
                        },
                    },
                    Limit::ArgBound {
                        tool: "note".into(),
                        arg: "rank".into(),
                        check: ArgCheck::OneOf {
                            values: vec![json!(1), json!(2.5)],
                        },
                    },
                ],
            ),
            role(
                "big-refunds",
                &["refunds"],
                vec![bound("refund", "amount", CmpOp::Le, 5000)],
            ),
            role(
                "retention",
                &["retention"],
                vec![requires("refund", &["ticket", "extend", "credit"])],
            ),
            role("outsider", &["lookup"], Vec::new()),
        ],
        scopes: vec![
            Scope {
                slug: slug("front"),
                description: String::new(),
                roles: vec![
                    slug("small-refunds"),
                    slug("big-refunds"),
                    slug("retention"),
                ],
                guardrails: Vec::new(),
            },
            Scope {
                slug: slug("ops"),
                description: String::new(),
                roles: vec![slug("outsider")],
                guardrails: Vec::new(),
            },
        ],
    };
    draft.into_catalog(vec![upstream()])
}

pub fn upstream() -> Upstream {
    Upstream {
        name: slug("up"),
        kind: UpstreamKind::Stdio {
            command: "up".to_owned(),
            args: Vec::new(),
        },
    }
}

pub fn compiled() -> CompiledCatalog {
    CompiledCatalog::compile(catalog())
}

pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap()
}

pub const SESSION: &str = "s-1";
pub const KEY: &str = "key-1";

/// A session in `scope` that learned `roles` in this order, expiring an hour after [`t0`].
pub fn session(scope: &str, roles: &[&str]) -> SessionView {
    let mut session = SessionView::new(SESSION, KEY, slug(scope), t0() + Duration::hours(1));
    for role in roles {
        session.learn(slug(role), Vec::new());
    }
    session
}

/// Parses JSON text into call arguments, so numbers keep the digits written.
pub fn args(text: &str) -> Arguments {
    match serde_json::from_str(text).unwrap() {
        Value::Object(map) => map,
        other => panic!("call arguments are an object, not {other}"),
    }
}

/// Decides a call at [`t0`] with the arguments given as JSON text, so numbers keep their digits.
pub fn call(catalog: &CompiledCatalog, session: &SessionView, tool: &str, text: &str) -> Decision {
    decide_at_t0(catalog, session, tool, args(text))
}

/// Decides a call at [`t0`] with arguments already parsed.
pub fn decide_at_t0(
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

/// Decides, and on allow reserves and records a success without a structured result, as
/// the MCP layer would.
pub fn call_and_run(
    catalog: &CompiledCatalog,
    session: &mut SessionView,
    tool: &str,
    text: &str,
) -> Decision {
    call_and_succeed(catalog, session, tool, text, None)
}

/// Decides, and on allow reserves the permit's usage and records the success the upstream
/// answered with `result`, through the permit's own success note.
pub fn call_and_succeed(
    catalog: &CompiledCatalog,
    session: &mut SessionView,
    tool: &str,
    text: &str,
    result: Option<&Value>,
) -> Decision {
    let mut decision = call(catalog, session, tool, text);
    if let Decision::Allow(permit) = &mut decision {
        session.reserve(permit);
        let note = permit.take_note();
        session.record_success(tool, note.outcome(result));
    }
    decision
}

/// The denial, or a test failure naming what was allowed.
pub fn denial(decision: &Decision) -> &Denial {
    match decision {
        Decision::Deny(denial) => denial,
        Decision::Allow(permit) => panic!("expected a denial, got {permit:?}"),
        Decision::Hold(hold) => panic!("expected a denial, got a hold: {}", hold.rule()),
    }
}

/// The permit, or a test failure quoting the denial.
pub fn permit(decision: &Decision) -> &Permit {
    match decision {
        Decision::Allow(permit) => permit,
        Decision::Deny(denial) => panic!("expected an allow, got {denial}"),
        Decision::Hold(hold) => panic!("expected an allow, got a hold: {}", hold.rule()),
    }
}

/// What a failing assertion prints: the denial as an agent reads it, or the permit.
pub fn shown(decision: &Decision) -> String {
    match decision {
        Decision::Deny(denial) => denial.to_string(),
        Decision::Allow(permit) => format!("allowed: {permit:?}"),
        Decision::Hold(hold) => format!("held: {}", hold.rule()),
    }
}

/// The demo catalog with its stdio upstream, before compiling (to change a tool first).
pub fn demo_uncompiled() -> Catalog {
    let upstream = Upstream {
        name: slug(DEMO_UPSTREAM),
        kind: UpstreamKind::Stdio {
            command: "skillgate".to_owned(),
            args: vec!["demo-upstream".to_owned()],
        },
    };
    demo_catalog().into_catalog(vec![upstream])
}

/// The demo catalog, compiled.
pub fn demo() -> CompiledCatalog {
    CompiledCatalog::compile(demo_uncompiled())
}

/// A session of `scope` that learned `roles` of the demo catalog.
pub fn demo_session(scope: &str, roles: &[&str], catalog: &CompiledCatalog) -> SessionView {
    let mut session = session(scope, &[]);
    for role in roles {
        session.learn(slug(role), catalog.skill_versions_of(role));
    }
    session
}
