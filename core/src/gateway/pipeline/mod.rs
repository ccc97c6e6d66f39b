//! The governed-call pipeline: every way a call reaches an upstream (`call_tool`, an
//! approved hold coming back, and any later entry) runs the same stages, in this order:
//!
//! ```text
//! Entry ─▶ admit ─▶ [session lock] ─▶ inspect ─▶ decide ─▶ reserve and record ─▶ execute ─▶ inspect ─▶ settle
//!            │                          │          │               │                              │
//!            └──────────── refuse ◀─────┴──────────┴───────────────┘                     (call_result)
//! ```
//!
//! - **admit** (`admit.rs`): bounds of the request, redaction, the session id; a resume's
//!   held arguments.
//! - **inspect** (`inspect.rs`): the argument inspectors before deciding (a block refuses
//!   with `CONTENT_BLOCKED`), the result inspectors before settling (a block withholds the
//!   result, a redaction rewrites it); what they found is audited with the stage's event.
//! - **decide** (here): the pure [`decide`] under the session's lock, the clock passed in.
//! - **reserve and record** (`record.rs`): one commit per decision: the session's
//!   reservation under its revision check together with `call_allowed` (and, for a resume,
//!   the hold's `approved → executed` move), or the hold row with `call_held`.
//! - **execute** and **settle** (`execute.rs`): the upstream, then the durable
//!   `call_result` before the answer, then the success record guards read.
//! - **refuse** (`refuse.rs`): a refusal at any stage is counted, traced and audited there,
//!   once, naming the hold when the entry is a resume.
//!
//! What differs between entries is data ([`Entry`], [`Admitted::resumes`]), not a second
//! flow. Retries on a revision conflict live in [`Gateway::run_stages`] alone.

mod admit;
mod execute;
mod inspect;
mod record;
mod refuse;
pub(super) mod replies;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tracing::Instrument as _;

use self::inspect::{Inspection, inspect_arguments, resolve_egress, run_hooks};
use super::{AgentIdentity, Gateway, GatewayError, Place, ToolReply};
use crate::audit::{InspectedPart, redact_sensitive_fields};
use crate::inspect::hook::HookCall;
use crate::metrics::{Phase, Stage};
use crate::model::{CallScope, HookStage};
use crate::policy::{
    Arguments, CallRequest, CompiledCatalog, Decision, Denial, DenyCode, SessionView, decide,
};
use crate::slug::Slug;
use crate::store::holds::{HoldRow, HoldState};
use crate::trace;

pub(super) use refuse::Refusal;

/// How often a decision is retried when another process changed the session in between.
const SAVE_ATTEMPTS: usize = 8;

/// How a call enters the pipeline.
pub(super) enum Entry<'a> {
    /// `call_tool` of `tool`, as the agent sent it.
    Call {
        session_id: Option<String>,
        tool: &'a str,
        arguments: Value,
    },
    /// An approved hold coming back: decided again under the current catalog with the
    /// approval as evidence, then run at most once.
    Resume(Box<HoldRow>),
}

/// A call past admission: what every later stage reads.
struct Admitted {
    /// The session the call is decided in (empty: none was found).
    sid: String,
    tool: String,
    /// The JSON object the call carries, from here to the upstream; `None` when the agent
    /// sent something else (refused once the session says where the refusal belongs).
    arguments: Option<Arguments>,
    /// The arguments as the audit records them: sensitive values redacted.
    audited: Value,
    /// The approved hold this call runs: its events name it, its reservation is given back
    /// before deciding, and it moves to `executed` in the commit of `call_allowed`.
    resumes: Option<HoldRow>,
    /// What the argument inspectors found, audited in the commit of the decision's event.
    noted: Inspection,
}

impl Admitted {
    /// Where this call's events belong. A resume's hold is the caller's (checked before it
    /// entered), so its events go to the hold's session.
    fn place(&self, owned: bool) -> Place {
        if self.resumes.is_some() {
            Place::Session(self.sid.clone())
        } else {
            Place::of(&self.sid, owned)
        }
    }

    /// A refusal of this call (naming its hold, if it resumes one).
    fn refusal(&self, place: Place, arguments: Value, denial: Denial) -> Refusal {
        let refusal = Refusal::new(place, &self.tool, arguments, denial).noting(&self.noted);
        match &self.resumes {
            Some(hold) => refusal.of_hold(&hold.id),
            None => refusal,
        }
    }

    /// The refusal once the session stayed too busy for every attempt.
    fn too_busy(&self, place: Place, what: &str) -> Refusal {
        let rule = format!("The session is too busy to {what} safely; try again.");
        let arguments = if self.resumes.is_some() {
            Value::Null
        } else {
            self.audited.clone()
        };
        self.refusal(place, arguments, Denial::new(DenyCode::AccessDenied, rule))
    }
}

