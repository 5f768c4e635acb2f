//! What the in-memory Client answers beyond Bots and Chats (issue 14): the HTTP tool and
//! delegate tool registry, HTTP tools called by its Turns through the outbound policy,
//! delegate tools running child Turns in this process, and files, all through the generic
//! call path with the server's operation IDs and shapes.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/scripts.rs"]
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use openbot_core::model::Model;
use openbot_core::outbound::OutboundPolicy;
use openbot_core::{ApiBody, ApiRequest, Client, ConnectOptions, Operations, connect};
use openbot_schema::{
    BotSpec, ErrorCode, Event, EventKind, ExecutionId, Limits, Message, PutDelegateTool,
    PutHttpTool, SendInput, ToolDefinition, ToolResult, TurnOutcome,
};
use serde_json::{Value, json};
use support::{Recording, scripted};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn memory(models: Vec<(&str, Arc<dyn Model>)>, outbound: Option<&str>) -> Arc<dyn Client> {
    let options = ConnectOptions {
        models: models
            .into_iter()
            .map(|(name, model)| (name.to_string(), model))
            .collect::<HashMap<_, _>>(),
        outbound: outbound.map(|allow| OutboundPolicy::parse(allow).unwrap()),
        ..ConnectOptions::default()
    };
    connect("memory://", options).await.unwrap()
}

fn bot(name: &str, model: &str, tools: &[&str]) -> BotSpec {
    BotSpec {
        name: name.into(),
        instructions: String::new(),
        model: model.into(),
        // The registry's definition replaces the Bot's: only the name matters here.
        tools: tools
            .iter()
            .map(|tool| ToolDefinition {
                name: (*tool).into(),
                description: String::new(),
                input_schema: json!({"type": "object"}),
            })
            .collect(),
        limits: Limits::default(),
        shared: false,
        memory: false,
        reminders: false,
        code_mode: false,
    }
}

fn http_tool(url: &str, retry_safe: bool) -> PutHttpTool {
    PutHttpTool {
        description: "Looks the weather up.".into(),
        input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        url: url.into(),
        retry_safe,
        background: false,
        headers: Default::default(),
        body: None,
    }
}

fn call_step(tool: &str, arguments: Value) -> Value {
    json!({"tool_calls": [{"name": tool, "arguments": arguments}]})
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

fn tool_results(events: &[Event]) -> Vec<ToolResult> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } => Some(result.clone()),
            _ => None,
        })
        .collect()
}

fn outcome(events: &[Event]) -> Option<TurnOutcome> {
    match events.last()?.kind {
        EventKind::TurnEnded { outcome, .. } => Some(outcome),
        _ => None,
    }
}

/// Runs one Turn of a new Chat of `bot` and returns its events.
async fn one_turn(client: &Arc<dyn Client>, bot: BotSpec) -> Vec<Event> {
    let bot = client.create_bot(bot).await.unwrap();
    let chat = client.create_chat(bot.id).await.unwrap();
    let receipt = client.send(chat.id, SendInput::text("go")).await.unwrap();
    events(client, receipt.execution_id).await
}

/// An endpoint on 127.0.0.1 that answers `sunny` and records each request's body and
/// `Idempotency-Key`.
async fn weather_endpoint() -> (String, Arc<Mutex<Vec<(Value, String)>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let app = axum::Router::new().route(
        "/weather",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, axum::Json(body): axum::Json<Value>| {
                let record = Arc::clone(&record);
                async move {
                    let key = headers
                        .get("idempotency-key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    record.lock().unwrap().push((body, key));
                    "sunny"
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/weather", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

/// An endpoint on 127.0.0.1 that reads the first request and closes the connection without an
/// answer (the answer is lost), then answers `applied` to later ones. Counts the requests.
async fn lossy_endpoint() -> (String, Arc<Mutex<Vec<String>>>) {
    let keys = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&keys);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/write", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            // Read the head and the (small) body.
            while let Ok(n) = socket.read(&mut buffer).await {
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buffer[..n]);
                let text = String::from_utf8_lossy(&request);
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            let text = String::from_utf8_lossy(&request).to_string();
            let key = text
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("idempotency-key:")
                        .map(|v| v.trim().to_string())
                })
                .unwrap_or_default();
            let first = {
                let mut keys = seen.lock().unwrap();
                keys.push(key);
                keys.len() == 1
            };
            if first {
                drop(socket);
            } else {
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\napplied",
                    )
                    .await;
            }
        }
    });
    (url, keys)
}

