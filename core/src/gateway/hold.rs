//! The agents' side of approval holds: raising one when `decide` holds a call, and resuming
//! it (`call_tool` with `hold_id`, or the same call again) once a reviewer decided.
//!
//! An approved hold runs **at most once**: the resume that runs it moves the hold from
//! `approved` to `executed` in the same transaction as its `call_allowed` event, and only
//! one transaction can make that move. Before running, the call is decided again under the
//! current catalog with the approval as evidence: a call the policy would now refuse does
//! not run, whatever was approved.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

use super::call::{Denied, learned_versions};
use super::{AgentIdentity, Gateway, GatewayError, Place, ToolReply, bounds, code_label, denial};
use crate::audit::{NewEvent, redact_sensitive};
use crate::holds::expire;
use crate::metrics::Outcome;
use crate::policy::{
    Arguments, CallRequest, CompiledCatalog, Decision, Denial, DenyCode, Hold, arguments_digest,
    decide,
};
use crate::store::holds::{HoldRow, HoldState, finish_hold_on, insert_hold_on};
use crate::store::sessions::{StoredSession, save_session_state_on};

/// How often a resume is decided again when another call changed the session in between.
const RESUME_ATTEMPTS: usize = 8;

/// What raising a hold came to.
pub(super) enum HoldOutcome {
    /// The agent's answer: a new hold, or the pending one this same call already raised.
    Answered(ToolReply),
    /// This exact call was already approved: run it.
    Resume(Box<HoldRow>),
    /// The session changed under us; decide again with these arguments.
    Conflict(Arguments),
}

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

impl Gateway {
    /// Raises a hold for a call `decide` held, reserving its usage, unless the same call is
    /// already held (answered with that hold) or approved (resumed). Runs under the
    /// session's lock.
    pub(super) async fn hold_call(
        &self,
        agent: &AgentIdentity,
        catalog: &CompiledCatalog,
        mut stored: StoredSession,
        hold: Hold,
        audited_arguments: &Value,
        now: DateTime<Utc>,
    ) -> Result<HoldOutcome, GatewayError> {
        let permit = hold.permit();
        let digest = arguments_digest(permit.arguments());
        let sid = stored.view.id.clone();
        if let Some(existing) = self
            .store
            .live_hold_of_call(&sid, permit.tool(), &digest)
            .await?
            .filter(|h| !h.is_due(now))
        {
            return Ok(match existing.state {
                HoldState::Approved => HoldOutcome::Resume(Box::new(existing)),
                _ => HoldOutcome::Answered(pending_reply(&existing, false)),
            });
        }

        let id = format!("hold_{}", Uuid::new_v4().simple());
        let expires_at = now + Duration::minutes(i64::from(hold.minutes()));
        let row = HoldRow {
            id: id.clone(),
            session_id: sid.clone(),
            key_id: agent.key_id,
            key_name: agent.key_name.clone(),
            scope: agent.scope.to_string(),
            role: permit.role().to_string(),
            tool: permit.tool().to_owned(),
            arguments: Value::Object(permit.arguments().clone()),
            arguments_digest: digest,
            usage: permit.held_usage(),
            rule: hold.rule().to_owned(),
            minutes: hold.minutes(),
            catalog_revision: catalog.revision().to_owned(),
            state: HoldState::Pending,
            created_at: now,
            expires_at,
            decided_by: None,
            decided_at: None,
            reason: None,
            decided_revision: None,
            finished_at: None,
        };
        let event = NewEvent::call_held(
            &sid,
            &agent.key_name,
            &hold,
            &id,
            audited_arguments.clone(),
            &stamp(expires_at),
            catalog.revision(),
        );
        let reserves = permit.reserves_usage();
        if reserves {
            stored.view.reserve(permit);
        }
        let (view, revision) = (stored.view, stored.revision);
        let inserted = row.clone();
        let committed = self
            .audit
            .commit(move |conn| {
                Box::pin(async move {
                    if reserves && !save_session_state_on(conn, &view, revision).await? {
                        return Ok(None);
                    }
                    insert_hold_on(conn, &inserted).await?;
                    Ok(Some(((), vec![event])))
                })
            })
            .await?;
        if committed.is_none() {
            return Ok(HoldOutcome::Conflict(hold.into_permit().into_arguments()));
        }
        self.metrics.count_decision(Outcome::Held);
        Ok(HoldOutcome::Answered(pending_reply(&row, true)))
    }

