//! Announcing holds to approvers: a worker that finds the holds each notifier should
//! announce (raised, or about to expire), records each announcement in the outbox, and
//! delivers it as a signed webhook, with retries.
//!
//! Nothing here is on a call's path: a held call is answered as soon as its hold is stored,
//! and the worker, on its own task, picks the hold up from the store within a poll
//! interval. A slow or dead receiver delays only its own deliveries. Every replica runs the
//! worker; the outbox's unique (notifier, hold, event) and its delivery lease keep two
//! replicas from announcing one hold twice, except that a delivery whose outcome was lost
//! (the replica died after sending) is sent again: receivers dedupe by `delivery`.
//!
//! A request is `POST <url>` with a JSON body, `skillgate-timestamp: <unix seconds>`,
//! `skillgate-signature: v1=<hex HMAC-SHA256(secret, timestamp "." body)>` (as the
//! guardrail hooks sign), `skillgate-event` and `skillgate-delivery`. The body's `text` is
//! a sentence with the hold's console link, so a Slack-style incoming webhook posts it
//! as it is.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{HoldView, shown_state};
use crate::audit::{AuditLog, NewEvent};
use crate::inspect::hook::{SIGNATURE_HEADER, TIMESTAMP_HEADER, sign};
use crate::metrics::Metrics;
use crate::policy::CatalogHandle;
use crate::store::holds::{HoldRow, HoldState};
use crate::store::notifications::{NotificationRow, NotifierInfo, NotifierSecret};
use crate::store::{Store, StoreError};

pub const EVENT_HEADER: &str = "skillgate-event";
pub const DELIVERY_HEADER: &str = "skillgate-delivery";
pub const CREATED: &str = "hold.created";
pub const EXPIRING: &str = "hold.expiring";

/// How deliveries are retried: after `base`, then three times longer each time, until
/// `attempts` have failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub base: Duration,
    pub attempts: u32,
}

