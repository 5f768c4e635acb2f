//! The OpenAI Chat Completions adapter against a local server that speaks its wire format.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/mock_provider.rs"]
mod mock_provider;

use std::time::Duration;

use mock_provider::{
    API_KEY, MockProvider, Reply, ask, assert_no_key, collect, collect_events, events_then_error,
    sse,
};
use openbot_core::model::{
    HttpSettings, Model, ModelError, ModelEvent, ModelRequest, OpenAiChat, Pricing, StopReason,
};
use openbot_core::schema::{
    ContentPart, FileId, FileRef, Message, ToolCall, ToolDefinition, ToolResult, Usage,
};
use serde_json::{Value, json};

const DONE: &str = "data: [DONE]\n\n";

/// One `chat.completion.chunk` with one choice, as OpenAI streams it with `include_usage`.
fn chunk(delta: Value, finish_reason: Option<&str>) -> String {
    let data = json!({
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion.chunk",
        "created": 1_741_570_283,
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_eb9dce56a8",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
        "usage": null,
    });
    sse(None, &data.to_string())
}

fn text(text: &str) -> String {
    chunk(json!({"content": text}), None)
}

fn first() -> String {
    chunk(
        json!({"role": "assistant", "content": "", "refusal": null}),
        None,
    )
}

/// The last chunk before `[DONE]`: no choices, the usage.
fn usage(prompt: u64, completion: u64, cached: u64) -> String {
    let data = json!({
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion.chunk",
        "created": 1_741_570_283,
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_eb9dce56a8",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
        },
    });
    sse(None, &data.to_string())
}

