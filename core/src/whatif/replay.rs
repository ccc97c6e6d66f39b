//! The replay: each session of a log, in order, simulated under two catalogs.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::report::{Change, ReplayReport, Subject, Undecidable, Verdict};
use crate::audit::AuditEvent;
use crate::model::{Limit, ResultCheck};
use crate::names::EventKind;
use crate::policy::{
    Arguments, CallRequest, CompiledCatalog, Decision, DenyCode, HeldUsage, Outcome, SessionView,
    SuccessNote, arguments_digest, decide, value_digest,
};
use crate::slug::Slug;

/// Decides the audited calls of `events` (in log order) again under `proposed`, beside the
/// catalog in force (`current`), and reports what would change at or after `from` (earlier
/// events only build the sessions' state). Pure: nothing is written.
pub fn replay(
    current: &CompiledCatalog,
    proposed: &CompiledCatalog,
    events: impl IntoIterator<Item = AuditEvent>,
    from: DateTime<Utc>,
) -> ReplayReport {
    let mut replayer = Replayer::new(current, proposed, from);
    for event in events {
        replayer.push(&event);
    }
    replayer.finish()
}

/// [`replay`] one event at a time, for a log streamed from the store.
pub struct Replayer<'c> {
    current: &'c CompiledCatalog,
    proposed: &'c CompiledCatalog,
    from: DateTime<Utc>,
    sessions: HashMap<String, SessionReplay>,
    report: ReplayReport,
}

impl<'c> Replayer<'c> {
    pub fn new(
        current: &'c CompiledCatalog,
        proposed: &'c CompiledCatalog,
        from: DateTime<Utc>,
    ) -> Self {
        Self {
            current,
            proposed,
            from,
            sessions: HashMap::new(),
            report: ReplayReport::default(),
        }
    }

    /// The next event of the log.
    pub fn push(&mut self, event: &AuditEvent) {
        let Some(id) = event.session_id.as_deref() else {
            return;
        };
        if event.kind == EventKind::SessionStarted {
            if let Some(session) = SessionReplay::start(event, id) {
                self.sessions.insert(id.to_owned(), session);
            }
            return;
        }
        let counted = event.at >= self.from;
        match self.sessions.get_mut(id) {
            Some(session) => {
                // Before the window a decision only builds state: it is reported nowhere.
                let mut scratch = ReplayReport::default();
                let report = if counted {
                    &mut self.report
                } else {
                    &mut scratch
                };
                if session.step(self.current, self.proposed, event, report) && counted {
                    session.reported = true;
                }
            }
            None if counted && is_call(event.kind) => self.report.skipped += 1,
            None => {}
        }
    }

    pub fn finish(mut self) -> ReplayReport {
        self.report.sessions = self.sessions.values().filter(|s| s.reported).count();
        self.report
    }
}

fn is_call(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::CallAllowed | EventKind::CallDenied | EventKind::CallHeld
    )
}

/// When a session's expiry is not the question: a replay decides policy, not time.
fn far_future() -> DateTime<Utc> {
    DateTime::<Utc>::MAX_UTC
}

/// One session, simulated under the catalog in force and the proposed one.
struct SessionReplay {
    /// Whether a decision of it fell in the window.
    reported: bool,
    key: String,
    current: Simulation,
    proposed: Simulation,
}

/// A session's state as one catalog would have left it.
struct Simulation {
    view: SessionView,
    /// The holds this simulation raised, by the log's hold id, with what each reserved.
    holds: BTreeMap<String, HeldUsage>,
    /// What a success of the last call this simulation allowed, and the log ran, records.
    note: Option<SuccessNote>,
    /// Tools this simulation allowed that never ran in the log: their success is unknown.
    ran_unseen: BTreeSet<String>,
    /// Tools whose success was recorded without the result a bound guard reads.
    results_unseen: BTreeSet<String>,
}

/// One simulated decision.
struct Decided {
    verdict: Verdict,
    rule: Option<String>,
    role: Option<String>,
    /// Denied before any argument was read: the session may not call the tool at all.
    no_access: bool,
    /// The sentence of the limit that denied or held it, without this call's figures.
    limit: Option<String>,
}

