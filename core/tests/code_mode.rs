//! Code Mode in a Turn: the model sees one `run_code` tool declaring the tools as TypeScript,
//! its program's calls go through the call log, and a run that stopped midway replays from
//! the saved calls.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/scripts.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use openbot_core::memory::{MemoryHost, SealedErrors};
use openbot_core::tool::{FnTool, ToolOutput};
use openbot_core::turn::{
    CODE_TOOL, CallKey, CallRecord, CallResult, CallSlot, CallStatus, Host, HostError, ToolSet,
    TurnEnd, TurnSpec, run_turn,
};
use openbot_core::{Agent, codemode};
use openbot_schema::{
    ContentPart, EventKind, ExecutionId, Limits, Message, ToolCall, ToolResult, TurnOutcome,
};
use serde_json::{Value, json};
use support::{Recording, scripted};
use tokio_util::sync::CancellationToken;

const PROGRAM: &str = "const a = await tools.add({a: 1, b: 2}); \
                       const b = await tools.add({a: a, b: 10}); \
                       console.log('sums', a, b); return {a, b};";

/// `add` counts how often its handler really runs.
fn add_tool(runs: Arc<AtomicUsize>) -> FnTool {
    FnTool::new(
        "add",
        "Adds two numbers.",
        json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
               "required": ["a", "b"]}),
        move |args, _| {
            let runs = Arc::clone(&runs);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                let sum = args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
                Ok(ToolOutput::text(sum.to_string()))
            }
        },
    )
}

fn code_answer(code: &str) -> Value {
    json!([
        {"tool_calls": [{"name": "run_code", "arguments": {"code": code}}]},
        {"text": "done"}
    ])
}

fn code_result(end: &TurnEnd) -> Value {
    let result = end
        .messages
        .iter()
        .find_map(|m| match m {
            Message::Tool { result } if result.name == CODE_TOOL => Some(result.clone()),
            _ => None,
        })
        .expect("a run_code result");
    serde_json::from_str(result.output[0].as_text().unwrap()).unwrap()
}

fn spec(code: &str, runs: Arc<AtomicUsize>) -> TurnSpec {
    let mut tools = ToolSet::new();
    tools.add(Arc::new(add_tool(runs))).unwrap();
    tools.enable_code_mode(codemode::Limits::default());
    TurnSpec {
        instructions: String::new(),
        model: scripted(code_answer(code)),
        tools: Arc::new(tools),
        limits: Limits::default(),
        history: Vec::new(),
        input: vec![ContentPart::text("add things")],
        max_output_tokens: None,
    }
}

