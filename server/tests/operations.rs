//! The one generic call path (issue 14): every operation of schema/openapi.json is in the
//! generated table and reachable through `Client::call` in both modes; the generated typed
//! methods carry JSON and bytes; in memory an operation only a server has says so.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/served.rs"]
mod served;

use std::collections::BTreeSet;
use std::sync::Arc;

use openbot_core::{
    ApiAnswer, ApiRequest, Client, ConnectOptions, OPERATIONS, Operations, connect,
};
use openbot_schema::{BotSpec, ContentPart, ErrorCode, EventPage, Limits, SendInput};
use serde_json::json;
use served::Served;

fn script(steps: serde_json::Value) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.json");
    std::fs::write(&path, json!({ "steps": steps }).to_string()).unwrap();
    (dir, format!("scripted:{}", path.display()))
}

fn bot(model: &str) -> BotSpec {
    BotSpec {
        name: "Ops".into(),
        instructions: String::new(),
        model: model.into(),
        tools: vec![],
        limits: Limits::default(),
        shared: false,
        memory: false,
        reminders: false,
        code_mode: false,
    }
}

async fn remote(served: &Served) -> Arc<dyn Client> {
    connect(
        &served.base,
        ConnectOptions {
            token: Some(served.token.clone()),
            ..ConnectOptions::default()
        },
    )
    .await
    .unwrap()
}

async fn memory() -> Arc<dyn Client> {
    connect("memory://", ConnectOptions::default())
        .await
        .unwrap()
}

fn request(params: serde_json::Value, body: Option<serde_json::Value>) -> ApiRequest {
    ApiRequest {
        params: params.as_object().cloned().unwrap_or_default(),
        body: body.map(openbot_core::ApiBody::Json),
    }
}

#[test]
fn the_operation_table_holds_every_operation_of_the_schema_and_no_other() {
    let document: serde_json::Value =
        serde_json::from_str(include_str!("../../schema/openapi.json")).unwrap();
    let mut in_schema = BTreeSet::new();
    for methods in document["paths"].as_object().unwrap().values() {
        for operation in methods.as_object().unwrap().values() {
            in_schema.insert(operation["operationId"].as_str().unwrap().to_string());
        }
    }
    let in_table: BTreeSet<String> = OPERATIONS.iter().map(|op| op.id.to_string()).collect();
    assert_eq!(in_schema, in_table);
}

#[tokio::test]
async fn in_memory_an_operation_only_a_server_has_is_invalid_input_that_says_so() {
    let client = memory().await;
    let server_only: Vec<_> = OPERATIONS.iter().filter(|op| !op.memory).collect();
    let listed = client
        .call("list_apps", ApiRequest::default())
        .await
        .unwrap();
    assert_eq!(
        listed.decode::<serde_json::Value>().unwrap()["items"],
        serde_json::json!([])
    );
    assert!(!server_only.is_empty());
    // The memory operations answer from the in-process memory book (docs/memory.md).
    for id in openbot_core::memories::IN_MEMORY_OPERATIONS {
        assert!(
            OPERATIONS.iter().any(|op| op.id == *id && op.memory),
            "{id} is an operation that memory:// answers"
        );
    }
    for op in server_only {
        let err = client.call(op.id, ApiRequest::default()).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidInput, "{}: {err}", op.id);
        assert!(
            err.message.contains("needs an OpenBot server"),
            "{}: {err}",
            op.id
        );
    }
}

#[tokio::test]
async fn an_operation_the_api_lacks_is_invalid_input_in_both_modes() {
    let served = Served::start();
    for client in [memory().await, remote(&served).await] {
        let err = client
            .call("launch_rockets", ApiRequest::default())
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidInput, "{err}");
    }
}

#[tokio::test]
async fn a_hand_declared_operation_through_the_call_path_does_what_its_method_does() {
    let served = Served::start();
    let (_dir, model) = script(json!([{"text": "Hello."}]));
    for client in [memory().await, remote(&served).await] {
        let created = client
            .call(
                "create_bot",
                request(json!({}), Some(serde_json::to_value(bot(&model)).unwrap())),
            )
            .await
            .unwrap();
        let ApiAnswer::Json(created) = created else {
            panic!("create_bot answers JSON")
        };
        let id: openbot_schema::BotId = serde_json::from_value(created["id"].clone()).unwrap();
        assert_eq!(client.get_bot(id).await.unwrap().spec.name, "Ops");
    }
}

