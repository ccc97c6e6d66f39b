//! Runs the guardrail evaluation corpus (`tests/data/guardrails/corpus.jsonl`) through the
//! real detectors and the real policy engine, and tallies what was caught and what was
//! flagged by mistake, per class, category and split.
//!
//! Shared by the `guardrail_eval` tests and the `guardrails` benchmark (which prints the
//! report for `make bench`), so both read the corpus the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;

use chrono::{Duration, TimeZone, Utc};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde::Deserialize;
use serde_json::{Map, Value};
use skillgate_core::inspect::egress::egress_findings;
use skillgate_core::inspect::{DefinitionContext, Inspectors};
use skillgate_core::model::{
    CatalogDraft, CatalogTool, Inspector, Limit, Role, Scope, Skill, ToolSpec, Upstream,
    UpstreamKind,
};
use skillgate_core::policy::{CallRequest, CompiledCatalog, SessionView, decide};
use skillgate_core::slug::Slug;

/// The result inspectors a careful operator turns on.
const RESULT_INSPECTORS: [Inspector; 2] = [Inspector::Secrets, Inspector::Injection];

/// A redacted secret has leaked when this many of its characters in a row still reach the
/// agent (or all of it, when it is shorter).
const LEAK_WINDOW: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Label {
    Attack,
    Benign,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    Tune,
    Heldout,
}

impl Split {
    pub fn name(self) -> &'static str {
        match self {
            Self::Tune => "tune",
            Self::Heldout => "held-out",
        }
    }
}

/// A definition as an MCP server offers it (`tools/list`).
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OfferedTool {
    name: String,
    #[serde(default)]
    description: String,
    input_schema: Value,
    #[serde(default)]
    output_schema: Option<Value>,
}

impl OfferedTool {
    fn spec(self) -> ToolSpec {
        ToolSpec {
            name: self.name,
            description: self.description,
            input_schema: self.input_schema,
            output_schema: self.output_schema,
            annotations: None,
            sensitive_args: Vec::new(),
        }
    }
}

/// One line of the corpus.
#[derive(Deserialize)]
pub struct Case {
    pub id: String,
    pub class: String,
    pub category: String,
    pub family: String,
    pub label: Label,
    pub split: Split,
    #[serde(default)]
    result: Option<CallToolResult>,
    #[serde(default)]
    secrets: Vec<String>,
    #[serde(default)]
    tool: Option<OfferedTool>,
    #[serde(default)]
    limits: Vec<Value>,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
    #[serde(default)]
    siblings: Vec<OfferedTool>,
    #[serde(default)]
    other_tools: Vec<(String, String)>,
    #[serde(default)]
    upstream: Option<String>,
}

/// What the gateway did with one case.
#[derive(Debug, Default, Clone, Copy)]
pub struct Outcome {
    /// A finding, or (arguments) a refusal.
    pub detected: bool,
    /// A found secret of which part still reached the agent after redaction.
    pub leaked: bool,
    /// Limits the catalog refused to save (so they were not applied).
    pub unsupported_limits: usize,
}

pub fn corpus() -> Vec<Case> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/guardrails/corpus.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .enumerate()
        .map(|(n, line)| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("corpus.jsonl:{}: {e}", n + 1))
        })
        .collect()
}

pub fn evaluate(case: &Case) -> Outcome {
    match case.class.as_str() {
        "secrets" | "injection" => evaluate_result(case),
        "arguments" => evaluate_arguments(case),
        "definitions" => evaluate_definition(case),
        other => panic!("{}: unknown class {other}", case.id),
    }
}

fn evaluate_result(case: &Case) -> Outcome {
    let result = case
        .result
        .as_ref()
        .unwrap_or_else(|| panic!("{}: no result", case.id));
    let inspectors = Inspectors::shared();
    let findings = inspectors.inspect_result(result, &RESULT_INSPECTORS);
    let detected = match (case.label, case.class.as_str()) {
        // An attack counts as caught by its own class's inspector only.
        (Label::Attack, "secrets") => findings.iter().any(|f| f.inspector == Inspector::Secrets),
        (Label::Attack, _) => findings.iter().any(|f| f.inspector == Inspector::Injection),
        // Any alarm on a benign result is a false one.
        (Label::Benign, _) => !findings.is_empty(),
    };
    let leaked = detected && !case.secrets.is_empty() && {
        let mut redacted = result.clone();
        inspectors.redact_result(&mut redacted, &[Inspector::Secrets]);
        let visible = visible_text(&redacted);
        case.secrets.iter().any(|secret| leaks(secret, &visible))
    };
    Outcome {
        detected,
        leaked,
        unsupported_limits: 0,
    }
}

