//! The limits one role (or one scope's guardrails) places on one tool, ordered for
//! evaluation and checked against a call.

use rust_decimal::Decimal;
use serde_json::Value;

use super::amount::{AmountError, decimal_from_json};
use super::digest::value_digest;
use super::remedy::Remedy;
use super::{Arguments, Usage};
use crate::inspect;
use crate::model::{ArgCheck, Limit, ResultCheck, ToolSpec};

/// A limit with its sentence rendered once, when the catalog is compiled.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub limit: Limit,
    pub sentence: String,
    /// A fleet rule's selection on this tool, compiled once.
    fleet: Option<Fleet>,
}

/// What a fleet rule ([`Limit::ArgRule`]) selects in one tool's calls: property names by
/// a glob, and the places (JSON Pointers, `*` for every item) where the tool's input schema
/// declares the format.
#[derive(Debug, Clone)]
struct Fleet {
    name: Option<wildmatch::WildMatch>,
    formats: Vec<String>,
}

/// The rules on one tool, in the order DESIGN.md fixes: step-order guards, then per-call
/// bounds, then cumulative caps.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolRules {
    rules: Vec<Rule>,
}

fn stage(limit: &Limit) -> u8 {
    match limit {
        Limit::Requires { .. } => 0,
        Limit::ArgBound { .. } | Limit::ArgRule { .. } => 1,
        Limit::SumCap { .. } | Limit::CountCap { .. } => 2,
        Limit::RequiresApproval { .. } => 3,
    }
}

/// A requires-approval rule that applies to one call: what the agent and the reviewer read,
/// and how long the hold and its approval last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApprovalRule {
    pub sentence: String,
    pub minutes: u32,
}

/// A rule that did not pass: the sentence plus what this call did wrong, and what would
/// satisfy the rule, where that can be said.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Failure {
    pub rule: String,
    pub remedy: Option<Remedy>,
}

impl ToolRules {
    /// Adds `limit` to the rules of the tool whose definition is `spec` (which a fleet rule
    /// reads for the places of its `format`).
    pub fn push(&mut self, limit: Limit, spec: Option<&ToolSpec>) {
        let sentence = limit.sentence();
        let fleet = match &limit {
            Limit::ArgRule { name, format, .. } => Some(Fleet {
                name: name
                    .as_deref()
                    .map(wildmatch::WildMatch::new_case_insensitive),
                formats: match (format, spec) {
                    (Some(format), Some(spec)) => format_places(&spec.input_schema, format),
                    _ => Vec::new(),
                },
            }),
            _ => None,
        };
        self.rules.push(Rule {
            limit,
            sentence,
            fleet,
        });
        // Stable: within a stage, declaration order is kept.
        self.rules.sort_by_key(|r| stage(&r.limit));
    }

    /// Checks every rule against the call and the session's usage of `tool`.
    pub fn check(&self, tool: &str, args: &Arguments, usage: &Usage) -> Result<(), Failure> {
        for rule in &self.rules {
            let fail = |detail: String, remedy: Option<Remedy>| Failure {
                rule: format!("{} {detail}", rule.sentence),
                remedy,
            };
            match &rule.limit {
                Limit::Requires {
                    after,
                    same_args,
                    result,
                    ..
                } => check_requires(after, same_args, result.as_ref(), args, usage).map_err(
                    |(detail, missing)| {
                        let remedy = Remedy::SucceedFirst {
                            tools: missing,
                            same_args: same_args.clone(),
                        };
                        fail(detail, Some(remedy))
                    },
                )?,
                Limit::ArgBound { arg, check, .. } => check_bound(arg, check, args)
                    .map_err(|detail| fail(detail, Some(Remedy::argument(arg, check))))?,
                Limit::ArgRule { check, .. } => {
                    if let Some(fleet) = &rule.fleet {
                        // A place that cannot be read says nothing a caller could change.
                        let selected = fleet
                            .selected(args, check)
                            .map_err(|detail| fail(detail, None))?;
                        for (path, value) in selected {
                            check_value(&path, check, Some(value)).map_err(|detail| {
                                fail(detail, Some(Remedy::argument(&path, check)))
                            })?;
                        }
                    }
                }
                Limit::SumCap { arg, max, .. } => {
                    let used = usage.sum(tool, arg);
                    let cap = || Some(Remedy::cap(arg, *max, used));
                    let amount = number_arg(args, arg).map_err(|detail| fail(detail, cap()))?;
                    if amount.is_sign_negative() && !amount.is_zero() {
                        return Err(fail(
                            format!("A negative `{arg}` ({amount}) cannot count toward a cap."),
                            cap(),
                        ));
                    }
                    let total = used.checked_add(amount);
                    if total.is_none_or(|total| total > *max) {
                        return Err(fail(
                            format!(
                                "{used} already used in this session; this call adds {amount}."
                            ),
                            cap(),
                        ));
                    }
                }
                Limit::CountCap { max, .. } => {
                    let count = usage.count(tool);
                    if count >= *max {
                        let remedy = Remedy::CallCount {
                            max: *max,
                            used: count,
                        };
                        return Err(fail(
                            format!("Already called {count} times in this session."),
                            Some(remedy),
                        ));
                    }
                }
                // Not a pass-or-fail rule: `approval_needed` asks it once every other passed.
                Limit::RequiresApproval { .. } => {}
            }
        }
        Ok(())
    }

