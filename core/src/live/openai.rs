//! The OpenAI Realtime API's WebSocket wire format: `GET {base}/realtime?model=...` upgraded
//! to a WebSocket, `session.update` with the instructions and tools, then client events
//! (`conversation.item.create`, `input_audio_buffer.append` / `.commit`, `response.create`,
//! `response.cancel`) and server events (`response.*.delta`,
//! `response.function_call_arguments.done`, `response.done` with `usage`, `error`). Server
//! event names of both the GA API and the earlier beta are read.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::{LiveConfig, LiveConnection, LiveError, LiveEvent, LiveInput, LiveUsage};
use crate::outbound::OutboundPolicy;

/// How long opening the socket and the session may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(15);

/// The largest message a live socket takes, in bytes.
const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// What a socket that did not open means for a live session (no URL, no key in the words).
fn opening_error(err: crate::websocket::UpgradeError) -> LiveError {
    use crate::websocket::UpgradeError;
    match err {
        UpgradeError::Send(err) => match OutboundPolicy::refusal(&err) {
            Some(refusal) => LiveError::Refused(refusal),
            None if err.is_timeout() => LiveError::Unreachable("the connection timed out".into()),
            None => LiveError::Unreachable("the connection failed".into()),
        },
        UpgradeError::Status { status, .. }
            if status == reqwest::StatusCode::UNAUTHORIZED
                || status == reqwest::StatusCode::FORBIDDEN =>
        {
            LiveError::Unauthorized
        }
        UpgradeError::Status { status, message } => LiveError::Unreachable(match message {
            Some(message) => format!("the provider answered {status}: {message}"),
            None => format!("the provider answered {status}"),
        }),
        other => LiveError::Unreachable(other.to_string()),
    }
}

/// A realtime endpoint of OpenAI (or one speaking its wire format) with its key.
#[derive(Clone)]
pub struct OpenAiRealtime {
    base_url: String,
    api_key: Option<String>,
    outbound: Arc<OutboundPolicy>,
}

impl std::fmt::Debug for OpenAiRealtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is a secret: never shown.
        f.debug_struct("OpenAiRealtime")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl OpenAiRealtime {
    /// The endpoint at `base_url` (`https://api.openai.com/v1`, or a compatible one) with
    /// `api_key`, reached as `outbound` allows.
    pub fn new(
        base_url: impl Into<String>,
        api_key: impl Into<String>,
        outbound: Arc<OutboundPolicy>,
    ) -> Self {
        Self::with_key(base_url, Some(api_key.into()), outbound)
    }

    /// The endpoint at `base_url` with `api_key` when there is one (a compatible endpoint may
    /// need none).
    pub fn with_key(
        base_url: impl Into<String>,
        api_key: Option<String>,
        outbound: Arc<OutboundPolicy>,
    ) -> Self {
        Self {
            base_url: base_url.into().trim_end_matches('/').to_string(),
            api_key,
            outbound,
        }
    }

    /// The endpoint's base URL.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Whether a key is sent, and whether it is `key` (for checks of the key rules; the key
    /// itself is never read back).
    pub fn sends_key(&self, key: &str) -> bool {
        self.api_key.as_deref() == Some(key)
    }
}

/// The `session.update` event for `config`.
pub fn session_update(config: &LiveConfig) -> Value {
    let tools: Vec<Value> = config
        .tools
        .iter()
        .map(|tool| {
            json!({
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.input_schema,
            })
        })
        .collect();
    let mut audio = json!({"input": {"transcription": {"model": "gpt-4o-mini-transcribe"}}});
    if let Some(voice) = &config.voice {
        audio["output"] = json!({"voice": voice});
    }
    json!({
        "type": "session.update",
        "session": {
            "type": "realtime",
            "instructions": config.instructions,
            "output_modalities": [if config.audio_out { "audio" } else { "text" }],
            "tools": tools,
            "tool_choice": "auto",
            "audio": audio,
        }
    })
}