/// Every string the agent would read, without the invisible characters that could split a
/// secret's characters apart.
fn visible_text(result: &CallToolResult) -> String {
    fn strings(value: &Value, out: &mut String) {
        match value {
            Value::String(text) => {
                out.push_str(text);
                out.push('\n');
            }
            Value::Array(items) => items.iter().for_each(|item| strings(item, out)),
            Value::Object(map) => map.values().for_each(|item| strings(item, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    for block in &result.content {
        match block {
            ContentBlock::Text(text) => out.push_str(&text.text),
            ContentBlock::Resource(resource) => {
                if let ResourceContents::TextResourceContents { text, .. } = &resource.resource {
                    out.push_str(text);
                }
            }
            _ => {}
        }
        out.push('\n');
    }
    if let Some(structured) = &result.structured_content {
        strings(structured, &mut out);
    }
    out.chars().filter(|c| !is_invisible(*c)).collect()
}

fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}'
        | '\u{FEFF}' | '\u{E0000}'..='\u{E007F}')
}

fn leaks(secret: &str, visible: &str) -> bool {
    let chars: Vec<char> = secret.chars().collect();
    let window = LEAK_WINDOW.min(chars.len());
    chars
        .windows(window)
        .any(|w| visible.contains(&w.iter().collect::<String>()))
}

fn slug(text: &str) -> Slug {
    Slug::parse(text).expect("a valid slug")
}

fn evaluate_arguments(case: &Case) -> Outcome {
    let offered = case
        .tool
        .as_ref()
        .unwrap_or_else(|| panic!("{}: no tool", case.id));
    let spec = ToolSpec {
        name: offered.name.clone(),
        description: offered.description.clone(),
        input_schema: offered.input_schema.clone(),
        output_schema: None,
        annotations: None,
        sensitive_args: Vec::new(),
    };
    let draft = |limits: Vec<Limit>| CatalogDraft {
        tools: vec![CatalogTool {
            upstream: slug("up"),
            spec: spec.clone(),
            quarantine: None,
        }],
        skills: vec![Skill {
            slug: slug("work"),
            description: "The work.".into(),
            instructions: "Do the work.".into(),
            tools: vec![spec.name.clone()],
            resources: Vec::new(),
            frontmatter_extra: Default::default(),
        }],
        roles: vec![Role {
            slug: slug("worker"),
            title: "Worker".into(),
            description: "Does the work.".into(),
            instructions: "Follow the skill.".into(),
            skills: vec![slug("work")],
            limits,
        }],
        scopes: vec![Scope {
            slug: slug("team"),
            description: String::new(),
            roles: vec![slug("worker")],
            guardrails: Vec::new(),
        }],
    };
    let upstream = || Upstream {
        name: slug("up"),
        kind: UpstreamKind::Stdio {
            command: "up".into(),
            args: Vec::new(),
        },
    };
    // Each limit is kept only when the catalog would save it, as for an operator.
    let mut kept = Vec::new();
    let mut unsupported = 0;
    for raw in &case.limits {
        let Ok(limit) = serde_json::from_value::<Limit>(raw.clone()) else {
            unsupported += 1;
            continue;
        };
        if draft(vec![limit.clone()])
            .into_catalog(vec![upstream()])
            .validate()
            .is_ok()
        {
            kept.push(limit);
        } else {
            unsupported += 1;
        }
    }
    let catalog = CompiledCatalog::compile(draft(kept).into_catalog(vec![upstream()]));
    let now = Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap();
    let mut session = SessionView::new("s", "k", slug("team"), now + Duration::hours(1));
    session.learn(slug("worker"), Vec::new());
    let arguments = case.arguments.clone().unwrap_or_default();
    let decision = decide(
        &catalog,
        Some(&session),
        CallRequest {
            session_id: "s",
            key_id: "k",
            tool: &spec.name,
            arguments: arguments.clone(),
            approved: None,
        },
        now,
    );
    Outcome {
        detected: !decision.is_allowed() || !egress_findings(&arguments).is_empty(),
        leaked: false,
        unsupported_limits: unsupported,
    }
}

fn evaluate_definition(case: &Case) -> Outcome {
    let spec = case
        .tool
        .clone()
        .unwrap_or_else(|| panic!("{}: no tool", case.id))
        .spec();
    let siblings: Vec<ToolSpec> = case
        .siblings
        .iter()
        .cloned()
        .map(OfferedTool::spec)
        .collect();
    let sibling_refs: Vec<&ToolSpec> = siblings.iter().collect();
    let others: Vec<(&str, &str)> = case
        .other_tools
        .iter()
        .map(|(u, t)| (u.as_str(), t.as_str()))
        .collect();
    let context = DefinitionContext {
        upstream: case.upstream.as_deref().unwrap_or("docs"),
        other_tools: &others,
        siblings: &sibling_refs,
    };
    Outcome {
        detected: !Inspectors::shared()
            .inspect_definition(&spec, &context)
            .is_empty(),
        leaked: false,
        unsupported_limits: 0,
    }
}

/// Counts for one group of cases.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Tally {
    pub attacks: usize,
    pub caught: usize,
    pub benign: usize,
    pub false_alarms: usize,
    /// Secrets found of which part still reached the agent after redaction.
    pub leaks: usize,
    pub unsupported_limits: usize,
}

