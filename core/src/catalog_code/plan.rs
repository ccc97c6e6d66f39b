//! The plan: what applying a valid file creates, changes and removes, entity by entity,
//! with the fields that change. Pure: the state and the checked file in, the plan out.

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::{Value, json};

use super::diff::{FieldChange, field_changes};
use super::document::{RoleDoc, ScopeDoc, SkillDoc, UpstreamDoc};
use super::validate::{Desired, same_definition};
use crate::model::{
    CatalogTool, InspectionPolicy, Limit, Role, Scope, Skill, ToolSpec, Upstream, UpstreamKind,
};
use crate::revisions::curator::CURATION_UPSTREAM;
use crate::slug::Slug;
use crate::store::catalog_code::CatalogState;

/// The kinds of entity a catalog file holds, in the order a plan lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EntityKind {
    Upstream,
    Tool,
    Skill,
    Role,
    Scope,
    /// The inspection policy: one per catalog, named `policy`.
    Inspection,
    AgentKey,
}

impl EntityKind {
    /// The audit target prefix (`role:…`) and action prefix (`role.update`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Upstream => "upstream",
            Self::Tool => "tool",
            Self::Skill => "skill",
            Self::Role => "role",
            Self::Scope => "scope",
            Self::Inspection => "inspection",
            Self::AgentKey => "agent_key",
        }
    }

    fn words(self) -> &'static str {
        match self {
            Self::AgentKey => "agent key",
            other => other.label(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Create,
    Change,
    Remove,
}

/// What executing a change writes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Write {
    PutUpstream(Upstream),
    DeleteUpstream(Slug),
    PutTool(CatalogTool),
    DeleteTool(String),
    PutSkill(Skill),
    DeleteSkill(Slug),
    PutRole(Role),
    DeleteRole(Slug),
    PutScope(Scope),
    DeleteScope(Slug),
    PutInspection(InspectionPolicy),
    CreateKey {
        name: String,
        scope: Slug,
        expires_at: Option<DateTime<Utc>>,
    },
    SetKeyExpiry {
        name: String,
        expires_at: Option<DateTime<Utc>>,
    },
    RevokeKey(String),
}

/// One entity the apply creates, changes or removes.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub kind: EntityKind,
    pub name: String,
    pub action: Action,
    /// For a change: the fields that differ (`limits[1]`, `instructions`, …).
    pub fields: Vec<String>,
    /// A short note for the reader (`new version`, `and its 3 tools`, `scope support`).
    pub note: Option<String>,
    /// For a change: each value it sets, old and new (`limits[1].max: 1000 → 900`).
    pub details: Vec<FieldChange>,
    pub(crate) write: Write,
    /// The `admin_change` event's `before` and `after`.
    pub(crate) before: Value,
    pub(crate) after: Value,
}

impl Change {
    /// The audit action, e.g. `role.update` or `agent_key.revoke`.
    pub fn audit_action(&self) -> String {
        let verb = match (self.kind, self.action) {
            (_, Action::Create) => "create",
            (_, Action::Change) => "update",
            (EntityKind::AgentKey, Action::Remove) => "revoke",
            (_, Action::Remove) => "delete",
        };
        format!("{}.{verb}", self.kind.label())
    }

    /// The audit target, e.g. `role:tier-1-support`.
    pub fn target(&self) -> String {
        crate::admin::target(self.kind.label(), &self.name)
    }
}

/// Everything an apply would do, in the order it is listed (and written).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    pub changes: Vec<Change>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    pub fn count(&self, action: Action) -> usize {
        self.changes.iter().filter(|c| c.action == action).count()
    }
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Change => "change",
            Self::Remove => "remove",
        }
    }
}

impl Plan {
    /// The plan for programs (CI gating on a dry run): each change with its kind, name,
    /// action, fields, note and the values it sets, and the counts.
    pub fn to_json(&self) -> Value {
        let changes: Vec<Value> = self
            .changes
            .iter()
            .map(|c| {
                json!({
                    "kind": c.kind.label(),
                    "name": c.name,
                    "action": c.action.as_str(),
                    "fields": c.fields,
                    "note": c.note,
                    "details": c.details,
                })
            })
            .collect();
        json!({
            "changes": changes,
            "create": self.count(Action::Create),
            "change": self.count(Action::Change),
            "remove": self.count(Action::Remove),
        })
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return writeln!(f, "no changes");
        }
        for change in &self.changes {
            let sign = match change.action {
                Action::Create => '+',
                Action::Change => '~',
                Action::Remove => '-',
            };
            write!(f, "{sign} {} {}", change.kind.words(), change.name)?;
            if !change.fields.is_empty() {
                write!(f, ": {}", change.fields.join(", "))?;
            }
            if let Some(note) = &change.note {
                write!(f, " ({note})")?;
            }
            writeln!(f)?;
            for detail in &change.details {
                writeln!(f, "    {detail}")?;
            }
        }
        writeln!(
            f,
            "{} to create, {} to change, {} to remove",
            self.count(Action::Create),
            self.count(Action::Change),
            self.count(Action::Remove)
        )
    }
}

