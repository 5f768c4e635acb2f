//! The CLI as a client of a real `openbot serve`: login, Bots, Chats with a streamed reply,
//! executions, unknown outcomes, JSON output and the errors of a server that is down.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/endpoint.rs"]
mod endpoint;
#[path = "support/served.rs"]
mod served;

use std::process::{Command, Output};

use serde_json::Value;
use served::Served;

/// A CLI with its own config folder, talking to `served`.
struct Cli {
    config: tempfile::TempDir,
    script: tempfile::TempDir,
}

impl Cli {
    fn new() -> Self {
        let script = tempfile::tempdir().unwrap();
        std::fs::write(
            script.path().join("hello.json"),
            r#"{"steps": [{"deltas": ["Hello", ", ", "world!"]}], "repeat": true}"#,
        )
        .unwrap();
        Self {
            config: tempfile::tempdir().unwrap(),
            script,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_openbot"))
            .args(args)
            .env("OPENBOT_CONFIG_DIR", self.config.path())
            .env_remove("OPENBOT_SERVER")
            .env_remove("OPENBOT_TOKEN")
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "openbot {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    fn login(&self, served: &Served) {
        self.ok(&["login", "--server", &served.base, "--token", &served.token]);
    }

    fn model(&self) -> String {
        format!(
            "scripted:{}",
            self.script.path().join("hello.json").display()
        )
    }

    /// A Bot and a Chat; returns the Chat's ID.
    fn chat(&self) -> String {
        let bot = self.ok(&[
            "bots",
            "create",
            "--name",
            "Greeter",
            "--model",
            &self.model(),
        ]);
        self.ok(&["chats", "create", "--bot", bot.trim()])
            .trim()
            .to_string()
    }
}

#[test]
fn login_checks_the_token_and_later_commands_use_it() {
    let served = Served::start();
    let cli = Cli::new();
    let refused = cli.run(&["login", "--server", &served.base, "--token", "ob_wrong"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("unauthorized"));
    assert!(!cli.config.path().join("login.json").exists());

    cli.login(&served);
    let listed: Value = serde_json::from_str(&cli.ok(&["bots", "list", "--json"])).unwrap();
    assert_eq!(listed, serde_json::json!({"items": []}));
}

#[test]
fn chats_send_streams_the_reply_and_exits_zero() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let chat = cli.chat();
    let reply = cli.ok(&["chats", "send", &chat, "Hi"]);
    assert_eq!(reply, "Hello, world!\n");
    let history = cli.ok(&["chats", "history", &chat]);
    assert_eq!(history, "user: Hi\nassistant: Hello, world!\n");
}

#[test]
fn a_list_prints_one_page_and_its_next_cursor_and_all_follows_the_cursors() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let bots: Vec<String> = (0..3)
        .map(|n| {
            let name = format!("Bot{n}");
            cli.ok(&["bots", "create", "--name", &name, "--model", &cli.model()])
                .trim()
                .to_string()
        })
        .collect();
    let first = cli.ok(&["bots", "list", "--limit", "2"]);
    let lines: Vec<&str> = first.lines().collect();
    assert_eq!(lines.len(), 3, "two Bots and the next cursor: {first}");
    assert!(lines[0].starts_with(&bots[0]) && lines[1].starts_with(&bots[1]));
    let cursor = lines[2].strip_prefix("next: ").expect("a next line");
    let rest = cli.ok(&["bots", "list", "--limit", "2", "--cursor", cursor]);
    assert!(
        rest.starts_with(&bots[2]) && rest.lines().count() == 1,
        "{rest}"
    );
    let page: Value =
        serde_json::from_str(&cli.ok(&["bots", "list", "--limit", "1", "--json"])).unwrap();
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert!(page["next_cursor"].is_string(), "{page}");
    let all: Value =
        serde_json::from_str(&cli.ok(&["bots", "list", "--limit", "1", "--all", "--json"]))
            .unwrap();
    let ids: Vec<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, bots, "every Bot once, oldest first");
    assert!(all.get("next_cursor").is_none(), "{all}");
    let bad = cli.run(&["bots", "list", "--limit", "0"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid_input"));
}

#[test]
fn json_output_prints_one_event_per_line_in_order() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let chat = cli.chat();
    let lines = cli.ok(&["chats", "send", &chat, "Hi", "--json"]);
    let events: Vec<Value> = lines
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let sequences: Vec<u64> = events
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(sequences, (1..=events.len() as u64).collect::<Vec<_>>());
    assert_eq!(events.last().unwrap()["type"], "turn_ended");
}

#[test]
fn executions_observe_reads_from_a_cursor_and_get_shows_the_end_state() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let chat = cli.chat();
    let receipt: Value =
        serde_json::from_str(&cli.ok(&["chats", "send", &chat, "Hi", "--no-wait", "--json"]))
            .unwrap();
    let id = receipt["execution_id"].as_str().unwrap();
    let all = cli.ok(&["executions", "observe", id, "--json"]);
    let later = cli.ok(&["executions", "observe", id, "--after", "2", "--json"]);
    let all: Vec<&str> = all.lines().collect();
    let later: Vec<&str> = later.lines().collect();
    assert_eq!(later, all[2..].to_vec());
    let execution: Value =
        serde_json::from_str(&cli.ok(&["executions", "get", id, "--json"])).unwrap();
    assert_eq!(execution["state"], "completed");
    let cancel = cli.run(&["executions", "cancel", id]);
    assert!(
        !cancel.status.success(),
        "an ended execution cannot be cancelled"
    );
    assert!(String::from_utf8_lossy(&cancel.stderr).contains("conflict"));
}

#[test]
fn a_server_that_is_down_gives_one_line_and_exit_code_1() {
    let mut served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    served.kill();
    let output = cli.run(&["bots", "list"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("unavailable"), "{stderr}");
}

#[test]
fn budgets_are_set_listed_and_removed_through_the_cli() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let chat = cli.chat();
    let set: Value = serde_json::from_str(
        &cli.ok(&["budgets", "set", "chat", &chat, "--usd", "0.25", "--json"]),
    )
    .unwrap();
    assert_eq!(set["max_cost_micros"], 250_000);
    assert_eq!(set["spent_micros"], 0);
    let listed = cli.ok(&["budgets", "list"]);
    assert_eq!(
        listed.trim(),
        format!("chat  {chat}  spent $0.000000 of $0.250000")
    );
    cli.ok(&["budgets", "delete", "chat", &chat]);
    let unknown = cli.run(&["budgets", "delete", "chat", &chat]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("not_found"));
}

