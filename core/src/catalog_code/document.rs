//! The catalog file: the types of the YAML document, its JSON Schema, and the conversions
//! between it and the model.
//!
//! The document is its own set of types rather than the model's serde forms: unknown fields
//! are an error here (a typo must not be silently dropped), limits are flat so a parse
//! error names `roles[2].limits[0].max`, and numbers are written so they read back exactly.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, SecondsFormat, SubsecRound, Utc};
use rust_decimal::Decimal;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Number, Value};

use crate::model::{
    ApprovalCondition, ArgCheck, CmpOp, Limit, Resource, ResultCheck, Role, Scope, Skill, ToolSpec,
    Upstream, UpstreamKind, check_upstream_url,
};
use crate::slug::Slug;
use crate::upstream::parse_ca_bundle;

/// The one version of the document this build reads and writes.
pub const CATALOG_VERSION: u32 = 1;

/// The whole catalog as desired state: what `skillgate catalog export` writes and
/// `skillgate catalog apply` reads. Every list is sorted by name; no secrets, no history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Skillgate catalog")]
pub struct CatalogDocument {
    /// The document format: always 1.
    #[schemars(range(min = 1, max = 1))]
    pub version: u32,
    /// Downstream MCP servers. Their credentials are never in the file and are kept as stored.
    #[serde(default)]
    pub upstreams: Vec<UpstreamDoc>,
    /// Tools, each as admitted: its definition and the pin (SHA-256) of that definition.
    #[serde(default)]
    pub tools: Vec<ToolDoc>,
    /// Skills at their current text. A change of text, tools or resources is a new version.
    #[serde(default)]
    pub skills: Vec<SkillDoc>,
    #[serde(default)]
    pub roles: Vec<RoleDoc>,
    #[serde(default)]
    pub scopes: Vec<ScopeDoc>,
    /// Active agent keys by name and scope; a key's secret is printed once, when it is created.
    #[serde(default)]
    pub keys: Vec<KeyDoc>,
    /// Which content inspectors run on a call and what they do with a finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inspection: Option<InspectionDoc>,
}

/// How the gateway reaches an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TransportDoc {
    /// A child process speaking MCP on stdin/stdout (`command`, `args`).
    Stdio,
    /// A streamable HTTP MCP server (`url`, http:// or https://).
    Http,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamDoc {
    pub name: Slug,
    pub transport: TransportDoc,
    /// stdio: the program to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// http: the MCP endpoint's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// http: PEM certificates (one or more) trusted for this upstream in addition to the
    /// system's roots, for a server whose certificate an internal CA issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
    /// http: dial a plain `http://` URL on a remote host (anyone on the network path can
    /// read the calls and rewrite the tools). Off unless set; loopback needs no setting.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_plaintext: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolDoc {
    pub name: String,
    pub upstream: Slug,
    pub description: String,
    /// The JSON Schema of the tool's arguments.
    pub input_schema: JsonValue,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<JsonValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<JsonValue>,
    /// Top-level arguments the audit stores as a digest only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sensitive_args: Vec<String>,
    /// Lowercase hex SHA-256 of the definition's canonical JSON. When given it must match
    /// the definition: changing a definition means writing its new pin, which admits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9a-f]{64}$"))]
    pub pin: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillDoc {
    pub slug: Slug,
    pub description: String,
    /// Markdown a model can follow.
    pub instructions: String,
    /// The tools the skill uses; a role grants the tools of its skills.
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceDoc>,
    /// `SKILL.md` frontmatter fields besides `name` and `description`, as uploaded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "Map<String, Value>")]
    pub frontmatter: BTreeMap<String, JsonValue>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceDoc {
    pub name: Slug,
    pub title: String,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleDoc {
    pub slug: Slug,
    pub title: String,
    /// What `init_skilder` lists: at most 500 characters.
    pub description: String,
    /// Markdown the agent reads when it learns the role.
    pub instructions: String,
    pub skills: Vec<Slug>,
    #[serde(default)]
    pub limits: Vec<LimitDoc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeDoc {
    pub slug: Slug,
    #[serde(default)]
    pub description: String,
    /// The roles an agent key of this scope may learn.
    pub roles: Vec<Slug>,
    /// Limits that bind every call of the scope's sessions, under every role.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guardrails: Vec<LimitDoc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyDoc {
    /// 1 to 64 letters, digits, `.`, `_` or `-`.
    pub name: String,
    /// Fixed when the key is created: to move a key to another scope, revoke and recreate it.
    pub scope: Slug,
    /// RFC 3339 time after which the key no longer authenticates; absent: never.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser_time",
        deserialize_with = "de_time"
    )]
    #[schemars(with = "Option<String>")]
    pub expires_at: Option<DateTime<Utc>>,
}

/// What kind of rule a limit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    #[default]
    /// Every call: `arg` passes `check` (`compare` with `op` and `value`, `one_of` with
    /// `values`, `max_length` with `max`, `no_shell`, `path_under` with `root`, or
    /// `url_host` with `hosts`).
    ArgBound,
    /// A fleet rule: every call of the tools `tool` names (a glob; `*`: every tool), each
    /// argument value at any depth under a property matching `name` (a glob) or where the
    /// tool's schema declares `format`, passes `check` (with its fields, as `arg_bound`).
    ArgRule,
    /// Per session: the sum of `arg` over allowed calls stays at most `max`.
    SumCap,
    /// Per session: the tool runs at most `max` times.
    CountCap,
    /// The tool runs only after every tool in `after` succeeded in the session (with the same
    /// values of `same_args`, and a `result` that matched, when given).
    Requires,
    /// The tool runs only after a reviewer approved the exact call (`when` it holds, if
    /// given); the approval is valid `expires_in_minutes` (default 15).
    RequiresApproval,
}

/// What an `arg_bound` limit checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckDoc {
    Compare,
    OneOf,
    MaxLength,
    NoShell,
    PathUnder,
    UrlHost,
}