fn call_start(index: u32, id: &str, name: &str) -> String {
    let call = json!({"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}});
    chunk(
        json!({"role": "assistant", "content": null, "tool_calls": [call], "refusal": null}),
        None,
    )
}

fn call_arguments(index: u32, piece: &str) -> String {
    chunk(
        json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
        None,
    )
}

fn hello_stream() -> String {
    [
        first(),
        text("Hel"),
        text("lo, "),
        text("world!"),
        chunk(json!({}), Some("stop")),
        usage(19, 10, 0),
    ]
    .concat()
        + DONE
}

fn model(mock: &MockProvider, retries: u32) -> OpenAiChat {
    OpenAiChat::new("openai", "gpt-4o", mock.settings(retries)).expect("model")
}

#[tokio::test]
async fn a_streamed_answer_is_assembled_from_its_deltas() {
    let mock = MockProvider::start("/v1", [Reply::Events(hello_stream())]).await;
    let events = collect_events(&model(&mock, 0), ask("Hi")).await.unwrap();
    let texts: Vec<&ModelEvent> = events
        .iter()
        .filter(|e| matches!(e, ModelEvent::TextDelta(_)))
        .collect();
    assert_eq!(
        texts,
        [
            &ModelEvent::TextDelta("Hel".into()),
            &ModelEvent::TextDelta("lo, ".into()),
            &ModelEvent::TextDelta("world!".into())
        ]
    );
    assert_eq!(events.last(), Some(&ModelEvent::Done(StopReason::EndTurn)));
}

#[tokio::test]
async fn usage_counts_cached_tokens_and_is_priced_when_a_price_is_set() {
    let stream = [
        first(),
        text("ok"),
        chunk(json!({}), Some("stop")),
        usage(2_000, 500, 1_500),
    ]
    .concat()
        + DONE;
    let mock = MockProvider::start(
        "/v1",
        [Reply::Events(stream.clone()), Reply::Events(stream)],
    )
    .await;
    let unpriced = collect(&model(&mock, 0), ask("Hi"))
        .await
        .unwrap()
        .usage
        .unwrap();
    assert_eq!(
        (
            unpriced.input_tokens,
            unpriced.output_tokens,
            unpriced.cached_input_tokens
        ),
        (2_000, 500, 1_500)
    );
    assert_eq!(unpriced.cost_micros, None);

    let mut settings = mock.settings(0);
    // $2.50 per million input, $1.25 per million cached input, $10 per million output.
    settings.pricing = Some(Pricing {
        input_per_million: 2_500_000,
        cached_input_per_million: 1_250_000,
        output_per_million: 10_000_000,
    });
    let priced = OpenAiChat::new("openai", "gpt-4o", settings).unwrap();
    let usage = collect(&priced, ask("Hi")).await.unwrap().usage.unwrap();
    // 500 * 2.5 + 1500 * 1.25 + 500 * 10 = 1250 + 1875 + 5000 micro-dollars.
    assert_eq!(usage.cost_micros, Some(8_125));
}

#[tokio::test]
async fn a_tool_call_is_assembled_from_its_fragments() {
    let stream = [
        call_start(0, "call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather"),
        call_arguments(0, "{\""),
        call_arguments(0, "location"),
        call_arguments(0, "\":\""),
        call_arguments(0, "Paris, France"),
        call_arguments(0, "\"}"),
        chunk(json!({}), Some("tool_calls")),
        usage(80, 17, 0),
    ]
    .concat()
        + DONE;
    let mock = MockProvider::start("/v1", [Reply::Events(stream)]).await;
    let response = collect(&model(&mock, 0), ask("Weather in Paris?"))
        .await
        .unwrap();
    assert_eq!(
        response.tool_calls,
        [ToolCall {
            id: "call_DdmO9pD3xa9XTPNJ32zg2hcA".into(),
            name: "get_weather".into(),
            arguments: json!({"location": "Paris, France"}),
        }]
    );
    assert_eq!(response.text, "");
    assert_eq!(response.stop, Some(StopReason::ToolUse));
}

#[tokio::test]
async fn two_parallel_tool_calls_come_out_complete_in_index_order() {
    let stream = [
        call_start(0, "call_paris", "get_weather"),
        call_arguments(0, "{\"location\": \"Pa"),
        call_start(1, "call_oslo", "get_weather"),
        call_arguments(1, "{\"location\": \"Oslo\"}"),
        call_arguments(0, "ris\"}"),
        chunk(json!({}), Some("tool_calls")),
        usage(80, 40, 0),
    ]
    .concat()
        + DONE;
    let mock = MockProvider::start("/v1", [Reply::Events(stream)]).await;
    let events = collect_events(&model(&mock, 0), ask("Paris and Oslo?"))
        .await
        .unwrap();
    let calls: Vec<(String, Value)> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCall(c) => Some((c.id.clone(), c.arguments.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("call_paris".to_string(), json!({"location": "Paris"})),
            ("call_oslo".to_string(), json!({"location": "Oslo"}))
        ]
    );
}

#[tokio::test]
async fn invalid_tool_arguments_are_kept_raw_for_the_turn_to_report() {
    let stream = [
        call_start(0, "call_1", "get_weather"),
        call_arguments(0, "{\"location\": "),
        chunk(json!({}), Some("tool_calls")),
    ]
    .concat()
        + DONE;
    let mock = MockProvider::start("/v1", [Reply::Events(stream)]).await;
    let response = collect(&model(&mock, 0), ask("?")).await.unwrap();
    assert_eq!(
        response.tool_calls[0].arguments,
        json!({"_raw": "{\"location\": "})
    );
}

#[tokio::test]
async fn the_request_carries_model_messages_tools_auth_and_stream_flags() {
    let mock = MockProvider::start("/v1", [Reply::Events(hello_stream())]).await;
    let image = FileRef {
        id: FileId::new(),
        media_type: "image/png".into(),
        name: Some("chart.png".into()),
        url: Some("https://example.com/chart.png".into()),
    };
    let pdf = FileRef {
        id: FileId::new(),
        media_type: "application/pdf".into(),
        name: Some("report.pdf".into()),
        url: None,
    };
    let call = ToolCall {
        id: "call_1".into(),
        name: "get_weather".into(),
        arguments: json!({"location": "Oslo"}),
    };
    let request = ModelRequest {
        instructions: "Be brief.".into(),
        messages: vec![
            Message::User {
                content: vec![
                    ContentPart::text("Look:"),
                    ContentPart::File { file: image },
                    ContentPart::File { file: pdf },
                ],
            },
            Message::Assistant {
                content: vec![],
                tool_calls: vec![call.clone()],
            },
            Message::Tool {
                result: ToolResult::error(&call, "service down"),
            },
            Message::assistant("Sorry."),
            Message::user("Try again"),
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
        max_output_tokens: Some(256),
    };
    collect(&model(&mock, 0), request).await.unwrap();

    let sent = mock.only_request();
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.headers["authorization"], format!("Bearer {API_KEY}"));
    assert_eq!(sent.headers["content-type"], "application/json");
    let body = sent.body;
    assert_eq!(body["model"], "gpt-4o");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_completion_tokens"], 256);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image_url", "image_url": {"url": "https://example.com/chart.png"}},
                {"type": "text", "text": "[file: report.pdf (application/pdf)]"},
            ]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"location\":\"Oslo\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "Error: service down"},
            {"role": "assistant", "content": "Sorry."},
            {"role": "user", "content": "Try again"},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
        }}])
    );
}

