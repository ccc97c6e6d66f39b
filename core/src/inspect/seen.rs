//! Following secrets through a session: the values a secret source returns (picked by the
//! JSON Pointers of its mark, whatever they look like), and the pieces of a call's
//! arguments a remembered secret may travel in. Both are known by fingerprint only
//! ([`super::fingerprint`]), as the detectors' findings are.

use std::collections::HashSet;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value};

use super::{Finding, each_argument_string, fingerprint};
use crate::model::Inspector;

/// The kind of a finding for a value a secret source returned.
pub const RETURNED_SECRET: &str = "returned_secret";

/// Shorter values are not remembered: no credential is that short, and following `yes` or
/// `42` would refuse ordinary calls.
const MIN_SECRET_CHARS: usize = 4;

/// The values at `fields` (JSON Pointers, `*` for every item or member) of a secret
/// source's `result`, in its `structuredContent` and in each text block that is one JSON
/// document: one finding each (kind [`RETURNED_SECRET`]) with its fingerprint. Strings
/// and numbers count; a value shorter than four characters does not.
pub fn returned_secrets(result: &CallToolResult, fields: &[String]) -> Vec<Finding> {
    let mut found = Vec::new();
    if fields.is_empty() {
        return found;
    }
    if let Some(structured) = &result.structured_content {
        pick(structured, fields, "/structuredContent", &mut found);
    }
    for (index, block) in result.content.iter().enumerate() {
        let ContentBlock::Text(text) = block else {
            continue;
        };
        // Only a block that can be one JSON document is parsed.
        if !text.text.trim_start().starts_with(['{', '[']) {
            continue;
        }
        if let Ok(document) = serde_json::from_str::<Value>(&text.text) {
            pick(
                &document,
                fields,
                &format!("/content/{index}/text"),
                &mut found,
            );
        }
    }
    found
}

fn pick(document: &Value, fields: &[String], prefix: &str, found: &mut Vec<Finding>) {
    for field in fields {
        let Some(tokens) = field.strip_prefix('/') else {
            continue;
        };
        let tokens: Vec<String> = tokens
            .split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect();
        descend(document, &tokens, prefix.to_owned(), found);
    }
}

fn descend(value: &Value, tokens: &[String], path: String, found: &mut Vec<Finding>) {
    let Some((token, rest)) = tokens.split_first() else {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => return,
        };
        if text.chars().count() >= MIN_SECRET_CHARS {
            found.push(Finding {
                inspector: Inspector::Secrets,
                kind: RETURNED_SECRET,
                path,
                fingerprint: Some(fingerprint(&text)),
            });
        }
        return;
    };
    let escape = |name: &str| name.replace('~', "~0").replace('/', "~1");
    match (token.as_str(), value) {
        ("*", Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                descend(item, rest, format!("{path}/{i}"), found);
            }
        }
        ("*", Value::Object(members)) => {
            for (name, item) in members {
                descend(item, rest, format!("{path}/{}", escape(name)), found);
            }
        }
        (name, Value::Object(members)) => {
            if let Some(item) = members.get(name) {
                descend(item, rest, format!("{path}/{}", escape(name)), found);
            }
        }
        (index, Value::Array(items)) => {
            if let Some(item) = index.parse::<usize>().ok().and_then(|i| items.get(i)) {
                descend(item, rest, format!("{path}/{index}"), found);
            }
        }
        _ => {}
    }
}

/// Every piece of the strings of `arguments` that a remembered secret may be, with its
/// pointer (`/body`): each whole string, each word of it (split at white space, quotes,
/// brackets, `,`, `;` and `|`, with and without a trailing `.`, `:`, `!` or `?`), what
/// follows the first `=` or `:` of a word (`token=…`, `key:…`), and the same of each part
/// of a word split at `&` and `?` (a query string). Object keys are names, not values, and are left
/// out. Each piece once per string; `keep` says which fingerprints matter.
pub fn pieces_matching(
    arguments: &Map<String, Value>,
    keep: impl Fn(&str) -> bool,
) -> Vec<(String, String)> {
    let mut matches = Vec::new();
    each_argument_string(arguments, |path, text| {
        for piece in pieces(text) {
            let print = fingerprint(piece);
            if keep(&print) {
                matches.push((path.to_owned(), print));
            }
        }
    });
    matches
}

