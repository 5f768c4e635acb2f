//! Code Mode figures (docs/benchmarks.md): the engine's cold start (compiling the guest), the
//! start of one run, the overhead of one tool call from code, and a Turn that makes N tool
//! calls in one code run against the same N calls as N direct model steps, on the scripted
//! model. Prints figures and ratios; never asserts a timing. The last line is one JSON object.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Parser;
use openbot_core::Agent;
use openbot_core::codemode::{Limits, RunInput, Sandbox, ToolHost, ToolReply};
use openbot_core::model::ScriptedModel;
use openbot_core::schema::TurnOutcome;
use openbot_core::tool::{FnTool, ToolOutput};
use serde_json::{Value, json};

/// Code Mode benchmark.
#[derive(Debug, Parser)]
#[command(name = "code-mode")]
struct Args {
    /// Tool calls per Turn in the code-vs-direct comparison.
    #[arg(long, default_value_t = 20)]
    calls: usize,
    /// Repetitions of each measurement (the median is reported).
    #[arg(long, default_value_t = 15)]
    rounds: usize,
    /// Tool calls of the per-call overhead program.
    #[arg(long, default_value_t = 1000)]
    overhead_calls: usize,
}

struct Echo;

#[async_trait::async_trait]
impl ToolHost for Echo {
    async fn call(&self, _index: u32, _name: &str, arguments: Value) -> ToolReply {
        ToolReply::Ok(arguments)
    }
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn input(code: &str) -> RunInput {
    RunInput {
        code: code.into(),
        tools: vec!["echo".into()],
        seed: 1,
        now_ms: 0,
    }
}

fn echo_tool() -> FnTool {
    FnTool::new(
        "echo",
        "Repeats the text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        |args, _| async move { Ok(ToolOutput::text(args["text"].as_str().unwrap_or_default())) },
    )
}

async fn turn(script: Value, code_mode: bool) -> anyhow::Result<Duration> {
    let model = Arc::new(ScriptedModel::from_json(&script.to_string())?);
    let mut builder = Agent::builder(model).tool(echo_tool());
    if code_mode {
        builder = builder.code_mode(Limits::default());
    }
    let agent = builder.build()?;
    let started = Instant::now();
    let end = agent.start("go").wait().await?;
    let took = started.elapsed();
    ensure!(
        end.outcome == Ok(TurnOutcome::Completed),
        "the Turn ended {:?}",
        end.outcome
    );
    Ok(took)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();

    let cold = Instant::now();
    let shared = Sandbox::shared().context("engine")?;
    let cold_start = cold.elapsed();
    let mut compiles = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        Sandbox::new().context("engine")?;
        compiles.push(t.elapsed());
    }
    let compile = median(compiles);
    println!(
        "engine cold start (first Sandbox::shared): {:.1} ms",
        cold_start.as_secs_f64() * 1e3
    );
    println!(
        "engine compile (Sandbox::new, median of 3): {:.1} ms; guest {} bytes",
        compile.as_secs_f64() * 1e3,
        Sandbox::guest_bytes()
    );

    let mut starts = Vec::new();
    for _ in 0..args.rounds {
        let t = Instant::now();
        let out = shared
            .run(input("return 1;"), Limits::default(), &Echo)
            .await?;
        ensure!(out.result == Ok(json!(1)), "{:?}", out.result);
        starts.push(t.elapsed());
    }
    let run_start = median(starts);
    println!(
        "one run (return 1), median: {:.2} ms",
        run_start.as_secs_f64() * 1e3
    );

    let n = args.overhead_calls;
    let code = format!("for (let i = 0; i < {n}; i++) {{ await tools.echo({{i}}); }} return {n};");
    let limits = Limits {
        max_tool_calls: n as u32 + 1,
        ..Limits::default()
    };
    let mut loops = Vec::new();
    for _ in 0..args.rounds.min(5) {
        let t = Instant::now();
        let out = shared.run(input(&code), limits, &Echo).await?;
        ensure!(out.result == Ok(json!(n)), "{:?}", out.result);
        loops.push(t.elapsed());
    }
    let per_call = median(loops).saturating_sub(run_start) / n as u32;
    println!(
        "per tool call from code (sandbox to host and back), median: {:.1} us",
        per_call.as_secs_f64() * 1e6
    );

    let calls = args.calls;
    let code = format!(
        "const out = []; for (let i = 0; i < {calls}; i++) {{ out.push(await tools.echo({{text: 'x' + i}})); }} return out.length;"
    );
    let code_script = json!([
        {"tool_calls": [{"name": "run_code", "arguments": {"code": code}}]},
        {"text": "done"}
    ]);
    let mut direct_steps: Vec<Value> = (0..calls)
        .map(|i| json!({"tool_calls": [{"name": "echo", "arguments": {"text": format!("x{i}")}}]}))
        .collect();
    direct_steps.push(json!({"text": "done"}));
    let direct_script = Value::Array(direct_steps);
    let (mut code_turns, mut direct_turns) = (Vec::new(), Vec::new());
    for _ in 0..args.rounds {
        code_turns.push(turn(code_script.clone(), true).await?);
        direct_turns.push(turn(direct_script.clone(), false).await?);
    }
    let (code_turn, direct_turn) = (median(code_turns), median(direct_turns));
    println!(
        "Turn with {calls} tool calls: one code run {:.2} ms (2 model steps) vs {calls} direct steps {:.2} ms ({} model steps); code/direct = {:.2}",
        code_turn.as_secs_f64() * 1e3,
        direct_turn.as_secs_f64() * 1e3,
        calls + 1,
        code_turn.as_secs_f64() / direct_turn.as_secs_f64()
    );
    println!(
        "{}",
        json!({
            "engine_cold_start_ms": cold_start.as_secs_f64() * 1e3,
            "engine_compile_ms": compile.as_secs_f64() * 1e3,
            "guest_bytes": Sandbox::guest_bytes(),
            "run_start_ms": run_start.as_secs_f64() * 1e3,
            "per_call_us": per_call.as_secs_f64() * 1e6,
            "calls": calls,
            "code_turn_ms": code_turn.as_secs_f64() * 1e3,
            "direct_turn_ms": direct_turn.as_secs_f64() * 1e3,
            "code_over_direct": code_turn.as_secs_f64() / direct_turn.as_secs_f64(),
        })
    );
    Ok(())
}
