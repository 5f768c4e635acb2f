//! The Client in its in-memory mode: Bots, Chats, input order, steering, stop and delete.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/scripts.rs"]
mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use openbot_core::model::Model;
use openbot_core::{Client, ConnectOptions, connect};
use openbot_schema::{
    BotSpec, BotUpdate, ChatId, ContentPart, ErrorCode, Event, EventKind, ExecutionId,
    ExecutionState, Limits, Message, SendDisposition, SendInput, ToolDefinition, ToolResult,
    TurnOutcome,
};
use serde_json::json;
use support::{Recording, echo_tool, scripted};

async fn client_with(model: Arc<dyn Model>) -> Arc<dyn Client> {
    let options = ConnectOptions {
        tools: vec![Arc::new(echo_tool())],
        models: HashMap::from([("test".to_string(), model)]),
        ..ConnectOptions::default()
    };
    connect("memory://", options).await.unwrap()
}

fn bot(tools: Vec<ToolDefinition>) -> BotSpec {
    BotSpec {
        name: "Helper".into(),
        instructions: "Be brief.".into(),
        model: "test".into(),
        tools,
        limits: Limits::default(),
        shared: false,
        memory: false,
        reminders: false,
        code_mode: false,
    }
}

async fn chat(client: &Arc<dyn Client>, tools: Vec<ToolDefinition>) -> ChatId {
    let bot = client.create_bot(bot(tools)).await.unwrap();
    client.create_chat(bot.id).await.unwrap().id
}

async fn events(client: &Arc<dyn Client>, id: ExecutionId) -> Vec<Event> {
    client
        .observe(id, 0)
        .await
        .unwrap()
        .map(|e| e.unwrap())
        .collect()
        .await
}

fn outcome(events: &[Event]) -> Option<TurnOutcome> {
    match events.last()?.kind {
        EventKind::TurnEnded { outcome, .. } => Some(outcome),
        _ => None,
    }
}

/// A model whose answers take a while, so a Turn is still running when more input comes.
fn slow_answers(n: usize) -> serde_json::Value {
    let steps: Vec<_> = (0..n)
        .map(|i| json!({"deltas": [format!("answer {i}")], "delay_ms": 150}))
        .collect();
    json!(steps)
}

#[tokio::test]
async fn a_sent_input_starts_a_turn_whose_answer_lands_in_the_history() {
    let client = client_with(scripted(json!([{"text": "Hello!"}]))).await;
    let chat = chat(&client, Vec::new()).await;
    let receipt = client.send(chat, SendInput::text("Hi")).await.unwrap();
    assert_eq!(receipt.disposition, SendDisposition::Started);
    let events = events(&client, receipt.execution_id).await;
    assert_eq!(outcome(&events), Some(TurnOutcome::Completed));
    let history = client.history(chat).await.unwrap();
    let messages: Vec<Message> = history.iter().map(|e| e.message.clone()).collect();
    assert_eq!(
        messages,
        vec![Message::user("Hi"), Message::assistant("Hello!")]
    );
    let execution = client.get_execution(receipt.execution_id).await.unwrap();
    assert_eq!(execution.state, ExecutionState::Completed);
    assert_eq!(execution.last_sequence, events.last().unwrap().sequence);
}

#[tokio::test]
async fn the_next_turn_sees_the_earlier_conversation() {
    let model = Recording::new(scripted(json!([{"text": "one"}, {"text": "two"}])));
    let client = client_with(model.clone()).await;
    let chat = chat(&client, Vec::new()).await;
    let first = client.send(chat, SendInput::text("first")).await.unwrap();
    events(&client, first.execution_id).await;
    let second = client.send(chat, SendInput::text("second")).await.unwrap();
    events(&client, second.execution_id).await;
    let request = &model.requests()[1];
    assert_eq!(request.instructions, "Be brief.");
    let messages: Vec<Message> = request.messages.iter().map(|m| Message::clone(m)).collect();
    assert_eq!(
        messages,
        vec![
            Message::user("first"),
            Message::assistant("one"),
            Message::user("second")
        ]
    );
}

