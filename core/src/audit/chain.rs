//! The hash chain: canonical bytes, event hashes and the streaming verifier.
//!
//! The exact byte format is specified in the [module docs of `audit`](super).

use std::fmt;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::store::audit::{Anchor, AuditRow};

pub use crate::store::audit::GENESIS_HASH;

/// Canonical JSON of `value`: object keys sorted by code point, no whitespace, strings
/// escaped minimally, numbers written as their JSON literal.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // Sorted here rather than relying on serde_json's map type, which becomes
            // insertion-ordered if any crate in the build enables `preserve_order`.
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_optional_string(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => write_string(out, s),
        None => out.push_str("null"),
    }
}

/// The canonical bytes of one event: the canonical JSON object of `actor, at, kind,
/// payload, seq, session_id` (in that, sorted, order). `payload` must already be
/// canonical JSON text; it is embedded verbatim so that a stored payload that is not
/// canonical fails verification.
pub fn canonical_event(row: &AuditRow) -> String {
    let mut out = String::with_capacity(96 + row.payload.len());
    out.push_str("{\"actor\":");
    write_optional_string(&mut out, row.actor.as_deref());
    out.push_str(",\"at\":");
    write_string(&mut out, &row.at);
    out.push_str(",\"kind\":");
    write_string(&mut out, &row.kind);
    out.push_str(",\"payload\":");
    out.push_str(&row.payload);
    out.push_str(",\"seq\":");
    out.push_str(&row.seq.to_string());
    out.push_str(",\"session_id\":");
    write_optional_string(&mut out, row.session_id.as_deref());
    out.push('}');
    out
}

/// `hex(SHA-256(canonical_event(row) || raw 32 bytes of row.prev_hash))`, or `None` when
/// `row.prev_hash` is not 64 hex digits.
pub fn event_hash(row: &AuditRow) -> Option<String> {
    let mut prev = [0u8; 32];
    hex::decode_to_slice(&row.prev_hash, &mut prev).ok()?;
    let mut hasher = Sha256::new();
    hasher.update(canonical_event(row).as_bytes());
    hasher.update(prev);
    Some(hex::encode(hasher.finalize()))
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Why verification stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadReason {
    /// The event's content no longer matches its hash.
    Changed,
    /// The event is missing: a gap in `seq`, or the next event links past it.
    Removed,
    /// The event exists but sits at another position of the chain.
    Reordered,
    /// An exported record that is not a readable event.
    Malformed(String),
}

impl fmt::Display for BadReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadReason::Changed => f.write_str("changed"),
            BadReason::Removed => f.write_str("removed"),
            BadReason::Reordered => f.write_str("reordered"),
            BadReason::Malformed(detail) => write!(f, "malformed ({detail})"),
        }
    }
}

/// The first event at which the chain breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadEvent {
    pub seq: u64,
    pub reason: BadReason,
}

impl fmt::Display for BadEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "event {} was {}", self.seq, self.reason)
    }
}

/// The outcome of a verification walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Events read.
    pub events: u64,
    /// Where the walk started: the genesis (seq 0) or a retention anchor.
    pub start: Anchor,
    /// The last event that verified. Keep it somewhere else: truncating the newest
    /// events of a chain is only detectable against a previously recorded tip.
    pub verified_tip: Anchor,
    pub first_bad: Option<BadEvent>,
}

impl VerifyReport {
    pub fn is_intact(&self) -> bool {
        self.first_bad.is_none()
    }
}

#[derive(Debug)]
enum State {
    Walking,
    /// The chain broke at `seq` in a way that is either a removal or a move; a later
    /// event linking to `expected_prev` means the missing event was moved.
    Suspect {
        seq: u64,
        expected_prev: String,
    },
    Settled(BadEvent),
}

/// Verifies a chain one stored row at a time, in `seq` order, in constant memory.
#[derive(Debug)]
pub struct ChainVerifier {
    start: Anchor,
    tip: Anchor,
    events: u64,
    state: State,
}

impl ChainVerifier {
    pub fn new(start: Anchor) -> Self {
        Self {
            tip: start.clone(),
            start,
            events: 0,
            state: State::Walking,
        }
    }