#[tokio::test]
async fn the_events_operation_answers_pages_to_the_end_in_both_modes() {
    let served = Served::start();
    let (_dir, model) = script(json!([{"text": "Hello."}]));
    for client in [memory().await, remote(&served).await] {
        let created = client.create_bot(bot(&model)).await.unwrap();
        let chat = client.create_chat(created.id).await.unwrap();
        let receipt = client
            .send(
                chat.id,
                SendInput {
                    content: vec![ContentPart::text("hi")],
                    command_key: None,
                },
            )
            .await
            .unwrap();
        let mut after = 0;
        let mut types = Vec::new();
        for _ in 0..50 {
            let page: EventPage = client
                .call(
                    "events",
                    request(
                        json!({"id": receipt.execution_id.to_string(), "after": after, "wait": 5}),
                        None,
                    ),
                )
                .await
                .unwrap()
                .decode()
                .unwrap();
            types.extend(page.events.iter().map(|e| {
                serde_json::to_value(e).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_string()
            }));
            after = page.next_after;
            if page.ended {
                break;
            }
        }
        assert_eq!(types.first().map(String::as_str), Some("turn_started"));
        assert_eq!(types.last().map(String::as_str), Some("turn_ended"));
    }
}

#[tokio::test]
async fn a_file_keeps_its_bytes_and_media_type_through_the_generated_methods() {
    let served = Served::start();
    let client = remote(&served).await;
    let bytes = b"line one\n\x00\xffbinary".to_vec();
    let stored = client
        .upload_file("notes.bin", bytes.clone(), "application/octet-stream")
        .await
        .unwrap();
    let content = client.file_content(&stored.id).await.unwrap();
    assert_eq!(content.data, bytes);
    assert_eq!(content.content_type, "application/octet-stream");
    client.delete_file(&stored.id).await.unwrap();
    let gone = client.get_file(&stored.id).await.unwrap_err();
    assert_eq!(gone.code, ErrorCode::NotFound, "{gone}");
}

#[tokio::test]
async fn a_public_operation_needs_no_token() {
    let served = Served::start();
    let anonymous = connect(&served.base, ConnectOptions::default())
        .await
        .unwrap();
    assert_eq!(anonymous.health().await.unwrap().status, "ok");
    let refused = anonymous.list_tokens(None, None).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::Unauthorized, "{refused}");
}

/// The structure of a JSON answer: its keys and the kinds of its values, not the values.
fn shape(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), shape(v))).collect())
        }
        Value::Array(items) => Value::Array(items.first().map(shape).into_iter().collect()),
        Value::String(_) => json!("string"),
        Value::Number(_) => json!("number"),
        Value::Bool(_) => json!("bool"),
        Value::Null => json!("null"),
    }
}

/// What one call answered, as far as both modes must agree: the answer's shape, or the
/// error's code.
fn outcome(answer: Result<ApiAnswer, openbot_core::Error>) -> serde_json::Value {
    match answer {
        Ok(ApiAnswer::Json(value)) => json!({"json": shape(&value)}),
        Ok(ApiAnswer::Empty) => json!("empty"),
        Ok(ApiAnswer::Bytes(bytes)) => json!({
            "bytes": bytes.data,
            "type": bytes.content_type.split(';').next().unwrap_or_default(),
        }),
        Err(err) => json!({"error": err.code}),
    }
}

fn bytes_request(params: serde_json::Value, data: &[u8], content_type: &str) -> ApiRequest {
    ApiRequest {
        params: params.as_object().cloned().unwrap_or_default(),
        body: Some(openbot_core::ApiBody::Bytes {
            data: data.to_vec(),
            content_type: content_type.into(),
        }),
    }
}

