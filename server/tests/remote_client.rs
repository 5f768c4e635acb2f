//! The remote Client against a real `openbot serve` process: host tools across clients and
//! restarts, resumable event streams, safe retries, unknown outcomes and the typed errors of a
//! failing server.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/endpoint.rs"]
mod endpoint;
#[path = "support/served.rs"]
mod served;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use openbot_core::tool::{FnTool, SharedTool, ToolOutput};
use openbot_core::{Client, ConnectOptions, connect};
use openbot_schema::{
    BotSpec, ChatId, ErrorCode, EventKind, ExecutionId, Limits, SendInput, ToolDefinition,
    ToolResult, TurnOutcome,
};
use serde_json::json;
use served::Served;

/// A scripted model file that lives as long as the test.
fn script(steps: serde_json::Value) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.json");
    std::fs::write(&path, json!({ "steps": steps }).to_string()).unwrap();
    (dir, format!("scripted:{}", path.display()))
}

async fn client(served: &Served, tools: Vec<SharedTool>) -> Arc<dyn Client> {
    connect(
        &served.base,
        ConnectOptions {
            token: Some(served.token.clone()),
            tools,
            ..ConnectOptions::default()
        },
    )
    .await
    .unwrap()
}

fn bot(model: &str, tools: Vec<ToolDefinition>) -> BotSpec {
    BotSpec {
        name: "Remote".into(),
        instructions: String::new(),
        model: model.into(),
        tools,
        limits: Limits::default(),
        shared: false,
        memory: false,
        reminders: false,
        code_mode: false,
    }
}

fn lookup_definition() -> ToolDefinition {
    ToolDefinition {
        name: "lookup".into(),
        description: "Looks a word up.".into(),
        input_schema: json!({"type": "object"}),
    }
}

/// A `lookup` handler that counts its calls.
fn counting_lookup(calls: Arc<AtomicUsize>) -> SharedTool {
    Arc::new(FnTool::new(
        "lookup",
        "",
        json!({"type": "object"}),
        move |_, _| {
            let calls = Arc::clone(&calls);
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(ToolOutput::text("found"))
            }
        },
    ))
}

/// Reads events until the Turn ends; returns its outcome.
async fn outcome(client: &dyn Client, id: ExecutionId) -> TurnOutcome {
    let mut events = client.observe(id, 0).await.unwrap();
    while let Some(event) = events.next().await {
        if let EventKind::TurnEnded { outcome, .. } = event.unwrap().kind {
            return outcome;
        }
    }
    panic!("the stream ended without turn_ended");
}

/// Waits for the first `tool_call` of an execution; returns its call ID.
async fn first_tool_call(client: &dyn Client, id: ExecutionId) -> String {
    let mut events = client.observe(id, 0).await.unwrap();
    while let Some(event) = events.next().await {
        if let EventKind::ToolCall { call, .. } = event.unwrap().kind {
            return call.id;
        }
    }
    panic!("no tool call");
}