#[test]
fn limits_are_set_listed_and_removed_through_the_cli() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let set: Value = serde_json::from_str(&cli.ok(&[
        "limits",
        "set",
        "provider:openai",
        "--concurrent",
        "4",
        "--requests",
        "500",
        "--json",
    ]))
    .unwrap();
    assert_eq!(set["scope"], "provider:openai");
    assert_eq!(set["max_concurrent"], 4);
    assert_eq!(set["requests_per_window"], 500);
    assert_eq!(set["window_ms"], 60_000);
    cli.ok(&["limits", "set", "memory", "--tokens", "1000"]);
    let listed = cli.ok(&["limits", "list"]);
    assert_eq!(
        listed.trim(),
        "memory  1000 tokens per 60000 ms  wait at most 60000 ms\n\
         provider:openai  0 of 4 permits in use  500 requests per 60000 ms  wait at most 60000 ms"
    );
    // One page as the API gives it; --all follows the cursors.
    let first: Value =
        serde_json::from_str(&cli.ok(&["limits", "list", "--limit", "1", "--json"])).unwrap();
    assert_eq!(first["items"].as_array().unwrap().len(), 1);
    let cursor = first["next_cursor"].as_str().unwrap().to_string();
    let second: Value = serde_json::from_str(&cli.ok(&[
        "limits", "list", "--limit", "1", "--cursor", &cursor, "--json",
    ]))
    .unwrap();
    assert_eq!(second["items"][0]["scope"], "provider:openai");
    let all: Value =
        serde_json::from_str(&cli.ok(&["limits", "list", "--limit", "1", "--all", "--json"]))
            .unwrap();
    assert_eq!(all["items"].as_array().unwrap().len(), 2);
    assert!(all.get("next_cursor").is_none());
    let text = cli.ok(&["limits", "list", "--limit", "1"]);
    assert!(text.contains(&format!("next: {cursor}")), "{text}");
    cli.ok(&["limits", "delete", "memory"]);
    let unknown = cli.run(&["limits", "delete", "memory"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("not_found"));
}

#[test]
fn file_retention_is_shown_set_and_cleared_through_the_cli() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    assert_eq!(
        cli.ok(&["files", "retention"]).trim(),
        "files are kept until deleted"
    );
    assert_eq!(
        cli.ok(&["files", "retention", "set", "30"]).trim(),
        "files older than 30 days are deleted"
    );
    let shown: Value =
        serde_json::from_str(&cli.ok(&["files", "retention", "show", "--json"])).unwrap();
    assert_eq!(shown["days"], 30);
    let refused = cli.run(&["files", "retention", "set", "0"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("invalid_input"));
    cli.ok(&["files", "retention", "clear"]);
    let shown: Value = serde_json::from_str(&cli.ok(&["files", "retention", "--json"])).unwrap();
    assert_eq!(shown, serde_json::json!({}));
    let unknown = cli.run(&["files", "retention", "clear"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("not_found"));
}

#[test]
fn usage_is_reported_as_a_table_json_lines_and_csv() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let script = cli.script.path().join("paid.json");
    std::fs::write(
        &script,
        r#"{"steps": [{"text": "paid", "usage": {"input_tokens": 10, "output_tokens": 5, "cost_micros": 600}}], "repeat": true}"#,
    )
    .unwrap();
    let model = format!("scripted:{}", script.display());
    let bot = cli.ok(&["bots", "create", "--name", "Payer", "--model", &model]);
    let chat = cli.ok(&["chats", "create", "--bot", bot.trim()]);
    let chat = chat.trim();
    cli.ok(&["chats", "send", chat, "one"]);
    cli.ok(&["chats", "send", chat, "two"]);
    let json = cli.ok(&["usage", "--by", "chat", "--json"]);
    let rows: Vec<Value> = json
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{json}");
    assert_eq!(rows[0]["key"], chat);
    assert_eq!(rows[0]["calls"], 2);
    assert_eq!(rows[0]["cost_micros"], 1200);
    let table = cli.ok(&["usage", "--by", "chat"]);
    assert!(table.starts_with("CHAT"), "{table}");
    assert!(table.contains(chat), "{table}");
    assert!(
        table.trim_end().ends_with("total cost $0.001200"),
        "{table}"
    );
    let csv = cli.ok(&["usage", "--by", "model", "--csv"]);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0].split(',').next(), Some("model"));
    assert_eq!(lines.len(), 2, "{csv}");
    assert!(lines[1].ends_with(",2,2,0,20,10,0,1200,0"), "{csv}");
    // A range after every call has no rows.
    let empty = cli.ok(&["usage", "--from", "2999-01-01T00:00:00Z", "--json"]);
    assert_eq!(empty, "");
}