impl Tally {
    fn add(&mut self, case: &Case, outcome: Outcome) {
        match case.label {
            Label::Attack => {
                self.attacks += 1;
                self.caught += usize::from(outcome.detected);
            }
            Label::Benign => {
                self.benign += 1;
                self.false_alarms += usize::from(outcome.detected);
            }
        }
        self.leaks += usize::from(outcome.leaked);
        self.unsupported_limits += outcome.unsupported_limits;
    }

    /// Attacks caught, of all attacks (recall).
    pub fn recall(&self) -> f64 {
        ratio(self.caught, self.attacks)
    }

    /// Benign cases with an alarm, of all benign cases.
    pub fn false_positive_rate(&self) -> f64 {
        ratio(self.false_alarms, self.benign)
    }

    /// Alarms that were attacks, of all alarms.
    pub fn precision(&self) -> f64 {
        ratio(self.caught, self.caught + self.false_alarms)
    }
}

fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// The whole evaluation: tallies by (split, class) and (split, class, category), and the
/// ids of the tune split's misses and false alarms (the held-out split's are never listed,
/// so nobody tunes on them).
#[derive(Default)]
pub struct Report {
    pub by_class: BTreeMap<(Split, String), Tally>,
    pub by_category: BTreeMap<(Split, String, String), Tally>,
    pub overall: BTreeMap<Split, Tally>,
    /// The families (templates) each split's cases come from.
    pub families: BTreeMap<Split, BTreeSet<String>>,
    pub tune_errors: Vec<String>,
}

pub fn run(cases: &[Case]) -> Report {
    let mut report = Report::default();
    for case in cases {
        let outcome = evaluate(case);
        report
            .by_class
            .entry((case.split, case.class.clone()))
            .or_default()
            .add(case, outcome);
        report
            .by_category
            .entry((case.split, case.class.clone(), case.category.clone()))
            .or_default()
            .add(case, outcome);
        report
            .overall
            .entry(case.split)
            .or_default()
            .add(case, outcome);
        report
            .families
            .entry(case.split)
            .or_default()
            .insert(format!("{}/{}", case.category, case.family));
        if case.split == Split::Tune {
            let wrong = match case.label {
                Label::Attack => !outcome.detected,
                Label::Benign => outcome.detected,
            };
            if wrong {
                let what = match case.label {
                    Label::Attack => "missed",
                    Label::Benign => "false alarm",
                };
                report.tune_errors.push(format!("{what}: {}", case.id));
            } else if outcome.leaked {
                report
                    .tune_errors
                    .push(format!("leaked after redaction: {}", case.id));
            }
        }
    }
    report
}

fn row(out: &mut String, name: &str, t: &Tally) {
    let _ = writeln!(
        out,
        "| {name} | {}/{} ({:.1}%) | {}/{} ({:.1}%) | {:.1}% | {} |",
        t.caught,
        t.attacks,
        100.0 * t.recall(),
        t.false_alarms,
        t.benign,
        100.0 * t.false_positive_rate(),
        100.0 * t.precision(),
        t.leaks,
    );
}

impl Report {
    /// Markdown tables: per split, the classes and the whole; then per category.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let header = "| | attacks caught (recall) | benign flagged (false positives) | precision | secrets leaked after redaction |\n| --- | ---: | ---: | ---: | ---: |\n";
        for split in [Split::Heldout, Split::Tune] {
            let families = self.families.get(&split).map_or(0, BTreeSet::len);
            let _ = writeln!(out, "\n**{} split** ({families} families)\n", split.name());
            out.push_str(header);
            for ((s, class), tally) in &self.by_class {
                if *s == split {
                    row(&mut out, class, tally);
                }
            }
            if let Some(all) = self.overall.get(&split) {
                row(&mut out, "**all**", all);
            }
        }
        let _ = writeln!(out, "\n**By category (held-out / tune)**\n");
        out.push_str("| class | category | held-out caught | held-out flagged | tune caught | tune flagged |\n| --- | --- | ---: | ---: | ---: | ---: |\n");
        let mut categories: Vec<(&String, &String)> = self
            .by_category
            .keys()
            .map(|(_, class, category)| (class, category))
            .collect();
        categories.sort();
        categories.dedup();
        for (class, category) in categories {
            let cell = |split: Split| {
                self.by_category
                    .get(&(split, class.clone(), category.clone()))
                    .map(|t| {
                        (
                            format!("{}/{}", t.caught, t.attacks),
                            format!("{}/{}", t.false_alarms, t.benign),
                        )
                    })
                    .unwrap_or_else(|| ("–".into(), "–".into()))
            };
            let (hc, hf) = cell(Split::Heldout);
            let (tc, tf) = cell(Split::Tune);
            let _ = writeln!(out, "| {class} | {category} | {hc} | {hf} | {tc} | {tf} |");
        }
        out
    }
}
