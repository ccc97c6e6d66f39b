//! `feedback_skill`: agents rate the skills they used, for the skill's curators.

use serde_json::json;
use uuid::Uuid;

use super::{AgentIdentity, Gateway, GatewayError, NO_SESSION, ToolReply, denial};
use crate::audit::NewEvent;
use crate::policy::DenyCode;
use crate::store::sessions::NewFeedback;

/// Longest comment we keep.
const MAX_COMMENT: usize = 4000;

impl Gateway {
    /// `feedback_skill`: records a rating (1–5) and optional comment on a skill the
    /// session has learned; returns the new `feedback_id`.
    #[tracing::instrument(skip_all, fields(key = %agent.key_name, skill = %skill))]
    pub async fn feedback(
        &self,
        agent: &AgentIdentity,
        session_id: Option<String>,
        skill: &str,
        rating: i64,
        comment: Option<String>,
    ) -> Result<ToolReply, GatewayError> {
        let now = Self::now();
        let Some(session) =
            Self::usable(agent, self.resolve_session(agent, session_id).await?, now)
        else {
            return Ok(denial(
                DenyCode::AccessDenied,
                NO_SESSION.to_owned(),
                Vec::new(),
            ));
        };
        let rating = match u8::try_from(rating) {
            Ok(r @ 1..=5) => r,
            _ => {
                return Ok(denial(
                    DenyCode::InvalidArguments,
                    format!("rating must be an integer from 1 to 5, not {rating}"),
                    Vec::new(),
                ));
            }
        };
        let Some(version) = session
            .view
            .learned
            .iter()
            .flat_map(|l| l.skills.iter())
            .find(|s| s.skill.as_str() == skill)
            .map(|s| s.version)
        else {
            return Ok(denial(
                DenyCode::AccessDenied,
                format!("`{skill}` is not a skill of a role this session has learned"),
                Vec::new(),
            ));
        };
        let comment = comment
            .map(|c| c.trim().chars().take(MAX_COMMENT).collect::<String>())
            .filter(|c| !c.is_empty());
        let id = format!("fb_{}", Uuid::new_v4().simple());
        self.store
            .insert_feedback(&NewFeedback {
                id: &id,
                skill,
                version,
                rating,
                comment: comment.as_deref(),
                session_id: Some(&session.view.id),
                key_id: Some(agent.key_id),
                key_name: Some(&agent.key_name),
                at: now,
            })
            .await?;
        let mut event = NewEvent::feedback(
            &session.view.id,
            &agent.key_name,
            skill,
            rating,
            comment.as_deref(),
        );
        event.payload["feedback_id"] = json!(id);
        event.payload["version"] = json!(version);
        self.audit.append(event).await?;
        Ok(ToolReply::Gateway {
            text: format!(
                "Feedback {id} recorded for skill {skill} (version {version}): rating {rating}/5. Thank you."
            ),
            structured: json!({
                "feedback_id": id,
                "skill": skill,
                "version": version,
                "rating": rating,
            }),
            is_error: false,
        })
    }
}
