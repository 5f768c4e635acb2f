//! The OpenAI Responses API adapter against a local server that speaks its wire format.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/mock_provider.rs"]
mod mock_provider;

use std::time::Duration;

use mock_provider::{
    API_KEY, MockProvider, Reply, ask, assert_no_key, collect, collect_events, events_then_error,
    sse,
};
use openbot_core::model::{
    HttpSettings, Model, ModelError, ModelEvent, ModelRequest, OpenAiResponses, Pricing, StopReason,
};
use openbot_core::schema::{
    ContentPart, FileId, FileRef, Message, ToolCall, ToolDefinition, ToolResult, Usage,
};
use serde_json::{Value, json};

const RESPONSE_ID: &str = "resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654";
const MESSAGE_ID: &str = "msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654";

/// One event as the Responses API streams it: the `event:` line repeats the data's `type`.
fn event(mut data: Value, sequence: u64) -> String {
    data["sequence_number"] = json!(sequence);
    let kind = data["type"].as_str().expect("type").to_string();
    sse(Some(&kind), &data.to_string())
}

fn response(status: &str, usage: Value, extra: Value) -> Value {
    let mut response = json!({
        "id": RESPONSE_ID, "object": "response", "created_at": 1_741_290_958, "status": status,
        "error": null, "incomplete_details": null, "instructions": null, "max_output_tokens": null,
        "model": "gpt-4.1-2025-04-14", "output": [], "parallel_tool_calls": true,
        "previous_response_id": null, "reasoning": {"effort": null, "summary": null}, "store": false,
        "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [],
        "top_p": 1.0, "truncation": "disabled", "usage": usage, "user": null, "metadata": {},
    });
    if let (Some(target), Some(extra)) = (response.as_object_mut(), extra.as_object()) {
        target.extend(extra.clone());
    }
    response
}

fn usage(input: u64, output: u64, cached: u64) -> Value {
    json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + output})
}

fn opening() -> String {
    event(
        json!({"type": "response.created", "response": response("in_progress", Value::Null, json!({}))}),
        0,
    ) + &event(
        json!({"type": "response.in_progress", "response": response("in_progress", Value::Null, json!({}))}),
        1,
    )
}

fn completed(usage: Value) -> String {
    event(
        json!({"type": "response.completed", "response": response("completed", usage, json!({}))}),
        90,
    )
}