#[tokio::test]
async fn a_retried_command_key_returns_the_same_receipt() {
    let client = client_with(scripted(json!([{"text": "once"}]))).await;
    let chat = chat(&client, Vec::new()).await;
    let input = SendInput::text("Hi").with_command_key("req-1");
    let first = client.send(chat, input.clone()).await.unwrap();
    let again = client.send(chat, input).await.unwrap();
    assert_eq!(first, again);
    events(&client, first.execution_id).await;
    assert_eq!(
        client.history(chat).await.unwrap().len(),
        2,
        "one Turn, not two"
    );
}

#[tokio::test]
async fn a_command_key_reused_with_other_input_is_a_conflict() {
    let client = client_with(scripted(json!([{"text": "once"}]))).await;
    let chat = chat(&client, Vec::new()).await;
    client
        .send(chat, SendInput::text("Hi").with_command_key("req-1"))
        .await
        .unwrap();
    let err = client
        .send(chat, SendInput::text("Other").with_command_key("req-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
}

#[tokio::test]
async fn input_sent_while_a_turn_runs_waits_for_its_own_turn_in_order() {
    let client = client_with(scripted(slow_answers(3))).await;
    let chat = chat(&client, Vec::new()).await;
    let first = client.send(chat, SendInput::text("a")).await.unwrap();
    let second = client.send(chat, SendInput::text("b")).await.unwrap();
    let third = client.send(chat, SendInput::text("c")).await.unwrap();
    assert_eq!(second.disposition, SendDisposition::Queued);
    assert_eq!(third.disposition, SendDisposition::Queued);
    assert_eq!(
        client
            .get_execution(third.execution_id)
            .await
            .unwrap()
            .state,
        ExecutionState::Queued
    );
    for receipt in [&first, &second, &third] {
        assert_eq!(
            outcome(&events(&client, receipt.execution_id).await),
            Some(TurnOutcome::Completed)
        );
    }
    let texts: Vec<String> = client
        .history(chat)
        .await
        .unwrap()
        .iter()
        .map(|e| e.message.text())
        .collect();
    assert_eq!(texts, ["a", "answer 0", "b", "answer 1", "c", "answer 2"]);
}

#[tokio::test]
async fn steering_input_joins_the_running_turn() {
    let model = Recording::new(scripted(json!([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}], "delay_ms": 200},
        {"text": "saw both"}
    ])));
    let client = client_with(model.clone()).await;
    let echo = echo_tool();
    let chat = chat(
        &client,
        vec![openbot_core::tool::Tool::definition(&echo).clone()],
    )
    .await;
    let first = client.send(chat, SendInput::text("start")).await.unwrap();
    let steered = client
        .steer(chat, SendInput::text("also this"))
        .await
        .unwrap();
    assert_eq!(steered.disposition, SendDisposition::Steered);
    assert_eq!(steered.execution_id, first.execution_id);
    let events = events(&client, first.execution_id).await;
    assert!(events.iter().any(|e| matches!(&e.kind, EventKind::InputSteered { input } if input[0].as_text() == Some("also this"))));
    let last_request = model.requests().pop().unwrap();
    assert!(
        last_request
            .messages
            .iter()
            .any(|m| **m == Message::user("also this"))
    );
    assert_eq!(outcome(&events), Some(TurnOutcome::Completed));
}

#[tokio::test]
async fn steering_with_no_running_turn_starts_one() {
    let client = client_with(scripted(json!([{"text": "ok"}]))).await;
    let chat = chat(&client, Vec::new()).await;
    let receipt = client.steer(chat, SendInput::text("hi")).await.unwrap();
    assert_eq!(receipt.disposition, SendDisposition::Started);
}