#[test]
fn the_platform_grants_credits_with_openbot_admin() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let organizations: Value =
        serde_json::from_str(&cli.ok(&["organizations", "list", "--json"])).unwrap();
    let organization = organizations["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let data = served.data_dir().to_str().unwrap().to_string();
    let grant = |usd: &str| -> Value {
        let args = [
            "admin",
            "--data-dir",
            &data,
            "credits",
            "grant",
            "--organization",
            &organization,
            "--usd",
            usd,
            "--note",
            "trial",
        ];
        serde_json::from_str(&cli.ok(&args)).unwrap()
    };
    assert_eq!(grant("1.5")["balance_micros"], 1_500_000);
    assert_eq!(grant("1")["balance_micros"], 2_500_000);
    let refused = cli.run(&[
        "admin",
        "--data-dir",
        &data,
        "credits",
        "grant",
        "--organization",
        &organization,
        "--usd",
        "0",
    ]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--usd must be more than 0"));
}

#[test]
fn http_tools_are_registered_listed_and_removed_through_the_cli() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let put: Value = serde_json::from_str(&cli.ok(&[
        "tools",
        "put",
        "lookup",
        "--url",
        "http://127.0.0.1:9/lookup",
        "--retry-safe",
        "--json",
    ]))
    .unwrap();
    assert_eq!(put["retry_safe"], true);
    assert_eq!(put["input_schema"], serde_json::json!({"type": "object"}));
    assert_eq!(
        cli.ok(&["tools", "list"]).trim(),
        "lookup  http://127.0.0.1:9/lookup"
    );
    let bad = cli.run(&["tools", "put", "bad name", "--url", "http://127.0.0.1:9/"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid_input"));
    cli.ok(&["tools", "delete", "lookup"]);
    assert_eq!(
        cli.ok(&["tools", "list", "--json"]).trim(),
        r#"{"items":[]}"#
    );
}

/// A local endpoint standing for a tool: answers `paid` to each request and counts them.
fn counting_endpoint() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    endpoint::endpoint(0)
}

#[test]
fn a_call_waiting_for_approval_is_listed_approved_and_runs_once_through_the_cli() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let (url, calls) = counting_endpoint();
    cli.ok(&["tools", "put", "pay", "--url", &url]);
    let rule = cli.ok(&["approvals", "add-rule", "pay", "--action", "ask"]);
    assert!(rule.contains("ask  pay"), "{rule}");
    std::fs::write(
        cli.script.path().join("pay.json"),
        r#"{"steps": [{"tool_calls": [{"name": "pay", "arguments": {"amount": 5}}]}, {"text": "Asked."}], "repeat": true}"#,
    )
    .unwrap();
    std::fs::write(
        cli.script.path().join("tools.json"),
        r#"[{"name": "pay", "input_schema": {"type": "object"}}]"#,
    )
    .unwrap();
    let model = format!("scripted:{}", cli.script.path().join("pay.json").display());
    let tools = cli.script.path().join("tools.json").display().to_string();
    let bot = cli.ok(&[
        "bots", "create", "--name", "Payer", "--model", &model, "--tools", &tools,
    ]);
    let chat = cli
        .ok(&["chats", "create", "--bot", bot.trim()])
        .trim()
        .to_string();
    cli.ok(&["chats", "send", &chat, "Pay 5"]);
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nothing ran yet"
    );

    let pending: Value = serde_json::from_str(&cli.ok(&["approvals", "list", "--json"])).unwrap();
    let pending = &pending["items"];
    let request = pending[0]["id"].as_str().unwrap().to_string();
    assert_eq!(pending[0]["call"]["name"], "pay");
    let approved = cli.ok(&["approvals", "approve", &request, "--reason", "fine"]);
    assert!(approved.contains("approved"), "{approved}");
    let job = pending[0]["execution_id"].as_str().unwrap();
    cli.ok(&["executions", "observe", job]);
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "ran once"
    );
    let again = cli.run(&["approvals", "deny", &request]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("conflict"));
    assert_eq!(cli.ok(&["approvals", "list"]).trim(), "no requests");
}

#[test]
fn delegate_tools_are_registered_listed_and_removed_through_the_cli() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let chat_bot = cli.ok(&[
        "bots",
        "create",
        "--name",
        "Helper",
        "--model",
        &cli.model(),
    ]);
    let put: Value = serde_json::from_str(&cli.ok(&[
        "tools",
        "delegate",
        "helper",
        "--bot",
        chat_bot.trim(),
        "--max-steps",
        "3",
        "--json",
    ]))
    .unwrap();
    assert_eq!(put["limits"]["max_steps"], 3);
    assert_eq!(
        cli.ok(&["tools", "delegates"]).trim(),
        format!("helper  -> bot {}", chat_bot.trim())
    );
    cli.ok(&["tools", "delete-delegate", "helper"]);
    assert_eq!(
        cli.ok(&["tools", "delegates", "--json"]).trim(),
        r#"{"items":[]}"#
    );
}

/// Waits (up to 30 s) until `executions unknown --json` lists something; returns the page.
fn unknown_page(cli: &Cli) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let page: Value =
            serde_json::from_str(&cli.ok(&["executions", "unknown", "--json"])).unwrap();
        if !page["items"].as_array().unwrap().is_empty() {
            return page;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nothing came to wait in outcome_unknown"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn an_unknown_outcome_is_listed_and_sent_again_on_a_not_applied_decision_through_the_cli() {
    let mut served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    // The endpoint never answers the first write: once its sender is killed, no one knows
    // whether it was applied.
    let (url, calls) = endpoint::endpoint(1);
    cli.ok(&["tools", "put", "pay", "--url", &url]);
    std::fs::write(
        cli.script.path().join("pay.json"),
        r#"{"steps": [{"tool_calls": [{"name": "pay", "arguments": {"amount": 5}}]}, {"text": "Paid."}]}"#,
    )
    .unwrap();
    std::fs::write(
        cli.script.path().join("tools.json"),
        r#"[{"name": "pay", "input_schema": {"type": "object"}}]"#,
    )
    .unwrap();
    let model = format!("scripted:{}", cli.script.path().join("pay.json").display());
    let tools = cli.script.path().join("tools.json").display().to_string();
    let bot = cli.ok(&[
        "bots", "create", "--name", "Payer", "--model", &model, "--tools", &tools,
    ]);
    let chat = cli
        .ok(&["chats", "create", "--bot", bot.trim()])
        .trim()
        .to_string();
    let receipt: Value =
        serde_json::from_str(&cli.ok(&["chats", "send", &chat, "Pay 5", "--no-wait", "--json"]))
            .unwrap();
    let id = receipt["execution_id"].as_str().unwrap().to_string();
    endpoint::wait_for(&calls, 1);
    served.restart();

    let page = unknown_page(&cli);
    assert_eq!(page["items"][0]["execution_id"], id.as_str());
    assert_eq!(page["items"][0]["call"], "1/tool:0/1");
    let text = cli.ok(&["executions", "unknown"]);
    assert!(
        text.contains(&format!("{id}  1/tool:0/1  pay({{\"amount\":5}})")),
        "{text}"
    );
    let missing = cli.run(&[
        "executions",
        "decide",
        &id,
        "--call",
        "1/tool:0/1",
        "--applied",
    ]);
    assert!(!missing.status.success(), "--applied needs --result");
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "not sent again"
    );

    let decided = cli.ok(&[
        "executions",
        "decide",
        &id,
        "--call",
        "1/tool:0/1",
        "--not-applied",
    ]);
    assert!(decided.contains("1/tool:0/1  not_applied"), "{decided}");
    cli.ok(&["executions", "observe", &id]);
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "sent again once"
    );
    let again = cli.run(&[
        "executions",
        "decide",
        &id,
        "--call",
        "1/tool:0/1",
        "--give-up",
    ]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("conflict"));
    assert_eq!(
        cli.ok(&["executions", "unknown"]).trim(),
        "nothing waits for a decision"
    );
}