#[tokio::test]
async fn the_model_sees_one_code_tool_declaring_the_tools_and_its_program_calls_them() {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = Recording::new(scripted(code_answer(PROGRAM)));
    let agent = Agent::builder(model.clone())
        .tool(add_tool(Arc::clone(&runs)))
        .code_mode(codemode::Limits::default())
        .build()
        .unwrap();
    let turn = agent.start("add things");
    let end = turn.wait().await.unwrap();
    assert_eq!(end.outcome, Ok(TurnOutcome::Completed));
    let tools = &model.requests()[0].tools;
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, CODE_TOOL);
    assert!(
        tools[0].description.contains("add(args: {"),
        "{}",
        tools[0].description
    );
    assert!(
        tools[0].description.contains("a: number;"),
        "{}",
        tools[0].description
    );
    let result = code_result(&end);
    assert_eq!(result["ok"], json!(true), "{result}");
    assert_eq!(result["value"], json!({"a": 3, "b": 13}));
    assert_eq!(result["console"][0]["text"], json!("sums 3 13"));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_direct_call_of_a_tool_is_refused_with_code_mode_on() {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = scripted(json!([
        {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
        {"text": "done"}
    ]));
    let agent = Agent::builder(model)
        .tool(add_tool(Arc::clone(&runs)))
        .code_mode(codemode::Limits::default())
        .build()
        .unwrap();
    let end = agent.start("add").wait().await.unwrap();
    let refused = end
        .messages
        .iter()
        .any(|m| matches!(m, Message::Tool { result } if result.is_error));
    assert!(refused);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn invalid_arguments_from_code_never_reach_the_handler() {
    let runs = Arc::new(AtomicUsize::new(0));
    let code = "try { await tools.add({a: 'one'}); } catch (e) { return [e.name, e.code]; }";
    let host = memory_host();
    let end = run_turn(spec(code, Arc::clone(&runs)), &host)
        .await
        .unwrap();
    assert_eq!(
        code_result(&end)["value"],
        json!(["ToolError", "tool.error"])
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

fn memory_host() -> MemoryHost {
    MemoryHost::new(MemoryHost::new_execution(None), SealedErrors::default())
}

/// Stops (as a fenced owner does) at the first write that matches.
struct StopAt<'a> {
    inner: &'a MemoryHost,
    /// How much later than the inner host's its start reads (as after a pause, whose time
    /// moves the start a time limit counts from).
    later_ms: u64,
    sending: Option<CallSlot>,
    result: Option<CallSlot>,
}

#[async_trait]
impl Host for StopAt<'_> {
    fn execution_id(&self) -> ExecutionId {
        self.inner.execution_id()
    }
    fn cancellation(&self) -> CancellationToken {
        self.inner.cancellation()
    }
    fn started_at(&self) -> std::time::SystemTime {
        self.inner.started_at() + std::time::Duration::from_millis(self.later_ms)
    }
    async fn saved_call(&self, step: u32, slot: CallSlot) -> Result<Option<CallRecord>, HostError> {
        self.inner.saved_call(step, slot).await
    }
    async fn record_intent(&self, key: CallKey) -> Result<(), HostError> {
        self.inner.record_intent(key).await
    }
    async fn record_sending(&self, key: CallKey, events: Vec<EventKind>) -> Result<(), HostError> {
        if Some(key.slot) == self.sending {
            return Err(HostError::Fenced);
        }
        self.inner.record_sending(key, events).await
    }
    async fn record_result(
        &self,
        key: CallKey,
        result: CallResult,
        events: Vec<EventKind>,
    ) -> Result<(), HostError> {
        if Some(key.slot) == self.result {
            return Err(HostError::Fenced);
        }
        self.inner.record_result(key, result, events).await
    }
    async fn publish(&self, event: EventKind) -> Result<(), HostError> {
        self.inner.publish(event).await
    }
    async fn take_steering(
        &self,
        step: u32,
        last: bool,
    ) -> Result<Vec<Vec<ContentPart>>, HostError> {
        self.inner.take_steering(step, last).await
    }
    async fn wait_for_delivery(
        &self,
        key: CallKey,
        call: &ToolCall,
    ) -> Result<ToolResult, HostError> {
        self.inner.wait_for_delivery(key, call).await
    }
    async fn finish(&self, end: TurnEnd) -> Result<(), HostError> {
        self.inner.finish(end).await
    }
}

#[tokio::test]
async fn a_run_stopped_midway_replays_its_saved_calls_and_runs_only_the_rest() {
    let runs = Arc::new(AtomicUsize::new(0));
    let host = memory_host();
    let second = CallSlot::Code { tool: 0, call: 1 };
    let stopped = StopAt {
        inner: &host,
        later_ms: 0,
        sending: Some(second),
        result: None,
    };
    let err = run_turn(spec(PROGRAM, Arc::clone(&runs)), &stopped)
        .await
        .unwrap_err();
    assert_eq!(err, HostError::Fenced);
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // The next owner: the first call's saved result is replayed, the second runs once.
    let end = run_turn(spec(PROGRAM, Arc::clone(&runs)), &host)
        .await
        .unwrap();
    assert_eq!(end.outcome, Ok(TurnOutcome::Completed));
    assert_eq!(code_result(&end)["value"], json!({"a": 3, "b": 13}));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_call_sent_before_the_owner_stopped_is_outcome_unknown_on_replay() {
    let runs = Arc::new(AtomicUsize::new(0));
    let host = memory_host();
    let second = CallSlot::Code { tool: 0, call: 1 };
    let stopped = StopAt {
        inner: &host,
        later_ms: 0,
        sending: None,
        result: Some(second),
    };
    run_turn(spec(PROGRAM, Arc::clone(&runs)), &stopped)
        .await
        .unwrap_err();
    let err = run_turn(spec(PROGRAM, Arc::clone(&runs)), &host)
        .await
        .unwrap_err();
    assert!(
        matches!(err, HostError::OutcomeUnknown { key } if key.slot == second),
        "{err:?}"
    );
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "the lost call is never sent again"
    );
}

#[tokio::test]
async fn a_stale_owner_cannot_save_the_runs_result() {
    let runs = Arc::new(AtomicUsize::new(0));
    let host = memory_host();
    let stopped = StopAt {
        inner: &host,
        later_ms: 0,
        sending: None,
        result: Some(CallSlot::Tool(0)),
    };
    assert_eq!(
        run_turn(spec(PROGRAM, Arc::clone(&runs)), &stopped)
            .await
            .unwrap_err(),
        HostError::Fenced
    );
    let saved = host.saved_call(1, CallSlot::Tool(0)).await.unwrap();
    assert!(
        !matches!(
            saved,
            Some(CallRecord {
                status: CallStatus::Done { .. },
                ..
            })
        ),
        "{saved:?}"
    );
    // Both calls are saved: the next owner replays them and sends nothing again.
    let end = run_turn(spec(PROGRAM, Arc::clone(&runs)), &host)
        .await
        .unwrap();
    assert_eq!(code_result(&end)["value"], json!({"a": 3, "b": 13}));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_program_that_asks_for_another_call_than_the_saved_one_fails_the_call_order_check() {
    let runs = Arc::new(AtomicUsize::new(0));
    let host = memory_host();
    // A saved first call for other arguments (as if the program had changed between runs).
    let other = ToolCall {
        id: openbot_core::turn::code_call_id("x", 0, "add", &json!({"a": 5, "b": 5})),
        name: "add".into(),
        arguments: json!({"a": 5, "b": 5}),
    };
    let key = CallKey {
        step: 1,
        slot: CallSlot::Code { tool: 0, call: 0 },
        attempt: 1,
    };
    host.record_result(
        key,
        CallResult::Tool {
            result: ToolResult::text(&other, "10"),
        },
        vec![],
    )
    .await
    .unwrap();
    let end = run_turn(spec(PROGRAM, Arc::clone(&runs)), &host)
        .await
        .unwrap();
    let result = code_result(&end);
    assert_eq!(result["ok"], json!(false), "{result}");
    assert_eq!(
        result["error"]["code"],
        json!("code_mode.call_order"),
        "{result}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_same_call_draws_the_same_time_and_random_numbers_on_replay() {
    let code = "return [Date.now(), Math.random()];";
    let host = memory_host();
    let stopped = StopAt {
        inner: &host,
        later_ms: 0,
        sending: None,
        result: Some(CallSlot::Tool(0)),
    };
    let runs = Arc::new(AtomicUsize::new(0));
    run_turn(spec(code, Arc::clone(&runs)), &stopped)
        .await
        .unwrap_err();
    let first = run_turn(spec(code, Arc::clone(&runs)), &host)
        .await
        .unwrap();
    let again = memory_host();
    let other = run_turn(spec(code, Arc::clone(&runs)), &again)
        .await
        .unwrap();
    let value = code_result(&first)["value"].clone();
    let started = host
        .started_at()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert_eq!(value[0], json!(started));
    // Another execution is another identity: another seed.
    assert_ne!(code_result(&other)["value"][1], value[1]);
}

#[tokio::test]
async fn a_program_run_again_after_its_start_moved_sees_its_saved_time() {
    // The program passes its time to its calls: a moved clock would ask for other calls than
    // the saved ones and end with `code_mode.call_order`.
    let code = "const t = Date.now(); const a = await tools.add({a: t, b: 0}); \
                const b = await tools.add({a: t, b: 1}); return [t, a, b];";
    let runs = Arc::new(AtomicUsize::new(0));
    let host = memory_host();
    let stopped = StopAt {
        inner: &host,
        later_ms: 0,
        sending: Some(CallSlot::Code { tool: 0, call: 1 }),
        result: None,
    };
    run_turn(spec(code, Arc::clone(&runs)), &stopped)
        .await
        .unwrap_err();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // Run again with a start that reads 5 s later (a pause, a takeover's limit start).
    let moved = StopAt {
        inner: &host,
        later_ms: 5_000,
        sending: None,
        result: None,
    };
    let end = run_turn(spec(code, Arc::clone(&runs)), &moved)
        .await
        .unwrap();
    let result = code_result(&end);
    assert_eq!(result["ok"], json!(true), "{result}");
    let started = host
        .started_at()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert_eq!(
        result["value"][0],
        json!(started),
        "the time saved at the first start"
    );
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "the first call replayed, the second ran once"
    );
}
