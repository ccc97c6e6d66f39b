//! `skillgate catalog …`: the catalog as code. Export it as one YAML document, print the
//! document's JSON Schema, or apply a document back (checked whole, planned, written in one
//! audited transaction).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;

use crate::cmd::Target;
use chrono::Utc;
use skillgate_core::admin::AdminService;
use skillgate_core::audit::AuditLog;
use skillgate_core::catalog_code::{self, ApplyError, ApplyOptions, CatalogFile, json_schema_text};
use skillgate_core::limited_read::LimitedReadError;
use skillgate_core::names::Actor;
use skillgate_core::policy::CompiledCatalog;
use skillgate_core::whatif::{ReplayReport, ReplayRequest, Window, replay_stored};

use crate::cmd::key::{DEFAULT_MCP_URL, render_created};

#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Write the whole catalog (upstreams without credentials, tools, skills, roles, scopes,
    /// agent key names) as one YAML document.
    Export {
        /// Write to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Print the JSON Schema of the catalog document (for editors).
    Schema,
    /// Make the database's catalog match FILE: check the whole file, print the plan and
    /// apply it in one transaction.
    Apply {
        file: PathBuf,
        /// Print the plan and write nothing.
        #[arg(long)]
        dry_run: bool,
        /// How to print the plan: `text` (each change, then each value it sets, old → new)
        /// or `json` (one object, for CI).
        #[arg(long, value_enum, default_value_t = PlanFormat::Text)]
        format: PlanFormat,
        /// With --dry-run: decide the audited calls of the last WINDOW (1h, 24h, 7d, 30d)
        /// again under FILE and report the outcomes that would change. Exit code 3 when any
        /// would.
        #[arg(long, value_name = "WINDOW", requires = "dry_run")]
        replay: Option<String>,
        /// With --dry-run: the same for every call of a session (repeat for several).
        #[arg(
            long = "replay-session",
            value_name = "SESSION",
            requires = "dry_run",
            conflicts_with = "replay"
        )]
        replay_sessions: Vec<String>,
        /// Remove what the file does not list (agent keys it does not list are revoked).
        #[arg(long)]
        prune: bool,
        /// The MCP endpoint to put into the client configuration printed for a new key.
        #[arg(long, default_value = DEFAULT_MCP_URL)]
        mcp_url: String,
        /// The largest FILE read; a bigger one is refused before it is read.
        #[arg(
            long,
            env = "SKILLGATE_MAX_CATALOG_BYTES",
            value_name = "BYTES",
            default_value_t = catalog_code::DEFAULT_MAX_CATALOG_BYTES,
            value_parser = clap::value_parser!(u64).range(1..)
        )]
        max_catalog_bytes: u64,
    },
}

/// The exit code of a dry run whose replay found outcomes that would change: not 1 (an
/// invalid file or window) nor 2 (a usage error), so a pipeline can tell them apart.
pub const FLIPS_EXIT: u8 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PlanFormat {
    Text,
    Json,
}