/// The limit sentence `rule` starts with, among the limits of `role` and the guardrails of
/// every scope: the rule without what this call adds (`200 already used …`).
fn limit_of(catalog: &CompiledCatalog, rule: &str, role: Option<&str>) -> Option<String> {
    let role_limits = role
        .and_then(|r| catalog.role(r))
        .into_iter()
        .flat_map(|r| &r.limits);
    let guardrails = catalog.catalog().scopes.iter().flat_map(|s| &s.guardrails);
    role_limits
        .chain(guardrails)
        .map(Limit::sentence)
        .filter(|sentence| rule.starts_with(sentence.as_str()))
        .max_by_key(String::len)
}

impl SessionReplay {
    fn start(event: &AuditEvent, id: &str) -> Option<Self> {
        let scope = Slug::parse(event.payload.get("scope")?.as_str()?).ok()?;
        let key = event.actor.clone()?;
        let view = SessionView::new(id, key.clone(), scope, far_future());
        Some(Self {
            reported: false,
            key,
            current: Simulation::new(view.clone()),
            proposed: Simulation::new(view),
        })
    }

    /// Replays one event of this session; true when it was a decision decided again.
    fn step(
        &mut self,
        current: &CompiledCatalog,
        proposed: &CompiledCatalog,
        event: &AuditEvent,
        report: &mut ReplayReport,
    ) -> bool {
        let decided = report.decided;
        self.event(current, proposed, event, report);
        report.decided > decided
    }

    fn event(
        &mut self,
        current: &CompiledCatalog,
        proposed: &CompiledCatalog,
        event: &AuditEvent,
        report: &mut ReplayReport,
    ) {
        let payload = &event.payload;
        match event.kind {
            EventKind::LearnGranted | EventKind::LearnDenied => {
                let role = match event.kind {
                    EventKind::LearnGranted => payload["role"].as_str().map(str::to_owned),
                    _ => payload["path"]
                        .as_str()
                        .and_then(|p| p.strip_prefix("/roles/"))
                        .map(str::to_owned),
                };
                let Some(role) = role.and_then(|r| Slug::parse(&r).ok()) else {
                    return;
                };
                report.decided += 1;
                let before = if event.kind == EventKind::LearnGranted {
                    Verdict::Allowed
                } else {
                    Verdict::Denied
                };
                let was = self.current.learn(current, &role);
                let will = self.proposed.learn(proposed, &role);
                if was != will && will != before {
                    report.changes.push(Change {
                        session_id: self.current.view.id.clone(),
                        seq: event.seq,
                        at: event.at,
                        key: self.key.clone(),
                        subject: Subject::Learn {
                            role: role.to_string(),
                        },
                        before,
                        after: will,
                        rule: (will == Verdict::Denied)
                            .then(|| format!("role {role} is not in the session's scope")),
                        limit: None,
                        role: Some(role.to_string()),
                    });
                }
            }
            EventKind::CallAllowed | EventKind::CallDenied | EventKind::CallHeld => {
                self.call(current, proposed, event, report);
            }
            EventKind::CallResult => {
                let tool = payload["tool"].as_str().unwrap_or_default();
                let ok = payload["status"] == "ok";
                self.current.settle(tool, ok);
                self.proposed.settle(tool, ok);
            }
            EventKind::HoldDenied | EventKind::HoldExpired | EventKind::HoldWithdrawn => {
                if let Some(hold) = payload["hold_id"].as_str() {
                    self.current.drop_hold(hold);
                    self.proposed.drop_hold(hold);
                }
            }
            _ => {}
        }
    }

