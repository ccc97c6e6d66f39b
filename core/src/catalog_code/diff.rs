//! What a planned change sets, value by value, with the old and the new value: what a
//! reviewer of `catalog apply --dry-run` (or of a GitOps pull request) needs to judge a
//! change without opening both files. `limits[1].max: 1000 → 900` says more than
//! `limits[1]`.
//!
//! Pure: two JSON values in (an entity before and after, in its document form), the leaves
//! that differ out. Lists of plain values (a skill's tools, a scope's roles) are one value,
//! so adding a role to a scope reads as one line; lists of objects (limits) are compared
//! item by item.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

/// One value a change sets. `None`: absent on that side (a field added or removed).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    /// Where, in the document's words: `limits[1].max`, `instructions`.
    pub path: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// The leaves of `before` and `after` that differ, in document order (keys sorted).
pub fn field_changes(before: &Value, after: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    walk(String::new(), Some(before), Some(after), &mut out);
    out
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn is_plain_list(items: &[Value]) -> bool {
    items
        .iter()
        .all(|v| !matches!(v, Value::Object(_) | Value::Array(_)))
}

fn walk(path: String, before: Option<&Value>, after: Option<&Value>, out: &mut Vec<FieldChange>) {
    if before == after {
        return;
    }
    match (before, after) {
        (Some(Value::Object(b)), Some(Value::Object(a))) => {
            let keys: std::collections::BTreeSet<&String> = b.keys().chain(a.keys()).collect();
            for key in keys {
                walk(join(&path, key), b.get(key), a.get(key), out);
            }
        }
        (Some(Value::Array(b)), Some(Value::Array(a)))
            if !(is_plain_list(b) && is_plain_list(a)) =>
        {
            for i in 0..b.len().max(a.len()) {
                walk(format!("{path}[{i}]"), b.get(i), a.get(i), out);
            }
        }
        _ => out.push(FieldChange {
            path,
            before: before.filter(|v| !v.is_null()).cloned(),
            after: after.filter(|v| !v.is_null()).cloned(),
        }),
    }
}

/// The longest text shown whole; a longer one is shown around its first difference.
const SHOWN: usize = 60;

impl fmt::Display for FieldChange {
    /// `limits[1].max: 1000 → 900`; `(none)` for an absent side; a long text as an excerpt
    /// around where the two first differ, with its length.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (before, after) = match (&self.before, &self.after) {
            (Some(Value::String(b)), Some(Value::String(a)))
                if b.chars().count() > SHOWN || a.chars().count() > SHOWN =>
            {
                let from = common_prefix(b, a).saturating_sub(SHOWN / 3);
                (excerpt(b, from), excerpt(a, from))
            }
            (b, a) => (shown(b.as_ref()), shown(a.as_ref())),
        };
        write!(f, "{}: {before} → {after}", self.path)
    }
}

/// How many characters `a` and `b` share at the start.
fn common_prefix(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// `SHOWN` characters of `text` from character `from`, quoted, with `…` where cut, and
/// the whole length.
fn excerpt(text: &str, from: usize) -> String {
    let total = text.chars().count();
    let part: String = text.chars().skip(from).take(SHOWN).collect();
    let quoted = Value::String(part).to_string();
    let lead = if from > 0 { "…" } else { "" };
    let tail = if from + SHOWN < total { "…" } else { "" };
    format!("{lead}{quoted}{tail} ({total} characters)")
}

fn shown(value: Option<&Value>) -> String {
    match value {
        None => "(none)".to_owned(),
        Some(Value::String(text)) if text.chars().count() > SHOWN => excerpt(text, 0),
        Some(value) => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn lines(before: Value, after: Value) -> Vec<String> {
        field_changes(&before, &after)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_changed_limit_reads_as_its_path_with_the_old_and_new_value() {
        let before = json!({"name": "t1", "limits": [
            {"kind": "arg_bound", "max": "500"}, {"kind": "sum_cap", "max": "1000"}]});
        let after = json!({"name": "t1", "limits": [
            {"kind": "arg_bound", "max": "500"}, {"kind": "sum_cap", "max": "900"}]});
        assert_eq!(lines(before, after), [r#"limits[1].max: "1000" → "900""#]);
    }

    #[test]
    fn a_list_of_names_is_one_value_and_added_or_removed_items_say_none() {
        let before = json!({"roles": ["a", "b"], "limits": [{"kind": "count_cap"}]});
        let after = json!({"roles": ["a", "b", "c"], "limits": [], "note": "new"});
        assert_eq!(
            lines(before, after),
            [
                r#"limits[0]: {"kind":"count_cap"} → (none)"#,
                r#"note: (none) → "new""#,
                r#"roles: ["a","b"] → ["a","b","c"]"#,
            ]
        );
    }

    #[test]
    fn a_long_text_is_shown_around_its_first_difference_with_its_length() {
        let same = "Identify the customer before anything else. ".repeat(4);
        let before = json!({"instructions": format!("{same}Refunds up to 500.")});
        let after = json!({"instructions": format!("{same}Refunds up to 450.")});
        let [line] = lines(before, after).try_into().unwrap();
        assert!(line.starts_with("instructions: …\""), "{line}");
        assert!(
            line.contains("Refunds up to 500.\" (194 characters)"),
            "{line}"
        );
        assert!(
            line.contains("Refunds up to 450.\" (194 characters)"),
            "{line}"
        );
        assert!(line.chars().count() < 200, "{line}");
    }

    #[test]
    fn equal_values_have_no_changes() {
        let value = json!({"a": [1, {"b": 2}], "c": "d"});
        assert!(field_changes(&value, &value).is_empty());
    }
}