#[test]
fn memories_are_added_listed_searched_edited_and_deleted_through_the_cli() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let bot = cli.ok(&[
        "bots",
        "create",
        "--name",
        "Rememberer",
        "--model",
        &cli.model(),
        "--memory",
    ]);
    let bot = bot.trim();
    let added: Value = serde_json::from_str(&cli.ok(&[
        "memories",
        "add",
        bot,
        "The user's dog is called Rex.",
        "--tag",
        "pets",
        "--json",
    ]))
    .unwrap();
    let id = added["id"].as_str().unwrap();
    assert_eq!(added["status"], "active");
    cli.ok(&["memories", "add", bot, "The user plays the cello."]);
    let listed = cli.ok(&["memories", "list", bot, "--tag", "pets"]);
    assert_eq!(
        listed.trim(),
        format!("{id}  active  private  The user's dog is called Rex.  [pets]")
    );
    let found: Value =
        serde_json::from_str(&cli.ok(&["memories", "search", bot, "dog called", "--json"]))
            .unwrap();
    assert_eq!(found["items"][0]["memory"]["id"], id);
    let edited: Value = serde_json::from_str(
        &cli.ok(&["memories", "edit", bot, id, "--status", "retired", "--json"]),
    )
    .unwrap();
    assert_eq!(edited["status"], "retired");
    assert_eq!(
        cli.ok(&["memories", "list", bot, "--status", "retired"])
            .lines()
            .count(),
        1
    );
    cli.ok(&["memories", "delete", bot, id]);
    let gone = cli.run(&["memories", "get", bot, id]);
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("not_found"));
    let empty = cli.run(&["memories", "add", bot, ""]);
    assert!(!empty.status.success(), "an empty memory is refused");
    let settings = cli.ok(&["memories", "settings"]);
    assert!(settings.contains("keyword ranking"), "{settings}");
}

#[test]
fn a_memory_a_turn_remembered_is_shown_searched_and_edited_with_its_evidence_through_the_cli() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let script = cli.script.path().join("remember.json");
    std::fs::write(
        &script,
        r#"[{"tool_calls": [{"name": "remember", "arguments": {"content": "The user's cat is called Tom.", "tags": ["pets"]}}]}, {"text": "Noted."}]"#,
    )
    .unwrap();
    let model = format!("scripted:{}", script.display());
    let bot = cli.ok(&[
        "bots",
        "create",
        "--name",
        "Rememberer",
        "--model",
        &model,
        "--memory",
    ]);
    let bot = bot.trim();
    let chat = cli.ok(&["chats", "create", "--bot", bot]);
    let chat = chat.trim();
    cli.ok(&["chats", "send", chat, "Remember: my cat is Tom."]);
    let listed: Value =
        serde_json::from_str(&cli.ok(&["memories", "list", bot, "--json"])).unwrap();
    let memory = &listed["items"][0];
    assert_eq!(memory["content"], "The user's cat is called Tom.");
    assert_eq!(memory["evidence"]["chat_id"], chat);
    let id = memory["id"].as_str().unwrap();
    let execution = memory["evidence"]["execution_id"].as_str().unwrap();
    let shown = cli.ok(&["memories", "get", bot, id]);
    assert!(
        shown.contains(&format!("chat: {chat}"))
            && shown.contains(&format!("execution: {execution}")),
        "{shown}"
    );
    let found: Value =
        serde_json::from_str(&cli.ok(&["memories", "search", bot, "cat called", "--json"]))
            .unwrap();
    assert_eq!(found["items"][0]["memory"]["evidence"]["chat_id"], chat);
    let edited: Value =
        serde_json::from_str(&cli.ok(&["memories", "edit", bot, id, "--tag", "cats", "--json"]))
            .unwrap();
    assert_eq!(edited["tags"], serde_json::json!(["cats"]));
    assert_eq!(
        edited["evidence"], memory["evidence"],
        "an edit keeps the evidence"
    );
}