    fn call(
        &mut self,
        current: &CompiledCatalog,
        proposed: &CompiledCatalog,
        event: &AuditEvent,
        report: &mut ReplayReport,
    ) {
        let payload = &event.payload;
        let (Some(tool), Some(Value::Object(arguments))) =
            (payload["tool"].as_str(), payload.get("arguments"))
        else {
            report.skipped += 1;
            return;
        };
        let before = match event.kind {
            EventKind::CallAllowed => Verdict::Allowed,
            EventKind::CallHeld => Verdict::Held,
            _ => Verdict::Denied,
        };
        let hold = payload["hold_id"].as_str();
        // A call event naming a hold, other than the one that raised it, is its resume.
        let resume = hold.filter(|_| event.kind != EventKind::CallHeld);
        let ran = before == Verdict::Allowed;
        let at = event.at;
        if before != Verdict::Denied {
            infer_results(
                current,
                tool,
                arguments,
                [&mut self.current, &mut self.proposed],
            );
        }
        let (was, will) = match resume {
            Some(hold) => {
                let was = self
                    .current
                    .resume(current, hold, tool, arguments, &self.key, ran, at);
                let will = self
                    .proposed
                    .resume(proposed, hold, tool, arguments, &self.key, ran, at);
                match (was, will) {
                    (Some(was), Some(will)) => (was, will),
                    // Raised in neither (or in one: that difference is reported where it
                    // arose): nothing to decide again.
                    _ => {
                        report.skipped += 1;
                        return;
                    }
                }
            }
            None => (
                self.current
                    .decide(current, tool, arguments, &self.key, hold, ran, at),
                self.proposed
                    .decide(proposed, tool, arguments, &self.key, hold, ran, at),
            ),
        };
        report.decided += 1;
        let subject = Subject::Call {
            tool: tool.to_owned(),
        };
        let digested: Vec<&str> = arguments
            .iter()
            .filter(|(_, v)| is_digest(v))
            .map(|(name, _)| name.as_str())
            .collect();
        // Both simulations read a digest where a sensitive argument's value was: only a
        // refusal that reads no argument (the tool is not the session's to call) is known.
        let known =
            !digested.is_empty() && will.no_access && !was.no_access && will.verdict != before;
        let unknown = if !digested.is_empty() && !known {
            let Some(name) = digested
                .iter()
                .find(|name| reads_differently(current, proposed, tool, name))
            else {
                return;
            };
            Some(format!(
                "the argument `{name}` is sensitive and stored only as a digest, and what \
                 reads it changes"
            ))
        } else if !known && (was.verdict == will.verdict || will.verdict == before) {
            return;
        } else {
            self.unknowable(current, proposed, tool)
        };
        if let Some(reason) = unknown {
            report.undecidable.push(Undecidable {
                session_id: self.current.view.id.clone(),
                seq: event.seq,
                at,
                key: self.key.clone(),
                subject,
                before,
                reason,
            });
            return;
        }
        // For a call that would now run, the rule that stopped it.
        let (rule, role, limit) = if will.verdict == Verdict::Allowed {
            let recorded = payload["rule"].as_str().map(str::to_owned);
            (recorded.or(was.rule), was.role.or(will.role), was.limit)
        } else {
            (will.rule, will.role, will.limit)
        };
        report.changes.push(Change {
            session_id: self.current.view.id.clone(),
            seq: event.seq,
            at,
            key: self.key.clone(),
            subject,
            before,
            after: will.verdict,
            rule,
            limit,
            role,
        });
    }

    /// Why the log cannot settle a call the two catalogs decide differently, if it cannot.
    fn unknowable(
        &self,
        current: &CompiledCatalog,
        proposed: &CompiledCatalog,
        tool: &str,
    ) -> Option<String> {
        let sims = [&self.current, &self.proposed];
        for catalog in [current, proposed] {
            for (after, reads_result) in guards_of(catalog, tool) {
                if sims.iter().any(|s| s.ran_unseen.contains(after)) {
                    return Some(format!(
                        "it waits on `{after}`, which ran only in the replay: its success is unknown"
                    ));
                }
                if reads_result
                    && sims.iter().any(|s| s.results_unseen.contains(after))
                    && result_guards(current, tool) != result_guards(proposed, tool)
                {
                    return Some(format!(
                        "it reads the result of `{after}`, which the log keeps only as a digest"
                    ));
                }
            }
        }
        None
    }
}

/// A sensitive argument as the audit stores it: `{"sha256": …}`.
fn is_digest(value: &Value) -> bool {
    matches!(value, Value::Object(map) if map.len() == 1 && map.contains_key("sha256"))
}

