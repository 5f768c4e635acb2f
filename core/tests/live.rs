//! The OpenAI Realtime wire format against a local server speaking it (a scripted stand-in for
//! the provider's network): the session is configured with the instructions and tools, text in
//! becomes text deltas and a response's end with usage, a tool call is answered and the model
//! goes on, and a dropped connection ends the events with `closed`.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test
#![allow(clippy::result_large_err)] // tungstenite's handshake callback type

use std::sync::{Arc, Mutex};

use futures::{SinkExt as _, StreamExt as _};
use openbot_core::live::openai::OpenAiRealtime;
use openbot_core::live::{LiveConfig, LiveError, LiveEvent, LiveInput, RealtimeProvider};
use openbot_core::outbound::OutboundPolicy;
use openbot_schema::ToolDefinition;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

/// What the fake provider saw: the request's path and key, every client event, and every
/// server event it sent.
#[derive(Default)]
struct Seen {
    path: String,
    authorization: String,
    events: Vec<Value>,
    sent: Vec<Value>,
}

/// `event` with an `event_id`, as every server event has one.
fn with_id(mut event: Value, n: usize) -> Value {
    event["event_id"] = json!(format!("event_{n}"));
    event
}

/// A provider on 127.0.0.1 that answers each `response.create` from its script: `text` deltas
/// and a `response.done`, or a function call; `drop_after` closes the socket after that many
/// client events.
async fn fake_provider(drop_after: Option<usize>) -> (String, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let seen_by_server = Arc::clone(&seen);
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let seen = seen_by_server;
        let callback = |request: &Request, response: Response| {
            let mut seen = seen.lock().unwrap();
            seen.path = request.uri().to_string();
            seen.authorization = request
                .headers()
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            Ok(response)
        };
        let mut socket = tokio_tungstenite::accept_hdr_async(stream, callback)
            .await
            .unwrap();
        let created = with_id(
            json!({"type": "session.created", "session": {"type": "realtime"}}),
            0,
        );
        seen.lock().unwrap().sent.push(created.clone());
        socket
            .send(Message::text(created.to_string()))
            .await
            .unwrap();
        let mut responses = 0;
        let mut tool_answered = false;
        while let Some(Ok(Message::Text(text))) = socket.next().await {
            let event: Value = serde_json::from_str(text.as_str()).unwrap();
            let count = {
                let mut seen = seen.lock().unwrap();
                seen.events.push(event.clone());
                seen.events.len()
            };
            if drop_after.is_some_and(|n| count >= n) {
                return; // the socket drops without a close
            }
            if event["item"]["type"] == "function_call_output" {
                tool_answered = true;
            }
            if event["type"] != "response.create" {
                continue;
            }
            responses += 1;
            let id = format!("resp_{responses}");
            let asked = seen
                .lock()
                .unwrap()
                .events
                .iter()
                .rev()
                .find_map(|e| e["item"]["content"][0]["text"].as_str().map(str::to_string));
            let wants_tool = asked.as_deref() == Some("what time is it?") && !tool_answered;
            let replies = if wants_tool {
                vec![
                    json!({"type": "response.created", "response": {"id": id, "object": "realtime.response", "status": "in_progress"}}),
                    json!({"type": "response.function_call_arguments.done", "response_id": id,
                        "item_id": "item_f", "output_index": 0, "call_id": "call_1",
                        "name": "clock", "arguments": "{\"zone\":\"UTC\"}"}),
                    json!({"type": "response.done", "response": {"id": id, "status": "completed",
                        "output": [{"type": "function_call", "call_id": "call_1", "name": "clock", "arguments": "{\"zone\":\"UTC\"}"}],
                        "usage": {"input_tokens": 20, "output_tokens": 5, "total_tokens": 25}}}),
                ]
            } else {
                let answer = if tool_answered {
                    "It is noon."
                } else {
                    "Hello!"
                };
                let (first, rest) = answer.split_at(3);
                vec![
                    json!({"type": "response.created", "response": {"id": id, "object": "realtime.response", "status": "in_progress"}}),
                    json!({"type": "response.output_text.delta", "response_id": id, "item_id": "i",
                        "output_index": 0, "content_index": 0, "delta": first}),
                    json!({"type": "response.output_text.delta", "response_id": id, "item_id": "i",
                        "output_index": 0, "content_index": 0, "delta": rest}),
                    json!({"type": "response.done", "response": {"id": id, "status": "completed",
                        "output": [{"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": answer}]}],
                        "usage": {"input_tokens": 10, "output_tokens": 4, "total_tokens": 14}}}),
                ]
            };
            for (n, reply) in replies.into_iter().enumerate() {
                let reply = with_id(reply, responses * 10 + n);
                seen.lock().unwrap().sent.push(reply.clone());
                socket.send(Message::text(reply.to_string())).await.unwrap();
            }
        }
    });
    (format!("http://{address}/v1"), seen)
}