#[test]
#[allow(clippy::too_many_lines)] // one walk through every vaults command
fn vault_items_and_rules_are_managed_through_the_cli_and_values_never_printed() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let secret = format!("cli-secret-{}", uuid::Uuid::now_v7().simple());
    let from_env = format!("env-secret-{}", uuid::Uuid::now_v7().simple());
    let created = Command::new(env!("CARGO_BIN_EXE_openbot"))
        .args([
            "vaults",
            "create",
            "payments",
            "--field",
            &format!("token={secret}"),
            "--field-env",
            "key=PAYMENTS_KEY",
            "--json",
        ])
        .env("OPENBOT_CONFIG_DIR", cli.config.path())
        .env("PAYMENTS_KEY", &from_env)
        .env_remove("OPENBOT_SERVER")
        .env_remove("OPENBOT_TOKEN")
        .output()
        .unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let item: Value = serde_json::from_slice(&created.stdout).unwrap();
    let id = item["id"].as_str().unwrap().to_string();
    let names: Vec<&str> = item["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["key", "token"]);

    let shown = cli.ok(&["vaults", "show", &id]);
    assert_eq!(
        shown.trim(),
        format!("{id}  payments  (member)  fields: key, token")
    );
    cli.ok(&["vaults", "set", &id, "token", "--value", "rotated-value"]);
    let listed = cli.ok(&["vaults", "list"]);
    assert!(listed.contains(&id), "{listed}");

    let bot = cli.ok(&["bots", "create", "--name", "Payer", "--model", &cli.model()]);
    let rule: Value = serde_json::from_str(&cli.ok(&[
        "vaults",
        "allow",
        &id,
        "--field",
        "token",
        "--bot",
        bot.trim(),
        "--json",
    ]))
    .unwrap();
    assert_eq!(rule["reader"]["bot_id"], bot.trim());
    let rules = cli.ok(&["vaults", "rules", &id]);
    assert_eq!(
        rules.trim(),
        format!(
            "{}  bot {} may read token",
            rule["id"].as_str().unwrap(),
            bot.trim()
        )
    );
    // A tool with a reference in a header, through `openbot tools put --header`.
    let tool = cli.ok(&[
        "tools",
        "put",
        "pay",
        "--url",
        "http://127.0.0.1:9/pay",
        "--header",
        &format!("Authorization=Bearer {{{{vault.{id}.token}}}}"),
        "--json",
    ]);
    let tool: Value = serde_json::from_str(&tool).unwrap();
    assert_eq!(
        tool["headers"]["Authorization"],
        format!("Bearer {{{{vault.{id}.token}}}}")
    );
    // A manual App connection with a reference in a header reads through its own rule.
    cli.ok(&[
        "apps",
        "add",
        "payments",
        "--url",
        "https://mcp.example.com/mcp",
    ]);
    let connection: Value = serde_json::from_str(&cli.ok(&[
        "apps",
        "connect",
        "payments",
        "--header",
        &format!("X-Api-Key: {{{{vault.{id}.token}}}}"),
        "--json",
    ]))
    .unwrap();
    let connection = connection["id"].as_str().unwrap().to_string();
    let app_rule: Value = serde_json::from_str(&cli.ok(&[
        "vaults",
        "allow",
        &id,
        "--field",
        "token",
        "--app-connection",
        &connection,
        "--json",
    ]))
    .unwrap();
    assert_eq!(app_rule["reader"]["connection_id"], connection);
    let listed_rules = cli.ok(&["vaults", "rules", &id]);
    assert!(
        listed_rules.contains(&format!("app connection {connection} may read token")),
        "{listed_rules}"
    );
    cli.ok(&["vaults", "revoke", app_rule["id"].as_str().unwrap()]);
    // The Bot's Code Mode programs may pass the field to a tool.
    let code_rule = cli.ok(&[
        "vaults",
        "allow",
        &id,
        "--field",
        "key",
        "--code-mode",
        bot.trim(),
    ]);
    assert!(
        code_rule.contains(&format!(
            "Code Mode runs of bot {} may read key",
            bot.trim()
        )),
        "{code_rule}"
    );
    let both = cli.run(&[
        "vaults",
        "allow",
        &id,
        "--field",
        "key",
        "--code-mode",
        bot.trim(),
        "--bot",
        bot.trim(),
    ]);
    assert!(!both.status.success(), "one reader per rule");
    let rule_of_code = cli.ok(&["vaults", "rules", &id, "--json"]);
    let code_id = serde_json::from_str::<Value>(&rule_of_code).unwrap()["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["reader"]["type"] == "code_mode")
        .map(|r| r["id"].as_str().unwrap().to_string())
        .unwrap();
    cli.ok(&["vaults", "revoke", &code_id]);
    let unknown = cli.run(&[
        "vaults", "allow", &id, "--field", "token", "--tool", "missing",
    ]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("not_found"));
    cli.ok(&["vaults", "revoke", rule["id"].as_str().unwrap()]);
    assert_eq!(cli.ok(&["vaults", "rules", &id]).trim(), "no rules");
    cli.ok(&["vaults", "unset", &id, "key"]);
    cli.ok(&["vaults", "delete", &id]);
    let gone = cli.run(&["vaults", "show", &id]);
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("not_found"));
    // No command printed a value.
    for out in [&shown, &listed, &rules] {
        assert!(
            !out.contains(&secret) && !out.contains(&from_env) && !out.contains("rotated-value")
        );
    }
    assert!(!String::from_utf8_lossy(&created.stdout).contains(&secret));
}