/// A whole streamed message answer made of `deltas`.
fn message_stream(deltas: &[&str], usage_value: Value) -> String {
    let full: String = deltas.concat();
    let mut out = opening();
    out += &event(
        json!({"type": "response.output_item.added", "output_index": 0, "item":
        {"id": MESSAGE_ID, "type": "message", "status": "in_progress", "role": "assistant", "content": []}}),
        2,
    );
    out += &event(
        json!({"type": "response.content_part.added", "item_id": MESSAGE_ID, "output_index": 0,
        "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
        3,
    );
    for (i, delta) in deltas.iter().enumerate() {
        out += &event(
            json!({"type": "response.output_text.delta", "item_id": MESSAGE_ID, "output_index": 0,
            "content_index": 0, "delta": delta, "logprobs": []}),
            4 + i as u64,
        );
    }
    out += &event(
        json!({"type": "response.output_text.done", "item_id": MESSAGE_ID, "output_index": 0,
        "content_index": 0, "text": full, "logprobs": []}),
        20,
    );
    out += &event(
        json!({"type": "response.content_part.done", "item_id": MESSAGE_ID, "output_index": 0,
        "content_index": 0, "part": {"type": "output_text", "text": full, "annotations": []}}),
        21,
    );
    out += &event(
        json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": MESSAGE_ID,
        "type": "message", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": full, "annotations": []}]}}),
        22,
    );
    out + &completed(usage_value)
}

fn hello_stream() -> String {
    message_stream(&["Hi", " there", "!"], usage(37, 11, 0))
}

/// The events of one function call at `index`, its arguments streamed in `pieces`.
fn function_call(index: u64, call_id: &str, pieces: &[&str]) -> Vec<String> {
    let item_id = format!("fc_{call_id}");
    let arguments: String = pieces.concat();
    let mut events = vec![event(
        json!({"type": "response.output_item.added", "output_index": index, "item":
        {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "",
         "call_id": call_id, "name": "get_weather"}}),
        10,
    )];
    for piece in pieces {
        events.push(event(
            json!({"type": "response.function_call_arguments.delta", "item_id": item_id,
            "output_index": index, "delta": piece}),
            11,
        ));
    }
    events.push(event(
        json!({"type": "response.function_call_arguments.done", "item_id": item_id,
        "output_index": index, "arguments": arguments}),
        12,
    ));
    events.push(event(
        json!({"type": "response.output_item.done", "output_index": index, "item":
        {"id": item_id, "type": "function_call", "status": "completed", "arguments": arguments,
         "call_id": call_id, "name": "get_weather"}}),
        13,
    ));
    events
}

fn model(mock: &MockProvider, retries: u32) -> OpenAiResponses {
    OpenAiResponses::new("gpt-4.1", mock.settings(retries)).expect("model")
}

#[tokio::test]
async fn a_streamed_answer_is_assembled_from_its_deltas() {
    let mock = MockProvider::start("/v1", [Reply::Events(hello_stream())]).await;
    let events = collect_events(&model(&mock, 0), ask("Hi")).await.unwrap();
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Hi", " there", "!"]);
    assert_eq!(events.last(), Some(&ModelEvent::Done(StopReason::EndTurn)));
}

#[tokio::test]
async fn usage_counts_cached_tokens_and_is_priced_when_a_price_is_set() {
    let mock = MockProvider::start(
        "/v1",
        [Reply::Events(message_stream(
            &["ok"],
            usage(3_000, 200, 2_048),
        ))],
    )
    .await;
    let mut settings = mock.settings(0);
    settings.pricing = Some(Pricing {
        input_per_million: 2_000_000,
        cached_input_per_million: 500_000,
        output_per_million: 8_000_000,
    });
    let model = OpenAiResponses::new("gpt-4.1", settings).unwrap();
    let usage = collect(&model, ask("Hi")).await.unwrap().usage.unwrap();
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_input_tokens
        ),
        (3_000, 200, 2_048)
    );
    // 952 * 2 + 2048 * 0.5 + 200 * 8 = 1904 + 1024 + 1600 micro-dollars.
    assert_eq!(usage.cost_micros, Some(4_528));
}

#[tokio::test]
async fn a_function_call_is_assembled_from_its_events() {
    let stream = opening()
        + &function_call(
            0,
            "call_12345xyz",
            &["{\"", "location", "\":\"", "Paris, France", "\"}"],
        )
        .concat()
        + &completed(usage(60, 20, 0));
    let mock = MockProvider::start("/v1", [Reply::Events(stream)]).await;
    let response = collect(&model(&mock, 0), ask("Weather in Paris?"))
        .await
        .unwrap();
    assert_eq!(
        response.tool_calls,
        [ToolCall {
            id: "call_12345xyz".into(),
            name: "get_weather".into(),
            arguments: json!({"location": "Paris, France"}),
        }]
    );
    assert_eq!(response.stop, Some(StopReason::ToolUse));
}

#[tokio::test]
async fn two_parallel_function_calls_come_out_complete_in_order() {
    let stream = opening()
        + &function_call(0, "call_paris", &["{\"location\":", "\"Paris\"}"]).concat()
        + &function_call(1, "call_oslo", &["{\"location\":\"Oslo\"}"]).concat()
        + &completed(usage(60, 40, 0));
    let mock = MockProvider::start("/v1", [Reply::Events(stream)]).await;
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
            ("call_paris", &json!({"location": "Paris"})),
            ("call_oslo", &json!({"location": "Oslo"}))
        ]
    );
}

