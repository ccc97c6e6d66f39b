//! The immutable catalog snapshot `decide` reads, and the handle that swaps it atomically.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::rules::ToolRules;
use super::{LearnedSkill, SessionView};
use crate::model::{Catalog, CatalogTool, Role, Scope};
use crate::slug::Slug;

pub(crate) struct CompiledTool {
    pub index: usize,
    /// `Err` holds why the schema did not compile; such a tool denies every call.
    pub validator: Result<jsonschema::Validator, String>,
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
    grants: HashMap<String, Vec<Slug>>,
}

impl CompiledCatalog {
    pub fn compile(catalog: Catalog) -> Self {
        let tools = catalog
            .tools
            .iter()
            .enumerate()
            .map(|(index, tool)| {
                let validator =
                    jsonschema::validator_for(&tool.spec.input_schema).map_err(|e| e.to_string());
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
                    rules
                        .entry(limit.tool().to_owned())
                        .or_default()
                        .push(limit.clone());
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
        Self {
            catalog,
            tools,
            roles,
            scopes,
            grants,
        }
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

    /// Every tool the session's learned roles unlock, sorted, without repeats.
    pub fn available_tools(&self, session: &SessionView) -> Vec<String> {
        let tools: BTreeSet<&String> = self
            .effective_roles(session)
            .flat_map(|(_, r)| r.tools.iter())
            .collect();
        tools.into_iter().cloned().collect()
    }

    pub(crate) fn compiled_tool(&self, name: &str) -> Option<&CompiledTool> {
        self.tools.get(name)
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
