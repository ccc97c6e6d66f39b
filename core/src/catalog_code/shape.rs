//! A first pass over a catalog document, before it is read into types, for what the typed
//! read cannot see:
//!
//! - a key written twice in one mapping or JSON object, at any depth (YAML parsers and
//!   `serde_json::Map` keep the last value silently, so a reviewed diff and the applied
//!   policy could differ);
//! - a document that YAML aliases blow up ("billion laughs"): the parser replays an
//!   anchored node at every alias, and its own guard (100 jumps per event) still lets a
//!   4 MiB file expand to gigabytes. Expanded, a document may be at most twice its size.
//!
//! The pass only counts and compares keys; it builds nothing of the document.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};

use super::validate::Issue;

/// Expansion allowed on top of twice the document's size, so that a small document may
/// still use an alias or two.
const EXPANSION_SLACK: usize = 64 * 1024;

enum Segment {
    Key(String),
    Index(usize),
}

struct Walk {
    /// What is left of the expansion budget (one per node, plus a scalar's length).
    budget: usize,
    path: Vec<Segment>,
    issue: Option<Issue>,
}

impl Walk {
    fn path_text(&self) -> String {
        if self.path.is_empty() {
            return ".".to_owned();
        }
        let mut text = String::new();
        for segment in &self.path {
            match segment {
                Segment::Key(key) if text.is_empty() => text.push_str(key),
                Segment::Key(key) => {
                    text.push('.');
                    text.push_str(key);
                }
                Segment::Index(i) => text.push_str(&format!("[{i}]")),
            }
        }
        text
    }

    fn fail<E: de::Error>(&mut self, message: String) -> E {
        let issue = Issue {
            path: self.path_text(),
            message,
        };
        let error = E::custom(&issue);
        self.issue = Some(issue);
        error
    }

    fn charge<E: de::Error>(&mut self, units: usize) -> Result<(), E> {
        match self.budget.checked_sub(units) {
            Some(rest) => {
                self.budget = rest;
                Ok(())
            }
            None => Err(self.fail(
                "the document expands, through YAML aliases (`*name`), to more than twice its \
                 size; write it out without anchors and aliases"
                    .to_owned(),
            )),
        }
    }
}

/// Checks `text` for duplicate keys and alias blow-up. A YAML syntax error is left to the
/// typed read, which reports it with its path.
pub(super) fn check(text: &str) -> Result<(), Issue> {
    let mut walk = Walk {
        budget: text.len().saturating_mul(2).saturating_add(EXPANSION_SLACK),
        path: Vec::new(),
        issue: None,
    };
    let deserializer = serde_norway::Deserializer::from_str(text);
    let outcome = Node(&mut walk).deserialize(deserializer);
    match (outcome, walk.issue) {
        (_, Some(issue)) => Err(issue),
        (Ok(()), None) | (Err(_), None) => Ok(()),
    }
}

/// One node of the document, walked.
struct Node<'w>(&'w mut Walk);

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML node")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.0.charge(1)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.0.charge(1)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.0.charge(1)
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<(), E> {
        self.0.charge(1)
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<(), E> {
        self.0.charge(1)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.0.charge(1)
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<(), E> {
        self.0.charge(1 + s.len())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.charge(1)
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.0.charge(1)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        Node(self.0).deserialize(d)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        Node(self.0).deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let walk = self.0;
        walk.charge(1)?;
        let mut index = 0;
        loop {
            walk.path.push(Segment::Index(index));
            let more = seq.next_element_seed(Node(walk))?;
            walk.path.pop();
            if more.is_none() {
                return Ok(());
            }
            index += 1;
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let walk = self.0;
        walk.charge(1)?;
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key_seed(Key(walk))? {
            let segment = match key {
                Some(key) => {
                    if seen.contains(&key) {
                        return Err(walk.fail(format!("duplicate key {key:?}")));
                    }
                    seen.insert(key.clone());
                    key
                }
                None => "?".to_owned(),
            };
            walk.path.push(Segment::Key(segment));
            map.next_value_seed(Node(walk))?;
            walk.path.pop();
        }
        Ok(())
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        // A tagged node (`!number '1e-06'`): the tag, then the node it tags.
        use serde::de::VariantAccess;
        let walk = self.0;
        let ((), variant) = data.variant_seed(Node(walk))?;
        variant.newtype_variant_seed(Node(walk))
    }
}

/// A mapping key: its text when it is a scalar (so `1` and `"1"` are one key, as they are
/// once read), `None` for a collection used as a key (walked all the same).
struct Key<'w>(&'w mut Walk);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping key")
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Self::Value, E> {
        self.scalar(b.to_string())
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
        self.scalar(n.to_string())
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
        self.scalar(n.to_string())
    }
    fn visit_i128<E: de::Error>(self, n: i128) -> Result<Self::Value, E> {
        self.scalar(n.to_string())
    }
    fn visit_u128<E: de::Error>(self, n: u128) -> Result<Self::Value, E> {
        self.scalar(n.to_string())
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Self::Value, E> {
        self.scalar(n.to_string())
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        self.scalar(s.to_owned())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.scalar("null".to_owned())
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.scalar("null".to_owned())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        Key(self.0).deserialize(d)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        Key(self.0).deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Node(self.0).visit_seq(seq).map(|()| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Node(self.0).visit_map(map).map(|()| None)
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        Node(self.0).visit_enum(data).map(|()| None)
    }
}

impl Key<'_> {
    fn scalar<E: de::Error>(self, key: String) -> Result<Option<String>, E> {
        self.0.charge(1 + key.len())?;
        Ok(Some(key))
    }
}