/// A comparison: the model's own, the shapes match.
pub use crate::model::CmpOp as OpDoc;

/// One limit, flat: `kind` says which of the other fields it uses.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitDoc {
    pub kind: LimitKind,
    /// The tool the limit bounds; for `arg_rule`, a glob of tools (`*`: every tool).
    pub tool: String,
    /// `arg_bound`, `sum_cap`: the argument.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg: Option<String>,
    /// `arg_rule`: the arguments whose property name matches this glob (any case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `arg_rule`: the arguments whose schema declares this `format` (`uri`, `email`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// `arg_bound`: what is checked. `no_shell`: no `;`, `|`, `&`, `$`, backtick, `<`, `>`
    /// or line break, in any width; `path_under`: an absolute path that, normalised as text,
    /// stays under `root` (symbolic links are not resolved); `url_host`: an http(s) URL on
    /// one of `hosts`, never a loopback, private, link-local or metadata address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckDoc>,
    /// `arg_bound` `compare`: the comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<OpDoc>,
    /// `arg_bound` `compare`: the number compared with, exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<DecimalDoc>,
    /// `arg_bound` `one_of`: the allowed values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<JsonValue>>,
    /// `arg_bound` `path_under`: the absolute directory the path must stay under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// `arg_bound` `url_host`: the allowed hosts; `*.example.com` allows its subdomains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<String>>,
    /// `sum_cap`: the most the sum may reach; `count_cap`: the most calls; `arg_bound`
    /// `max_length`: the most characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<DecimalDoc>,
    /// `requires`: the tools that must have succeeded first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Vec<String>>,
    /// `requires`: arguments whose values must equal those of the earlier success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_args: Option<Vec<String>>,
    /// `requires`: a condition on the earlier success's structured result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ResultDoc>,
    /// `requires_approval`: only calls where this holds need approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<WhenDoc>,
    /// `requires_approval`: how long an approval stays valid (1 to 1440).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in_minutes: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultDoc {
    /// A JSON Pointer into the structured result, e.g. `/eligible`.
    pub pointer: String,
    pub equals: JsonValue,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WhenDoc {
    pub arg: String,
    pub op: OpDoc,
    pub value: DecimalDoc,
}