fn config() -> LiveConfig {
    LiveConfig {
        model: "gpt-realtime".into(),
        instructions: "Be brief.".into(),
        tools: vec![ToolDefinition {
            name: "clock".into(),
            description: "The time.".into(),
            input_schema: json!({"type": "object", "properties": {"zone": {"type": "string"}}}),
        }],
        audio_out: false,
        voice: None,
    }
}

fn provider(base: &str) -> OpenAiRealtime {
    OpenAiRealtime::new(base, "sk-test", Arc::new(OutboundPolicy::allow_all()))
}

/// Sends `input`, then reads the events up to and including the next `response_done`.
async fn exchange(
    connection: &mut openbot_core::live::LiveConnection,
    input: LiveInput,
) -> Vec<LiveEvent> {
    connection.send(input).await.unwrap();
    response(connection).await
}

/// The events up to and including the next `response_done`.
async fn response(connection: &mut openbot_core::live::LiveConnection) -> Vec<LiveEvent> {
    let mut events = Vec::new();
    while let Some(event) = connection.next().await {
        let done = matches!(
            event,
            LiveEvent::ResponseDone { .. } | LiveEvent::Closed { .. }
        );
        events.push(event);
        if done {
            return events;
        }
    }
    events
}

#[tokio::test]
async fn the_session_is_configured_with_the_bots_instructions_and_tools() {
    let (base, seen) = fake_provider(None).await;
    let mut connection = provider(&base).connect(&config()).await.unwrap();
    assert_eq!(connection.next().await, Some(LiveEvent::Ready));
    // Once a message was answered, the provider has read everything sent before it.
    exchange(&mut connection, LiveInput::Text { text: "hi".into() }).await;
    let seen = seen.lock().unwrap();
    assert_eq!(seen.path, "/v1/realtime?model=gpt-realtime");
    assert_eq!(seen.authorization, "Bearer sk-test");
    let update = &seen.events[0];
    assert_eq!(update["type"], "session.update");
    assert_eq!(update["session"]["instructions"], "Be brief.");
    assert_eq!(update["session"]["output_modalities"], json!(["text"]));
    assert_eq!(update["session"]["tools"][0]["type"], "function");
    assert_eq!(update["session"]["tools"][0]["name"], "clock");
}

