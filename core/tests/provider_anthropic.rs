//! The Anthropic Messages adapter against a local server that speaks its wire format.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/mock_provider.rs"]
mod mock_provider;

use std::time::Duration;

use mock_provider::{
    API_KEY, MockProvider, Reply, ask, assert_no_key, collect, collect_events, events_then_error,
    sse,
};
use openbot_core::model::{
    AnthropicMessages, HttpSettings, Model, ModelError, ModelEvent, ModelRequest, Pricing,
    StopReason,
};
use openbot_core::schema::{
    ContentPart, FileId, FileRef, Message, ToolCall, ToolDefinition, ToolResult, Usage,
};
use serde_json::{Value, json};

/// One event as Anthropic streams it: the `event:` line repeats the data's `type`.
fn event(data: Value) -> String {
    let kind = data["type"].as_str().expect("type").to_string();
    sse(Some(&kind), &data.to_string())
}

fn message_start(input: u64, cache_read: u64, cache_write: u64) -> String {
    event(json!({"type": "message_start", "message": {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "content": [],
        "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": input, "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read, "output_tokens": 1, "service_tier": "standard"}}}))
}

fn ping() -> String {
    event(json!({"type": "ping"}))
}

fn text_block(index: u64, deltas: &[&str]) -> String {
    let mut out = event(json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "text", "text": ""}}));
    for delta in deltas {
        out += &event(json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "text_delta", "text": delta}}));
    }
    out + &event(json!({"type": "content_block_stop", "index": index}))
}

fn tool_block(index: u64, id: &str, pieces: &[&str]) -> String {
    let mut out = event(json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "tool_use", "id": id, "name": "get_weather", "input": {}}}));
    for piece in [""].iter().chain(pieces) {
        out += &event(json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": piece}}));
    }
    out + &event(json!({"type": "content_block_stop", "index": index}))
}

fn ending(stop_reason: &str, output: u64) -> String {
    event(
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": output}}),
    ) + &event(json!({"type": "message_stop"}))
}

fn hello_stream() -> String {
    message_start(25, 0, 0)
        + &ping()
        + &text_block(0, &["Hello", ", ", "world!"])
        + &ending("end_turn", 15)
}

fn model(mock: &MockProvider, retries: u32) -> AnthropicMessages {
    AnthropicMessages::new("claude-sonnet-4-5", mock.settings(retries)).expect("model")
}

fn api_error(kind: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": kind, "message": message},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"})
    .to_string()
}

#[tokio::test]
async fn a_streamed_answer_is_assembled_from_its_deltas() {
    let mock = MockProvider::start("", [Reply::Events(hello_stream())]).await;
    let events = collect_events(&model(&mock, 0), ask("Hi")).await.unwrap();
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Hello", ", ", "world!"]);
    assert_eq!(events.last(), Some(&ModelEvent::Done(StopReason::EndTurn)));
}

#[tokio::test]
async fn usage_counts_cache_reads_as_cached_input_and_is_priced_when_a_price_is_set() {
    let stream = message_start(100, 2_000, 300) + &text_block(0, &["ok"]) + &ending("end_turn", 50);
    let mock = MockProvider::start("", [Reply::Events(stream)]).await;
    let mut settings = mock.settings(0);
    settings.pricing = Some(Pricing {
        input_per_million: 3_000_000,
        cached_input_per_million: 300_000,
        output_per_million: 15_000_000,
    });
    let model = AnthropicMessages::new("claude-sonnet-4-5", settings).unwrap();
    let usage = collect(&model, ask("Hi")).await.unwrap().usage.unwrap();
    // Input counts uncached, cache-written and cache-read tokens; output is the final count.
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_input_tokens
        ),
        (2_400, 50, 2_000)
    );
    // 400 * 3 + 2000 * 0.3 + 50 * 15 = 1200 + 600 + 750 micro-dollars.
    assert_eq!(usage.cost_micros, Some(2_550));
}

