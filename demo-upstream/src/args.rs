//! Typed access to a tool call's arguments, checked against the tool's closed schema.
//!
//! The gateway validates arguments before it forwards a call, but an upstream must not
//! trust its caller: these checks keep the demo honest when it is called directly.

use std::fmt;

use serde_json::{Map, Value};
use skillgate_core::model::ToolSpec;

use super::error::ToolError;

/// An amount of money in whole cents, so that balances and caps add up exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Cents(pub i64);

impl Cents {
    pub const fn dollars(dollars: i64) -> Self {
        Self(dollars * 100)
    }

    /// The amount as a JSON number with two decimals (`129.00`).
    pub fn to_json(self) -> Value {
        serde_json::from_str(&self.to_string()).unwrap_or(Value::Null)
    }
}

impl fmt::Display for Cents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        write!(f, "{sign}{}.{:02}", abs / 100, abs % 100)
    }
}

impl std::ops::Add for Cents {
    type Output = Self;
    fn add(self, other: Self) -> Self {
        Self(self.0 + other.0)
    }
}

impl std::ops::Sub for Cents {
    type Output = Self;
    fn sub(self, other: Self) -> Self {
        Self(self.0 - other.0)
    }
}

/// The largest amount any demo tool accepts; beyond it a number is a mistake, not money.
const MAX_AMOUNT: f64 = 1_000_000.0;

pub struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// Rejects arguments the schema does not declare and required ones that are missing.
    pub fn check(spec: &ToolSpec, map: &'a Map<String, Value>) -> Result<Self, ToolError> {
        let schema = &spec.input_schema;
        let declared = schema["properties"].as_object();
        if let Some(unknown) = map
            .keys()
            .find(|key| declared.is_none_or(|d| !d.contains_key(*key)))
        {
            return Err(ToolError::invalid(format!(
                "{} does not take an argument named {unknown}",
                spec.name
            )));
        }
        let required = schema["required"].as_array().into_iter().flatten();
        if let Some(missing) = required
            .filter_map(Value::as_str)
            .find(|name| !map.contains_key(*name))
        {
            return Err(ToolError::invalid(format!(
                "{} requires the argument {missing}",
                spec.name
            )));
        }
        Ok(Self { map })
    }

    pub fn str(&self, name: &str) -> Result<&'a str, ToolError> {
        self.opt_str(name)?
            .ok_or_else(|| ToolError::invalid(format!("{name} is required")))
    }

    pub fn opt_str(&self, name: &str) -> Result<Option<&'a str>, ToolError> {
        match self.map.get(name) {
            None => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim())),
            Some(Value::String(_)) => Err(ToolError::invalid(format!("{name} must not be empty"))),
            Some(other) => Err(wrong_type(name, "a string", other)),
        }
    }

    pub fn one_of(&self, name: &str, allowed: &[&str]) -> Result<&'a str, ToolError> {
        let value = self.str(name)?;
        if allowed.contains(&value) {
            Ok(value)
        } else {
            Err(ToolError::invalid(format!(
                "{name} must be one of {}, not {value:?}",
                allowed.join(", ")
            )))
        }
    }

    /// Whether the call carries `name` at all (for optional arguments).
    pub fn has(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    pub fn bool(&self, name: &str) -> Result<bool, ToolError> {
        match self.map.get(name) {
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(wrong_type(name, "true or false", other)),
            None => Err(ToolError::invalid(format!("{name} is required"))),
        }
    }

    pub fn int_in(&self, name: &str, min: i64, max: i64) -> Result<i64, ToolError> {
        let value = match self.map.get(name) {
            Some(value @ Value::Number(n)) => {
                integer(n).ok_or_else(|| wrong_type(name, "a whole number", value))?
            }
            Some(other) => return Err(wrong_type(name, "a whole number", other)),
            None => return Err(ToolError::invalid(format!("{name} is required"))),
        };
        if (min..=max).contains(&value) {
            Ok(value)
        } else {
            Err(ToolError::invalid(format!(
                "{name} must be between {min} and {max}, not {value}"
            )))
        }
    }

    /// A positive amount of money with at most two decimals.
    pub fn money(&self, name: &str) -> Result<Cents, ToolError> {
        let number = match self.map.get(name) {
            Some(Value::Number(n)) => n,
            Some(other) => return Err(wrong_type(name, "a number", other)),
            None => return Err(ToolError::invalid(format!("{name} is required"))),
        };
        let amount = number
            .as_f64()
            .filter(|a| a.is_finite() && *a <= MAX_AMOUNT)
            .ok_or_else(|| ToolError::invalid(format!("{name} {number} is out of range")))?;
        if amount <= 0.0 {
            return Err(ToolError::invalid(format!(
                "{name} must be greater than 0, not {number}"
            )));
        }
        let cents = (amount * 100.0).round();
        if (amount * 100.0 - cents).abs() > 1e-6 {
            return Err(ToolError::invalid(format!(
                "{name} {number} has more than two decimals"
            )));
        }
        Ok(Cents(cents as i64))
    }
}

fn integer(n: &serde_json::Number) -> Option<i64> {
    n.as_i64().or_else(|| {
        let f = n.as_f64()?;
        (f.fract() == 0.0 && f.abs() < 1e15).then_some(f as i64)
    })
}

fn wrong_type(name: &str, expected: &str, got: &Value) -> ToolError {
    let kind = match got {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    ToolError::invalid(format!("{name} must be {expected}, not {kind}"))
}