#[tokio::test]
async fn the_request_carries_instructions_input_items_tools_and_store_false() {
    let mock = MockProvider::start("/v1", [Reply::Events(hello_stream())]).await;
    let image = FileRef {
        id: FileId::new(),
        media_type: "image/jpeg".into(),
        name: None,
        url: Some("data:image/jpeg;base64,/9j/4AAQ".into()),
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
                    ContentPart::text("What is this?"),
                    ContentPart::File { file: image },
                ],
            },
            Message::Assistant {
                content: vec![ContentPart::text("Checking.")],
                tool_calls: vec![call.clone()],
            },
            Message::Tool {
                result: ToolResult::text(&call, "12 °C"),
            },
        ]
        .into_iter()
        .map(std::sync::Arc::new)
        .collect(),
        tools: vec![ToolDefinition {
            name: "get_weather".into(),
            description: "The weather in a city.".into(),
            input_schema: json!({"type": "object"}),
        }]
        .into(),
        max_output_tokens: Some(100),
    };
    collect(&model(&mock, 0), request).await.unwrap();

    let sent = mock.only_request();
    assert_eq!(sent.path, "/v1/responses");
    assert_eq!(sent.headers["authorization"], format!("Bearer {API_KEY}"));
    let body = sent.body;
    assert_eq!(body["model"], "gpt-4.1");
    assert_eq!(body["stream"], true);
    assert_eq!(body["store"], false);
    assert_eq!(body["instructions"], "Be brief.");
    assert_eq!(body["max_output_tokens"], 100);
    assert_eq!(
        body["input"],
        json!([
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/4AAQ"},
            ]},
            {"type": "message", "role": "assistant", "content": "Checking."},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather",
             "arguments": "{\"location\":\"Oslo\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "12 °C"},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "name": "get_weather", "description": "The weather in a city.",
            "parameters": {"type": "object"}, "strict": false}])
    );
}

#[tokio::test]
async fn a_failed_response_is_a_server_error() {
    let failed = response(
        "failed",
        Value::Null,
        json!({"error": {"code": "server_error", "message": "The model failed to generate a response."}}),
    );
    let stream = opening() + &event(json!({"type": "response.failed", "response": failed}), 2);
    let mock = MockProvider::start("/v1", [Reply::Events(stream)]).await;
    let (_, error) = events_then_error(&model(&mock, 0), ask("Hi")).await;
    assert_eq!(
        error,
        ModelError::Server {
            status: 500,
            message: "The model failed to generate a response.".into()
        }
    );
    assert!(error.is_retryable());
}

#[tokio::test]
async fn a_failed_response_for_a_bad_prompt_is_an_invalid_request() {
    let failed = response(
        "failed",
        Value::Null,
        json!({"error": {"code": "invalid_prompt", "message": "Invalid prompt: flagged."}}),
    );
    let stream = opening() + &event(json!({"type": "response.failed", "response": failed}), 2);
    let mock = MockProvider::start("/v1", [Reply::Events(stream)]).await;
    let (_, error) = events_then_error(&model(&mock, 0), ask("Hi")).await;
    assert_eq!(
        error,
        ModelError::InvalidRequest {
            status: 400,
            message: "Invalid prompt: flagged.".into()
        }
    );
}

#[tokio::test]
async fn an_error_event_ends_the_stream_with_an_error() {
    let stream = opening()
        + &event(
            json!({"type": "error", "code": "rate_limit_exceeded", "message": "Slow down", "param": null}),
            2,
        );
    let mock = MockProvider::start("/v1", [Reply::Events(stream)]).await;
    let (_, error) = events_then_error(&model(&mock, 0), ask("Hi")).await;
    assert_eq!(
        error,
        ModelError::RateLimited {
            retry_after: None,
            message: "Slow down".into()
        }
    );
}

#[tokio::test]
async fn an_incomplete_response_stops_at_max_tokens() {
    let incomplete = response(
        "incomplete",
        usage(10, 100, 0),
        json!({"incomplete_details": {"reason": "max_output_tokens"}}),
    );
    let stream = opening()
        + &event(
            json!({"type": "response.output_text.delta", "item_id": MESSAGE_ID, "output_index": 0,
            "content_index": 0, "delta": "Once upon"}),
            2,
        )
        + &event(
            json!({"type": "response.incomplete", "response": incomplete}),
            3,
        );
    let mock = MockProvider::start("/v1", [Reply::Events(stream)]).await;
    let response = collect(&model(&mock, 0), ask("A long story"))
        .await
        .unwrap();
    assert_eq!(response.text, "Once upon");
    assert_eq!(response.stop, Some(StopReason::MaxTokens));
    assert_eq!(response.usage.map(|u| u.output_tokens), Some(100));
}