impl Default for RetryPolicy {
    /// 10 s, 30 s, 1.5 min, 4.5 min, 13.5 min: six attempts over about 20 minutes.
    fn default() -> Self {
        Self {
            base: Duration::from_secs(10),
            attempts: 6,
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt number `attempt` (1-based).
    pub fn delay(self, attempt: u32) -> Duration {
        self.base
            .saturating_mul(3u32.saturating_pow(attempt.saturating_sub(1)))
    }
}

/// How long one delivery may take before it counts as failed.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a claimed delivery is leased: longer than a delivery can take.
const LEASE: chrono::Duration = chrono::Duration::seconds(30);
/// Deliveries taken per round, and at most in flight at once.
const BATCH: u32 = 20;
const IN_FLIGHT: usize = 32;
/// The pending holds each round considers (newest first).
const PENDING_WINDOW: u32 = 500;
/// The longest error kept with a delivery.
const MAX_ERROR_CHARS: usize = 500;

/// The worker of one workspace's store. Cheap to clone.
#[derive(Clone)]
pub struct HoldNotifier {
    store: Store,
    audit: AuditLog,
    catalog: Arc<CatalogHandle>,
    http: reqwest::Client,
    /// The console's address, for the link to each hold (`{console}/holds/{id}`).
    console: Arc<str>,
    retry: RetryPolicy,
    metrics: Option<Arc<Metrics>>,
    in_flight: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for HoldNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldNotifier")
            .field("console", &self.console)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl HoldNotifier {
    pub fn new(
        store: Store,
        audit: AuditLog,
        catalog: Arc<CatalogHandle>,
        console: &str,
        retry: RetryPolicy,
    ) -> Self {
        crate::upstream::install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(DELIVERY_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a client with these settings always builds");
        Self {
            store,
            audit,
            catalog,
            http,
            console: console.trim_end_matches('/').into(),
            retry,
            metrics: None,
            in_flight: Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT)),
        }
    }

    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Runs rounds every `interval` on its own task, for the life of the process.
    pub fn spawn(self, interval: Duration) {
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(error) = self.round(Utc::now()).await {
                    tracing::warn!(%error, "could not announce holds");
                }
            }
        });
    }

    /// Records the announcements due at `now`, then starts delivering what is due, each
    /// delivery on its own task: a receiver that does not answer holds up only its own
    /// delivery (until its timeout), never the next round. Returns how many announcements
    /// were recorded and how many deliveries started.
    #[tracing::instrument(skip(self), level = "debug")]
    pub async fn round(&self, now: DateTime<Utc>) -> Result<(usize, usize), StoreError> {
        let enqueued = self.enqueue(now).await?;
        let free = self.in_flight.available_permits().min(BATCH as usize);
        if free == 0 {
            return Ok((enqueued, 0));
        }
        let due = self
            .store
            .claim_due_notifications(now, now + LEASE, free as u32)
            .await?;
        if due.is_empty() {
            return Ok((enqueued, 0));
        }
        let notifiers = Arc::new(self.store.notifiers_with_secrets().await?);
        let started = due.len();
        for delivery in due {
            let permit = self
                .in_flight
                .clone()
                .acquire_owned()
                .await
                .expect("the semaphore is never closed");
            let (worker, notifiers) = (self.clone(), notifiers.clone());
            tokio::spawn(async move {
                let notifier = notifiers.iter().find(|(n, _)| n.id == delivery.notifier_id);
                if let Err(error) = worker.deliver(delivery, notifier).await {
                    tracing::warn!(%error, "could not record a hold announcement's delivery");
                }
                drop(permit);
            });
        }
        Ok((enqueued, started))
    }

    /// Records an announcement for each (notifier, pending hold) pair it selects that has
    /// none yet: `hold.created` for a hold raised after the notifier was added, and
    /// `hold.expiring` once the hold is within the notifier's warning of its expiry.
    async fn enqueue(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        let notifiers = self.store.list_notifiers().await?;
        if notifiers.is_empty() {
            return Ok(0);
        }
        let pending: Vec<HoldRow> = self
            .store
            .list_holds(Some(HoldState::Pending), None, PENDING_WINDOW)
            .await?
            .into_iter()
            .filter(|hold| !hold.is_due(now))
            .collect();
        if pending.is_empty() {
            return Ok(0);
        }
        let ids: Vec<String> = pending.iter().map(|h| h.id.clone()).collect();
        let known: HashSet<(String, i64, String)> = self
            .store
            .notified_events(&ids)
            .await?
            .into_iter()
            .collect();
        let mut enqueued = 0;
        for notifier in &notifiers {
            for hold in pending.iter().filter(|h| selects(notifier, h)) {
                for event in due_events(notifier, hold, now) {
                    if known.contains(&(hold.id.clone(), notifier.id, event.to_owned())) {
                        continue;
                    }
                    let id = format!("ntf_{}", Uuid::new_v4().simple());
                    if self
                        .store
                        .enqueue_notification(&id, notifier.id, &hold.id, event, now)
                        .await?
                    {
                        enqueued += 1;
                    }
                }
            }
        }
        Ok(enqueued)
    }

    async fn deliver(
        &self,
        delivery: NotificationRow,
        notifier: Option<&(NotifierInfo, NotifierSecret)>,
    ) -> Result<Outcome, StoreError> {
        let attempt = delivery.attempts + 1;
        let hold = self.store.hold(&delivery.hold_id).await?;
        // A hold that no longer waits for a decision is not announced: approvers would be
        // asked about something already settled.
        let settled = hold
            .as_ref()
            .map(|hold| shown_state(hold, Utc::now()))
            .filter(|state| *state != HoldState::Pending);
        let result = match (notifier, &hold, settled) {
            (_, _, Some(state)) => Err(Failure::Moot(format!(
                "not sent: the hold was {} first",
                state.as_str()
            ))),
            (Some((info, secret)), Some(hold), None) => match info.kind.as_str() {
                "email" => self.email(info, secret, &delivery, hold).await,
                _ => self.post(info, secret, &delivery, hold).await,
            },
            (None, _, None) => Err(Failure::Gone("the notifier was removed".to_owned())),
            (_, None, None) => Err(Failure::Gone("the hold is gone".to_owned())),
        };
        let now = Utc::now();
        let (state, outcome, status, error) = match &result {
            Ok(status) => ("delivered", Outcome::Delivered, Some(*status), None),
            Err(moot @ Failure::Moot(_)) => {
                ("skipped", Outcome::Skipped, None, Some(moot.to_string()))
            }
            Err(failure) => {
                let last = attempt >= self.retry.attempts || matches!(failure, Failure::Gone(_));
                let (state, outcome) = if last {
                    ("failed", Outcome::Failed)
                } else {
                    ("pending", Outcome::Retry)
                };
                (state, outcome, failure.status(), Some(failure.to_string()))
            }
        };
        let next = now
            + chrono::Duration::from_std(self.retry.delay(attempt))
                .unwrap_or(chrono::Duration::MAX);
        // A skipped announcement was never attempted.
        let attempts = if outcome == Outcome::Skipped {
            delivery.attempts
        } else {
            attempt
        };
        self.store
            .record_notification_attempt(
                &delivery.id,
                state,
                attempts,
                status,
                error.as_deref(),
                next,
                now,
            )
            .await?;
        if let Some(metrics) = &self.metrics {
            metrics.count_notification(state_word(outcome));
        }
        match (&outcome, &hold, &error) {
            (Outcome::Failed, Some(hold), Some(error)) => {
                tracing::warn!(notifier = %delivery.notifier, hold = %hold.id, %error, "a hold could not be announced");
                let event = NewEvent::hold_notification_failed(
                    &hold.session_id,
                    &hold.id,
                    &delivery.notifier,
                    &delivery.event,
                    attempt,
                    error,
                );
                self.audit
                    .append(event)
                    .await
                    .map_err(|e| StoreError::Unavailable(e.to_string()))?;
            }
            (Outcome::Retry, _, Some(error)) => {
                tracing::info!(notifier = %delivery.notifier, hold = %delivery.hold_id, attempt, %error, "a hold announcement will be retried");
            }
            _ => {}
        }
        Ok(outcome)
    }

    /// One signed POST; the receiver's 2xx status, or why it failed.
    async fn post(
        &self,
        notifier: &NotifierInfo,
        secret: &NotifierSecret,
        delivery: &NotificationRow,
        hold: &HoldRow,
    ) -> Result<u16, Failure> {
        let body = self.body(delivery, hold);
        let body = serde_json::to_vec(&body).expect("JSON values serialize");
        let timestamp = Utc::now().timestamp().to_string();
        let signature = sign(secret.expose().as_bytes(), &timestamp, &body);
        let response = self
            .http
            .post(&notifier.target)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(TIMESTAMP_HEADER, &timestamp)
            .header(SIGNATURE_HEADER, signature)
            .header(EVENT_HEADER, &delivery.event)
            .header(DELIVERY_HEADER, &delivery.id)
            .body(body)
            .send()
            .await
            .map_err(|e| Failure::Unreachable(without_url(&e)))?;
        let status = response.status();
        if status.is_success() {
            Ok(status.as_u16())
        } else {
            Err(Failure::Status(status.as_u16()))
        }
    }

    /// One email to the notifier's recipients through its SMTP server; `250` once the
    /// server accepted it.
    async fn email(
        &self,
        notifier: &NotifierInfo,
        password: &NotifierSecret,
        delivery: &NotificationRow,
        hold: &HoldRow,
    ) -> Result<u16, Failure> {
        use lettre::message::header::ContentType;
        use lettre::transport::smtp::authentication::Credentials;
        use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

        let smtp: SmtpSettings = notifier
            .settings
            .clone()
            .and_then(|s| serde_json::from_value(s).ok())
            .ok_or_else(|| Failure::Gone("the notifier has no SMTP settings".to_owned()))?;
        let invalid = |e: &dyn std::fmt::Display| Failure::Gone(format!("cannot be sent: {e}"));
        let mut message = Message::builder()
            .from(smtp.from.parse().map_err(|e| invalid(&e))?)
            .subject(self.subject(delivery, hold))
            .header(ContentType::TEXT_PLAIN);
        for to in notifier
            .target
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            message = message.to(to.parse().map_err(|e| invalid(&e))?);
        }
        let body = format!(
            "{}\n\nThe call, exactly as it would run:\n{}\n\nDelivery {}.\n",
            self.text(delivery, hold),
            serde_json::to_string_pretty(
                &HoldView::new(hold, &self.catalog.load(), Utc::now()).arguments
            )
            .unwrap_or_default(),
            delivery.id
        );
        let message = message.body(body).map_err(|e| invalid(&e))?;
        let smtp_error = |e: lettre::transport::smtp::Error| {
            Failure::Smtp(e.to_string().chars().take(MAX_ERROR_CHARS).collect())
        };
        let builder = match smtp.tls {
            SmtpTls::Starttls => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&smtp.host)
                .map_err(smtp_error)?,
            SmtpTls::Tls => {
                AsyncSmtpTransport::<Tokio1Executor>::relay(&smtp.host).map_err(smtp_error)?
            }
            SmtpTls::None => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&smtp.host),
        };
        let mut builder = builder.port(smtp.port).timeout(Some(DELIVERY_TIMEOUT));
        if let Some(username) = &smtp.username {
            builder = builder.credentials(Credentials::new(
                username.clone(),
                password.expose().to_owned(),
            ));
        }
        let response = builder.build().send(message).await.map_err(smtp_error)?;
        Ok(u16::from(response.code()))
    }

    fn subject(&self, delivery: &NotificationRow, hold: &HoldRow) -> String {
        match delivery.event.as_str() {
            EXPIRING => format!(
                "Expiring soon: {} waits for approval ({})",
                hold.tool, hold.id
            ),
            _ => format!(
                "Approval needed: {} for {} ({})",
                hold.tool, hold.key_name, hold.id
            ),
        }
    }

    /// The announcement: the hold as a decider reads it, its console link, and one line
    /// a chat channel shows as it is.
    fn body(&self, delivery: &NotificationRow, hold: &HoldRow) -> Value {
        let now = Utc::now();
        let view = HoldView::new(hold, &self.catalog.load(), now);
        json!({
            "type": delivery.event,
            "delivery": delivery.id,
            "text": self.text(delivery, hold),
            "url": self.link(hold),
            "hold": view,
            "state_now": shown_state(hold, now).as_str(),
        })
    }

    fn link(&self, hold: &HoldRow) -> String {
        format!("{}/holds/{}", self.console, hold.id)
    }

    /// One sentence about the hold with its console link.
    fn text(&self, delivery: &NotificationRow, hold: &HoldRow) -> String {
        let url = self.link(hold);
        match delivery.event.as_str() {
            EXPIRING => format!(
                "Hold {id} expires {expires} unless someone decides it: {tool} for key {key} \
                 (scope {scope}, role {role}), held by {rule}. Decide: {url}",
                id = hold.id,
                expires = hold.expires_at.format("%H:%M UTC"),
                tool = hold.tool,
                key = hold.key_name,
                scope = hold.scope,
                role = hold.role,
                rule = hold.rule,
            ),
            _ => format!(
                "A call waits for approval: {tool} for key {key} (scope {scope}, role {role}), \
                 held by {rule}; it expires {expires}. Decide: {url}",
                tool = hold.tool,
                key = hold.key_name,
                scope = hold.scope,
                role = hold.role,
                rule = hold.rule,
                expires = hold.expires_at.format("%Y-%m-%d %H:%M UTC"),
            ),
        }
    }
}

