//! Limits: rules a role declares on the tools it grants, stored as tagged JSON.

use std::fmt;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{CatalogError, ToolSpec};
use crate::slug::Slug;

/// A comparison in a per-call argument bound. The catalog document uses it as is (its
/// schema names it `OpDoc`, as it always has).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "OpDoc", description = "A comparison.")]
pub enum CmpOp {
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = "==")]
    Eq,
}

impl CmpOp {
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Lt => "<",
            Self::Le => "<=",
            Self::Gt => ">",
            Self::Ge => ">=",
            Self::Eq => "==",
        }
    }

    pub fn holds(self, left: Decimal, right: Decimal) -> bool {
        match self {
            Self::Lt => left < right,
            Self::Le => left <= right,
            Self::Gt => left > right,
            Self::Ge => left >= right,
            Self::Eq => left == right,
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            Self::Lt => "less than",
            Self::Le => "at most",
            Self::Gt => "greater than",
            Self::Ge => "at least",
            Self::Eq => "exactly",
        }
    }
}

/// What a per-call bound checks about one argument.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "check", rename_all = "snake_case")]
pub enum ArgCheck {
    /// The argument is a number and `argument <op> value` holds, compared exactly.
    Compare { op: CmpOp, value: Decimal },
    /// The argument equals one of these values (numbers compared exactly).
    OneOf { values: Vec<Value> },
    /// The argument is a string of at most `max` characters.
    MaxLength { max: usize },
    /// The argument is a string without shell syntax (read after NFKC): no `;`, `|`, `&`,
    /// `$`, backtick, `<`, `>`, line break or NUL, and no leading `-` (option injection).
    NoShell,
    /// The argument is a path that, normalised as a string, stays under `root`; a relative
    /// path is read from `root`.
    PathUnder { root: String },
    /// The argument is an http(s) URL whose host is one of `hosts` (`*.example.com`: any
    /// subdomain of `example.com`; `*`: any public host) and never a loopback, private,
    /// link-local or metadata one.
    UrlHost { hosts: Vec<String> },
}

/// A rule a role declares on one of its tools. The JSON form is tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Limit {
    /// Every call: `tool.arg` must pass `check`.
    ArgBound {
        tool: String,
        arg: String,
        #[serde(flatten)]
        check: ArgCheck,
    },
    /// A fleet rule. Every call of each tool `tools` names (`*`: every tool the role
    /// grants, or every tool a scope's sessions call; `crm_*`: a glob): each value in the
    /// arguments, at any depth, under a property whose name matches `name` (a glob, any
    /// case), or where the tool's input schema declares `format`, must pass `check`. Only
    /// values of the type the check reads are selected (numbers for `compare`, any for
    /// `one_of`, strings for the others), and an argument left out is not checked: the rule
    /// protects what a call carries without naming every argument of every tool.
    ArgRule {
        tools: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        format: Option<String>,
        #[serde(flatten)]
        check: ArgCheck,
    },
    /// Per session: the sum of `tool.arg` over allowed calls stays at most `max`.
    SumCap {
        tool: String,
        arg: String,
        max: Decimal,
    },
    /// Per session: `tool` is allowed at most `max` times.
    CountCap { tool: String, max: u32 },
    /// `tool` may run only after every tool in `after` has succeeded in the same session.
    /// With `same_args`, only a success whose arguments had the same values as this call's
    /// counts; with `result`, only one whose structured result matched.
    Requires {
        tool: String,
        after: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        same_args: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<ResultCheck>,
    },
    /// `tool` runs only after a reviewer approved that exact call (when `when` holds, if
    /// given); the approval is valid for `expires_in_minutes` (default 15).
    RequiresApproval {
        tool: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        when: Option<ApprovalCondition>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_in_minutes: Option<u32>,
    },
}

/// When a requires-approval limit applies: a numeric argument compared exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalCondition {
    pub arg: String,
    pub op: CmpOp,
    pub value: Decimal,
}

/// How long a hold waits for a reviewer, and an approval stays valid, unless the limit says.
pub const DEFAULT_APPROVAL_MINUTES: u32 = 15;
/// The longest an approval may be configured to stay valid: one day.
pub const MAX_APPROVAL_MINUTES: u32 = 24 * 60;

