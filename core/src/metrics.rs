//! Where a governed call's time goes, and what the gateway decided, as Prometheus metrics.
//!
//! A governed call passes through phases (the agent key check, the session read, the
//! decision, the usage reservation, the durable `call_allowed` event, the upstream round
//! trip, the durable `call_result` event); each has a histogram, so an operator can see
//! which one a slow gateway is slow in. Nothing here carries a key, an argument or a
//! tool name: labels are fixed words, so the series count is bounded.

use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::model::{HookStage, InspectAction, Inspector};
use crate::policy::DenyCode;
use crate::store::WriteLockTimes;

/// A phase of a governed request, in the order a `call_tool` passes through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Checking the agent key against the store (every keyed `/mcp` request).
    Auth,
    /// Finding and reading the governance session.
    Session,
    /// The pure policy decision.
    Decide,
    /// A decision commit that stores reserved usage, for tools a cumulative limit reads.
    /// The reservation commits with its decision event, so this is the same time as that
    /// commit's [`Phase::AuditDecision`], observed under both.
    Reserve,
    /// The durable decision (`call_allowed`, `call_held` or `call_denied`) and the state
    /// committed with it.
    AuditDecision,
    /// The downstream call, from send to answer.
    Upstream,
    /// The durable `call_result` event.
    AuditResult,
    /// The content inspectors: a call's arguments before deciding, its result before the
    /// answer.
    Inspect,
}

impl Phase {
    pub const ALL: [Phase; 8] = [
        Phase::Auth,
        Phase::Session,
        Phase::Decide,
        Phase::Reserve,
        Phase::AuditDecision,
        Phase::Upstream,
        Phase::AuditResult,
        Phase::Inspect,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Auth => "auth",
            Phase::Session => "session",
            Phase::Decide => "decide",
            Phase::Reserve => "reserve",
            Phase::AuditDecision => "audit_decision",
            Phase::Upstream => "upstream",
            Phase::AuditResult => "audit_result",
            Phase::Inspect => "inspect",
        }
    }
}

