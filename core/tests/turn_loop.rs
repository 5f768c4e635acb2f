//! The Turn loop, run by an in-memory Agent with a scripted model.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/scripts.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use openbot_core::Agent;
use openbot_core::tool::{FnTool, ToolError, ToolOutput};
use openbot_schema::{
    ErrorCategory, EventKind, Limits, Message, ToolDefinition, ToolResult, TurnOutcome, Usage,
};
use serde_json::json;
use support::{Recording, collect_checked, echo_tool, kinds, scripted};

fn tool_results(messages: &[Message]) -> Vec<ToolResult> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { result } => Some(result.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_multi_step_turn_feeds_tool_results_to_the_next_step() {
    let model = Recording::new(scripted(json!([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "ping"}}]},
        {"text": "The tool said ping."}
    ])));
    let agent = Agent::builder(model.clone())
        .tool(echo_tool())
        .build()
        .unwrap();
    let turn = agent.start("call echo");
    let events = collect_checked(turn.observe(0), 0).await;
    let end = turn.wait().await.unwrap();

    assert_eq!(end.outcome, Ok(TurnOutcome::Completed));
    assert_eq!(end.text(), "The tool said ping.");
    assert_eq!(
        kinds(&events),
        [
            "turn_started",
            "model_step_started",
            "tool_call",
            "tool_result",
            "model_step_started",
            "text_delta",
            "turn_ended"
        ]
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let second = &requests[1].messages;
    assert!(
        matches!(second[2].as_ref(), Message::Tool { result } if result.output[0].as_text() == Some("ping"))
    );
    assert_eq!(requests[0].tools[0].name, "echo");
}

#[tokio::test]
async fn parallel_tool_calls_run_at_the_same_time() {
    // Each call waits until both have started; run one after the other they would time out.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let tool = FnTool::new("meet", "", json!({"type": "object"}), move |_, _| {
        let barrier = Arc::clone(&barrier);
        async move {
            tokio::time::timeout(Duration::from_secs(5), barrier.wait())
                .await
                .map_err(|_| ToolError::new("ran alone"))?;
            Ok(ToolOutput::text("met"))
        }
    });
    let model = scripted(json!([
        {"tool_calls": [{"name": "meet", "arguments": {}}, {"name": "meet", "arguments": {}}]},
        {"text": "done"}
    ]));
    let agent = Agent::builder(model).tool(tool).build().unwrap();
    let end = agent.start("go").wait().await.unwrap();
    let results = tool_results(&end.messages);
    assert_eq!(results.len(), 2);
    assert!(
        results
            .iter()
            .all(|r| !r.is_error && r.output[0].as_text() == Some("met"))
    );
    assert_eq!(results[0].call_id, "call_1_1");
    assert_eq!(
        results[1].call_id, "call_1_2",
        "results keep the order of the calls"
    );
}

#[tokio::test]
async fn a_tool_error_goes_back_to_the_model() {
    let failing = FnTool::new("fail", "", json!({"type": "object"}), |_, _| async {
        Err(ToolError::new("the disk is full"))
    });
    let model = Recording::new(scripted(json!([
        {"tool_calls": [{"name": "fail", "arguments": {}}]},
        {"text": "Sorry."}
    ])));
    let agent = Agent::builder(model.clone()).tool(failing).build().unwrap();
    let end = agent.start("go").wait().await.unwrap();
    assert_eq!(end.outcome, Ok(TurnOutcome::Completed));
    let results = tool_results(&end.messages);
    assert!(results[0].is_error);
    assert_eq!(results[0].output[0].as_text(), Some("the disk is full"));
    assert_eq!(
        model.requests().len(),
        2,
        "the model was asked again with the error"
    );
}

