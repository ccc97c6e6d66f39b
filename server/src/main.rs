//! `skillgate`: the server binary. The commands live in the library (src/lib.rs).

use std::process::ExitCode;

use clap::Parser as _;
use skillgate::cmd::cli::Cli;

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    skillgate::run(Cli::parse()).await
}
