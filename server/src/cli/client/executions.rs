//! `openbot executions`: show, follow, cancel, pause and resume executions; list the calls whose
//! outcome is unknown and decide them.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use futures::StreamExt;
use openbot_core::Client;
use openbot_schema::{
    ContentPart, DecideOutcome, Execution, ExecutionId, OutcomeDecision, OutcomeDecisionRecord,
    ToolResult, UnknownOutcome, UnknownOutcomePage,
};

use super::ServerArgs;
use super::output::Progress;
use super::paging::{PageArgs, list};
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
    /// Delivers the result of a host tool call the execution waits for (a tool the caller's
    /// program runs); the Turn goes on with it.
    Deliver {
        /// The execution's ID.
        id: ExecutionId,
        /// The tool call's ID (from its `tool_call` event).
        #[arg(long)]
        call: String,
        /// The tool's name.
        #[arg(long)]
        tool: String,
        /// The result text the model reads.
        #[arg(long)]
        result: String,
        /// The tool failed: the result is its error.
        #[arg(long)]
        error: bool,
    },
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
    /// Lists your executions waiting in outcome_unknown: a write whose answer was lost, with
    /// the tool and arguments to check in the outside system.
    Unknown {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Decides the call an execution in outcome_unknown waits for.
    Decide {
        /// The execution's ID.
        id: ExecutionId,
        /// The call decided, as listed (e.g. 1/tool:0/1).
        #[arg(long)]
        call: String,
        #[command(flatten)]
        decision: DecisionFlags,
        /// With --applied: the call's result, given to the model as the tool's answer.
        #[arg(long)]
        result: Option<String>,
        /// Why, for the audit log; with --give-up, why the execution ends.
        #[arg(long)]
        reason: Option<String>,
    },
}

/// Exactly one decision.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
struct DecisionFlags {
    /// It was applied: --result is its result; the call is not sent again.
    #[arg(long, requires = "result")]
    applied: bool,
    /// It was not applied: the call is sent again, as a new attempt.
    #[arg(long)]
    not_applied: bool,
    /// Give up: the execution ends failed and sends nothing more.
    #[arg(long)]
    give_up: bool,
}

impl DecisionFlags {
    fn decision(&self) -> OutcomeDecision {
        if self.applied {
            OutcomeDecision::Applied
        } else if self.not_applied {
            OutcomeDecision::NotApplied
        } else {
            OutcomeDecision::GiveUp
        }
    }
}

fn unknown_line(outcome: &UnknownOutcome) -> String {
    format!(
        "{}  {}  {}({})  key {}  since {}",
        outcome.execution_id,
        outcome.call,
        outcome.tool_call.name,
        outcome.tool_call.arguments,
        outcome.idempotency_key,
        outcome.waiting_since.to_rfc3339()
    )
}

fn decision_line(record: &OutcomeDecisionRecord) -> String {
    format!(
        "{}  {}  {}  by {}",
        record.execution_id,
        record.call,
        record.decision.as_str(),
        record.decided_by
    )
}

fn line(execution: &Execution) -> String {
    let state = serde_json::to_value(execution.state).unwrap_or_default();
    let outcome = serde_json::to_value(execution.outcome).unwrap_or_default();
    let line = format!(
        "{}  {}  {}",
        execution.id,
        state.as_str().unwrap_or("?"),
        outcome.as_str().unwrap_or("-")
    );
    match &execution.reason {
        // Why work that could not be rebuilt was interrupted.
        Some(reason) => format!("{line}  ({reason})"),
        None => line,
    }
}

/// Runs the command.
pub async fn run(args: ExecutionsArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.connect().await?;
    let output = args.server.output();
    match args.command {
        ExecutionsCommand::Deliver {
            id,
            call,
            tool,
            result,
            error,
        } => {
            let delivered = ToolResult {
                call_id: call,
                name: tool,
                output: vec![ContentPart::Text { text: result }],
                is_error: error,
            };
            client.deliver_tool_result(id, delivered.clone()).await?;
            output.print(&delivered, |d| format!("delivered {} to {id}", d.call_id))?;
            Ok(ExitCode::SUCCESS)
        }
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
        ExecutionsCommand::Unknown { page } => {
            let remote = args.server.remote()?;
            let empty = "nothing waits for a decision";
            list::<UnknownOutcomePage>(
                &remote,
                "/v1/unknown-outcomes",
                &page,
                output,
                unknown_line,
                empty,
            )
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        ExecutionsCommand::Decide {
            id,
            call,
            decision,
            result,
            reason,
        } => {
            if result.is_some() && !decision.applied {
                anyhow::bail!("execution {id}: --result goes with --applied only");
            }
            let decision = DecideOutcome {
                call,
                decision: decision.decision(),
                result,
                reason,
            };
            output.print(&client.decide_outcome(id, decision).await?, decision_line)?;
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
