use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use wasmtime::{Store, Trap};

use crate::engine::{MAX_WASM_STACK, Sandbox, SandboxError};
use crate::imports::{MemoryLimiter, Request, State};
use crate::{LimitKind, Limits, ProgramError, RunOutcome, ToolHost};

/// What one run evaluates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunInput {
    /// The program: the body of an async function (`return` gives the result).
    pub code: String,
    /// The tool names the program may call as `tools.<name>(args)`.
    pub tools: Vec<String>,
    /// Seeds Math.random and the WASI random source; the same seed draws the same numbers.
    pub seed: u64,
    /// What Date.now() returns during the whole run (milliseconds since the epoch).
    pub now_ms: i64,
}

impl Sandbox {
    /// Runs `input` under `limits`, sending each tool call to `host` and awaiting its reply.
    /// The program's failures and every limit reached are in the outcome's `result`; an
    /// `Err` here means the sandbox itself could not run.
    pub async fn run(
        &self,
        input: RunInput,
        limits: Limits,
        host: &dyn ToolHost,
    ) -> Result<RunOutcome, SandboxError> {
        if input.code.len() > limits.max_code_bytes as usize {
            return Ok(RunOutcome {
                result: Err(ProgramError::Limit {
                    limit: LimitKind::CodeSize,
                    message: format!("the program is longer than {} bytes", limits.max_code_bytes),
                }),
                console: Vec::new(),
                tool_calls: 0,
                fuel_used: 0,
            });
        }
        let (requests, mut incoming) = mpsc::unbounded_channel::<Request>();
        let (done_tx, done_rx) = oneshot::channel();
        let engine = self.engine.clone();
        let pre = self.pre.clone();
        std::thread::Builder::new()
            .name("codemode-run".into())
            // Wasm code runs on this thread's stack: room for the wasm stack limit and the host.
            .stack_size(MAX_WASM_STACK + (4 << 20))
            .spawn(move || {
                let outcome = execute(&engine, &pre, input, limits, requests);
                let _ = done_tx.send(outcome);
            })
            .map_err(|e| SandboxError::Run(e.to_string()))?;
        while let Some(request) = incoming.recv().await {
            let reply = host
                .call(request.index, &request.name, request.arguments)
                .await;
            let _ = request.reply.send(reply);
        }
        done_rx
            .await
            .map_err(|_| SandboxError::Run("the run thread ended without an outcome".into()))?
    }
}

fn execute(
    engine: &wasmtime::Engine,
    pre: &wasmtime::InstancePre<State>,
    input: RunInput,
    limits: Limits,
    requests: mpsc::UnboundedSender<Request>,
) -> Result<RunOutcome, SandboxError> {
    let guest_input = json!({
        "code": input.code,
        "tools": input.tools,
        // Math.random's state is 32 bits; the full seed feeds the WASI random source.
        "seed": (input.seed & 0xffff_ffff) as u32,
    });
    let state = State {
        input: guest_input.to_string().into_bytes(),
        js_heap: limits.js_heap_bytes(),
        js_stack: limits.js_stack_bytes,
        limiter: MemoryLimiter {
            limit: limits.memory_bytes as usize,
            denied: false,
        },
        tools: input.tools,
        calls: 0,
        max_calls: limits.max_tool_calls,
        requests: Some(requests),
        reply: Vec::new(),
        console: Vec::new(),
        output_bytes: 0,
        max_output: limits.max_output_bytes as usize,
        result: None,
        stop: None,
        exit_code: None,
        now_ns: (input.now_ms.max(0) as u64).saturating_mul(1_000_000),
        deadline: std::time::Instant::now() + std::time::Duration::from_millis(limits.wall_ms),
        wall_message: limits.wall_time_message(),
        seed: input.seed,
        random_counter: 0,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store
        .set_fuel(limits.fuel)
        .map_err(|e| SandboxError::Run(e.to_string()))?;
    store.set_epoch_deadline(Sandbox::deadline_ticks(limits.wall_ms));
    store.epoch_deadline_trap();
    let ran = pre
        .instantiate(&mut store)
        .and_then(|instance| instance.get_typed_func::<(), ()>(&mut store, "_start"))
        .and_then(|start| start.call(&mut store, ()));
    let fuel_used = limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
    let mut state = store.into_data();
    // The async side stops waiting for calls once the sender is gone.
    state.requests = None;
    let result = classify(ran, &mut state, &limits);
    Ok(RunOutcome {
        result,
        console: state.console,
        tool_calls: state.calls,
        fuel_used,
    })
}

fn limit(limit: LimitKind, message: String) -> ProgramError {
    ProgramError::Limit { limit, message }
}

fn classify(
    ran: wasmtime::Result<()>,
    state: &mut State,
    limits: &Limits,
) -> Result<Value, ProgramError> {
    if let Some(stop) = state.stop.take() {
        return Err(stop);
    }
    if let Err(e) = ran {
        let exited_cleanly = state.exit_code == Some(0);
        if !exited_cleanly {
            return Err(match e.downcast_ref::<Trap>() {
                Some(Trap::OutOfFuel) => limit(
                    LimitKind::Fuel,
                    format!(
                        "the program used its whole CPU budget ({} fuel); it may loop forever",
                        limits.fuel
                    ),
                ),
                Some(Trap::Interrupt) => limit(LimitKind::WallTime, limits.wall_time_message()),
                Some(Trap::StackOverflow) => limit(
                    LimitKind::Stack,
                    "the program overflowed the stack (too deep recursion)".into(),
                ),
                _ if state.limiter.denied => limit(
                    LimitKind::Memory,
                    format!(
                        "the program used more than {} bytes of memory",
                        limits.memory_bytes
                    ),
                ),
                _ => ProgramError::Stopped {
                    code: "code_mode.sandbox_trap".into(),
                    message: format!("the sandbox stopped the program: {e}"),
                },
            });
        }
    }
    let Some(bytes) = state.result.take() else {
        return Err(ProgramError::Stopped {
            code: "code_mode.no_result".into(),
            message: "the program ended without a result".into(),
        });
    };
    let settled: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if settled.get("ok").and_then(Value::as_bool) == Some(true) {
        return Ok(settled.get("value").cloned().unwrap_or(Value::Null));
    }
    let error = settled.get("error").cloned().unwrap_or(Value::Null);
    let text = |key: &str| error.get(key).and_then(Value::as_str).map(str::to_string);
    let name = text("name").unwrap_or_else(|| "Error".into());
    let message = text("message").unwrap_or_default();
    // QuickJS's own limits surface as JavaScript errors; name them as the limits they are.
    if name == "InternalError" && message.contains("out of memory") {
        return Err(limit(
            LimitKind::Memory,
            format!(
                "the program used more than {} bytes of memory",
                limits.memory_bytes
            ),
        ));
    }
    if name == "RangeError" && message.contains("stack") {
        return Err(limit(
            LimitKind::Stack,
            "the program overflowed the stack (too deep recursion)".into(),
        ));
    }
    let code = if name == "ToolError" {
        text("code")
    } else {
        None
    };
    Err(ProgramError::Thrown {
        name,
        message,
        code,
    })
}
