//! Server functions of the notifications page: the notifiers and the delivery log (every
//! console role reads them), adding a webhook (its secret shown once) or an email notifier
//! (its SMTP password never shown again), and removing one (admins).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::flash::Notice;
use crate::shared::ConsoleError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotifierLine {
    pub name: String,
    pub kind: String,
    pub target: String,
    /// `all`, or the scopes and roles it announces, comma-separated.
    pub scopes: String,
    pub roles: String,
    pub expiring_minutes: Option<u32>,
    pub created: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryLine {
    pub id: String,
    pub notifier: String,
    pub hold_id: String,
    pub event: String,
    pub state: String,
    pub attempts: u32,
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
    /// Delivered at, or next (or last) attempt at.
    pub at: String,
}

/// A webhook just added, with its signing secret: the only time the secret is shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreatedNotifier {
    pub name: String,
    pub url: String,
    pub secret: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotifiersView {
    pub notifiers: Vec<NotifierLine>,
    /// The latest deliveries, newest first.
    pub log: Vec<DeliveryLine>,
    pub can_edit: bool,
    /// A webhook added by a form post without JavaScript, shown once after the redirect.
    pub fresh: Option<CreatedNotifier>,
    /// What a plain (no JavaScript) removal reported.
    pub notice: Option<Notice>,
}

#[server(prefix = "/console/api", endpoint = "list_notifiers")]
pub async fn list_notifiers(reveal: Option<String>) -> Result<NotifiersView, ConsoleError> {
    ssr::list(reveal).await
}

/// Adds a webhook. With JavaScript the secret comes back in the result; a plain form post
/// is answered with a redirect, so the secret is kept server-side for one render.
#[server(prefix = "/console/api", endpoint = "add_webhook")]
pub async fn add_webhook(
    name: String,
    url: String,
    scopes: Option<String>,
    roles: Option<String>,
    expiring_minutes: Option<String>,
) -> Result<Option<CreatedNotifier>, ConsoleError> {
    ssr::add(name, url, scopes, roles, expiring_minutes).await
}

/// The email form's fields, posted as `email[name]`, `email[to]`, … `to`, `scopes` and
/// `roles` are comma-separated; `tls` is `starttls` (the default), `tls` or `none`; an
/// empty port is the mode's usual one.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct EmailFields {
    pub name: String,
    pub to: String,
    pub from: String,
    pub smtp_host: String,
    #[serde(default)]
    pub smtp_port: Option<String>,
    #[serde(default)]
    pub tls: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
    /// The SMTP password: stored like a webhook's secret, never shown again, never logged.
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub scopes: Option<String>,
    #[serde(default)]
    pub roles: Option<String>,
    #[serde(default)]
    pub expiring_minutes: Option<String>,
}

impl std::fmt::Debug for EmailFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailFields")
            .field("name", &self.name)
            .field("to", &self.to)
            .field("smtp_host", &self.smtp_host)
            .finish_non_exhaustive()
    }
}

/// Adds an email notifier: holds are mailed to the recipients through the SMTP server.
#[server(prefix = "/console/api", endpoint = "add_email_notifier")]
pub async fn add_email_notifier(email: EmailFields) -> Result<Notice, ConsoleError> {
    crate::components::flash::ssr::keep_for_redirect(ssr::add_email(email).await).await
}

#[server(prefix = "/console/api", endpoint = "remove_notifier")]
pub async fn remove_notifier(name: String) -> Result<Notice, ConsoleError> {
    crate::components::flash::ssr::keep_for_redirect(ssr::remove(&name).await).await
}

#[cfg(feature = "ssr")]
mod ssr {
    use chrono::{DateTime, Utc};
    use skillgate_core::admin::{EmailSpec, WebhookSpec};
    use skillgate_core::holds::notify::{SmtpSettings, SmtpTls};
    use skillgate_core::users::ConsoleRole;

    use super::*;
    use crate::catalog::authoring::{
        authoring_error, is_plain_form_post, reveal_after_redirect, take_reveal,
    };
    use crate::shared::ssr::{context, internal, require};

    /// The delivery log's length on the page.
    const LOG_ROWS: u32 = 50;

    fn stamp(at: DateTime<Utc>) -> String {
        at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
    }

