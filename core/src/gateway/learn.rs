//! `learn`: a role's instructions, skills, tools and limits (unlocking its tools), a skill
//! again, or a skill's resource document.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::init::{role_json, write_guardrails, write_role_line};
use super::path::{self, LearnPath};
use super::schema_text;
use super::{
    AgentIdentity, Gateway, GatewayError, NO_SESSION, Place, ToolReply, bounds, code_label, denial,
};
use crate::audit::NewEvent;
use crate::model::SkillVersion;
use crate::policy::{CompiledCatalog, DenyCode, SessionView};
use crate::slug::Slug;
use crate::store::sessions::save_session_state_on;

/// How often a learn retries when another process updated the session in between.
const SAVE_ATTEMPTS: usize = 8;

impl Gateway {
    /// `learn`: `/roles/<role>`, `/<skill>` or `/<skill>/<resource>`.
    #[tracing::instrument(skip_all, fields(key = %agent.key_name, path = %learn_path))]
    pub async fn learn(
        &self,
        agent: &AgentIdentity,
        session_id: Option<String>,
        learn_path: &str,
    ) -> Result<ToolReply, GatewayError> {
        let now = Self::now();
        let named = session_id.clone().filter(|id| !id.is_empty());
        if let Err(rule) =
            bounds::session_id(named.as_deref()).and_then(|()| bounds::learn_path(learn_path))
        {
            let place = Place::caller_naming(named.as_deref());
            return self
                .refuse(
                    &place,
                    agent,
                    learn_path,
                    DenyCode::InvalidArguments,
                    rule,
                    Vec::new(),
                )
                .await;
        }
        let resolved = self.resolve_session(agent, session_id).await?;
        let place = match &resolved {
            Some(stored) => Place::of(
                &stored.view.id,
                stored.view.owner_key_id == agent.key_id.to_string(),
            ),
            None => Place::caller_naming(named.as_deref()),
        };
        let Some(session) = Self::usable(agent, resolved, now) else {
            return self
                .refuse(
                    &place,
                    agent,
                    learn_path,
                    DenyCode::AccessDenied,
                    NO_SESSION.to_owned(),
                    Vec::new(),
                )
                .await;
        };
        let sid = session.view.id.clone();
        let place = Place::Session(sid.clone());
        let parsed = match path::parse(learn_path) {
            Ok(parsed) => parsed,
            Err(message) => {
                return self
                    .refuse(
                        &place,
                        agent,
                        learn_path,
                        DenyCode::InvalidArguments,
                        message,
                        Vec::new(),
                    )
                    .await;
            }
        };
        let catalog = self.catalog.load();
        match parsed {
            // A description of what the scope offers: nothing is unlocked, so there is no
            // decision to audit, and it says no more than `init_skilder` may.
            LearnPath::Roles => {
                let roles = catalog.roles_in_scope(agent.scope.as_str());
                let mut text = format!(
                    "Roles of scope {} ({}). Learn one with learn /roles/<role>.\n",
                    agent.scope,
                    roles.len()
                );
                for role in &roles {
                    write_role_line(&mut text, role);
                }
                let listed: Vec<Value> = roles.iter().map(|role| role_json(role)).collect();
                Ok(ToolReply::Gateway {
                    text,
                    structured: json!({ "scope": agent.scope, "roles": listed }),
                    is_error: false,
                })
            }
            LearnPath::Role(role) => {
                self.learn_role(agent, &sid, learn_path, &role, &catalog)
                    .await
            }
            LearnPath::Skill(skill) | LearnPath::Resource(skill, _)
                if !learned_skill(&catalog, &session.view, &skill) =>
            {
                let rule = format!(
                    "`{skill}` is not a skill of a role you have learned. Learn a role first (init_skilder lists them)."
                );
                let available = catalog.available_tools(&session.view);
                self.refuse(
                    &place,
                    agent,
                    learn_path,
                    DenyCode::AccessDenied,
                    rule,
                    available,
                )
                .await
            }
            LearnPath::Skill(skill) => {
                let skill = catalog
                    .catalog()
                    .skill(skill.as_str())
                    .expect("checked above");
                self.audit
                    .append(
                        NewEvent::new(
                            crate::audit::EventKind::LearnGranted,
                            json!({"path": learn_path, "skill": skill.skill.slug, "version": skill.version}),
                        )
                        .in_session(&sid)
                        .by(&agent.key_name),
                    )
                    .await?;
                let mut text = String::new();
                render_skill(&mut text, &catalog, skill);
                Ok(ToolReply::Gateway {
                    text,
                    structured: skill_json(skill),
                    is_error: false,
                })
            }
            LearnPath::Resource(skill, resource) => {
                let skill = catalog
                    .catalog()
                    .skill(skill.as_str())
                    .expect("checked above");
                let Some(document) = skill.skill.resource(resource.as_str()) else {
                    let names: Vec<&str> = skill
                        .skill
                        .resources
                        .iter()
                        .map(|r| r.name.as_str())
                        .collect();
                    let rule = format!(
                        "skill `{}` has no resource `{resource}`; its resources: {}",
                        skill.skill.slug,
                        if names.is_empty() {
                            "none".to_owned()
                        } else {
                            names.join(", ")
                        }
                    );
                    return self
                        .refuse(
                            &place,
                            agent,
                            learn_path,
                            DenyCode::InvalidArguments,
                            rule,
                            Vec::new(),
                        )
                        .await;
                };
                self.audit
                    .append(
                        NewEvent::new(
                            crate::audit::EventKind::LearnGranted,
                            json!({"path": learn_path, "skill": skill.skill.slug, "version": skill.version, "resource": document.name}),
                        )
                        .in_session(&sid)
                        .by(&agent.key_name),
                    )
                    .await?;
                Ok(ToolReply::Gateway {
                    text: format!("# {}\n\n{}", document.title, document.content),
                    structured: json!({
                        "skill": skill.skill.slug,
                        "version": skill.version,
                        "resource": document.name,
                        "title": document.title,
                        "content": document.content,
                    }),
                    is_error: false,
                })
            }
        }
    }