/// The client events that carry `input`.
pub fn client_events(input: &LiveInput) -> Vec<Value> {
    match input {
        LiveInput::Text { text } => vec![
            json!({"type": "conversation.item.create", "item": {
                "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": text}]}}),
            json!({"type": "response.create"}),
        ],
        LiveInput::Audio { data } => {
            vec![json!({"type": "input_audio_buffer.append", "audio": data})]
        }
        LiveInput::AudioCommit => vec![
            json!({"type": "input_audio_buffer.commit"}),
            json!({"type": "response.create"}),
        ],
        LiveInput::ToolResult { call_id, output } => vec![
            json!({"type": "conversation.item.create", "item": {
                "type": "function_call_output", "call_id": call_id, "output": output}}),
            json!({"type": "response.create"}),
        ],
        LiveInput::Cancel => vec![json!({"type": "response.cancel"})],
    }
}

fn text_of(event: &Value, field: &str) -> String {
    event[field].as_str().unwrap_or_default().to_string()
}

/// The final text of a `response.done`'s response: its messages' text or transcripts.
fn final_text(response: &Value) -> String {
    let mut text = String::new();
    for item in response["output"].as_array().into_iter().flatten() {
        for part in item["content"].as_array().into_iter().flatten() {
            if let Some(piece) = part["text"].as_str().or(part["transcript"].as_str()) {
                text.push_str(piece);
            }
        }
    }
    text
}

/// What a server event means for the client, if anything (most bookkeeping events mean
/// nothing to it).
pub fn server_event(event: &Value) -> Option<LiveEvent> {
    let kind = event["type"].as_str()?;
    let response_id = || text_of(event, "response_id");
    Some(match kind {
        "session.created" => LiveEvent::Ready,
        "response.output_text.delta" | "response.text.delta" => LiveEvent::TextDelta {
            response_id: response_id(),
            text: text_of(event, "delta"),
        },
        "response.output_audio.delta" | "response.audio.delta" => LiveEvent::AudioDelta {
            response_id: response_id(),
            data: text_of(event, "delta"),
        },
        "response.output_audio_transcript.delta" | "response.audio_transcript.delta" => {
            LiveEvent::TranscriptDelta {
                response_id: response_id(),
                text: text_of(event, "delta"),
            }
        }
        "conversation.item.input_audio_transcription.completed" => LiveEvent::UserTranscript {
            item_id: text_of(event, "item_id"),
            text: text_of(event, "transcript"),
        },
        "response.function_call_arguments.done" => {
            let raw = text_of(event, "arguments");
            LiveEvent::ToolCall {
                response_id: response_id(),
                call_id: text_of(event, "call_id"),
                name: text_of(event, "name"),
                arguments: serde_json::from_str(&raw).unwrap_or(Value::String(raw)),
            }
        }
        "response.done" => {
            let response = &event["response"];
            let usage = &response["usage"];
            let usage = match (
                usage["input_tokens"].as_u64(),
                usage["output_tokens"].as_u64(),
            ) {
                (Some(input_tokens), Some(output_tokens)) => Some(LiveUsage {
                    input_tokens,
                    output_tokens,
                }),
                _ => None,
            };
            LiveEvent::ResponseDone {
                response_id: response["id"].as_str().unwrap_or_default().to_string(),
                status: response["status"]
                    .as_str()
                    .unwrap_or("completed")
                    .to_string(),
                text: final_text(response),
                usage,
            }
        }
        "error" => LiveEvent::Error {
            code: event["error"]["code"].as_str().map(str::to_string),
            message: event["error"]["message"]
                .as_str()
                .unwrap_or("the realtime provider reported an error")
                .to_string(),
        },
        _ => return None,
    })
}