#[tokio::test]
async fn invalid_tool_arguments_never_reach_the_handler() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let tool = FnTool::new(
        "weather",
        "",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        move |_, _| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Ok(ToolOutput::text("sunny")) }
        },
    );
    let model = scripted(json!([
        {"tool_calls": [{"name": "weather", "arguments": {"city": 42}}]},
        {"text": "ok"}
    ]));
    let agent = Agent::builder(model).tool(tool).build().unwrap();
    let end = agent.start("go").wait().await.unwrap();
    let results = tool_results(&end.messages);
    assert!(results[0].is_error);
    let text = results[0].output[0].as_text().unwrap();
    assert!(
        text.contains("invalid arguments for tool `weather`") && text.contains("/city"),
        "{text}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(end.outcome, Ok(TurnOutcome::Completed));
}

#[tokio::test]
async fn an_unknown_tool_and_a_panicking_tool_become_error_results() {
    let panicking = FnTool::new("boom", "", json!({"type": "object"}), |_, _| async {
        if true {
            panic!("handler bug");
        }
        Ok(ToolOutput::text(""))
    });
    let model = scripted(json!([
        {"tool_calls": [{"name": "nope", "arguments": {}}, {"name": "boom", "arguments": {}}]},
        {"text": "ok"}
    ]));
    let agent = Agent::builder(model).tool(panicking).build().unwrap();
    let end = agent.start("go").wait().await.unwrap();
    let results = tool_results(&end.messages);
    assert!(
        results[0].is_error
            && results[0].output[0]
                .as_text()
                .unwrap()
                .contains("unknown tool `nope`")
    );
    assert!(
        results[1].is_error
            && results[1].output[0]
                .as_text()
                .unwrap()
                .contains("failed unexpectedly")
    );
    assert_eq!(end.outcome, Ok(TurnOutcome::Completed));
}

#[tokio::test]
async fn the_step_limit_ends_the_turn() {
    let model = scripted(
        json!({"steps": [{"tool_calls": [{"name": "echo", "arguments": {"text": "again"}}]}], "repeat": true}),
    );
    let agent = Agent::builder(model.clone())
        .tool(echo_tool())
        .limits(Limits {
            max_steps: Some(3),
            ..Limits::default()
        })
        .build()
        .unwrap();
    let turn = agent.start("loop");
    let events = collect_checked(turn.observe(0), 0).await;
    let end = turn.wait().await.unwrap();
    assert_eq!(end.outcome, Ok(TurnOutcome::MaxSteps));
    assert_eq!(model.requests(), 3, "no fourth request was sent");
    assert!(matches!(
        events.last().unwrap().kind,
        EventKind::TurnEnded {
            outcome: TurnOutcome::MaxSteps,
            ..
        }
    ));
}

#[tokio::test]
async fn the_time_limit_ends_the_turn_during_a_slow_tool() {
    let slow = FnTool::new("slow", "", json!({"type": "object"}), |_, ctx| async move {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(30)) => Ok(ToolOutput::text("late")),
            _ = ctx.cancel.cancelled() => Err(ToolError::new("stopped")),
        }
    });
    let model =
        scripted(json!([{"tool_calls": [{"name": "slow", "arguments": {}}]}, {"text": "never"}]));
    let agent = Agent::builder(model)
        .tool(slow)
        .limits(Limits {
            max_wall_time_ms: Some(200),
            ..Limits::default()
        })
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let end = agent.start("go").wait().await.unwrap();
    assert_eq!(end.outcome, Ok(TurnOutcome::MaxTime));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the limit cut the slow tool short"
    );
}