fn value(entity: &impl Serialize) -> Value {
    json!({ "value": entity })
}

fn tool_value(tool: &CatalogTool) -> Value {
    json!({ "value": {
        "upstream": tool.upstream,
        "definition": tool.spec.definition(),
        "pin": tool.spec.pin(),
        "sensitive_args": tool.spec.sensitive_args,
    }})
}

fn stamp(at: Option<DateTime<Utc>>) -> Value {
    at.map_or(Value::Null, |at| {
        Value::String(at.to_rfc3339_opts(SecondsFormat::AutoSi, true))
    })
}

/// Names of the fields that differ, compared in their document form.
fn differing<T: Serialize>(before: &T, after: &T) -> Vec<String> {
    let (Ok(Value::Object(b)), Ok(Value::Object(a))) =
        (serde_json::to_value(before), serde_json::to_value(after))
    else {
        return Vec::new();
    };
    let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
    keys.dedup();
    let mut seen = std::collections::BTreeSet::new();
    keys.into_iter()
        .filter(|k| seen.insert(*k) && b.get(*k) != a.get(*k))
        .cloned()
        .collect()
}

/// `limits[1]`, `limits[3]` for the limits that differ by position.
fn differing_limits(field: &str, before: &[Limit], after: &[Limit]) -> Vec<String> {
    (0..before.len().max(after.len()))
        .filter(|&j| before.get(j) != after.get(j))
        .map(|j| format!("{field}[{j}]"))
        .collect()
}

struct Builder {
    changes: Vec<Change>,
}

impl Builder {
    #[expect(
        clippy::too_many_arguments,
        reason = "one call site per kind of change"
    )]
    fn push(
        &mut self,
        kind: EntityKind,
        name: &str,
        action: Action,
        fields: Vec<String>,
        note: Option<String>,
        write: Write,
        before: Value,
        after: Value,
    ) {
        // What the change sets, from the audit's before and after; the kinds whose stored
        // form is not the document's replace it (`detail_from`).
        let details = if action == Action::Change {
            let side = |v: &Value| v.get("value").cloned().unwrap_or_else(|| v.clone());
            field_changes(&side(&before), &side(&after))
        } else {
            Vec::new()
        };
        self.changes.push(Change {
            kind,
            name: name.to_owned(),
            action,
            fields,
            note,
            details,
            write,
            before,
            after,
        });
    }

    /// Words the last change's values in the document's form (`before` → `after`).
    fn detail_from<T: Serialize>(&mut self, before: &T, after: &T) {
        if let (Some(change), Ok(before), Ok(after)) = (
            self.changes.last_mut(),
            serde_json::to_value(before),
            serde_json::to_value(after),
        ) {
            change.details = field_changes(&before, &after);
        }
    }
}

fn is_builtin(upstream: &Upstream) -> bool {
    upstream.kind == UpstreamKind::Builtin || upstream.name.as_str() == CURATION_UPSTREAM
}

