//! Reading a catalog file and checking it whole: every problem, each named by its path in
//! the file (`roles[2].limits[0].max`), before anything is written.
//!
//! The rules are the model's own ([`Catalog::validate_tool`], `validate_skill`,
//! `validate_role`, `validate_scope`, [`Limit::validate`], [`AgentKeys::prepare`]), run
//! against the catalog as it would be after the apply: the file's entries, plus the stored
//! ones it keeps (all of them, unless `--prune`).

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use chrono::{DateTime, Utc};

use super::document::{CATALOG_VERSION, CatalogDocument, FieldError, KeyDoc};
use crate::keys::{AgentKeys, KeyError};
use crate::model::InspectionPolicy;
use crate::model::{
    ArgCheck, Catalog, CatalogError, CatalogTool, Limit, Role, Scope, Skill, SkillVersion,
    ToolSpec, Upstream, UpstreamKind,
};
use crate::revisions::curator::CURATION_UPSTREAM;
use crate::slug::Slug;
use crate::store::catalog_code::CatalogState;

/// One problem in a catalog file: where (`.` for the whole file) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub path: String,
    pub message: String,
}

impl Issue {
    pub(crate) fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Parses a catalog file. A YAML or type error, a key written twice in one mapping or
/// object (at any depth), or a document that YAML aliases blow up stops the parse, so it
/// is the only issue; its path is the field's (serde reports the first error it meets).
pub fn parse(bytes: &[u8]) -> Result<CatalogDocument, Vec<Issue>> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| vec![Issue::new(".", format!("the file is not UTF-8 text: {e}"))])?;
    super::shape::check(text).map_err(|issue| vec![issue])?;
    let deserializer = serde_norway::Deserializer::from_str(text);
    let doc: CatalogDocument = serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let path = e.path().to_string();
        let message = e.inner().to_string();
        // serde_norway names the path itself in some errors: say it once.
        let message = match message.strip_prefix(&format!("{path}: ")) {
            Some(rest) => rest.to_owned(),
            None => message,
        };
        vec![Issue::new(path, message)]
    })?;
    if doc.version != CATALOG_VERSION {
        return Err(vec![Issue::new(
            "version",
            format!(
                "version {} is not one this build reads (it reads {CATALOG_VERSION})",
                doc.version
            ),
        )]);
    }
    Ok(doc)
}

/// The catalog a valid file leads to, and the file's entries as model values.
#[derive(Debug, Clone)]
pub(crate) struct Desired {
    /// The catalog after the apply, built-in parts included.
    pub catalog: Catalog,
    pub upstreams: Vec<Upstream>,
    pub tools: Vec<CatalogTool>,
    pub skills: Vec<Skill>,
    pub roles: Vec<Role>,
    pub scopes: Vec<Scope>,
    pub keys: Vec<KeyDoc>,
}

struct Checker<'a> {
    issues: Vec<Issue>,
    state: &'a CatalogState,
    prune: bool,
}

impl Checker<'_> {
    fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.issues.push(Issue::new(path, message));
    }

    /// A model error at `path`; a reference to something the store has but `--prune`
    /// removes says so.
    fn catalog_error(&mut self, path: String, error: &CatalogError) {
        let pruned = match error {
            CatalogError::UnknownTool(t) => self.state.catalog.tool(t).is_some(),
            CatalogError::UnknownSkill(s) => self.state.catalog.skill(s.as_str()).is_some(),
            CatalogError::UnknownRole(r) => self.state.catalog.role(r.as_str()).is_some(),
            CatalogError::UnknownUpstream(u) => {
                self.state.catalog.upstreams.iter().any(|x| &x.name == u)
            }
            _ => false,
        };
        let mut message = error.to_string();
        if pruned && self.prune {
            message.push_str(": it is not in the file, so --prune would remove it");
        }
        self.push(path, message);
    }

    /// Names listed twice in one list of the file.
    fn duplicates<'n>(&mut self, list: &str, names: impl Iterator<Item = (&'n str, &'static str)>) {
        let mut first: HashMap<&str, usize> = HashMap::new();
        for (i, (name, field)) in names.enumerate() {
            if let Some(at) = first.get(name) {
                self.push(
                    format!("{list}[{i}].{field}"),
                    format!("`{name}` is listed twice (first at {list}[{at}])"),
                );
            } else {
                first.insert(name, i);
            }
        }
    }
}

