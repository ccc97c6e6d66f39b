//! `decide` on synthetic catalogs of 15 to 225 tools: time per decision must stay flat.
//!
//! Each catalog has one role per 15 tools plus three small helper roles. The session has
//! learned the three helpers and then the role that grants the tool, so every size walks
//! the same learned roles and only the catalog grows.

use std::hint::black_box;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use rust_decimal::Decimal;
use serde_json::{Value, json};
use skillgate_core::model::{
    ArgCheck, CatalogDraft, CatalogTool, CmpOp, Limit, Role, Scope, Skill, ToolSpec, Upstream,
    UpstreamKind,
};
use skillgate_core::policy::{
    Arguments, CallRequest, CompiledCatalog, Decision, SessionView, decide,
};
use skillgate_core::slug::Slug;

const TOOLS_PER_ROLE: usize = 15;

fn slug(text: &str) -> Slug {
    Slug::parse(text).unwrap()
}

fn tool_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "customer_id": {"type": "string", "pattern": "^C-[0-9]{4}$"},
            "amount": {"type": "number", "exclusiveMinimum": 0},
            "reason": {"type": "string", "minLength": 1}
        },
        "required": ["customer_id", "amount", "reason"],
        "additionalProperties": false
    })
}

fn tool_name(group: usize, index: usize) -> String {
    format!("g{group}_tool_{index}")
}

fn catalog(tools: usize) -> CompiledCatalog {
    let groups = tools / TOOLS_PER_ROLE;
    let mut draft = CatalogDraft::default();
    for group in 0..groups {
        let names: Vec<String> = (0..TOOLS_PER_ROLE).map(|i| tool_name(group, i)).collect();
        for name in &names {
            draft.tools.push(CatalogTool {
                upstream: slug("bench"),
                spec: ToolSpec {
                    name: name.clone(),
                    description: "a tool".into(),
                    input_schema: tool_schema(),
                    output_schema: None,
                    annotations: None,
                    sensitive_args: vec![],
                },
                quarantine: None,
            });
        }
        draft.skills.push(Skill {
            slug: slug(&format!("skill-{group}")),
            description: "a skill".into(),
            instructions: "Do it.".into(),
            tools: names,
            resources: vec![],
            frontmatter_extra: Default::default(),
        });
        let guarded = tool_name(group, 0);
        draft.roles.push(Role {
            slug: slug(&format!("role-{group}")),
            title: "a role".into(),
            description: "a role".into(),
            instructions: "Do it.".into(),
            skills: vec![slug(&format!("skill-{group}"))],
            limits: vec![
                Limit::Requires {
                    tool: guarded.clone(),
                    after: vec![tool_name(group, 1)],
                    same_args: vec![],
                    result: None,
                },
                Limit::ArgBound {
                    tool: guarded.clone(),
                    arg: "amount".into(),
                    check: ArgCheck::Compare {
                        op: CmpOp::Le,
                        value: Decimal::from(500),
                    },
                },
                Limit::SumCap {
                    tool: guarded.clone(),
                    arg: "amount".into(),
                    max: Decimal::from(1_000_000_000),
                },
                Limit::CountCap {
                    tool: guarded,
                    max: 1_000_000,
                },
            ],
        });
    }
    for helper in 0..3 {
        draft.skills.push(Skill {
            slug: slug(&format!("helper-skill-{helper}")),
            description: "a helper".into(),
            instructions: "Help.".into(),
            tools: vec![tool_name(0, 10 + helper)],
            resources: vec![],
            frontmatter_extra: Default::default(),
        });
        draft.roles.push(Role {
            slug: slug(&format!("helper-{helper}")),
            title: "a helper".into(),
            description: "a helper".into(),
            instructions: "Help.".into(),
            skills: vec![slug(&format!("helper-skill-{helper}"))],
            limits: vec![],
        });
    }
    draft.scopes.push(Scope {
        slug: slug("all"),
        description: String::new(),
        roles: draft.roles.iter().map(|r| r.slug.clone()).collect(),
        guardrails: vec![],
    });
    let upstream = Upstream {
        name: slug("bench"),
        kind: UpstreamKind::Http {
            url: "http://bench.invalid".into(),
            ca_bundle: None,
            allow_plaintext: false,
        },
    };
    CompiledCatalog::compile(draft.into_catalog(vec![upstream]))
}

fn bench_decide(c: &mut Criterion) {
    let now = Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap();
    let arguments: Arguments = serde_json::from_str(
        r#"{"customer_id": "C-1001", "amount": 250.75, "reason": "late delivery"}"#,
    )
    .unwrap();
    let mut group = c.benchmark_group("decide");
    for tools in [15, 45, 105, 225] {
        let catalog = catalog(tools);
        let target = tools / TOOLS_PER_ROLE - 1;
        let mut session = SessionView::new("s", "k", slug("all"), now + chrono::Duration::hours(1));
        for helper in 0..3 {
            session.learn(slug(&format!("helper-{helper}")), vec![]);
        }
        session.learn(slug(&format!("role-{target}")), vec![]);
        session.record_success(&tool_name(target, 1), None);
        let tool = tool_name(target, 0);
        let request = |arguments: Arguments| CallRequest {
            session_id: "s",
            key_id: "k",
            tool: &tool,
            arguments,
            approved: None,
        };
        // Some usage already recorded, as in a session that has made calls.
        for _ in 0..3 {
            let Decision::Allow(permit) =
                decide(&catalog, Some(&session), request(arguments.clone()), now)
            else {
                panic!("the bench call is allowed")
            };
            session.reserve(&permit);
        }
        // The request owns its arguments: cloning them for each call happens outside the
        // measurement, as does dropping the permit that takes them.
        group.bench_with_input(BenchmarkId::new("allowed_call", tools), &tools, |b, _| {
            b.iter_batched(
                || request(arguments.clone()),
                |request| {
                    decide(
                        black_box(&catalog),
                        black_box(Some(&session)),
                        black_box(request),
                        now,
                    )
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench_decide
}
criterion_main!(benches);