/// What one attempt at the record stage came to.
enum Attempt {
    /// The agent's answer.
    Answered(ToolReply),
    /// The session (or the hold) changed under us: decide again with these arguments.
    Conflict(Arguments),
    /// The call turned out to be an approved hold's: run it as that hold's resume.
    Resume(Box<HoldRow>),
}

impl Gateway {
    /// Runs one governed call through every stage; every outcome is audited before the
    /// agent hears it.
    pub(super) async fn govern(
        &self,
        agent: &AgentIdentity,
        entry: Entry<'_>,
    ) -> Result<ToolReply, GatewayError> {
        let now = Self::now();
        let catalog = self.catalog.load();
        // Finding the session, waiting for another call on it and reading it: one stage.
        let session = self.metrics.stage(Phase::Session);
        let call = match self.admit(agent, &catalog, entry).await? {
            Ok(call) => call,
            Err(refusal) => {
                drop(session);
                return self.refuse_call(agent, refusal).await;
            }
        };
        // Decide and record under the session's lock; the revision check on save makes
        // the reservation exact across processes too.
        let _lock = self.locks.lock(&call.sid).await;
        self.run_stages(agent, &catalog, call, session, now).await
    }

    /// Decide, record, execute: the stages under the session's lock, with the retries a
    /// revision conflict calls for.
    async fn run_stages(
        &self,
        agent: &AgentIdentity,
        catalog: &CompiledCatalog,
        mut call: Admitted,
        session: Stage<'_>,
        now: DateTime<Utc>,
    ) -> Result<ToolReply, GatewayError> {
        let key_id = agent.key_id.to_string();
        let mut session = Some(session);
        let mut attempts = 0;
        loop {
            let mut current = if call.sid.is_empty() {
                None
            } else {
                self.store.load_session(&call.sid).await?
            };
            drop(session.take());
            let owned = current
                .as_ref()
                .is_some_and(|s| s.view.owner_key_id == key_id);
            let place = call.place(owned);
            if let Some(hold) = &call.resumes {
                let Some(stored) = current.as_mut() else {
                    let refusal = call.too_busy(place, "run this approved call");
                    return self.refuse_call(agent, refusal).await;
                };
                // The hold's reservation is given back and taken again by the new
                // decision, so the call is checked against the session as it is now.
                stored.view.release(&hold.usage);
            }
            let Some(arguments) = call.arguments.take() else {
                let denial = Denial::new(
                    DenyCode::InvalidArguments,
                    "`arguments` must be a JSON object of the tool's arguments.",
                );
                let refusal = call.refusal(place, call.audited.clone(), denial);
                return self.refuse_call(agent, refusal).await;
            };
            let view = current.as_ref().map(|s| &s.view);
            let scope = view.map_or(agent.scope.as_str(), |v| v.scope.as_str());
            let arguments = self
                .inspect_arguments_stage(catalog, &mut call, scope, view, arguments)
                .await;
            let decision = if call.noted.blocked() {
                Decision::Deny(Denial::new(
                    DenyCode::ContentBlocked,
                    call.noted.arguments_rule(),
                ))
            } else {
                let request = CallRequest {
                    session_id: &call.sid,
                    key_id: &key_id,
                    tool: &call.tool,
                    arguments,
                    approved: call.resumes.as_ref().map(|h| h.arguments_digest.as_str()),
                };
                self.decide_stage(catalog, view, request, now)
            };
            let (attempt, busy) = match (decision, current) {
                (Decision::Allow(permit), Some(stored)) => {
                    let attempt = self.record_allowed(agent, catalog, &call, stored, permit, now);
                    (attempt.await?, "reserve this call")
                }
                (Decision::Hold(hold), Some(stored)) if call.resumes.is_none() => {
                    let attempt = self.raise_hold(agent, catalog, &call, stored, hold, now);
                    (attempt.await?, "hold this call")
                }
                (decision, Some(stored)) if call.resumes.is_some() => {
                    let denial = match decision {
                        Decision::Deny(denial) => denial,
                        // The policy changed since the approval: what was approved no
                        // longer covers the call.
                        _ => Denial::new(
                            DenyCode::GovernanceViolation,
                            "The approval does not cover this call as it stands now.",
                        ),
                    };
                    let attempt =
                        self.refuse_resume(agent, &call, place.clone(), stored, denial, now);
                    (attempt.await?, "run this approved call")
                }
                (Decision::Deny(denial), _) => {
                    let refusal = call.refusal(place, call.audited.clone(), denial);
                    return self.refuse_call(agent, refusal).await;
                }
                // `decide` allows and holds only in a stored session.
                _ => {
                    let denial = Denial::new(DenyCode::InternalError, super::NO_SESSION);
                    let refusal = call.refusal(place, call.audited.clone(), denial);
                    return self.refuse_call(agent, refusal).await;
                }
            };
            match attempt {
                Attempt::Answered(reply) => return Ok(reply),
                Attempt::Resume(hold) => {
                    call = match Admitted::resuming(*hold, catalog) {
                        Ok(call) => call,
                        Err(refusal) => return self.refuse_call(agent, *refusal).await,
                    };
                    attempts = 0;
                    continue;
                }
                Attempt::Conflict(arguments) => call.arguments = Some(arguments),
            }
            // Either the session moved (decide again) or, for a resume, the hold did
            // (someone ran it, or it expired): then that is the answer.
            if let Some(hold) = &call.resumes {
                match self.store.hold(&hold.id).await? {
                    Some(now_state) if now_state.state != HoldState::Approved => {
                        return self.refuse_call(agent, Refusal::settled(&now_state)).await;
                    }
                    _ => {}
                }
            }
            attempts += 1;
            if attempts >= SAVE_ATTEMPTS {
                // A decision like any other: it is counted and audited.
                let refusal = call.too_busy(call.place(owned), busy);
                return self.refuse_call(agent, refusal).await;
            }
        }
    }