/// Whether `notifier` announces `hold`: its scopes and roles (empty: every one), and only
/// holds raised since it was added.
fn selects(notifier: &NotifierInfo, hold: &HoldRow) -> bool {
    (notifier.scopes.is_empty() || notifier.scopes.contains(&hold.scope))
        && (notifier.roles.is_empty() || notifier.roles.contains(&hold.role))
        && hold.created_at >= notifier.created_at
}

/// The events due for a pending `hold` at `now`.
fn due_events(notifier: &NotifierInfo, hold: &HoldRow, now: DateTime<Utc>) -> Vec<&'static str> {
    let mut events = vec![CREATED];
    if let Some(minutes) = notifier.expiring_minutes
        && hold.expires_at - chrono::Duration::minutes(i64::from(minutes)) <= now
    {
        events.push(EXPIRING);
    }
    events
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Delivered,
    Retry,
    Failed,
    /// Not sent: the hold no longer waited for a decision.
    Skipped,
}

fn state_word(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Delivered => "delivered",
        Outcome::Retry => "retry",
        Outcome::Failed => "failed",
        Outcome::Skipped => "skipped",
    }
}

/// How an email notifier reaches its SMTP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmtpSettings {
    pub host: String,
    pub port: u16,
    #[serde(default)]
    pub tls: SmtpTls,
    /// Sign in as this user (with the notifier's password), when the server asks it.
    #[serde(default)]
    pub username: Option<String>,
    /// The sender's address.
    pub from: String,
}