fn request(params: Value, body: Option<Value>) -> ApiRequest {
    ApiRequest {
        params: params.as_object().cloned().unwrap_or_default(),
        body: body.map(ApiBody::Json),
    }
}

#[tokio::test]
async fn a_bots_registered_http_tool_is_called_by_its_turn_with_an_idempotency_key() {
    let (url, seen) = weather_endpoint().await;
    let model =
        scripted(json!([call_step("weather", json!({"city": "Oslo"})), {"text": "It is sunny."}]));
    let client = memory(vec![("m", model)], Some("loopback")).await;
    let registered = client
        .put_tool(&"weather", &http_tool(&url, false))
        .await
        .unwrap();
    assert_eq!(registered.name, "weather");
    assert_eq!(registered.description, "Looks the weather up.");
    let events = one_turn(&client, bot("Weather", "m", &["weather"])).await;
    assert_eq!(outcome(&events), Some(TurnOutcome::Completed), "{events:?}");
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(
        Message::Tool {
            result: results[0].clone()
        }
        .text(),
        "sunny"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, json!({"city": "Oslo"}));
    assert!(!seen[0].1.is_empty(), "the call carries an Idempotency-Key");
}

#[tokio::test]
async fn by_default_a_tool_on_an_internal_address_is_refused_as_on_a_server() {
    let (url, seen) = weather_endpoint().await;
    let client = memory(vec![], None).await;
    let refused = client
        .put_tool(&"weather", &http_tool(&url, false))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InvalidInput, "{refused}");
    assert!(refused.message.contains("outbound policy"), "{refused}");
    for internal in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:9/",
    ] {
        let err = client
            .put_tool(&"meta", &http_tool(internal, false))
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidInput, "{internal}: {err}");
    }
    // A name that resolves to loopback registers (names are checked when resolved) and its
    // call is refused by the policy.
    let by_name = url.replace("127.0.0.1", "localhost");
    let model = scripted(json!([call_step("weather", json!({})), {"text": "no"}]));
    let client = memory(vec![("m", model)], None).await;
    client
        .put_tool(&"weather", &http_tool(&by_name, false))
        .await
        .unwrap();
    let events = one_turn(&client, bot("Weather", "m", &["weather"])).await;
    let results = tool_results(&events);
    assert!(results[0].is_error, "{results:?}");
    let text = Message::Tool {
        result: results[0].clone(),
    }
    .text();
    assert!(text.contains("outbound policy"), "{text}");
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the endpoint"
    );
}

#[tokio::test]
async fn a_retry_safe_tool_is_sent_again_with_the_same_key_after_a_lost_answer() {
    let (url, keys) = lossy_endpoint().await;
    let model = scripted(json!([call_step("write", json!({})), {"text": "done"}]));
    let client = memory(vec![("m", model)], Some("loopback")).await;
    client
        .put_tool(&"write", &http_tool(&url, true))
        .await
        .unwrap();
    let events = one_turn(&client, bot("Writer", "m", &["write"])).await;
    let results = tool_results(&events);
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(
        Message::Tool {
            result: results[0].clone()
        }
        .text(),
        "applied"
    );
    let keys = keys.lock().unwrap().clone();
    assert_eq!(keys.len(), 2, "sent again once");
    assert_eq!(keys[0], keys[1], "with the same Idempotency-Key");
}

#[tokio::test]
async fn a_tool_that_is_not_retry_safe_is_never_sent_again_after_a_lost_answer() {
    let (url, keys) = lossy_endpoint().await;
    let model = scripted(json!([call_step("write", json!({})), {"text": "done"}]));
    let client = memory(vec![("m", model)], Some("loopback")).await;
    client
        .put_tool(&"write", &http_tool(&url, false))
        .await
        .unwrap();
    let events = one_turn(&client, bot("Writer", "m", &["write"])).await;
    let results = tool_results(&events);
    assert!(results[0].is_error, "{results:?}");
    let text = Message::Tool {
        result: results[0].clone(),
    }
    .text();
    assert!(text.contains("not sent again"), "{text}");
    assert_eq!(keys.lock().unwrap().len(), 1, "sent once");
}