#[async_trait]
impl super::RealtimeProvider for OpenAiRealtime {
    async fn connect(&self, config: &LiveConfig) -> Result<LiveConnection, LiveError> {
        let url = format!("{}/realtime?model={}", self.base_url, config.model);
        self.outbound
            .check_url(&url)
            .map_err(|err| LiveError::Refused(err.to_string()))?;
        let client = self
            .outbound
            .client_builder()
            .http1_only()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|_| LiveError::Unreachable("the HTTP client cannot start".into()))?;
        let opening = async {
            let request = match &self.api_key {
                Some(key) => client.get(&url).bearer_auth(key),
                None => client.get(&url),
            };
            let mut socket = crate::websocket::open(request, MAX_MESSAGE_BYTES)
                .await
                .map_err(opening_error)?;
            let update = session_update(config).to_string();
            socket
                .send(Message::text(update))
                .await
                .map_err(|_| LiveError::Lost)?;
            Ok::<_, LiveError>(socket)
        };
        let socket = tokio::time::timeout(OPEN_TIMEOUT, opening)
            .await
            .map_err(|_| LiveError::Unreachable("opening the session timed out".into()))??;
        let (inputs, mut to_send) = mpsc::channel::<LiveInput>(64);
        let (events, received) = mpsc::channel::<LiveEvent>(256);
        let close = CancellationToken::new();
        let closing = close.clone();
        tokio::spawn(async move {
            let (mut sink, mut stream) = socket.split();
            let reason = loop {
                tokio::select! {
                    () = closing.cancelled() => {
                        let _ = sink.send(Message::Close(None)).await;
                        break "closed".to_string();
                    }
                    input = to_send.recv() => {
                        let Some(input) = input else {
                            let _ = sink.send(Message::Close(None)).await;
                            break "closed".to_string();
                        };
                        let mut broke = false;
                        for event in client_events(&input) {
                            if sink.send(Message::text(event.to_string())).await.is_err() {
                                broke = true;
                                break;
                            }
                        }
                        if broke {
                            break "the connection to the provider broke".to_string();
                        }
                    }
                    message = stream.next() => match message {
                        Some(Ok(Message::Text(text))) => {
                            let Ok(event) = serde_json::from_str::<Value>(text.as_str()) else {
                                continue;
                            };
                            if let Some(event) = server_event(&event)
                                && events.send(event).await.is_err()
                            {
                                break "closed".to_string();
                            }
                        }
                        Some(Ok(Message::Close(_))) | None => {
                            break "the provider ended the connection".to_string();
                        }
                        Some(Ok(_)) => {}
                        Some(Err(_)) => break "the connection to the provider broke".to_string(),
                    }
                }
            };
            let _ = events.send(LiveEvent::Closed { reason }).await;
        });
        Ok(LiveConnection::new(inputs, received, close))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_input_is_a_user_item_and_a_response_request() {
        let events = client_events(&LiveInput::Text { text: "hi".into() });
        assert_eq!(events[0]["type"], "conversation.item.create");
        assert_eq!(events[0]["item"]["content"][0]["type"], "input_text");
        assert_eq!(events[1]["type"], "response.create");
    }

    #[test]
    fn a_response_done_carries_its_text_and_usage_and_missing_usage_stays_unknown() {
        let done = json!({"type": "response.done", "response": {"id": "r1", "status": "completed",
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "hello"}]}],
            "usage": {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15}}});
        assert_eq!(
            server_event(&done),
            Some(LiveEvent::ResponseDone {
                response_id: "r1".into(),
                status: "completed".into(),
                text: "hello".into(),
                usage: Some(LiveUsage {
                    input_tokens: 12,
                    output_tokens: 3
                }),
            })
        );
        let bare = json!({"type": "response.done", "response": {"id": "r2", "output": []}});
        let Some(LiveEvent::ResponseDone { usage, .. }) = server_event(&bare) else {
            panic!("not a response's end");
        };
        assert_eq!(usage, None);
    }

    #[test]
    fn both_the_ga_and_the_beta_delta_names_are_read() {
        for kind in ["response.output_text.delta", "response.text.delta"] {
            let event = json!({"type": kind, "response_id": "r", "delta": "x"});
            assert!(matches!(
                server_event(&event),
                Some(LiveEvent::TextDelta { .. })
            ));
        }
    }
}