/// A whole `response` object with these `output` items, as a server sends it that ignores
/// `stream: true`.
fn plain(status: &str, output: Value, usage_value: Value) -> Reply {
    Reply::Json(response(status, usage_value, json!({"output": output})).to_string())
}

fn function_call_item(call_id: &str, city: &str) -> Value {
    json!({"id": format!("fc_{call_id}"), "type": "function_call", "status": "completed",
        "arguments": json!({"location": city}).to_string(), "call_id": call_id,
        "name": "get_weather"})
}

#[tokio::test]
async fn a_plain_json_answer_is_accepted() {
    let output = json!([
        {"id": "rs_67ccd2bf17f0819081ff3bb2cf6508e6", "type": "reasoning", "summary": []},
        {"id": MESSAGE_ID, "type": "message", "status": "completed", "role": "assistant",
         "content": [
            {"type": "output_text", "text": "Hi there", "annotations": []},
            {"type": "output_text", "text": "!", "annotations": []},
         ]},
    ]);
    let mock = MockProvider::start(
        "/v1",
        [plain("completed", output, usage(3_000, 200, 2_048))],
    )
    .await;
    let mut settings = mock.settings(0);
    settings.pricing = Some(Pricing {
        input_per_million: 2_000_000,
        cached_input_per_million: 500_000,
        output_per_million: 8_000_000,
    });
    let model = OpenAiResponses::new("gpt-4.1", settings).unwrap();
    let events = collect_events(&model, ask("Hi")).await.unwrap();
    assert_eq!(
        events,
        [
            ModelEvent::TextDelta("Hi there!".into()),
            // 952 * 2 + 2048 * 0.5 + 200 * 8 = 1904 + 1024 + 1600 micro-dollars.
            ModelEvent::Usage(Usage {
                input_tokens: 3_000,
                output_tokens: 200,
                cached_input_tokens: 2_048,
                cost_micros: Some(4_528),
            }),
            ModelEvent::Done(StopReason::EndTurn),
        ]
    );
    assert_eq!(mock.only_request().body["stream"], true);
}

#[tokio::test]
async fn a_plain_json_answer_with_tool_calls_is_accepted() {
    let output = json!([
        function_call_item("call_paris", "Paris"),
        function_call_item("call_oslo", "Oslo"),
    ]);
    let mock = MockProvider::start("/v1", [plain("completed", output, usage(60, 40, 0))]).await;
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
    assert_eq!(response.usage.map(|u| u.output_tokens), Some(40));
}

#[tokio::test]
async fn a_plain_incomplete_response_stops_at_max_tokens() {
    let output = json!([{"id": MESSAGE_ID, "type": "message", "status": "incomplete",
        "role": "assistant", "content": [{"type": "output_text", "text": "Once upon", "annotations": []}]}]);
    let mut incomplete = response("incomplete", usage(10, 100, 0), json!({"output": output}));
    incomplete["incomplete_details"] = json!({"reason": "max_output_tokens"});
    let mock = MockProvider::start("/v1", [Reply::Json(incomplete.to_string())]).await;
    let response = collect(&model(&mock, 0), ask("A long story"))
        .await
        .unwrap();
    assert_eq!(response.text, "Once upon");
    assert_eq!(response.stop, Some(StopReason::MaxTokens));
}