#[test]
fn triggers_are_created_listed_paused_resumed_and_deleted_through_the_cli() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let chat = cli.chat();
    let schedule: Value = serde_json::from_str(&cli.ok(&[
        "triggers",
        "create",
        "--chat",
        &chat,
        "--cron",
        "0 9 * * MON-FRI",
        "--time-zone",
        "Europe/Berlin",
        "--text",
        "Morning summary",
        "--json",
    ]))
    .unwrap();
    let schedule_id = schedule["trigger"]["id"].as_str().unwrap().to_string();
    assert_eq!(schedule["trigger"]["kind"], "schedule");
    assert!(schedule.get("signing_secret").is_none());
    let hook = cli.ok(&["triggers", "create", "--chat", &chat, "--webhook"]);
    assert!(hook.contains("webhook /v1/hooks/"), "{hook}");
    assert!(
        hook.contains("signing secret (shown once): whsec_"),
        "{hook}"
    );

    let listed = cli.ok(&["triggers", "list"]);
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert!(
        listed.contains("schedule \"0 9 * * MON-FRI\" Europe/Berlin  active"),
        "{listed}"
    );
    assert!(!listed.contains("whsec_"));
    let paused = cli.ok(&["triggers", "pause", &schedule_id]);
    assert!(paused.contains("paused"), "{paused}");
    let resumed = cli.ok(&["triggers", "resume", &schedule_id]);
    assert!(resumed.contains("active  next 20"), "{resumed}");
    assert_eq!(
        cli.ok(&["triggers", "firings", &schedule_id]).trim(),
        "no firings"
    );
    cli.ok(&["triggers", "delete", &schedule_id]);
    let gone = cli.run(&["triggers", "show", &schedule_id]);
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("not_found"));
    let bad = cli.run(&[
        "triggers", "create", "--chat", &chat, "--cron", "not cron", "--text", "x",
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid_input"));
    assert_eq!(
        cli.ok(&["reminders", "list", "--chat", &chat]).trim(),
        "no reminders"
    );
}

#[test]
fn a_reminder_set_before_the_server_is_killed_reaches_the_chat_after_its_restart() {
    let mut served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let script = cli.script.path().join("remind.json");
    std::fs::write(
        &script,
        r#"[{"tool_calls": [{"name": "remind", "arguments": {"text": "stretch", "in": 6}}]},
            {"text": "Reminder set."},
            {"text": "Time to stretch!"}]"#,
    )
    .unwrap();
    let bot = cli.ok(&[
        "bots",
        "create",
        "--name",
        "Coach",
        "--reminders",
        "--model",
        &format!("scripted:{}", script.display()),
    ]);
    let chat = cli
        .ok(&["chats", "create", "--bot", bot.trim()])
        .trim()
        .to_string();
    assert_eq!(
        cli.ok(&["chats", "send", &chat, "remind me to stretch"]),
        "Reminder set.\n"
    );
    let pending = cli.ok(&["reminders", "list", "--chat", &chat]);
    assert!(pending.contains("pending  stretch"), "{pending}");
    // SIGKILL before the reminder's time (six seconds after it was set): its timer is only in
    // the database.
    served.restart();
    let still = cli.ok(&["reminders", "list", "--chat", &chat]);
    assert!(
        still.contains("pending"),
        "delivered before the restart: {still}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let listed = cli.ok(&["reminders", "list", "--chat", &chat]);
        if listed.contains("delivered") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never delivered: {listed}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let history = cli.ok(&["chats", "history", &chat]);
        if history.contains("assistant: Time to stretch!") {
            assert!(history.contains("user: Reminder: stretch"), "{history}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no answer: {history}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn a_program_runs_against_a_bots_tools_through_openbot_code_run() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let (url, calls) = counting_endpoint();
    cli.ok(&["tools", "put", "pay", "--url", &url]);
    std::fs::write(
        cli.script.path().join("tools.json"),
        r#"[{"name": "pay", "input_schema": {"type": "object"}}]"#,
    )
    .unwrap();
    let tools = cli.script.path().join("tools.json").display().to_string();
    let model = cli.model();
    let bot = cli.ok(&[
        "bots",
        "create",
        "--name",
        "Coder",
        "--model",
        &model,
        "--tools",
        &tools,
        "--code-mode",
    ]);
    let program = cli.script.path().join("pay.js");
    std::fs::write(
        &program,
        "console.log('paying'); return await tools.pay({amount: 5});",
    )
    .unwrap();
    let program = program.display().to_string();
    let printed = cli.ok(&["code", "run", "--bot", bot.trim(), &program]);
    assert_eq!(printed.trim(), "[log] paying\n\"paid\"", "{printed}");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    let json: Value =
        serde_json::from_str(&cli.ok(&["code", "run", "--bot", bot.trim(), &program, "--json"]))
            .unwrap();
    assert_eq!(json["ok"], true);
    let broken = cli.script.path().join("broken.js");
    std::fs::write(&broken, "while (true) {}").unwrap();
    let failed = cli.run(&[
        "code",
        "run",
        "--bot",
        bot.trim(),
        &broken.display().to_string(),
    ]);
    assert!(!failed.status.success());
    assert!(String::from_utf8_lossy(&failed.stdout).contains("code_mode.fuel_exhausted"));
}

/// GET `path` on `served` with `token`: the status and the JSON body.
fn http_get(served: &Served, path: &str, token: &str) -> (u16, Value) {
    let url = format!("{}{path}", served.base);
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let response = reqwest::Client::new()
            .get(url)
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    })
}

/// POST `body` to `path` on `served` with `token`: the status and the JSON body.
fn http_post(served: &Served, path: &str, token: &str, body: Value) -> (u16, Value) {
    let url = format!("{}{path}", served.base);
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let response = reqwest::Client::new()
            .post(url)
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    })
}

#[test]
fn only_the_operator_reads_an_error_records_cause_and_each_read_is_audited() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    // A Turn whose model refuses the request: it fails with a sealed cause and an error ID.
    let script = cli.script.path().join("refuse.json");
    std::fs::write(&script, r#"[{"error": "invalid_request"}]"#).unwrap();
    let model = format!("scripted:{}", script.display());
    let bot = cli.ok(&["bots", "create", "--name", "Refused", "--model", &model]);
    let chat = cli.ok(&["chats", "create", "--bot", bot.trim()]);
    let sent = cli.run(&["chats", "send", chat.trim(), "Hi", "--json"]);
    let events: Vec<Value> = String::from_utf8_lossy(&sent.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let failed = events
        .iter()
        .find(|e| e["type"] == "failed")
        .unwrap_or_else(|| panic!("a failed event: {events:?}"));
    let error_id = failed["error_id"].as_str().unwrap().to_string();
    let path = format!("/v1/admin/errors/{error_id}");

    // The organization's owner is no operator, and neither is a member.
    let (status, body) = http_get(&served, &path, &served.token);
    assert_eq!(status, 403, "{body}");
    assert!(body.get("cause").is_none());
    let (status, invited) = http_post(
        &served,
        "/v1/invitations",
        &served.token,
        serde_json::json!({"email": "member@example.com", "role": "member"}),
    );
    assert_eq!(status, 201, "{invited}");
    let (status, accepted) = http_post(
        &served,
        "/v1/invitations/accept",
        "",
        serde_json::json!({"secret": invited["secret"]}),
    );
    assert_eq!(status, 201, "{accepted}");
    let member = accepted["token_secret"].as_str().unwrap();
    let (status, body) = http_get(&served, &path, member);
    assert_eq!(status, 403, "{body}");
    let (status, _) = http_get(&served, &path, "ob_not_a_token");
    assert_eq!(status, 401);

    // The operator's token reads the record, opened.
    let data_dir = served.data_dir().display().to_string();
    let operator = cli.ok(&[
        "admin",
        "--data-dir",
        &data_dir,
        "operator-token",
        "create",
        "--name",
        "oncall",
    ]);
    let operator = operator.trim();
    let (status, record) = http_get(&served, &path, operator);
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["error_id"], error_id.as_str());
    assert_eq!(record["category"], failed["category"]);
    assert!(record["created_at"].is_string());
    assert!(
        record["cause"].as_str().unwrap().contains("scripted"),
        "{record}"
    );
    assert_eq!(record["execution_id"], failed["execution_id"]);
    // An operator token is no member's token: member routes do not take it.
    let (status, _) = http_get(&served, "/v1/bots", operator);
    assert_eq!(status, 401);
    let unknown = format!("/v1/admin/errors/{}", uuid::Uuid::now_v7());
    assert_eq!(http_get(&served, &unknown, operator).0, 404);

    // On the database's machine: `openbot admin errors show`, as text and as JSON.
    let shown = cli.ok(&[
        "admin",
        "--data-dir",
        &data_dir,
        "errors",
        "show",
        &error_id,
    ]);
    assert!(
        shown.contains(&error_id) && shown.contains("scripted"),
        "{shown}"
    );
    let shown: Value = serde_json::from_str(&cli.ok(&[
        "admin",
        "--data-dir",
        &data_dir,
        "errors",
        "show",
        &error_id,
        "--json",
    ]))
    .unwrap();
    assert_eq!(shown, record);
    // Or through the server, with the operator token (a member's token is refused).
    let remote: Value = serde_json::from_str(&cli.ok(&[
        "admin",
        "errors",
        "show",
        &error_id,
        "--json",
        "--server",
        &served.base,
        "--operator-token",
        operator,
    ]))
    .unwrap();
    assert_eq!(remote, record);
    let refused = cli.run(&[
        "admin",
        "errors",
        "show",
        &error_id,
        "--server",
        &served.base,
        "--operator-token",
        &served.token,
    ]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("forbidden"));

    // Every read is in the operator audit: who read which error ID.
    let audit = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let path = openbot_server::node::sqlite_path(served.data_dir());
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        let rows: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT actor, action, subject FROM operator_audit WHERE subject = $1 ORDER BY at, id",
        )
        .bind(&error_id)
        .fetch_all(&pool)
        .await
        .unwrap();
        rows
    });
    let actors: Vec<&str> = audit.iter().map(|(actor, _, _)| actor.as_str()).collect();
    assert_eq!(audit.len(), 4, "{audit:?}");
    assert_eq!(actors[0], "token:oncall");
    assert!(actors[1].starts_with("local:") && actors[2].starts_with("local:"));
    assert_eq!(actors[3], "token:oncall");
    assert!(audit.iter().all(|(_, action, _)| action == "error.read"));
}

