//! `skillgate catalog …`: the catalog as code. Export it as one YAML document, print the
//! document's JSON Schema, or apply a document back (checked whole, planned, written in one
//! audited transaction).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;

use skillgate_core::admin::AdminService;
use skillgate_core::catalog_code::{self, ApplyError, ApplyOptions, CatalogFile, json_schema_text};
use skillgate_core::store::Store;

use crate::key_cmd::{DEFAULT_MCP_URL, render_created};

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
        /// Remove what the file does not list (agent keys it does not list are revoked).
        #[arg(long)]
        prune: bool,
        /// The MCP endpoint to put into the client configuration printed for a new key.
        #[arg(long, default_value = DEFAULT_MCP_URL)]
        mcp_url: String,
    },
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
            prune,
            mcp_url,
        } => {
            let bytes =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
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
                    return Ok(ExitCode::FAILURE);
                }
                Err(error) => return Err(error.into()),
            };
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
