//! This machine as a Computer: terminal sessions on a real pseudo-terminal, output read by
//! cursor in order, file tools inside the allowed folders, and the same tools for a Bot in
//! `memory://` and for an Agent.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/scripts.rs"]
mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use openbot_core::computer::{
    Computer, ComputerError, ComputerOptions, LocalComputer, StartTerminal, TOOL_NAMES,
};
use openbot_core::{Agent, ConnectOptions, connect};
use openbot_schema::{
    BotSpec, ContentPart, EventKind, Limits, SendInput, TerminalOutput, ToolDefinition, ToolResult,
};
use serde_json::json;
use support::scripted;
use tokio_util::sync::CancellationToken;

fn folder() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn computer(dir: &tempfile::TempDir) -> LocalComputer {
    LocalComputer::new(ComputerOptions::new([dir.path()])).unwrap()
}

/// Reads a session from the start until `done(text so far, last read)`, checking that chunks
/// come in order, without gaps; the text and the last read.
async fn read_while(
    computer: &LocalComputer,
    session: &str,
    done: impl Fn(&str, &TerminalOutput) -> bool,
) -> (String, TerminalOutput) {
    let mut text = String::new();
    let mut cursor = 0;
    for _ in 0..100 {
        let wait = Duration::from_secs(5);
        let out = computer
            .read_terminal(session, cursor, wait, CancellationToken::new())
            .await
            .unwrap();
        for chunk in &out.chunks {
            assert_eq!(chunk.seq, cursor + 1, "chunks are numbered without gaps");
            cursor = chunk.seq;
            text.push_str(&chunk.text);
        }
        assert_eq!(out.next_cursor, cursor);
        if done(&text, &out) {
            return (text, out);
        }
        assert!(!out.exited, "the session ended first: {text}");
    }
    panic!("the session's output never came: {text}");
}

/// Reads a session until its program exits.
async fn read_to_end(computer: &LocalComputer, session: &str) -> (String, TerminalOutput) {
    read_while(computer, session, |_, out| out.exited).await
}

/// Reads a session until its output holds `needle`.
async fn read_until(computer: &LocalComputer, session: &str, needle: &str) -> String {
    read_while(computer, session, |text, _| text.contains(needle))
        .await
        .0
}

#[tokio::test]
async fn a_command_runs_in_a_real_terminal_and_its_output_and_exit_code_are_read_by_cursor() {
    let dir = folder();
    let computer = computer(&dir);
    let session = computer
        .start_terminal(StartTerminal {
            cwd: None,
            command: Some(
                "for i in 1 2 3; do echo line$i; done; test -t 0 && echo tty; exit 3".into(),
            ),
        })
        .await
        .unwrap();
    assert_eq!(
        session.cwd,
        dir.path().canonicalize().unwrap().display().to_string()
    );
    let (text, end) = read_to_end(&computer, &session.id).await;
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    assert_eq!(lines, ["line1", "line2", "line3", "tty"]);
    assert_eq!(end.exit_code, Some(3));
    // A reader that comes later reads the same output from its own cursor.
    let again = computer
        .read_terminal(&session.id, 0, Duration::ZERO, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(again.text(), text);
}

#[tokio::test]
async fn input_typed_into_a_shell_runs_and_exit_ends_the_session() {
    let dir = folder();
    let computer = computer(&dir);
    let session = computer
        .start_terminal(StartTerminal::default())
        .await
        .unwrap();
    let written = computer
        .write_terminal(&session.id, "echo $((6*7))\n")
        .await
        .unwrap();
    assert_eq!(written, 14);
    read_until(&computer, &session.id, "42").await;
    computer
        .write_terminal(&session.id, "exit 0\n")
        .await
        .unwrap();
    let (_, end) = read_to_end(&computer, &session.id).await;
    assert_eq!(end.exit_code, Some(0));
    let err = computer
        .write_terminal(&session.id, "echo late\n")
        .await
        .unwrap_err();
    assert!(matches!(err, ComputerError::InvalidInput(_)), "{err:?}");
}

#[tokio::test]
async fn closing_a_session_ends_its_program_and_forgets_it() {
    let dir = folder();
    let computer = computer(&dir);
    let session = computer
        .start_terminal(StartTerminal {
            cwd: None,
            command: Some("echo started; sleep 613".into()),
        })
        .await
        .unwrap();
    read_until(&computer, &session.id, "started").await;
    computer.close_terminal(&session.id).await.unwrap();
    assert!(computer.terminals().await.unwrap().is_empty());
    let err = computer
        .read_terminal(&session.id, 0, Duration::ZERO, CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, ComputerError::NotFound(_)), "{err:?}");
    // No `sleep 613` of this session is left running.
    let mut left = sleeping_613();
    for _ in 0..50 {
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = sleeping_613();
    }
    assert_eq!(left, 0);
}