impl Cli {
    /// Runs with these variables in the command's environment.
    fn ok_with(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let output = Command::new(env!("CARGO_BIN_EXE_openbot"))
            .args(args)
            .env("OPENBOT_CONFIG_DIR", self.config.path())
            .env_remove("OPENBOT_SERVER")
            .env_remove("OPENBOT_TOKEN")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "openbot {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        serde_json::from_str(&self.ok(&args)).unwrap()
    }
}

#[test]
fn members_invitations_and_tokens_are_managed_through_the_cli() {
    let served = Served::start();
    let owner = Cli::new();
    owner.login(&served);
    let invited = owner.json(&[
        "invitations",
        "create",
        "ann@example.com",
        "--role",
        "admin",
    ]);
    assert_eq!(invited["invitation"]["role"], "admin");
    let secret = invited["secret"].as_str().unwrap();
    let other = owner.json(&["invitations", "create", "bob@example.com"]);
    let listed = owner.json(&["invitations", "list", "--all"]);
    assert_eq!(listed["items"].as_array().unwrap().len(), 2);
    let text = owner.ok(&["invitations", "list"]);
    assert!(
        text.contains("ann@example.com  admin  open until"),
        "{text}"
    );
    let bob = other["invitation"]["id"].as_str().unwrap();
    owner.ok(&["invitations", "revoke", bob]);
    assert!(owner.ok(&["invitations", "list"]).contains("revoked"));

    // Accepting needs no login: the secret is the proof.
    let ann = Cli::new();
    let accepted = ann.json(&["invitations", "accept", secret, "--server", &served.base]);
    let ann_token = accepted["token_secret"].as_str().unwrap().to_string();
    let ann_member = accepted["member_id"].as_str().unwrap().to_string();
    ann.ok(&["login", "--server", &served.base, "--token", &ann_token]);
    let members = owner.json(&["members", "list"]);
    let emails: Vec<&str> = members["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["email"].as_str().unwrap())
        .collect();
    assert!(emails.contains(&"ann@example.com"), "{members}");
    assert!(
        owner
            .ok(&["members", "list"])
            .contains("ann@example.com  admin")
    );

    // A narrower token: it reads Bots and cannot create one.
    let created = ann.json(&["tokens", "create", "reader", "--right", "bots:read"]);
    assert_eq!(
        created["token"]["rights"],
        serde_json::json!([{"resource": "bots", "action": "read"}])
    );
    let reader = created["secret"].as_str().unwrap().to_string();
    let reader_id = created["token"]["id"].as_str().unwrap().to_string();
    let as_reader = ["--server", served.base.as_str(), "--token", reader.as_str()];
    ann.ok(&[&["bots", "list"][..], &as_reader].concat());
    let refused = ann.run(
        &[
            &["bots", "create", "--name", "B", "--model", "x:y"][..],
            &as_reader,
        ]
        .concat(),
    );
    assert!(String::from_utf8_lossy(&refused.stderr).contains("forbidden"));
    let bad = ann.run(&["tokens", "create", "x", "--right", "bots:delete"]);
    assert!(!bad.status.success());
    let tokens = ann.json(&["tokens", "list", "--all"]);
    assert!(
        tokens["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == reader_id.as_str()),
        "{tokens}"
    );
    assert!(ann.ok(&["tokens", "list"]).contains("reader  1 rights"));
    ann.ok(&["tokens", "revoke", &reader_id]);
    let revoked = ann.run(&[&["bots", "list"][..], &as_reader].concat());
    assert!(String::from_utf8_lossy(&revoked.stderr).contains("unauthorized"));

    // Removing a member ends their access.
    let removed = owner.json(&["members", "remove", &ann_member]);
    assert_eq!(removed["removed"], ann_member.as_str());
    let gone = ann.run(&["bots", "list"]);
    assert!(!gone.status.success());
}

#[test]
fn providers_prices_and_credits_are_managed_through_the_cli() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    assert_eq!(cli.ok(&["health"]).trim(), "ok");

    let set: Value = serde_json::from_str(&cli.ok_with(
        &[
            "providers",
            "set",
            "openai",
            "--api-key-env",
            "TEST_KEY",
            "--json",
        ],
        &[("TEST_KEY", "sk-test-secret")],
    ))
    .unwrap();
    assert_eq!(set["kind"], "openai");
    assert_eq!(set["has_key"], true);
    let listed = cli.ok(&["providers", "list"]);
    assert!(listed.contains("openai  key set"), "{listed}");
    assert!(
        !cli.ok(&["providers", "list", "--json"])
            .contains("sk-test-secret")
    );
    cli.ok(&["providers", "delete", "openai"]);
    assert_eq!(
        cli.json(&["providers", "list"])["items"],
        serde_json::json!([])
    );
    assert!(!cli.run(&["providers", "set", "openai"]).status.success());

    let price = cli.json(&[
        "prices",
        "set",
        "openai:my-model",
        "--input-usd",
        "2.5",
        "--output-usd",
        "10",
    ]);
    assert_eq!(price["input_micros_per_million"], 2_500_000);
    assert_eq!(price["output_micros_per_million"], 10_000_000);
    assert_eq!(price["source"], "organization");
    let prices = cli.json(&["prices", "list", "--all"]);
    assert!(
        prices["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["model"] == "openai:my-model"),
        "{prices}"
    );
    assert!(
        cli.ok(&["prices", "list", "--all"])
            .contains("openai:my-model  in $2.500000")
    );
    cli.ok(&["prices", "delete", "openai:my-model"]);
    let gone = cli.run(&["prices", "delete", "openai:my-model"]);
    assert!(String::from_utf8_lossy(&gone.stderr).contains("not_found"));

    assert_eq!(cli.json(&["credits", "show"])["enabled"], false);
    let granted = cli.json(&["credits", "grant", "--usd", "25", "--note", "welcome"]);
    assert_eq!(granted["balance_micros"], 25_000_000);
    assert!(cli.ok(&["credits", "show"]).contains("balance $25.000000"));
    let ledger = cli.json(&["credits", "ledger"]);
    assert_eq!(ledger["items"][0]["kind"], "grant");
    assert_eq!(ledger["items"][0]["note"], "welcome");
    assert!(
        cli.ok(&["credits", "ledger", "--all"])
            .contains("grant  $25.000000  welcome")
    );
}

#[test]
fn files_are_uploaded_listed_downloaded_and_deleted_through_the_cli() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let path = cli.script.path().join("notes.txt");
    std::fs::write(&path, "meeting at noon\n").unwrap();
    let id = cli.ok(&["files", "upload", path.to_str().unwrap()]);
    let id = id.trim();
    let shown = cli.json(&["files", "show", id]);
    assert_eq!(shown["name"], "notes.txt");
    assert_eq!(shown["media_type"], "text/plain");
    assert_eq!(shown["size"], 16);
    let listed = cli.json(&["files", "list", "--all"]);
    assert_eq!(listed["items"][0]["id"], id);
    assert!(
        cli.ok(&["files", "list"])
            .contains(&format!("{id}  notes.txt  text/plain  16 bytes"))
    );
    assert_eq!(cli.ok(&["files", "download", id]), "meeting at noon\n");
    let out = cli.script.path().join("copy.txt");
    let written = cli.json(&["files", "download", id, "--output", out.to_str().unwrap()]);
    assert_eq!(written["size"], 16);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "meeting at noon\n");
    cli.ok(&["files", "delete", id]);
    let gone = cli.run(&["files", "show", id]);
    assert!(String::from_utf8_lossy(&gone.stderr).contains("not_found"));
}