#[tokio::test]
async fn a_tool_call_is_assembled_from_its_input_json_deltas() {
    let stream = message_start(472, 0, 0)
        + &text_block(0, &["Okay, let me check."])
        + &tool_block(
            1,
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            &["{\"location\":", " \"San Fra", "ncisco, CA\"}"],
        )
        + &ending("tool_use", 89);
    let mock = MockProvider::start("", [Reply::Events(stream)]).await;
    let response = collect(&model(&mock, 0), ask("Weather in SF?"))
        .await
        .unwrap();
    assert_eq!(response.text, "Okay, let me check.");
    assert_eq!(
        response.tool_calls,
        [ToolCall {
            id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
            name: "get_weather".into(),
            arguments: json!({"location": "San Francisco, CA"}),
        }]
    );
    assert_eq!(response.stop, Some(StopReason::ToolUse));
}

#[tokio::test]
async fn two_parallel_tool_calls_come_out_complete_in_order() {
    let stream = message_start(400, 0, 0)
        + &tool_block(0, "toolu_paris", &["{\"location\": \"Paris\"}"])
        + &tool_block(1, "toolu_oslo", &["{\"locat", "ion\": \"Oslo\"}"])
        + &ending("tool_use", 60);
    let mock = MockProvider::start("", [Reply::Events(stream)]).await;
    let response = collect(&model(&mock, 0), ask("Paris and Oslo?"))
        .await
        .unwrap();
    let calls: Vec<(&str, &Value)> = response
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), &c.arguments))
        .collect();
    assert_eq!(
        calls,
        [
            ("toolu_paris", &json!({"location": "Paris"})),
            ("toolu_oslo", &json!({"location": "Oslo"}))
        ]
    );
}

#[tokio::test]
async fn a_tool_call_without_input_deltas_has_empty_arguments() {
    let stream =
        message_start(10, 0, 0) + &tool_block(0, "toolu_now", &[]) + &ending("tool_use", 5);
    let mock = MockProvider::start("", [Reply::Events(stream)]).await;
    let response = collect(&model(&mock, 0), ask("Time?")).await.unwrap();
    assert_eq!(response.tool_calls[0].arguments, json!({}));
}

#[tokio::test]
async fn the_request_carries_system_blocks_grouped_results_tools_and_headers() {
    let mock = MockProvider::start("", [Reply::Events(hello_stream())]).await;
    let image = FileRef {
        id: FileId::new(),
        media_type: "image/png".into(),
        name: Some("a.png".into()),
        url: Some("data:image/png;base64,iVBORw0KGgo=".into()),
    };
    let paris = ToolCall {
        id: "toolu_1".into(),
        name: "get_weather".into(),
        arguments: json!({"location": "Paris"}),
    };
    let oslo = ToolCall {
        id: "toolu_2".into(),
        name: "get_weather".into(),
        arguments: json!({"location": "Oslo"}),
    };
    let request = ModelRequest {
        instructions: "Be brief.".into(),
        messages: vec![
            Message::User {
                content: vec![
                    ContentPart::text("Compare"),
                    ContentPart::File { file: image },
                ],
            },
            Message::Assistant {
                content: vec![],
                tool_calls: vec![paris.clone(), oslo.clone()],
            },
            Message::Tool {
                result: ToolResult::text(&paris, "18 °C"),
            },
            Message::Tool {
                result: ToolResult::error(&oslo, "timeout"),
            },
            Message::user("And now?"),
        ]
        .into_iter()
        .map(std::sync::Arc::new)
        .collect(),
        tools: vec![ToolDefinition {
            name: "get_weather".into(),
            description: "The weather in a city.".into(),
            input_schema: json!({"type": "object", "properties": {"location": {"type": "string"}}}),
        }]
        .into(),
        max_output_tokens: None,
    };
    collect(&model(&mock, 0), request).await.unwrap();

    let sent = mock.only_request();
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.headers["x-api-key"], API_KEY);
    assert_eq!(sent.headers["anthropic-version"], "2023-06-01");
    assert!(!sent.headers.contains_key("authorization"));
    let body = sent.body;
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], AnthropicMessages::DEFAULT_MAX_TOKENS);
    assert_eq!(body["system"], "Be brief.");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "Compare"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"location": "Oslo"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18 °C"}]},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "timeout"}],
                 "is_error": true},
            ]},
            {"role": "user", "content": [{"type": "text", "text": "And now?"}]},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"name": "get_weather", "description": "The weather in a city.",
            "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}}}])
    );
}

