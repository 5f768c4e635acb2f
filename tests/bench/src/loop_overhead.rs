//! Loop overhead per model step of the standalone runtime, against the OpenAI Agents SDK.
//!
//! Runs Turns of `--steps` model steps with the scripted model: `steps - 1` steps that each call
//! one trivial `echo` tool, then a final text answer. Each Turn is `Agent::start(..).wait()`,
//! one after another, on the runtime a user gets from `#[tokio::main]` (multi-thread, one worker
//! per core) unless `--runtime current-thread`. After `--warmup` Turns it measures `--rounds`
//! rounds of `--turns` Turns; a round's figure is its time divided by its model steps, and the
//! result is the median of the rounds.
//!
//! Then, in the same run, it runs the same loop in the OpenAI Agents SDK for Python
//! (`python/openai_agents_loop.py`, a custom Model giving the same scripted outputs, no network)
//! as a child process, and prints both figures and their ratio. The last line of the output is
//! one JSON object with all figures.
//!
//! `scripts/bench-loop` installs the SDK into a venv, builds this in release and runs it.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use clap::{Parser, ValueEnum};
use openbot_core::Agent;
use openbot_core::model::ScriptedModel;
use openbot_core::schema::TurnOutcome;
use openbot_core::tool::{FnTool, ToolOutput};
use serde_json::{Value, json};

/// Most microseconds per model step the loop may take.
const TARGET_US_PER_STEP: f64 = 20.0;
/// Least times faster than the SDK's loop.
const TARGET_RATIO: f64 = 50.0;
/// What each Turn is asked.
const INPUT: &str = "Say x, then done.";

/// The tokio runtime the Turns run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Flavor {
    /// `#[tokio::main]`'s default: a worker thread per core.
    MultiThread,
    /// One thread: `#[tokio::main(flavor = "current_thread")]`.
    CurrentThread,
}

impl Flavor {
    fn name(self) -> &'static str {
        match self {
            Flavor::MultiThread => "multi_thread",
            Flavor::CurrentThread => "current_thread",
        }
    }
}

/// Loop overhead per model step (scripted model, one trivial tool), against the OpenAI Agents
/// SDK for Python run in the same process tree.
#[derive(Debug, Parser)]
#[command(name = "loop-overhead")]
struct Args {
    /// Model steps per Turn: `steps - 1` calls to the `echo` tool, then a text answer.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    steps: u32,
    /// Turns per measured round.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..))]
    turns: u32,
    /// Measured rounds; the median is reported.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Turns before measuring.
    #[arg(long, default_value_t = 500)]
    warmup: u32,
    /// The tokio runtime.
    #[arg(long, value_enum, default_value_t = Flavor::MultiThread)]
    runtime: Flavor,
    /// Worker threads of the multi-thread runtime (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Skip the Python baseline.
    #[arg(long)]
    no_python: bool,
    /// The Python interpreter with `openai-agents` installed.
    #[arg(long, default_value = "python3")]
    python: PathBuf,
    /// The baseline script.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/python/openai_agents_loop.py"))]
    python_script: PathBuf,
    /// Turns per measured round of the baseline (it is much slower, so fewer).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    python_turns: u32,
    /// Turns before measuring the baseline.
    #[arg(long, default_value_t = 50)]
    python_warmup: u32,
}

/// A tool named `echo` that answers with its `text` argument.
fn echo_tool() -> FnTool {
    FnTool::new(
        "echo",
        "Repeats the text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        |args, _ctx| async move { Ok(ToolOutput::text(args["text"].as_str().unwrap_or_default())) },
    )
}

