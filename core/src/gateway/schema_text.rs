//! Tool arguments as the model reads them: a compact, line-per-argument rendering of a
//! tool's JSON Schema for the `learn` text.
//!
//! A schema pasted as JSON costs its quotes twice (once in the schema, once escaped in the
//! tool result) and repeats keywords the model does not need spelled out. Function-calling
//! models are commonly shown signatures in this style rather than raw schemas. Nothing is
//! dropped: every keyword is either rendered or, when this module does not know it, the
//! subschema is shown as compact JSON. The gateway validates every call against the full
//! schema regardless of how it was shown.

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// Keywords rendered below; any other keyword makes its subschema fall back to JSON.
const KNOWN: &[&str] = &[
    "type",
    "description",
    "title",
    "enum",
    "const",
    "default",
    "pattern",
    "format",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "items",
    "minItems",
    "maxItems",
    "uniqueItems",
    "properties",
    "required",
    "additionalProperties",
    "minProperties",
    "maxProperties",
    "$schema",
];

/// The arguments of a tool: a header line, then one `- name[?]: type. description` line per
/// argument, each prefixed with `indent`. `None` when the schema is not an object schema
/// this module can render whole; the caller then shows the JSON.
pub fn render_arguments(schema: &Value, indent: &str) -> Option<String> {
    let object = schema.as_object()?;
    if !known_keywords(object) || object.get("type").and_then(Value::as_str) != Some("object") {
        return None;
    }
    let properties = object
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut notes = Vec::new();
    if let Some(min) = object.get("minProperties").and_then(Value::as_u64) {
        notes.push(format!("at least {min}"));
    }
    if let Some(max) = object.get("maxProperties").and_then(Value::as_u64) {
        notes.push(format!("at most {max}"));
    }
    match object.get("additionalProperties") {
        Some(Value::Bool(false)) => notes.push("no others".to_owned()),
        None | Some(Value::Bool(true)) => {}
        // A schema for the extra arguments: say so rather than lose it.
        Some(other) => notes.push(format!("others: {}", type_text(other))),
    }
    let required = required_names(object);
    if properties.is_empty() && required.is_empty() {
        return Some(format!("{indent}Arguments: none"));
    }
    let mut out = format!("{indent}Arguments");
    if !notes.is_empty() {
        let _ = write!(out, " ({})", notes.join("; "));
    }
    out.push(':');
    for (name, property) in &properties {
        let optional = if required.contains(&name.as_str()) {
            ""
        } else {
            "?"
        };
        let _ = write!(out, "\n{indent}- {name}{optional}: {}", type_text(property));
        if let Some(description) = own_description(property) {
            let _ = write!(out, ". {description}");
        }
    }
    // A required name without a property schema is still required.
    for name in required
        .iter()
        .filter(|name| !properties.contains_key(**name))
    {
        let _ = write!(out, "\n{indent}- {name}: any");
    }
    Some(out)
}

fn known_keywords(object: &Map<String, Value>) -> bool {
    object.keys().all(|key| KNOWN.contains(&key.as_str()))
}

fn required_names(object: &Map<String, Value>) -> Vec<&str> {
    object
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The description to print after a rendered type; none when the type fell back to JSON,
/// which carries it already.
fn own_description(schema: &Value) -> Option<&str> {
    if !schema.as_object().is_some_and(known_keywords) {
        return None;
    }
    schema
        .get("description")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.strip_suffix('.').unwrap_or(d))
}

/// The type of one subschema, with its constraints, on one line.
fn type_text(schema: &Value) -> String {
    let Some(object) = schema.as_object() else {
        // `true`, `false` or something that is not a schema: show it as it is.
        return schema.to_string();
    };
    if !known_keywords(object) {
        return compact_json(schema);
    }
    let mut text = if let Some(values) = object.get("enum").and_then(Value::as_array) {
        format!(
            "one of {}",
            values.iter().map(literal).collect::<Vec<_>>().join("|")
        )
    } else if let Some(value) = object.get("const") {
        format!("exactly {}", literal(value))
    } else {
        match object.get("type") {
            Some(Value::String(kind)) => base_type(kind, object),
            Some(Value::Array(kinds)) => kinds
                .iter()
                .filter_map(Value::as_str)
                .map(|kind| base_type(kind, object))
                .collect::<Vec<_>>()
                .join(" or "),
            _ => "any".to_owned(),
        }
    };
    if let Some(default) = object.get("default") {
        let _ = write!(text, ", default {}", literal(default));
    }
    text
}

fn base_type(kind: &str, object: &Map<String, Value>) -> String {
    let mut parts = Vec::new();
    match kind {
        "string" => {
            parts.push("string".to_owned());
            if let Some(format) = object.get("format").and_then(Value::as_str) {
                parts.push(format!("format {format}"));
            }
            if let Some(pattern) = object.get("pattern").and_then(Value::as_str) {
                parts.push(format!("matching {pattern}"));
            }
            length(object, "minLength", "maxLength", "chars", &mut parts);
        }
        "number" | "integer" => {
            parts.push(kind.to_owned());
            for (keyword, sign) in [
                ("minimum", ">="),
                ("exclusiveMinimum", ">"),
                ("maximum", "<="),
                ("exclusiveMaximum", "<"),
            ] {
                if let Some(bound) = object.get(keyword) {
                    parts.push(format!("{sign} {bound}"));
                }
            }
            if let Some(step) = object.get("multipleOf") {
                parts.push(format!("multiple of {step}"));
            }
        }
        "array" => {
            let items = object
                .get("items")
                .map(type_text)
                .unwrap_or_else(|| "any".to_owned());
            parts.push(format!("array of ({items})"));
            length(object, "minItems", "maxItems", "items", &mut parts);
            if object.get("uniqueItems") == Some(&Value::Bool(true)) {
                parts.push("unique".to_owned());
            }
        }
        "object" => parts.push(object_text(object)),
        other => parts.push(other.to_owned()),
    }
    parts.join(", ")
}

