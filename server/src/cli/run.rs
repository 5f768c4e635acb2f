//! `openbot run`: one Turn of an agent in this process, streamed to the terminal.

use std::process::ExitCode;

use clap::Args;
use futures::StreamExt;
use openbot_core::Agent;
use openbot_core::model::model_from_spec;
use openbot_schema::{EventKind, Limits};

use super::printer::Printer;

/// Arguments of `openbot run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The model: openai:<model>, openai-responses:<model>, anthropic:<model>,
    /// compatible:<base-url>:<model> or scripted:<file.json>.
    #[arg(long, short, env = "OPENBOT_MODEL")]
    model: String,
    /// System instructions.
    #[arg(long, default_value = "")]
    instructions: String,
    /// The most model steps.
    #[arg(long)]
    max_steps: Option<u32>,
    /// The most wall time, in seconds.
    #[arg(long)]
    max_time: Option<u64>,
    /// Code Mode: the model gets `run_code` and may compute in the sandbox (docs/code-mode.md).
    #[arg(long)]
    code_mode: bool,
    /// Print every event as one JSON line instead of the answer's text.
    #[arg(long)]
    json: bool,
    /// The question.
    input: String,
}

/// Runs the Turn; the exit code is 0 when it completed, 1 otherwise.
pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let model = model_from_spec(&args.model, &|name| std::env::var(name).ok())?;
    let limits = Limits {
        max_steps: args.max_steps,
        max_wall_time_ms: args.max_time.map(|s| s.saturating_mul(1000)),
        max_cost_micros: None,
        max_repeated_calls: None,
    };
    let mut builder = Agent::builder(model)
        .instructions(args.instructions)
        .limits(limits);
    if args.code_mode {
        builder = builder.code_mode(openbot_core::codemode::Limits::default());
    }
    let agent = builder.build()?;
    let turn = agent.start(&args.input);
    let mut events = turn.observe(0);
    let mut printer = Printer::new(args.json);
    while let Some(event) = events.next().await {
        printer.print(&event)?;
        if let EventKind::Failed { error_id, .. } = event.kind {
            // This process owns the sealed record, so the person running it may read it.
            let cause = agent
                .sealed_errors()
                .open(error_id)
                .unwrap_or_else(|| "unknown cause".into());
            eprintln!("openbot: {cause}");
            turn.wait().await?;
            return Ok(ExitCode::FAILURE);
        }
    }
    turn.wait().await?;
    Ok(printer.exit_code())
}