    /// `call_tool` naming `hold_id`: answers where the hold stands, and runs an approved
    /// one. `tool` and `arguments`, when given, must be exactly the held call. With
    /// `poll`, nothing runs.
    #[tracing::instrument(skip_all, fields(key = %agent.key_name))]
    pub async fn resume(
        &self,
        agent: &AgentIdentity,
        session_id: Option<String>,
        hold_id: &str,
        tool: Option<&str>,
        arguments: Option<Value>,
        poll: bool,
    ) -> Result<ToolReply, GatewayError> {
        let now = Self::now();
        let named = session_id.filter(|id| !id.is_empty());
        let shown_tool = tool.map_or_else(|| "call_tool".to_owned(), bounds::audited_tool);
        let refuse = |rule: String| Denied {
            place: Place::caller_naming(named.as_deref()),
            denial: Denial::new(DenyCode::AccessDenied, rule),
            session_time: std::time::Duration::ZERO,
        };
        if hold_id.chars().count() > bounds::MAX_SESSION_ID {
            let denied = refuse("`hold_id` is not a hold Skillgate issued.".to_owned());
            return self
                .record_denial(agent, &shown_tool, Value::Null, denied)
                .await;
        }
        // Another key's hold, a hold of another session than the one named, or none at all:
        // the same answer, audited under the caller.
        let hold = self.store.hold(hold_id).await?.filter(|h| {
            h.key_id == agent.key_id && named.as_deref().is_none_or(|sid| sid == h.session_id)
        });
        let Some(hold) = hold else {
            let denied = refuse(format!(
                "There is no hold `{hold_id}` of this session: call the tool again to raise one."
            ));
            return self
                .record_denial(agent, &shown_tool, Value::Null, denied)
                .await;
        };
        let place = Place::Session(hold.session_id.clone());
        if let Some(problem) = mismatch(&hold, tool, arguments) {
            let denied = Denied {
                place,
                denial: Denial::new(DenyCode::AccessDenied, problem),
                session_time: std::time::Duration::ZERO,
            };
            let event_tool = hold.tool.clone();
            return self
                .record_denial(agent, &event_tool, Value::Null, denied)
                .await;
        }
        if hold.is_due(now) {
            expire(&self.audit, &hold, now).await?;
            let settled = self.store.hold(hold_id).await?.unwrap_or(hold);
            return self.settled(agent, &settled, poll).await;
        }
        match hold.state {
            HoldState::Approved if !poll => {
                let catalog = self.catalog.load();
                let _guard = self.locks.lock(&hold.session_id).await;
                self.resume_locked(agent, &catalog, hold, now).await
            }
            HoldState::Approved => Ok(approved_reply(&hold)),
            HoldState::Pending => Ok(pending_reply(&hold, false)),
            _ => self.settled(agent, &hold, poll).await,
        }
    }

    /// The answer for a hold that will never run (again). A resume of it is refused, and
    /// the refusal is audited like any refused call, once per attempt, in the hold's
    /// session and naming the hold, before the agent hears it; a `poll` only asks where
    /// the hold stands and writes nothing.
    async fn settled(
        &self,
        agent: &AgentIdentity,
        hold: &HoldRow,
        poll: bool,
    ) -> Result<ToolReply, GatewayError> {
        let (code, text) = settled_text(hold);
        if !poll {
            self.audit_resume_refusal(agent, hold, code, DenyCode::AccessDenied, &text)
                .await?;
        }
        Ok(settled_reply(hold))
    }

    /// Counts and audits a refused resume of `hold` as a `call_denied` of its tool, in the
    /// hold's session (the hold is the caller's: `resume` checked) and naming the hold.
    /// `code` is what the agent reads (`HOLD_USED`, …); `metric` the class it is counted as.
    async fn audit_resume_refusal(
        &self,
        agent: &AgentIdentity,
        hold: &HoldRow,
        code: &str,
        metric: DenyCode,
        rule: &str,
    ) -> Result<(), GatewayError> {
        self.metrics.count_decision(Outcome::Denied(metric));
        let event = NewEvent::call_denied(
            &agent.key_name,
            &hold.tool,
            Value::Null,
            code,
            Some(&bounds::audited_rule(rule)),
        )
        .in_session(hold.session_id.clone())
        .of_hold(&hold.id);
        self.audit.append(event).await?;
        Ok(())
    }