/// How many processes run `sleep 613`, from /proc.
fn sleeping_613() -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| std::fs::read(entry.ok()?.path().join("cmdline")).ok())
        .filter(|cmdline| cmdline.as_slice() == b"sleep\x00613\x00")
        .count()
}

#[tokio::test]
async fn a_read_waits_for_output_and_stops_when_cancelled() {
    let dir = folder();
    let computer = Arc::new(computer(&dir));
    let session = computer
        .start_terminal(StartTerminal {
            cwd: None,
            command: Some("sleep 600".into()),
        })
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let reading = {
        let computer = Arc::clone(&computer);
        let cancel = cancel.clone();
        let id = session.id.clone();
        tokio::spawn(async move {
            computer
                .read_terminal(&id, 0, Duration::from_secs(30), cancel)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!reading.is_finished(), "the read waits for output");
    cancel.cancel();
    let out = reading.await.unwrap().unwrap();
    assert!(out.chunks.is_empty());
    assert!(!out.exited);
}

#[tokio::test]
async fn a_terminal_starts_only_in_an_allowed_folder() {
    let dir = folder();
    std::fs::create_dir(dir.path().join("allowed")).unwrap();
    let computer = LocalComputer::new(ComputerOptions::new([dir.path().join("allowed")])).unwrap();
    let err = computer
        .start_terminal(StartTerminal {
            cwd: Some(dir.path().display().to_string()),
            command: Some("true".into()),
        })
        .await
        .unwrap_err();
    assert!(matches!(err, ComputerError::OutsideFolders(_)), "{err:?}");
}

#[tokio::test]
async fn a_written_file_reads_back_and_paths_outside_the_folders_are_forbidden() {
    let dir = folder();
    std::fs::create_dir(dir.path().join("work")).unwrap();
    std::fs::write(dir.path().join("secret.txt"), "keep out").unwrap();
    let computer = LocalComputer::new(ComputerOptions::new([dir.path().join("work")])).unwrap();
    let written = computer
        .write_file("notes.md", "# Notes\nä\n")
        .await
        .unwrap();
    assert_eq!(written.size, 11);
    let read = computer.read_file("notes.md").await.unwrap();
    assert_eq!(read.content, "# Notes\nä\n");
    let outside = dir.path().join("secret.txt").display().to_string();
    for err in [
        computer.read_file(&outside).await.unwrap_err(),
        computer.read_file("../secret.txt").await.unwrap_err(),
        computer.write_file(&outside, "x").await.unwrap_err(),
    ] {
        assert!(matches!(err, ComputerError::OutsideFolders(_)), "{err:?}");
        assert_eq!(
            openbot_core::Error::from(err).code,
            openbot_schema::ErrorCode::Forbidden
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("secret.txt")).unwrap(),
        "keep out"
    );
}

#[tokio::test]
async fn a_file_that_is_not_text_or_too_large_is_refused_with_its_reason() {
    let dir = folder();
    let computer = computer(&dir);
    std::fs::write(dir.path().join("blob.bin"), [0xff, 0xfe, 0x00]).unwrap();
    let err = computer.read_file("blob.bin").await.unwrap_err();
    assert!(err.to_string().contains("not UTF-8"), "{err}");
    let big = "x".repeat(openbot_core::computer::MAX_FILE_BYTES as usize + 1);
    let err = computer.write_file("big.txt", &big).await.unwrap_err();
    assert!(matches!(err, ComputerError::TooLarge(_)), "{err:?}");
    assert!(!dir.path().join("big.txt").exists());
    let err = computer.read_file("missing.txt").await.unwrap_err();
    assert!(matches!(err, ComputerError::NotFound(_)), "{err:?}");
}

#[tokio::test]
async fn a_computer_without_terminal_offers_files_only() {
    let dir = folder();
    let options = ComputerOptions::new([dir.path()]).without_terminal();
    let computer = Arc::new(LocalComputer::new(options).unwrap());
    let err = computer
        .start_terminal(StartTerminal::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ComputerError::Unavailable(_)), "{err:?}");
    let names: Vec<String> = openbot_core::computer::computer_tools(computer, false)
        .iter()
        .map(|t| t.definition().name.clone())
        .collect();
    assert_eq!(names, ["computer_file_read", "computer_file_write"]);
}

fn tool_results(events: &[openbot_schema::Event]) -> Vec<ToolResult> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } => Some(result.clone()),
            _ => None,
        })
        .collect()
}