/// A condition on a prerequisite's structured result: the value at a JSON Pointer equals
/// `equals` (numbers compared exactly, so `1` and `1.0` match).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultCheck {
    pub pointer: String,
    pub equals: Value,
}

/// Longest JSON text of a result condition's value: it is a flag or a status, not a document.
const MAX_RESULT_VALUE: usize = 1024;

impl ResultCheck {
    /// A JSON Pointer (RFC 6901): empty, or `/`-separated tokens where `~` is only `~0` or `~1`.
    fn pointer_is_valid(&self) -> bool {
        let p = self.pointer.as_str();
        if p.is_empty() {
            return true;
        }
        p.starts_with('/')
            && p.split('/').skip(1).all(|token| {
                let mut chars = token.chars().peekable();
                while let Some(c) = chars.next() {
                    if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
                        return false;
                    }
                }
                true
            })
    }
}

/// What a check says an argument must be, after "must have <argument>": `<= 500`,
/// `set to one of …`, …
fn check_words(check: &ArgCheck) -> String {
    match check {
        ArgCheck::Compare { op, value } => format!("{} {value}", op.words()),
        ArgCheck::OneOf { values } => {
            let listed: Vec<String> = values.iter().map(Value::to_string).collect();
            format!("set to one of {}", join_or(&listed))
        }
        ArgCheck::MaxLength { max } => format!("of at most {max} characters"),
        ArgCheck::NoShell => "free of shell syntax: no `;`, `|`, `&`, `$`, backtick, `<`, `>` or line break, in any width, and no leading `-` (an option)".to_owned(),
        ArgCheck::PathUnder { root } => format!(
            "a path under `{root}` (a relative one is read from it) once `.`, `..`, repeated `/` and percent-encoding are resolved (as text: symbolic links are not followed)"
        ),
        ArgCheck::UrlHost { hosts } => {
            let listed: Vec<String> = hosts
                .iter()
                .map(|h| match h.strip_prefix("*.") {
                    _ if h == "*" => "any public host".to_owned(),
                    Some(domain) => format!("any subdomain of `{domain}`"),
                    None => format!("`{h}`"),
                })
                .collect();
            format!(
                "an http or https URL on {}, never a loopback, private, link-local or cloud metadata address",
                join_or(&listed)
            )
        }
    }
}

/// The compact notation of a check on `subject` (`tool.arg`, or a fleet rule's selector).
fn check_notation(subject: &str, check: &ArgCheck) -> String {
    match check {
        ArgCheck::Compare { op, value } => format!("{subject} {} {value}", op.symbol()),
        ArgCheck::OneOf { values } => {
            let listed: Vec<String> = values.iter().map(Value::to_string).collect();
            format!("{subject} in [{}]", listed.join(", "))
        }
        ArgCheck::MaxLength { max } => format!("len({subject}) <= {max}"),
        ArgCheck::NoShell => format!("no_shell({subject})"),
        ArgCheck::PathUnder { root } => format!("{subject} under {root}"),
        ArgCheck::UrlHost { hosts } => format!("host({subject}) in [{}]", hosts.join(", ")),
    }
}

/// Whether a fleet rule's `tools` glob names `tool`.
pub fn tools_match(tools: &str, tool: &str) -> bool {
    wildmatch::WildMatch::new(tools).matches(tool)
}

impl Limit {
    /// The tool this limit bounds; for a fleet rule ([`Limit::ArgRule`]), the glob of the
    /// tools it selects (see [`Limit::bounds`]).
    pub fn tool(&self) -> &str {
        match self {
            Self::ArgBound { tool, .. }
            | Self::SumCap { tool, .. }
            | Self::CountCap { tool, .. }
            | Self::Requires { tool, .. }
            | Self::RequiresApproval { tool, .. } => tool,
            Self::ArgRule { tools, .. } => tools,
        }
    }

    /// Whether this limit binds calls of `tool`.
    pub fn bounds(&self, tool: &str) -> bool {
        match self {
            Self::ArgRule { tools, .. } => tools_match(tools, tool),
            other => other.tool() == tool,
        }
    }