    pub fn push(&mut self, row: &AuditRow) {
        self.events += 1;
        match &self.state {
            State::Walking => self.walk(row),
            State::Suspect { seq, expected_prev } => {
                if row.prev_hash == *expected_prev {
                    self.state = State::Settled(BadEvent {
                        seq: *seq,
                        reason: BadReason::Reordered,
                    });
                }
            }
            State::Settled(_) => {}
        }
    }

    /// Records an unreadable record at the current position.
    pub fn push_malformed(&mut self, detail: String) {
        self.events += 1;
        if let State::Walking = self.state {
            self.state = State::Settled(BadEvent {
                seq: self.tip.seq + 1,
                reason: BadReason::Malformed(detail),
            });
        }
    }

    fn walk(&mut self, row: &AuditRow) {
        let expected = self.tip.seq + 1;
        let own_ok = event_hash(row).as_deref() == Some(row.hash.as_str());
        let link_ok = row.prev_hash == self.tip.hash;
        let bad = |seq, reason| State::Settled(BadEvent { seq, reason });
        self.state = match (row.seq == expected, own_ok, link_ok) {
            (true, true, true) => {
                self.tip = Anchor {
                    seq: row.seq,
                    hash: row.hash.clone(),
                };
                State::Walking
            }
            (true, false, true) => bad(expected, BadReason::Changed),
            // The row is intact and really is event `expected` (its hash covers its seq),
            // so its predecessor was rewritten with a recomputed hash.
            (true, true, false) if expected > self.start.seq + 1 => {
                bad(expected - 1, BadReason::Changed)
            }
            (true, true, false) => bad(expected, BadReason::Changed),
            _ => State::Suspect {
                seq: expected,
                expected_prev: self.tip.hash.clone(),
            },
        };
    }

    pub fn finish(self) -> VerifyReport {
        let first_bad = match self.state {
            State::Walking => None,
            State::Suspect { seq, .. } => Some(BadEvent {
                seq,
                reason: BadReason::Removed,
            }),
            State::Settled(bad) => Some(bad),
        };
        VerifyReport {
            events: self.events,
            start: self.start,
            verified_tip: self.tip,
            first_bad,
        }
    }
}

/// Verifies stored rows, in `seq` order, from `start` (usually [`Anchor::genesis`]).
pub fn verify<'a>(start: Anchor, rows: impl IntoIterator<Item = &'a AuditRow>) -> VerifyReport {
    let mut verifier = ChainVerifier::new(start);
    for row in rows {
        verifier.push(row);
    }
    verifier.finish()
}

