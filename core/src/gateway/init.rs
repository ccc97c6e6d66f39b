//! `init_skilder`: start a session and show the roles of the agent's scope, nothing more.

use std::fmt::Write as _;

use serde_json::json;
use uuid::Uuid;

use super::relevance;
use super::{AgentIdentity, Gateway, GatewayError, ToolReply};
use crate::audit::NewEvent;
use crate::model::Role;
use crate::policy::SessionView;
use crate::store::sessions::{NewSession, insert_session_on};

/// Longest task summary we keep; it is advice for reviewers, not a document store.
const MAX_TASK_SUMMARY: usize = 2000;
/// Roles described in full when a task summary picks them out of a larger scope.
const SHORTLIST: usize = 3;

impl Gateway {
    /// `init_skilder`: starts a session and lists the roles of the agent's scope: name,
    /// description, skill names and learn path. No instructions and no tools yet. With a
    /// task summary and more than [`SHORTLIST`] roles, only the roles the task points at
    /// are described and the others are named (`learn /roles` describes them all).
    #[tracing::instrument(skip_all, fields(key = %agent.key_name, scope = %agent.scope))]
    pub async fn init(
        &self,
        agent: &AgentIdentity,
        task_summary: Option<String>,
    ) -> Result<ToolReply, GatewayError> {
        let now = Self::now();
        let task_summary = task_summary
            .map(|t| t.trim().chars().take(MAX_TASK_SUMMARY).collect::<String>())
            .filter(|t| !t.is_empty());
        let id = format!("ses_{}", Uuid::new_v4().simple());
        let ttl = chrono::Duration::from_std(self.options.session_ttl)
            .unwrap_or(chrono::Duration::hours(8));
        let view = SessionView::new(
            &id,
            agent.key_id.to_string(),
            agent.scope.clone(),
            now + ttl,
        );
        // The session and its `session_started` event commit together.
        let started = NewEvent::session_started(
            &id,
            &agent.key_name,
            agent.scope.as_str(),
            task_summary.as_deref(),
        );
        let (row, key_id, key_name) = (view.clone(), agent.key_id, agent.key_name.clone());
        let (connection, summary) = (agent.connection.clone(), task_summary.clone());
        self.audit
            .commit(move |conn| {
                Box::pin(async move {
                    let session = NewSession {
                        view: &row,
                        key_id,
                        key_name: &key_name,
                        connection: connection.as_deref(),
                        task_summary: summary.as_deref(),
                        created_at: now,
                    };
                    insert_session_on(conn, &session).await?;
                    Ok(Some(((), vec![started])))
                })
            })
            .await?;

        let catalog = self.catalog.load();
        let roles = catalog.roles_in_scope(agent.scope.as_str());
        // With a task summary and a scope larger than a shortlist, describe the roles the
        // task points at and name the others: the init result is paid for by every
        // session, and descriptions are what grows with the scope.
        let matched = match &task_summary {
            Some(task) if roles.len() > SHORTLIST => {
                relevance::matching_roles(task, &roles, SHORTLIST)
            }
            _ => Vec::new(),
        };
        let mut text = format!(
            "Session {id} started (scope: {scope}). Pass this session_id to learn and call_tool.\n\
             Learn the role your task needs with learn /roles/<role>, then call its tools with call_tool.\n",
            scope = agent.scope,
        );
        let described: Vec<&Role> = if matched.is_empty() {
            let _ = writeln!(text, "Roles ({}):", roles.len());
            roles.clone()
        } else {
            let _ = writeln!(
                text,
                "Roles that match your task ({} of {}):",
                matched.len(),
                roles.len()
            );
            matched.iter().map(|&index| roles[index]).collect()
        };
        let mut listed = Vec::with_capacity(described.len());
        for role in &described {
            write_role_line(&mut text, role);
            // Descriptions are in the text; programs get the names and paths.
            listed.push(role_json(role));
        }
        let others: Vec<&str> = roles
            .iter()
            .enumerate()
            .filter(|(index, _)| !matched.is_empty() && !matched.contains(index))
            .map(|(_, role)| role.slug.as_str())
            .collect();
        if !others.is_empty() {
            let _ = writeln!(
                text,
                "Other roles (learn /roles describes every role): {}.",
                others.join(", ")
            );
        }
        let guardrails = catalog.guardrail_sentences(agent.scope.as_str(), None);
        write_guardrails(&mut text, agent.scope.as_str(), &guardrails);
        let mut structured = json!({
            "session_id": id,
            "scope": agent.scope,
            "expires_at": view.expires_at,
            "roles": listed,
        });
        if !others.is_empty() {
            structured["other_roles"] = json!(others);
        }
        Ok(ToolReply::Gateway {
            text,
            structured,
            is_error: false,
        })
    }
}

/// A role as programs read it: name, skills and learn path (the description is in the text).
pub(super) fn role_json(role: &Role) -> serde_json::Value {
    json!({
        "name": role.slug,
        "skills": role.skills,
        "learn_path": format!("/roles/{}", role.slug),
    })
}

/// A scope's guardrails, which bind every role of it: a section of `init_skilder` and
/// `learn` results, absent when there are none.
pub(super) fn write_guardrails(text: &mut String, scope: &str, sentences: &[String]) {
    if sentences.is_empty() {
        return;
    }
    let _ = writeln!(
        text,
        "\n## Guardrails of scope {scope} (they bind every role, whichever authorizes a call)"
    );
    for sentence in sentences {
        let _ = writeln!(text, "- {sentence}");
    }
}

/// One short line per role: what is needed to choose it, nothing more.
pub(super) fn write_role_line(text: &mut String, role: &Role) {
    let skills: Vec<&str> = role.skills.iter().map(|s| s.as_str()).collect();
    let _ = writeln!(
        text,
        "- {slug}: {description} (skills: {skills})",
        slug = role.slug,
        description = role.description.trim_end(),
        skills = if skills.is_empty() {
            "none".to_owned()
        } else {
            skills.join(", ")
        },
    );
}