/// A decimal number, compared exactly. Written as a YAML number when that reads back
/// exactly, else as a string (`'0.10000000000000000001'`); both are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecimalDoc(pub Decimal);

impl Serialize for DecimalDoc {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let d = self.0.normalize();
        if d.fract().is_zero() {
            if let Ok(n) = i64::try_from(d) {
                return serializer.serialize_i64(n);
            }
        } else if let Ok(f) = f64::try_from(d)
            && Decimal::from_str(&f.to_string()) == Ok(d)
        {
            return serializer.serialize_f64(f);
        }
        serializer.serialize_str(&d.to_string())
    }
}

impl FromStr for DecimalDoc {
    type Err = rust_decimal::Error;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Decimal::from_str_exact(text)
            .or_else(|_| Decimal::from_scientific(text))
            .map(DecimalDoc)
    }
}

impl<'de> Deserialize<'de> for DecimalDoc {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DecimalVisitor;
        impl Visitor<'_> for DecimalVisitor {
            type Value = DecimalDoc;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<DecimalDoc, E> {
                let text = text.trim();
                DecimalDoc::from_str(text)
                    .map_err(|_| E::custom(format!("`{text}` is not a number")))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<DecimalDoc, E> {
                Ok(DecimalDoc(n.into()))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<DecimalDoc, E> {
                Ok(DecimalDoc(n.into()))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<DecimalDoc, E> {
                self.visit_str(&n.to_string())
            }
        }
        // A YAML scalar handed over as text keeps every digit (as a float it would not).
        deserializer.deserialize_str(DecimalVisitor)
    }
}

impl JsonSchema for DecimalDoc {
    fn schema_name() -> Cow<'static, str> {
        "Decimal".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A number, compared exactly; a string of digits is read the same way.",
            "type": ["number", "string"],
            "pattern": "^-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?$"
        })
    }
}

/// Any JSON value (schemas, annotations, allowed values), written so that every number
/// keeps its literal (`1.0` stays `1.0`, `1e-06` stays `1e-06`: a definition's literals are
/// part of its pin). A number YAML would read back otherwise is written `!number '1e-06'`.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonValue(pub Value);

/// The YAML tag of a number written as its literal.
const NUMBER_TAG: &str = "number";

impl<'de> Deserialize<'de> for JsonValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = JsonValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<JsonValue, E> {
        Ok(JsonValue(Value::Null))
    }
    fn visit_none<E>(self) -> Result<JsonValue, E> {
        Ok(JsonValue(Value::Null))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<JsonValue, D::Error> {
        JsonValue::deserialize(d)
    }
    fn visit_bool<E>(self, b: bool) -> Result<JsonValue, E> {
        Ok(JsonValue(Value::Bool(b)))
    }
    fn visit_i64<E>(self, n: i64) -> Result<JsonValue, E> {
        Ok(JsonValue(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<JsonValue, E> {
        Ok(JsonValue(n.into()))
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<JsonValue, E> {
        Number::from_f64(n)
            .map(|n| JsonValue(Value::Number(n)))
            .ok_or_else(|| E::custom("a JSON number is finite"))
    }
    fn visit_str<E>(self, s: &str) -> Result<JsonValue, E> {
        Ok(JsonValue(Value::String(s.to_owned())))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<JsonValue, A::Error> {
        let mut items = Vec::new();
        while let Some(JsonValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(JsonValue(Value::Array(items)))
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<JsonValue, A::Error> {
        let mut object = Map::new();
        while let Some((key, JsonValue(value))) = map.next_entry::<String, JsonValue>()? {
            // `shape::check` refuses this first, with the path; kept so that no other
            // reader of a document can let the last value win.
            if object.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            object.insert(key, value);
        }
        Ok(JsonValue(Value::Object(object)))
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<JsonValue, A::Error> {
        use serde::de::VariantAccess;
        let (tag, variant): (String, _) = data.variant()?;
        if tag != NUMBER_TAG {
            return Err(de::Error::custom(format!(
                "unknown tag `!{tag}` (only `!{NUMBER_TAG}` is used)"
            )));
        }
        let literal: String = variant.newtype_variant()?;
        serde_json::from_str::<Number>(literal.trim())
            .map(|n| JsonValue(Value::Number(n)))
            .map_err(|_| de::Error::custom(format!("`{literal}` is not a JSON number")))
    }
}

struct Yaml<'a>(&'a Value);

impl Serialize for Yaml<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Null => serializer.serialize_unit(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Number(n) => serialize_number(n, serializer),
            Value::String(s) => serializer.serialize_str(s),
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Yaml(item))?;
                }
                seq.end()
            }
            Value::Object(map) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, value) in map {
                    out.serialize_entry(key, &Yaml(value))?;
                }
                out.end()
            }
        }
    }
}