    async fn learn_role(
        &self,
        agent: &AgentIdentity,
        sid: &str,
        learn_path: &str,
        role_slug: &Slug,
        catalog: &CompiledCatalog,
    ) -> Result<ToolReply, GatewayError> {
        let in_scope = catalog.scope_allows(agent.scope.as_str(), role_slug.as_str());
        let Some(role) = catalog.role(role_slug.as_str()).filter(|_| in_scope) else {
            // Same answer whether the role exists elsewhere or not at all.
            let learnable: Vec<String> = catalog
                .roles_in_scope(agent.scope.as_str())
                .iter()
                .map(|r| r.slug.to_string())
                .collect();
            let rule = format!(
                "role `{role_slug}` is not learnable in your scope ({}). Roles you can learn: {}.",
                agent.scope,
                learnable.join(", ")
            );
            return self
                .refuse(
                    &Place::Session(sid.to_owned()),
                    agent,
                    learn_path,
                    DenyCode::AccessDenied,
                    rule,
                    Vec::new(),
                )
                .await;
        };

        let skills = catalog.skill_versions_of(role.slug.as_str());
        let versions: BTreeMap<String, u32> = skills
            .iter()
            .map(|s| (s.skill.to_string(), s.version))
            .collect();
        let _guard = self.locks.lock(sid).await;
        let mut saved = None;
        for _ in 0..SAVE_ATTEMPTS {
            let Some(mut stored) = self.store.load_session(sid).await? else {
                break;
            };
            stored.view.learn(role.slug.clone(), skills.clone());
            let granted = NewEvent::learn_granted(
                sid,
                &agent.key_name,
                learn_path,
                role.slug.as_str(),
                &versions,
            );
            // The unlock and its event commit in one transaction: a role is never unlocked
            // without its `learn_granted` event, nor the event written for a lost save.
            let revision = stored.revision;
            let view = stored.view;
            let committed = self
                .audit
                .commit(move |conn| {
                    Box::pin(async move {
                        let applied = save_session_state_on(conn, &view, revision).await?;
                        Ok(applied.then(|| (view, vec![granted])))
                    })
                })
                .await?;
            if let Some(view) = committed {
                saved = Some(view);
                break;
            }
        }
        let Some(view) = saved else {
            return self
                .refuse(
                    &Place::Session(sid.to_owned()),
                    agent,
                    learn_path,
                    DenyCode::AccessDenied,
                    "The session changed too often to record the learned role; try again."
                        .to_owned(),
                    Vec::new(),
                )
                .await;
        };

        let unlocked: Vec<String> = catalog
            .role_tools(role.slug.as_str())
            .map(|tools| tools.iter().cloned().collect())
            .unwrap_or_default();
        let limits = role.limit_sentences();
        let mut text = format!(
            "# Role {} ({})\n\n{}\n",
            role.slug,
            role.title,
            role.instructions.trim_end()
        );
        if !limits.is_empty() {
            text.push_str("\n## Limits the gateway enforces\n");
            for sentence in &limits {
                let _ = writeln!(text, "- {sentence}");
            }
        }
        // The scope's guardrails on this role's tools bind it too, whatever its own limits say.
        let guardrails = catalog
            .guardrail_sentences(agent.scope.as_str(), catalog.role_tools(role.slug.as_str()));
        write_guardrails(&mut text, agent.scope.as_str(), &guardrails);
        let mut skill_values = Vec::new();
        for learned in &skills {
            if let Some(skill) = catalog.catalog().skill(learned.skill.as_str()) {
                text.push('\n');
                render_skill(&mut text, catalog, skill);
                skill_values.push(skill_json(skill));
            }
        }
        let available = catalog.available_tools(&view);
        let _ = write!(
            text,
            "\nTools unlocked: {}. Call them with call_tool.",
            unlocked.join(", ")
        );
        // Only news is worth the context: the list again when it says the same is not.
        if available != unlocked {
            let _ = write!(
                text,
                " Tools available in this session now: {}.",
                available.join(", ")
            );
        }
        // The limits and the unlocked tools are in the text, and each skill lists its tools:
        // programs get what the text does not say in a parseable form.
        Ok(ToolReply::Gateway {
            text,
            structured: json!({
                "role": role.slug,
                "skills": skill_values,
                "available_tools": available,
            }),
            is_error: false,
        })
    }
}