#[tokio::test]
async fn the_request_limit_replaces_the_default_max_tokens() {
    let mock = MockProvider::start("", [Reply::Events(hello_stream())]).await;
    collect(
        &model(&mock, 0),
        ModelRequest {
            max_output_tokens: Some(512),
            ..ask("Hi")
        },
    )
    .await
    .unwrap();
    assert_eq!(mock.only_request().body["max_tokens"], 512);
}

#[tokio::test]
async fn an_overloaded_error_event_mid_stream_is_a_retryable_server_error() {
    let stream = message_start(25, 0, 0)
        + &event(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        )
        + &event(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}),
        )
        + &event(
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        );
    let mock = MockProvider::start("", [Reply::Events(stream)]).await;
    let (events, error) = events_then_error(&model(&mock, 0), ask("Hi")).await;
    assert_eq!(events, [ModelEvent::TextDelta("Hel".into())]);
    assert_eq!(
        error,
        ModelError::Server {
            status: 529,
            message: "Overloaded".into()
        }
    );
    assert!(error.is_retryable());
}

/// A whole `message` object, as a server sends it that ignores `stream: true`.
fn plain(content: Value, stop_reason: &str, usage: Value) -> Reply {
    let message = json!({"id": "msg_01Aq9w938a90dw8q", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929", "content": content, "stop_reason": stop_reason,
        "stop_sequence": null, "usage": usage});
    Reply::Json(message.to_string())
}

#[tokio::test]
async fn a_plain_json_answer_is_accepted() {
    let content = json!([
        {"type": "thinking", "thinking": "A greeting.", "signature": "EqQBCgIYAhIM"},
        {"type": "text", "text": "Hello, "},
        {"type": "text", "text": "world!"},
    ]);
    let usage = json!({"input_tokens": 100, "cache_creation_input_tokens": 300,
        "cache_read_input_tokens": 2_000, "output_tokens": 50, "service_tier": "standard"});
    let mock = MockProvider::start("", [plain(content, "end_turn", usage)]).await;
    let mut settings = mock.settings(0);
    settings.pricing = Some(Pricing {
        input_per_million: 3_000_000,
        cached_input_per_million: 300_000,
        output_per_million: 15_000_000,
    });
    let model = AnthropicMessages::new("claude-sonnet-4-5", settings).unwrap();
    let events = collect_events(&model, ask("Hi")).await.unwrap();
    assert_eq!(
        events,
        [
            ModelEvent::TextDelta("Hello, world!".into()),
            // 400 * 3 + 2000 * 0.3 + 50 * 15 = 1200 + 600 + 750 micro-dollars.
            ModelEvent::Usage(Usage {
                input_tokens: 2_400,
                output_tokens: 50,
                cached_input_tokens: 2_000,
                cost_micros: Some(2_550),
            }),
            ModelEvent::Done(StopReason::EndTurn),
        ]
    );
    assert_eq!(mock.only_request().body["stream"], true);
}

#[tokio::test]
async fn a_plain_json_answer_with_tool_calls_is_accepted() {
    let tool_use = |id: &str, city: &str| json!({"type": "tool_use", "id": id, "name": "get_weather", "input": {"location": city}});
    let content = json!([
        {"type": "text", "text": "Let me check both."},
        tool_use("toolu_paris", "Paris"),
        tool_use("toolu_oslo", "Oslo"),
    ]);
    let usage = json!({"input_tokens": 472, "output_tokens": 89});
    let mock = MockProvider::start("", [plain(content, "tool_use", usage)]).await;
    let events = collect_events(&model(&mock, 0), ask("Paris and Oslo?"))
        .await
        .unwrap();
    let weather = |id: &str, city: &str| {
        ModelEvent::ToolCall(ToolCall {
            id: id.into(),
            name: "get_weather".into(),
            arguments: json!({"location": city}),
        })
    };
    assert_eq!(
        events,
        [
            ModelEvent::TextDelta("Let me check both.".into()),
            weather("toolu_paris", "Paris"),
            weather("toolu_oslo", "Oslo"),
            ModelEvent::Usage(Usage {
                input_tokens: 472,
                output_tokens: 89,
                cached_input_tokens: 0,
                cost_micros: None,
            }),
            ModelEvent::Done(StopReason::ToolUse),
        ]
    );
}

