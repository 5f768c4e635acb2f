//! Observability against real `openbot serve` processes (docs/observability.md): a Turn is
//! one OTLP trace of nested GenAI spans, across a SIGKILL takeover too; an incoming
//! `traceparent` is honoured; `/metrics` is the operator's and passes `promtool`; JSON logs
//! carry the execution's fields from its span and never the message text; a Vault secret
//! reaches neither spans nor logs; the spans a Turn's latency split reads are there.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/endpoint.rs"]
mod endpoint;
#[path = "support/otlp.rs"]
mod otlp;
#[path = "support/served.rs"]
mod served;

use std::collections::HashMap;
use std::io::Write as _;
use std::process::{Command, Stdio};

use openbot_core::{Client, ConnectOptions, Operations, RemoteClient, connect};
use openbot_schema::{BotSpec, ExecutionId, Limits, PutHttpTool, SendInput, ToolDefinition};
use otlp::{Received, Receiver};
use serde_json::json;
use served::Served;

/// A word in the user's message and the tool's arguments that must never be exported or
/// logged: content capture is off by default.
const PRIVATE: &str = "zebra-private-7731";

fn script(steps: serde_json::Value) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.json");
    std::fs::write(&path, json!({ "steps": steps }).to_string()).unwrap();
    (dir, format!("scripted:{}", path.display()))
}

fn pay_definition() -> ToolDefinition {
    ToolDefinition {
        name: "pay".into(),
        description: "Pays.".into(),
        input_schema: json!({"type": "object"}),
    }
}

fn pay_then_text() -> serde_json::Value {
    json!([
        {"tool_calls": [{"id": "call_1", "name": "pay", "arguments": {"memo": PRIVATE}}]},
        {"text": "Paid."}
    ])
}

/// The server's admin client, and a Bot whose Turn calls the HTTP tool `pay` at `url`.
async fn bot_with_pay(
    served: &Served,
    url: String,
    retry_safe: bool,
) -> (RemoteClient, BotSpec, tempfile::TempDir) {
    let admin = RemoteClient::new(
        &served.base,
        ConnectOptions {
            token: Some(served.token.clone()),
            ..ConnectOptions::default()
        },
    )
    .unwrap();
    admin
        .put_tool(
            &"pay",
            &PutHttpTool {
                description: "Pays.".into(),
                input_schema: json!({"type": "object"}),
                url,
                retry_safe,
                background: false,
                headers: Default::default(),
                body: None,
            },
        )
        .await
        .unwrap();
    let (dir, model) = script(pay_then_text());
    let spec = BotSpec {
        name: "Cashier".into(),
        instructions: String::new(),
        model,
        tools: vec![pay_definition()],
        limits: Limits::default(),
        shared: false,
        memory: false,
        reminders: false,
        code_mode: false,
    };
    (admin, spec, dir)
}

async fn client(served: &Served) -> std::sync::Arc<dyn Client> {
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

/// A Turn of a fresh Bot that calls `pay` at `url`, sent with `text`, not yet ended.
struct PayTurn {
    bot: openbot_schema::Bot,
    chat: openbot_schema::Chat,
    receipt: openbot_schema::SendReceipt,
    _script: tempfile::TempDir,
}

async fn start_pay_turn(served: &Served, url: String, retry_safe: bool, text: String) -> PayTurn {
    let (_admin, spec, script) = bot_with_pay(served, url, retry_safe).await;
    let remote = client(served).await;
    let bot = remote.create_bot(spec).await.unwrap();
    let chat = remote.create_chat(bot.id).await.unwrap();
    let receipt = remote.send(chat.id, SendInput::text(text)).await.unwrap();
    PayTurn {
        bot,
        chat,
        receipt,
        _script: script,
    }
}

/// The same, read to its end.
async fn pay_turn(served: &Served, text: String) -> PayTurn {
    let (url, _) = endpoint::endpoint(0);
    let turn = start_pay_turn(served, url, false, text).await;
    let (_, ended) = served
        .events_to_end(&turn.receipt.execution_id.to_string())
        .await;
    assert!(ended);
    turn
}

fn trace_of(execution: ExecutionId) -> Vec<u8> {
    execution.as_uuid().as_bytes().to_vec()
}

fn one<'a>(spans: &'a [Received], name: &str) -> &'a Received {
    let found: Vec<_> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one `{name}` span: {found:?}");
    found[0]
}

