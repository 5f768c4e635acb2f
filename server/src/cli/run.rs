//! `openbot run`: one Turn of an agent in this process, streamed to the terminal.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use futures::StreamExt;
use openbot_core::Agent;
use openbot_core::model::model_from_spec;
use openbot_schema::{EventKind, Limits, TurnOutcome};

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
    };
    let agent = Agent::builder(model)
        .instructions(args.instructions)
        .limits(limits)
        .build()?;
    let turn = agent.start(&args.input);
    let mut events = turn.observe(0);
    let mut stdout = std::io::stdout().lock();
    let mut code = ExitCode::FAILURE;
    // Whether the current attempt printed text: a new attempt then starts on a fresh line.
    let mut printed = false;
    while let Some(event) = events.next().await {
        if args.json {
            writeln!(stdout, "{}", serde_json::to_string(&event)?)?;
        }
        match event.kind {
            EventKind::TextDelta { text, .. } if !args.json => {
                write!(stdout, "{text}")?;
                stdout.flush()?;
                printed = true;
            }
            EventKind::ModelStepStarted { attempt, .. } if !args.json => {
                if attempt > 1 && printed {
                    writeln!(stdout)?;
                    eprintln!("openbot: the answer broke off; asking again (attempt {attempt})");
                }
                printed = false;
            }
            EventKind::TurnEnded { outcome, .. } => {
                if !args.json {
                    writeln!(stdout)?;
                }
                if outcome == TurnOutcome::Completed {
                    code = ExitCode::SUCCESS;
                } else {
                    eprintln!("openbot: the turn ended early: {}", outcome_text(outcome));
                }
            }
            EventKind::Failed { error_id, .. } => {
                // This process owns the sealed record, so the person running it may read it.
                let cause = agent
                    .sealed_errors()
                    .open(error_id)
                    .unwrap_or_else(|| "unknown cause".into());
                if !args.json {
                    writeln!(stdout)?;
                }
                eprintln!("openbot: {cause}");
            }
            _ => {}
        }
    }
    turn.wait().await?;
    Ok(code)
}

fn outcome_text(outcome: TurnOutcome) -> &'static str {
    match outcome {
        TurnOutcome::Completed => "completed",
        TurnOutcome::MaxSteps => "the step limit was reached",
        TurnOutcome::MaxTime => "the time limit was reached",
        TurnOutcome::MaxCost => "the cost limit was reached",
        TurnOutcome::Cancelled => "cancelled",
    }
}
