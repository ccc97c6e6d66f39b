//! The whole catalog as plain data, and the checks an entry passes before it is saved.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::{Deserialize, Serialize};

use super::{
    CatalogError, InspectionPolicy, MAX_ROLE_DESCRIPTION, Role, Scope, Skill, SkillVersion,
    ToolSpec, Upstream,
};
use crate::slug::Slug;

/// A tool together with the upstream that provides it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogTool {
    pub upstream: Slug,
    /// The definition as an admin admitted it (its pin): what agents read and calls are
    /// checked against, whatever the upstream offers now.
    #[serde(flatten)]
    pub spec: ToolSpec,
    /// Why the tool may not be called, when it is quarantined: new and not yet admitted, or
    /// its upstream now offers a definition that differs from the pin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantine: Option<String>,
}

/// A catalog to be seeded: skills without version numbers, upstreams named by the tools.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CatalogDraft {
    pub tools: Vec<CatalogTool>,
    pub skills: Vec<Skill>,
    pub roles: Vec<Role>,
    pub scopes: Vec<Scope>,
}

impl CatalogDraft {
    /// The catalog this draft becomes once saved: every skill at version 1.
    /// The built-in curation upstream and its tools are added, as loading a catalog does.
    pub fn into_catalog(self, mut upstreams: Vec<Upstream>) -> Catalog {
        let (builtin, builtin_tools) = super::curation::builtin_catalog_parts();
        upstreams.push(builtin);
        let mut tools = self.tools;
        tools.extend(builtin_tools);
        Catalog {
            upstreams,
            tools,
            skills: self
                .skills
                .into_iter()
                .map(|skill| SkillVersion { version: 1, skill })
                .collect(),
            roles: self.roles,
            scopes: self.scopes,
            inspection: InspectionPolicy::default(),
            quarantined_upstreams: BTreeMap::new(),
        }
    }
}

/// The catalog as stored: current skill versions, roles in a stable order.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Catalog {
    pub upstreams: Vec<Upstream>,
    pub tools: Vec<CatalogTool>,
    pub skills: Vec<SkillVersion>,
    pub roles: Vec<Role>,
    pub scopes: Vec<Scope>,
    /// Which content inspectors run on a call and what they do with a finding.
    #[serde(default)]
    pub inspection: InspectionPolicy,
    /// Upstreams whose identity differs from the pinned one, by name, with the reason a
    /// refused call names: their tools are not called until an admin admits the identity.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub quarantined_upstreams: BTreeMap<String, String>,
}

impl Catalog {
    pub fn tool(&self, name: &str) -> Option<&CatalogTool> {
        self.tools.iter().find(|t| t.spec.name == name)
    }

    pub fn skill(&self, slug: &str) -> Option<&SkillVersion> {
        self.skills.iter().find(|s| s.skill.slug.as_str() == slug)
    }

    pub fn role(&self, slug: &str) -> Option<&Role> {
        self.roles.iter().find(|r| r.slug.as_str() == slug)
    }

    pub fn scope(&self, slug: &str) -> Option<&Scope> {
        self.scopes.iter().find(|s| s.slug.as_str() == slug)
    }

    /// The tools a role grants: the union of the tools of its skills' current versions.
    pub fn role_tools(&self, role: &Role) -> BTreeSet<String> {
        role.skills
            .iter()
            .filter_map(|slug| self.skill(slug.as_str()))
            .flat_map(|s| s.skill.tools.iter().cloned())
            .collect()
    }

    /// A tool definition is acceptable when its input schema compiles.
    pub fn validate_tool(&self, tool: &CatalogTool) -> Result<(), CatalogError> {
        if tool.spec.name.is_empty() {
            return Err(CatalogError::Empty("tool name"));
        }
        if !self.upstreams.iter().any(|u| u.name == tool.upstream) {
            return Err(CatalogError::UnknownUpstream(tool.upstream.clone()));
        }
        crate::policy::compile_schema(&tool.spec.input_schema).map_err(|reason| {
            CatalogError::InvalidSchema {
                tool: tool.spec.name.clone(),
                reason,
            }
        })?;
        Ok(())
    }

    /// A skill may use only tools the catalog knows, and names each resource once.
    pub fn validate_skill(&self, skill: &Skill) -> Result<(), CatalogError> {
        if skill.instructions.trim().is_empty() {
            return Err(CatalogError::Empty("skill instructions"));
        }
        no_duplicates(skill.tools.iter().map(String::as_str))?;
        no_duplicates(skill.resources.iter().map(|r| r.name.as_str()))?;
        for tool in &skill.tools {
            if self.tool(tool).is_none() {
                return Err(CatalogError::UnknownTool(tool.clone()));
            }
        }
        Ok(())
    }

    /// A role has a title, a short description, known skills, and limits that make sense
    /// for the tools those skills grant.
    pub fn validate_role(&self, role: &Role) -> Result<(), CatalogError> {
        if role.title.trim().is_empty() {
            return Err(CatalogError::Empty("role title"));
        }
        let length = role.description.chars().count();
        if length > MAX_ROLE_DESCRIPTION {
            return Err(CatalogError::DescriptionTooLong(length));
        }
        no_duplicates(role.skills.iter().map(Slug::as_str))?;
        for skill in &role.skills {
            if self.skill(skill.as_str()).is_none() {
                return Err(CatalogError::UnknownSkill(skill.clone()));
            }
        }
        let granted = self.role_tools(role);
        for limit in &role.limits {
            limit.validate(
                &role.slug,
                |name| self.tool(name).map(|t| &t.spec),
                |name| granted.contains(name),
            )?;
        }
        Ok(())
    }

    /// A scope lists known roles, each once; its guardrails are limits on known tools.
    pub fn validate_scope(&self, scope: &Scope) -> Result<(), CatalogError> {
        no_duplicates(scope.roles.iter().map(Slug::as_str))?;
        for role in &scope.roles {
            if self.role(role.as_str()).is_none() {
                return Err(CatalogError::UnknownRole(role.clone()));
            }
        }
        // A guardrail may name any tool of the catalog: it binds whichever role grants it.
        for limit in &scope.guardrails {
            limit.validate(
                &scope.slug,
                |name| self.tool(name).map(|t| &t.spec),
                |_| true,
            )?;
        }
        Ok(())
    }

    /// Every entry of the catalog, as the store checks them one by one on save.
    pub fn validate(&self) -> Result<(), CatalogError> {
        no_duplicates(self.tools.iter().map(|t| t.spec.name.as_str()))?;
        no_duplicates(self.skills.iter().map(|s| s.skill.slug.as_str()))?;
        no_duplicates(self.roles.iter().map(|r| r.slug.as_str()))?;
        no_duplicates(self.scopes.iter().map(|s| s.slug.as_str()))?;
        self.tools.iter().try_for_each(|t| self.validate_tool(t))?;
        self.skills
            .iter()
            .try_for_each(|s| self.validate_skill(&s.skill))?;
        self.roles.iter().try_for_each(|r| self.validate_role(r))?;
        self.scopes.iter().try_for_each(|s| self.validate_scope(s))
    }
}

fn no_duplicates<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), CatalogError> {
    let mut seen = HashSet::new();
    for name in names {
        if !seen.insert(name) {
            return Err(CatalogError::Duplicate(name.to_owned()));
        }
    }
    Ok(())
}