    /// The first requires-approval rule whose condition this call meets. A condition that
    /// cannot be evaluated (argument missing, not an exact number) fails, as any limit does.
    pub fn approval_needed(&self, args: &Arguments) -> Result<Option<ApprovalRule>, Failure> {
        for rule in &self.rules {
            let Limit::RequiresApproval { when, .. } = &rule.limit else {
                continue;
            };
            let applies = match when {
                None => true,
                Some(condition) => {
                    let actual = number_arg(args, &condition.arg).map_err(|detail| Failure {
                        rule: format!("{} {detail}", rule.sentence),
                        remedy: None,
                    })?;
                    condition.op.holds(actual, condition.value)
                }
            };
            if applies {
                return Ok(Some(ApprovalRule {
                    sentence: rule.sentence.clone(),
                    minutes: rule.limit.approval_minutes(),
                }));
            }
        }
        Ok(None)
    }
}

impl Fleet {
    /// The values of `args` this selection names, each with its pointer, once: every value
    /// under a property whose name matches, at any depth (each item of an array there), and
    /// every value present at a place of the format; of them, those of a type `check`
    /// reads. A place that cannot be read (a `*` on something not an array) fails, as a
    /// bound's pointer does.
    fn selected<'a>(
        &self,
        args: &'a Arguments,
        check: &ArgCheck,
    ) -> Result<Vec<(String, &'a Value)>, String> {
        let mut found: Vec<(String, &'a Value)> = Vec::new();
        if let Some(name) = &self.name {
            for (key, value) in args {
                by_name(name, key, value, &mut pointer_to(key), &mut found);
            }
        }
        for place in &self.formats {
            let present = pointed(args, place)?
                .into_iter()
                .filter_map(|(path, value)| value.map(|v| (path, v)));
            found.extend(present);
        }
        found.retain(|(_, value)| reads(check, value));
        let mut seen = std::collections::HashSet::new();
        found.retain(|(path, _)| seen.insert(path.clone()));
        Ok(found)
    }
}

/// Whether `check` reads a value of this type (a fleet rule selects no other).
fn reads(check: &ArgCheck, value: &Value) -> bool {
    match check {
        ArgCheck::Compare { .. } => value.is_number(),
        ArgCheck::OneOf { .. } => !value.is_object() && !value.is_array(),
        _ => value.is_string(),
    }
}

fn pointer_to(key: &str) -> String {
    format!("/{}", key.replace('~', "~0").replace('/', "~1"))
}

fn by_name<'a>(
    name: &wildmatch::WildMatch,
    key: &str,
    value: &'a Value,
    path: &mut String,
    found: &mut Vec<(String, &'a Value)>,
) {
    let named = name.matches(key);
    match value {
        Value::Object(members) => {
            for (child, item) in members {
                let len = path.len();
                path.push_str(&pointer_to(child));
                by_name(name, child, item, path, found);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("/{i}"));
                if named && !item.is_object() && !item.is_array() {
                    found.push((path.clone(), item));
                } else {
                    // Items of an array are named by the array's property.
                    by_name(name, key, item, path, found);
                }
                path.truncate(len);
            }
        }
        _ if named => found.push((path.clone(), value)),
        _ => {}
    }
}