/// What `call_tool` decided, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Allowed,
    /// Held for a reviewer's approval.
    Held,
    Denied(DenyCode),
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Held => "held",
            Outcome::Denied(DenyCode::AccessDenied) => "access_denied",
            Outcome::Denied(DenyCode::GovernanceViolation) => "governance_violation",
            Outcome::Denied(DenyCode::InvalidArguments) => "invalid_arguments",
            Outcome::Denied(DenyCode::ToolUnusable) => "tool_unusable",
            Outcome::Denied(DenyCode::InternalError) => "internal_error",
            Outcome::Denied(DenyCode::ToolQuarantined) => "tool_quarantined",
            Outcome::Denied(DenyCode::UpstreamQuarantined) => "upstream_quarantined",
            Outcome::Denied(DenyCode::ContentBlocked) => "content_blocked",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabel {
    phase: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabel {
    decision: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FindingLabel {
    inspector: &'static str,
    action: &'static str,
}

/// A hook's name is an admin's slug, so the series count is bounded by the catalog.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabel {
    hook: String,
    stage: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: &'static str,
}

/// The gateway's metrics, shared behind an `Arc`. Recording takes only the histogram's own
/// short lock: the per-phase histograms are fetched from their family once, up front.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    // One histogram per phase, fetched once: `Family::get_or_create` takes a lock.
    phases: Vec<Histogram>,
    requests: Histogram,
    decisions: Family<DecisionLabel, Counter>,
    refusals: Family<StatusLabel, Counter>,
    findings: Family<FindingLabel, Counter>,
    hooks: Family<HookLabel, Histogram>,
    panics: Counter,
    password_verifications: Counter,
    notifications: Family<OutcomeLabel, Counter>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// Bucket bounds in seconds: 25 µs doubling to about 0.8 s, so both a 0.1 ms store read
/// and a slow upstream land in a bucket that tells them apart.
fn latency_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.000_025, 2.0, 16)
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("skillgate");
        let phase_family = Family::<PhaseLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(latency_buckets())
        });
        registry.register(
            "call_phase_seconds",
            "Time spent in each phase of governed MCP tool calls",
            phase_family.clone(),
        );
        let phases = Phase::ALL
            .iter()
            .map(|phase| {
                phase_family.get_or_create_owned(&PhaseLabel {
                    phase: phase.as_str(),
                })
            })
            .collect();
        let requests = Histogram::new(latency_buckets());
        registry.register(
            "admitted_request_seconds",
            "Time from admission to answer of requests admitted to /mcp and /api/v1",
            requests.clone(),
        );
        let decisions = Family::<DecisionLabel, Counter>::default();
        registry.register(
            "call_decisions",
            "call_tool decisions, by outcome",
            decisions.clone(),
        );
        let refusals = Family::<StatusLabel, Counter>::default();
        registry.register(
            "mcp_refusals",
            "Requests to /mcp and /api/v1 refused at admission, by HTTP status",
            refusals.clone(),
        );
        let findings = Family::<FindingLabel, Counter>::default();
        registry.register(
            "inspection_findings",
            "What the content inspectors found in governed calls, by inspector and action taken",
            findings.clone(),
        );
        let hooks = Family::<HookLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(latency_buckets())
        });
        registry.register(
            "guardrail_hook_seconds",
            "Time external guardrail hooks took to answer, by hook, stage and outcome (allow, deny, modify, error)",
            hooks.clone(),
        );
        let panics = Counter::default();
        registry.register(
            "handler_panics",
            "MCP requests whose handler panicked (answered as an internal error and audited)",
            panics.clone(),
        );
        let password_verifications = Counter::default();
        registry.register(
            "password_verifications",
            "Console passwords checked with argon2, including the dummy check for unknown names",
            password_verifications.clone(),
        );
        let notifications = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "hold_notifications",
            "Delivery attempts of hold announcements to approvers, by outcome (delivered, retry, failed: every retry spent)",
            notifications.clone(),
        );
        Self {
            registry,
            phases,
            requests,
            decisions,
            refusals,
            findings,
            hooks,
            panics,
            password_verifications,
            notifications,
        }
    }

    /// Publishes how long the store's writes waited for and held its write lock (the same
    /// histograms the store records into).
    pub fn with_write_lock(mut self, times: &WriteLockTimes) -> Self {
        self.registry.register(
            "store_write_lock_wait_seconds",
            "Time write transactions waited for the store's write lock (SQLite's BEGIN IMMEDIATE, PostgreSQL's advisory lock shared by all replicas)",
            times.wait().clone(),
        );
        self.registry.register(
            "store_write_lock_hold_seconds",
            "Time write transactions held the store's write lock, from taking it to their commit or rollback",
            times.hold().clone(),
        );
        self
    }

    /// Times one stage of a governed call: the returned guard observes `phase` when it is
    /// dropped, however the stage ends (an answer, a refusal, an error), and carries the
    /// stage's trace span when one is given with [`Stage::traced`].
    pub fn stage(&self, phase: Phase) -> Stage<'_> {
        Stage {
            metrics: self,
            phase,
            also: None,
            started: Instant::now(),
            span: tracing::Span::none(),
        }
    }

    pub fn observe(&self, phase: Phase, elapsed: Duration) {
        // `phases` was built from `Phase::ALL`, whose order is the declaration order.
        self.phases[phase as usize].observe(elapsed.as_secs_f64());
    }

    pub fn observe_request(&self, elapsed: Duration) {
        self.requests.observe(elapsed.as_secs_f64());
    }

    pub fn count_decision(&self, outcome: Outcome) {
        self.decisions
            .get_or_create(&DecisionLabel {
                decision: outcome.as_str(),
            })
            .inc();
    }

    /// Counts one content-inspection finding (`secrets`, `injection`, …) and what was done
    /// about it (`flag`, `redact`, `block`).
    pub fn count_finding(&self, inspector: Inspector, action: InspectAction) {
        self.findings
            .get_or_create(&FindingLabel {
                inspector: inspector.as_str(),
                action: action.as_str(),
            })
            .inc();
    }

    /// Observes one external hook's answer (`allow`, `deny`, `modify`) or failure (`error`).
    pub fn observe_hook(
        &self,
        hook: &str,
        stage: HookStage,
        outcome: &'static str,
        elapsed: Duration,
    ) {
        self.hooks
            .get_or_create(&HookLabel {
                hook: hook.to_owned(),
                stage: stage.as_str(),
                outcome,
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Counts one delivery attempt of a hold announcement: `delivered`, `retry` or `failed`.
    pub fn count_notification(&self, outcome: &'static str) {
        self.notifications
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
    }

    /// Counts an MCP request whose handler panicked.
    pub fn count_panic(&self) {
        self.panics.inc();
    }

    /// Counts a request refused at admission (`/mcp`, `/api/v1`); `status` is the HTTP status code as text.
    pub fn count_refusal(&self, status: &'static str) {
        self.refusals.get_or_create(&StatusLabel { status }).inc();
    }

    /// Counts one argon2 password verification (the expensive, memory-hungry step of a
    /// sign-in), so an operator can see that a burst of sign-ins was throttled before it.
    pub fn count_password_verification(&self) {
        self.password_verifications.inc();
    }

    /// The Prometheus text exposition format (version 0.0.4 compatible, OpenMetrics
    /// syntax), ending in `# EOF`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// The timing guard of one stage (see [`Metrics::stage`]).
#[must_use = "a stage is timed until its guard is dropped"]
pub struct Stage<'a> {
    metrics: &'a Metrics,
    phase: Phase,
    also: Option<Phase>,
    started: Instant,
    span: tracing::Span,
}

impl Stage<'_> {
    /// The stage's trace span: the guard keeps it open until the stage ends.
    pub fn traced(mut self, span: tracing::Span) -> Self {
        self.span = span;
        self
    }

    /// Observes the same time under a second phase too, when `yes`: a commit that carries
    /// a reservation is both the decision's audit and the reservation.
    pub fn also(mut self, phase: Phase, yes: bool) -> Self {
        if yes {
            self.also = Some(phase);
        }
        self
    }

    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// The time since the stage began.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

impl Drop for Stage<'_> {
    fn drop(&mut self) {
        let elapsed = self.started.elapsed();
        self.metrics.observe(self.phase, elapsed);
        if let Some(also) = self.also {
            self.metrics.observe(also, elapsed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_is_observed_once_when_its_guard_drops_under_each_of_its_phases() {
        let metrics = Metrics::new();
        let count = |text: &str, phase: &str| {
            line_value(
                text,
                &format!(r#"skillgate_call_phase_seconds_count{{phase="{phase}"}}"#),
            )
        };
        let decide = metrics.stage(Phase::Decide);
        assert_eq!(count(&metrics.render(), "decide"), Some(0.0));
        drop(decide);
        drop(
            metrics
                .stage(Phase::AuditDecision)
                .also(Phase::Reserve, true),
        );
        drop(
            metrics
                .stage(Phase::AuditDecision)
                .also(Phase::Reserve, false),
        );
        let text = metrics.render();
        assert_eq!(count(&text, "decide"), Some(1.0));
        assert_eq!(count(&text, "audit_decision"), Some(2.0));
        assert_eq!(count(&text, "reserve"), Some(1.0));
    }

    #[tokio::test]
    async fn writes_through_the_store_show_as_write_lock_waits_and_holds() {
        let store = crate::store::Store::open("sqlite::memory:").await.unwrap();
        let metrics = Metrics::new().with_write_lock(store.write_lock_times());
        let counts = |text: &str| {
            [
                "skillgate_store_write_lock_wait_seconds_count",
                "skillgate_store_write_lock_hold_seconds_count",
            ]
            .map(|series| line_value(text, series).expect("the series is published"))
        };
        let before = counts(&metrics.render());
        // One write on the pool (a change and its events), one on SQLite's direct lane.
        store
            .audit_append_after(|_| Box::pin(async { Ok(Some(())) }), |_, ()| Vec::new())
            .await
            .unwrap();
        store.audit_append_with(|_| Vec::new()).await.unwrap();
        let after = counts(&metrics.render());
        assert_eq!([after[0] - before[0], after[1] - before[1]], [2.0, 2.0]);
    }

    fn line_value(text: &str, prefix: &str) -> Option<f64> {
        text.lines()
            .find(|line| line.starts_with(prefix))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse().ok())
    }

    #[test]
    fn an_observed_phase_shows_its_count_and_sum_under_its_own_label() {
        let metrics = Metrics::new();
        metrics.observe(Phase::AuditDecision, Duration::from_micros(300));
        metrics.observe(Phase::AuditDecision, Duration::from_micros(500));
        metrics.observe(Phase::Upstream, Duration::from_millis(2));
        let text = metrics.render();
        assert_eq!(
            line_value(
                &text,
                r#"skillgate_call_phase_seconds_count{phase="audit_decision"}"#
            ),
            Some(2.0)
        );
        let sum = line_value(
            &text,
            r#"skillgate_call_phase_seconds_sum{phase="audit_decision"}"#,
        )
        .unwrap();
        assert!((sum - 0.0008).abs() < 1e-9, "sum was {sum}");
        assert_eq!(
            line_value(
                &text,
                r#"skillgate_call_phase_seconds_count{phase="upstream"}"#
            ),
            Some(1.0)
        );
        // Phases never observed are still listed, at zero, so a dashboard has every line.
        assert_eq!(
            line_value(
                &text,
                r#"skillgate_call_phase_seconds_count{phase="reserve"}"#
            ),
            Some(0.0)
        );
        assert!(text.trim_end().ends_with("# EOF"));
    }

    #[test]
    fn every_phase_indexes_its_own_histogram() {
        for (index, phase) in Phase::ALL.iter().enumerate() {
            assert_eq!(*phase as usize, index, "{phase:?}");
        }
    }

    #[test]
    fn findings_are_counted_by_inspector_and_action() {
        let metrics = Metrics::new();
        metrics.count_finding(Inspector::Secrets, InspectAction::Redact);
        metrics.count_finding(Inspector::Secrets, InspectAction::Redact);
        metrics.count_finding(Inspector::Injection, InspectAction::Flag);
        let text = metrics.render();
        assert_eq!(
            line_value(
                &text,
                r#"skillgate_inspection_findings_total{inspector="secrets",action="redact"}"#
            ),
            Some(2.0)
        );
        assert_eq!(
            line_value(
                &text,
                r#"skillgate_inspection_findings_total{inspector="injection",action="flag"}"#
            ),
            Some(1.0)
        );
    }

    #[test]
    fn a_hook_answer_is_timed_by_hook_stage_and_outcome() {
        let metrics = Metrics::new();
        metrics.observe_hook(
            "moderation",
            HookStage::Result,
            "deny",
            Duration::from_millis(3),
        );
        let text = metrics.render();
        assert_eq!(
            line_value(
                &text,
                r#"skillgate_guardrail_hook_seconds_count{hook="moderation",stage="result",outcome="deny"}"#
            ),
            Some(1.0)
        );
    }

    #[test]
    fn decisions_are_counted_by_outcome_with_fixed_words() {
        let metrics = Metrics::new();
        metrics.count_decision(Outcome::Allowed);
        metrics.count_decision(Outcome::Allowed);
        metrics.count_decision(Outcome::Denied(DenyCode::GovernanceViolation));
        let text = metrics.render();
        assert_eq!(
            line_value(
                &text,
                r#"skillgate_call_decisions_total{decision="allowed"}"#
            ),
            Some(2.0)
        );
        assert_eq!(
            line_value(
                &text,
                r#"skillgate_call_decisions_total{decision="governance_violation"}"#
            ),
            Some(1.0)
        );
    }
}