/// STARTTLS (the default, refusing a server that does not offer it), TLS from the first
/// byte (port 465), or none: plain text, for a relay on this machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SmtpTls {
    #[default]
    Starttls,
    Tls,
    None,
}

impl SmtpTls {
    /// The port a server of this kind listens on by convention: submission with STARTTLS
    /// (587), implicit TLS (465), plain relay (25).
    pub fn default_port(self) -> u16 {
        match self {
            SmtpTls::Starttls => 587,
            SmtpTls::Tls => 465,
            SmtpTls::None => 25,
        }
    }

    /// `starttls`, `tls` or `none`, as the catalog and the console's form spell them.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "starttls" => Some(SmtpTls::Starttls),
            "tls" => Some(SmtpTls::Tls),
            "none" => Some(SmtpTls::None),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("answered HTTP {0}")]
    Status(u16),
    #[error("SMTP: {0}")]
    Smtp(String),
    #[error("could not be reached: {0}")]
    Unreachable(String),
    /// Nothing to deliver any more: not retried.
    #[error("{0}")]
    Gone(String),
    /// The hold was decided (or expired, or withdrawn) before the announcement went out:
    /// not sent, not retried, and no failure.
    #[error("{0}")]
    Moot(String),
}

impl Failure {
    fn status(&self) -> Option<u16> {
        match self {
            Self::Status(status) => Some(*status),
            _ => None,
        }
    }
}