/// The places in an input schema that declare `format`, as pointers into the arguments
/// (`/url`, `/links/*/href`): through `properties`, `items` and the branches of `allOf`,
/// `anyOf` and `oneOf`, to a bounded depth.
fn format_places(schema: &Value, format: &str) -> Vec<String> {
    fn walk(node: &Value, format: &str, path: &str, depth: usize, out: &mut Vec<String>) {
        let Some(node) = node.as_object().filter(|_| depth < 32) else {
            return;
        };
        if !path.is_empty()
            && node.get("format").and_then(Value::as_str) == Some(format)
            && !out.iter().any(|p| p == path)
        {
            out.push(path.to_owned());
        }
        if let Some(Value::Object(properties)) = node.get("properties") {
            for (name, property) in properties {
                walk(
                    property,
                    format,
                    &format!("{path}{}", pointer_to(name)),
                    depth + 1,
                    out,
                );
            }
        }
        if let Some(items) = node.get("items") {
            walk(items, format, &format!("{path}/*"), depth + 1, out);
        }
        for branches in ["allOf", "anyOf", "oneOf"] {
            for branch in node
                .get(branches)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                walk(branch, format, path, depth + 1, out);
            }
        }
    }
    let mut places = Vec::new();
    walk(schema, format, "", 0, &mut places);
    places
}

fn check_requires(
    after: &[String],
    same_args: &[String],
    result: Option<&ResultCheck>,
    args: &Arguments,
    usage: &Usage,
) -> Result<(), (String, Vec<String>)> {
    if same_args.is_empty() && result.is_none() {
        let missing: Vec<&str> = after
            .iter()
            .map(String::as_str)
            .filter(|t| !usage.has_succeeded(t))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let detail = format!("Not yet succeeded: `{}`.", missing.join("`, `"));
        return Err((detail, missing.into_iter().map(str::to_owned).collect()));
    }
    let mut bound = Vec::with_capacity(same_args.len());
    for arg in same_args {
        let value = args.get(arg).ok_or_else(|| {
            let detail = format!("`{arg}` is missing, so the guard cannot be checked.");
            (detail, after.to_vec())
        })?;
        bound.push((arg, value_digest(value)));
    }
    let wanted = result.map(|check| (&check.pointer, value_digest(&check.equals)));
    let missing: Vec<&str> = after
        .iter()
        .map(String::as_str)
        .filter(|prerequisite| {
            !usage.outcomes(prerequisite).iter().any(|outcome| {
                bound
                    .iter()
                    .all(|(arg, digest)| outcome.args.get(*arg) == Some(digest))
                    && wanted.as_ref().is_none_or(|(pointer, digest)| {
                        outcome.results.get(*pointer) == Some(digest)
                    })
            })
        })
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        let detail = format!(
            "No matching success of `{}` in this session.",
            missing.join("`, `")
        );
        Err((detail, missing.into_iter().map(str::to_owned).collect()))
    }
}

/// An argument as an exact decimal, or why the limit reading it cannot be checked.
pub(crate) fn number_arg(args: &Arguments, arg: &str) -> Result<Decimal, String> {
    let value = args
        .get(arg)
        .ok_or_else(|| format!("`{arg}` is missing, so the limit cannot be checked."))?;
    decimal_from_json(value)
        .map_err(|e: AmountError| format!("`{arg}` {e}, so the limit cannot be checked."))
}

/// A per-call bound on `arg`: a top-level name, or a JSON Pointer whose `*` steps make the
/// bound apply to every item of an array (`/files/*/path`); each value the pointer names
/// must pass.
fn check_bound(arg: &str, check: &ArgCheck, args: &Arguments) -> Result<(), String> {
    if !arg.starts_with('/') {
        return check_value(arg, check, args.get(arg));
    }
    for (path, value) in pointed(args, arg)? {
        check_value(&path, check, value)?;
    }
    Ok(())
}