#[tokio::test]
async fn stop_cancels_the_running_turn_and_the_queue_goes_on() {
    let client = client_with(scripted(slow_answers(2))).await;
    let chat = chat(&client, Vec::new()).await;
    let first = client.send(chat, SendInput::text("a")).await.unwrap();
    let second = client.send(chat, SendInput::text("b")).await.unwrap();
    client.stop(chat).await.unwrap();
    assert_eq!(
        outcome(&events(&client, first.execution_id).await),
        Some(TurnOutcome::Cancelled)
    );
    assert_eq!(
        outcome(&events(&client, second.execution_id).await),
        Some(TurnOutcome::Completed)
    );
    assert_eq!(
        client
            .get_execution(first.execution_id)
            .await
            .unwrap()
            .state,
        ExecutionState::Cancelled
    );
}

#[tokio::test]
async fn deleting_a_chat_cancels_its_turns_and_returns_after_they_ended() {
    let client = client_with(scripted(slow_answers(2))).await;
    let chat = chat(&client, Vec::new()).await;
    let running = client.send(chat, SendInput::text("a")).await.unwrap();
    let queued = client.send(chat, SendInput::text("b")).await.unwrap();
    client.delete_chat(chat).await.unwrap();
    for id in [running.execution_id, queued.execution_id] {
        let execution = client.get_execution(id).await.unwrap();
        assert_eq!(
            execution.state,
            ExecutionState::Cancelled,
            "ended before delete returned"
        );
    }
    let err = client.send(chat, SendInput::text("c")).await.unwrap_err();
    assert_eq!(
        err.code,
        ErrorCode::NotFound,
        "a deleted chat admits nothing"
    );
}

#[tokio::test]
async fn a_host_tool_result_is_delivered_through_the_client() {
    let weather = ToolDefinition {
        name: "weather".into(),
        description: String::new(),
        input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    };
    let client = client_with(scripted(json!([
        {"tool_calls": [{"id": "w1", "name": "weather", "arguments": {"city": "Oslo"}}]},
        {"text": "Sunny in Oslo."}
    ])))
    .await;
    let chat = chat(&client, vec![weather]).await;
    let receipt = client
        .send(chat, SendInput::text("weather?"))
        .await
        .unwrap();
    let mut stream = client.observe(receipt.execution_id, 0).await.unwrap();
    let call = loop {
        if let EventKind::ToolCall { call, .. } = stream.next().await.unwrap().unwrap().kind {
            break call;
        }
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        client
            .get_execution(receipt.execution_id)
            .await
            .unwrap()
            .state,
        ExecutionState::Waiting
    );
    client
        .deliver_tool_result(receipt.execution_id, ToolResult::text(&call, "sunny"))
        .await
        .unwrap();
    let rest: Vec<Event> = stream.map(|e| e.unwrap()).collect().await;
    assert_eq!(outcome(&rest), Some(TurnOutcome::Completed));
    let wrong = ToolResult {
        call_id: "nope".into(),
        ..ToolResult::text(&call, "x")
    };
    let err = client
        .deliver_tool_result(receipt.execution_id, wrong)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
}

#[tokio::test]
async fn a_bot_update_with_a_stale_revision_is_a_conflict() {
    let client = client_with(scripted(json!([]))).await;
    let bot = client.create_bot(bot(Vec::new())).await.unwrap();
    let update = BotUpdate {
        revision: Some(1),
        name: Some("Renamed".into()),
        ..BotUpdate::default()
    };
    let updated = client.update_bot(bot.id, update.clone()).await.unwrap();
    assert_eq!(updated.revision, 2);
    assert_eq!(updated.spec.name, "Renamed");
    let err = client.update_bot(bot.id, update).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
}