/// Whether the two catalogs read argument `arg` of `tool` differently: its definition, or
/// a limit that reads it (a bound, a cap's sum, an approval condition, a bound guard, a
/// fleet rule), in any role or scope.
fn reads_differently(
    current: &CompiledCatalog,
    proposed: &CompiledCatalog,
    tool: &str,
    arg: &str,
) -> bool {
    let reading = |catalog: &CompiledCatalog| {
        let definition = catalog.tool(tool).map(|t| t.spec.definition());
        let catalog = catalog.catalog();
        let mut limits: Vec<String> = catalog
            .roles
            .iter()
            .map(|r| (r.slug.as_str(), &r.limits))
            .chain(
                catalog
                    .scopes
                    .iter()
                    .map(|s| (s.slug.as_str(), &s.guardrails)),
            )
            .flat_map(|(owner, limits)| limits.iter().map(move |l| (owner, l)))
            .filter(|(_, limit)| reads_arg(limit, tool, arg))
            .map(|(owner, limit)| format!("{owner} {}", serde_json::json!(limit)))
            .collect();
        limits.sort();
        (definition, limits)
    };
    reading(current) != reading(proposed)
}

fn reads_arg(limit: &Limit, tool: &str, arg: &str) -> bool {
    match limit {
        Limit::ArgBound {
            tool: t, arg: a, ..
        }
        | Limit::SumCap {
            tool: t, arg: a, ..
        } => t == tool && a == arg,
        Limit::RequiresApproval { tool: t, when, .. } => {
            t == tool && when.as_ref().is_some_and(|w| w.arg == arg)
        }
        Limit::Requires {
            tool: t, same_args, ..
        } => t == tool && same_args.iter().any(|a| a == arg),
        // A fleet rule selects by globs over tools and argument names: any may read it.
        Limit::ArgRule { .. } => true,
        Limit::CountCap { .. } => false,
    }
}

/// The prerequisites the step-order guards of `tool` wait on, in every role and scope of
/// `catalog`, each with whether the guard reads the prerequisite's result.
fn guards_of<'c>(catalog: &'c CompiledCatalog, tool: &str) -> Vec<(&'c str, bool)> {
    result_guards(catalog, tool)
        .into_iter()
        .flat_map(|(after, _, result)| after.iter().map(move |a| (a.as_str(), result.is_some())))
        .collect()
}

/// The step-order guards of `tool` in every role and scope of `catalog`: what each waits
/// on, the arguments it binds, and the result it reads.
fn result_guards<'c>(
    catalog: &'c CompiledCatalog,
    tool: &str,
) -> Vec<(&'c [String], &'c [String], Option<&'c ResultCheck>)> {
    let catalog = catalog.catalog();
    catalog
        .roles
        .iter()
        .flat_map(|r| &r.limits)
        .chain(catalog.scopes.iter().flat_map(|s| &s.guardrails))
        .filter_map(|limit| match limit {
            Limit::Requires {
                tool: guarded,
                after,
                same_args,
                result,
            } if guarded == tool => Some((after.as_slice(), same_args.as_slice(), result.as_ref())),
            _ => None,
        })
        .collect()
}

/// What the log proves about the results a guard read: a call the catalog in force
/// allowed (or held) past a guard that reads a prerequisite's result found a success of
/// it with that result and, where the guard binds arguments, with this call's values. The
/// log keeps no result, so each simulation is given that success before deciding.
fn infer_results(
    current: &CompiledCatalog,
    tool: &str,
    arguments: &Arguments,
    sims: [&mut Simulation; 2],
) {
    let guards = result_guards(current, tool);
    for sim in sims {
        for (after, same_args, result) in &guards {
            let Some(check) = result else { continue };
            for prerequisite in after.iter().filter(|a| sim.results_unseen.contains(*a)) {
                let args = same_args
                    .iter()
                    .filter_map(|a| Some((a.clone(), value_digest(arguments.get(a)?))))
                    .collect();
                let results = [(check.pointer.clone(), value_digest(&check.equals))].into();
                sim.view
                    .record_success(prerequisite, Some(Outcome { args, results }));
            }
        }
    }
}

impl Simulation {
    fn new(view: SessionView) -> Self {
        Self {
            view,
            holds: BTreeMap::new(),
            note: None,
            ran_unseen: BTreeSet::new(),
            results_unseen: BTreeSet::new(),
        }
    }

    /// Learns `role` if this catalog lets the session's scope learn it.
    fn learn(&mut self, catalog: &CompiledCatalog, role: &Slug) -> Verdict {
        if !catalog.scope_allows(self.view.scope.as_str(), role.as_str()) {
            return Verdict::Denied;
        }
        self.view
            .learn(role.clone(), catalog.skill_versions_of(role.as_str()));
        Verdict::Allowed
    }

