//! `skillgate catalog …`: the catalog as code. Export it as one YAML document, print the
//! document's JSON Schema, or apply a document back (checked whole, planned, written in one
//! audited transaction).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;

use skillgate_core::admin::AdminService;
use skillgate_core::catalog_code::{self, ApplyError, ApplyOptions, CatalogFile, json_schema_text};
use skillgate_core::limited_read::LimitedReadError;
use skillgate_core::store::Store;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PlanFormat {
    Text,
    Json,
}

pub async fn run(database_url: &str, command: CatalogCommand) -> anyhow::Result<ExitCode> {
    match command {
        CatalogCommand::Schema => print!("{}", json_schema_text()),
        CatalogCommand::Export { output } => {
            let store = Store::open(database_url).await?;
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
            prune,
            mcp_url,
            max_catalog_bytes,
        } => {
            let bytes = match catalog_code::read_catalog_file(&file, max_catalog_bytes) {
                Ok(bytes) => bytes,
                Err(error @ LimitedReadError::TooBig { .. }) => {
                    eprintln!("{error}");
                    if !dry_run {
                        audit_refusal(database_url, &file, None, "TOO_LARGE", &error.to_string())
                            .await?;
                    }
                    return Ok(ExitCode::FAILURE);
                }
                Err(error) => return Err(error.into()),
            };
            let options = ApplyOptions { prune, dry_run };
            let parsed = CatalogFile::parse(&bytes);
            let result = match parsed {
                Ok(parsed) => {
                    let store = Store::open(database_url).await?;
                    AdminService::open(store)
                        .await
                        .context("reading the catalog")?
                        .apply_catalog(&parsed, options)
                        .await
                }
                Err(error) => Err(error),
            };
            let report = match result {
                Ok(report) => report,
                Err(error @ ApplyError::Invalid(_)) => {
                    eprintln!("{}: {error}", file.display());
                    if !dry_run {
                        let reason = error.to_string();
                        audit_refusal(database_url, &file, Some(&bytes), "INVALID", &reason)
                            .await?;
                    }
                    return Ok(ExitCode::FAILURE);
                }
                Err(error) => return Err(error.into()),
            };
            if format == PlanFormat::Json {
                print_json(&report, &mcp_url);
                return Ok(ExitCode::SUCCESS);
            }
            print!("{}", report.plan);
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
    database_url: &str,
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
    let store = Store::open(database_url).await?;
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
fn print_json(report: &catalog_code::ApplyReport, mcp_url: &str) {
    let mut json = report.plan.to_json();
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
