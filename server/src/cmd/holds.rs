//! `skillgate holds …`: the approval queue from the command line, for runbooks and for a
//! person at a terminal.
//!
//! Decisions go through the same holds service as the console and the HTTP API, so the
//! same rules apply (a reason, never your own agent's call, one decision per hold), and
//! each is audited with its decider and the channel `cli`. The decider is the local
//! account (`cli:$USER`), or with `--as` a console user who may decide holds.

use std::sync::Arc;

use anyhow::Context as _;
use chrono::Utc;
use clap::{Subcommand, ValueEnum};
use skillgate_core::audit::AuditLog;
use skillgate_core::holds::{Channel, Decider, HoldView, Holds, PAGE, state_filter};
use skillgate_core::policy::CatalogHandle;
use skillgate_core::store::Store;
use skillgate_core::users::{ConsoleRole, ConsoleUser};

use crate::cmd::Target;
use crate::cmd::table::{table, when};

#[derive(Debug, Subcommand)]
pub enum HoldsCommand {
    /// List holds, newest first (a page of 50).
    List {
        /// pending, approved, denied, expired, executed, refused, withdrawn or all.
        #[arg(long, default_value = "pending")]
        state: String,
        /// Start after this hold id (the `next` of the page before).
        #[arg(long, value_name = "HOLD_ID")]
        before: Option<String>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Show one hold: what the call would do and the rule that held it.
    Show {
        id: String,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Approve the exact held call: its agent may run it once before the approval expires.
    Approve(Decision),
    /// Deny the held call; what it reserved goes back to its session.
    Deny(Decision),
}

#[derive(Debug, clap::Args)]
pub struct Decision {
    id: String,
    /// Why (required; kept in the audit log).
    #[arg(long)]
    reason: String,
    /// Decide as this console user (a reviewer or admin) instead of the local account.
    #[arg(long = "as", value_name = "USER")]
    as_user: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub async fn run(target: &Target, command: HoldsCommand) -> anyhow::Result<()> {
    let store = target.open().await?;
    let holds = service(&store).await?;
    let now = Utc::now();
    match command {
        HoldsCommand::List {
            state,
            before,
            format,
        } => {
            let state = state_filter(&state)?;
            let page = holds.list(state, before.as_deref()).await?;
            let next = (page.len() == PAGE as usize)
                .then(|| page.last().map(|h| h.id.clone()))
                .flatten();
            let views: Vec<HoldView> = page.iter().map(|h| holds.view(h, now)).collect();
            match format {
                Format::Json => println!("{}", serde_json::json!({"holds": views, "next": next})),
                Format::Text if views.is_empty() => println!("no holds in that state"),
                Format::Text => {
                    print!("{}", render_list(&views));
                    if let Some(next) = next {
                        println!("more: --before {next}");
                    }
                }
            }
        }
        HoldsCommand::Show { id, format } => {
            let view = holds.view(&holds.get(&id).await?, now);
            match format {
                Format::Json => println!("{}", serde_json::to_string_pretty(&view)?),
                Format::Text => print!("{}", render_one(&view)),
            }
        }
        HoldsCommand::Approve(decision) => {
            let decider = decider(target, &decision).await?;
            holds
                .approve(&decider, &decision.id, &decision.reason, now)
                .await?;
            let hold = holds.get(&decision.id).await?;
            println!(
                "hold {} approved by {}: the agent may run this exact call of {} once, until {}",
                hold.id,
                decider.name,
                hold.tool,
                when(Some(hold.expires_at), "-")
            );
        }
        HoldsCommand::Deny(decision) => {
            let decider = decider(target, &decision).await?;
            holds
                .deny(&decider, &decision.id, &decision.reason, now)
                .await?;
            println!(
                "hold {} denied by {}: the call will not run, and what it reserved is released",
                decision.id, decider.name
            );
        }
    }
    Ok(())
}

/// The holds service on `store`, with the stored catalog (for what is sensitive) and its
/// own audit writer, as every one-shot command has.
async fn service(store: &Store) -> anyhow::Result<Holds> {
    let compiled = store
        .compiled_catalog()
        .await
        .context("reading the catalog")?;
    Ok(Holds::new(
        store.clone(),
        AuditLog::new(store.clone()),
        Arc::new(CatalogHandle::new(compiled)),
    ))
}

/// The local account, or the `--as` console user, who must be enabled and may decide holds
/// in the console. Console users are the deployment's: they live in the platform database.
async fn decider(target: &Target, decision: &Decision) -> anyhow::Result<Decider> {
    let Some(name) = decision.as_user.as_deref() else {
        return Ok(Decider::new(&crate::cmd::local_actor(), Channel::Cli));
    };
    let platform = Store::open(&target.database_url).await?;
    let found = platform.find_user(name).await;
    platform.close().await;
    let user: ConsoleUser = found?
        .ok_or_else(|| anyhow::anyhow!("--as `{name}`: there is no console user of that name"))?
        .try_into()?;
    anyhow::ensure!(
        !user.disabled,
        "--as `{name}`: that console user is disabled"
    );
    anyhow::ensure!(
        user.role.allows(ConsoleRole::Reviewer),
        "--as `{name}`: deciding a hold needs the reviewer role; `{name}` is {}",
        user.role
    );
    Ok(Decider::new(&user.name, Channel::Cli))
}

fn render_list(views: &[HoldView]) -> String {
    let rows = views
        .iter()
        .map(|h| {
            vec![
                h.id.clone(),
                h.state.to_owned(),
                h.tool.clone(),
                h.key.clone(),
                h.rule.clone(),
                when(Some(h.created_at), "-"),
                when(Some(h.expires_at), "-"),
            ]
        })
        .collect();
    table(
        &["ID", "STATE", "TOOL", "KEY", "RULE", "RAISED", "EXPIRES"],
        rows,
    )
}

fn render_one(h: &HoldView) -> String {
    let mut out = String::new();
    let mut line = |label: &str, value: &str| out.push_str(&format!("{label:<18}{value}\n"));
    line("hold", &h.id);
    line("state", h.state);
    line("tool", &h.tool);
    line("rule", &h.rule);
    line("key", &h.key);
    line("scope / role", &format!("{} / {}", h.scope, h.role));
    line("session", &h.session_id);
    line("raised", &when(Some(h.created_at), "-"));
    line("expires", &when(Some(h.expires_at), "-"));
    line(
        "approval runs",
        &format!("once, within {} minutes", h.minutes),
    );
    line("arguments digest", &h.arguments_digest);
    for (name, value) in &h.arguments {
        line(&format!("  {name}"), &value.to_string());
    }
    if let Some(by) = &h.decided_by {
        line("decided by", by);
        line("decided", &when(h.decided_at, "-"));
        line("reason", h.reason.as_deref().unwrap_or_default());
    }
    out
}