/// A JSON number as YAML: a plain integer or float when that reads back as the same
/// literal, else the literal under the `!number` tag.
fn serialize_number<S: Serializer>(n: &Number, serializer: S) -> Result<S::Ok, S::Error> {
    let literal = n.to_string();
    if let Some(i) = n.as_i64().filter(|i| i.to_string() == literal) {
        return serializer.serialize_i64(i);
    }
    if let Some(u) = n.as_u64().filter(|u| u.to_string() == literal) {
        return serializer.serialize_u64(u);
    }
    if let Some(f) = n
        .as_f64()
        .filter(|f| Number::from_f64(*f).is_some_and(|back| back.to_string() == literal))
    {
        return serializer.serialize_f64(f);
    }
    serializer.serialize_newtype_variant("JsonValue", 0, NUMBER_TAG, &literal)
}

impl Serialize for JsonValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Yaml(&self.0).serialize(serializer)
    }
}

impl JsonSchema for JsonValue {
    fn schema_name() -> Cow<'static, str> {
        "AnyValue".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "description": "Any JSON value." })
    }
    fn inline_schema() -> bool {
        true
    }
}

impl JsonSchema for Slug {
    fn schema_name() -> Cow<'static, str> {
        "Slug".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Lowercase letters, digits and single hyphens, not at the start or end.",
            "type": "string",
            "maxLength": crate::slug::MAX_SLUG_LEN,
            "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"
        })
    }
}

fn ser_time<S: Serializer>(at: &Option<DateTime<Utc>>, serializer: S) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => serializer.serialize_str(&at.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
        None => serializer.serialize_none(),
    }
}

fn de_time<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    let text = String::deserialize(deserializer)?;
    // The database keeps microseconds: finer digits would never compare equal again.
    DateTime::parse_from_rfc3339(text.trim())
        .map(|at| Some(at.with_timezone(&Utc).trunc_subsecs(6)))
        .map_err(|e| de::Error::custom(format!("`{text}` is not an RFC 3339 time: {e}")))
}

/// The JSON Schema of [`CatalogDocument`], pretty-printed with a final newline: what
/// `skillgate catalog schema` prints and `docs/catalog.schema.json` holds.
pub fn json_schema_text() -> String {
    let schema = schemars::schema_for!(CatalogDocument);
    let mut text = serde_json::to_string_pretty(&schema).expect("a schema serializes");
    text.push('\n');
    text
}

impl CatalogDocument {
    /// The document as YAML. Deterministic: struct fields in declaration order, JSON
    /// objects sorted by key, lists in the order the caller put them.
    pub fn to_yaml(&self) -> String {
        let body = serde_norway::to_string(self).expect("a catalog document serializes");
        format!(
            "# Skillgate catalog: `skillgate catalog apply FILE` makes a database match it.\n\
             # Schema: `skillgate catalog schema` (docs/catalog.schema.json).\n{body}"
        )
    }
}

mod convert;
mod inspection;

pub use inspection::{DefinitionsDoc, InspectionDoc, InspectionRuleDoc, SchemasDoc};

pub use convert::{FieldError, to_limits};

#[cfg(test)]
mod tests;
