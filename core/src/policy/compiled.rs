//! The immutable catalog snapshot `decide` reads, and the handle that swaps it atomically.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::rules::ToolRules;
use super::{LearnedSkill, SessionView};
use crate::model::{Catalog, CatalogTool, Limit, Role, SchemaPolicy, Scope};
use crate::slug::Slug;

pub(crate) struct CompiledTool {
    pub index: usize,
    /// `Err` holds why the schema did not compile; such a tool denies every call.
    pub validator: Result<jsonschema::Validator, String>,
}

/// Which usage of one tool some cap of the catalog reads, so an allowed call must store it:
/// usage is the session's, so a cap of any role or guardrail counts every allowed call.
#[derive(Debug, Default)]
pub(crate) struct Tracked {
    pub count: bool,
    pub sums: BTreeSet<String>,
}

/// What bound step-order guards compare against a success of one prerequisite tool.
#[derive(Debug, Default)]
pub(crate) struct Watched {
    pub args: BTreeSet<String>,
    pub pointers: BTreeSet<String>,
}

/// Compiles a tool's input schema. Whatever an upstream advertises, compiling must not take
/// the catalog down: a schema the validator rejects, or one that makes it panic, leaves
/// only that tool unusable, with the reason.
pub fn compile_schema(schema: &Value) -> Result<jsonschema::Validator, String> {
    compile_schema_with(schema, &SchemaPolicy::default())
}

/// [`compile_schema`] under the catalog's schema policy: `format` asserted when it says so,
/// and open objects closed (see [`close_open_objects`]) when it says so.
pub fn compile_schema_with(
    schema: &Value,
    policy: &SchemaPolicy,
) -> Result<jsonschema::Validator, String> {
    let closed;
    let schema = if policy.close_open_objects {
        closed = close_open_objects(schema);
        &closed
    } else {
        schema
    };
    let options = jsonschema::options().should_validate_formats(policy.validate_formats);
    match catch_unwind(AssertUnwindSafe(|| options.build(schema))) {
        Ok(Ok(validator)) => Ok(validator),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("the schema validator could not compile it".to_owned()),
    }
}

/// The keywords whose values are subschemas a closed object may sit in: one schema, or a
/// map or list of them. Combinators (`allOf`, `anyOf`, `oneOf`, `not`, `if`) are left out:
/// closing a branch would refuse the properties another branch declares.
const SCHEMA_KEYWORDS: [&str; 3] = ["items", "additionalProperties", "contains"];
const SCHEMA_MAP_KEYWORDS: [&str; 4] = ["properties", "patternProperties", "$defs", "definitions"];

/// `schema` with `additionalProperties: false` on every object schema that declares
/// `properties` and leaves extra properties unsaid (no `additionalProperties`,
/// `patternProperties`, `unevaluatedProperties`, nor a `$ref` whose target might declare
/// more), outside combinators.
pub fn close_open_objects(schema: &Value) -> Value {
    let mut schema = schema.clone();
    close_in_place(&mut schema, 0);
    schema
}

/// How deep the rewrite goes: deeper schemas are left as they are (a pathological schema
/// must not exhaust the stack).
const MAX_CLOSE_DEPTH: usize = 64;

fn close_in_place(schema: &mut Value, depth: usize) {
    let Value::Object(map) = schema else {
        return;
    };
    if depth > MAX_CLOSE_DEPTH {
        return;
    }
    let open = map.contains_key("properties")
        && ![
            "additionalProperties",
            "patternProperties",
            "unevaluatedProperties",
            "$ref",
            "$dynamicRef",
        ]
        .iter()
        .any(|k| map.contains_key(*k));
    if open {
        map.insert("additionalProperties".to_owned(), Value::Bool(false));
    }
    for keyword in SCHEMA_KEYWORDS {
        match map.get_mut(keyword) {
            Some(Value::Array(items)) => {
                items.iter_mut().for_each(|s| close_in_place(s, depth + 1))
            }
            Some(sub) => close_in_place(sub, depth + 1),
            None => {}
        }
    }
    if let Some(Value::Array(items)) = map.get_mut("prefixItems") {
        items.iter_mut().for_each(|s| close_in_place(s, depth + 1));
    }
    for keyword in SCHEMA_MAP_KEYWORDS {
        if let Some(Value::Object(subs)) = map.get_mut(keyword) {
            subs.values_mut().for_each(|s| close_in_place(s, depth + 1));
        }
    }
}