/// A model request's span: `chat {model}` (a scripted model's model is its script's path).
fn is_chat(span: &Received) -> bool {
    span.name.starts_with("chat ") && span.attribute("gen_ai.operation.name") == Some("chat")
}

fn by_id(spans: &[Received]) -> HashMap<Vec<u8>, &Received> {
    spans.iter().map(|s| (s.span_id.clone(), s)).collect()
}

/// Exporting at once, so the test need not wait for the default five seconds.
const FAST_EXPORT: (&str, &str) = ("OTEL_BSP_SCHEDULE_DELAY", "50");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_with_a_tool_call_is_one_trace_of_nested_genai_spans() {
    let receiver = Receiver::start().await;
    let served = Served::start_with(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.base),
        ("OTEL_SERVICE_NAME", "openbot-under-test"),
        FAST_EXPORT,
    ]);
    let turn = pay_turn(&served, format!("Pay the {PRIVATE} bill")).await;
    let (bot, chat, receipt) = (&turn.bot, &turn.chat, &turn.receipt);
    let trace = trace_of(receipt.execution_id);
    let spans = receiver
        .wait_for("the Turn's execution span", |spans| {
            spans
                .iter()
                .any(|s| s.trace_id == trace && s.name == "execution turn")
        })
        .await;
    let turn: Vec<Received> = spans
        .iter()
        .filter(|s| s.trace_id == trace)
        .cloned()
        .collect();
    let ids = by_id(&turn);
    let parent = |span: &Received| ids.get(&span.parent_span_id).map(|p| p.name.clone());

    let execution = one(&turn, "execution turn");
    assert_eq!(execution.attribute("kind"), Some("turn"));
    assert_eq!(execution.attribute("generation"), Some("1"));
    assert_eq!(
        execution.attribute("execution"),
        Some(receipt.execution_id.to_string().as_str())
    );
    assert!(execution.attribute("node").is_some_and(|n| !n.is_empty()));
    assert_eq!(
        execution.resource.get("service.name").map(String::as_str),
        Some("openbot-under-test")
    );

    let phase = one(&turn, "phase loop");
    assert_eq!(parent(phase).as_deref(), Some("execution turn"));
    let agent = one(&turn, "invoke_agent");
    assert_eq!(parent(agent).as_deref(), Some("phase loop"));
    assert_eq!(
        agent.attribute("gen_ai.operation.name"),
        Some("invoke_agent")
    );
    assert_eq!(
        agent.attribute("gen_ai.agent.id"),
        Some(bot.id.to_string().as_str())
    );
    assert_eq!(
        agent.attribute("gen_ai.conversation.id"),
        Some(chat.id.to_string().as_str())
    );

    let chats: Vec<_> = turn.iter().filter(|s| is_chat(s)).collect();
    assert_eq!(
        chats.len(),
        2,
        "two model requests: the call, then the answer"
    );
    for chat_span in &chats {
        assert_eq!(parent(chat_span).as_deref(), Some("invoke_agent"));
        assert_eq!(chat_span.kind, 3, "a model request is a client span");
        assert_eq!(chat_span.attribute("gen_ai.operation.name"), Some("chat"));
        assert_eq!(
            chat_span.attribute("gen_ai.provider.name"),
            Some("scripted")
        );
        assert!(chat_span.attribute("gen_ai.usage.input_tokens").is_some());
        assert!(chat_span.attribute("gen_ai.usage.output_tokens").is_some());
    }
    let reasons: Vec<_> = chats
        .iter()
        .map(|s| s.attribute("gen_ai.response.finish_reasons").unwrap_or(""))
        .collect();
    assert!(reasons.contains(&"[\"tool_calls\"]"), "{reasons:?}");
    assert!(reasons.contains(&"[\"stop\"]"), "{reasons:?}");

    let tool = one(&turn, "execute_tool pay");
    assert_eq!(parent(tool).as_deref(), Some("invoke_agent"));
    assert_eq!(tool.attribute("gen_ai.tool.name"), Some("pay"));
    assert_eq!(tool.attribute("gen_ai.tool.call.id"), Some("call_1"));
    assert!(tool.attribute("gen_ai.tool.call.arguments").is_none());
    assert!(
        turn.iter().any(|s| s.name == "commit"),
        "each commit is a span of the execution"
    );
    assert!(
        !spans.iter().any(|s| s.name == "claim"),
        "the runner's claims are spans only at `debug`"
    );

    // Never exported without the operator's opt-in: the message text, the tool's arguments.
    let raw = String::from_utf8_lossy(&receiver.raw()).to_string();
    assert!(!raw.contains(PRIVATE), "message text reached the exporter");
}

