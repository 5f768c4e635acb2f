//! `openbot migrate` and `openbot serve`: the server never changes the schema and refuses a
//! database at another version, with one clear line; a stopped node exits cleanly.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/outside.rs"]
mod outside;
#[path = "support/pg.rs"]
mod pg;
#[path = "support/served.rs"]
mod served;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Output, Stdio};

use openbot_server::store::SCHEMA_VERSION;

fn openbot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_openbot"))
        .args(args)
        .env_remove("OPENBOT_DATABASE_URL")
        .env_remove("OPENBOT_SEAL_KEYS")
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).trim().to_string()
}

#[test]
fn serve_refuses_a_data_folder_without_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let output = openbot(&["serve", "--data-dir", dir.path().to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("run `openbot migrate` first"),
        "{}",
        stderr(&output)
    );
    assert!(
        !dir.path().join("openbot.db").exists(),
        "serve created no database"
    );
}

#[test]
fn migrate_is_safe_to_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    for _ in 0..2 {
        let output = openbot(&["migrate", "--data-dir", path]);
        assert!(output.status.success(), "{}", stderr(&output));
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            format!("the database is at schema version {SCHEMA_VERSION}")
        );
    }
}

#[tokio::test]
async fn serve_refuses_a_postgres_database_at_another_schema_version() {
    let url = pg::empty_database().await;
    // With the shared keys, so that the schema is what is checked.
    let output = Command::new(env!("CARGO_BIN_EXE_openbot"))
        .args(["serve", "--database-url", &url])
        .env(
            "OPENBOT_SEAL_KEYS",
            "k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        )
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert_eq!(
        stderr(&output),
        format!(
            "openbot: the database schema is at version 0 but this openbot needs {SCHEMA_VERSION}: run `openbot migrate`"
        )
    );
}

#[test]
fn a_postgres_node_needs_the_shared_sealing_keys() {
    let url = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(pg::fresh_database());
    let output = openbot(&["serve", "--database-url", &url]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("set OPENBOT_SEAL_KEYS"),
        "{}",
        stderr(&output)
    );
}

/// Starts `openbot serve` on the data folder `path` and returns once it printed that it
/// listens, with the rest of its standard error still to read.
fn serve_until_listening(
    path: &str,
    unset: &[&str],
) -> (std::process::Child, BufReader<std::process::ChildStderr>) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_openbot"));
    command
        .args(["serve", "--data-dir", path, "--bind", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for name in unset {
        command.env_remove(name);
    }
    let mut child = command.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("listening on") {
        line.clear();
        assert_ne!(
            stderr.read_line(&mut line).unwrap(),
            0,
            "the node ended before it listened"
        );
    }
    (child, stderr)
}

/// Sends SIGTERM to `child`; returns whether it exited successfully and the rest of its
/// standard error.
fn terminate(mut child: std::process::Child, mut stderr: impl Read) -> (bool, String) {
    assert!(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    (child.wait().unwrap().success(), rest.trim().to_string())
}

#[test]
fn a_node_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    assert!(openbot(&["migrate", "--data-dir", path]).status.success());
    let (child, stderr) = serve_until_listening(path, &[]);
    let (success, rest) = terminate(child, stderr);
    assert!(success, "{rest}");
    assert!(
        rest.ends_with("openbot: stopping; releasing work"),
        "{rest}"
    );
}

#[test]
fn serve_with_no_flags_keeps_its_database_keys_and_objects_in_the_data_folder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    assert!(openbot(&["migrate", "--data-dir", path]).status.success());
    let (child, stderr) = serve_until_listening(
        path,
        &[
            "OPENBOT_SEAL_KEYS",
            "OPENBOT_OBJECTS_DIR",
            "OPENBOT_DATABASE_URL",
        ],
    );
    for entry in ["openbot.db", "seal-keys", "objects"] {
        assert!(
            dir.path().join(entry).exists(),
            "{entry} is in the data folder"
        );
    }
    let (success, rest) = terminate(child, stderr);
    assert!(success, "{rest}");
}

/// Fault points exist only in builds with the `fault-points` feature (the fault tests'
/// build); any other build ignores `OPENBOT_FAULT_POINT` and runs the Turn to its end.
#[cfg(not(feature = "fault-points"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_without_fault_points_ignores_the_fault_variable() {
    let outside = outside::Outside::start(false).await;
    let server = tokio::task::spawn_blocking(|| {
        served::Served::start_with(&[("OPENBOT_FAULT_POINT", "after_tool_intent")])
    })
    .await
    .unwrap();
    let http = reqwest::Client::new();
    let put = http
        .put(format!("{}/v1/tools/write", server.base))
        .bearer_auth(&server.token)
        .json(&serde_json::json!({"description": "Writes.", "input_schema": {"type": "object"}, "url": outside.url}))
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.text().await.unwrap());
    let script = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
    std::fs::write(
        script.path(),
        r#"[{"tool_calls": [{"name": "write", "arguments": {}}]}, {"deltas": ["written"]}]"#,
    )
    .unwrap();
    let bot: serde_json::Value = http
        .post(format!("{}/v1/bots", server.base))
        .bearer_auth(&server.token)
        .json(&serde_json::json!({"name": "W", "model": format!("scripted:{}", script.path().display()),
            "tools": [{"name": "write", "input_schema": {}}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let chat: serde_json::Value = http
        .post(format!("{}/v1/chats", server.base))
        .bearer_auth(&server.token)
        .json(&serde_json::json!({"bot_id": bot["id"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sent: serde_json::Value = http
        .post(format!(
            "{}/v1/chats/{}/messages",
            server.base,
            chat["id"].as_str().unwrap()
        ))
        .bearer_auth(&server.token)
        .json(&serde_json::json!({"content": [{"type": "text", "text": "Write"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let execution = sent["execution_id"].as_str().unwrap();
    // The server is still up: it did not abort at the fault point.
    let (_, ended) = server.events_to_end(execution).await;
    assert!(ended, "the Turn ended");
    assert_eq!(outside.received(), 1, "the tool was called once");
}

/// On one node (SQLite), work of a kind no workflow of this build runs can run nowhere: the
/// node ends it `interrupted` with a reason when it starts, instead of leaving it queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_interrupts_work_of_a_kind_it_has_no_workflow_for() {
    use openbot_server::engine::{Engine, Submission};
    use openbot_server::sealed::KeyRing;
    use openbot_server::store::{Scope, SqliteStore};

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap().to_string();
    assert!(openbot(&["migrate", "--data-dir", &data]).status.success());
    let keys = KeyRing::load_or_create(&dir.path().join("seal-keys")).unwrap();
    let db = dir.path().join("openbot.db");
    let store = std::sync::Arc::new(SqliteStore::open(&db, keys.clone()).await.unwrap());
    let engine = Engine::open(store, keys.clone(), "earlier-build".into());
    let id = engine
        .submit(Submission::new(
            "legacy_report",
            Scope::Member("m".into()),
            &serde_json::json!({"report": 1}),
        ))
        .await
        .unwrap()
        .execution_id();
    engine.shutdown().await;

    let mut child = Command::new(env!("CARGO_BIN_EXE_openbot"))
        .args(["serve", "--data-dir", &data, "--bind", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let listening = tokio::task::spawn_blocking(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.contains("listening on"))
    })
    .await
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(listening, "the node started");

    let store = SqliteStore::open(&db, keys).await.unwrap();
    let row = openbot_server::store::ExecutionStore::execution(&store, id)
        .await
        .unwrap();
    assert_eq!(row.state, openbot_schema::ExecutionState::Interrupted);
    let reason = row.reason.unwrap_or_default();
    assert!(reason.contains("legacy_report"), "{reason}");
}