/// The plan from `state` to the checked file `desired`.
pub(crate) fn plan(
    state: &CatalogState,
    desired: &Desired,
    prune: bool,
    now: DateTime<Utc>,
) -> Plan {
    let stored = &state.catalog;
    let mut b = Builder {
        changes: Vec::new(),
    };

    // Upstreams.
    let mut upstreams: Vec<&Upstream> = desired.upstreams.iter().collect();
    upstreams.sort_by(|x, y| x.name.cmp(&y.name));
    for upstream in upstreams {
        let write = Write::PutUpstream(upstream.clone());
        match stored.upstreams.iter().find(|u| u.name == upstream.name) {
            None => b.push(
                EntityKind::Upstream,
                upstream.name.as_str(),
                Action::Create,
                Vec::new(),
                None,
                write,
                Value::Null,
                value(upstream),
            ),
            Some(old) if old != upstream => {
                let (was, will) = (UpstreamDoc::from(old), UpstreamDoc::from(upstream));
                b.push(
                    EntityKind::Upstream,
                    upstream.name.as_str(),
                    Action::Change,
                    differing(&was, &will),
                    Some("its stored credentials are kept".into()),
                    write,
                    value(old),
                    value(upstream),
                );
                b.detail_from(&was, &will);
            }
            Some(_) => {}
        }
    }
    let removed_upstreams: Vec<&Upstream> = if prune {
        stored
            .upstreams
            .iter()
            .filter(|u| !is_builtin(u) && !desired.upstreams.iter().any(|d| d.name == u.name))
            .collect()
    } else {
        Vec::new()
    };

    // Tools.
    let mut tools: Vec<&CatalogTool> = desired.tools.iter().collect();
    tools.sort_by(|x, y| x.spec.name.cmp(&y.spec.name));
    for tool in tools {
        let write = Write::PutTool(tool.clone());
        let name = tool.spec.name.as_str();
        match stored.tool(name) {
            None => b.push(
                EntityKind::Tool,
                name,
                Action::Create,
                Vec::new(),
                None,
                write,
                Value::Null,
                tool_value(tool),
            ),
            Some(old) => {
                let mut fields = Vec::new();
                if old.upstream != tool.upstream {
                    fields.push("upstream".to_owned());
                }
                let pending = state.unadmitted.contains(name);
                if !same_definition(&old.spec, &tool.spec) || pending {
                    fields.extend(definition_fields(&old.spec, &tool.spec));
                }
                if old.spec.sensitive_args != tool.spec.sensitive_args {
                    fields.push("sensitive_args".to_owned());
                }
                if !fields.is_empty() {
                    let note = (pending || !same_definition(&old.spec, &tool.spec))
                        .then(|| "the file's definition is admitted and pinned".to_owned());
                    b.push(
                        EntityKind::Tool,
                        name,
                        Action::Change,
                        fields,
                        note,
                        write,
                        tool_value(old),
                        tool_value(tool),
                    );
                }
            }
        }
    }
    if prune {
        let mut gone: Vec<&CatalogTool> = stored
            .tools
            .iter()
            .filter(|t| t.upstream.as_str() != CURATION_UPSTREAM)
            .filter(|t| !desired.tools.iter().any(|d| d.spec.name == t.spec.name))
            .filter(|t| {
                let upstream_goes = removed_upstreams.iter().any(|u| u.name == t.upstream);
                upstream_goes || !state.unadmitted.contains(&t.spec.name)
            })
            .collect();
        gone.sort_by(|x, y| x.spec.name.cmp(&y.spec.name));
        for tool in gone {
            b.push(
                EntityKind::Tool,
                &tool.spec.name,
                Action::Remove,
                Vec::new(),
                None,
                Write::DeleteTool(tool.spec.name.clone()),
                tool_value(tool),
                Value::Null,
            );
        }
    }

    // Skills.
    let mut skills: Vec<&Skill> = desired.skills.iter().collect();
    skills.sort_by(|x, y| x.slug.cmp(&y.slug));
    for skill in skills {
        let write = Write::PutSkill(skill.clone());
        match stored.skill(skill.slug.as_str()) {
            None => b.push(
                EntityKind::Skill,
                skill.slug.as_str(),
                Action::Create,
                Vec::new(),
                None,
                write,
                Value::Null,
                value(skill),
            ),
            Some(old) if old.skill != *skill => {
                let (was, will) = (SkillDoc::from(&old.skill), SkillDoc::from(skill));
                b.push(
                    EntityKind::Skill,
                    skill.slug.as_str(),
                    Action::Change,
                    differing(&was, &will),
                    Some(format!("a new version after version {}", old.version)),
                    write,
                    value(old),
                    value(skill),
                );
                b.detail_from(&was, &will);
            }
            Some(_) => {}
        }
    }
    if prune {
        for old in stored
            .skills
            .iter()
            .filter(|s| !desired.skills.iter().any(|d| d.slug == s.skill.slug))
        {
            b.push(
                EntityKind::Skill,
                old.skill.slug.as_str(),
                Action::Remove,
                Vec::new(),
                Some("with every version and candidate".into()),
                Write::DeleteSkill(old.skill.slug.clone()),
                value(old),
                Value::Null,
            );
        }
    }

    // Roles.
    let mut roles: Vec<&Role> = desired.roles.iter().collect();
    roles.sort_by(|x, y| x.slug.cmp(&y.slug));
    for role in roles {
        let write = Write::PutRole(role.clone());
        match stored.role(role.slug.as_str()) {
            None => b.push(
                EntityKind::Role,
                role.slug.as_str(),
                Action::Create,
                Vec::new(),
                None,
                write,
                Value::Null,
                value(role),
            ),
            Some(old) if old != role => {
                let strip = |r: &Role| Role {
                    limits: Vec::new(),
                    ..r.clone()
                };
                let mut fields = differing(&strip(old), &strip(role));
                fields.extend(differing_limits("limits", &old.limits, &role.limits));
                b.push(
                    EntityKind::Role,
                    role.slug.as_str(),
                    Action::Change,
                    fields,
                    None,
                    write,
                    value(old),
                    value(role),
                );
                b.detail_from(&RoleDoc::from(old), &RoleDoc::from(role));
            }
            Some(_) => {}
        }
    }
    if prune {
        for old in stored
            .roles
            .iter()
            .filter(|r| !desired.roles.iter().any(|d| d.slug == r.slug))
        {
            b.push(
                EntityKind::Role,
                old.slug.as_str(),
                Action::Remove,
                Vec::new(),
                None,
                Write::DeleteRole(old.slug.clone()),
                value(old),
                Value::Null,
            );
        }
    }

    // Scopes.
    let mut scopes: Vec<&Scope> = desired.scopes.iter().collect();
    scopes.sort_by(|x, y| x.slug.cmp(&y.slug));
    for scope in scopes {
        let write = Write::PutScope(scope.clone());
        match stored.scope(scope.slug.as_str()) {
            None => b.push(
                EntityKind::Scope,
                scope.slug.as_str(),
                Action::Create,
                Vec::new(),
                None,
                write,
                Value::Null,
                value(scope),
            ),
            Some(old) if old != scope => {
                let strip = |s: &Scope| Scope {
                    guardrails: Vec::new(),
                    ..s.clone()
                };
                let mut fields = differing(&strip(old), &strip(scope));
                fields.extend(differing_limits(
                    "guardrails",
                    &old.guardrails,
                    &scope.guardrails,
                ));
                b.push(
                    EntityKind::Scope,
                    scope.slug.as_str(),
                    Action::Change,
                    fields,
                    None,
                    write,
                    value(old),
                    value(scope),
                );
                b.detail_from(&ScopeDoc::from(old), &ScopeDoc::from(scope));
            }
            Some(_) => {}
        }
    }
    if prune {
        for old in stored
            .scopes
            .iter()
            .filter(|s| !desired.scopes.iter().any(|d| d.slug == s.slug))
        {
            b.push(
                EntityKind::Scope,
                old.slug.as_str(),
                Action::Remove,
                Vec::new(),
                None,
                Write::DeleteScope(old.slug.clone()),
                value(old),
                Value::Null,
            );
        }
    }

    // The inspection policy: changed or not, never created or removed.
    let (before, after) = (&stored.inspection, &desired.catalog.inspection);
    if before != after {
        // Sorted: the order would otherwise depend on which side leaves `rules` out.
        let mut fields = differing(before, after);
        fields.sort();
        b.push(
            EntityKind::Inspection,
            "policy",
            Action::Change,
            fields,
            None,
            Write::PutInspection(after.clone()),
            value(before),
            value(after),
        );
    }

    // Agent keys.
    let mut keys: Vec<_> = desired.keys.iter().collect();
    keys.sort_by(|x, y| x.name.cmp(&y.name));
    for key in keys {
        match state.keys.iter().find(|k| k.name == key.name) {
            None => b.push(
                EntityKind::AgentKey,
                &key.name,
                Action::Create,
                Vec::new(),
                Some(format!(
                    "scope {}; its secret is printed once, when it is created",
                    key.scope
                )),
                Write::CreateKey {
                    name: key.name.clone(),
                    scope: key.scope.clone(),
                    expires_at: key.expires_at,
                },
                Value::Null,
                json!({ "scope": key.scope, "expires_at": stamp(key.expires_at) }),
            ),
            Some(old) if old.expires_at != key.expires_at => b.push(
                EntityKind::AgentKey,
                &key.name,
                Action::Change,
                vec!["expires_at".into()],
                None,
                Write::SetKeyExpiry {
                    name: key.name.clone(),
                    expires_at: key.expires_at,
                },
                json!({ "expires_at": stamp(old.expires_at) }),
                json!({ "expires_at": stamp(key.expires_at) }),
            ),
            Some(_) => {}
        }
    }
    if prune {
        for old in state
            .keys
            .iter()
            .filter(|k| k.is_active(now) && !desired.keys.iter().any(|d| d.name == k.name))
        {
            b.push(
                EntityKind::AgentKey,
                &old.name,
                Action::Remove,
                Vec::new(),
                Some("revoked: it stops authenticating at once".into()),
                Write::RevokeKey(old.name.clone()),
                json!({ "scope": old.scope, "prefix": old.prefix }),
                Value::Null,
            );
        }
    }

    for upstream in removed_upstreams {
        b.push(
            EntityKind::Upstream,
            upstream.name.as_str(),
            Action::Remove,
            Vec::new(),
            Some("with its stored credentials".into()),
            Write::DeleteUpstream(upstream.name.clone()),
            value(upstream),
            Value::Null,
        );
    }

    b.changes
        .sort_by(|x, y| (x.kind, &x.name).cmp(&(y.kind, &y.name)));
    Plan { changes: b.changes }
}

/// The parts of a tool definition that differ, as the document's field names.
fn definition_fields(old: &ToolSpec, new: &ToolSpec) -> Vec<String> {
    let parts = old.changed_parts(new);
    if parts.is_empty() {
        return vec!["admitted".into()];
    }
    parts.into_iter().map(|p| p.replace(' ', "_")).collect()
}