    /// Decides a call as the gateway would have, and keeps what it changes: the usage an
    /// allowed or held call reserves, the hold it raises (by the log's id, when the log
    /// raised one there), and whether a success of it can be recorded from the log.
    #[expect(
        clippy::too_many_arguments,
        reason = "one call, its context and its fate"
    )]
    fn decide(
        &mut self,
        catalog: &CompiledCatalog,
        tool: &str,
        arguments: &Arguments,
        key: &str,
        hold: Option<&str>,
        ran: bool,
        now: DateTime<Utc>,
    ) -> Decided {
        self.decide_with(catalog, tool, arguments, key, None, hold, ran, now)
    }

    /// The resume of a hold this simulation raised: its usage is given back and the call
    /// decided again with the reviewer's approval, as the gateway does. `None` when this
    /// simulation never raised that hold.
    #[expect(
        clippy::too_many_arguments,
        reason = "one call, its context and its fate"
    )]
    fn resume(
        &mut self,
        catalog: &CompiledCatalog,
        hold: &str,
        tool: &str,
        arguments: &Arguments,
        key: &str,
        ran: bool,
        now: DateTime<Utc>,
    ) -> Option<Decided> {
        let held = self.holds.remove(hold)?;
        self.view.release(&held);
        let approved = arguments_digest(arguments);
        Some(self.decide_with(
            catalog,
            tool,
            arguments,
            key,
            Some(&approved),
            None,
            ran,
            now,
        ))
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "one call, its context and its fate"
    )]
    fn decide_with(
        &mut self,
        catalog: &CompiledCatalog,
        tool: &str,
        arguments: &Arguments,
        key: &str,
        approved: Option<&str>,
        hold: Option<&str>,
        ran: bool,
        now: DateTime<Utc>,
    ) -> Decided {
        self.note = None;
        let request = CallRequest {
            session_id: &self.view.id,
            key_id: key,
            tool,
            arguments: arguments.clone(),
            approved,
        };
        match decide(catalog, Some(&self.view), request, now) {
            Decision::Allow(mut permit) => {
                self.view.reserve(&permit);
                if ran {
                    self.note = Some(permit.take_note());
                } else {
                    self.ran_unseen.insert(tool.to_owned());
                }
                Decided {
                    verdict: Verdict::Allowed,
                    rule: None,
                    role: Some(permit.role().to_string()),
                    no_access: false,
                    limit: None,
                }
            }
            Decision::Hold(held) => {
                let permit = held.permit();
                self.view.reserve(permit);
                let id = hold.map_or_else(|| format!("replay-{}", self.holds.len()), str::to_owned);
                self.holds.insert(id, permit.held_usage());
                Decided {
                    verdict: Verdict::Held,
                    limit: limit_of(catalog, held.rule(), Some(permit.role().as_str())),
                    rule: Some(held.rule().to_owned()),
                    role: Some(permit.role().to_string()),
                    no_access: false,
                }
            }
            Decision::Deny(denial) => Decided {
                verdict: Verdict::Denied,
                limit: limit_of(
                    catalog,
                    &denial.rule,
                    denial.role.as_ref().map(Slug::as_str),
                ),
                no_access: matches!(
                    denial.code,
                    DenyCode::AccessDenied
                        | DenyCode::ToolQuarantined
                        | DenyCode::UpstreamQuarantined
                        | DenyCode::ToolUnusable
                ),
                rule: Some(denial.rule),
                role: denial
                    .role
                    .map(|r| r.to_string())
                    .or_else(|| denial.guardrail_of.map(|s| format!("scope {s}"))),
            },
        }
    }

    /// The log's result of the last call: a success is recorded when this simulation
    /// allowed that call too.
    fn settle(&mut self, tool: &str, ok: bool) {
        let Some(note) = self.note.take() else {
            return;
        };
        if !ok || note.tool() != tool {
            return;
        }
        if note.reads_results() {
            self.results_unseen.insert(tool.to_owned());
        }
        self.view.record_success(tool, note.outcome(None));
    }

    /// A hold of the log that was denied, expired or withdrawn: what this simulation
    /// reserved for it is given back.
    fn drop_hold(&mut self, hold: &str) {
        if let Some(held) = self.holds.remove(hold) {
            self.view.release(&held);
        }
    }
}
