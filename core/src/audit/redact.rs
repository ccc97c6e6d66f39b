//! Sensitive arguments are stored as a digest, never in clear.

use serde_json::{Map, Value, json};

use super::chain::{canonical_json, sha256_hex};

/// Replaces each top-level argument named in `sensitive` by
/// `{"sha256": "<hex SHA-256 of its canonical JSON>"}`. Other arguments, and arguments
/// that are not a JSON object, are returned unchanged.
///
/// The digest lets an investigator confirm a value they already hold; it is unsalted, so a
/// low-entropy secret (a PIN) can be recovered by guessing. Mark such values sensitive
/// *and* keep them out of tool arguments where possible.
pub fn redact_sensitive(arguments: &Value, sensitive: &[String]) -> Value {
    match arguments {
        Value::Object(map) => Value::Object(redact_sensitive_fields(map, sensitive)),
        other => other.clone(),
    }
}

/// [`redact_sensitive`] of an arguments object.
pub fn redact_sensitive_fields(
    map: &Map<String, Value>,
    sensitive: &[String],
) -> Map<String, Value> {
    map.iter()
        .map(|(name, value)| {
            let value = if sensitive.iter().any(|s| s == name) {
                json!({ "sha256": sha256_hex(canonical_json(value).as_bytes()) })
            } else {
                value.clone()
            };
            (name.clone(), value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sensitive_argument_is_replaced_by_the_digest_of_its_canonical_json() {
        let args = json!({ "card": "4111 1111", "amount": 12 });
        let redacted = redact_sensitive(&args, &["card".to_owned()]);
        assert_eq!(redacted["amount"], 12);
        assert_eq!(
            redacted["card"]["sha256"],
            sha256_hex(br#""4111 1111""#).as_str()
        );
        assert!(!redacted.to_string().contains("4111"));
    }

    #[test]
    fn nothing_changes_when_no_argument_is_sensitive() {
        let args = json!({ "a": 1 });
        assert_eq!(redact_sensitive(&args, &[]), args);
        assert_eq!(redact_sensitive(&json!([1]), &["a".into()]), json!([1]));
    }
}