#[tokio::test]
async fn a_compatible_endpoint_needs_no_key_and_gets_max_tokens() {
    let mock = MockProvider::start("/v1", [Reply::Events(hello_stream())]).await;
    let settings = HttpSettings {
        api_key: None,
        ..mock.settings(0)
    };
    let model = OpenAiChat::new("compatible", "llama3", settings).unwrap();
    assert_eq!(model.name(), "compatible:llama3");
    let request = ModelRequest {
        max_output_tokens: Some(64),
        ..ask("Hi")
    };
    assert_eq!(
        collect(&model, request).await.unwrap().text,
        "Hello, world!"
    );
    let sent = mock.only_request();
    assert!(!sent.headers.contains_key("authorization"));
    assert_eq!(sent.body["max_tokens"], 64);
    assert_eq!(sent.body["model"], "llama3");
}

#[tokio::test]
async fn openai_without_a_key_is_a_configuration_error() {
    let settings = HttpSettings::new("https://api.openai.com/v1", None);
    let error = OpenAiChat::new("openai", "gpt-4o", settings).unwrap_err();
    assert!(matches!(error, ModelError::Configuration(_)), "{error:?}");
}

#[tokio::test]
async fn a_400_is_an_invalid_request_with_the_provider_message_and_is_not_retried() {
    let body = json!({"error": {"message": "Invalid value for 'model': 'gpt-nope'.",
        "type": "invalid_request_error", "param": "model", "code": null}});
    let mock = MockProvider::start("/v1", [Reply::status(400, body.to_string())]).await;
    let error = collect(&model(&mock, 3), ask("Hi")).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::InvalidRequest {
            status: 400,
            message: "Invalid value for 'model': 'gpt-nope'.".into()
        }
    );
    assert!(!error.is_retryable());
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn a_401_is_unauthorized_and_is_not_retried() {
    let body = json!({"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
        "param": null, "code": "invalid_api_key"}});
    let mock = MockProvider::start("/v1", [Reply::status(401, body.to_string())]).await;
    let error = collect(&model(&mock, 3), ask("Hi")).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::Unauthorized {
            status: 401,
            message: "Incorrect API key provided.".into()
        }
    );
    assert_eq!(mock.requests().len(), 1);
}

fn rate_limited() -> Reply {
    let body = json!({"error": {"message": "Rate limit reached for gpt-4o.", "type": "requests",
        "param": null, "code": "rate_limit_exceeded"}});
    Reply::status(429, body.to_string()).with_header("retry-after", "0")
}

#[tokio::test]
async fn a_429_is_retried_and_then_succeeds() {
    let mock = MockProvider::start("/v1", [rate_limited(), Reply::Events(hello_stream())]).await;
    let response = collect(&model(&mock, 2), ask("Hi")).await.unwrap();
    assert_eq!(response.text, "Hello, world!");
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn a_429_that_persists_is_rate_limited_once_the_retries_are_spent() {
    let mock = MockProvider::start(
        "/v1",
        [
            rate_limited(),
            rate_limited(),
            rate_limited(),
            Reply::Events(hello_stream()),
        ],
    )
    .await;
    let error = collect(&model(&mock, 2), ask("Hi")).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::RateLimited {
            retry_after: Some(Duration::ZERO),
            message: "Rate limit reached for gpt-4o.".into()
        }
    );
    assert!(error.is_retryable());
    assert_eq!(mock.requests().len(), 3);
}