#[tokio::test]
async fn the_cost_limit_stops_before_the_next_send() {
    let costly = json!({"input_tokens": 100, "output_tokens": 10, "cost_micros": 600});
    let model = scripted(json!({"steps": [
        {"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}], "usage": costly}
    ], "repeat": true}));
    let agent = Agent::builder(model.clone())
        .tool(echo_tool())
        .limits(Limits {
            max_cost_micros: Some(1000),
            ..Limits::default()
        })
        .build()
        .unwrap();
    let end = agent.start("go").wait().await.unwrap();
    assert_eq!(end.outcome, Ok(TurnOutcome::MaxCost));
    assert_eq!(
        model.requests(),
        2,
        "600 + 600 reached 1000; the third send never happened"
    );
    assert_eq!(end.usage.cost_micros, Some(1200));
}

#[tokio::test]
async fn cancelling_mid_stream_ends_the_turn_as_cancelled() {
    let model = scripted(json!([{"deltas": ["a", "b", "c", "d", "e", "f"], "delay_ms": 200}]));
    let agent = Agent::builder(model).build().unwrap();
    let turn = agent.start("go");
    let mut events = turn.observe(0);
    while let Some(event) = events.next().await {
        if matches!(event.kind, EventKind::TextDelta { .. }) {
            turn.cancel();
            break;
        }
    }
    let end = turn.wait().await.unwrap();
    assert_eq!(end.outcome, Ok(TurnOutcome::Cancelled));
}

#[tokio::test]
async fn a_broken_stream_is_retried_as_a_new_attempt_with_fresh_text() {
    let model = scripted(json!([
        {"deltas": ["Hel"], "error": "interrupted"},
        {"deltas": ["Hello", " again"]}
    ]));
    let agent = Agent::builder(model).build().unwrap();
    let turn = agent.start("go");
    let events = collect_checked(turn.observe(0), 0).await;
    let end = turn.wait().await.unwrap();
    let starts: Vec<(u32, u32)> = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::ModelStepStarted { step, attempt } => Some((step, attempt)),
            _ => None,
        })
        .collect();
    assert_eq!(starts, [(1, 1), (1, 2)]);
    let second_attempt: String = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TextDelta {
                attempt: 2, text, ..
            } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(second_attempt, "Hello again");
    assert_eq!(
        end.text(),
        "Hello again",
        "the broken attempt's text is not joined"
    );
}

#[tokio::test]
async fn a_provider_failure_fails_the_turn_with_a_sealed_cause() {
    let model = scripted(json!([{"error": "unauthorized"}]));
    let agent = Agent::builder(model).build().unwrap();
    let turn = agent.start("go");
    let events = collect_checked(turn.observe(0), 0).await;
    let end = turn.wait().await.unwrap();
    assert!(end.outcome.is_err());
    let EventKind::Failed { category, error_id } = events.last().unwrap().kind.clone() else {
        panic!("the last event is the failure");
    };
    assert_eq!(category, ErrorCategory::ModelProvider);
    let cause = agent.sealed_errors().open(error_id).unwrap();
    assert!(cause.contains("rejected the credentials"), "{cause}");
    let public = serde_json::to_string(&events).unwrap();
    assert!(
        !public.contains("rejected the credentials"),
        "the cause stays out of events"
    );
}