/// An HTTP tool endpoint on 127.0.0.1 that answers each call after `delay`.
async fn slow_endpoint(delay: std::time::Duration) -> String {
    let app = axum::Router::new().route(
        "/pay",
        axum::routing::post(move || async move {
            tokio::time::sleep(delay).await;
            axum::Json(json!({"paid": true}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/pay", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_submit_span_ends_with_its_transaction_before_the_turn_starts() {
    let receiver = Receiver::start().await;
    let served =
        Served::start_with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.base), FAST_EXPORT]);
    let turn = pay_turn(&served, "Pay the bill".into()).await;
    let id = turn.receipt.execution_id.to_string();
    let trace = trace_of(turn.receipt.execution_id);
    let spans = receiver
        .wait_for("the submit and execution spans", |spans| {
            spans
                .iter()
                .any(|s| s.trace_id == trace && s.name == "execution turn")
                && spans
                    .iter()
                    .any(|s| s.name == "submit" && s.attribute("execution") == Some(id.as_str()))
        })
        .await;
    let submit = spans
        .iter()
        .find(|s| s.name == "submit" && s.attribute("execution") == Some(id.as_str()))
        .unwrap();
    assert_eq!(submit.attribute("kind"), Some("turn"));
    let request = by_id(&spans)
        .get(&submit.parent_span_id)
        .map(|r| r.name.clone());
    assert_eq!(
        request.as_deref(),
        Some("POST /v1/chats/{id}/messages"),
        "a submit is a child of the request that sent it"
    );
    let execution = spans
        .iter()
        .find(|s| s.trace_id == trace && s.name == "execution turn")
        .unwrap();
    assert!(
        submit.end_ns <= execution.start_ns,
        "the submit ends with its transaction ({}), before the Turn starts ({})",
        submit.end_ns,
        execution.start_ns
    );
    assert!(
        execution.linked_spans.contains(&submit.parent_span_id),
        "a Turn its send claimed links to that request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_requests_span_lasts_as_long_as_its_stream_and_carries_its_wake_ups_at_debug() {
    let receiver = Receiver::start().await;
    let served = Served::start_with(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.base),
        ("OPENBOT_TRACE_LEVEL", "debug"),
        FAST_EXPORT,
    ]);
    // The tool answers after 300 ms, so the stream waits for the Turn's later events.
    let url = slow_endpoint(std::time::Duration::from_millis(300)).await;
    let turn = start_pay_turn(&served, url, false, "Pay the bill".into()).await;
    let id = turn.receipt.execution_id.to_string();
    let body = reqwest::Client::new()
        .get(format!("{}/v1/executions/{id}/events?after=0", served.base))
        .bearer_auth(&served.token)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains("event: "), "an SSE stream: {body}");
    let trace = trace_of(turn.receipt.execution_id);
    let stream_span = "GET /v1/executions/{id}/events";
    let spans = receiver
        .wait_for("the stream's span and the Turn's last commit", |spans| {
            spans.iter().any(|s| s.name == stream_span)
                && spans
                    .iter()
                    .any(|s| s.trace_id == trace && s.name == "execution turn")
        })
        .await;
    let stream = one(&spans, stream_span);
    let last_commit = spans
        .iter()
        .filter(|s| s.trace_id == trace && s.name == "commit")
        .map(|s| s.end_ns)
        .max()
        .unwrap();
    assert!(
        stream.end_ns >= last_commit,
        "the stream's span ends after the Turn's last commit, with the stream"
    );
    let woke: Vec<_> = stream
        .events
        .iter()
        .filter(|(name, _, attributes)| name == "woke" && attributes.get("execution") == Some(&id))
        .collect();
    assert!(
        !woke.is_empty(),
        "each wake-up for new events is an event of the stream's span: {:?}",
        stream.events
    );
    assert!(
        spans
            .iter()
            .any(|s| s.name == "claim" && s.attribute("claimed").is_some()),
        "at `debug` the runner's claims are spans"
    );
}