fn text_of(result: &ToolResult) -> String {
    result
        .output
        .iter()
        .filter_map(|p| match p {
            ContentPart::Text { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_bot_in_memory_writes_a_file_and_reads_it_back_through_a_terminal() {
    let dir = folder();
    let model = scripted(json!([
        {"tool_calls": [{"id": "w", "name": "computer_file_write",
                         "arguments": {"path": "hello.txt", "content": "hello from the bot\n"}}]},
        {"tool_calls": [{"id": "s", "name": "computer_terminal_start",
                         "arguments": {"command": "cat hello.txt"}}]},
        {"tool_calls": [{"id": "r", "name": "computer_terminal_read",
                         "arguments": {"session_id": "t1", "after": 0, "wait_ms": 5000}}]},
        {"tool_calls": [{"id": "o", "name": "computer_file_read",
                         "arguments": {"path": "/etc/hostname"}}]},
        {"text": "done"}
    ]));
    let options = ConnectOptions {
        models: HashMap::from([(
            "test".to_string(),
            model as Arc<dyn openbot_core::model::Model>,
        )]),
        computer: Some(ComputerOptions::new([dir.path()])),
        ..ConnectOptions::default()
    };
    let client = connect("memory://", options).await.unwrap();
    // The Bot names the Computer tools; their definitions come from the Computer.
    let tools = TOOL_NAMES
        .iter()
        .map(|name| ToolDefinition {
            name: name.to_string(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
        })
        .collect();
    let bot = client
        .create_bot(BotSpec {
            name: "Operator".into(),
            instructions: String::new(),
            model: "test".into(),
            tools,
            limits: Limits::default(),
            shared: false,
            memory: false,
            reminders: false,
            code_mode: false,
        })
        .await
        .unwrap();
    let chat = client.create_chat(bot.id).await.unwrap();
    let receipt = client.send(chat.id, SendInput::text("go")).await.unwrap();
    let events: Vec<_> = client
        .observe(receipt.execution_id, 0)
        .await
        .unwrap()
        .map(|e| e.unwrap())
        .collect()
        .await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 4, "{results:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hello.txt")).unwrap(),
        "hello from the bot\n"
    );
    let read: TerminalOutput = serde_json::from_str(&text_of(&results[2])).unwrap();
    assert!(read.text().contains("hello from the bot"), "{read:?}");
    // The file tool's rule holds for a Bot: a path outside is an error result for the model.
    assert!(results[3].is_error);
    assert!(
        text_of(&results[3]).contains("outside the folders"),
        "{:?}",
        results[3]
    );
}

#[tokio::test]
async fn an_agent_with_a_computer_offers_the_computer_tools_to_its_model() {
    let dir = folder();
    let model = support::Recording::new(scripted(json!([{"text": "ok"}])));
    let computer = Arc::new(computer(&dir));
    let agent = Agent::builder(model.clone())
        .computer(computer, true)
        .build()
        .unwrap();
    agent.start("hi").wait().await.unwrap();
    let offered: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(offered, TOOL_NAMES);
}

#[tokio::test]
async fn a_bot_is_offered_only_the_computer_tools_the_attached_machine_has() {
    let dir = folder();
    let model = support::Recording::new(scripted(json!([{"text": "ok"}, {"text": "ok"}])));
    let models = HashMap::from([(
        "test".to_string(),
        model.clone() as Arc<dyn openbot_core::model::Model>,
    )]);
    let named: Vec<ToolDefinition> = TOOL_NAMES
        .iter()
        .map(|name| ToolDefinition {
            name: name.to_string(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
        })
        .collect();
    let spec = BotSpec {
        name: "Reader".into(),
        instructions: String::new(),
        model: "test".into(),
        tools: named,
        limits: Limits::default(),
        shared: false,
        memory: false,
        reminders: false,
        code_mode: false,
    };
    // Files only: the terminal tools are not offered.
    let files_only = ConnectOptions {
        models: models.clone(),
        computer: Some(ComputerOptions::new([dir.path()]).without_terminal()),
        ..ConnectOptions::default()
    };
    // No Computer at all: none is offered (never a host tool the Turn would wait on).
    let none = ConnectOptions {
        models,
        ..ConnectOptions::default()
    };
    for options in [files_only, none] {
        let client = connect("memory://", options).await.unwrap();
        let bot = client.create_bot(spec.clone()).await.unwrap();
        let chat = client.create_chat(bot.id).await.unwrap();
        let receipt = client.send(chat.id, SendInput::text("hi")).await.unwrap();
        let _: Vec<_> = client
            .observe(receipt.execution_id, 0)
            .await
            .unwrap()
            .collect()
            .await;
    }
    let offered: Vec<Vec<String>> = model
        .requests()
        .iter()
        .map(|r| r.tools.iter().map(|t| t.name.clone()).collect())
        .collect();
    assert_eq!(
        offered,
        [
            vec![
                "computer_file_read".to_string(),
                "computer_file_write".to_string()
            ],
            vec![]
        ]
    );
}