pub async fn run(target: &Target, command: CatalogCommand) -> anyhow::Result<ExitCode> {
    match command {
        CatalogCommand::Schema => print!("{}", json_schema_text()),
        CatalogCommand::Export { output } => {
            let store = target.open().await?;
            let yaml = catalog_code::export::export(&store)
                .await
                .context("reading the catalog")?
                .to_yaml();
            match output {
                Some(path) => std::fs::write(&path, yaml)
                    .with_context(|| format!("writing {}", path.display()))?,
                None => print!("{yaml}"),
            }
        }
        CatalogCommand::Apply {
            file,
            dry_run,
            format,
            replay,
            replay_sessions,
            prune,
            mcp_url,
            max_catalog_bytes,
        } => {
            let bytes = match catalog_code::read_catalog_file(&file, max_catalog_bytes) {
                Ok(bytes) => bytes,
                Err(error @ LimitedReadError::TooBig { .. }) => {
                    eprintln!("{error}");
                    if !dry_run {
                        audit_refusal(target, &file, None, "TOO_LARGE", &error.to_string()).await?;
                    }
                    return Ok(ExitCode::FAILURE);
                }
                Err(error) => return Err(error.into()),
            };
            let window = match (replay, replay_sessions.is_empty()) {
                (Some(text), _) => Some(Window::last(&text)),
                (None, false) => Some(Ok(Window::Sessions(replay_sessions))),
                (None, true) => None,
            };
            let window = match window.transpose() {
                Ok(window) => window,
                Err(error) => {
                    eprintln!("{error}");
                    return Ok(ExitCode::FAILURE);
                }
            };
            let options = ApplyOptions { prune, dry_run };
            let parsed = CatalogFile::parse(&bytes);
            let digest = parsed
                .as_ref()
                .map(|file| file.digest().to_owned())
                .unwrap_or_default();
            let result = match parsed {
                Ok(parsed) => {
                    let store = target.open().await?;
                    AdminService::open(store)
                        .await
                        .context("reading the catalog")?
                        .apply_catalog(&parsed, options)
                        .await
                }
                Err(error) => Err(error),
            };
            let mut report = match result {
                Ok(report) => report,
                Err(error @ ApplyError::Invalid(_)) => {
                    eprintln!("{}: {error}", file.display());
                    if !dry_run {
                        let reason = error.to_string();
                        audit_refusal(target, &file, Some(&bytes), "INVALID", &reason).await?;
                    }
                    return Ok(ExitCode::FAILURE);
                }
                Err(error) => return Err(error.into()),
            };
            let replayed = match (&window, report.proposed.take()) {
                (Some(window), Some(proposed)) => {
                    match replay_against(target, window, proposed, &digest).await? {
                        Ok(replayed) => Some(replayed),
                        Err(error) => {
                            eprintln!("{error}");
                            return Ok(ExitCode::FAILURE);
                        }
                    }
                }
                _ => None,
            };
            // A GitOps pipeline gates on it: an outcome that would change fails the step.
            let exit = match &replayed {
                Some(found) if found.flips() => ExitCode::from(FLIPS_EXIT),
                _ => ExitCode::SUCCESS,
            };
            if format == PlanFormat::Json {
                print_json(&report, &mcp_url, replayed.as_ref());
                return Ok(exit);
            }
            print!("{}", report.plan);
            if let (Some(found), Some(window)) = (&replayed, &window) {
                print!("{}", found.render(&replay_heading(window)));
            }
            if replayed.is_some() {
                println!("dry run: nothing was written");
                return Ok(exit);
            }
            if report.plan.is_empty() {
                return Ok(ExitCode::SUCCESS);
            }
            if !report.applied {
                println!("dry run: nothing was written");
                return Ok(ExitCode::SUCCESS);
            }
            println!("applied in one transaction, audited as {}", report.actor);
            for created in &report.created_keys {
                println!();
                println!("agent key `{}`:", created.info.name);
                print!("{}", render_created(&created.info, &created.key, &mcp_url));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Audits a refused `catalog apply` (`admin_refused`, action `catalog.apply`); a dry run
/// changes nothing and asks for nothing, so it is not audited. The actor names the refused
/// contents as an apply's actor would (`catalog-apply:<digest>`) when there are any.
async fn audit_refusal(
    target: &Target,
    file: &std::path::Path,
    bytes: Option<&[u8]>,
    code: &str,
    reason: &str,
) -> anyhow::Result<()> {
    use sha2::Digest as _;
    let actor = match bytes {
        Some(bytes) => format!(
            "catalog-apply:{}",
            &hex::encode(sha2::Sha256::digest(bytes))[..12]
        ),
        None => "catalog-apply".to_owned(),
    };
    let store = target.open().await?;
    AdminService::open(store)
        .await
        .context("reading the catalog")?
        .record_refusal(
            &actor,
            "catalog.apply",
            &format!("catalog-file:{}", file.display()),
            code,
            reason,
        )
        .await
        .context("auditing the refused catalog file")?;
    Ok(())
}

/// The report as one JSON object: the plan, whether it was written and by whom, and the
/// agent keys it created, each with its secret, shown this once as in the text form.
fn print_json(report: &catalog_code::ApplyReport, mcp_url: &str, replayed: Option<&ReplayReport>) {
    let mut json = report.plan.to_json();
    if let Some(replayed) = replayed {
        json["replay"] = replayed.to_json();
    }
    json["applied"] = report.applied.into();
    json["actor"] = report.actor.clone().into();
    json["created_keys"] = report
        .created_keys
        .iter()
        .map(|created| {
            serde_json::json!({
                "name": created.info.name,
                "scope": created.info.scope,
                "key": created.key.expose(),
                "mcp_url": mcp_url,
            })
        })
        .collect();
    println!("{json}");
}

/// What the replay report is about.
fn replay_heading(window: &Window) -> String {
    match window {
        Window::Last { text, .. } => format!("replay of the last {text}"),
        Window::Sessions(ids) => format!(
            "replay of {} session{}",
            ids.len(),
            if ids.len() == 1 { "" } else { "s" }
        ),
    }
}

/// Replays the stored audit against the catalog a dry run would make, audited as the
/// local user; on a terminal, stderr shows how far it got (Ctrl-C leaves nothing behind:
/// the replay writes only its own audit event, at the end).
async fn replay_against(
    target: &Target,
    window: &Window,
    proposed: skillgate_core::model::Catalog,
    digest: &str,
) -> anyhow::Result<Result<ReplayReport, skillgate_core::whatif::WhatIfError>> {
    use std::io::{IsTerminal as _, Write as _};
    let store = target.open().await?;
    let current = store
        .compiled_catalog()
        .await
        .context("reading the catalog")?;
    let proposed = CompiledCatalog::compile(proposed);
    let audit = AuditLog::new(store.clone());
    let actor = Actor::local_cli().to_string();
    let request = ReplayRequest {
        current: &current,
        proposed: &proposed,
        window,
        actor: &actor,
        file_digest: digest,
    };
    let terminal = std::io::stderr().is_terminal();
    let mut read = 0u64;
    let progress = |seq: u64| {
        read += 1;
        if terminal && read.is_multiple_of(50_000) {
            eprint!("\rreplaying: {read} events read (event {seq})");
            let _ = std::io::stderr().flush();
        }
    };
    let found = replay_stored(&store, &audit, request, Utc::now(), progress).await;
    if terminal && read >= 50_000 {
        eprintln!();
    }
    Ok(found)
}