#[tokio::test]
async fn a_plain_failed_or_unfinished_response_is_an_error() {
    let failed = response(
        "failed",
        Value::Null,
        json!({"error": {"code": "invalid_prompt", "message": "Invalid prompt: flagged."}}),
    );
    let mock = MockProvider::start(
        "/v1",
        [
            Reply::Json(failed.to_string()),
            plain("in_progress", json!([]), Value::Null),
            Reply::Json(json!({"id": RESPONSE_ID, "object": "response"}).to_string()),
        ],
    )
    .await;
    let model = model(&mock, 2);
    let error = collect(&model, ask("Hi")).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::InvalidRequest {
            status: 400,
            message: "Invalid prompt: flagged.".into()
        }
    );
    let error = collect(&model, ask("Hi")).await.unwrap_err();
    assert!(
        matches!(&error, ModelError::Malformed(m) if m.contains("`in_progress`")),
        "{error:?}"
    );
    let error = collect(&model, ask("Hi")).await.unwrap_err();
    assert!(
        matches!(&error, ModelError::Malformed(m) if m.contains("missing field `output`")),
        "{error:?}"
    );
    assert_eq!(mock.requests().len(), 3);
}

#[tokio::test]
async fn a_400_is_an_invalid_request_with_the_provider_message() {
    let body = json!({"error": {"message": "Unknown parameter: 'input[0].foo'.", "type": "invalid_request_error",
        "param": "input[0].foo", "code": "unknown_parameter"}});
    let mock = MockProvider::start("/v1", [Reply::status(400, body.to_string())]).await;
    let error = collect(&model(&mock, 2), ask("Hi")).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::InvalidRequest {
            status: 400,
            message: "Unknown parameter: 'input[0].foo'.".into()
        }
    );
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn a_403_is_unauthorized() {
    let body = json!({"error": {"message": "You are not allowed to sample from this model",
        "type": "invalid_request_error", "param": null, "code": null}});
    let mock = MockProvider::start("/v1", [Reply::status(403, body.to_string())]).await;
    let error = collect(&model(&mock, 2), ask("Hi")).await.unwrap_err();
    assert!(
        matches!(error, ModelError::Unauthorized { status: 403, .. }),
        "{error:?}"
    );
    assert_eq!(mock.requests().len(), 1);
}

fn rate_limited() -> Reply {
    let body = json!({"error": {"message": "Rate limit reached.", "type": "requests", "code": "rate_limit_exceeded"}});
    Reply::status(429, body.to_string()).with_header("retry-after-ms", "20")
}