    fn names(text: Option<String>) -> Vec<String> {
        text.unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn or_all(names: &[String]) -> String {
        if names.is_empty() {
            "all".to_owned()
        } else {
            names.join(", ")
        }
    }

    pub async fn list(reveal: Option<String>) -> Result<NotifiersView, ConsoleError> {
        let user = require(ConsoleRole::Viewer).await?;
        let ctx = context();
        let can_edit = user.role.allows(ConsoleRole::Admin);
        let notifiers = ctx
            .store
            .list_notifiers()
            .await
            .map_err(internal)?
            .into_iter()
            .map(|n| NotifierLine {
                scopes: or_all(&n.scopes),
                roles: or_all(&n.roles),
                created: format!("{} by {}", stamp(n.created_at), n.created_by),
                name: n.name,
                kind: n.kind,
                target: n.target,
                expiring_minutes: n.expiring_minutes,
            })
            .collect();
        let log = ctx
            .store
            .recent_notifications(LOG_ROWS)
            .await
            .map_err(internal)?
            .into_iter()
            .map(|d| DeliveryLine {
                at: stamp(d.delivered_at.unwrap_or(d.next_attempt_at)),
                id: d.id,
                notifier: d.notifier,
                hold_id: d.hold_id,
                event: d.event,
                state: d.state,
                attempts: d.attempts,
                last_status: d.last_status,
                last_error: d.last_error,
            })
            .collect();
        let fresh = take_reveal(&ctx, user.id, reveal.filter(|_| can_edit)).await?;
        Ok(NotifiersView {
            notifiers,
            log,
            can_edit,
            fresh,
            notice: crate::components::flash::ssr::take().await?,
        })
    }

    fn field(field: &str, message: &str) -> ConsoleError {
        ConsoleError::Field {
            field: field.to_owned(),
            message: message.to_owned(),
        }
    }

    fn minutes(text: Option<String>) -> Result<Option<u32>, ConsoleError> {
        match text.as_deref().map(str::trim) {
            None | Some("") => Ok(None),
            Some(text) => text.parse::<u32>().map(Some).map_err(|_| {
                field(
                    "expiring_minutes",
                    "Enter a number of minutes, or leave it empty.",
                )
            }),
        }
    }

    pub async fn add_email(form: EmailFields) -> Result<Notice, ConsoleError> {
        let user = require(ConsoleRole::Admin).await?;
        let tls = match form.tls.as_deref() {
            None | Some("") => SmtpTls::default(),
            Some(text) => {
                SmtpTls::parse(text).ok_or_else(|| field("tls", "Pick STARTTLS, TLS or none."))?
            }
        };
        let port = match form.smtp_port.as_deref().map(str::trim) {
            None | Some("") => tls.default_port(),
            Some(text) => text
                .parse::<u16>()
                .ok()
                .filter(|port| *port > 0)
                .ok_or_else(|| {
                    field(
                        "smtp_port",
                        "Enter a port from 1 to 65535, or leave it empty.",
                    )
                })?,
        };
        let spec = EmailSpec {
            name: form.name,
            to: names(Some(form.to)),
            smtp: SmtpSettings {
                host: form.smtp_host,
                port,
                tls,
                username: form.username.filter(|u| !u.trim().is_empty()),
                from: form.from.trim().to_owned(),
            },
            password: form.password.filter(|p| !p.is_empty()),
            scopes: names(form.scopes),
            roles: names(form.roles),
            expiring_minutes: minutes(form.expiring_minutes)?,
        };
        let info = context()
            .authoring
            .add_email_notifier(&user.name, spec)
            .await
            .map_err(authoring_error)?;
        Ok(Notice::ok(format!(
            "Added the email notifier “{}”: holds are mailed to {}.",
            info.name, info.target
        )))
    }

    pub async fn add(
        name: String,
        url: String,
        scopes: Option<String>,
        roles: Option<String>,
        expiring_minutes: Option<String>,
    ) -> Result<Option<CreatedNotifier>, ConsoleError> {
        let user = require(ConsoleRole::Admin).await?;
        let spec = WebhookSpec {
            name,
            url,
            scopes: names(scopes),
            roles: names(roles),
            expiring_minutes: minutes(expiring_minutes)?,
        };
        let ctx = context();
        let (info, secret) = ctx
            .authoring
            .add_webhook_notifier(&user.name, spec)
            .await
            .map_err(authoring_error)?;
        let created = CreatedNotifier {
            name: info.name,
            url: info.target,
            secret: secret.expose().to_owned(),
        };
        if is_plain_form_post().await {
            reveal_after_redirect(&ctx, user.id, &created, "/notifications", "new-notifier")
                .await?;
            return Ok(None);
        }
        Ok(Some(created))
    }

    pub async fn remove(name: &str) -> Result<Notice, ConsoleError> {
        let user = require(ConsoleRole::Admin).await?;
        let info = context()
            .authoring
            .remove_notifier(&user.name, name)
            .await
            .map_err(authoring_error)?;
        Ok(Notice::ok(format!(
            "Removed the notifier “{}”: holds are no longer announced to {}.",
            info.name, info.target
        )))
    }
}