#[tokio::test]
async fn a_500_is_retried_after_a_backoff() {
    let body = json!({"error": {"message": "The server had an error while processing your request.",
        "type": "server_error", "param": null, "code": null}});
    let mock = MockProvider::start(
        "/v1",
        [
            Reply::status(500, body.to_string()),
            Reply::Events(hello_stream()),
        ],
    )
    .await;
    let started = std::time::Instant::now();
    let response = collect(&model(&mock, 1), ask("Hi")).await.unwrap();
    assert_eq!(response.text, "Hello, world!");
    assert_eq!(mock.requests().len(), 2);
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "the first backoff is 200 ms"
    );
}

#[tokio::test]
async fn a_500_without_retries_left_is_a_server_error() {
    let mock = MockProvider::start("/v1", [Reply::status(503, "upstream unavailable")]).await;
    let error = collect(&model(&mock, 0), ask("Hi")).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::Server {
            status: 503,
            message: "upstream unavailable".into()
        }
    );
}

#[tokio::test]
async fn malformed_event_data_is_a_malformed_error() {
    let stream = first() + &text("Hel") + "data: {\"choices\": [oops\n\n" + DONE;
    let mock = MockProvider::start("/v1", [Reply::Events(stream)]).await;
    let (events, error) = events_then_error(&model(&mock, 0), ask("Hi")).await;
    assert_eq!(events, [ModelEvent::TextDelta("Hel".into())]);
    assert!(matches!(error, ModelError::Malformed(_)), "{error:?}");
    assert!(!error.is_retryable());
}

/// A whole `chat.completion` object, as a server sends it that ignores `stream: true`.
fn completion(message: Value, finish_reason: &str, prompt: u64, completion: u64) -> String {
    json!({
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1_741_570_283,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
        },
        "service_tier": "default",
        "system_fingerprint": "fp_fc9f1d7035",
    })
    .to_string()
}

#[tokio::test]
async fn a_plain_json_answer_is_accepted() {
    let message = json!({"role": "assistant", "content": "Hello! How can I help?",
        "refusal": null, "annotations": []});
    let mock = MockProvider::start("/v1", [Reply::Json(completion(message, "stop", 19, 10))]).await;
    let mut settings = mock.settings(2);
    // $2.50 per million input, $10 per million output.
    settings.pricing = Some(Pricing {
        input_per_million: 2_500_000,
        cached_input_per_million: 1_250_000,
        output_per_million: 10_000_000,
    });
    let model = OpenAiChat::new("openai", "gpt-4o", settings).unwrap();
    let events = collect_events(&model, ask("Hi")).await.unwrap();
    assert_eq!(
        events,
        [
            ModelEvent::TextDelta("Hello! How can I help?".into()),
            // 19 * 2.5 + 10 * 10 = 147.5, rounded up.
            ModelEvent::Usage(Usage {
                input_tokens: 19,
                output_tokens: 10,
                cached_input_tokens: 0,
                cost_micros: Some(148),
            }),
            ModelEvent::Done(StopReason::EndTurn),
        ]
    );
    let sent = mock.only_request();
    assert_eq!(sent.body["stream"], true, "a stream is still asked for");
}

#[tokio::test]
async fn a_plain_json_answer_with_tool_calls_is_accepted() {
    let call = |id: &str, city: &str| {
        json!({"id": id, "type": "function", "function": {"name": "get_weather",
            "arguments": json!({"location": city}).to_string()}})
    };
    let message = json!({"role": "assistant", "content": null, "refusal": null,
        "tool_calls": [call("call_paris", "Paris"), call("call_oslo", "Oslo")]});
    let mock = MockProvider::start(
        "/v1",
        [Reply::Json(completion(message, "tool_calls", 80, 40))],
    )
    .await;
    let response = collect(&model(&mock, 0), ask("Paris and Oslo?"))
        .await
        .unwrap();
    let weather = |id: &str, city: &str| ToolCall {
        id: id.into(),
        name: "get_weather".into(),
        arguments: json!({"location": city}),
    };
    assert_eq!(
        response.tool_calls,
        [weather("call_paris", "Paris"), weather("call_oslo", "Oslo")]
    );
    assert_eq!(response.text, "");
    assert_eq!(response.stop, Some(StopReason::ToolUse));
    let usage = response.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (80, 40));
}

