//! The WikiSkill gate: a pure function from evidence (and the skill's pending explicit
//! requirements) to a verdict plus the arithmetic behind it, as data.
//!
//! Rules, in the order they are tried:
//! 1. no evidence → `UNEVALUATED`; `{"no_action": true}` → `NO_ACTION`
//! 2. numeric: improvement = candidate − incumbent (maximize) or incumbent − candidate
//!    (minimize); `ACCEPT` only when improvement > `min_improvement` (strictly), else `REJECT`
//! 3. paired with explicit requirements (pending human requirements of the skill, or any
//!    requirement check in the evidence): `ACCEPT` needs every requirement fulfilled with
//!    non-empty evidence, no regressions and zero worse; else `REVISION_REQUIRED`
//! 4. paired otherwise: `ACCEPT` needs better > worse and no regressions; else `REJECT`

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::evidence::{Direction, Evidence, NumericEvidence, PairVerdict, PairedEvidence};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    Accept,
    Reject,
    RevisionRequired,
    NoAction,
    Unevaluated,
}

impl Verdict {
    pub const ALL: [Verdict; 5] = [
        Verdict::Accept,
        Verdict::Reject,
        Verdict::RevisionRequired,
        Verdict::NoAction,
        Verdict::Unevaluated,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Accept => "ACCEPT",
            Verdict::Reject => "REJECT",
            Verdict::RevisionRequired => "REVISION_REQUIRED",
            Verdict::NoAction => "NO_ACTION",
            Verdict::Unevaluated => "UNEVALUATED",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == text)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which gate rule decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateRule {
    NoEvidence,
    NoAction,
    Numeric,
    PairedWithRequirements,
    Paired,
}

/// One condition the rule checked, with the numbers it compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateCheck {
    pub condition: String,
    pub passed: bool,
}

/// The verdict and why, as stored with the candidate and shown to the reviewer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateOutcome {
    pub verdict: Verdict,
    pub rule: GateRule,
    /// The arithmetic in one line, e.g. `improvement = 0.80 − 0.70 = 0.10 > 0.05`.
    pub summary: String,
    pub checks: Vec<GateCheck>,
}

fn check(condition: String, passed: bool) -> GateCheck {
    GateCheck { condition, passed }
}

/// Computes the gate verdict. `pending_requirements` are the IDs of explicit human
/// requirements that the candidate must answer (the caller decides which are pending).
pub fn evaluate(evidence: &Evidence, pending_requirements: &[String]) -> GateOutcome {
    match evidence {
        Evidence::None => GateOutcome {
            verdict: Verdict::Unevaluated,
            rule: GateRule::NoEvidence,
            summary: "no evidence was given, so the gate cannot evaluate this proposal".into(),
            checks: Vec::new(),
        },
        Evidence::NoAction => GateOutcome {
            verdict: Verdict::NoAction,
            rule: GateRule::NoAction,
            summary: "the curator proposes no change".into(),
            checks: Vec::new(),
        },
        Evidence::Numeric(numeric) => numeric_gate(numeric),
        Evidence::Paired(paired) => paired_gate(paired, pending_requirements),
    }
}

fn numeric_gate(e: &NumericEvidence) -> GateOutcome {
    let (improvement, formula) = match e.direction {
        Direction::Maximize => (
            e.candidate_score - e.incumbent_score,
            format!(
                "improvement = candidate − incumbent = {} − {}",
                e.candidate_score, e.incumbent_score
            ),
        ),
        Direction::Minimize => (
            e.incumbent_score - e.candidate_score,
            format!(
                "improvement = incumbent − candidate = {} − {} (minimize)",
                e.incumbent_score, e.candidate_score
            ),
        ),
    };
    let passed = improvement > e.min_improvement;
    let relation = if passed { ">" } else { "≤" };
    let summary = format!(
        "{formula} = {improvement} {relation} min_improvement {}",
        e.min_improvement
    );
    GateOutcome {
        verdict: if passed {
            Verdict::Accept
        } else {
            Verdict::Reject
        },
        rule: GateRule::Numeric,
        checks: vec![check(
            format!(
                "improvement {improvement} is strictly greater than min_improvement {}",
                e.min_improvement
            ),
            passed,
        )],
        summary,
    }
}

