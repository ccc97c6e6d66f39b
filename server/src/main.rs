//! `skillgate`: the server binary and its command line.

mod api;
mod audit_cmd;
mod cli;
mod compliance_http;
mod console_auth;
mod console_guard;
mod demo_upstream;
mod dev;
mod export;
mod health;
mod key_cmd;
mod mcp;
mod metrics_http;
mod serve;
mod upstream_sync;
mod user_cmd;

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::cli::{Cli, Command};

fn init_tracing() {
    // Logs go to stderr: stdout carries the MCP stream of `demo-upstream` and the one-time
    // secrets that `serve` and `key create` print. rmcp logs every service it starts at
    // info, and a stateless `/mcp` starts one per request.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_sessions=warn,rmcp=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    init_tracing();
    let cli = Cli::parse();
    match cli.command {
        None => serve::run(&cli.database_url, Cli::default_serve()).await,
        Some(Command::Serve(args)) => serve::run(&cli.database_url, args).await,
        Some(Command::User(command)) => user_cmd::run(&cli.database_url, command).await,
        Some(Command::Key(command)) => key_cmd::run(&cli.database_url, command).await,
        Some(Command::DemoUpstream(args)) => {
            let options = demo_upstream::DemoUpstreamOptions {
                executions_log: args.executions_log,
            };
            match args.http {
                Some(addr) => demo_upstream::serve_http(options, addr).await,
                None => demo_upstream::serve_stdio(options).await,
            }
        }
        Some(Command::Dev(command)) => dev::run(&cli.database_url, command).await,
        // The only command whose outcome is more than success or an error: a broken chain
        // is a finding, reported on stderr with a failing exit code.
        Some(Command::Audit(command)) => return audit_cmd::run(&cli.database_url, command).await,
    }?;
    Ok(ExitCode::SUCCESS)
}
