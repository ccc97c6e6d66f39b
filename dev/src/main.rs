//! `skillgate-dev`: the developer tools' binary (benchmarks and synthetic data sets).

use std::io::IsTerminal as _;

use clap::Parser;
use skillgate_dev::DevCommand;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Parser)]
#[command(
    name = "skillgate-dev",
    version,
    about = "Skillgate's developer tools: benchmarks and synthetic data sets (BENCHMARKS.md)"
)]
struct Cli {
    #[command(subcommand)]
    command: DevCommand,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    skillgate_core::upstream::install_crypto_provider();
    // The tools print their results on stdout; only a warning or an error belongs beside it.
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    skillgate_dev::run(cli.command).await
}
