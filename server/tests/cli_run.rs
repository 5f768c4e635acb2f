//! `openbot run`: the answer streams to stdout; every failure exits non-zero with one clear line.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::process::{Command, Output};

fn openbot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_openbot"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENBOT_MODEL")
        .output()
        .expect("the openbot binary runs")
}

fn stderr_lines(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .map(str::to_string)
        .collect()
}

fn script(json: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), json).unwrap();
    file
}

#[test]
fn a_scripted_answer_streams_to_stdout() {
    let file = script(r#"[{"deltas": ["Hello", ", world!"]}]"#);
    let model = format!("scripted:{}", file.path().display());
    let output = openbot(&["run", "--model", &model, "Hi"]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Hello, world!\n");
    assert!(output.stderr.is_empty());
}

#[test]
fn json_output_prints_one_event_per_line() {
    let file = script(r#"[{"text": "Hi"}]"#);
    let model = format!("scripted:{}", file.path().display());
    let output = openbot(&["run", "--json", "--model", &model, "Hi"]);
    assert!(output.status.success());
    let types: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(line).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        types,
        [
            "turn_started",
            "model_step_started",
            "text_delta",
            "turn_ended"
        ]
    );
}

#[test]
fn a_missing_key_exits_with_one_line_naming_the_variable() {
    let output = openbot(&["run", "--model", "openai:gpt-4o-mini", "Hi"]);
    assert!(!output.status.success());
    assert_eq!(
        stderr_lines(&output),
        ["openbot: openai needs an API key: set OPENAI_API_KEY"]
    );
}

#[test]
fn an_unknown_provider_exits_with_one_line() {
    let output = openbot(&["run", "--model", "mystery:model", "Hi"]);
    assert!(!output.status.success());
    let lines = stderr_lines(&output);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("openbot: unknown model provider `mystery`"),
        "{lines:?}"
    );
}

#[test]
fn an_unreachable_endpoint_exits_with_one_line() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let model = format!("compatible:http://127.0.0.1:{port}/v1:some-model");
    let output = openbot(&["run", "--model", &model, "Hi"]);
    assert!(!output.status.success());
    let lines = stderr_lines(&output);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("openbot: could not reach the provider"),
        "{lines:?}"
    );
}

#[test]
fn a_missing_script_file_exits_with_one_line() {
    let output = openbot(&["run", "--model", "scripted:/nonexistent/script.json", "Hi"]);
    assert!(!output.status.success());
    let lines = stderr_lines(&output);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("cannot read script /nonexistent/script.json"),
        "{lines:?}"
    );
}

#[test]
fn a_step_limit_is_reported_and_exits_non_zero() {
    let file = script(
        r#"{"steps": [{"tool_calls": [{"name": "anything", "arguments": {}}]}], "repeat": true}"#,
    );
    let model = format!("scripted:{}", file.path().display());
    let output = openbot(&["run", "--max-steps", "2", "--model", &model, "Hi"]);
    assert!(!output.status.success());
    assert_eq!(
        stderr_lines(&output),
        ["openbot: the turn ended early: the step limit was reached"]
    );
}

#[test]
fn the_readme_quick_start_answers() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR");
    let root = std::path::Path::new(&manifest).parent().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_openbot"))
        .current_dir(root)
        .args(["run", "--model", "scripted:examples/hello.json", "Hi"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("Hello! I am a scripted model"));
}

#[test]
fn code_mode_runs_the_models_program_in_the_sandbox() {
    let file = script(
        r#"[{"tool_calls": [{"name": "run_code", "arguments": {"code": "return [6 * 7, typeof process];"}}]}, {"text": "done"}]"#,
    );
    let model = format!("scripted:{}", file.path().display());
    let output = openbot(&["run", "--code-mode", "--json", "--model", &model, "Compute"]);
    assert!(output.status.success(), "{output:?}");
    let result = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|event| event["type"] == "tool_result")
        .expect("a tool_result event");
    let text = result["result"]["output"][0]["text"].as_str().unwrap();
    let value: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        value["value"],
        serde_json::json!([42, "undefined"]),
        "{value}"
    );
}
