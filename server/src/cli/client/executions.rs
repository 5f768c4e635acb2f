//! `openbot executions`: show, follow, cancel, pause and resume executions.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use futures::StreamExt;
use openbot_core::Client;
use openbot_schema::{Execution, ExecutionId};

use super::ServerArgs;
use super::output::Progress;
use crate::cli::printer::Printer;

/// Arguments of `openbot executions`.
#[derive(Debug, Args)]
pub struct ExecutionsArgs {
    #[command(subcommand)]
    command: ExecutionsCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum ExecutionsCommand {
    /// Shows an execution's state, outcome and usage.
    Get {
        /// The execution's ID.
        id: ExecutionId,
    },
    /// Streams an execution's events from a cursor until its end.
    Observe {
        /// The execution's ID.
        id: ExecutionId,
        /// Start after this event sequence (0: from the start).
        #[arg(long, default_value_t = 0)]
        after: u64,
    },
    /// Asks an execution to stop.
    Cancel {
        /// The execution's ID.
        id: ExecutionId,
    },
    /// Pauses an execution and its children: no new sends until it is resumed.
    Pause {
        /// The execution's ID.
        id: ExecutionId,
    },
    /// Resumes a paused execution and its children.
    Resume {
        /// The execution's ID.
        id: ExecutionId,
    },
}

fn line(execution: &Execution) -> String {
    let state = serde_json::to_value(execution.state).unwrap_or_default();
    let outcome = serde_json::to_value(execution.outcome).unwrap_or_default();
    format!(
        "{}  {}  {}",
        execution.id,
        state.as_str().unwrap_or("?"),
        outcome.as_str().unwrap_or("-")
    )
}

/// Runs the command.
pub async fn run(args: ExecutionsArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.connect().await?;
    let output = args.server.output();
    match args.command {
        ExecutionsCommand::Get { id } => {
            output.print(&client.get_execution(id).await?, line)?;
            Ok(ExitCode::SUCCESS)
        }
        ExecutionsCommand::Observe { id, after } => {
            follow(client.as_ref(), id, after, output.json).await
        }
        ExecutionsCommand::Cancel { id } => {
            output.print(&client.cancel_execution(id).await?, line)?;
            Ok(ExitCode::SUCCESS)
        }
        ExecutionsCommand::Pause { id } => {
            output.print(&client.pause_execution(id).await?, line)?;
            Ok(ExitCode::SUCCESS)
        }
        ExecutionsCommand::Resume { id } => {
            output.print(&client.resume_execution(id).await?, line)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Prints the events of `id` after `after` until its end; the exit code says whether the
/// Turn completed.
pub async fn follow(
    client: &dyn Client,
    id: ExecutionId,
    after: u64,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let mut progress = Progress::start("waiting for the answer");
    let mut events = client.observe(id, after).await?;
    let mut printer = Printer::new(json);
    while let Some(event) = events.next().await {
        progress.stop();
        printer.print(&event?)?;
    }
    Ok(printer.exit_code())
}