#[tokio::test]
async fn tool_registrations_are_checked_and_paged_as_on_a_server() {
    let client = memory(vec![], None).await;
    let url = "https://tools.example.com/x";
    for (name, tool) in [
        ("no spaces", http_tool(url, false)),
        ("ftp", http_tool("ftp://example.com/x", false)),
        ("nohost", http_tool("http://", false)),
        (
            "badschema",
            PutHttpTool {
                input_schema: json!({"type": 7}),
                ..http_tool(url, false)
            },
        ),
    ] {
        let err = client.put_tool(&name, &tool).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidInput, "{name}: {err}");
    }
    let missing_body = client
        .call("put_tool", request(json!({"name": "x"}), None))
        .await
        .unwrap_err();
    assert_eq!(missing_body.code, ErrorCode::InvalidInput, "{missing_body}");
    let extra = client
        .call("list_tools", request(json!({"colour": "red"}), None))
        .await
        .unwrap_err();
    assert_eq!(extra.code, ErrorCode::InvalidInput, "{extra}");
    assert!(
        client.list_tools_all().await.unwrap().is_empty(),
        "nothing was registered"
    );
    for name in ["c", "a", "b"] {
        client
            .put_tool(&name, &http_tool(url, false))
            .await
            .unwrap();
    }
    // Registering again replaces.
    client
        .put_tool(&"a", &http_tool("https://other.example.com/", true))
        .await
        .unwrap();
    let first = client.list_tools(Some(2), None).await.unwrap();
    let names: Vec<_> = first.items.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(first.items[0].retry_safe);
    let cursor = first.next_cursor.unwrap();
    // A page after a deleted item starts where it was.
    client.delete_tool(&"b").await.unwrap();
    let second = client.list_tools(Some(2), Some(&cursor)).await.unwrap();
    assert_eq!(
        second
            .items
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["c"]
    );
    assert_eq!(second.next_cursor, None);
    for (limit, cursor) in [(Some(0), None), (Some(201), None), (None, Some("at-1"))] {
        let err = client.list_tools(limit, cursor).await.unwrap_err();
        assert_eq!(
            err.code,
            ErrorCode::InvalidInput,
            "{limit:?} {cursor:?}: {err}"
        );
    }
    let gone = client.delete_tool(&"b").await.unwrap_err();
    assert_eq!(gone.code, ErrorCode::NotFound, "{gone}");
}

#[tokio::test]
async fn a_delegate_tool_runs_a_child_turn_whose_answer_is_the_tool_result() {
    let parent_model = Recording::new(scripted(json!([
        call_step("research", json!({"task": "Find the answer."})),
        {"text": "The researcher says 42."}
    ])));
    let child_model = Recording::new(scripted(json!([{"text": "42"}])));
    let client = memory(
        vec![
            ("parent", parent_model.clone()),
            ("child", child_model.clone()),
        ],
        None,
    )
    .await;
    let researcher = client
        .create_bot(bot("Researcher", "child", &[]))
        .await
        .unwrap();
    let delegate = client
        .put_delegate(
            &"research",
            &PutDelegateTool {
                description: String::new(),
                bot_id: researcher.id,
                limits: Limits::default(),
            },
        )
        .await
        .unwrap();
    assert_eq!(delegate.bot_id, researcher.id);
    let events = one_turn(&client, bot("Lead", "parent", &["research"])).await;
    assert_eq!(outcome(&events), Some(TurnOutcome::Completed), "{events:?}");
    // The model sees the delegate tool as the server describes it: one `task` argument.
    let offered = &parent_model.requests()[0].tools;
    assert_eq!(offered[0].name, "research");
    assert!(offered[0].description.contains("Researcher"), "{offered:?}");
    assert_eq!(offered[0].input_schema["required"], json!(["task"]));
    let child_id = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ChildStarted { child_id, kind, .. } => {
                assert_eq!(kind, "turn");
                Some(*child_id)
            }
            _ => None,
        })
        .expect("the parent's events show the child");
    let results = tool_results(&events);
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(
        Message::Tool {
            result: results[0].clone()
        }
        .text(),
        "42"
    );
    // The child is an execution of its own with a private history: only its task.
    let child_events = events_of(&client, child_id).await;
    assert_eq!(outcome(&child_events), Some(TurnOutcome::Completed));
    let child_requests = child_model.requests();
    assert_eq!(child_requests.len(), 1);
    assert_eq!(
        child_requests[0].messages.len(),
        1,
        "{:?}",
        child_requests[0].messages
    );
    assert_eq!(child_requests[0].messages[0].text(), "Find the answer.");
}