    /// Runs an approved hold: decided again under the current catalog with the approval as
    /// evidence, then executed at most once. Runs under the session's lock.
    pub(super) async fn resume_locked(
        &self,
        agent: &AgentIdentity,
        catalog: &CompiledCatalog,
        hold: HoldRow,
        now: DateTime<Utc>,
    ) -> Result<ToolReply, GatewayError> {
        let Value::Object(held_arguments) = hold.arguments.clone() else {
            let rule = "the held call's arguments are unreadable";
            let code = DenyCode::InternalError;
            self.audit_resume_refusal(agent, &hold, code.as_str(), code, rule)
                .await?;
            return Ok(denial(code, rule.to_owned(), Vec::new()));
        };
        let sensitive = catalog
            .tool(&hold.tool)
            .map(|t| t.spec.sensitive_args.clone())
            .unwrap_or_default();
        let audited = redact_sensitive(&hold.arguments, &sensitive);
        let key_id = agent.key_id.to_string();
        for _ in 0..RESUME_ATTEMPTS {
            let Some(mut stored) = self.store.load_session(&hold.session_id).await? else {
                break;
            };
            // The hold's reservation is given back and taken again by the new decision, so
            // the call is checked against the session as if it were being made now.
            stored.view.release(&hold.usage);
            let request = CallRequest {
                session_id: &hold.session_id,
                key_id: &key_id,
                tool: &hold.tool,
                arguments: held_arguments.clone(),
                approved: Some(&hold.arguments_digest),
            };
            let decision = decide(catalog, Some(&stored.view), request, now);
            let (revision, hold_id) = (stored.revision, hold.id.clone());
            let committed = match decision {
                Decision::Allow(permit) => {
                    stored.view.reserve(&permit);
                    let event = NewEvent::call_allowed(
                        &hold.session_id,
                        &agent.key_name,
                        &permit,
                        audited.clone(),
                        &learned_versions(&stored.view, permit.role()),
                    )
                    .of_hold(&hold.id);
                    let view = stored.view.clone();
                    let ran = self
                        .audit
                        .commit(move |conn| {
                            Box::pin(async move {
                                if !finish_hold_on(
                                    conn,
                                    &hold_id,
                                    &[HoldState::Approved],
                                    HoldState::Executed,
                                    now,
                                )
                                .await?
                                    || !save_session_state_on(conn, &view, revision).await?
                                {
                                    return Ok(None);
                                }
                                Ok(Some(((), vec![event])))
                            })
                        })
                        .await?;
                    if ran.is_some() {
                        self.metrics.count_decision(Outcome::Allowed);
                        return self
                            .run_permitted(agent, catalog, &hold.session_id, &stored.view, permit)
                            .await;
                    }
                    None
                }
                Decision::Deny(refused) => Some(refused),
                Decision::Hold(_) => Some(Denial::new(
                    DenyCode::GovernanceViolation,
                    "The approval does not cover this call as it stands now.",
                )),
            };
            if let Some(refused) = committed {
                // The policy changed since the approval: the call does not run, and what
                // the hold reserved goes back to the session.
                let code = code_label(refused.code);
                let event = NewEvent::call_denied(
                    &agent.key_name,
                    &hold.tool,
                    audited.clone(),
                    &code,
                    Some(&bounds::audited_rule(&refused.rule)),
                )
                .in_session(hold.session_id.clone())
                .of_hold(&hold.id);
                let view = stored.view.clone();
                let hold_id = hold.id.clone();
                let done = self
                    .audit
                    .commit(move |conn| {
                        Box::pin(async move {
                            if !finish_hold_on(
                                conn,
                                &hold_id,
                                &[HoldState::Approved],
                                HoldState::Refused,
                                now,
                            )
                            .await?
                                || !save_session_state_on(conn, &view, revision).await?
                            {
                                return Ok(None);
                            }
                            Ok(Some(((), vec![event])))
                        })
                    })
                    .await?;
                if done.is_some() {
                    self.metrics.count_decision(Outcome::Denied(refused.code));
                    return Ok(super::refusal(refused));
                }
            }
            // Either the session moved (decide again) or the hold did (someone ran it).
            match self.store.hold(&hold.id).await? {
                Some(now_state) if now_state.state != HoldState::Approved => {
                    return self.settled(agent, &now_state, false).await;
                }
                _ => continue,
            }
        }
        let rule = "The session is too busy to run this approved call safely; try again.";
        let code = DenyCode::AccessDenied;
        self.audit_resume_refusal(agent, &hold, code.as_str(), code, rule)
            .await?;
        Ok(denial(code, rule.to_owned(), Vec::new()))
    }
}