/// An HTTP tool endpoint on 127.0.0.1 that keeps each request's head and body.
async fn recording_endpoint() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let seen: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let kept = std::sync::Arc::clone(&seen);
    let app = axum::Router::new().route(
        "/call",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
            let kept = std::sync::Arc::clone(&kept);
            async move {
                kept.lock().unwrap().push(format!("{headers:?} {body}"));
                axum::Json(json!({"ok": true}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/call", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vault_secret_a_turn_sends_reaches_no_span_and_no_log_even_with_content_capture() {
    let receiver = Receiver::start().await;
    let served = Served::start_with(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.base),
        ("OPENBOT_TRACE_LEVEL", "debug"),
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
        ("OPENBOT_LOG_FORMAT", "json"),
        ("OPENBOT_LOG", "debug"),
        FAST_EXPORT,
    ]);
    let secret = format!("vault-secret-{}", ExecutionId::new().as_uuid().simple());
    let (url, seen) = recording_endpoint().await;
    let http = reqwest::Client::new();
    let post = |path: &str, body: serde_json::Value| {
        http.post(format!("{}{path}", served.base))
            .bearer_auth(&served.token)
            .json(&body)
            .send()
    };
    let item: serde_json::Value = post(
        "/v1/vault-items",
        json!({"name": "api", "fields": {"key": secret}}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let item = item["id"].as_str().unwrap().to_string();
    let tool = http
        .put(format!("{}/v1/tools/call_api", served.base))
        .bearer_auth(&served.token)
        .json(&json!({
            "description": "Calls the API.",
            "input_schema": {"type": "object"},
            "url": url,
            "headers": {"Authorization": format!("Bearer {{{{vault.{item}.key}}}}")},
            "body": {"api_key": format!("{{{{vault.{item}.key}}}}")},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(tool.status(), 200, "{}", tool.text().await.unwrap());
    let (_script, model) = script(json!([
        {"tool_calls": [{"id": "call_1", "name": "call_api", "arguments": {}}]},
        {"text": "Called."}
    ]));
    let bot: serde_json::Value = post(
        "/v1/bots",
        json!({"name": "Caller", "model": model,
               "tools": [{"name": "call_api", "input_schema": {"type": "object"}}]}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    for reader in [
        json!({"type": "bot", "bot_id": bot["id"]}),
        json!({"type": "tool", "name": "call_api"}),
    ] {
        let rule = post(
            &format!("/v1/vault-items/{item}/rules"),
            json!({"field": "*", "reader": reader}),
        )
        .await
        .unwrap();
        assert_eq!(rule.status(), 201, "{}", rule.text().await.unwrap());
    }
    let chat: serde_json::Value = post("/v1/chats", json!({"bot_id": bot["id"]}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sent: serde_json::Value = post(
        &format!("/v1/chats/{}/messages", chat["id"].as_str().unwrap()),
        json!({"content": [{"type": "text", "text": "Call the API"}]}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let execution = sent["execution_id"].as_str().unwrap().to_string();
    let (events, ended) = served.events_to_end(&execution).await;
    assert!(ended);
    assert_eq!(events.last().unwrap()["outcome"], "completed", "{events:?}");
    let called = seen.lock().unwrap().join("\n");
    assert!(
        called.contains(&secret),
        "the tool got the secret in its header and body: {called}"
    );
    let trace = trace_of(execution.parse().unwrap());
    // The execution span ends last: once it is here, every span of the Turn is.
    receiver
        .wait_for("the Turn's execution span", |spans| {
            spans
                .iter()
                .any(|s| s.trace_id == trace && s.name == "execution turn")
        })
        .await;
    let raw = String::from_utf8_lossy(&receiver.raw()).to_string();
    assert!(
        raw.contains("Called."),
        "content capture is on: the model's answer is exported"
    );
    assert!(
        !raw.contains(&secret),
        "a Vault secret reached the exporter"
    );
    let log = served.log();
    assert!(log.contains(&execution), "the run logged at debug: {log}");
    assert!(!log.contains(&secret), "a Vault secret reached the log");
}

#[test]
fn a_trace_level_that_is_no_level_stops_the_start_with_its_name() {
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_openbot"))
        .arg("serve")
        .arg("--data-dir")
        .arg(data.path())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OPENBOT_TRACE_LEVEL", "loud")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("OPENBOT_TRACE_LEVEL is `loud`"),
        "the error names the variable and its value: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_with_a_traceparent_joins_the_callers_trace() {
    let receiver = Receiver::start().await;
    let served =
        Served::start_with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.base), FAST_EXPORT]);
    let caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let answer = reqwest::Client::new()
        .get(format!("{}/v1/bots", served.base))
        .bearer_auth(&served.token)
        .header("traceparent", format!("00-{caller_trace}-{caller_span}-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let spans = receiver
        .wait_for("the request's span", |spans| {
            spans.iter().any(|s| s.name == "GET /v1/bots")
        })
        .await;
    let request = one(&spans, "GET /v1/bots");
    assert_eq!(hex(&request.trace_id), caller_trace);
    assert_eq!(hex(&request.parent_span_id), caller_span);
    assert_eq!(request.kind, 2, "a request is a server span");
    assert_eq!(request.attribute("http.route"), Some("/v1/bots"));
    assert_eq!(request.attribute("http.response.status_code"), Some("200"));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_taken_over_after_sigkill_reads_as_one_trace_of_both_generations() {
    let receiver = Receiver::start().await;
    let first_env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.base.as_str()),
        ("OTEL_RESOURCE_ATTRIBUTES", "service.instance.id=first"),
        FAST_EXPORT,
    ];
    let mut served = Served::start_with(&first_env);
    // The endpoint never answers the first request: the first node dies waiting for it.
    let (url, calls) = endpoint::endpoint(1);
    // Held to the end: its script file lives as long as it does.
    let turn = start_pay_turn(&served, url, true, "Pay".to_string()).await;
    let receipt = &turn.receipt;
    let trace = trace_of(receipt.execution_id);
    let waited = calls.clone();
    tokio::task::spawn_blocking(move || endpoint::wait_for(&waited, 1))
        .await
        .unwrap();
    // The first model request's span is exported before the node dies.
    receiver
        .wait_for("the first node's model request", |spans| {
            spans.iter().any(|s| s.trace_id == trace && is_chat(s))
        })
        .await;
    served.restart_with(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.base.as_str()),
        ("OTEL_RESOURCE_ATTRIBUTES", "service.instance.id=second"),
        FAST_EXPORT,
    ]);
    let (_, ended) = served
        .events_to_end(&receipt.execution_id.to_string())
        .await;
    assert!(ended);
    let spans = receiver
        .wait_for("the second owner's execution span", |spans| {
            spans.iter().any(|s| {
                s.trace_id == trace
                    && s.name == "execution turn"
                    && s.attribute("generation") == Some("2")
            })
        })
        .await;
    let turn: Vec<_> = spans.iter().filter(|s| s.trace_id == trace).collect();
    let instance = |s: &&Received| s.resource.get("service.instance.id").cloned();
    assert!(
        turn.iter()
            .any(|s| instance(s).as_deref() == Some("first") && is_chat(s)),
        "the first owner's spans are in the trace"
    );
    let second = turn
        .iter()
        .find(|s| s.name == "execution turn" && s.attribute("generation") == Some("2"))
        .unwrap();
    assert_eq!(instance(second).as_deref(), Some("second"));
    // Both owners' execution spans hang from the same root: the execution's own span ID.
    let root = receipt.execution_id.as_uuid().as_bytes()[8..].to_vec();
    assert_eq!(second.parent_span_id, root);
    assert!(
        turn.iter()
            .any(|s| instance(s).as_deref() == Some("second") && s.name == "execute_tool pay"),
        "the second owner sent the call again (retry-safe) inside the same trace"
    );
}

fn operator_token(served: &Served) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_openbot"))
        .args(["admin", "--data-dir"])
        .arg(served.data_dir())
        .args(["operator-token", "create", "--name", "prometheus"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

/// `promtool check metrics` on `exposition`: its exit status and what it said.
fn promtool(exposition: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's `prometheus` package; scripts/install-deps installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), said)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_the_operators_and_pass_promtool() {
    let served = Served::start();
    pay_turn(&served, "Pay".to_string()).await;

    let http = reqwest::Client::new();
    let url = format!("{}/metrics", served.base);
    let anonymous = http.get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let member = http
        .get(&url)
        .bearer_auth(&served.token)
        .send()
        .await
        .unwrap();
    assert_eq!(
        member.status(),
        403,
        "a member's token reads no platform metrics"
    );

    // A made-up method counts as `_OTHER`: no caller makes the node keep a series of its own.
    let brew = reqwest::Method::from_bytes(b"BREW").unwrap();
    http.request(brew, format!("{}/v1/nowhere", served.base))
        .send()
        .await
        .unwrap();

    let operator = operator_token(&served);
    let answer = http.get(&url).bearer_auth(&operator).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(
        answer.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let exposition = answer.text().await.unwrap();
    let (passed, said) = promtool(&exposition);
    assert!(passed, "promtool check metrics: {said}\n{exposition}");
    let sample = |prefix: &str| -> f64 {
        exposition
            .lines()
            .filter(|line| line.starts_with(prefix))
            .map(|line| line.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    assert_eq!(
        sample("openbot_executions{kind=\"turn\",state=\"completed\"}"),
        1.0
    );
    assert!(sample("openbot_executions_claimed_total{kind=\"turn\"}") >= 1.0);
    assert!(sample("openbot_phase_duration_seconds_count{kind=\"turn\"}") >= 1.0);
    assert!(sample("openbot_commit_duration_seconds_count") >= 1.0);
    assert!(
        sample("openbot_outbound_calls_total{outcome=\"result\"}") >= 3.0,
        "two model answers and the tool's result"
    );
    assert!(sample("openbot_model_tokens_total{provider=\"scripted\",type=\"input\"}") > 0.0);
    assert_eq!(
        sample(
            "gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"scripted\""
        ),
        2.0
    );
    assert!(
        sample("openbot_http_requests_total{method=\"POST\",route=\"/v1/chats/{id}/messages\"")
            >= 1.0,
        "{exposition}"
    );
    assert!(exposition.contains("openbot_db_pool_connections{pool=\"writer\",state=\"idle\"}"));
    assert!(
        sample("openbot_node_executions_capacity") >= 1.0,
        "how full the node can get: {exposition}"
    );
    assert!(
        sample("openbot_http_requests_total{method=\"_OTHER\",route=\"unmatched\"") >= 1.0,
        "{exposition}"
    );
    assert!(!exposition.contains("BREW"), "a made-up method is no label");
    assert!(
        !exposition.contains("gen_ai_request_model"),
        "no label holds a model name a member chose"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_the_executions_fields_and_never_the_message_text() {
    let served = Served::start_with(&[
        ("OPENBOT_LOG_FORMAT", "json"),
        ("OPENBOT_LOG", "info,openbot_server::engine=debug"),
    ]);
    let turn = pay_turn(&served, format!("Pay the {PRIVATE} bill")).await;
    let receipt = &turn.receipt;
    let log = served.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert!(!lines.is_empty(), "JSON log lines: {log}");
    for line in &lines {
        assert!(
            line["timestamp"].is_string() && line["level"].is_string(),
            "{line}"
        );
    }
    let id = receipt.execution_id.to_string();
    let inside: Vec<_> = lines
        .iter()
        .filter(|line| {
            line["spans"]
                .as_array()
                .is_some_and(|spans| spans.iter().any(|s| s["execution"] == id.as_str()))
        })
        .collect();
    assert!(
        !inside.is_empty(),
        "a line inside the execution carries its fields: {log}"
    );
    for line in inside {
        let execution = line["spans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "execution")
            .unwrap();
        assert_eq!(execution["kind"], "turn");
        assert_eq!(execution["generation"], 1);
        assert!(execution["node"].is_string());
    }
    assert!(!log.contains(PRIVATE), "message text reached the log");
}