/// Builds the next stored row of a chain whose tip is `tip`. `payload` must be canonical.
/// Public for bulk generators (`skillgate-dev seed-audit`); the log is the normal writer.
pub fn link(
    tip: &Anchor,
    at: String,
    session_id: Option<String>,
    kind: String,
    actor: Option<String>,
    payload: String,
) -> AuditRow {
    let mut row = AuditRow {
        seq: tip.seq + 1,
        at,
        session_id,
        kind,
        actor,
        payload,
        prev_hash: tip.hash.clone(),
        hash: String::new(),
    };
    row.hash = event_hash(&row).expect("a chain tip hash is 64 hex digits");
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chain(n: u64) -> Vec<AuditRow> {
        let mut tip = Anchor::genesis();
        (1..=n)
            .map(|i| {
                let row = link(
                    &tip,
                    format!("2026-01-01T00:00:{:02}.000000Z", i % 60),
                    Some("s1".into()),
                    "call_allowed".into(),
                    Some("agent".into()),
                    canonical_json(&json!({ "i": i })),
                );
                tip = Anchor {
                    seq: row.seq,
                    hash: row.hash.clone(),
                };
                row
            })
            .collect()
    }

    fn first_bad(rows: &[AuditRow]) -> Option<BadEvent> {
        verify(Anchor::genesis(), rows).first_bad
    }

    #[test]
    fn canonical_json_sorts_keys_and_drops_whitespace() {
        let value: Value =
            serde_json::from_str(r#"{ "b": [1, 2.50, {"z": null, "a": true}], "a": "x" }"#)
                .unwrap();
        assert_eq!(
            canonical_json(&value),
            r#"{"a":"x","b":[1,2.50,{"a":true,"z":null}]}"#
        );
    }

    #[test]
    fn canonical_strings_escape_only_quotes_backslashes_and_controls() {
        let value = json!("é \"q\" \\ \n \u{1} \u{7f} \u{2028}");
        assert_eq!(
            canonical_json(&value),
            "\"é \\\"q\\\" \\\\ \\n \\u0001 \u{7f} \u{2028}\""
        );
    }

    #[test]
    fn canonical_json_reparses_to_the_same_text() {
        let text = canonical_json(&json!({"n": 1.0e3, "m": 12345678901234567890u64, "s": "\t"}));
        let again = canonical_json(&serde_json::from_str(&text).unwrap());
        assert_eq!(text, again);
    }

    #[test]
    fn the_hash_is_sha256_of_the_canonical_event_followed_by_the_raw_previous_hash() {
        let row = &chain(1)[0];
        let mut input = canonical_event(row).into_bytes();
        assert!(canonical_event(row).starts_with(r#"{"actor":"agent","at":"#));
        input.extend_from_slice(&[0u8; 32]);
        assert_eq!(row.hash, sha256_hex(&input));
    }

    #[test]
    fn an_untouched_chain_verifies() {
        let rows = chain(100);
        let report = verify(Anchor::genesis(), &rows);
        assert_eq!(report.first_bad, None);
        assert_eq!(report.events, 100);
        assert_eq!(report.verified_tip.seq, 100);
        assert_eq!(report.verified_tip.hash, rows[99].hash);
    }

    #[test]
    fn an_edited_payload_is_named_as_changed() {
        let mut rows = chain(10);
        rows[4].payload = r#"{"i":500}"#.into();
        assert_eq!(
            first_bad(&rows),
            Some(BadEvent {
                seq: 5,
                reason: BadReason::Changed
            })
        );
    }

    #[test]
    fn an_event_rewritten_with_a_recomputed_hash_is_named_as_changed() {
        let mut rows = chain(10);
        rows[4].payload = r#"{"i":500}"#.into();
        rows[4].hash = event_hash(&rows[4]).unwrap();
        assert_eq!(
            first_bad(&rows),
            Some(BadEvent {
                seq: 5,
                reason: BadReason::Changed
            })
        );
    }

    #[test]
    fn a_deleted_event_is_named_as_removed() {
        let mut rows = chain(10);
        rows.remove(6);
        assert_eq!(
            first_bad(&rows),
            Some(BadEvent {
                seq: 7,
                reason: BadReason::Removed
            })
        );
    }

    #[test]
    fn a_deleted_event_with_renumbered_successors_is_named_as_removed() {
        let mut rows = chain(10);
        rows.remove(6);
        for row in &mut rows[6..] {
            row.seq -= 1;
        }
        assert_eq!(
            first_bad(&rows),
            Some(BadEvent {
                seq: 7,
                reason: BadReason::Removed
            })
        );
    }

    #[test]
    fn two_swapped_events_are_named_as_reordered() {
        let mut rows = chain(10);
        rows.swap(2, 6);
        assert_eq!(
            first_bad(&rows),
            Some(BadEvent {
                seq: 3,
                reason: BadReason::Reordered
            })
        );
        // The same swap with the seq column left in place.
        let mut rows = chain(10);
        rows.swap(2, 6);
        rows[2].seq = 3;
        rows[6].seq = 7;
        assert_eq!(
            first_bad(&rows),
            Some(BadEvent {
                seq: 3,
                reason: BadReason::Reordered
            })
        );
    }

    #[test]
    fn a_chain_not_starting_at_genesis_is_named_at_its_first_event() {
        let rows = chain(10);
        assert_eq!(
            verify(Anchor::genesis(), &rows[3..]).first_bad,
            Some(BadEvent {
                seq: 1,
                reason: BadReason::Removed
            })
        );
        let anchor = Anchor {
            seq: 3,
            hash: rows[2].hash.clone(),
        };
        assert!(verify(anchor, &rows[3..]).is_intact());
    }
}
