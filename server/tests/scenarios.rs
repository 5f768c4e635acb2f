//! The shared SDK scenarios (`tests/scenarios/*.json`), run by the Rust Client in both modes:
//! in this process (`memory://`) and against a real `openbot serve` this suite starts. The
//! Node, Python and Kotlin suites run the same files.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/served.rs"]
mod served;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use openbot_core::tool::{FnTool, SharedTool, ToolError, ToolOutput};
use openbot_core::{Client, ConnectOptions, connect};
use openbot_schema::{
    BotId, BotSpec, ChatId, ContentPart, EventKind, ExecutionId, SendInput, TurnOutcome,
};
use serde_json::{Value, json};

fn scenarios_dir() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR"))
        .join("../tests/scenarios")
}

/// A host tool with one of the behaviours the scenario format names.
fn host_tool(name: &str, behaviour: &str) -> SharedTool {
    let schema = json!({"type": "object"});
    match behaviour {
        "sum" => Arc::new(FnTool::new(name, "", schema, |args, _| async move {
            let a = args["a"]
                .as_i64()
                .ok_or_else(|| ToolError::new("a is not an integer"))?;
            let b = args["b"]
                .as_i64()
                .ok_or_else(|| ToolError::new("b is not an integer"))?;
            Ok(ToolOutput::text((a + b).to_string()))
        })),
        "fail" => Arc::new(FnTool::new(name, "", schema, |_, _| async move {
            Err(ToolError::new("tool failed on purpose"))
        })),
        other => panic!("unknown tool behaviour `{other}`"),
    }
}

fn text_of(parts: &[ContentPart]) -> String {
    parts
        .iter()
        .filter_map(|part| match part {
            ContentPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Runs one scenario file against `uri` and checks every expectation it states.
async fn run(name: &str, uri: &str, token: Option<String>) {
    let path = scenarios_dir().join(format!("{name}.json"));
    let scenario: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let script_dir = tempfile::tempdir().unwrap();
    let script = script_dir.path().join("script.json");
    std::fs::write(&script, scenario["script"].to_string()).unwrap();

    let tools = scenario["tools"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, behaviour)| host_tool(name, behaviour.as_str().unwrap()))
        .collect();
    let client = connect(
        uri,
        ConnectOptions {
            token,
            tools,
            ..ConnectOptions::default()
        },
    )
    .await
    .unwrap();

    let mut bot = scenario["bot"].clone();
    bot["model"] = json!(format!("scripted:{}", script.display()));
    let spec: BotSpec = serde_json::from_value(bot).unwrap();
    let bot = client.create_bot(spec).await.unwrap();
    let chat = client.create_chat(bot.id).await.unwrap();

    for (index, turn) in scenario["turns"].as_array().unwrap().iter().enumerate() {
        let at = format!("{name} turn {index} on {uri}");
        let receipt = client
            .send(chat.id, SendInput::text(turn["send"].as_str().unwrap()))
            .await
            .unwrap();
        check_turn(client.as_ref(), receipt.execution_id, &turn["expect"], &at).await;
    }
    let history = client.history(chat.id).await.unwrap();
    assert_eq!(
        history.len() as u64,
        scenario["history"].as_u64().unwrap(),
        "{name}: history on {uri}"
    );

    for expected in scenario["errors"].as_array().unwrap() {
        let id = expected["id"].as_str().unwrap_or_default();
        let failed = match expected["op"].as_str().unwrap() {
            "get_chat" => client.get_chat(id.parse::<ChatId>().unwrap()).await.err(),
            "get_bot" => client.get_bot(id.parse::<BotId>().unwrap()).await.err(),
            "get_execution" => client
                .get_execution(id.parse::<ExecutionId>().unwrap())
                .await
                .err(),
            "create_bot" => {
                let spec: BotSpec = serde_json::from_value(expected["spec"].clone()).unwrap();
                client.create_bot(spec).await.err()
            }
            other => panic!("unknown op `{other}`"),
        };
        let err = failed.unwrap_or_else(|| panic!("{name}: {expected} succeeded on {uri}"));
        assert_eq!(
            err.code.as_str(),
            expected["code"].as_str().unwrap(),
            "{name}: {expected} on {uri}: {err}"
        );
    }
    client.close().await;
}

async fn check_turn(client: &dyn Client, id: ExecutionId, expect: &Value, at: &str) {
    let mut events = client.observe(id, 0).await.unwrap();
    let mut types: Vec<String> = Vec::new();
    let mut reply = String::new();
    let mut results = Vec::new();
    let mut outcome = None;
    while let Some(event) = events.next().await {
        let event = event.unwrap();
        let kind = serde_json::to_value(&event.kind).unwrap()["type"]
            .as_str()
            .unwrap()
            .to_string();
        if !(kind == "text_delta" && types.last().is_some_and(|last| *last == kind)) {
            types.push(kind);
        }
        match event.kind {
            EventKind::ModelStepStarted { .. } => reply.clear(),
            EventKind::TextDelta { text, .. } => reply.push_str(&text),
            EventKind::ToolResult { result, .. } => {
                let mut seen = json!({"name": result.name, "is_error": result.is_error});
                seen["text"] = json!(text_of(&result.output));
                results.push(seen);
            }
            EventKind::TurnEnded { outcome: ended, .. } => outcome = Some(ended),
            _ => {}
        }
    }
    let outcome: Option<TurnOutcome> = outcome;
    assert_eq!(
        serde_json::to_value(outcome).unwrap(),
        expect["outcome"],
        "{at}: outcome"
    );
    assert_eq!(json!(types), expect["events"], "{at}: events");
    if let Some(expected) = expect["reply"].as_str() {
        assert_eq!(reply, expected, "{at}: reply");
    }
    let expected_results = expect["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), expected_results.len(), "{at}: tool results");
    for (seen, expected) in results.iter().zip(expected_results) {
        assert_eq!(seen["name"], expected["name"], "{at}: tool result name");
        assert_eq!(
            seen["is_error"], expected["is_error"],
            "{at}: tool result error"
        );
        if let Some(text) = expected.get("text") {
            assert_eq!(&seen["text"], text, "{at}: tool result text");
        }
    }
}

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        const LISTED: &[&str] = &[$(stringify!($name)),*];
        mod in_memory {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::run(stringify!($name), "memory://", None).await })*
        }
        mod against_a_server {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let served = super::served::Served::start();
                super::run(stringify!($name), &served.base, Some(served.token.clone())).await
            })*
        }
    };
}

scenarios!(
    hello,
    host_tool,
    tool_error,
    two_turns,
    step_limit,
    loop_breaker,
    errors
);

#[test]
fn every_scenario_file_is_run() {
    let mut files: Vec<String> = std::fs::read_dir(scenarios_dir())
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".json").map(str::to_string)
        })
        .collect();
    files.sort();
    let mut listed: Vec<String> = LISTED.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(files, listed);
}