#[tokio::test]
async fn observing_from_a_cursor_after_the_end_reads_the_rest_and_stops() {
    let agent = Agent::builder(scripted(json!([{"text": "hi"}])))
        .build()
        .unwrap();
    let turn = agent.start("go");
    let all = collect_checked(turn.observe(0), 0).await;
    let last = all.last().unwrap().sequence;
    assert!(collect_checked(turn.observe(last), last).await.is_empty());
    let tail = collect_checked(turn.observe(last - 2), last - 2).await;
    assert_eq!(tail.len(), 2);
    assert_eq!(tail, all[all.len() - 2..]);
    assert!(
        collect_checked(turn.observe(last + 10), last + 10)
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn a_slow_observer_never_holds_up_the_turn_and_misses_nothing() {
    let deltas: Vec<String> = (0..300).map(|i| format!("{i} ")).collect();
    let agent = Agent::builder(scripted(json!([{"deltas": deltas}])))
        .build()
        .unwrap();
    let turn = agent.start("go");
    let mut slow = turn.observe(0);
    let first = slow.next().await.unwrap();
    assert_eq!(first.sequence, 1);
    // The Turn ends while the reader has read one event.
    let end = turn.wait().await.unwrap();
    assert_eq!(end.outcome, Ok(TurnOutcome::Completed));
    let mut expected = 2;
    while let Some(event) = slow.next().await {
        assert_eq!(event.sequence, expected);
        expected += 1;
        if expected % 50 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    assert_eq!(
        expected - 1,
        1 + 1 + 300 + 1,
        "started, step, 300 deltas, ended"
    );
}

#[tokio::test]
async fn a_host_tool_waits_for_the_callers_result() {
    let weather = ToolDefinition {
        name: "weather".into(),
        description: "Current weather.".into(),
        input_schema: json!({"type": "object"}),
    };
    let model = scripted(json!([
        {"tool_calls": [{"id": "w1", "name": "weather", "arguments": {}}]},
        {"text": "It is sunny."}
    ]));
    let agent = Agent::builder(model).host_tool(weather).build().unwrap();
    let turn = agent.start("weather?");
    let mut events = turn.observe(0);
    let call = loop {
        if let EventKind::ToolCall { call, .. } = events.next().await.unwrap().kind {
            break call;
        }
    };
    turn.deliver(ToolResult::text(&call, "sunny")).unwrap();
    let again = turn.deliver(ToolResult::text(&call, "sunny"));
    assert!(again.is_err(), "a result is delivered once");
    let end = turn.wait().await.unwrap();
    assert_eq!(end.text(), "It is sunny.");
    assert_eq!(
        tool_results(&end.messages)[0].output[0].as_text(),
        Some("sunny")
    );
}

#[tokio::test]
async fn turn_usage_adds_up_every_step() {
    let usage = json!({"input_tokens": 7, "output_tokens": 3});
    let model = scripted(json!([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}], "usage": usage},
        {"text": "ok", "usage": usage}
    ]));
    let agent = Agent::builder(model).tool(echo_tool()).build().unwrap();
    let end = agent.start("go").wait().await.unwrap();
    assert_eq!(
        end.usage,
        Usage {
            input_tokens: 14,
            output_tokens: 6,
            ..Usage::default()
        }
    );
}

#[tokio::test]
async fn an_invalid_tool_definition_is_refused_when_the_agent_is_built() {
    let bad = ToolDefinition {
        name: "bad name".into(),
        description: String::new(),
        input_schema: json!({}),
    };
    let err = Agent::builder(scripted(json!([])))
        .host_tool(bad)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("bad name"));
}

