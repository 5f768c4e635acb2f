//! `openbot code run`: runs a program against a Bot's tools on a server with no model
//! (Code Mode's own operation, see docs/code-mode.md).

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use openbot_core::Operations;
use openbot_schema::{BotId, CodeRun, CodeRunResult};

use super::ServerArgs;

/// Arguments of `openbot code`.
#[derive(Debug, Args)]
pub struct CodeArgs {
    #[command(subcommand)]
    command: CodeCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum CodeCommand {
    /// Runs a JavaScript program (a file, or `-` for stdin) against the Bot's tools and prints
    /// its result; the exit code is 1 when the program failed.
    Run {
        /// The Bot whose tools the program calls.
        #[arg(long)]
        bot: BotId,
        /// The program's file, or `-` for stdin.
        file: std::path::PathBuf,
    },
}

fn text(result: &CodeRunResult) -> String {
    let mut lines: Vec<String> = result
        .console
        .iter()
        .map(|l| format!("[{}] {}", l.level, l.text))
        .collect();
    match (&result.value, &result.error) {
        (Some(value), _) if result.ok => lines.push(value.to_string()),
        (_, Some(error)) => lines.push(format!("error {}: {}", error.code, error.message)),
        _ => {}
    }
    lines.join("\n")
}

/// Runs the command.
pub async fn run(args: CodeArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        CodeCommand::Run { bot, file } => {
            let code = if file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())
                    .context("cannot read the program from stdin")?
            } else {
                std::fs::read_to_string(&file)
                    .with_context(|| format!("cannot read {}", file.display()))?
            };
            let result = client
                .run_code(
                    &bot,
                    &CodeRun {
                        code,
                        command_key: None,
                    },
                )
                .await?;
            output.print(&result, text)?;
            Ok(if result.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}