/// The same calls of the tool, delegate and file operations, with good and bad input, and
/// what each answered.
async fn registry_and_files(client: &Arc<dyn Client>) -> Vec<(String, serde_json::Value)> {
    let (_dir, model) = script(json!([]));
    let helper = client.create_bot(bot(&model)).await.unwrap();
    let tool = json!({"description": "Looks up.", "input_schema": {"type": "object"},
                      "url": "https://tools.example.com/lookup", "retry_safe": true});
    let mut calls: Vec<(&str, ApiRequest)> = vec![
        ("list_tools", request(json!({}), None)),
        (
            "put_tool",
            request(json!({"name": "lookup"}), Some(tool.clone())),
        ),
        (
            "put_tool",
            request(json!({"name": "second"}), Some(tool.clone())),
        ),
        ("list_tools", request(json!({"limit": 1}), None)),
        (
            "put_tool",
            request(json!({"name": "bad name"}), Some(tool.clone())),
        ),
        (
            "put_tool",
            request(
                json!({"name": "ftp"}),
                Some(json!({"input_schema": {"type": "object"}, "url": "ftp://example.com/"})),
            ),
        ),
        (
            "put_tool",
            request(
                json!({"name": "meta"}),
                Some(json!({"input_schema": {"type": "object"}, "url": "http://169.254.169.254/"})),
            ),
        ),
        (
            "put_tool",
            request(
                json!({"name": "x"}),
                Some(json!({"url": "https://example.com/"})),
            ),
        ),
        ("list_tools", request(json!({"limit": 0}), None)),
        ("list_tools", request(json!({"cursor": "nonsense"}), None)),
        ("delete_tool", request(json!({"name": "lookup"}), None)),
        ("delete_tool", request(json!({"name": "lookup"}), None)),
        (
            "put_delegate",
            request(
                json!({"name": "helper"}),
                Some(
                    json!({"bot_id": helper.id, "description": "Helps.", "limits": {"max_steps": 3}}),
                ),
            ),
        ),
        (
            "put_delegate",
            request(
                json!({"name": "ghost"}),
                Some(json!({"bot_id": openbot_schema::BotId::new()})),
            ),
        ),
        (
            "put_delegate",
            request(
                json!({"name": "zero"}),
                Some(json!({"bot_id": helper.id, "limits": {"max_steps": 0}})),
            ),
        ),
        ("list_delegates", request(json!({}), None)),
        ("delete_delegate", request(json!({"name": "helper"}), None)),
        ("delete_delegate", request(json!({"name": "helper"}), None)),
        ("list_files", request(json!({}), None)),
        (
            "upload_file",
            bytes_request(json!({"name": "a/b"}), b"x", "text/plain"),
        ),
        (
            "upload_file",
            bytes_request(json!({"name": "a.txt"}), b"x", "plain"),
        ),
        ("get_file", request(json!({"id": "not-an-id"}), None)),
        (
            "get_file",
            request(json!({"id": openbot_schema::FileId::new()}), None),
        ),
    ];
    let too_large = vec![0u8; openbot_core::files::MAX_FILE_BYTES + 1];
    calls.push((
        "upload_file",
        bytes_request(
            json!({"name": "big.bin"}),
            &too_large,
            "application/octet-stream",
        ),
    ));
    let mut answers = Vec::new();
    for (op, request) in calls.drain(..) {
        answers.push((op.to_string(), outcome(client.call(op, request).await)));
    }
    let stored = client
        .upload_file("notes.txt", b"remember".to_vec(), "text/plain")
        .await
        .unwrap();
    let id = json!({"id": stored.id});
    for (op, request) in [
        ("get_file", request(id.clone(), None)),
        ("list_files", request(json!({"limit": 5}), None)),
        ("file_content", request(id.clone(), None)),
        ("delete_file", request(id.clone(), None)),
        ("file_content", request(id.clone(), None)),
        ("delete_file", request(id, None)),
    ] {
        answers.push((op.to_string(), outcome(client.call(op, request).await)));
    }
    client.delete_bot(helper.id).await.unwrap();
    answers
}

