//! What would satisfy the rule that refused a call: the machine-readable half of a denial,
//! so a client can act on it (start a session, learn a role, lower an amount, call a
//! prerequisite first, wait for a reviewer) without parsing the sentence a model reads.
//!
//! Tagged by `type`, as SEP-2643's remediation hints are: a client ignores a type it does
//! not know. Decimal amounts are strings, exact as the caps count them.

use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::model::{ArgCheck, CmpOp};

/// One remedy.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Remedy {
    /// The session is unknown, expired or another key's: call `init_skilder` for a new one.
    StartSession,
    /// Learning this path (`/roles/<role>`, a role of the session's scope) unlocks the tool.
    Learn { path: String },
    /// Each of these tools must first succeed in this session (with the same values of
    /// `same_args`, when given, and a result that meets the guard's condition, when it has one).
    SucceedFirst {
        tools: Vec<String>,
        same_args: Vec<String>,
    },
    /// The value at `at` (an argument name, or a JSON Pointer into the arguments) must pass
    /// `bound`, the check as the catalog declares it.
    Argument { at: String, bound: ArgumentBound },
    /// A cumulative cap on `arg`: at most `remaining` more fits in this session.
    Cap {
        arg: String,
        max: String,
        used: String,
        remaining: String,
    },
    /// A call-count cap: the tool may run `max` times a session and ran `used` times.
    CallCount { max: u32, used: u32 },
    /// A reviewer must approve this exact call: it waits as `hold_id` until `expires_at`
    /// (RFC 3339); once approved, `call_tool` with `{"hold_id": …}` runs it once.
    WaitForApproval { hold_id: String, expires_at: String },
    /// The hold expired: making the same call again raises a new one.
    CallAgain,
}

/// A per-call bound as a remedy states it: the catalog's own form of [`ArgCheck`], with
/// numbers as exact decimal strings.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "check", rename_all = "snake_case")]
pub enum ArgumentBound {
    /// The value is a number and `value <op> limit` holds.
    Compare { op: CmpOp, limit: String },
    /// The value equals one of these.
    OneOf { values: Vec<Value> },
    /// The value is a string of at most `max` characters.
    MaxLength { max: usize },
    /// The value is a string without shell syntax.
    NoShell,
    /// The value is a path under `root`.
    PathUnder { root: String },
    /// The value is an http(s) URL on one of `hosts`.
    UrlHost { hosts: Vec<String> },
}

impl From<&ArgCheck> for ArgumentBound {
    fn from(check: &ArgCheck) -> Self {
        match check {
            ArgCheck::Compare { op, value } => Self::Compare {
                op: *op,
                limit: value.normalize().to_string(),
            },
            ArgCheck::OneOf { values } => Self::OneOf {
                values: values.clone(),
            },
            ArgCheck::MaxLength { max } => Self::MaxLength { max: *max },
            ArgCheck::NoShell => Self::NoShell,
            ArgCheck::PathUnder { root } => Self::PathUnder { root: root.clone() },
            ArgCheck::UrlHost { hosts } => Self::UrlHost {
                hosts: hosts.clone(),
            },
        }
    }
}

impl Remedy {
    pub(crate) fn learn(role: &str) -> Self {
        Self::Learn {
            path: format!("/roles/{role}"),
        }
    }

    pub(crate) fn argument(at: &str, check: &ArgCheck) -> Self {
        Self::Argument {
            at: at.to_owned(),
            bound: ArgumentBound::from(check),
        }
    }

    pub(crate) fn cap(arg: &str, max: Decimal, used: Decimal) -> Self {
        let remaining = (max - used).max(Decimal::ZERO);
        Self::Cap {
            arg: arg.to_owned(),
            max: max.normalize().to_string(),
            used: used.normalize().to_string(),
            remaining: remaining.normalize().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cap_remedy_says_what_still_fits_as_exact_strings() {
        let remedy = Remedy::cap("amount", Decimal::new(500, 0), Decimal::new(4505, 1));
        assert_eq!(
            serde_json::to_value(remedy).unwrap(),
            json!({"type": "cap", "arg": "amount", "max": "500", "used": "450.5", "remaining": "49.5"})
        );
    }

    #[test]
    fn a_cap_already_overspent_has_nothing_remaining() {
        let Remedy::Cap { remaining, .. } =
            Remedy::cap("amount", Decimal::new(100, 0), Decimal::new(120, 0))
        else {
            panic!("a cap remedy")
        };
        assert_eq!(remaining, "0");
    }

    #[test]
    fn a_compare_bound_reads_as_the_catalog_declares_it() {
        let check = ArgCheck::Compare {
            op: CmpOp::Le,
            value: Decimal::new(2000, 1),
        };
        assert_eq!(
            serde_json::to_value(Remedy::argument("amount", &check)).unwrap(),
            json!({"type": "argument", "at": "amount", "bound": {"check": "compare", "op": "<=", "limit": "200"}})
        );
    }
}