#[tokio::test]
async fn a_json_error_body_with_status_200_is_an_error() {
    let body = json!({"error": {"message": "streaming is not supported", "type": "invalid_request_error"}});
    let mock = MockProvider::start("/v1", [Reply::Json(body.to_string())]).await;
    let error = collect(&model(&mock, 2), ask("Hi")).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::InvalidRequest {
            status: 400,
            message: "streaming is not supported".into()
        }
    );
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn a_json_answer_that_is_no_completion_is_malformed() {
    let no_choice = json!({"object": "chat.completion", "choices": [], "usage": null}).to_string();
    let mock = MockProvider::start(
        "/v1",
        [
            Reply::Json(json!({"object": "list", "data": []}).to_string()),
            Reply::Json(no_choice),
            Reply::Json("{\"choices\": [".into()),
        ],
    )
    .await;
    let model = model(&mock, 2);
    for expected in [
        "not a chat completion: missing field `choices`",
        "has no choice",
        "cannot be read",
    ] {
        let error = collect(&model, ask("Hi")).await.unwrap_err();
        assert!(
            matches!(&error, ModelError::Malformed(m) if m.contains(expected)),
            "{error:?}"
        );
        assert!(!error.is_retryable());
    }
    assert_eq!(
        mock.requests().len(),
        3,
        "a malformed answer is not sent again"
    );
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_a_retryable_error_after_the_deltas() {
    let mock = MockProvider::start("/v1", [Reply::Cut(first() + &text("Hel") + &text("lo"))]).await;
    let (events, error) = events_then_error(&model(&mock, 2), ask("Hi")).await;
    assert_eq!(
        events,
        [
            ModelEvent::TextDelta("Hel".into()),
            ModelEvent::TextDelta("lo".into())
        ]
    );
    assert!(
        matches!(error, ModelError::Transport(_) | ModelError::Interrupted),
        "{error:?}"
    );
    assert!(error.is_retryable());
    assert_eq!(
        mock.requests().len(),
        1,
        "a stream that began is never sent again by the adapter"
    );
}

#[tokio::test]
async fn a_stream_that_ends_without_done_is_interrupted() {
    let stream = [first(), text("Hel"), chunk(json!({}), Some("stop"))].concat();
    let mock = MockProvider::start("/v1", [Reply::Events(stream)]).await;
    let (_, error) = events_then_error(&model(&mock, 0), ask("Hi")).await;
    assert_eq!(error, ModelError::Interrupted);
}

#[tokio::test]
async fn a_stream_that_goes_quiet_times_out() {
    let mock = MockProvider::start("/v1", [Reply::Stall(first() + &text("Hel"))]).await;
    let settings = HttpSettings {
        idle_timeout: Duration::from_millis(300),
        ..mock.settings(0)
    };
    let model = OpenAiChat::new("openai", "gpt-4o", settings).unwrap();
    let (events, error) = events_then_error(&model, ask("Hi")).await;
    assert_eq!(events, [ModelEvent::TextDelta("Hel".into())]);
    assert_eq!(error, ModelError::Timeout);
}

#[tokio::test]
async fn no_response_headers_in_time_is_a_timeout() {
    let slow = Reply::Delayed(
        Duration::from_secs(3),
        Box::new(Reply::Events(hello_stream())),
    );
    let mock = MockProvider::start("/v1", [slow]).await;
    let settings = HttpSettings {
        response_timeout: Duration::from_millis(300),
        ..mock.settings(2)
    };
    let model = OpenAiChat::new("openai", "gpt-4o", settings).unwrap();
    let error = collect(&model, ask("Hi")).await.unwrap_err();
    assert_eq!(error, ModelError::Timeout);
    assert_eq!(
        mock.requests().len(),
        1,
        "a request the provider may be working on is not sent again"
    );
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let settings = HttpSettings::new(format!("http://{address}/v1"), Some(API_KEY.into()));
    let settings = HttpSettings {
        max_retries: 1,
        ..settings
    };
    let started = std::time::Instant::now();
    let error = collect(
        &OpenAiChat::new("openai", "gpt-4o", settings).unwrap(),
        ask("Hi"),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, ModelError::Transport(_)), "{error:?}");
    assert!(error.is_retryable());
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "one retry after 200 ms"
    );
}