/// The script of one Turn: `steps - 1` tool calls, then the answer; repeated for every Turn.
fn script(steps: u32) -> String {
    let mut steps: Vec<Value> = (1..steps)
        .map(|_| json!({"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}]}))
        .collect();
    steps.push(json!({"text": "done"}));
    json!({"steps": steps, "repeat": true}).to_string()
}

/// Runs `turns` Turns one after another and checks that each ended as scripted.
async fn run_turns(agent: &Agent, turns: u32, steps: u32) -> anyhow::Result<()> {
    let messages = 1 + 2 * (steps as usize - 1) + 1;
    for _ in 0..turns {
        let end = agent.start(INPUT).wait().await?;
        if !matches!(end.outcome, Ok(TurnOutcome::Completed)) || end.messages.len() != messages {
            bail!(
                "unexpected Turn end: {:?}, {} messages",
                end.outcome,
                end.messages.len()
            );
        }
    }
    Ok(())
}

/// Our figures: µs per model step of each round.
struct Measured {
    rounds_us: Vec<f64>,
    workers: usize,
}

/// The runtime's worker threads; the current-thread runtime runs on the calling thread.
fn workers(args: &Args) -> usize {
    match args.runtime {
        Flavor::CurrentThread => 1,
        Flavor::MultiThread => args
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

fn measure_ours(args: &Args) -> anyhow::Result<Measured> {
    let workers = workers(args);
    let runtime = match args.runtime {
        Flavor::MultiThread => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()?,
        Flavor::CurrentThread => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
    };
    let model = Arc::new(ScriptedModel::from_json(&script(args.steps))?);
    let agent = Agent::builder(model.clone())
        .instructions("Be brief.")
        .tool(echo_tool())
        .build()?;
    let rounds_us = runtime.block_on(async {
        run_turns(&agent, args.warmup, args.steps).await?;
        let mut rounds_us = Vec::with_capacity(args.rounds as usize);
        for _ in 0..args.rounds {
            let start = Instant::now();
            run_turns(&agent, args.turns, args.steps).await?;
            let elapsed = start.elapsed();
            rounds_us.push(
                elapsed.as_secs_f64() * 1e6 / (f64::from(args.turns) * f64::from(args.steps)),
            );
        }
        anyhow::Ok(rounds_us)
    })?;
    let expected =
        (args.warmup as usize + args.rounds as usize * args.turns as usize) * args.steps as usize;
    ensure!(
        model.requests() == expected,
        "expected {expected} model steps, got {}",
        model.requests()
    );
    Ok(Measured { rounds_us, workers })
}

/// Runs the Python baseline and returns its JSON result.
fn measure_python(args: &Args) -> anyhow::Result<Value> {
    let output = Command::new(&args.python)
        .arg(&args.python_script)
        .args(["--steps", &args.steps.to_string()])
        .args(["--turns", &args.python_turns.to_string()])
        .args(["--rounds", &args.rounds.to_string()])
        .args(["--warmup", &args.python_warmup.to_string()])
        .output()
        .with_context(|| format!("cannot run {}", args.python.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "the baseline failed ({}); does {} have `openai-agents` (scripts/bench-loop installs it \
             into a venv)? Or pass --no-python.\n{}",
            output.status,
            args.python.display(),
            tail.join("\n")
        );
    }
    let stdout = String::from_utf8(output.stdout).context("the baseline's output is not UTF-8")?;
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .context("the baseline printed nothing")?;
    let result: Value =
        serde_json::from_str(line).with_context(|| format!("the baseline printed {line:?}"))?;
    ensure!(
        result["us_per_step"].as_f64().is_some_and(|us| us > 0.0),
        "the baseline's result has no us_per_step: {line}"
    );
    Ok(result)
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "loop overhead: {} steps per Turn ({} echo tool calls + 1 answer), scripted model, \
         {} runtime ({} worker threads), {cores} cores",
        args.steps,
        args.steps - 1,
        args.runtime.name(),
        workers(&args),
    );
    println!(
        "openbot: {} warm-up Turns, then {} rounds of {} Turns ({} model steps each)",
        args.warmup,
        args.rounds,
        args.turns,
        u64::from(args.turns) * u64::from(args.steps)
    );
    let ours = measure_ours(&args)?;
    let us = median(&ours.rounds_us);
    let rounds: Vec<String> = ours.rounds_us.iter().map(|r| format!("{r:.2}")).collect();
    println!(
        "openbot: {us:.2} µs per model step (median; rounds: {})",
        rounds.join(", ")
    );
    println!(
        "target: ≤ {TARGET_US_PER_STEP} µs per step: {}",
        verdict(us <= TARGET_US_PER_STEP)
    );

    let baseline = if args.no_python {
        println!("openai-agents baseline: skipped (--no-python); no ratio");
        None
    } else {
        println!(
            "openai-agents: {} warm-up Turns, then {} rounds of {} Turns, with {}",
            args.python_warmup,
            args.rounds,
            args.python_turns,
            args.python.display()
        );
        let result = measure_python(&args)?;
        Some(result)
    };
    let ratio = baseline
        .as_ref()
        .and_then(|b| b["us_per_step"].as_f64())
        .map(|theirs| theirs / us);
    if let (Some(base), Some(ratio)) = (&baseline, ratio) {
        println!(
            "openai-agents {} (Python {}): {:.2} µs per model step (median)",
            base["version"].as_str().unwrap_or("?"),
            base["python"].as_str().unwrap_or("?"),
            base["us_per_step"].as_f64().unwrap_or_default()
        );
        println!("ratio: openbot is {ratio:.1}x faster per model step");
        println!(
            "target: ≥ {TARGET_RATIO}x faster: {}",
            verdict(ratio >= TARGET_RATIO)
        );
    }

    let summary = json!({
        "benchmark": "loop_overhead",
        "steps": args.steps,
        "tool_calls_per_turn": args.steps - 1,
        "runtime": args.runtime.name(),
        "worker_threads": ours.workers,
        "cores": cores,
        "turns": args.turns,
        "rounds": args.rounds,
        "warmup": args.warmup,
        "us_per_step": us,
        "rounds_us_per_step": ours.rounds_us,
        "baseline": baseline,
        "baseline_skipped": args.no_python,
        "ratio": ratio,
        "target_us_per_step": TARGET_US_PER_STEP,
        "target_ratio": TARGET_RATIO,
        "us_per_step_met": us <= TARGET_US_PER_STEP,
        "ratio_met": ratio.map(|r| r >= TARGET_RATIO),
    });
    println!("{summary}");
    Ok(())
}
