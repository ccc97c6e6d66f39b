//! The content inspectors against corpora: no finding on benign results (generated ones and
//! the demo upstream's real answers) or on the demo's tool definitions, and every crafted
//! attack found by the detector it names. The corpora live in `tests/data/benign/`
//! (`generate.py` there writes `benign.jsonl` and `attacks.jsonl`).

use std::path::PathBuf;

use rmcp::model::CallToolResult;
use serde::Deserialize;
use skillgate_core::inspect::{DefinitionContext, Inspectors};
use skillgate_core::model::{Inspector, ToolSpec};

const BOTH: [Inspector; 2] = [Inspector::Secrets, Inspector::Injection];

#[derive(Deserialize)]
struct Benign {
    source: String,
    result: CallToolResult,
}

#[derive(Deserialize)]
struct Attack {
    name: String,
    inspector: Inspector,
    kind: String,
    result: CallToolResult,
}

fn lines<T: for<'de> Deserialize<'de>>(file: &str) -> Vec<T> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/benign")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .enumerate()
        .map(|(n, line)| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{file}:{}: {e}", n + 1))
        })
        .collect()
}

#[test]
fn no_benign_result_has_a_finding() {
    let mut corpus: Vec<Benign> = lines("benign.jsonl");
    let generated = corpus.len();
    corpus.extend(lines::<Benign>("demo_upstream.jsonl"));
    let bytes: usize = corpus
        .iter()
        .map(|b| serde_json::to_vec(&b.result).unwrap().len())
        .sum();
    println!(
        "benign corpus: {} results ({generated} generated, {} from the demo upstream), {bytes} bytes",
        corpus.len(),
        corpus.len() - generated
    );
    assert!(generated >= 300 && corpus.len() > generated);
    let flagged: Vec<String> = corpus
        .iter()
        .enumerate()
        .filter_map(|(n, b)| {
            let findings = Inspectors::shared().inspect_result(&b.result, &BOTH);
            (!findings.is_empty()).then(|| format!("#{n} {}: {findings:?}", b.source))
        })
        .collect();
    assert!(
        flagged.is_empty(),
        "{} flagged:\n{}",
        flagged.len(),
        flagged.join("\n")
    );
}

#[test]
fn every_crafted_attack_is_found_by_its_detector() {
    let attacks: Vec<Attack> = lines("attacks.jsonl");
    println!("attack corpus: {} results", attacks.len());
    assert!(attacks.len() >= 40);
    let missed: Vec<String> = attacks
        .iter()
        .filter_map(|a| {
            let findings = Inspectors::shared().inspect_result(&a.result, &BOTH);
            let found = findings
                .iter()
                .any(|f| f.inspector == a.inspector && f.kind == a.kind);
            (!found).then(|| format!("{} (wanted {}): {findings:?}", a.name, a.kind))
        })
        .collect();
    assert!(
        missed.is_empty(),
        "{} missed:\n{}",
        missed.len(),
        missed.join("\n")
    );
}

#[test]
fn every_crafted_attack_is_gone_after_redaction() {
    for mut attack in lines::<Attack>("attacks.jsonl") {
        let before = serde_json::to_string(&attack.result).unwrap();
        Inspectors::shared().redact_result(&mut attack.result, &BOTH);
        assert_ne!(
            serde_json::to_string(&attack.result).unwrap(),
            before,
            "{}",
            attack.name
        );
        assert!(
            Inspectors::shared()
                .inspect_result(&attack.result, &BOTH)
                .is_empty(),
            "{} still has findings after redaction",
            attack.name
        );
    }
}

#[test]
fn the_demo_tool_definitions_have_no_findings() {
    let specs = skillgate_core::demo::tools::tool_specs();
    for spec in &specs {
        let siblings: Vec<&ToolSpec> = specs.iter().filter(|s| s.name != spec.name).collect();
        let context = DefinitionContext {
            upstream: "demo",
            other_tools: &[("crm", "search_contacts")],
            siblings: &siblings,
        };
        let findings = Inspectors::shared().inspect_definition(spec, &context);
        assert!(findings.is_empty(), "{}: {findings:?}", spec.name);
    }
}