#[tokio::test]
async fn the_tool_delegate_and_file_operations_answer_alike_in_memory_and_on_a_server() {
    let served = Served::start();
    let in_memory = registry_and_files(&memory().await).await;
    let on_server = registry_and_files(&remote(&served).await).await;
    assert_eq!(in_memory.len(), on_server.len());
    for (memory, server) in in_memory.iter().zip(&on_server) {
        assert_eq!(memory, server, "memory:// and the server differ");
    }
    // The calls reached both sides of every answer kind.
    let kinds: BTreeSet<String> = in_memory
        .iter()
        .map(|(_, answer)| match answer {
            serde_json::Value::Object(map) => map.keys().next().cloned().unwrap_or_default(),
            other => other.to_string(),
        })
        .collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            "bytes".into(),
            "error".into(),
            "json".into(),
            "\"empty\"".into()
        ])
    );
}

/// An endpoint on 127.0.0.1 that answers `sunny` and records each request's JSON body.
async fn weather_endpoint() -> (String, Arc<std::sync::Mutex<Vec<serde_json::Value>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let app = axum::Router::new().route(
        "/weather",
        axum::routing::post(move |axum::Json(body): axum::Json<serde_json::Value>| {
            let record = Arc::clone(&record);
            async move {
                record.lock().unwrap().push(body);
                "sunny"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/weather", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

#[tokio::test]
async fn a_bots_http_tool_is_called_alike_in_memory_and_on_a_server() {
    let served = Served::start();
    let (url, seen) = weather_endpoint().await;
    let allowed = connect(
        "memory://",
        ConnectOptions {
            outbound: Some(openbot_core::outbound::OutboundPolicy::parse("loopback").unwrap()),
            ..ConnectOptions::default()
        },
    )
    .await
    .unwrap();
    let mut results = Vec::new();
    for client in [allowed, remote(&served).await] {
        let (_dir, model) = script(json!([
            {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
            {"text": "Sunny."}
        ]));
        client
            .put_tool(
                &"weather",
                &openbot_schema::PutHttpTool {
                    description: "The weather.".into(),
                    input_schema: json!({"type": "object"}),
                    url: url.clone(),
                    retry_safe: false,
                    background: false,
                    headers: Default::default(),
                    body: None,
                },
            )
            .await
            .unwrap();
        let mut spec = bot(&model);
        spec.tools = vec![openbot_schema::ToolDefinition {
            name: "weather".into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
        }];
        let created = client.create_bot(spec).await.unwrap();
        let chat = client.create_chat(created.id).await.unwrap();
        let receipt = client
            .send(
                chat.id,
                SendInput {
                    content: vec![ContentPart::text("weather?")],
                    command_key: None,
                },
            )
            .await
            .unwrap();
        use futures::StreamExt as _;
        let all: Vec<openbot_schema::Event> = client
            .observe(receipt.execution_id, 0)
            .await
            .unwrap()
            .map(|e| e.unwrap())
            .collect()
            .await;
        let result = all
            .iter()
            .find_map(|e| match &e.kind {
                openbot_schema::EventKind::ToolResult { result, .. } => Some(result.clone()),
                _ => None,
            })
            .expect("the Turn called the tool");
        results.push((result.name, result.output, result.is_error));
    }
    assert_eq!(results[0], results[1], "memory:// and the server differ");
    assert!(!results[0].2, "{results:?}");
    assert_eq!(
        *seen.lock().unwrap(),
        vec![json!({"city": "Oslo"}), json!({"city": "Oslo"})],
        "each mode sent the call once"
    );
}

/// The model-free code run (`run_code`) with good and bad input, and what each answered in
/// full (the program's results are deterministic, so both modes must agree on every value).
async fn code_runs(client: &Arc<dyn Client>, url: &str) -> Vec<(String, serde_json::Value)> {
    client
        .put_tool(
            &"weather",
            &openbot_schema::PutHttpTool {
                description: "The weather.".into(),
                input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
                url: url.into(),
                retry_safe: false,
                background: false,
                headers: Default::default(),
                body: None,
            },
        )
        .await
        .unwrap();
    let (_dir, model) = script(json!([{"text": "unused"}]));
    let mut spec = bot(&model);
    spec.tools = ["weather", "local"]
        .into_iter()
        .map(|name| openbot_schema::ToolDefinition {
            name: name.into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
        })
        .collect();
    let created = client.create_bot(spec).await.unwrap();
    let id = created.id.to_string();
    let programs = [
        (
            "two calls",
            "const a = await tools.weather({city: 'Oslo'}); console.log('got', a); return [a, await tools.weather({city: 'Bern'})];",
        ),
        (
            "a host tool",
            "try { await tools.local({}); } catch (e) { return [e.name, e.code, e.message]; }",
        ),
        ("bad arguments", "await tools.weather({town: 1});"),
        ("a syntax error", "return (;"),
        ("no such tool", "return typeof tools.nothing;"),
        ("frozen api", "'use strict'; tools.weather = 1;"),
    ];
    let typed = client
        .run_code(
            &created.id,
            &openbot_schema::CodeRun {
                code: "return await tools.weather({city: 'Oslo'})".into(),
                command_key: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(typed.value, Some(json!("sunny")), "{typed:?}");
    let mut out = Vec::new();
    for (what, code) in programs {
        let answer = client
            .call(
                "run_code",
                request(json!({"id": id}), Some(json!({"code": code}))),
            )
            .await;
        let mut value = match answer {
            Ok(ApiAnswer::Json(value)) => value,
            other => outcome(other),
        };
        // A server's run is an execution of its own; memory:// has none to name.
        if let Some(fields) = value.as_object_mut() {
            fields.remove("execution_id");
        }
        out.push((what.to_string(), value));
    }
    let bad = [
        (
            "unknown bot",
            json!({"id": openbot_schema::BotId::new().to_string()}),
            Some(json!({"code": "return 1"})),
        ),
        (
            "bad id",
            json!({"id": "nope"}),
            Some(json!({"code": "return 1"})),
        ),
        ("no body", json!({"id": id}), None),
        (
            "no code",
            json!({"id": id}),
            Some(json!({"program": "return 1"})),
        ),
    ];
    for (what, params, body) in bad {
        out.push((
            what.to_string(),
            outcome(client.call("run_code", request(params, body)).await),
        ));
    }
    out
}

#[tokio::test]
async fn a_model_free_code_run_answers_alike_in_memory_and_on_a_server() {
    let served = Served::start();
    let (url, seen) = weather_endpoint().await;
    let allowed = connect(
        "memory://",
        ConnectOptions {
            outbound: Some(openbot_core::outbound::OutboundPolicy::parse("loopback").unwrap()),
            ..ConnectOptions::default()
        },
    )
    .await
    .unwrap();
    let memory = code_runs(&allowed, &url).await;
    let server = code_runs(&remote(&served).await, &url).await;
    assert_eq!(memory, server, "memory:// and the server differ");
    assert_eq!(memory[0].1["ok"], json!(true), "{memory:?}");
    assert_eq!(memory[0].1["value"], json!(["sunny", "sunny"]));
    assert_eq!(
        memory[1].1["value"][1],
        json!("tool.needs_turn"),
        "{memory:?}"
    );
    assert_eq!(
        memory[2].1["error"]["code"],
        json!("tool.invalid_arguments"),
        "{memory:?}"
    );
    assert_eq!(memory[6].1, json!({"error": "not_found"}));
    assert_eq!(memory[7].1, json!({"error": "invalid_input"}));
    // Each mode sent the typed call and the two good calls once; the refused ones reached
    // nothing.
    assert_eq!(seen.lock().unwrap().len(), 6);
}

#[tokio::test]
async fn a_server_ends_a_code_run_at_its_configured_wall_time() {
    // 50 ms: far less than the default fuel takes to run out, so the wall time ends the loop.
    let served = Served::start_with(&[("OPENBOT_CODE_WALL_MS", "50")]);
    let client = remote(&served).await;
    let (_dir, model) = script(json!([{"text": "unused"}]));
    let created = client.create_bot(bot(&model)).await.unwrap();
    let answer = client
        .run_code(
            &created.id,
            &openbot_schema::CodeRun {
                code: "while (true) {}".into(),
                command_key: None,
            },
        )
        .await
        .unwrap();
    let error = answer.error.expect("the run failed");
    assert_eq!(error.code, "code_mode.deadline_exceeded", "{error:?}");
    assert!(error.message.contains("50 ms"), "{error:?}");
}