#[tokio::test]
async fn a_429_is_retried_and_then_succeeds() {
    let mock = MockProvider::start("/v1", [rate_limited(), Reply::Events(hello_stream())]).await;
    assert_eq!(
        collect(&model(&mock, 1), ask("Hi")).await.unwrap().text,
        "Hi there!"
    );
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn a_429_that_persists_is_rate_limited_once_the_retries_are_spent() {
    let mock = MockProvider::start("/v1", [rate_limited(), rate_limited()]).await;
    let error = collect(&model(&mock, 1), ask("Hi")).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::RateLimited {
            retry_after: Some(Duration::from_millis(20)),
            message: "Rate limit reached.".into()
        }
    );
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn a_500_is_retried() {
    let body = json!({"error": {"message": "The server had an error.", "type": "server_error"}});
    let mock = MockProvider::start(
        "/v1",
        [
            Reply::status(500, body.to_string()),
            Reply::Events(hello_stream()),
        ],
    )
    .await;
    assert_eq!(
        collect(&model(&mock, 1), ask("Hi")).await.unwrap().text,
        "Hi there!"
    );
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn malformed_event_data_is_a_malformed_error() {
    let stream = opening()
        + "event: response.output_text.delta\ndata: {\"type\": \"response.output_text.delta\", \"delta\": 7}\n\n";
    let mock = MockProvider::start("/v1", [Reply::Events(stream)]).await;
    let (_, error) = events_then_error(&model(&mock, 0), ask("Hi")).await;
    assert!(
        matches!(&error, ModelError::Malformed(m) if m.contains("response.output_text.delta")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_a_retryable_error_after_the_deltas() {
    let full = hello_stream();
    let cut_at = full
        .find("response.output_text.done")
        .expect("a done event");
    let mock = MockProvider::start("/v1", [Reply::Cut(full[..cut_at].to_string())]).await;
    let (events, error) = events_then_error(&model(&mock, 2), ask("Hi")).await;
    assert_eq!(events.len(), 3, "the three deltas arrived: {events:?}");
    assert!(
        matches!(error, ModelError::Transport(_) | ModelError::Interrupted),
        "{error:?}"
    );
    assert!(error.is_retryable());
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_that_ends_without_completion_is_interrupted() {
    let full = hello_stream();
    let cut_at = full
        .find("event: response.completed")
        .expect("a completed event");
    let mock = MockProvider::start("/v1", [Reply::Events(full[..cut_at].to_string())]).await;
    let (_, error) = events_then_error(&model(&mock, 0), ask("Hi")).await;
    assert_eq!(error, ModelError::Interrupted);
}

#[tokio::test]
async fn the_api_key_appears_in_no_error_message() {
    let echo = json!({"error": {"message": format!("Incorrect API key provided: {API_KEY}"), "code": "invalid_api_key"}});
    let failed = response(
        "failed",
        Value::Null,
        json!({"error": {"code": "server_error", "message": API_KEY}}),
    );
    let mock = MockProvider::start(
        "/v1",
        [
            Reply::status(401, echo.to_string()),
            Reply::Events(
                opening() + &event(json!({"type": "response.failed", "response": failed}), 2),
            ),
            Reply::Cut(opening()),
        ],
    )
    .await;
    let model = model(&mock, 0);
    let mut errors = Vec::new();
    for _ in 0..3 {
        errors.push(events_then_error(&model, ask("Hi")).await.1);
    }
    assert!(matches!(
        &errors[0],
        ModelError::Unauthorized { status: 401, .. }
    ));
    assert!(matches!(&errors[1], ModelError::Server { message, .. } if message == "[redacted]"));
    errors.iter().for_each(assert_no_key);
    assert!(!format!("{model:?}").contains(API_KEY));
}

#[tokio::test]
async fn the_model_is_named_with_its_provider() {
    let model = OpenAiResponses::new(
        "gpt-4.1",
        HttpSettings::new("https://api.openai.com/v1", Some("k".into())),
    );
    assert_eq!(model.unwrap().name(), "openai-responses:gpt-4.1");
    let no_key = OpenAiResponses::new(
        "gpt-4.1",
        HttpSettings::new("https://api.openai.com/v1", None),
    );
    assert!(matches!(no_key, Err(ModelError::Configuration(_))));
}

#[tokio::test]
async fn a_tool_results_image_is_an_input_image_in_its_function_call_output() {
    let mock = MockProvider::start("/v1", [Reply::Events(hello_stream())]).await;
    let shot = ToolCall {
        id: "call_1".into(),
        name: "screenshot".into(),
        arguments: json!({}),
    };
    let report = ToolCall {
        id: "call_2".into(),
        name: "report".into(),
        arguments: json!({}),
    };
    let request = ModelRequest {
        instructions: String::new(),
        messages: vec![
            Message::user("Look"),
            Message::Assistant {
                content: vec![],
                tool_calls: vec![shot.clone(), report.clone()],
            },
            Message::Tool {
                result: ToolResult {
                    output: vec![
                        ContentPart::text("Here it is:"),
                        ContentPart::media("image/png", "iVBORw0KGgo="),
                    ],
                    ..ToolResult::text(&shot, "")
                },
            },
            Message::Tool {
                result: ToolResult {
                    output: vec![ContentPart::Media {
                        media_type: "application/pdf".into(),
                        data: "JVBERi0=".into(),
                        name: Some("file:///q3.pdf".into()),
                    }],
                    ..ToolResult::text(&report, "")
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
    let input = mock.only_request().body["input"].clone();
    assert_eq!(
        input.as_array().unwrap()[3..],
        [
            json!({"type": "function_call_output", "call_id": "call_1", "output": [
                {"type": "input_text", "text": "Here it is:"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
            ]}),
            json!({"type": "function_call_output", "call_id": "call_2", "output": [
                {"type": "input_file", "filename": "q3.pdf",
                 "file_data": "data:application/pdf;base64,JVBERi0="},
            ]}),
        ]
    );
}