/// Why a resume's own `tool` or `arguments` do not name the held call, if they do not.
fn mismatch(hold: &HoldRow, tool: Option<&str>, arguments: Option<Value>) -> Option<String> {
    if tool.is_some_and(|t| t != hold.tool) {
        return Some(format!(
            "Hold `{}` is for `{}`, not this tool.",
            hold.id, hold.tool
        ));
    }
    match arguments {
        Some(Value::Object(args)) if arguments_digest(&args) != hold.arguments_digest => {
            Some(format!(
                "Hold `{}` was raised for other arguments: an approval covers exactly the call that was held.",
                hold.id
            ))
        }
        Some(Value::Object(_)) | None => None,
        Some(_) => Some("`arguments` must be a JSON object of the tool's arguments.".to_owned()),
    }
}

/// The answer to a held call, or to asking about a pending hold.
fn pending_reply(hold: &HoldRow, new: bool) -> ToolReply {
    let expires = stamp(hold.expires_at);
    let text = if new {
        format!(
            "APPROVAL REQUIRED: {} Nothing ran. Hold {} waits for a reviewer until {expires}. \
             Once approved, call call_tool with hold_id \"{}\" (or make the same call again) to run it once; \
             add \"poll\": true to only ask where it stands.",
            hold.rule, hold.id, hold.id
        )
    } else {
        format!(
            "APPROVAL PENDING: hold {} for `{}` waits for a reviewer until {expires}. Nothing ran.",
            hold.id, hold.tool
        )
    };
    ToolReply::Gateway {
        text,
        structured: json!({
            "decision": "pending_approval",
            "hold_id": hold.id,
            "state": hold.state.as_str(),
            "tool": hold.tool,
            "rule": hold.rule,
            "expires_at": expires,
        }),
        is_error: false,
    }
}

fn approved_reply(hold: &HoldRow) -> ToolReply {
    let expires = stamp(hold.expires_at);
    ToolReply::Gateway {
        text: format!(
            "APPROVED: hold {} for `{}` was approved by {}; call call_tool with hold_id \"{}\" before {expires} to run it once.",
            hold.id,
            hold.tool,
            hold.decided_by.as_deref().unwrap_or("a reviewer"),
            hold.id
        ),
        structured: json!({
            "decision": "approved",
            "hold_id": hold.id,
            "state": hold.state.as_str(),
            "tool": hold.tool,
            "expires_at": expires,
        }),
        is_error: false,
    }
}

/// The answer for a hold that will never run (again): denied, expired, refused, or run.
fn settled_reply(hold: &HoldRow) -> ToolReply {
    let (code, text) = settled_text(hold);
    ToolReply::Gateway {
        text,
        structured: json!({
            "decision": "denied",
            "code": code,
            "hold_id": hold.id,
            "state": hold.state.as_str(),
            "tool": hold.tool,
            "reason": hold.reason,
        }),
        is_error: true,
    }
}

/// The code and text of [`settled_reply`]: what the agent reads and the audit records.
fn settled_text(hold: &HoldRow) -> (&'static str, String) {
    match hold.state {
        HoldState::Denied => (
            "APPROVAL_DENIED",
            format!(
                "APPROVAL DENIED: {} denied hold {} for `{}`: {}",
                hold.decided_by.as_deref().unwrap_or("a reviewer"),
                hold.id,
                hold.tool,
                hold.reason.as_deref().unwrap_or("no reason given")
            ),
        ),
        HoldState::Expired => (
            "HOLD_EXPIRED",
            format!(
                "HOLD EXPIRED: hold {} for `{}` was not decided, or not run once approved, in time. Make the call again to raise a new one.",
                hold.id, hold.tool
            ),
        ),
        HoldState::Executed => (
            "HOLD_USED",
            format!(
                "HOLD USED: the approved call of hold {} already ran; an approval runs its call once.",
                hold.id
            ),
        ),
        HoldState::Refused | HoldState::Pending | HoldState::Approved => (
            "HOLD_REFUSED",
            format!(
                "HOLD REFUSED: the call of hold {} was refused when it came back: the policy changed since it was approved.",
                hold.id
            ),
        ),
    }
}