#[tokio::test]
async fn bad_input_gets_a_typed_error_and_changes_nothing() {
    let client = client_with(scripted(json!([]))).await;
    let mut spec = bot(Vec::new());
    spec.model = "gpt-4o".into();
    assert_eq!(
        client.create_bot(spec).await.unwrap_err().code,
        ErrorCode::InvalidInput
    );
    let mut spec = bot(vec![ToolDefinition {
        name: "a b".into(),
        description: String::new(),
        input_schema: json!({}),
    }]);
    assert_eq!(
        client.create_bot(spec.clone()).await.unwrap_err().code,
        ErrorCode::InvalidInput
    );
    spec.tools.clear();
    spec.name = " ".into();
    assert_eq!(
        client.create_bot(spec).await.unwrap_err().code,
        ErrorCode::InvalidInput
    );
    assert!(
        client.list_bots().await.unwrap().is_empty(),
        "nothing was half-created"
    );

    let chat = chat(&client, Vec::new()).await;
    let empty = SendInput {
        content: Vec::<ContentPart>::new(),
        command_key: None,
    };
    assert_eq!(
        client.send(chat, empty).await.unwrap_err().code,
        ErrorCode::InvalidInput
    );
    assert_eq!(
        client
            .send(ChatId::new(), SendInput::text("x"))
            .await
            .unwrap_err()
            .code,
        ErrorCode::NotFound
    );
    assert_eq!(
        client
            .get_execution(ExecutionId::new())
            .await
            .unwrap_err()
            .code,
        ErrorCode::NotFound
    );
    assert!(client.history(chat).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_bot_whose_provider_has_no_key_is_refused_at_send() {
    // SAFETY of the test: no other test in this binary reads this variable.
    let client = client_with(scripted(json!([]))).await;
    let mut spec = bot(Vec::new());
    spec.model = "anthropic:claude-test".into();
    let bot = client.create_bot(spec).await.unwrap();
    let chat = client.create_chat(bot.id).await.unwrap();
    if std::env::var("ANTHROPIC_API_KEY").is_ok() {
        return;
    }
    let err = client
        .send(chat.id, SendInput::text("hi"))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidInput);
    assert!(err.message.contains("ANTHROPIC_API_KEY"), "{}", err.message);
    assert!(client.history(chat.id).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_closed_client_refuses_every_call() {
    let client = client_with(scripted(json!([]))).await;
    client.close().await;
    assert_eq!(
        client.list_bots().await.unwrap_err().code,
        ErrorCode::Closed
    );
}

#[tokio::test]
async fn an_unknown_scheme_is_refused() {
    let err = connect("ftp://x", ConnectOptions::default())
        .await
        .err()
        .unwrap();
    assert_eq!(err.code, ErrorCode::InvalidInput);
}

#[tokio::test]
async fn a_bot_with_code_mode_calls_its_tools_from_one_program_in_memory() {
    let model = Recording::new(scripted(json!([
        {"tool_calls": [{"name": "run_code", "arguments": {"code":
            "const a = await tools.echo({text: 'x'}); const b = await tools.echo({text: a + 'y'}); return b;"}}]},
        {"text": "done"}
    ])));
    let client = client_with(model.clone()).await;
    let echo = ToolDefinition {
        name: "echo".into(),
        description: "Repeats the text.".into(),
        input_schema: json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
    };
    let spec = BotSpec {
        code_mode: true,
        ..bot(vec![echo])
    };
    let bot = client.create_bot(spec).await.unwrap();
    assert!(bot.spec.code_mode);
    let chat = client.create_chat(bot.id).await.unwrap().id;
    let receipt = client
        .send(chat, SendInput::text("echo twice"))
        .await
        .unwrap();
    let events = events(&client, receipt.execution_id).await;
    assert_eq!(outcome(&events), Some(TurnOutcome::Completed));
    assert_eq!(model.requests()[0].tools.len(), 1);
    assert_eq!(model.requests()[0].tools[0].name, "run_code");
    let results: Vec<ToolResult> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } => Some(result.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(results.iter().filter(|r| r.name == "echo").count(), 2);
    let code = results.iter().find(|r| r.name == "run_code").unwrap();
    let value: serde_json::Value = serde_json::from_str(code.output[0].as_text().unwrap()).unwrap();
    assert_eq!(value["value"], json!("xy"), "{value}");
}