/// The values a pointer names in `args`, each with its own pointer (`*` replaced by the
/// item's index). A value that is not there is `None`, so its check says it cannot be
/// checked; a `*` on something other than an array cannot be checked either.
fn pointed<'a>(
    args: &'a Arguments,
    pointer: &str,
) -> Result<Vec<(String, Option<&'a Value>)>, String> {
    let escape = |token: &str| token.replace('~', "~0").replace('/', "~1");
    let mut tokens = pointer[1..]
        .split('/')
        .map(|token| token.replace("~1", "/").replace("~0", "~"));
    let first = tokens.next().unwrap_or_default();
    let mut level = vec![(format!("/{}", escape(&first)), args.get(&first))];
    for token in tokens {
        let mut next = Vec::new();
        for (path, value) in level {
            match (token.as_str(), value) {
                ("*", Some(Value::Array(items))) => next.extend(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| (format!("{path}/{i}"), Some(item))),
                ),
                ("*", Some(_)) => {
                    return Err(format!(
                        "`{path}` is not an array, so the limit cannot be checked."
                    ));
                }
                ("*", None) => next.push((format!("{path}/*"), None)),
                (name, value) => {
                    let child = value.and_then(|value| match value {
                        Value::Object(map) => map.get(name),
                        Value::Array(items) => {
                            name.parse::<usize>().ok().and_then(|i| items.get(i))
                        }
                        _ => None,
                    });
                    next.push((format!("{path}/{}", escape(name)), child));
                }
            }
        }
        level = next;
    }
    Ok(level)
}

/// One value against a per-call bound; `arg` names it in the denial.
fn check_value(arg: &str, check: &ArgCheck, value: Option<&Value>) -> Result<(), String> {
    let missing = || format!("`{arg}` is missing, so the limit cannot be checked.");
    let string = || match value {
        Some(Value::String(text)) => Ok(text.as_str()),
        Some(_) => Err(format!(
            "`{arg}` is not a string, so the limit cannot be checked."
        )),
        None => Err(missing()),
    };
    match check {
        ArgCheck::Compare { op, value: bound } => {
            let actual =
                decimal_from_json(value.ok_or_else(missing)?).map_err(|e: AmountError| {
                    format!("`{arg}` {e}, so the limit cannot be checked.")
                })?;
            if op.holds(actual, *bound) {
                Ok(())
            } else {
                Err(format!("This call has `{arg}` = {actual}."))
            }
        }
        ArgCheck::OneOf { values } => {
            let actual = value.ok_or_else(missing)?;
            if values.iter().any(|allowed| same_value(allowed, actual)) {
                Ok(())
            } else {
                Err(format!("This call has `{arg}` = {}.", shown(actual)))
            }
        }
        ArgCheck::MaxLength { max } => {
            let text = string()?;
            if text.chars().count() <= *max {
                Ok(())
            } else {
                Err(format!(
                    "This call's `{arg}` has {} characters.",
                    text.chars().count()
                ))
            }
        }
        ArgCheck::NoShell => match inspect::shell::shell_metacharacter(string()?) {
            None => Ok(()),
            Some(what) => Err(format!("This call's `{arg}` contains {what}.")),
        },
        ArgCheck::PathUnder { root } => inspect::path::path_under_check(string()?, root)
            .map_err(|why| format!("This call's `{arg}` {why}.")),
        ArgCheck::UrlHost { hosts } => inspect::net::url_host_check(string()?, hosts)
            .map_err(|why| format!("This call's `{arg}` {why}.")),
    }
}

/// A value as a denial may quote it: short, so a huge argument cannot flood the audit.
fn shown(value: &Value) -> String {
    const MAX: usize = 80;
    let text = value.to_string();
    if text.chars().count() <= MAX {
        text
    } else {
        let head: String = text.chars().take(MAX).collect();
        format!("{head}…")
    }
}

/// Numbers are equal when their exact decimals are (`5` and `5.0`); other values as JSON.
fn same_value(allowed: &Value, actual: &Value) -> bool {
    match (allowed, actual) {
        (Value::Number(_), Value::Number(_)) => {
            match (decimal_from_json(allowed), decimal_from_json(actual)) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            }
        }
        _ => allowed == actual,
    }
}