pub(crate) struct CompiledRole {
    pub index: usize,
    pub tools: BTreeSet<String>,
    pub rules: HashMap<String, ToolRules>,
}

/// A catalog compiled for deciding: schemas compiled once, tools indexed to the roles that
/// grant them, limits grouped per (role, tool) in evaluation order.
///
/// Compiling never fails: whatever cannot be compiled denies at decision time instead
/// (fail closed), so a bad save can never leave the gateway without a catalog.
pub struct CompiledCatalog {
    catalog: Catalog,
    tools: HashMap<String, CompiledTool>,
    roles: HashMap<String, CompiledRole>,
    scopes: HashMap<String, HashSet<String>>,
    /// Per scope, its guardrails grouped per tool.
    guardrails: HashMap<String, HashMap<String, ToolRules>>,
    grants: HashMap<String, Vec<Slug>>,
    tracked: HashMap<String, Tracked>,
    watched: HashMap<String, Watched>,
    revision: String,
}

/// Files `limit` under the tools it binds: its own, or for a fleet rule every tool of the
/// catalog its glob matches that `reaches` (a role's own tools; every tool for a scope).
fn place(
    rules: &mut HashMap<String, ToolRules>,
    limit: &Limit,
    catalog: &Catalog,
    reaches: impl Fn(&str) -> bool,
) {
    let spec = |name: &str| catalog.tool(name).map(|t| &t.spec);
    if !matches!(limit, Limit::ArgRule { .. }) {
        let tool = limit.tool();
        rules
            .entry(tool.to_owned())
            .or_default()
            .push(limit.clone(), spec(tool));
        return;
    }
    for tool in &catalog.tools {
        let name = tool.spec.name.as_str();
        if reaches(name) && limit.bounds(name) {
            rules
                .entry(name.to_owned())
                .or_default()
                .push(limit.clone(), Some(&tool.spec));
        }
    }
}

impl CompiledCatalog {
    pub fn compile(catalog: Catalog) -> Self {
        let tools = catalog
            .tools
            .iter()
            .enumerate()
            .map(|(index, tool)| {
                let validator =
                    compile_schema_with(&tool.spec.input_schema, &catalog.inspection.schemas);
                (tool.spec.name.clone(), CompiledTool { index, validator })
            })
            .collect();
        let mut grants: HashMap<String, Vec<Slug>> = HashMap::new();
        let roles = catalog
            .roles
            .iter()
            .enumerate()
            .map(|(index, role)| {
                let granted = catalog.role_tools(role);
                for tool in &granted {
                    grants
                        .entry(tool.clone())
                        .or_default()
                        .push(role.slug.clone());
                }
                let mut rules: HashMap<String, ToolRules> = HashMap::new();
                for limit in &role.limits {
                    place(&mut rules, limit, &catalog, |tool| granted.contains(tool));
                }
                (
                    role.slug.as_str().to_owned(),
                    CompiledRole {
                        index,
                        tools: granted,
                        rules,
                    },
                )
            })
            .collect();
        let scopes = catalog
            .scopes
            .iter()
            .map(|s| {
                (
                    s.slug.as_str().to_owned(),
                    s.roles.iter().map(|r| r.as_str().to_owned()).collect(),
                )
            })
            .collect();
        let guardrails = catalog
            .scopes
            .iter()
            .map(|scope| {
                let mut rules: HashMap<String, ToolRules> = HashMap::new();
                for limit in &scope.guardrails {
                    place(&mut rules, limit, &catalog, |_| true);
                }
                (scope.slug.as_str().to_owned(), rules)
            })
            .collect();
        let every_limit = catalog
            .roles
            .iter()
            .flat_map(|r| r.limits.iter())
            .chain(catalog.scopes.iter().flat_map(|s| s.guardrails.iter()));
        let mut tracked: HashMap<String, Tracked> = HashMap::new();
        let mut watched: HashMap<String, Watched> = HashMap::new();
        for limit in every_limit {
            match limit {
                Limit::SumCap { tool, arg, .. } => {
                    tracked
                        .entry(tool.clone())
                        .or_default()
                        .sums
                        .insert(arg.clone());
                }
                Limit::CountCap { tool, .. } => {
                    tracked.entry(tool.clone()).or_default().count = true
                }
                Limit::Requires {
                    after,
                    same_args,
                    result,
                    ..
                } if !same_args.is_empty() || result.is_some() => {
                    for prerequisite in after {
                        let watch = watched.entry(prerequisite.clone()).or_default();
                        watch.args.extend(same_args.iter().cloned());
                        watch
                            .pointers
                            .extend(result.iter().map(|r| r.pointer.clone()));
                    }
                }
                Limit::Requires { .. }
                | Limit::ArgBound { .. }
                | Limit::ArgRule { .. }
                | Limit::RequiresApproval { .. } => {}
            }
        }
        // What an approval records it was decided under: equal catalogs, equal revisions.
        let revision = serde_json::to_vec(&catalog)
            .map(|bytes| hex::encode(Sha256::digest(&bytes)))
            .unwrap_or_default();
        Self {
            catalog,
            tools,
            roles,
            scopes,
            guardrails,
            grants,
            tracked,
            watched,
            revision,
        }
    }

