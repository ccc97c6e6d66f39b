//! The command line: its clap types ([`cli`]), one module per command, and [`run`], which
//! the `skillgate` binary calls with the parsed command line. `serve` is the long-running
//! command; the others open the database, do one thing and exit.

pub mod audit;
pub mod catalog;
pub mod cli;
pub mod holds;
pub mod key;
pub mod migrate;
pub mod notifier;
pub mod serve;
pub mod signing_key;
pub mod skill;
mod table;
pub mod user;
pub mod workspace;

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context as _;
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;
use skillgate_core::store::workspaces::DEFAULT_WORKSPACE;

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

use self::cli::{Cli, Command};
use self::serve::telemetry::Telemetry;

/// The log filter when `RUST_LOG` is not set. A server's log is its running commentary;
/// a one-shot command (`key create`, `user add`, `audit verify`, …) prints its result on
/// stdout, and only a warning or an error belongs beside it.
fn default_filter(command: Option<&Command>) -> &'static str {
    match command {
        // rmcp logs every service it starts at info, and a stateless `/mcp` starts one per
        // request.
        None | Some(Command::Serve(_)) => "info,sqlx=warn,tower_sessions=warn,rmcp=warn",
        Some(_) => "warn",
    }
}

/// Sets up the log and, for `serve` when the `OTEL_*` variables ask for it, the trace
/// exporter (see [`telemetry`]), which the caller shuts down on the way out.
fn init_tracing(command: Option<&Command>) -> Option<Telemetry> {
    // Logs go to stderr: stdout carries the MCP stream of `demo-upstream` and the one-time
    // secrets that `serve` and `key create` print. Colours only for a person at a terminal:
    // a file, a pipe or the parent relaying a stdio upstream's stderr gets plain text.
    // The trace spans are the exporter's, not the log's.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(default_filter(command)))
        .add_directive(
            format!("{}=off", skillgate_core::trace::TARGET)
                .parse()
                .expect("a valid directive"),
        );
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter);
    // Only the server traces; its stdio upstreams inherit its environment and must not.
    let serving = matches!(command, None | Some(Command::Serve(_)));
    let (telemetry, failure) = match serving.then(Telemetry::from_env) {
        Some(Ok(telemetry)) => (telemetry, None),
        Some(Err(error)) => (None, Some(error)),
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(log)
        .with(telemetry.as_ref().map(Telemetry::layer))
        .init();
    if let Some(error) = failure {
        tracing::error!(%error, "traces are not exported");
    } else if telemetry.is_some() {
        tracing::info!("exporting traces over OTLP/HTTP");
    }
    telemetry
}

/// Runs one command line of the `skillgate` binary.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    skillgate_core::upstream::install_crypto_provider();
    let telemetry = init_tracing(cli.command.as_ref());
    let outcome = dispatch(cli).await;
    // After the server has stopped: the last requests' spans are queued by now.
    if let Some(telemetry) = telemetry {
        telemetry.shutdown().await;
    }
    outcome
}

async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    let target = Target::from_cli(&cli)?;
    if target.workspace.as_str() != DEFAULT_WORKSPACE
        && !matches!(
            cli.command,
            Some(
                Command::Key(_)
                    | Command::Catalog(_)
                    | Command::Skill(_)
                    | Command::Holds(_)
                    | Command::Notifier(_)
                    | Command::Audit(_)
            )
        )
    {
        anyhow::bail!(
            "--workspace applies to the key, catalog, skill, holds, notifier and audit commands; this command \
             works on the whole deployment (unset SKILLGATE_WORKSPACE or pass --workspace default)"
        );
    }
    match cli.command {
        None => serve::run(&cli.database_url, Cli::default_serve()).await,
        Some(Command::Serve(args)) => serve::run(&cli.database_url, args).await,
        Some(Command::User(command)) => user::run(&cli.database_url, command).await,
        Some(Command::Workspace(command)) => workspace::run(&cli.database_url, command).await,
        Some(Command::Key(command)) => key::run(&target, command).await,
        Some(Command::Skill(command)) => skill::run(&target, command).await,
        Some(Command::Holds(command)) => holds::run(&target, command).await,
        Some(Command::Notifier(command)) => notifier::run(&target, command).await,
        Some(Command::DemoUpstream(args)) => {
            let options = skillgate_demo_upstream::DemoUpstreamOptions {
                executions_log: args.executions_log,
                bench_tools: args.bench_tools,
            };
            match args.http {
                Some(addr) => skillgate_demo_upstream::serve_http(options, addr).await,
                None => skillgate_demo_upstream::serve_stdio(options).await,
            }
        }
        // The only command whose outcome is more than success or an error: a broken chain
        // is a finding, reported on stderr with a failing exit code.
        Some(Command::Audit(command)) => return audit::run(&target, command).await,
        // A copy whose audit chain does not verify is a finding as well.
        Some(Command::Migrate(args)) => return migrate::run(args).await,
        // An invalid catalog file is reported on stderr, path by path, with a failing exit code.
        Some(Command::Catalog(command)) => {
            return catalog::run(&target, command).await;
        }
    }?;
    Ok(ExitCode::SUCCESS)
}

/// Where a one-shot command works: the platform database (whose URL also places the audit
/// signing key every workspace's chain is signed with) and one workspace in it. Not
/// `Debug`: a PostgreSQL URL may hold a password.
#[derive(Clone)]
pub struct Target {
    pub database_url: String,
    pub workspace: Slug,
}

impl Target {
    /// The `default` workspace of the deployment at `database_url`.
    pub fn platform(database_url: &str) -> Self {
        Self {
            database_url: database_url.to_owned(),
            workspace: Slug::parse(DEFAULT_WORKSPACE).expect("`default` is a slug"),
        }
    }

    fn from_cli(cli: &Cli) -> anyhow::Result<Self> {
        let workspace = Slug::parse(cli.workspace.trim())
            .with_context(|| format!("--workspace {}", cli.workspace))?;
        Ok(Self {
            database_url: cli.database_url.clone(),
            workspace,
        })
    }

    /// Opens the workspace's database: the platform's for `default`.
    pub async fn open(&self) -> anyhow::Result<Store> {
        let platform = Store::open(&self.database_url).await?;
        if self.workspace.as_str() == DEFAULT_WORKSPACE {
            return Ok(platform);
        }
        let workspace = platform.workspace(&self.workspace).await.with_context(|| {
            format!(
                "opening workspace `{}` (see `skillgate workspace list`)",
                self.workspace
            )
        })?;
        platform.close().await;
        Ok(workspace)
    }
}

/// Who a one-shot command acts as, for the audit: the local account running it.
pub fn local_actor() -> String {
    skillgate_core::names::Actor::local_cli().to_string()
}
