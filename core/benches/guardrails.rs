//! The guardrail evaluation: what the built-in inspectors and argument checks catch of the
//! corpus in `tests/data/guardrails/`, and what they flag by mistake, on the held-out split
//! (never tuned on) and the tune split. Prints Markdown for BENCHMARKS.md.
//!
//! Not a timing: the inspectors' cost per result is `benches/inspect.rs`.

#[path = "../tests/it/guardrail_eval/evaluate.rs"]
mod evaluate;

fn main() {
    let cases = evaluate::corpus();
    let report = evaluate::run(&cases);
    println!(
        "guardrail evaluation: {} cases (tests/data/guardrails/corpus.jsonl)",
        cases.len()
    );
    println!("{}", report.markdown());
    // The tune split's misses by id, for whoever improves a detector; the held-out split's
    // are never listed.
    if std::env::var_os("SKILLGATE_TUNE_ERRORS").is_some() {
        println!("tune split, wrong:\n{}", report.tune_errors.join("\n"));
    }
}