/// A host over the in-memory one whose steering works as the durable host's (a step's input is
/// the same on replay; a step that finds nothing is marked by its model request's sending; the
/// input closes only at the end): its first end is refused because input arrived after the
/// last check, as the durable host's end commit refuses it.
struct EndRace {
    inner: openbot_core::memory::MemoryHost,
    pending: std::sync::Mutex<Vec<Vec<openbot_schema::ContentPart>>>,
    taken: std::sync::Mutex<std::collections::HashMap<u32, Vec<Vec<openbot_schema::ContentPart>>>>,
    refused: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl openbot_core::turn::Host for EndRace {
    fn execution_id(&self) -> openbot_schema::ExecutionId {
        self.inner.execution_id()
    }
    fn cancellation(&self) -> tokio_util::sync::CancellationToken {
        self.inner.cancellation()
    }
    fn started_at(&self) -> std::time::SystemTime {
        self.inner.started_at()
    }
    async fn saved_call(
        &self,
        step: u32,
        slot: openbot_core::turn::CallSlot,
    ) -> Result<Option<openbot_core::turn::CallRecord>, openbot_core::turn::HostError> {
        self.inner.saved_call(step, slot).await
    }
    async fn record_intent(
        &self,
        key: openbot_core::turn::CallKey,
    ) -> Result<(), openbot_core::turn::HostError> {
        self.inner.record_intent(key).await
    }
    async fn record_sending(
        &self,
        key: openbot_core::turn::CallKey,
        events: Vec<EventKind>,
    ) -> Result<(), openbot_core::turn::HostError> {
        if key.slot == openbot_core::turn::CallSlot::Model {
            self.taken.lock().unwrap().entry(key.step).or_default();
        }
        self.inner.record_sending(key, events).await
    }
    async fn record_result(
        &self,
        key: openbot_core::turn::CallKey,
        result: openbot_core::turn::CallResult,
        events: Vec<EventKind>,
    ) -> Result<(), openbot_core::turn::HostError> {
        self.inner.record_result(key, result, events).await
    }
    async fn publish(&self, event: EventKind) -> Result<(), openbot_core::turn::HostError> {
        self.inner.publish(event).await
    }
    async fn take_steering(
        &self,
        step: u32,
        _last: bool,
    ) -> Result<Vec<Vec<openbot_schema::ContentPart>>, openbot_core::turn::HostError> {
        // As the durable host: a step that finds nothing writes nothing; its model request's
        // sending marks it (`record_sending`).
        let mut taken = self.taken.lock().unwrap();
        if let Some(input) = taken.get(&step) {
            return Ok(input.clone());
        }
        let input = std::mem::take(&mut *self.pending.lock().unwrap());
        if !input.is_empty() {
            taken.insert(step, input.clone());
        }
        Ok(input)
    }
    async fn wait_for_delivery(
        &self,
        key: openbot_core::turn::CallKey,
        call: &openbot_schema::ToolCall,
    ) -> Result<ToolResult, openbot_core::turn::HostError> {
        self.inner.wait_for_delivery(key, call).await
    }
    async fn finish(
        &self,
        end: openbot_core::turn::TurnEnd,
    ) -> Result<(), openbot_core::turn::HostError> {
        if !self.refused.swap(true, Ordering::SeqCst) {
            self.pending
                .lock()
                .unwrap()
                .push(vec![openbot_schema::ContentPart::text("one more thing")]);
            return Err(openbot_core::turn::HostError::InputArrived);
        }
        self.inner.finish(end).await
    }
}

#[tokio::test]
async fn input_that_arrives_as_the_turn_ends_is_taken_by_a_replay_of_the_saved_steps() {
    use openbot_core::memory::{MemoryHost, SealedErrors};
    use openbot_core::turn::{ToolSet, TurnSpec, run_turn};
    let model = Recording::new(scripted(json!([
        {"text": "first answer"},
        {"text": "second answer"}
    ])));
    let inner = MemoryHost::new(MemoryHost::new_execution(None), SealedErrors::default());
    inner.start(vec![openbot_schema::ContentPart::text("hello")]);
    let host = EndRace {
        inner,
        pending: Default::default(),
        taken: Default::default(),
        refused: Default::default(),
    };
    let spec = TurnSpec {
        instructions: String::new(),
        model: model.clone(),
        tools: Arc::new(ToolSet::new()),
        limits: Limits::default(),
        history: Vec::new(),
        input: vec![openbot_schema::ContentPart::text("hello")],
        max_output_tokens: None,
    };
    let end = run_turn(spec, &host).await.unwrap();
    assert_eq!(end.outcome, Ok(TurnOutcome::Completed));
    assert_eq!(
        model.requests().len(),
        2,
        "the saved first answer is replayed, not asked for again"
    );
    let texts: Vec<String> = end
        .messages
        .iter()
        .map(|m| match m {
            Message::User { content } => format!("user: {}", content[0].as_text().unwrap()),
            Message::Assistant { content, .. } => {
                format!("assistant: {}", content[0].as_text().unwrap())
            }
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        texts,
        [
            "user: hello",
            "assistant: first answer",
            "user: one more thing",
            "assistant: second answer"
        ]
    );
}