async fn events_of(client: &Arc<dyn Client>, id: ExecutionId) -> Vec<Event> {
    events(client, id).await
}

#[tokio::test]
async fn delegation_ends_at_the_depth_a_server_offers() {
    let depth = openbot_core::delegation::MAX_DELEGATION_DEPTH;
    // Every level calls the delegate tool while it is offered, then each answers in turn.
    let mut steps: Vec<Value> = (0..depth)
        .map(|_| call_step("deeper", json!({"task": "Go deeper."})))
        .collect();
    steps.push(json!({"text": "bottom"}));
    steps.extend((0..depth).map(|level| json!({"text": format!("level {level}")})));
    let model = Recording::new(scripted(json!(steps)));
    let client = memory(vec![("m", model.clone())], None).await;
    let spec = bot("Diver", "m", &["deeper"]);
    let diver = client.create_bot(spec.clone()).await.unwrap();
    client
        .put_delegate(
            &"deeper",
            &PutDelegateTool {
                description: "Dives.".into(),
                bot_id: diver.id,
                limits: Limits::default(),
            },
        )
        .await
        .unwrap();
    let chat = client.create_chat(diver.id).await.unwrap();
    let receipt = client.send(chat.id, SendInput::text("dive")).await.unwrap();
    let events = events(&client, receipt.execution_id).await;
    assert_eq!(outcome(&events), Some(TurnOutcome::Completed), "{events:?}");
    let offered: Vec<usize> = model.requests().iter().map(|r| r.tools.len()).collect();
    // Levels 0..depth offer the tool; the Turn at `depth` does not.
    assert_eq!(
        offered[..=depth].to_vec(),
        [vec![1; depth], vec![0]].concat(),
        "{offered:?}"
    );
}

#[tokio::test]
async fn a_childs_limits_are_narrowed_by_its_delegate_tool() {
    let parent_model = scripted(json!([
        call_step("helper", json!({"task": "Use a tool."})),
        {"text": "ok"}
    ]));
    // The child wants two steps (its call of a tool it lacks is answered at once with an
    // error); its delegate tool allows one.
    let child_model = scripted(json!([call_step("missing", json!({})), {"text": "never"}]));
    let client = memory(vec![("p", parent_model), ("c", child_model)], None).await;
    let helper = client.create_bot(bot("Helper", "c", &[])).await.unwrap();
    client
        .put_delegate(
            &"helper",
            &PutDelegateTool {
                description: String::new(),
                bot_id: helper.id,
                limits: Limits {
                    max_steps: Some(1),
                    ..Limits::default()
                },
            },
        )
        .await
        .unwrap();
    let events = one_turn(&client, bot("Lead", "p", &["helper"])).await;
    let results = tool_results(&events);
    assert!(results[0].is_error, "{results:?}");
    let text = Message::Tool {
        result: results[0].clone(),
    }
    .text();
    assert!(text.contains("max_steps"), "{text}");
}