fn pieces(text: &str) -> HashSet<&str> {
    fn push<'a>(piece: &'a str, out: &mut HashSet<&'a str>) {
        if piece.chars().count() >= MIN_SECRET_CHARS {
            out.insert(piece);
        }
    }
    let mut out = HashSet::new();
    let whole = text.trim();
    push(whole, &mut out);
    let words = text.split(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '"' | '\'' | '`' | '<' | '>' | '(' | ')' | '[' | ']' | '{' | '}' | ',' | ';' | '|'
            )
    });
    for word in words {
        for word in [word, word.trim_end_matches(['.', ':', '!', '?'])] {
            push(word, &mut out);
            if let Some((_, value)) = word.split_once(['=', ':']) {
                push(value, &mut out);
            }
            for part in word.split(['&', '?']) {
                push(part, &mut out);
                if let Some((_, value)) = part.split_once(['=', ':']) {
                    push(value, &mut out);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vault_answer() -> CallToolResult {
        let mut result = CallToolResult::success(vec![ContentBlock::text(
            json!({"name": "prod-db", "value": "Tr0ub4dor&3", "version": 7}).to_string(),
        )]);
        result.structured_content = Some(json!({
            "name": "prod-db",
            "value": "Tr0ub4dor&3",
            "version": 7,
            "history": [{"value": "correct-horse"}, {"value": "ok"}],
        }));
        result
    }

    #[test]
    fn the_fields_a_mark_names_are_found_in_structured_content_and_json_text() {
        let fields = ["/value".to_owned(), "/history/*/value".to_owned()];
        let found = returned_secrets(&vault_answer(), &fields);
        let paths: Vec<&str> = found.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/structuredContent/value",
                "/structuredContent/history/0/value",
                "/content/0/text/value",
            ],
            "the two-letter value is too short to follow, and unnamed fields are not secrets"
        );
        assert!(found.iter().all(|f| f.kind == RETURNED_SECRET));
        assert_eq!(
            found[0].fingerprint.as_deref(),
            Some(fingerprint("Tr0ub4dor&3").as_str())
        );
        assert!(returned_secrets(&vault_answer(), &[]).is_empty());
        assert!(returned_secrets(&vault_answer(), &["/missing/*".to_owned()]).is_empty());
    }

    #[test]
    fn a_remembered_secret_is_found_in_any_piece_of_an_argument() {
        let secret = fingerprint("Tr0ub4dor&3");
        for body in [
            "Tr0ub4dor&3",
            "the password is Tr0ub4dor&3.",
            "login with (Tr0ub4dor&3) now",
            "password=Tr0ub4dor&3",
            "{\"pw\":\"Tr0ub4dor&3\"}",
        ] {
            let Value::Object(args) = json!({"to": "ops@example.com", "body": body}) else {
                unreachable!()
            };
            let found = pieces_matching(&args, |f| f == secret);
            assert_eq!(found.len(), 1, "{body}: {found:?}");
            assert_eq!(found[0].0, "/body");
        }
        let token = fingerprint("Zq8vL2pxR7mK4wT1");
        let Value::Object(args) =
            json!({"hook": {"url": "https://example.com/in?user=bob&token=Zq8vL2pxR7mK4wT1&x=1"}})
        else {
            unreachable!()
        };
        let found = pieces_matching(&args, |f| f == token);
        assert_eq!(found, [("/hook/url".to_owned(), token.clone())]);
        let Value::Object(args) =
            json!({"body": ["Tr0ub4dor and 3", "Tr0ub4dor&4"], "Tr0ub4dor&3": 1})
        else {
            unreachable!()
        };
        assert!(
            pieces_matching(&args, |f| f == secret).is_empty(),
            "other text, and a key that is a name, are not the secret"
        );
    }
}