fn length(object: &Map<String, Value>, min: &str, max: &str, unit: &str, parts: &mut Vec<String>) {
    match (
        object.get(min).and_then(Value::as_u64),
        object.get(max).and_then(Value::as_u64),
    ) {
        (Some(1), None) if unit == "chars" => parts.push("non-empty".to_owned()),
        (Some(min), None) => parts.push(format!("at least {min} {unit}")),
        (None, Some(max)) => parts.push(format!("at most {max} {unit}")),
        (Some(min), Some(max)) => parts.push(format!("{min} to {max} {unit}")),
        (None, None) => {}
    }
}

/// A nested object on one line: `object {a: string; b?: integer}`.
fn object_text(object: &Map<String, Value>) -> String {
    let required = required_names(object);
    let fields: Vec<String> = object
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .map(|(name, property)| {
                    let optional = if required.contains(&name.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    let mut field = format!("{name}{optional}: {}", type_text(property));
                    if let Some(description) = own_description(property) {
                        let _ = write!(field, " ({description})");
                    }
                    field
                })
                .collect()
        })
        .unwrap_or_default();
    let mut text = format!("object {{{}}}", fields.join("; "));
    match object.get("additionalProperties") {
        Some(Value::Bool(false)) => text.push_str(" with no other keys"),
        None | Some(Value::Bool(true)) => {}
        Some(other) => {
            let _ = write!(text, " with other keys: {}", type_text(other));
        }
    }
    for (keyword, words) in [("minProperties", "at least"), ("maxProperties", "at most")] {
        if let Some(n) = object.get(keyword).and_then(Value::as_u64) {
            let _ = write!(text, ", {words} {n} keys");
        }
    }
    text
}

/// A value as the model should type it: bare when it is a plain word, JSON otherwise.
fn literal(value: &Value) -> String {
    match value {
        Value::String(text)
            if !text.is_empty()
                && text
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) =>
        {
            text.clone()
        }
        other => other.to_string(),
    }
}

fn compact_json(schema: &Value) -> String {
    format!("JSON Schema {schema}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_object_schema_becomes_one_line_per_argument_with_every_constraint() {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "minProperties": 1,
            "required": ["amount"],
            "properties": {
                "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 500, "description": "In USD."},
                "customer_id": {"type": "string", "pattern": "^C-[0-9]{4}$", "description": "The customer id."},
                "email": {"type": "string", "format": "email"},
                "priority": {"type": "string", "enum": ["low", "high urgent"]},
                "reason": {"type": "string", "minLength": 1},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            }
        });
        assert_eq!(
            render_arguments(&schema, "  ").unwrap(),
            "  Arguments (at least 1; no others):\n\
             \x20 - amount: number, > 0, <= 500. In USD\n\
             \x20 - customer_id?: string, matching ^C-[0-9]{4}$. The customer id\n\
             \x20 - email?: string, format email\n\
             \x20 - priority?: one of low|\"high urgent\"\n\
             \x20 - reason?: string, non-empty\n\
             \x20 - tags?: array of (string), at most 3 items"
        );
    }

    #[test]
    fn an_unknown_keyword_shows_that_subschema_as_json_and_keeps_the_rest() {
        let schema = json!({
            "type": "object",
            "required": ["target"],
            "properties": {
                "target": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                "note": {"type": "string"}
            }
        });
        let text = render_arguments(&schema, "").unwrap();
        assert!(
            text.contains(
                r#"- target: JSON Schema {"oneOf":[{"type":"string"},{"type":"integer"}]}"#
            ),
            "{text}"
        );
        assert!(text.contains("- note?: string"), "{text}");
    }

    #[test]
    fn a_schema_that_is_not_a_plain_object_schema_is_left_to_the_caller() {
        assert_eq!(render_arguments(&json!({"type": "string"}), ""), None);
        assert_eq!(
            render_arguments(&json!({"type": "object", "anyOf": []}), ""),
            None
        );
        assert_eq!(render_arguments(&json!(true), ""), None);
    }

    #[test]
    fn nested_objects_and_required_names_without_a_schema_are_kept() {
        let schema = json!({
            "type": "object",
            "required": ["address", "id"],
            "properties": {
                "address": {
                    "type": "object",
                    "required": ["city"],
                    "additionalProperties": false,
                    "properties": {"city": {"type": "string"}, "zip": {"type": "string", "description": "Postal code"}}
                }
            }
        });
        assert_eq!(
            render_arguments(&schema, "").unwrap(),
            "Arguments:\n\
             - address: object {city: string; zip?: string (Postal code)} with no other keys\n\
             - id: any"
        );
    }

    #[test]
    fn an_object_without_properties_says_it_takes_no_arguments() {
        let schema = json!({"type": "object", "additionalProperties": false, "properties": {}});
        assert_eq!(render_arguments(&schema, "").unwrap(), "Arguments: none");
    }
}