    /// A digest of the whole catalog this snapshot was compiled from.
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// The catalog this snapshot was compiled from (for `init_skilder` and `learn`).
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn tool(&self, name: &str) -> Option<&CatalogTool> {
        self.tools.get(name).map(|t| &self.catalog.tools[t.index])
    }

    pub fn role(&self, slug: &str) -> Option<&Role> {
        self.roles.get(slug).map(|r| &self.catalog.roles[r.index])
    }

    pub fn scope(&self, slug: &str) -> Option<&Scope> {
        self.catalog.scope(slug)
    }

    /// The tools a role grants, sorted; `None` for an unknown role.
    pub fn role_tools(&self, role: &str) -> Option<&BTreeSet<String>> {
        self.roles.get(role).map(|r| &r.tools)
    }

    /// The roles that grant a tool, in catalog order.
    pub fn roles_granting(&self, tool: &str) -> &[Slug] {
        self.grants.get(tool).map_or(&[], Vec::as_slice)
    }

    /// Whether an agent in `scope` may learn `role`.
    pub fn scope_allows(&self, scope: &str, role: &str) -> bool {
        self.roles.contains_key(role)
            && self
                .scopes
                .get(scope)
                .is_some_and(|roles| roles.contains(role))
    }

    /// The roles an agent in `scope` may learn, in the scope's order.
    pub fn roles_in_scope(&self, scope: &str) -> Vec<&Role> {
        self.scope(scope)
            .map(|s| {
                s.roles
                    .iter()
                    .filter_map(|r| self.role(r.as_str()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The current versions of a role's skills: what a session records when it learns the role.
    pub fn skill_versions_of(&self, role: &str) -> Vec<LearnedSkill> {
        let Some(role) = self.role(role) else {
            return Vec::new();
        };
        role.skills
            .iter()
            .filter_map(|skill| self.catalog.skill(skill.as_str()))
            .map(|s| LearnedSkill {
                skill: s.skill.slug.clone(),
                version: s.version,
            })
            .collect()
    }

    /// Tools whose schema did not compile, with the reason: they deny every call.
    pub fn broken_tools(&self) -> Vec<(&str, &str)> {
        let mut broken: Vec<(&str, &str)> = self
            .tools
            .iter()
            .filter_map(|(name, t)| {
                t.validator
                    .as_ref()
                    .err()
                    .map(|e| (name.as_str(), e.as_str()))
            })
            .collect();
        broken.sort_unstable();
        broken
    }

    /// The session's learned roles that still exist and are still in its scope, in learn
    /// order. A role removed from the scope after it was learned stops granting at once.
    pub(crate) fn effective_roles<'s>(
        &'s self,
        session: &'s SessionView,
    ) -> impl Iterator<Item = (&'s Slug, &'s CompiledRole)> {
        let scope = self.scopes.get(session.scope.as_str());
        session.learned.iter().filter_map(move |learned| {
            let name = learned.role.as_str();
            if !scope.is_some_and(|s| s.contains(name)) {
                return None;
            }
            self.roles.get(name).map(|r| (&learned.role, r))
        })
    }

    /// Every tool the session's learned roles unlock, sorted, without repeats; a
    /// quarantined tool is not available.
    pub fn available_tools(&self, session: &SessionView) -> Vec<String> {
        let tools: BTreeSet<&String> = self
            .effective_roles(session)
            .flat_map(|(_, r)| r.tools.iter())
            .filter(|name| {
                self.tool(name).is_none_or(|t| {
                    t.quarantine.is_none()
                        && self.upstream_quarantine(t.upstream.as_str()).is_none()
                })
            })
            .collect();
        tools.into_iter().cloned().collect()
    }

    /// Why calls of `upstream`'s tools are refused, when its identity is quarantined.
    pub fn upstream_quarantine(&self, upstream: &str) -> Option<&str> {
        self.catalog
            .quarantined_upstreams
            .get(upstream)
            .map(String::as_str)
    }

    pub(crate) fn compiled_tool(&self, name: &str) -> Option<&CompiledTool> {
        self.tools.get(name)
    }

    /// The guardrails a scope places on a tool.
    pub(crate) fn guardrails_on(&self, scope: &str, tool: &str) -> Option<&ToolRules> {
        self.guardrails.get(scope)?.get(tool)
    }

    /// Sentences of a scope's guardrails on the given tools (all of them for `None`), in
    /// declaration order: what `init_skilder` and `learn` show.
    pub fn guardrail_sentences(
        &self,
        scope: &str,
        tools: Option<&BTreeSet<String>>,
    ) -> Vec<String> {
        self.scope(scope)
            .map(|s| {
                s.guardrails
                    .iter()
                    .filter(|limit| tools.is_none_or(|tools| tools.iter().any(|t| limit.bounds(t))))
                    .map(Limit::sentence)
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(crate) fn tracked(&self, tool: &str) -> Option<&Tracked> {
        self.tracked.get(tool)
    }

    pub(crate) fn watched(&self, tool: &str) -> Option<&Watched> {
        self.watched.get(tool)
    }
}

impl std::fmt::Debug for CompiledCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledCatalog")
            .field("tools", &self.tools.len())
            .field("roles", &self.roles.len())
            .field("scopes", &self.scopes.len())
            .finish()
    }
}

/// The current catalog snapshot, shared by every request. Readers never wait: an admin
/// save compiles a new snapshot and swaps it in whole.
pub struct CatalogHandle {
    current: ArcSwap<CompiledCatalog>,
}

impl CatalogHandle {
    pub fn new(catalog: CompiledCatalog) -> Self {
        Self {
            current: ArcSwap::from_pointee(catalog),
        }
    }

    /// The snapshot to decide against; later swaps do not change it.
    pub fn load(&self) -> Arc<CompiledCatalog> {
        self.current.load_full()
    }

    pub fn replace(&self, catalog: CompiledCatalog) {
        self.current.store(Arc::new(catalog));
    }
}

impl std::fmt::Debug for CatalogHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CatalogHandle")
            .field(&*self.current.load())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn strict(close: bool, formats: bool) -> SchemaPolicy {
        SchemaPolicy {
            close_open_objects: close,
            validate_formats: formats,
        }
    }

    #[test]
    fn closing_open_objects_refuses_an_undeclared_property_at_every_depth() {
        let schema = json!({
            "type": "object",
            "properties": {
                "to": {"type": "string"},
                "meta": {"type": "object", "properties": {"tag": {"type": "string"}}}
            }
        });
        let open = compile_schema_with(&schema, &strict(false, true)).unwrap();
        let closed = compile_schema_with(&schema, &strict(true, true)).unwrap();
        let extra = json!({"to": "a", "bcc": "b"});
        let nested = json!({"to": "a", "meta": {"tag": "x", "cc": "y"}});
        assert!(open.is_valid(&extra) && open.is_valid(&nested));
        assert!(!closed.is_valid(&extra));
        assert!(!closed.is_valid(&nested));
        assert!(closed.is_valid(&json!({"to": "a", "meta": {"tag": "x"}})));
    }

    #[test]
    fn closing_leaves_objects_that_say_what_extra_properties_may_be_and_combinators_alone() {
        let schema = json!({
            "type": "object",
            "properties": {
                "labels": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}
            },
            "allOf": [{"properties": {"extra": {"type": "string"}}}]
        });
        let closed = close_open_objects(&schema);
        assert_eq!(closed["additionalProperties"], json!(false));
        assert_eq!(
            closed["properties"]["labels"]["additionalProperties"],
            json!({"type": "string"})
        );
        assert!(closed["allOf"][0].get("additionalProperties").is_none());
    }

    #[test]
    fn formats_are_asserted_only_when_the_policy_says_so() {
        let schema = json!({"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}});
        let bad = json!({"at": "yesterday"});
        assert!(
            !compile_schema_with(&schema, &strict(false, true))
                .unwrap()
                .is_valid(&bad)
        );
        assert!(
            compile_schema_with(&schema, &strict(false, false))
                .unwrap()
                .is_valid(&bad)
        );
    }
}