#[test]
fn bots_update_chats_get_and_executions_deliver_reach_their_operations() {
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let chat = cli.chat();
    let shown = cli.json(&["chats", "get", &chat]);
    assert_eq!(shown["id"], chat.as_str());
    let bot = shown["bot_id"].as_str().unwrap().to_string();
    let updated = cli.json(&["bots", "update", &bot, "--name", "Renamed"]);
    assert_eq!(updated["spec"]["name"], "Renamed");
    assert!(cli.ok(&["bots", "get", &bot]).contains("Renamed"));
    let receipt: Value =
        serde_json::from_str(&cli.ok(&["chats", "send", &chat, "Hi", "--json", "--no-wait"]))
            .unwrap();
    let execution = receipt["execution_id"].as_str().unwrap();
    cli.ok(&["executions", "observe", execution]);
    // The Turn ended: no call waits for a result, and the server says so.
    let late = cli.run(&[
        "executions",
        "deliver",
        execution,
        "--call",
        "c1",
        "--tool",
        "t",
        "--result",
        "ok",
    ]);
    assert!(!late.status.success());
    assert!(
        String::from_utf8_lossy(&late.stderr).contains("conflict"),
        "{}",
        String::from_utf8_lossy(&late.stderr)
    );
}

#[test]
fn a_machine_pairs_through_openbot_computer_pair_and_a_member_approves_with_the_cli() {
    use std::io::BufRead;
    let served = Served::start();
    let cli = Cli::new();
    cli.login(&served);
    let machine = tempfile::tempdir().unwrap();
    let credential = machine.path().join("computer.json");
    let mut pair = Command::new(env!("CARGO_BIN_EXE_openbot"))
        .args([
            "computer",
            "pair",
            "--server",
            &served.base,
            "--name",
            "build-box",
            "--json",
        ])
        .arg("--credential-file")
        .arg(&credential)
        .env("OPENBOT_CONFIG_DIR", machine.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(pair.stdout.take().unwrap()).lines();
    let shown: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let code = shown["code"].as_str().unwrap();
    let approved = cli.ok(&["computers", "approve", code]);
    assert!(
        approved.contains("approved:") && approved.contains("build-box"),
        "{approved}"
    );
    let done: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(pair.wait().unwrap().success());
    let saved: Value = serde_json::from_slice(&std::fs::read(&credential).unwrap()).unwrap();
    assert_eq!(saved["computer_id"], done["computer_id"]);
    assert!(saved["credential"].as_str().unwrap().starts_with("obc_"));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&credential).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "only this user reads the credential");
    let id = done["computer_id"].as_str().unwrap();
    let listed = cli.ok(&["computers", "list"]);
    assert!(listed.contains(id) && listed.contains("paired"), "{listed}");
    // The code was used: approving it again says so.
    let again = cli.run(&["computers", "approve", code]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("used"));
    cli.ok(&["computers", "remove", id]);
    assert!(cli.ok(&["computers", "list"]).contains("no Computers"));
}