/// Where in a list of names the first occurrence of `name` is, for a path.
fn index_of<'n>(names: impl IntoIterator<Item = &'n str>, name: &str) -> Option<usize> {
    names.into_iter().position(|n| n == name)
}

fn list_path(base: &str, field: &str, index: Option<usize>) -> String {
    match index {
        Some(i) => format!("{base}.{field}[{i}]"),
        None => format!("{base}.{field}"),
    }
}

/// The field of a limit an error is about, e.g. `max` for a negative cap.
fn limit_path(base: &str, limit: &Limit, error: &CatalogError) -> String {
    let after = |name: &str| match limit {
        Limit::Requires { after, .. } => index_of(after.iter().map(String::as_str), name),
        _ => None,
    };
    let same_arg = |name: &str| match limit {
        Limit::Requires { same_args, .. } => index_of(same_args.iter().map(String::as_str), name),
        _ => None,
    };
    let arg_field = || match limit {
        Limit::RequiresApproval { .. } => format!("{base}.when.arg"),
        _ => format!("{base}.arg"),
    };
    match error {
        CatalogError::UnknownTool(t) if t != limit.tool() => list_path(base, "after", after(t)),
        CatalogError::UnknownTool(_) | CatalogError::ToolNotGranted { .. } => {
            format!("{base}.tool")
        }
        CatalogError::UnknownArgument { tool, arg } => match limit {
            Limit::Requires { .. } => list_path(base, "same_args", same_arg(arg)),
            _ if tool == limit.tool() => arg_field(),
            _ => format!("{base}.arg"),
        },
        CatalogError::NotNumeric { .. } | CatalogError::NotString { .. } => arg_field(),
        CatalogError::RequiresItself { tool } => list_path(base, "after", after(tool)),
        CatalogError::EmptyLimit { what, .. } => match limit {
            Limit::Requires { .. } => format!("{base}.after"),
            Limit::ArgRule { .. } if what.starts_with("no tool glob") => format!("{base}.tool"),
            Limit::ArgRule { .. } if what.contains("selector") => format!("{base}.name"),
            Limit::ArgBound {
                check: ArgCheck::UrlHost { .. },
                ..
            }
            | Limit::ArgRule {
                check: ArgCheck::UrlHost { .. },
                ..
            } => format!("{base}.hosts"),
            _ => format!("{base}.values"),
        },
        CatalogError::InvalidArgCheck { .. } => match limit {
            Limit::ArgBound {
                check: ArgCheck::PathUnder { .. },
                ..
            }
            | Limit::ArgRule {
                check: ArgCheck::PathUnder { .. },
                ..
            } => format!("{base}.root"),
            _ => format!("{base}.hosts"),
        },
        CatalogError::NegativeCap { .. } => format!("{base}.max"),
        CatalogError::InvalidPointer { .. } => format!("{base}.result.pointer"),
        CatalogError::ResultValueTooLong { .. } => format!("{base}.result.equals"),
        CatalogError::ApprovalExpiry { .. } => format!("{base}.expires_in_minutes"),
        CatalogError::Duplicate(arg) => list_path(base, "same_args", same_arg(arg)),
        _ => base.to_owned(),
    }
}

/// Converts the file's limits, naming every field that is missing or foreign to its kind.
/// Reports the limits of `base` that did not convert (see [`super::document::to_limits`]).
fn limit_issues(checker: &mut Checker<'_>, base: &str, errors: Vec<(usize, FieldError)>) {
    for (j, e) in errors {
        checker.push(format!("{base}[{j}].{}", e.field), e.message);
    }
}