    /// The argument inspection stage, before deciding (no role has authorised the call
    /// yet): the built-in inspectors, then the catalog's hooks; what they find is kept on
    /// the call for the decision's commit. Hands the arguments back.
    async fn inspect_arguments_stage(
        &self,
        catalog: &CompiledCatalog,
        call: &mut Admitted,
        scope: &str,
        session: Option<&SessionView>,
        arguments: Arguments,
    ) -> Arguments {
        let stage = self
            .metrics
            .stage(Phase::Inspect)
            .traced(trace::inspect_span(InspectedPart::Arguments.as_str()));
        let upstream = catalog
            .tool(&call.tool)
            .map(|t| t.upstream.as_str())
            .unwrap_or_default();
        let seen = session
            .map(|s| s.secrets_seen.as_slice())
            .unwrap_or_default();
        let scope = CallScope {
            tool: &call.tool,
            role: None,
            scope: Some(scope),
        };
        call.noted = stage.span().in_scope(|| {
            inspect_arguments(
                &catalog.catalog().inspection,
                &scope,
                &arguments,
                seen,
                upstream,
            )
        });
        let policy = &catalog.catalog().inspection;
        let resolved = resolve_egress(policy, &scope, &arguments)
            .instrument(stage.span().clone())
            .await;
        call.noted.absorb(resolved);
        if policy
            .hooks_for(HookStage::Arguments, &scope)
            .next()
            .is_some()
        {
            // A hook sees sensitive arguments as the audit does: by their digest.
            let sensitive = catalog
                .tool(&call.tool)
                .map(|t| t.spec.sensitive_args.as_slice())
                .unwrap_or_default();
            let shown = Value::Object(redact_sensitive_fields(&arguments, sensitive));
            let asked = HookCall {
                tool: &call.tool,
                upstream,
                role: None,
                scope: scope.scope,
                session_id: &call.sid,
                arguments: &shown,
            };
            run_hooks(policy, &scope, &asked, None, &self.metrics, &mut call.noted)
                .instrument(stage.span().clone())
                .await;
        }
        call.noted.count(&self.metrics);
        call.noted.redact_flows(&mut call.audited);
        arguments
    }

    /// The decide stage: the pure decision, timed and traced.
    fn decide_stage(
        &self,
        catalog: &CompiledCatalog,
        session: Option<&SessionView>,
        request: CallRequest<'_>,
        now: DateTime<Utc>,
    ) -> Decision {
        let stage = self
            .metrics
            .stage(Phase::Decide)
            .traced(trace::decide_span());
        let decision = stage
            .span()
            .in_scope(|| decide(catalog, session, request, now));
        record_decision(stage.span(), &decision);
        decision
    }
}

/// Puts a decision on the trace: its kind, the class of rule that denied or held it (the
/// rule's sentence can quote argument values, so it stays in the audit log) and the role.
fn record_decision(span: &tracing::Span, decision: &Decision) {
    match decision {
        Decision::Allow(permit) => {
            trace::record_decision(span, "allowed", None, Some(permit.role().as_str()));
        }
        Decision::Hold(hold) => trace::record_decision(
            span,
            "pending_approval",
            Some("REQUIRES_APPROVAL"),
            Some(hold.permit().role().as_str()),
        ),
        Decision::Deny(denial) => trace::record_decision(
            span,
            "denied",
            Some(denial.code.as_str()),
            denial.role.as_ref().map(Slug::as_str),
        ),
    }
}