#[tokio::test]
async fn a_plain_json_error_or_non_message_is_an_error() {
    let mock = MockProvider::start(
        "",
        [
            Reply::Json(api_error("overloaded_error", "Overloaded")),
            Reply::Json(json!({"type": "completion", "content": []}).to_string()),
        ],
    )
    .await;
    let model = model(&mock, 2);
    let error = collect(&model, ask("Hi")).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::Server {
            status: 529,
            message: "Overloaded".into()
        }
    );
    let error = collect(&model, ask("Hi")).await.unwrap_err();
    assert!(
        matches!(&error, ModelError::Malformed(m) if m.contains("not a message")),
        "{error:?}"
    );
    assert_eq!(
        mock.requests().len(),
        2,
        "answers that came are not asked again"
    );
}

#[tokio::test]
async fn a_400_is_an_invalid_request_with_the_provider_message() {
    let mock = MockProvider::start(
        "",
        [Reply::status(
            400,
            api_error("invalid_request_error", "max_tokens: Field required"),
        )],
    )
    .await;
    let error = collect(&model(&mock, 2), ask("Hi")).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::InvalidRequest {
            status: 400,
            message: "max_tokens: Field required".into()
        }
    );
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn a_401_is_unauthorized_and_is_not_retried() {
    let mock = MockProvider::start(
        "",
        [Reply::status(
            401,
            api_error("authentication_error", "invalid x-api-key"),
        )],
    )
    .await;
    let error = collect(&model(&mock, 2), ask("Hi")).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::Unauthorized {
            status: 401,
            message: "invalid x-api-key".into()
        }
    );
    assert_eq!(mock.requests().len(), 1);
}

fn rate_limited() -> Reply {
    Reply::status(
        429,
        api_error(
            "rate_limit_error",
            "Number of request tokens has exceeded your rate limit.",
        ),
    )
    .with_header("retry-after", "0")
}

#[tokio::test]
async fn a_429_is_retried_and_then_succeeds() {
    let mock = MockProvider::start(
        "",
        [
            rate_limited(),
            rate_limited(),
            Reply::Events(hello_stream()),
        ],
    )
    .await;
    assert_eq!(
        collect(&model(&mock, 2), ask("Hi")).await.unwrap().text,
        "Hello, world!"
    );
    assert_eq!(mock.requests().len(), 3);
}