/// Checks a whole file against the stored state: every issue, or the catalog it leads to.
pub(crate) fn resolve(
    state: &CatalogState,
    doc: &CatalogDocument,
    prune: bool,
    now: DateTime<Utc>,
) -> Result<Desired, Vec<Issue>> {
    let mut c = Checker {
        issues: Vec::new(),
        state,
        prune,
    };
    c.duplicates(
        "upstreams",
        doc.upstreams.iter().map(|u| (u.name.as_str(), "name")),
    );
    c.duplicates("tools", doc.tools.iter().map(|t| (t.name.as_str(), "name")));
    c.duplicates(
        "skills",
        doc.skills.iter().map(|s| (s.slug.as_str(), "slug")),
    );
    c.duplicates("roles", doc.roles.iter().map(|r| (r.slug.as_str(), "slug")));
    c.duplicates(
        "scopes",
        doc.scopes.iter().map(|s| (s.slug.as_str(), "slug")),
    );
    c.duplicates("keys", doc.keys.iter().map(|k| (k.name.as_str(), "name")));

    let (builtin, builtin_tools) = crate::revisions::curator::builtin_catalog_parts();
    let mut upstreams = Vec::new();
    // An upstream with a bad field still names an upstream: its tools are not unknown.
    let mut placeholders = Vec::new();
    for (i, u) in doc.upstreams.iter().enumerate() {
        if u.name.as_str() == CURATION_UPSTREAM {
            c.push(
                format!("upstreams[{i}].name"),
                format!(
                    "`{CURATION_UPSTREAM}` is the built-in curation upstream; choose another name"
                ),
            );
            continue;
        }
        match u.to_upstream() {
            Ok(upstream) => upstreams.push(upstream),
            Err(errors) => {
                for e in errors {
                    c.push(format!("upstreams[{i}].{}", e.field), e.message);
                }
                placeholders.push(Upstream {
                    name: u.name.clone(),
                    kind: UpstreamKind::Http {
                        url: String::new(),
                        ca_bundle: None,
                        allow_plaintext: false,
                    },
                });
            }
        }
    }
    let mut tools = Vec::new();
    for (i, t) in doc.tools.iter().enumerate() {
        if builtin_tools.iter().any(|b| b.spec.name == t.name) {
            c.push(
                format!("tools[{i}].name"),
                format!(
                    "`{}` is a built-in curation tool: it is part of the binary",
                    t.name
                ),
            );
            continue;
        }
        let spec = t.spec();
        if let Some(pin) = &t.pin
            && *pin != spec.pin()
        {
            c.push(
                format!("tools[{i}].pin"),
                format!(
                    "the pin does not match the definition (its SHA-256 is {}): write that pin to admit the definition",
                    spec.pin()
                ),
            );
        }
        tools.push(CatalogTool {
            upstream: t.upstream.clone(),
            spec,
            quarantine: None,
        });
    }
    let skills: Vec<Skill> = doc.skills.iter().map(Skill::from).collect();
    let roles: Vec<Role> = doc
        .roles
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let (role, errors) = r.to_role();
            limit_issues(&mut c, &format!("roles[{i}].limits"), errors);
            role
        })
        .collect();
    let scopes: Vec<Scope> = doc
        .scopes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (scope, errors) = s.to_scope();
            limit_issues(&mut c, &format!("scopes[{i}].guardrails"), errors);
            scope
        })
        .collect();

    // The catalog after the apply: the file's entries, and the stored ones it keeps.
    let stored = &state.catalog;
    let in_file_upstream = |n: &Slug| doc.upstreams.iter().any(|u| &u.name == n);
    let mut after = Catalog {
        upstreams: upstreams.clone(),
        tools: tools.clone(),
        skills: skills
            .iter()
            .map(|s| SkillVersion {
                version: stored.skill(s.slug.as_str()).map_or(1, |v| v.version),
                skill: s.clone(),
            })
            .collect(),
        roles: roles.clone(),
        scopes: scopes.clone(),
        // Left out of the file: kept as stored, or the defaults with --prune.
        inspection: match &doc.inspection {
            Some(section) => section.to_policy(),
            None if prune => InspectionPolicy::default(),
            None => state.catalog.inspection.clone(),
        },
        quarantined_upstreams: state.catalog.quarantined_upstreams.clone(),
    };
    after.upstreams.extend(
        stored
            .upstreams
            .iter()
            .filter(|u| u.kind != UpstreamKind::Builtin && !in_file_upstream(&u.name) && !prune)
            .cloned(),
    );
    after.upstreams.extend(placeholders);
    after.upstreams.push(builtin);
    let kept_upstream =
        |name: &Slug, after: &Catalog| after.upstreams.iter().any(|u| &u.name == name);
    let mut unadmitted = BTreeSet::new();
    for tool in &stored.tools {
        if tool.upstream.as_str() == CURATION_UPSTREAM
            || doc.tools.iter().any(|t| t.name == tool.spec.name)
        {
            continue;
        }
        let pending = state.unadmitted.contains(&tool.spec.name);
        // A pending offer is never pruned by itself: it goes only with its upstream.
        if (!prune || pending) && kept_upstream(&tool.upstream, &after) {
            if pending {
                unadmitted.insert(tool.spec.name.clone());
            }
            after.tools.push(tool.clone());
        }
    }
    after.tools.extend(builtin_tools);
    if !prune {
        let skill_listed = |slug: &Slug| doc.skills.iter().any(|d| &d.slug == slug);
        let role_listed = |slug: &Slug| doc.roles.iter().any(|d| &d.slug == slug);
        let scope_listed = |slug: &Slug| doc.scopes.iter().any(|d| &d.slug == slug);
        after.skills.extend(
            stored
                .skills
                .iter()
                .filter(|s| !skill_listed(&s.skill.slug))
                .cloned(),
        );
        after.roles.extend(
            stored
                .roles
                .iter()
                .filter(|r| !role_listed(&r.slug))
                .cloned(),
        );
        after.scopes.extend(
            stored
                .scopes
                .iter()
                .filter(|s| !scope_listed(&s.slug))
                .cloned(),
        );
    }

    for (i, tool) in tools.iter().enumerate() {
        if let Err(e) = after.validate_tool(tool) {
            let field = match e {
                CatalogError::UnknownUpstream(_) => "upstream",
                CatalogError::InvalidSchema { .. } => "input_schema",
                _ => "name",
            };
            c.catalog_error(format!("tools[{i}].{field}"), &e);
        }
        let properties = tool.spec.input_schema.get("properties");
        for (k, arg) in tool.spec.sensitive_args.iter().enumerate() {
            if properties.and_then(|p| p.get(arg)).is_none() {
                c.push(
                    format!("tools[{i}].sensitive_args[{k}]"),
                    format!("tool `{}` has no argument `{arg}`", tool.spec.name),
                );
            }
        }
    }
    for (i, skill) in skills.iter().enumerate() {
        let base = format!("skills[{i}]");
        let tool_at = |name: &str| index_of(skill.tools.iter().map(String::as_str), name);
        if let Err(e) = after.validate_skill(skill) {
            let path = match &e {
                CatalogError::Empty(_) => format!("{base}.instructions"),
                CatalogError::UnknownTool(t) => list_path(&base, "tools", tool_at(t)),
                CatalogError::Duplicate(name) if tool_at(name).is_some() => format!("{base}.tools"),
                CatalogError::Duplicate(_) => format!("{base}.resources"),
                _ => base.clone(),
            };
            c.catalog_error(path, &e);
        }
        for (k, name) in skill.tools.iter().enumerate() {
            if unadmitted.contains(name) {
                c.push(
                    format!("{base}.tools[{k}]"),
                    CatalogError::ToolNotAdmitted(name.clone()).to_string()
                        + " (or list it under `tools` with its pin, which admits it)",
                );
            }
        }
    }
    for (i, role) in roles.iter().enumerate() {
        let base = format!("roles[{i}]");
        let bare = Role {
            limits: Vec::new(),
            ..role.clone()
        };
        if let Err(e) = after.validate_role(&bare) {
            let skill_at = |name: &str| index_of(role.skills.iter().map(Slug::as_str), name);
            let path = match &e {
                CatalogError::Empty(_) => format!("{base}.title"),
                CatalogError::DescriptionTooLong(_) => format!("{base}.description"),
                CatalogError::UnknownSkill(s) => list_path(&base, "skills", skill_at(s.as_str())),
                CatalogError::Duplicate(_) => format!("{base}.skills"),
                _ => base.clone(),
            };
            c.catalog_error(path, &e);
        }
        let granted = after.role_tools(role);
        for (j, limit) in role.limits.iter().enumerate() {
            let result = limit.validate(
                &role.slug,
                |name| after.tool(name).map(|t| &t.spec),
                |name| granted.contains(name),
            );
            if let Err(e) = result {
                c.catalog_error(limit_path(&format!("{base}.limits[{j}]"), limit, &e), &e);
            }
        }
    }
    for (i, scope) in scopes.iter().enumerate() {
        let base = format!("scopes[{i}]");
        let bare = Scope {
            guardrails: Vec::new(),
            ..scope.clone()
        };
        if let Err(e) = after.validate_scope(&bare) {
            let role_at = |name: &str| index_of(scope.roles.iter().map(Slug::as_str), name);
            let path = match &e {
                CatalogError::UnknownRole(r) => list_path(&base, "roles", role_at(r.as_str())),
                _ => format!("{base}.roles"),
            };
            c.catalog_error(path, &e);
        }
        for (j, limit) in scope.guardrails.iter().enumerate() {
            let result = limit.validate(
                &scope.slug,
                |name| after.tool(name).map(|t| &t.spec),
                |_| true,
            );
            if let Err(e) = result {
                c.catalog_error(
                    limit_path(&format!("{base}.guardrails[{j}]"), limit, &e),
                    &e,
                );
            }
        }
    }
    let known_scopes: Vec<Slug> = after.scopes.iter().map(|s| s.slug.clone()).collect();
    for (i, key) in doc.keys.iter().enumerate() {
        let base = format!("keys[{i}]");
        match state.keys.iter().find(|k| k.name == key.name) {
            Some(stored) if stored.revoked_at.is_some() => c.push(
                format!("{base}.name"),
                format!("agent key `{}` was revoked; a key's name is never reused, so choose another", key.name),
            ),
            Some(stored) if stored.scope != key.scope.as_str() => c.push(
                format!("{base}.scope"),
                format!(
                    "agent key `{}` belongs to scope `{}`; a key's scope cannot change: remove it from the file (revoked with --prune) and add a key with a new name",
                    key.name, stored.scope
                ),
            ),
            Some(stored) => {
                if !known_scopes.contains(&key.scope) {
                    let removed = if prune { ": it is not in the file, so --prune would remove it" } else { "" };
                    c.push(format!("{base}.scope"), format!("unknown scope `{}`{removed}", key.scope));
                }
                if stored.expires_at != key.expires_at
                    && key.expires_at.is_some_and(|at| at <= now)
                {
                    c.push(
                        format!("{base}.expires_at"),
                        "the new expiry is not in the future (to end a key, remove it from the file and apply with --prune)",
                    );
                }
            }
            // The key service's own checks; the secret it generates is dropped unused.
            None => {
                if let Err(e) = AgentKeys::prepare(&key.name, &key.scope, &known_scopes, key.expires_at, None) {
                    let field = match e {
                        KeyError::UnknownScope(_) => "scope",
                        KeyError::ExpiryInPast(_) => "expires_at",
                        _ => "name",
                    };
                    c.push(format!("{base}.{field}"), e.to_string());
                }
            }
        }
    }
    // The policy's rules name tools, roles and scopes of the catalog after the apply.
    for issue in crate::admin::policy_issues(&after, &after.inspection) {
        if doc.inspection.is_some() {
            c.push(format!("inspection.{}", issue.path()), issue.message);
        } else {
            c.push(
                ".",
                format!("the stored inspection policy (the file has no `inspection` section) would be invalid: {issue}"),
            );
        }
    }
    // What the file leaves in place must still hold together (a kept role's limit on a tool
    // a changed skill no longer grants): the model's whole-catalog check, once the file's
    // own entries pass.
    if c.issues.is_empty()
        && let Err(e) = after.validate()
    {
        c.push(
            ".",
            format!("an entry the file does not list (and the apply keeps) would be invalid: {e}"),
        );
    }
    if !c.issues.is_empty() {
        return Err(c.issues);
    }
    Ok(Desired {
        catalog: after,
        upstreams,
        tools,
        skills,
        roles,
        scopes,
        keys: doc.keys.clone(),
    })
}

/// Two tool definitions are the same when their pins are (sensitive markings aside).
pub(crate) fn same_definition(a: &ToolSpec, b: &ToolSpec) -> bool {
    a.pin() == b.pin()
}
