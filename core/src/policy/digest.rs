//! Digests of JSON values that bound guards compare, equal whenever the values are.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::amount::decimal_from_json;

/// Hex SHA-256 of the value's canonical text: object keys sorted (serde_json's map is
/// ordered), and every number that is an exact decimal written in its normal form, so
/// `5`, `5.0` and `5e0` have one digest. Numbers outside the exact range keep their text.
pub fn value_digest(value: &Value) -> String {
    let mut text = String::new();
    write_canonical(&mut text, value);
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn write_canonical(out: &mut String, value: &Value) {
    match value {
        Value::Number(number) => match decimal_from_json(value) {
            Ok(exact) => out.push_str(&exact.normalize().to_string()),
            Err(_) => out.push_str(&number.to_string()),
        },
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (index, (key, item)) in map.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(out, item);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parsed(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn equal_numbers_written_differently_have_one_digest() {
        assert_eq!(value_digest(&parsed("5")), value_digest(&parsed("5.0")));
        assert_eq!(value_digest(&parsed("5")), value_digest(&parsed("5e0")));
        assert_eq!(
            value_digest(&parsed(r#"{"a":[1.50]}"#)),
            value_digest(&parsed(r#"{"a":[1.5]}"#))
        );
    }

    #[test]
    fn different_values_and_types_have_different_digests() {
        assert_ne!(
            value_digest(&json!("O-5005")),
            value_digest(&json!("O-5006"))
        );
        assert_ne!(value_digest(&json!("5")), value_digest(&json!(5)));
        assert_ne!(value_digest(&json!(true)), value_digest(&json!("true")));
        assert_ne!(
            value_digest(&parsed("1e400")),
            value_digest(&parsed("2e400"))
        );
    }
}