#[tokio::test]
async fn a_429_that_persists_is_rate_limited_once_the_retries_are_spent() {
    let mock = MockProvider::start(
        "",
        [
            rate_limited(),
            rate_limited(),
            Reply::Events(hello_stream()),
        ],
    )
    .await;
    let error = collect(&model(&mock, 1), ask("Hi")).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::RateLimited {
            retry_after: Some(Duration::ZERO),
            message: "Number of request tokens has exceeded your rate limit.".into()
        }
    );
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn a_529_overloaded_is_retried() {
    let mock = MockProvider::start(
        "",
        [
            Reply::status(529, api_error("overloaded_error", "Overloaded")),
            Reply::Events(hello_stream()),
        ],
    )
    .await;
    assert_eq!(
        collect(&model(&mock, 1), ask("Hi")).await.unwrap().text,
        "Hello, world!"
    );
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn malformed_event_data_is_a_malformed_error() {
    let stream = message_start(25, 0, 0)
        + "event: content_block_start\ndata: {\"type\": \"content_block_start\"}\n\n";
    let mock = MockProvider::start("", [Reply::Events(stream)]).await;
    let (_, error) = events_then_error(&model(&mock, 0), ask("Hi")).await;
    assert!(
        matches!(&error, ModelError::Malformed(m) if m.contains("content_block_start")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_a_retryable_error_after_the_deltas() {
    let stream = message_start(25, 0, 0)
        + &event(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        )
        + &event(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}),
        );
    let mock = MockProvider::start("", [Reply::Cut(stream)]).await;
    let (events, error) = events_then_error(&model(&mock, 2), ask("Hi")).await;
    assert_eq!(events, [ModelEvent::TextDelta("Hel".into())]);
    assert!(
        matches!(error, ModelError::Transport(_) | ModelError::Interrupted),
        "{error:?}"
    );
    assert!(error.is_retryable());
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_that_ends_without_message_stop_is_interrupted() {
    let stream = message_start(25, 0, 0) + &text_block(0, &["Hel"]);
    let mock = MockProvider::start("", [Reply::Events(stream)]).await;
    let (_, error) = events_then_error(&model(&mock, 0), ask("Hi")).await;
    assert_eq!(error, ModelError::Interrupted);
}

#[tokio::test]
async fn the_api_key_appears_in_no_error_message() {
    let mock = MockProvider::start(
        "",
        [
            Reply::status(401, api_error("authentication_error", &format!("invalid x-api-key {API_KEY}"))),
            Reply::Events(message_start(1, 0, 0) + &event(json!({"type": "error",
                "error": {"type": "api_error", "message": format!("internal error for {API_KEY}")}}))),
            Reply::Cut(message_start(1, 0, 0)),
        ],
    )
    .await;
    let model = model(&mock, 0);
    let mut errors = Vec::new();
    for _ in 0..3 {
        errors.push(events_then_error(&model, ask("Hi")).await.1);
    }
    assert!(
        matches!(&errors[0], ModelError::Unauthorized { message, .. } if message.ends_with("[redacted]"))
    );
    assert!(matches!(&errors[1], ModelError::Server { status: 500, .. }));
    errors.iter().for_each(assert_no_key);
    assert!(!format!("{model:?}").contains(API_KEY));
}

#[tokio::test]
async fn the_model_needs_a_key_and_is_named_with_its_provider() {
    let settings = HttpSettings::new("https://api.anthropic.com", Some("k".into()));
    assert_eq!(
        AnthropicMessages::new("claude-sonnet-4-5", settings)
            .unwrap()
            .name(),
        "anthropic:claude-sonnet-4-5"
    );
    let no_key = AnthropicMessages::new(
        "claude-sonnet-4-5",
        HttpSettings::new("https://api.anthropic.com", None),
    );
    assert!(matches!(no_key, Err(ModelError::Configuration(_))));
}

#[tokio::test]
async fn a_tool_results_image_and_pdf_are_image_and_document_blocks_in_its_tool_result() {
    let mock = MockProvider::start("/v1", [Reply::Events(hello_stream())]).await;
    let shot = ToolCall {
        id: "toolu_1".into(),
        name: "screenshot".into(),
        arguments: json!({}),
    };
    let request = ModelRequest {
        instructions: String::new(),
        messages: vec![
            Message::user("Look"),
            Message::Assistant {
                content: vec![],
                tool_calls: vec![shot.clone()],
            },
            Message::Tool {
                result: ToolResult {
                    output: vec![
                        ContentPart::text("Here it is:"),
                        ContentPart::media("image/png", "iVBORw0KGgo="),
                        ContentPart::media("application/pdf", "JVBERi0="),
                    ],
                    ..ToolResult::text(&shot, "")
                },
            },
        ]
        .into_iter()
        .map(std::sync::Arc::new)
        .collect(),
        tools: Vec::new().into(),
        max_output_tokens: None,
    };
    collect(&model(&mock, 0), request).await.unwrap();
    let messages = mock.only_request().body["messages"].clone();
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [{
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": [
                {"type": "text", "text": "Here it is:"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": "iVBORw0KGgo="}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                "data": "JVBERi0="}},
            ],
        }]})
    );
}
