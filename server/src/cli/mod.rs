//! The command line: one subcommand per file.

mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// OpenBot: run AI agents in-process or as a server.
#[derive(Debug, Parser)]
#[command(name = "openbot", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs one Turn of an agent in this process and streams its answer.
    Run(run::RunArgs),
}

/// Runs the chosen subcommand.
pub async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => run::run(args).await,
    }
}
