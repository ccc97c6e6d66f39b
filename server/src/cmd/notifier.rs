//! `skillgate notifier …`: where approvers hear of holds. A webhook announces each hold
//! its scopes and roles select when it is raised, and optionally before it expires; its
//! signing secret is printed once. `log` is the delivery log.

use clap::Subcommand;
use skillgate_core::admin::{AdminService, EmailSpec, WebhookSpec};
use skillgate_core::holds::notify::{SmtpSettings, SmtpTls};
use skillgate_core::store::notifications::{NotificationRow, NotifierInfo};

use crate::cmd::Target;
use crate::cmd::table::{table, when};

#[derive(Debug, Subcommand)]
pub enum NotifierCommand {
    /// Add a webhook that announces holds (signed with a secret printed once).
    AddWebhook {
        /// 1 to 64 letters, digits, `.`, `_` or `-`.
        name: String,
        /// https://, or http:// to this machine.
        #[arg(long)]
        url: String,
        #[command(flatten)]
        selection: Selection,
    },
    /// Add an email notifier: holds are mailed to the recipients through an SMTP server.
    AddEmail {
        name: String,
        /// A recipient; repeatable.
        #[arg(long = "to", value_name = "ADDRESS", required = true)]
        to: Vec<String>,
        /// The sender's address.
        #[arg(long, value_name = "ADDRESS")]
        from: String,
        /// The SMTP server's host.
        #[arg(long, value_name = "HOST")]
        smtp_host: String,
        /// Its port (default: 587 for STARTTLS, 465 for TLS, 25 for none).
        #[arg(long, value_name = "PORT")]
        smtp_port: Option<u16>,
        /// starttls (default: refuses a server that does not offer it), tls (from the first
        /// byte), or none (plain text: a relay on this machine only).
        #[arg(long, value_enum, default_value_t = Tls::Starttls)]
        tls: Tls,
        /// Sign in as this user; the password is read from the first line of standard input.
        #[arg(long, value_name = "USER")]
        username: Option<String>,
        #[command(flatten)]
        selection: Selection,
    },
    /// List the notifiers (never their secrets).
    List,
    /// Remove a notifier and its delivery log.
    Remove { name: String },
    /// The latest deliveries, newest first, or every delivery of one hold.
    Log {
        #[arg(long, value_name = "HOLD_ID")]
        hold: Option<String>,
    },
}

/// Which holds a notifier announces, alike for every kind.
#[derive(Debug, clap::Args)]
pub struct Selection {
    /// Announce only holds of this scope; repeatable (default: every scope).
    #[arg(long = "scope", value_name = "SCOPE")]
    scopes: Vec<String>,
    /// Announce only holds under this role; repeatable (default: every role).
    #[arg(long = "role", value_name = "ROLE")]
    roles: Vec<String>,
    /// Announce a hold still pending this many minutes before it expires, too.
    #[arg(long, value_name = "MINUTES")]
    expiring_minutes: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Tls {
    Starttls,
    Tls,
    None,
}

pub async fn run(target: &Target, command: NotifierCommand) -> anyhow::Result<()> {
    let store = target.open().await?;
    let actor = crate::cmd::local_actor();
    match command {
        NotifierCommand::AddWebhook {
            name,
            url,
            selection,
        } => {
            let spec = WebhookSpec {
                name,
                url,
                scopes: selection.scopes,
                roles: selection.roles,
                expiring_minutes: selection.expiring_minutes,
            };
            let (info, secret) = AdminService::open(store)
                .await?
                .add_webhook_notifier(&actor, spec)
                .await?;
            println!(
                "webhook `{}` announces holds to {}\n\nsigning secret: {}\n\nIt is shown only \
                 once. Check each request's skillgate-signature: v1=<hex HMAC-SHA256(secret, \
                 skillgate-timestamp \".\" body)>.",
                info.name,
                info.target,
                secret.expose()
            );
        }
        NotifierCommand::AddEmail {
            name,
            to,
            from,
            smtp_host,
            smtp_port,
            tls,
            username,
            selection,
        } => {
            let tls = match tls {
                Tls::Starttls => SmtpTls::Starttls,
                Tls::Tls => SmtpTls::Tls,
                Tls::None => SmtpTls::None,
            };
            let port = smtp_port.unwrap_or(tls.default_port());
            let password = match &username {
                Some(_) => Some(crate::cmd::user::read_password()?.expose().to_owned()),
                None => None,
            };
            let spec = EmailSpec {
                name,
                to,
                smtp: SmtpSettings {
                    host: smtp_host,
                    port,
                    tls,
                    username,
                    from,
                },
                password,
                scopes: selection.scopes,
                roles: selection.roles,
                expiring_minutes: selection.expiring_minutes,
            };
            let info = AdminService::open(store)
                .await?
                .add_email_notifier(&actor, spec)
                .await?;
            println!(
                "email notifier `{}` announces holds to {}",
                info.name, info.target
            );
        }
        NotifierCommand::List => {
            let notifiers = store.list_notifiers().await?;
            if notifiers.is_empty() {
                println!(
                    "no notifiers; add one with `skillgate notifier add-webhook NAME --url URL`"
                );
            } else {
                print!("{}", render_notifiers(&notifiers));
            }
        }
        NotifierCommand::Remove { name } => {
            let info = AdminService::open(store)
                .await?
                .remove_notifier(&actor, &name)
                .await?;
            println!(
                "notifier `{}` removed: holds are no longer announced to {}",
                info.name, info.target
            );
        }
        NotifierCommand::Log { hold } => {
            let rows = match hold {
                Some(hold) => store.notifications_of_hold(&hold).await?,
                None => store.recent_notifications(50).await?,
            };
            if rows.is_empty() {
                println!("no deliveries");
            } else {
                print!("{}", render_log(&rows));
            }
        }
    }
    Ok(())
}

fn or_all(names: &[String]) -> String {
    if names.is_empty() {
        "all".to_owned()
    } else {
        names.join(",")
    }
}

fn render_notifiers(notifiers: &[NotifierInfo]) -> String {
    let rows = notifiers
        .iter()
        .map(|n| {
            vec![
                n.name.clone(),
                n.kind.clone(),
                n.target.clone(),
                or_all(&n.scopes),
                or_all(&n.roles),
                n.expiring_minutes
                    .map_or_else(|| "-".to_owned(), |m| format!("{m} min")),
            ]
        })
        .collect();
    table(
        &["NAME", "KIND", "TARGET", "SCOPES", "ROLES", "BEFORE EXPIRY"],
        rows,
    )
}

fn render_log(rows: &[NotificationRow]) -> String {
    let rows = rows
        .iter()
        .map(|d| {
            vec![
                d.id.clone(),
                d.notifier.clone(),
                d.hold_id.clone(),
                d.event.clone(),
                d.state.clone(),
                d.attempts.to_string(),
                d.last_status
                    .map_or_else(|| "-".to_owned(), |s| s.to_string()),
                when(d.delivered_at.or(Some(d.next_attempt_at)), "-"),
                d.last_error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &[
            "DELIVERY", "NOTIFIER", "HOLD", "EVENT", "STATE", "ATTEMPTS", "STATUS", "AT", "ERROR",
        ],
        rows,
    )
}