#[tokio::test]
async fn the_api_key_appears_in_no_error_message() {
    let echo = json!({"error": {"message": format!("Incorrect API key provided: {API_KEY}."),
        "type": "invalid_request_error", "code": "invalid_api_key"}});
    let bad_request = json!({"error": {"message": format!("key {API_KEY} cannot use this model")}});
    let mock = MockProvider::start(
        "/v1",
        [
            Reply::status(401, echo.to_string()),
            Reply::status(400, bad_request.to_string()),
            Reply::Events(format!("data: {{\"bad\": {API_KEY}\n\n")),
            Reply::Cut(first()),
        ],
    )
    .await;
    let model = model(&mock, 0);
    let mut errors = Vec::new();
    for _ in 0..4 {
        errors.push(events_then_error(&model, ask("Hi")).await.1);
    }
    assert!(
        matches!(&errors[0], ModelError::Unauthorized { message, .. } if message.contains("[redacted]"))
    );
    assert!(matches!(&errors[1], ModelError::InvalidRequest { .. }));
    assert!(matches!(&errors[2], ModelError::Malformed(_)));
    assert!(errors[3].is_retryable());
    errors.iter().for_each(assert_no_key);
    assert!(!format!("{model:?}").contains(API_KEY));
}

/// Two parallel calls: the first's result holds text, a PNG and a WAV; the second's text.
fn results_with_an_image() -> ModelRequest {
    let shot = ToolCall {
        id: "call_1".into(),
        name: "screenshot".into(),
        arguments: json!({}),
    };
    let time = ToolCall {
        id: "call_2".into(),
        name: "time".into(),
        arguments: json!({}),
    };
    let screenshot = ToolResult {
        output: vec![
            ContentPart::text("Here it is:"),
            ContentPart::media("image/png", "iVBORw0KGgo="),
            ContentPart::media("audio/wav", "UklGRg=="),
        ],
        ..ToolResult::text(&shot, "")
    };
    ModelRequest {
        instructions: String::new(),
        messages: vec![
            Message::user("Look"),
            Message::Assistant {
                content: vec![],
                tool_calls: vec![shot, time.clone()],
            },
            Message::Tool { result: screenshot },
            Message::Tool {
                result: ToolResult::text(&time, "noon"),
            },
        ]
        .into_iter()
        .map(std::sync::Arc::new)
        .collect(),
        tools: Vec::new().into(),
        max_output_tokens: None,
    }
}

#[tokio::test]
async fn a_tool_results_image_follows_the_tool_messages_as_a_user_image_url_part() {
    let mock = MockProvider::start("/v1", [Reply::Events(hello_stream())]).await;
    collect(&model(&mock, 0), results_with_an_image())
        .await
        .unwrap();
    let messages = mock.only_request().body["messages"].clone();
    let wav = "[file: media (audio/wav) not sent: the model cannot read the file `media` (audio/wav): it reads PNG, JPEG, GIF and WebP images and PDF documents]";
    assert_eq!(
        messages.as_array().unwrap()[2..],
        [
            json!({"role": "tool", "tool_call_id": "call_1",
                   "content": format!("Here it is:\n[file: media (image/png)]\n{wav}")}),
            json!({"role": "tool", "tool_call_id": "call_2", "content": "noon"}),
            json!({"role": "user", "content": [
                {"type": "text", "text": "The files of the result of tool call `call_1` (screenshot):"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ]}),
        ]
    );
}