fn paired_gate(e: &PairedEvidence, pending: &[String]) -> GateOutcome {
    let count = |v: PairVerdict| e.pairs.iter().filter(|p| p.verdict == v).count();
    let (better, tie, worse) = (
        count(PairVerdict::Better),
        count(PairVerdict::Tie),
        count(PairVerdict::Worse),
    );
    let regressions: usize = e.pairs.iter().map(|p| p.regressions.len()).sum();
    let no_regressions = check(
        format!("no regressions (found {regressions})"),
        regressions == 0,
    );
    let checks_given: Vec<_> = e
        .pairs
        .iter()
        .flat_map(|p| p.requirement_checks.iter())
        .collect();
    let requirements: BTreeSet<&str> = pending
        .iter()
        .map(String::as_str)
        .chain(checks_given.iter().map(|c| c.source.as_str()))
        .collect();

    if requirements.is_empty() {
        let more_better = check(format!("better {better} > worse {worse}"), better > worse);
        let passed = more_better.passed && no_regressions.passed;
        return GateOutcome {
            verdict: if passed {
                Verdict::Accept
            } else {
                Verdict::Reject
            },
            rule: GateRule::Paired,
            summary: format!(
                "{} pairs: better {better}, tie {tie}, worse {worse}, regressions {regressions}; accept needs better > worse and no regressions",
                e.pairs.len()
            ),
            checks: vec![more_better, no_regressions],
        };
    }

    let mut checks: Vec<GateCheck> = requirements
        .iter()
        .map(|source| {
            let fulfilled = checks_given
                .iter()
                .filter(|c| c.source == *source)
                .collect::<Vec<_>>();
            let passed = !fulfilled.is_empty()
                && fulfilled
                    .iter()
                    .all(|c| c.fulfilled && !c.evidence.trim().is_empty());
            let state = if fulfilled.is_empty() {
                "not checked"
            } else if passed {
                "fulfilled with evidence"
            } else {
                "not fulfilled with evidence"
            };
            check(format!("requirement {source}: {state}"), passed)
        })
        .collect();
    let met = checks.iter().filter(|c| c.passed).count();
    checks.push(no_regressions);
    checks.push(check(format!("zero worse (found {worse})"), worse == 0));
    let passed = checks.iter().all(|c| c.passed);
    GateOutcome {
        verdict: if passed {
            Verdict::Accept
        } else {
            Verdict::RevisionRequired
        },
        rule: GateRule::PairedWithRequirements,
        summary: format!(
            "{met} of {} explicit requirements fulfilled with evidence; {} pairs: better {better}, tie {tie}, worse {worse}, regressions {regressions}; accept needs every requirement, no regressions and zero worse",
            requirements.len(),
            e.pairs.len()
        ),
        checks,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn gate(evidence: Value) -> GateOutcome {
        evaluate(&Evidence::parse(&evidence).unwrap(), &[])
    }

    fn gate_with(evidence: Value, pending: &[&str]) -> GateOutcome {
        let pending: Vec<String> = pending.iter().map(|s| (*s).to_owned()).collect();
        evaluate(&Evidence::parse(&evidence).unwrap(), &pending)
    }

    fn numeric(direction: &str, min: &str, incumbent: &str, candidate: &str) -> Value {
        serde_json::from_str(&format!(
            r#"{{"direction":"{direction}","min_improvement":{min},"incumbent_score":{incumbent},"candidate_score":{candidate},"tasks":[]}}"#
        ))
        .unwrap()
    }

    fn pair(verdict: &str) -> Value {
        json!({"case_id": format!("case-{verdict}"), "verdict": verdict})
    }

    #[test]
    fn numeric_improvement_above_the_threshold_is_accept() {
        let outcome = gate(numeric("maximize", "0.05", "0.70", "0.80"));
        assert_eq!(
            (outcome.verdict, outcome.rule),
            (Verdict::Accept, GateRule::Numeric)
        );
        assert!(
            outcome
                .summary
                .contains("0.80 − 0.70 = 0.10 > min_improvement 0.05"),
            "{}",
            outcome.summary
        );
    }

    #[test]
    fn numeric_improvement_equal_to_the_threshold_is_reject() {
        let outcome = gate(numeric("maximize", "0.1", "0.70", "0.80"));
        assert_eq!(outcome.verdict, Verdict::Reject);
        assert!(
            outcome.summary.contains("0.10 ≤ min_improvement 0.1"),
            "{}",
            outcome.summary
        );
    }

    #[test]
    fn numeric_improvement_just_above_the_threshold_is_accept_exactly() {
        let outcome = gate(numeric("maximize", "0.1", "0.7", "0.8000000001"));
        assert_eq!(outcome.verdict, Verdict::Accept);
    }

    #[test]
    fn numeric_worse_candidate_is_reject_even_with_a_zero_threshold() {
        assert_eq!(
            gate(numeric("maximize", "0", "0.7", "0.6")).verdict,
            Verdict::Reject
        );
        assert_eq!(
            gate(numeric("maximize", "0", "0.7", "0.7")).verdict,
            Verdict::Reject
        );
    }

    #[test]
    fn minimize_direction_counts_a_lower_score_as_improvement() {
        let lower = gate(numeric("minimize", "1", "12", "10"));
        assert_eq!(lower.verdict, Verdict::Accept, "{}", lower.summary);
        assert!(
            lower
                .summary
                .contains("12 − 10 (minimize) = 2 > min_improvement 1"),
            "{}",
            lower.summary
        );
        assert_eq!(
            gate(numeric("minimize", "1", "10", "12")).verdict,
            Verdict::Reject
        );
        assert_eq!(
            gate(numeric("minimize", "2", "12", "10")).verdict,
            Verdict::Reject
        );
    }

    #[test]
    fn paired_without_requirements_accepts_more_better_than_worse() {
        let outcome =
            gate(json!({"pairs": [pair("better"), pair("better"), pair("worse"), pair("tie")]}));
        assert_eq!(
            (outcome.verdict, outcome.rule),
            (Verdict::Accept, GateRule::Paired)
        );
        assert!(
            outcome.summary.contains("better 2, tie 1, worse 1"),
            "{}",
            outcome.summary
        );
    }

    #[test]
    fn paired_without_requirements_rejects_as_many_worse_as_better() {
        let outcome = gate(json!({"pairs": [pair("better"), pair("worse")]}));
        assert_eq!(outcome.verdict, Verdict::Reject);
        assert_eq!(
            gate(json!({"pairs": [pair("tie")]})).verdict,
            Verdict::Reject
        );
        assert_eq!(gate(json!({"pairs": []})).verdict, Verdict::Reject);
    }

    #[test]
    fn any_regression_rejects_paired_evidence() {
        let outcome = gate(json!({"pairs": [
            pair("better"), pair("better"),
            {"case_id": "c3", "verdict": "better", "regressions": ["forgot to verify the order id"]}
        ]}));
        assert_eq!(outcome.verdict, Verdict::Reject);
        assert!(
            outcome
                .checks
                .iter()
                .any(|c| !c.passed && c.condition.contains("regressions (found 1)"))
        );
    }

    #[test]
    fn every_explicit_requirement_fulfilled_with_evidence_and_no_worse_is_accept() {
        let outcome = gate_with(
            json!({"pairs": [{"case_id": "c1", "verdict": "tie", "requirement_checks": [
                {"source": "fb_req", "fulfilled": true, "evidence": "step 3 now asks for the order id"}
            ]}]}),
            &["fb_req"],
        );
        assert_eq!(
            (outcome.verdict, outcome.rule),
            (Verdict::Accept, GateRule::PairedWithRequirements)
        );
    }

    #[test]
    fn an_unfulfilled_explicit_requirement_is_revision_required() {
        let outcome = gate_with(
            json!({"pairs": [{"case_id": "c1", "verdict": "better", "requirement_checks": [
                {"source": "fb_req", "fulfilled": false, "evidence": "not addressed"}
            ]}]}),
            &["fb_req"],
        );
        assert_eq!(outcome.verdict, Verdict::RevisionRequired);
        assert!(
            outcome.summary.starts_with("0 of 1 explicit requirements"),
            "{}",
            outcome.summary
        );
    }

    #[test]
    fn a_pending_requirement_the_evidence_does_not_check_is_revision_required() {
        let outcome = gate_with(
            json!({"pairs": [pair("better"), pair("better")]}),
            &["fb_req"],
        );
        assert_eq!(outcome.verdict, Verdict::RevisionRequired);
        assert!(
            outcome
                .checks
                .iter()
                .any(|c| c.condition == "requirement fb_req: not checked")
        );
    }

    #[test]
    fn a_requirement_claimed_fulfilled_without_evidence_is_revision_required() {
        let outcome = gate_with(
            json!({"pairs": [{"case_id": "c1", "verdict": "better", "requirement_checks": [
                {"source": "fb_req", "fulfilled": true, "evidence": "  "}
            ]}]}),
            &[],
        );
        assert_eq!(outcome.verdict, Verdict::RevisionRequired);
    }

    #[test]
    fn with_requirements_a_single_worse_or_regression_is_revision_required() {
        let fulfilled = json!({"source": "fb_req", "fulfilled": true, "evidence": "done"});
        let worse = gate_with(
            json!({"pairs": [
                {"case_id": "c1", "verdict": "better", "requirement_checks": [fulfilled.clone()]},
                pair("better"), pair("worse")
            ]}),
            &["fb_req"],
        );
        assert_eq!(worse.verdict, Verdict::RevisionRequired);
        let regression = gate_with(
            json!({"pairs": [
                {"case_id": "c1", "verdict": "better", "requirement_checks": [fulfilled], "regressions": ["r"]}
            ]}),
            &["fb_req"],
        );
        assert_eq!(regression.verdict, Verdict::RevisionRequired);
    }

    #[test]
    fn no_evidence_is_unevaluated_and_no_action_is_recorded_as_such() {
        assert_eq!(
            evaluate(&Evidence::None, &["fb_req".into()]).verdict,
            Verdict::Unevaluated
        );
        assert_eq!(gate(json!({"no_action": true})).verdict, Verdict::NoAction);
    }

    #[test]
    fn verdicts_round_trip_through_their_names() {
        for verdict in Verdict::ALL {
            assert_eq!(Verdict::parse(verdict.as_str()), Some(verdict));
            assert_eq!(
                serde_json::to_value(verdict).unwrap(),
                json!(verdict.as_str())
            );
        }
    }
}