#[tokio::test]
async fn text_in_streams_text_deltas_and_ends_with_the_responses_usage() {
    let (base, _seen) = fake_provider(None).await;
    let mut connection = provider(&base).connect(&config()).await.unwrap();
    let events = exchange(&mut connection, LiveInput::Text { text: "hi".into() }).await;
    let deltas: String = events
        .iter()
        .filter_map(|e| match e {
            LiveEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, "Hello!");
    let Some(LiveEvent::ResponseDone { text, usage, .. }) = events.last() else {
        panic!("{events:?}");
    };
    assert_eq!(text, "Hello!");
    assert_eq!(usage.unwrap().input_tokens, 10);
    assert_eq!(usage.unwrap().output_tokens, 4);
}

#[tokio::test]
async fn a_tool_call_is_answered_and_the_model_goes_on() {
    let (base, seen) = fake_provider(None).await;
    let mut connection = provider(&base).connect(&config()).await.unwrap();
    let events = exchange(
        &mut connection,
        LiveInput::Text {
            text: "what time is it?".into(),
        },
    )
    .await;
    let call = events
        .iter()
        .find_map(|e| match e {
            LiveEvent::ToolCall {
                call_id,
                name,
                arguments,
                ..
            } => Some((call_id.clone(), name.clone(), arguments.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        call,
        ("call_1".into(), "clock".into(), json!({"zone": "UTC"}))
    );
    let events = exchange(
        &mut connection,
        LiveInput::ToolResult {
            call_id: "call_1".into(),
            output: "12:00".into(),
        },
    )
    .await;
    let Some(LiveEvent::ResponseDone { text, .. }) = events.last() else {
        panic!("{events:?}");
    };
    assert_eq!(text, "It is noon.");
    let seen = seen.lock().unwrap();
    let output = seen
        .events
        .iter()
        .find(|e| e["item"]["type"] == "function_call_output")
        .unwrap();
    assert_eq!(output["item"]["call_id"], "call_1");
    assert_eq!(output["item"]["output"], "12:00");
}

#[tokio::test]
async fn a_dropped_provider_connection_ends_the_events_and_later_input_is_lost() {
    // The provider drops the socket on the first client event after the session's update.
    let (base, seen) = fake_provider(Some(2)).await;
    let mut connection = provider(&base).connect(&config()).await.unwrap();
    let events = exchange(&mut connection, LiveInput::Text { text: "hi".into() }).await;
    assert!(
        matches!(events.last(), Some(LiveEvent::Closed { .. })),
        "{events:?}"
    );
    assert_eq!(connection.next().await, None);
    assert_eq!(
        connection
            .send(LiveInput::Text {
                text: "again".into()
            })
            .await,
        Err(LiveError::Lost)
    );
    // Nothing was sent again after the loss.
    let texts = seen
        .lock()
        .unwrap()
        .events
        .iter()
        .filter(|e| e["type"] == "conversation.item.create")
        .count();
    assert_eq!(texts, 1);
}

#[tokio::test]
async fn an_internal_address_the_policy_denies_is_refused_before_connecting() {
    let (base, seen) = fake_provider(None).await;
    let denied = OpenAiRealtime::new(&base, "sk-test", Arc::new(OutboundPolicy::default()));
    let err = denied.connect(&config()).await.unwrap_err();
    assert!(matches!(err, LiveError::Refused(_)), "{err:?}");
    assert!(seen.lock().unwrap().path.is_empty());
}

/// Writes both directions of a real exchange (text, a tool call and its result) and the client
/// events of every other input, as JSON, to `OPENBOT_LIVE_WIRE_DIR` (else a temporary
/// folder): `scripts/check-live-wire` checks them against the official `openai` package's
/// types of the Realtime events.
#[tokio::test]
async fn the_wire_in_both_directions_is_written_for_the_type_check() {
    let (base, seen) = fake_provider(None).await;
    let mut connection = provider(&base)
        .connect(&LiveConfig {
            voice: Some("alloy".into()),
            ..config()
        })
        .await
        .unwrap();
    exchange(
        &mut connection,
        LiveInput::Text {
            text: "what time is it?".into(),
        },
    )
    .await;
    exchange(
        &mut connection,
        LiveInput::ToolResult {
            call_id: "call_1".into(),
            output: "12:00".into(),
        },
    )
    .await;
    let seen = seen.lock().unwrap();
    let mut client = seen.events.clone();
    for input in [
        LiveInput::Audio {
            data: "AAAA".into(),
        },
        LiveInput::AudioCommit,
        LiveInput::Cancel,
    ] {
        client.extend(openbot_core::live::openai::client_events(&input));
    }
    let kinds: std::collections::BTreeSet<&str> =
        client.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        [
            "conversation.item.create",
            "input_audio_buffer.append",
            "input_audio_buffer.commit",
            "response.cancel",
            "response.create",
            "session.update"
        ]
    );
    let scratch = tempfile::tempdir().unwrap();
    let dir = std::env::var_os("OPENBOT_LIVE_WIRE_DIR")
        .map_or_else(|| scratch.path().to_path_buf(), std::path::PathBuf::from);
    std::fs::write(
        dir.join("client.json"),
        serde_json::to_vec_pretty(&client).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("server.json"),
        serde_json::to_vec_pretty(&seen.sent).unwrap(),
    )
    .unwrap();
}