    /// The one readable sentence an agent reads when it learns the role.
    pub fn sentence(&self) -> String {
        match self {
            Self::ArgBound { tool, arg, check } => {
                format!(
                    "Each call to `{tool}` must have `{arg}` {}.",
                    check_words(check)
                )
            }
            Self::ArgRule {
                tools,
                name,
                format,
                check,
            } => {
                let calls = if tools == "*" {
                    "any tool".to_owned()
                } else {
                    format!("a tool matching `{tools}`")
                };
                let mut selected = Vec::new();
                if let Some(name) = name {
                    selected.push(format!("every argument named like `{name}`"));
                }
                if let Some(format) = format {
                    selected.push(format!("every argument of format `{format}`"));
                }
                format!(
                    "Each call to {calls} must have {} {}.",
                    selected.join(" and "),
                    check_words(check)
                )
            }
            Self::SumCap { tool, arg, max } => format!(
                "The `{arg}` of all allowed `{tool}` calls in a session must add up to at most {max}."
            ),
            Self::CountCap { tool, max } => {
                let times = match max {
                    0 => return format!("`{tool}` may not be called at all."),
                    1 => "once".to_owned(),
                    _ => format!("{max} times"),
                };
                format!("`{tool}` may be called at most {times} per session.")
            }
            Self::Requires {
                tool,
                after,
                same_args,
                result,
            } => {
                let listed: Vec<String> = after.iter().map(|t| format!("`{t}`")).collect();
                let verb = if after.len() == 1 { "has" } else { "have" };
                let mut sentence = format!(
                    "`{tool}` may run only after {} {verb} succeeded earlier in the same session",
                    join_and(&listed)
                );
                if !same_args.is_empty() {
                    let args: Vec<String> = same_args.iter().map(|a| format!("`{a}`")).collect();
                    sentence.push_str(&format!(" for the same {}", join_and(&args)));
                }
                if let Some(check) = result {
                    sentence.push_str(&format!(
                        " with a result whose `{}` is {}",
                        check.pointer, check.equals
                    ));
                }
                sentence.push('.');
                sentence
            }
            Self::RequiresApproval { tool, when, .. } => {
                let minutes = self.approval_minutes();
                let condition = when.as_ref().map_or(String::new(), |c| {
                    format!(" when `{}` is {} {}", c.arg, c.op.words(), c.value)
                });
                format!(
                    "`{tool}` needs a reviewer's approval of the exact call before it runs{condition}; an approval is valid for {minutes} minutes."
                )
            }
        }
    }

    /// How long a hold of this limit waits, and its approval stays valid, in minutes.
    pub fn approval_minutes(&self) -> u32 {
        match self {
            Self::RequiresApproval {
                expires_in_minutes, ..
            } => expires_in_minutes.unwrap_or(DEFAULT_APPROVAL_MINUTES),
            _ => DEFAULT_APPROVAL_MINUTES,
        }
    }