impl Gateway {
    /// Audits a refused learn where it belongs (durably, before the agent hears of it) and
    /// builds the denial.
    async fn refuse(
        &self,
        place: &Place,
        agent: &AgentIdentity,
        learn_path: &str,
        code: DenyCode,
        rule: String,
        available_tools: Vec<String>,
    ) -> Result<ToolReply, GatewayError> {
        let event = NewEvent::learn_denied(
            &agent.key_name,
            &bounds::audited_path(learn_path),
            &code_label(code),
        );
        self.audit.append(place.place(event)).await?;
        Ok(denial(code, rule, available_tools))
    }
}

/// True when `skill` belongs to a role the session learned and may still use.
fn learned_skill(catalog: &CompiledCatalog, session: &SessionView, skill: &Slug) -> bool {
    session.learned.iter().any(|learned| {
        catalog.scope_allows(session.scope.as_str(), learned.role.as_str())
            && catalog
                .role(learned.role.as_str())
                .is_some_and(|role| role.skills.contains(skill))
    })
}

fn render_skill(text: &mut String, catalog: &CompiledCatalog, skill: &SkillVersion) {
    let s = &skill.skill;
    let _ = writeln!(
        text,
        "## Skill {} (version {})\n\n{}",
        s.slug,
        skill.version,
        s.instructions.trim_end()
    );
    if !s.tools.is_empty() {
        text.push_str("\nTools (`?` marks an optional argument):\n");
        for name in &s.tools {
            if let Some(tool) = catalog.tool(name) {
                let _ = writeln!(text, "- {name}: {}", tool.spec.description.trim_end());
                match schema_text::render_arguments(&tool.spec.input_schema, "  ") {
                    Some(arguments) => {
                        let _ = writeln!(text, "{arguments}");
                    }
                    None => {
                        let _ = writeln!(
                            text,
                            "  Arguments (JSON Schema): {}",
                            tool.spec.input_schema
                        );
                    }
                }
            }
        }
    }
    if !s.resources.is_empty() {
        text.push_str("\nResources:\n");
        for r in &s.resources {
            let _ = writeln!(
                text,
                "- {} ({}): learn /{}/{}",
                r.name, r.title, s.slug, r.name
            );
        }
    }
}

/// The program-facing summary of a skill. The instructions and tool schemas are in the
/// text already; repeating them here would double what the model's context pays for.
fn skill_json(skill: &SkillVersion) -> Value {
    let s = &skill.skill;
    json!({
        "name": s.slug,
        "version": skill.version,
        "tools": s.tools,
        "resources": s.resources.iter().map(|r| format!("/{}/{}", s.slug, r.name)).collect::<Vec<_>>(),
    })
}