/// A transport error without the URL (which may carry a token in its query), bounded.
fn without_url(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out".to_owned()
    } else if error.is_connect() {
        "connection failed".to_owned()
    } else {
        let text = error.to_string();
        match error.url() {
            Some(url) => text.replace(url.as_str(), "<url>"),
            None => text,
        }
    };
    kind.chars().take(MAX_ERROR_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_three_times_longer_each_time() {
        let policy = RetryPolicy::default();
        let waits: Vec<u64> = (1..=5).map(|a| policy.delay(a).as_secs()).collect();
        assert_eq!(waits, [10, 30, 90, 270, 810]);
        assert!(policy.delay(100) >= policy.delay(5), "no overflow");
    }

    #[test]
    fn an_smtp_security_mode_is_read_as_it_is_written_and_anything_else_is_refused() {
        for mode in [SmtpTls::Starttls, SmtpTls::Tls, SmtpTls::None] {
            let written = serde_json::to_value(mode).unwrap();
            assert_eq!(SmtpTls::parse(written.as_str().unwrap()), Some(mode));
        }
        for text in ["", "ssl", "STARTTLS ", "plain"] {
            assert_eq!(SmtpTls::parse(text), None, "{text:?}");
        }
        assert_eq!(SmtpTls::Starttls.default_port(), 587);
    }
}