    /// Checks the limit against the tool it bounds, as declared by `role`.
    ///
    /// `tool_spec` finds a tool of the catalog by name; `granted` says whether `role` grants it.
    pub fn validate<'c>(
        &self,
        role: &Slug,
        tool_spec: impl Fn(&str) -> Option<&'c ToolSpec>,
        granted: impl Fn(&str) -> bool,
    ) -> Result<(), CatalogError> {
        let tool = self.tool();
        if let Self::ArgRule {
            name,
            format,
            check,
            ..
        } = self
        {
            return validate_fleet(tool, name.as_deref(), format.as_deref(), check);
        }
        let spec = tool_spec(tool).ok_or_else(|| CatalogError::UnknownTool(tool.to_owned()))?;
        if !granted(tool) {
            return Err(CatalogError::ToolNotGranted {
                role: role.clone(),
                tool: tool.to_owned(),
            });
        }
        let arg_kind = |arg: &str| {
            argument_kind(spec, arg).ok_or_else(|| CatalogError::UnknownArgument {
                tool: tool.to_owned(),
                arg: arg.to_owned(),
            })
        };
        let not_numeric = |arg: &str| CatalogError::NotNumeric {
            tool: tool.to_owned(),
            arg: arg.to_owned(),
        };
        match self {
            Self::ArgBound { arg, check, .. } => {
                let kind = arg_kind(arg)?;
                let invalid = |reason: String| CatalogError::InvalidArgCheck {
                    tool: tool.to_owned(),
                    arg: arg.clone(),
                    reason,
                };
                match check {
                    ArgCheck::Compare { .. } if !kind.numeric => return Err(not_numeric(arg)),
                    ArgCheck::MaxLength { .. }
                    | ArgCheck::NoShell
                    | ArgCheck::PathUnder { .. }
                    | ArgCheck::UrlHost { .. }
                        if !kind.string =>
                    {
                        return Err(CatalogError::NotString {
                            tool: tool.to_owned(),
                            arg: arg.clone(),
                        });
                    }
                    _ => validate_check(tool, check, invalid)?,
                }
            }
            Self::ArgRule { .. } => unreachable!("a fleet rule was checked above"),
            Self::SumCap { arg, max, .. } => {
                if !arg_kind(arg)?.numeric {
                    return Err(not_numeric(arg));
                }
                if max.is_sign_negative() {
                    return Err(CatalogError::NegativeCap {
                        tool: tool.to_owned(),
                    });
                }
            }
            Self::CountCap { .. } => {}
            Self::RequiresApproval {
                when,
                expires_in_minutes,
                ..
            } => {
                if let Some(condition) = when
                    && !arg_kind(&condition.arg)?.numeric
                {
                    return Err(not_numeric(&condition.arg));
                }
                if expires_in_minutes.is_some_and(|m| m == 0 || m > MAX_APPROVAL_MINUTES) {
                    return Err(CatalogError::ApprovalExpiry {
                        tool: tool.to_owned(),
                        max: MAX_APPROVAL_MINUTES,
                    });
                }
            }
            Self::Requires {
                after,
                same_args,
                result,
                ..
            } => {
                if after.is_empty() {
                    return Err(CatalogError::EmptyLimit {
                        tool: tool.to_owned(),
                        what: "no required tools",
                    });
                }
                for required in after {
                    if required == tool {
                        return Err(CatalogError::RequiresItself {
                            tool: tool.to_owned(),
                        });
                    }
                    let Some(required_spec) = tool_spec(required) else {
                        return Err(CatalogError::UnknownTool(required.clone()));
                    };
                    // A bound argument must exist on both sides to be compared.
                    for arg in same_args {
                        if argument_kind(required_spec, arg).is_none() {
                            return Err(CatalogError::UnknownArgument {
                                tool: required.clone(),
                                arg: arg.clone(),
                            });
                        }
                    }
                }
                let mut seen = std::collections::HashSet::new();
                for arg in same_args {
                    arg_kind(arg)?;
                    if !seen.insert(arg.as_str()) {
                        return Err(CatalogError::Duplicate(arg.clone()));
                    }
                }
                if let Some(check) = result {
                    if !check.pointer_is_valid() {
                        return Err(CatalogError::InvalidPointer {
                            tool: tool.to_owned(),
                            pointer: check.pointer.clone(),
                        });
                    }
                    if check.equals.to_string().len() > MAX_RESULT_VALUE {
                        return Err(CatalogError::ResultValueTooLong {
                            tool: tool.to_owned(),
                            max: MAX_RESULT_VALUE,
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

/// What every check needs, whatever it reads: values to allow, a root that is one, hosts
/// that parse.
fn validate_check(
    tool: &str,
    check: &ArgCheck,
    invalid: impl Fn(String) -> CatalogError,
) -> Result<(), CatalogError> {
    match check {
        ArgCheck::OneOf { values } if values.is_empty() => Err(CatalogError::EmptyLimit {
            tool: tool.to_owned(),
            what: "no allowed values",
        }),
        ArgCheck::PathUnder { root } => crate::inspect::path::normalize(root)
            .map(|_| ())
            .map_err(|e| invalid(format!("the root `{root}` {e}"))),
        ArgCheck::UrlHost { hosts } if hosts.is_empty() => Err(CatalogError::EmptyLimit {
            tool: tool.to_owned(),
            what: "no allowed hosts",
        }),
        ArgCheck::UrlHost { hosts } => hosts.iter().try_for_each(|entry| {
            crate::inspect::net::HostEntry::parse(entry)
                .map(|_| ())
                .map_err(&invalid)
        }),
        _ => Ok(()),
    }
}

/// A fleet rule names its tools (a glob), selects arguments by a name glob or a schema
/// `format` (or both, neither empty), and carries a valid check. Which tools it reaches
/// is the catalog's business at compile time: a glob that matches none yet binds none.
fn validate_fleet(
    tools: &str,
    name: Option<&str>,
    format: Option<&str>,
    check: &ArgCheck,
) -> Result<(), CatalogError> {
    let empty = |what| CatalogError::EmptyLimit {
        tool: tools.to_owned(),
        what,
    };
    if tools.trim().is_empty() {
        return Err(empty(
            "no tool glob: write `*` for every tool, or a glob like `crm_*`",
        ));
    }
    if name.is_none() && format.is_none() {
        return Err(empty(
            "no argument selector: give `name` (a glob), `format`, or both",
        ));
    }
    if name.is_some_and(|n| n.trim().is_empty()) || format.is_some_and(|f| f.trim().is_empty()) {
        return Err(empty("an empty argument selector"));
    }
    let selector = name.or(format).unwrap_or_default();
    validate_check(tools, check, |reason| CatalogError::InvalidArgCheck {
        tool: tools.to_owned(),
        arg: selector.to_owned(),
        reason,
    })
}

/// The compact notation admins write and the console shows, e.g. `sum(process_refund.amount) <= 1000`.
impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ArgBound { tool, arg, check } => {
                f.write_str(&check_notation(&format!("{tool}.{arg}"), check))
            }
            Self::ArgRule {
                tools,
                name,
                format,
                check,
            } => {
                let mut selected = Vec::new();
                if let Some(name) = name {
                    selected.push(format!("name ~ {name}"));
                }
                if let Some(format) = format {
                    selected.push(format!("format {format}"));
                }
                let subject = format!("{tools}.[{}]", selected.join(" | "));
                f.write_str(&check_notation(&subject, check))
            }
            Self::SumCap { tool, arg, max } => write!(f, "sum({tool}.{arg}) <= {max}"),
            Self::CountCap { tool, max } => write!(f, "count({tool}) <= {max}"),
            Self::Requires {
                tool,
                after,
                same_args,
                result,
            } => {
                write!(f, "{tool} requires {}", after.join(", "))?;
                if !same_args.is_empty() {
                    write!(f, " (same {})", same_args.join(", "))?;
                }
                if let Some(check) = result {
                    write!(f, " where {} == {}", check.pointer, check.equals)?;
                }
                Ok(())
            }
            Self::RequiresApproval { tool, when, .. } => {
                write!(f, "{tool} requires approval")?;
                if let Some(c) = when {
                    write!(f, " when {} {} {}", c.arg, c.op.symbol(), c.value)?;
                }
                write!(f, " ({} min)", self.approval_minutes())
            }
        }
    }
}

struct ArgKind {
    numeric: bool,
    string: bool,
}

/// The declared JSON type of an argument; `None` when the schema does not declare it. An
/// argument is a top-level name (`amount`), or a JSON Pointer into the arguments where `*`
/// stands for every item of an array (`/lines/*/amount`), followed through the schema's
/// `properties` and `items`.
fn argument_kind(spec: &ToolSpec, arg: &str) -> Option<ArgKind> {
    let property = match arg.strip_prefix('/') {
        None => spec.input_schema.get("properties")?.get(arg)?,
        Some(pointer) => {
            let mut node = &spec.input_schema;
            for token in pointer.split('/') {
                node = if token == "*" {
                    node.get("items").filter(|items| items.is_object())?
                } else {
                    let name = token.replace("~1", "/").replace("~0", "~");
                    node.get("properties")?.get(&name)?
                };
            }
            node
        }
    };
    let types: Vec<&str> = match property.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => Vec::new(),
    };
    let all = |wanted: &[&str]| !types.is_empty() && types.iter().all(|t| wanted.contains(t));
    Some(ArgKind {
        numeric: all(&["number", "integer"]),
        string: all(&["string"]),
    })
}

fn join_and(items: &[String]) -> String {
    join_with(items, "and")
}

fn join_or(items: &[String]) -> String {
    join_with(items, "or")
}

fn join_with(items: &[String], word: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} {word} {last}", init.join(", ")),
    }
}