fn tool_call_then_text() -> serde_json::Value {
    json!([
        {"tool_calls": [{"id": "call_1", "name": "lookup", "arguments": {"word": "turn"}}]},
        {"text": "done"}
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_tool_call_left_open_is_answered_by_a_client_that_comes_back() {
    let served = Served::start();
    let (_dir, model) = script(tool_call_then_text());
    let first = client(&served, vec![]).await;
    let bot = first
        .create_bot(bot(&model, vec![lookup_definition()]))
        .await
        .unwrap();
    let chat = first.create_chat(bot.id).await.unwrap();
    let receipt = first
        .send(chat.id, SendInput::text("Look it up"))
        .await
        .unwrap();
    first_tool_call(first.as_ref(), receipt.execution_id).await;
    first.close().await;

    let calls = Arc::new(AtomicUsize::new(0));
    let second = client(&served, vec![counting_lookup(Arc::clone(&calls))]).await;
    assert_eq!(
        outcome(second.as_ref(), receipt.execution_id).await,
        TurnOutcome::Completed
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_delivered_while_the_server_was_down_and_restarted_completes_the_turn() {
    let mut served = Served::start();
    let (_dir, model) = script(tool_call_then_text());
    let client = client(&served, vec![]).await;
    let bot = client
        .create_bot(bot(&model, vec![lookup_definition()]))
        .await
        .unwrap();
    let chat = client.create_chat(bot.id).await.unwrap();
    let receipt = client
        .send(chat.id, SendInput::text("Look it up"))
        .await
        .unwrap();
    let call_id = first_tool_call(client.as_ref(), receipt.execution_id).await;

    served.restart();
    let result = ToolResult {
        call_id,
        name: "lookup".into(),
        output: vec![openbot_schema::ContentPart::text("found")],
        is_error: false,
    };
    client
        .deliver_tool_result(receipt.execution_id, result)
        .await
        .unwrap();
    assert_eq!(
        outcome(client.as_ref(), receipt.execution_id).await,
        TurnOutcome::Completed
    );
    let history = client.history(chat.id).await.unwrap();
    assert_eq!(history.len(), 4, "user, tool call, tool result, answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_for_a_call_that_is_not_open_is_a_conflict() {
    let served = Served::start();
    let (_dir, model) = script(tool_call_then_text());
    let calls = Arc::new(AtomicUsize::new(0));
    let client = client(&served, vec![counting_lookup(calls)]).await;
    let bot = client
        .create_bot(bot(&model, vec![lookup_definition()]))
        .await
        .unwrap();
    let chat = client.create_chat(bot.id).await.unwrap();
    let receipt = client
        .send(chat.id, SendInput::text("Look it up"))
        .await
        .unwrap();
    assert_eq!(
        outcome(client.as_ref(), receipt.execution_id).await,
        TurnOutcome::Completed
    );
    let late = ToolResult {
        call_id: "call_1".into(),
        name: "lookup".into(),
        output: vec![],
        is_error: false,
    };
    let err = client
        .deliver_tool_result(receipt.execution_id, late)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_resumes_after_a_server_restart_without_a_gap_or_a_repeat() {
    let mut served = Served::start();
    let deltas: Vec<String> = (0..30).map(|i| format!("w{i} ")).collect();
    let (_dir, model) = script(json!([{ "deltas": deltas, "delay_ms": 40 }]));
    let client = client(&served, vec![]).await;
    let bot = client.create_bot(bot(&model, vec![])).await.unwrap();
    let chat = client.create_chat(bot.id).await.unwrap();
    let receipt = client.send(chat.id, SendInput::text("Talk")).await.unwrap();

    let mut events = client.observe(receipt.execution_id, 0).await.unwrap();
    let mut sequences = Vec::new();
    let mut restarted = false;
    let mut ended = None;
    while let Some(event) = events.next().await {
        let event = event.unwrap();
        sequences.push(event.sequence);
        if !restarted && matches!(event.kind, EventKind::TextDelta { .. }) {
            served.restart();
            restarted = true;
        }
        if let EventKind::TurnEnded { outcome, .. } = event.kind {
            ended = Some(outcome);
        }
    }
    assert!(restarted);
    assert!(ended.is_some(), "the stream reached the end");
    let expected: Vec<u64> = (1..=sequences.len() as u64).collect();
    assert_eq!(sequences, expected, "every sequence once, in order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_send_with_the_same_command_key_gets_the_same_receipt() {
    let served = Served::start();
    let (_dir, model) = script(json!([{ "text": "once" }]));
    let client = client(&served, vec![]).await;
    let bot = client.create_bot(bot(&model, vec![])).await.unwrap();
    let chat = client.create_chat(bot.id).await.unwrap();
    let input = SendInput::text("Hi").with_command_key("k-1");
    let first = client.send(chat.id, input.clone()).await.unwrap();
    let again = client.send(chat.id, input).await.unwrap();
    assert_eq!(first.execution_id, again.execution_id);
    let other = client
        .send(chat.id, SendInput::text("Other").with_command_key("k-1"))
        .await
        .unwrap_err();
    assert_eq!(other.code, ErrorCode::Conflict);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_chat_is_not_found_with_the_servers_code() {
    let served = Served::start();
    let client = client(&served, vec![]).await;
    let err = client.get_chat(ChatId::new()).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_unauthorized() {
    let served = Served::start();
    let client = connect(
        &served.base,
        ConnectOptions {
            token: Some("ob_wrong".into()),
            ..ConnectOptions::default()
        },
    )
    .await
    .unwrap();
    let err = client.list_bots().await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Unauthorized, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_down_is_unavailable() {
    let mut served = Served::start();
    let client = client(&served, vec![]).await;
    served.kill();
    let err = client.list_bots().await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Unavailable, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_of_several_nodes_sends_to_the_next_when_one_refuses_connections() {
    let served = Served::start();
    // A port nothing listens on: the first node is down.
    let down = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down_base = format!("http://{}", down.local_addr().unwrap());
    drop(down);
    let client = connect(
        &format!("{down_base},{}", served.base),
        ConnectOptions {
            token: Some(served.token.clone()),
            ..ConnectOptions::default()
        },
    )
    .await
    .unwrap();
    let (_dir, model) = script(json!([{ "text": "from the second node" }]));
    // A create is not safe to repeat, but a refused connection never reached a server.
    let bot = client.create_bot(bot(&model, vec![])).await.unwrap();
    let chat = client.create_chat(bot.id).await.unwrap();
    let receipt = client
        .send(chat.id, SendInput::text("Hi").with_command_key("several-1"))
        .await
        .unwrap();
    assert_eq!(
        outcome(client.as_ref(), receipt.execution_id).await,
        TurnOutcome::Completed
    );
    assert_eq!(client.list_bots().await.unwrap().len(), 1, "created once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_list_with_an_empty_entry_is_invalid_input() {
    let Err(err) = connect("http://127.0.0.1:9,", ConnectOptions::default()).await else {
        panic!("an empty entry connected");
    };
    assert_eq!(err.code, ErrorCode::InvalidInput, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_client_is_closed() {
    let served = Served::start();
    let client = client(&served, vec![]).await;
    client.close().await;
    let err = client.list_bots().await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Closed, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_chat_returns_once_its_turn_ended() {
    let served = Served::start();
    let (_dir, model) = script(json!([{ "deltas": ["a", "b", "c"], "delay_ms": 300 }]));
    let client = client(&served, vec![]).await;
    let bot = client.create_bot(bot(&model, vec![])).await.unwrap();
    let chat = client.create_chat(bot.id).await.unwrap();
    let receipt = client.send(chat.id, SendInput::text("Slow")).await.unwrap();
    client.delete_chat(chat.id).await.unwrap();
    let execution = client.get_execution(receipt.execution_id).await.unwrap();
    assert!(execution.state.is_terminal(), "{:?}", execution.state);
    let gone = client.get_chat(chat.id).await.unwrap_err();
    assert_eq!(gone.code, ErrorCode::NotFound);
    tokio::time::sleep(Duration::from_millis(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_members_and_provider_settings_work_through_the_remote_client() {
    use openbot_core::{Operations, RemoteClient};
    use openbot_schema::{CreateToken, PutProvider, Right};
    let served = Served::start();
    let admin = RemoteClient::new(
        &served.base,
        ConnectOptions {
            token: Some(served.token.clone()),
            ..ConnectOptions::default()
        },
    )
    .unwrap();
    admin.health().await.unwrap();
    let created = admin
        .create_token(&CreateToken {
            name: "ci".into(),
            rights: Right::all(),
            bot_ids: None,
            expires_at: None,
        })
        .await
        .unwrap();
    assert!(
        admin
            .list_tokens_all()
            .await
            .unwrap()
            .iter()
            .any(|t| t.name == "ci")
    );
    assert_eq!(admin.list_members_all().await.unwrap().len(), 1);
    let settings = admin
        .put_provider(
            &"openai",
            &PutProvider {
                api_key: Some("sk-test-not-returned".into()),
                base_url: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(settings.kind, "openai");
    let listed = serde_json::to_string(&admin.list_providers_all().await.unwrap()).unwrap();
    assert!(!listed.contains("sk-test-not-returned"));

    admin.revoke_token(&created.token.id).await.unwrap();
    let revoked = RemoteClient::new(
        &served.base,
        ConnectOptions {
            token: Some(created.secret.clone()),
            ..ConnectOptions::default()
        },
    )
    .unwrap();
    let err = revoked.list_chats_all(None).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Unauthorized, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_mode_and_pause_go_through_the_client_on_a_server_and_are_refused_in_memory() {
    let served = Served::start();
    let remote = client(&served, vec![]).await;
    let (_dir, model) = script(json!([{"text": "ok", "delay_ms": 300}]));
    let created = remote.create_bot(bot(&model, vec![])).await.unwrap();
    let chat = remote.create_chat(created.id).await.unwrap();
    assert!(remote.set_plan_mode(chat.id, true).await.unwrap().enabled);
    assert!(remote.plan_mode(chat.id).await.unwrap().enabled);
    assert!(!remote.set_plan_mode(chat.id, false).await.unwrap().enabled);
    let receipt = remote
        .send(
            chat.id,
            openbot_schema::SendInput {
                content: vec![openbot_schema::ContentPart::text("hi")],
                command_key: None,
            },
        )
        .await
        .unwrap();
    remote.pause_execution(receipt.execution_id).await.unwrap();
    remote.resume_execution(receipt.execution_id).await.unwrap();
    assert_eq!(
        outcome(remote.as_ref(), receipt.execution_id).await,
        TurnOutcome::Completed
    );

    let memory = connect("memory://", ConnectOptions::default())
        .await
        .unwrap();
    let local = memory.create_bot(bot(&model, vec![])).await.unwrap();
    let local_chat = memory.create_chat(local.id).await.unwrap();
    assert!(!memory.plan_mode(local_chat.id).await.unwrap().enabled);
    let refused = memory.set_plan_mode(local_chat.id, true).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::InvalidInput, "{refused}");
    let refused = memory
        .pause_execution(receipt.execution_id)
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InvalidInput, "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_outcomes_are_listed_and_decided_through_the_client_on_a_server_and_absent_in_memory()
 {
    use openbot_core::{Operations, RemoteClient};
    use openbot_schema::{DecideOutcome, OutcomeDecision, PutHttpTool};
    let mut served = Served::start();
    let admin = RemoteClient::new(
        &served.base,
        ConnectOptions {
            token: Some(served.token.clone()),
            ..ConnectOptions::default()
        },
    )
    .unwrap();
    // The endpoint never answers the first write; its sender is then killed.
    let (url, calls) = endpoint::endpoint(1);
    admin
        .put_tool(
            &"pay",
            &PutHttpTool {
                description: "Pays.".into(),
                input_schema: json!({"type": "object"}),
                url,
                retry_safe: false,
                background: false,
                headers: Default::default(),
                body: None,
            },
        )
        .await
        .unwrap();
    let (_dir, model) = script(json!([
        {"tool_calls": [{"name": "pay", "arguments": {"amount": 5}}]},
        {"text": "Paid."}
    ]));
    let pay = ToolDefinition {
        name: "pay".into(),
        description: "Pays.".into(),
        input_schema: json!({"type": "object"}),
    };
    let remote = client(&served, vec![]).await;
    let created = remote.create_bot(bot(&model, vec![pay])).await.unwrap();
    let chat = remote.create_chat(created.id).await.unwrap();
    let receipt = remote
        .send(
            chat.id,
            SendInput {
                content: vec![openbot_schema::ContentPart::text("Pay 5")],
                command_key: None,
            },
        )
        .await
        .unwrap();
    let waited = calls.clone();
    tokio::task::spawn_blocking(move || endpoint::wait_for(&waited, 1))
        .await
        .unwrap();
    served.restart();

    let mut page = remote.list_unknown_outcomes(Some(10), None).await.unwrap();
    for _ in 0..300 {
        if !page.items.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        page = remote.list_unknown_outcomes(Some(10), None).await.unwrap();
    }
    assert_eq!(page.items.len(), 1, "{page:?}");
    let waiting = &page.items[0];
    assert_eq!(waiting.execution_id, receipt.execution_id);
    assert_eq!(waiting.tool_call.name, "pay");
    assert_eq!(waiting.tool_call.arguments, json!({"amount": 5}));
    assert_eq!(page.next_cursor, None);

    let record = remote
        .decide_outcome(
            receipt.execution_id,
            DecideOutcome {
                call: waiting.call.clone(),
                decision: OutcomeDecision::Applied,
                result: Some("paid by hand".into()),
                reason: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(record.decision, OutcomeDecision::Applied);
    assert_eq!(
        outcome(remote.as_ref(), receipt.execution_id).await,
        TurnOutcome::Completed
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the write was not sent again"
    );
    let again = remote
        .decide_outcome(
            receipt.execution_id,
            DecideOutcome {
                call: waiting.call.clone(),
                decision: OutcomeDecision::NotApplied,
                result: None,
                reason: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(again.code, ErrorCode::Conflict, "{again}");

    let memory = connect("memory://", ConnectOptions::default())
        .await
        .unwrap();
    let none = memory.list_unknown_outcomes(None, None).await.unwrap();
    assert!(none.items.is_empty() && none.next_cursor.is_none());
    let refused = memory
        .decide_outcome(
            receipt.execution_id,
            DecideOutcome {
                call: waiting.call.clone(),
                decision: OutcomeDecision::GiveUp,
                result: None,
                reason: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InvalidInput, "{refused}");
}
