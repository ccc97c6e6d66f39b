//! Evidence of a candidate in WikiSkill's shapes, parsed from JSON with exact decimals.
//!
//! Numeric: `{"direction", "min_improvement", "incumbent_score", "candidate_score",
//! "tasks": [{"id", "incumbent", "candidate"}]}`. Paired: `{"pairs": [{"case_id",
//! "verdict", "regressions", "requirement_checks": [{"source", "fulfilled", "evidence"}]}]}`.
//! `{"no_action": true}` records that the curator found nothing to change.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::policy::decimal_from_json;

/// Why a piece of evidence could not be read; `path` names the field, e.g.
/// `evidence.tasks[2].candidate`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path} {problem}")]
pub struct EvidenceError {
    pub path: String,
    pub problem: String,
}

fn err(path: impl Into<String>, problem: impl Into<String>) -> EvidenceError {
    EvidenceError {
        path: path.into(),
        problem: problem.into(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Maximize,
    Minimize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskScore {
    pub id: String,
    pub incumbent: Decimal,
    pub candidate: Decimal,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NumericEvidence {
    pub direction: Direction,
    pub min_improvement: Decimal,
    pub incumbent_score: Decimal,
    pub candidate_score: Decimal,
    pub tasks: Vec<TaskScore>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairVerdict {
    Better,
    Tie,
    Worse,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequirementCheck {
    pub source: String,
    pub fulfilled: bool,
    pub evidence: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pair {
    pub case_id: String,
    pub verdict: PairVerdict,
    pub regressions: Vec<String>,
    pub requirement_checks: Vec<RequirementCheck>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PairedEvidence {
    pub pairs: Vec<Pair>,
}

/// The evidence a proposal carries.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Evidence {
    /// No evidence was given: the gate cannot evaluate the proposal.
    None,
    NoAction,
    Numeric(NumericEvidence),
    Paired(PairedEvidence),
}

impl Evidence {
    /// Parses the `evidence` of a proposal. `null` (or an absent field) is [`Evidence::None`].
    pub fn parse(value: &Value) -> Result<Self, EvidenceError> {
        let object = match value {
            Value::Null => return Ok(Self::None),
            Value::Object(object) => object,
            _ => return Err(err("evidence", "must be a JSON object")),
        };
        if let Some(flag) = object.get("no_action") {
            return match flag {
                Value::Bool(true) => Ok(Self::NoAction),
                _ => Err(err("evidence.no_action", "must be `true` when present")),
            };
        }
        if object.contains_key("pairs") {
            return parse_paired(object).map(Self::Paired);
        }
        if object.contains_key("direction") || object.contains_key("candidate_score") {
            return parse_numeric(object).map(Self::Numeric);
        }
        Err(err(
            "evidence",
            "is neither numeric (`direction`, `min_improvement`, `incumbent_score`, `candidate_score`, `tasks`), paired (`pairs`) nor `{\"no_action\": true}`",
        ))
    }

    /// Every source a requirement check names, for the citation check.
    pub fn requirement_sources(&self) -> Vec<&str> {
        match self {
            Self::Paired(paired) => paired
                .pairs
                .iter()
                .flat_map(|p| p.requirement_checks.iter().map(|c| c.source.as_str()))
                .collect(),
            _ => Vec::new(),
        }
    }
}

fn decimal(object: &Map<String, Value>, field: &str, path: &str) -> Result<Decimal, EvidenceError> {
    let at = format!("{path}.{field}");
    let value = object.get(field).ok_or_else(|| err(&at, "is missing"))?;
    decimal_from_json(value).map_err(|e| err(&at, e.to_string()))
}

fn text(object: &Map<String, Value>, field: &str, path: &str) -> Result<String, EvidenceError> {
    let at = format!("{path}.{field}");
    match object.get(field) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(err(at, "must not be empty")),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(_) => Err(err(at, "must be a string")),
        None => Err(err(at, "is missing")),
    }
}

fn array<'a>(
    object: &'a Map<String, Value>,
    field: &str,
    path: &str,
    required: bool,
) -> Result<&'a [Value], EvidenceError> {
    match object.get(field) {
        Some(Value::Array(items)) => Ok(items),
        None | Some(Value::Null) if !required => Ok(&[]),
        None => Err(err(format!("{path}.{field}"), "is missing")),
        Some(_) => Err(err(format!("{path}.{field}"), "must be a list")),
    }
}

fn object_at<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, EvidenceError> {
    value
        .as_object()
        .ok_or_else(|| err(path, "must be a JSON object"))
}

fn parse_numeric(object: &Map<String, Value>) -> Result<NumericEvidence, EvidenceError> {
    let path = "evidence";
    let direction = match object.get("direction") {
        Some(Value::String(s)) if s == "maximize" => Direction::Maximize,
        Some(Value::String(s)) if s == "minimize" => Direction::Minimize,
        Some(_) => {
            return Err(err(
                "evidence.direction",
                "must be \"maximize\" or \"minimize\"",
            ));
        }
        None => return Err(err("evidence.direction", "is missing")),
    };
    let min_improvement = decimal(object, "min_improvement", path)?;
    if min_improvement.is_sign_negative() {
        return Err(err("evidence.min_improvement", "must not be negative"));
    }
    let tasks = array(object, "tasks", path, false)?
        .iter()
        .enumerate()
        .map(|(i, task)| {
            let at = format!("evidence.tasks[{i}]");
            let task = object_at(task, &at)?;
            Ok(TaskScore {
                id: text(task, "id", &at)?,
                incumbent: decimal(task, "incumbent", &at)?,
                candidate: decimal(task, "candidate", &at)?,
            })
        })
        .collect::<Result<_, EvidenceError>>()?;
    Ok(NumericEvidence {
        direction,
        min_improvement,
        incumbent_score: decimal(object, "incumbent_score", path)?,
        candidate_score: decimal(object, "candidate_score", path)?,
        tasks,
    })
}

fn parse_paired(object: &Map<String, Value>) -> Result<PairedEvidence, EvidenceError> {
    let pairs = array(object, "pairs", "evidence", true)?
        .iter()
        .enumerate()
        .map(|(i, pair)| {
            let at = format!("evidence.pairs[{i}]");
            let pair = object_at(pair, &at)?;
            let verdict = match pair.get("verdict") {
                Some(Value::String(s)) if s == "better" => PairVerdict::Better,
                Some(Value::String(s)) if s == "tie" => PairVerdict::Tie,
                Some(Value::String(s)) if s == "worse" => PairVerdict::Worse,
                Some(_) => {
                    return Err(err(
                        format!("{at}.verdict"),
                        "must be \"better\", \"tie\" or \"worse\"",
                    ));
                }
                None => return Err(err(format!("{at}.verdict"), "is missing")),
            };
            // A regression is named by text or by any JSON value the evaluator used.
            let regressions = array(pair, "regressions", &at, false)?
                .iter()
                .map(|r| match r {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            let requirement_checks = array(pair, "requirement_checks", &at, false)?
                .iter()
                .enumerate()
                .map(|(j, check)| {
                    let at = format!("{at}.requirement_checks[{j}]");
                    let check = object_at(check, &at)?;
                    let fulfilled = match check.get("fulfilled") {
                        Some(Value::Bool(b)) => *b,
                        Some(_) => {
                            return Err(err(format!("{at}.fulfilled"), "must be true or false"));
                        }
                        None => return Err(err(format!("{at}.fulfilled"), "is missing")),
                    };
                    let evidence = match check.get("evidence") {
                        Some(Value::String(s)) => s.clone(),
                        None | Some(Value::Null) => String::new(),
                        Some(_) => return Err(err(format!("{at}.evidence"), "must be a string")),
                    };
                    Ok(RequirementCheck {
                        source: text(check, "source", &at)?,
                        fulfilled,
                        evidence,
                    })
                })
                .collect::<Result<_, EvidenceError>>()?;
            Ok(Pair {
                case_id: text(pair, "case_id", &at)?,
                verdict,
                regressions,
                requirement_checks,
            })
        })
        .collect::<Result<_, EvidenceError>>()?;
    Ok(PairedEvidence { pairs })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(text: &str) -> Result<Evidence, EvidenceError> {
        Evidence::parse(&serde_json::from_str(text).unwrap())
    }

    #[test]
    fn numeric_evidence_keeps_the_exact_digits() {
        let Evidence::Numeric(numeric) = parse(
            r#"{"direction":"maximize","min_improvement":0.05,"incumbent_score":0.7,
                "candidate_score":0.7500000001,"tasks":[{"id":"t1","incumbent":1,"candidate":2}]}"#,
        )
        .unwrap() else {
            panic!("numeric expected")
        };
        assert_eq!(numeric.candidate_score.to_string(), "0.7500000001");
        assert_eq!(numeric.tasks.len(), 1);
    }

    #[test]
    fn a_bad_field_is_named_by_its_path() {
        let e = parse(
            r#"{"direction":"maximize","min_improvement":0,"incumbent_score":1,"candidate_score":2,
                "tasks":[{"id":"t1","incumbent":1,"candidate":"high"}]}"#,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "evidence.tasks[0].candidate is not a number");
        let e = parse(r#"{"direction":"up","min_improvement":0}"#).unwrap_err();
        assert!(
            e.to_string().starts_with("evidence.direction must be"),
            "{e}"
        );
        let e = parse(r#"{"pairs":[{"case_id":"c1","verdict":"great"}]}"#).unwrap_err();
        assert!(
            e.to_string().starts_with("evidence.pairs[0].verdict"),
            "{e}"
        );
        assert!(parse(r#"{"score": 3}"#).is_err());
        assert!(parse("[1]").is_err());
    }

    #[test]
    fn absent_evidence_and_no_action_are_their_own_kinds() {
        assert_eq!(Evidence::parse(&Value::Null).unwrap(), Evidence::None);
        assert_eq!(
            Evidence::parse(&json!({"no_action": true})).unwrap(),
            Evidence::NoAction
        );
        assert!(Evidence::parse(&json!({"no_action": "yes"})).is_err());
    }

    #[test]
    fn requirement_sources_are_listed_for_the_citation_check() {
        let evidence = Evidence::parse(&json!({"pairs": [{
            "case_id": "c1", "verdict": "tie",
            "requirement_checks": [{"source": "fb_1", "fulfilled": true, "evidence": "ok"}]
        }]}))
        .unwrap();
        assert_eq!(evidence.requirement_sources(), ["fb_1"]);
    }
}
