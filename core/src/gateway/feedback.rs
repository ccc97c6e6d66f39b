//! `feedback_skill`: agents rate the skills they used, for the skill's curators.
//!
//! Every call counts against the key's rate limit ([`limits::FEEDBACK`]), and every
//! refusal is audited: a `feedback` event with `"decision": "denied"`, its code and rule.
//! A refusal inside the caller's own live session is written into that session. When the
//! session named is not the caller's (unknown, expired, another key's) the event is
//! written under the caller with no session, and carries `named_session_digest` (hex
//! SHA-256 of the id named, when one was), so it never lands in someone else's timeline.

use std::time::Duration;

use serde_json::json;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{
    AgentIdentity, Gateway, GatewayError, NO_SESSION, Place, ToolReply, bounds, code_label, denial,
};
use crate::audit::{EventKind, NewEvent};
use crate::policy::DenyCode;
use crate::revisions::limits::{self, FEEDBACK, Slot};
use crate::slug::MAX_SLUG_LEN;
use crate::store::sessions::NewFeedback;

/// Longest comment we take, in characters.
pub const MAX_COMMENT: usize = 4000;

/// What a refusal's audit event says about the request.
struct Request<'a> {
    agent: &'a AgentIdentity,
    /// The caller's own live session, or the caller alone naming another id.
    place: Place,
    skill: &'a str,
    rating: i64,
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

impl Request<'_> {
    fn denied_event(&self, code: DenyCode, rule: &str) -> NewEvent {
        let mut payload = json!({
            "decision": "denied",
            "code": code_label(code),
            "rule": rule,
            "rating": self.rating,
        });
        // A name too long to be a skill is kept as its digest, not stored in full.
        if self.skill.chars().count() <= MAX_SLUG_LEN {
            payload["skill"] = json!(self.skill);
        } else {
            payload["skill_sha256"] = json!(sha256_hex(self.skill));
        }
        self.place
            .place(NewEvent::new(EventKind::Feedback, payload).by(&self.agent.key_name))
    }
}

impl Gateway {
    /// `feedback_skill`: records a rating (1–5) and optional comment on a skill the
    /// session has learned; returns the new `feedback_id`.
    #[tracing::instrument(skip_all, fields(key = %agent.key_name))]
    pub async fn feedback(
        &self,
        agent: &AgentIdentity,
        session_id: Option<String>,
        skill: &str,
        rating: i64,
        comment: Option<String>,
    ) -> Result<ToolReply, GatewayError> {
        let now = Self::now();
        let named = session_id.filter(|id| !id.is_empty());
        // An id this long cannot be a session: it is not looked up.
        let found = match bounds::session_id(named.as_deref()) {
            Err(_) => None,
            Ok(()) => self.resolve_session(agent, named.clone()).await?,
        };
        let session = Self::usable(agent, found, now);
        let place = match &session {
            Some(own) => Place::Session(own.view.id.clone()),
            None => Place::caller_naming(named.as_deref()),
        };
        let request = Request {
            agent,
            place,
            skill,
            rating,
        };

        let subject = limits::key_subject(&agent.key_name);
        if let Slot::Refused { retry_in } = FEEDBACK.reserve(&self.store, &subject, now).await? {
            let rule = FEEDBACK.refusal(retry_in);
            return self
                .refuse_feedback(
                    &request,
                    DenyCode::GovernanceViolation,
                    rule,
                    Some(retry_in),
                )
                .await;
        }
        let Some(session) = &session else {
            return self
                .refuse_feedback(
                    &request,
                    DenyCode::AccessDenied,
                    NO_SESSION.to_owned(),
                    None,
                )
                .await;
        };
        let skill_chars = skill.chars().count();
        if skill_chars > MAX_SLUG_LEN {
            let rule =
                format!("`skill` is at most {MAX_SLUG_LEN} characters; this one has {skill_chars}");
            return self
                .refuse_feedback(&request, DenyCode::InvalidArguments, rule, None)
                .await;
        }
        let comment = comment
            .map(|c| c.trim().to_owned())
            .filter(|c| !c.is_empty());
        if let Some(chars) = comment
            .as_deref()
            .map(|c| c.chars().count())
            .filter(|&n| n > MAX_COMMENT)
        {
            let rule =
                format!("`comment` is at most {MAX_COMMENT} characters; this one has {chars}");
            return self
                .refuse_feedback(&request, DenyCode::InvalidArguments, rule, None)
                .await;
        }
        let rating = match u8::try_from(rating) {
            Ok(r @ 1..=5) => r,
            _ => {
                let rule = format!("rating must be an integer from 1 to 5, not {rating}");
                return self
                    .refuse_feedback(&request, DenyCode::InvalidArguments, rule, None)
                    .await;
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
            let rule = format!("`{skill}` is not a skill of a role this session has learned");
            return self
                .refuse_feedback(&request, DenyCode::AccessDenied, rule, None)
                .await;
        };
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

    /// Makes the refusal's audit event durable, then answers the agent with it.
    async fn refuse_feedback(
        &self,
        request: &Request<'_>,
        code: DenyCode,
        rule: String,
        retry_in: Option<Duration>,
    ) -> Result<ToolReply, GatewayError> {
        self.audit.append(request.denied_event(code, &rule)).await?;
        let mut reply = denial(code, rule, Vec::new());
        if let (Some(retry_in), ToolReply::Gateway { structured, .. }) = (retry_in, &mut reply) {
            structured["retry_after_secs"] = json!(limits::retry_after_secs(retry_in));
        }
        Ok(reply)
    }
}