#[tokio::test]
async fn a_delegate_registration_is_checked_as_on_a_server() {
    let client = memory(vec![("m", scripted(json!([])))], None).await;
    let helper = client.create_bot(bot("Helper", "m", &[])).await.unwrap();
    let good = PutDelegateTool {
        description: String::new(),
        bot_id: helper.id,
        limits: Limits::default(),
    };
    let missing = client
        .put_delegate(
            &"helper",
            &PutDelegateTool {
                bot_id: openbot_schema::BotId::new(),
                ..good.clone()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(missing.code, ErrorCode::NotFound, "{missing}");
    let bad_name = client.put_delegate(&"a b", &good).await.unwrap_err();
    assert_eq!(bad_name.code, ErrorCode::InvalidInput, "{bad_name}");
    let zero = PutDelegateTool {
        limits: Limits {
            max_steps: Some(0),
            ..Limits::default()
        },
        ..good.clone()
    };
    let bad_limits = client.put_delegate(&"helper", &zero).await.unwrap_err();
    assert_eq!(bad_limits.code, ErrorCode::InvalidInput, "{bad_limits}");
    assert!(client.list_delegates_all().await.unwrap().is_empty());
    client.put_delegate(&"helper", &good).await.unwrap();
    assert_eq!(client.list_delegates_all().await.unwrap().len(), 1);
    client.delete_delegate(&"helper").await.unwrap();
    let gone = client.delete_delegate(&"helper").await.unwrap_err();
    assert_eq!(gone.code, ErrorCode::NotFound, "{gone}");
}

#[tokio::test]
async fn a_file_is_stored_listed_read_and_deleted_in_memory() {
    let client = memory(vec![], None).await;
    let bytes = b"line one\n\x00\xffbinary".to_vec();
    let first = client
        .upload_file("notes.bin", bytes.clone(), "application/octet-stream")
        .await
        .unwrap();
    assert_eq!(first.size, bytes.len() as u64);
    assert_eq!(first.sha256, openbot_core::files::sha256_hex(&bytes));
    let second = client
        .upload_file("b.txt", b"b".to_vec(), "text/plain")
        .await
        .unwrap();
    let third = client
        .upload_file("c.txt", b"c".to_vec(), "text/plain")
        .await
        .unwrap();
    assert_eq!(client.get_file(&first.id).await.unwrap(), first);
    let content = client.file_content(&first.id).await.unwrap();
    assert_eq!(content.data, bytes);
    assert_eq!(content.content_type, "application/octet-stream");
    // Newest first, paged.
    let page = client.list_files(Some(2), None).await.unwrap();
    assert_eq!(
        page.items.iter().map(|f| f.id).collect::<Vec<_>>(),
        [third.id, second.id]
    );
    let rest = client
        .list_files(Some(2), page.next_cursor.as_deref())
        .await
        .unwrap();
    assert_eq!(
        rest.items.iter().map(|f| f.id).collect::<Vec<_>>(),
        [first.id]
    );
    assert_eq!(rest.next_cursor, None);
    client.delete_file(&first.id).await.unwrap();
    for err in [
        client.get_file(&first.id).await.unwrap_err(),
        client
            .file_content(&first.id)
            .await
            .map(|_| ())
            .unwrap_err(),
        client.delete_file(&first.id).await.unwrap_err(),
    ] {
        assert_eq!(err.code, ErrorCode::NotFound, "{err}");
    }
    assert_eq!(client.list_files_all().await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_file_over_the_limit_or_with_a_bad_name_or_type_is_refused() {
    let client = memory(vec![], None).await;
    let too_large = client
        .upload_file(
            "big.bin",
            vec![0; openbot_core::files::MAX_FILE_BYTES + 1],
            "application/octet-stream",
        )
        .await
        .unwrap_err();
    assert_eq!(too_large.code, ErrorCode::PayloadTooLarge, "{too_large}");
    for (name, media_type) in [("", "text/plain"), ("a/b", "text/plain"), ("a", "plain")] {
        let err = client
            .upload_file(name, b"x".to_vec(), media_type)
            .await
            .unwrap_err();
        assert_eq!(
            err.code,
            ErrorCode::InvalidInput,
            "{name:?} {media_type:?}: {err}"
        );
    }
    let json_body = client
        .call(
            "upload_file",
            request(json!({"name": "a.txt"}), Some(json!({}))),
        )
        .await
        .unwrap_err();
    assert_eq!(json_body.code, ErrorCode::InvalidInput, "{json_body}");
    let bad_id = client.get_file(&"not-an-id").await.unwrap_err();
    assert_eq!(bad_id.code, ErrorCode::InvalidInput, "{bad_id}");
    assert!(
        client.list_files_all().await.unwrap().is_empty(),
        "nothing was stored"
    );
}

#[tokio::test]
async fn an_operation_only_a_server_has_still_says_so_in_memory() {
    let client = memory(vec![], None).await;
    let err = client
        .call("list_tokens", ApiRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidInput);
    assert!(err.message.contains("needs an OpenBot server"), "{err}");
}

#[tokio::test]
async fn every_operation_the_table_marks_for_memory_is_answered_there() {
    let client = memory(vec![], None).await;
    let marked: Vec<_> = openbot_core::OPERATIONS
        .iter()
        .filter(|op| op.memory && op.client_method.is_none())
        .collect();
    assert!(!marked.is_empty());
    for op in marked {
        // Without parameters most refuse the request, but none for needing a server.
        if let Err(err) = client.call(op.id, ApiRequest::default()).await {
            assert!(
                !err.message.contains("needs an OpenBot server"),
                "{}: {err}",
                op.id
            );
        }
    }
}

#[tokio::test]
async fn cancelling_the_parent_cancels_its_delegated_child() {
    let parent_model = scripted(json!([
        call_step("slow", json!({"task": "Take your time."})),
        {"text": "never"}
    ]));
    let child_model = scripted(json!([{"deltas": ["thinking"], "delay_ms": 5000}]));
    let client = memory(vec![("p", parent_model), ("c", child_model)], None).await;
    let slow = client.create_bot(bot("Slow", "c", &[])).await.unwrap();
    client
        .put_delegate(
            &"slow",
            &PutDelegateTool {
                description: String::new(),
                bot_id: slow.id,
                limits: Limits::default(),
            },
        )
        .await
        .unwrap();
    let lead = client
        .create_bot(bot("Lead", "p", &["slow"]))
        .await
        .unwrap();
    let chat = client.create_chat(lead.id).await.unwrap();
    let receipt = client.send(chat.id, SendInput::text("go")).await.unwrap();
    let mut stream = client.observe(receipt.execution_id, 0).await.unwrap();
    let child = loop {
        let event = stream.next().await.unwrap().unwrap();
        if let EventKind::ChildStarted { child_id, .. } = event.kind {
            break child_id;
        }
    };
    client.cancel_execution(receipt.execution_id).await.unwrap();
    let parent_events = events(&client, receipt.execution_id).await;
    assert_eq!(outcome(&parent_events), Some(TurnOutcome::Cancelled));
    let child_events = events(&client, child).await;
    assert_eq!(
        outcome(&child_events),
        Some(TurnOutcome::Cancelled),
        "{child_events:?}"
    );
}

#[tokio::test]
async fn a_delegated_childs_usage_counts_for_its_parent() {
    let usage = |input: u64, output: u64| json!({"input_tokens": input, "output_tokens": output});
    let parent_model = scripted(json!([
        {"tool_calls": [{"name": "helper", "arguments": {"task": "t"}}], "usage": usage(10, 1)},
        {"text": "ok", "usage": usage(20, 2)}
    ]));
    let child_model = scripted(json!([{"text": "42", "usage": usage(7, 3)}]));
    let client = memory(vec![("p", parent_model), ("c", child_model)], None).await;
    let helper = client.create_bot(bot("Helper", "c", &[])).await.unwrap();
    client
        .put_delegate(
            &"helper",
            &PutDelegateTool {
                description: String::new(),
                bot_id: helper.id,
                limits: Limits::default(),
            },
        )
        .await
        .unwrap();
    let lead = client
        .create_bot(bot("Lead", "p", &["helper"]))
        .await
        .unwrap();
    let chat = client.create_chat(lead.id).await.unwrap();
    let receipt = client.send(chat.id, SendInput::text("go")).await.unwrap();
    let events = events(&client, receipt.execution_id).await;
    let Some(EventKind::TurnEnded { usage, .. }) = events.last().map(|e| &e.kind) else {
        panic!("the Turn ended: {events:?}");
    };
    assert_eq!((usage.input_tokens, usage.output_tokens), (37, 6));
    let execution = client.get_execution(receipt.execution_id).await.unwrap();
    assert_eq!(execution.usage, *usage);
}
