//! Computers on a server, on SQLite and on a real PostgreSQL: a machine pairs when a member
//! approves its code and claims its own credential; codes expire and are single-use; a
//! member never reaches another member's Computer; removal revokes the credential at once;
//! nothing secret is stored in the clear.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/outside.rs"]
mod outside;
#[path = "support/pg.rs"]
mod pg;
#[macro_use]
#[path = "support/api.rs"]
mod api;
#[path = "../../core/tests/support/mcp_servers.rs"]
mod mcp_servers;

use std::path::{Path, PathBuf};
use std::time::Duration;

use openbot_schema::{EventKind, TurnOutcome};
use openbot_server::identity::Role;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use api::{Server, error_code, outcome_of, postgres, receipt, server, sqlite};

http_tests!(
    a_machine_pairs_when_a_member_approves_its_code_and_claims_its_own_credential,
    a_claim_before_approval_waits_and_a_wrong_secret_is_not_found,
    an_unknown_expired_or_used_code_is_refused_with_its_reason,
    a_second_claim_issues_a_new_credential,
    a_member_never_reaches_another_members_computer_and_sees_shared_ones,
    only_owners_and_admins_share_or_remove_a_shared_computer,
    removing_a_computer_refuses_its_claims_and_hides_it,
    a_token_without_the_computers_right_or_limited_to_bots_reaches_no_computer,
    no_code_secret_or_credential_is_stored_in_the_clear,
    a_computer_credential_is_no_member_token,
    a_bot_granted_a_computer_writes_reads_and_runs_on_the_linked_machine,
    a_call_that_changes_the_machine_asks_first_by_default,
    a_grant_taken_back_stops_a_waiting_call_before_it_is_sent,
    removing_a_computer_ends_its_link_and_stops_its_agent,
    a_link_needs_the_computers_own_current_credential,
    only_a_member_who_sees_the_computer_and_may_change_the_bot_grants_it,
    a_write_whose_answer_is_lost_with_the_agent_is_outcome_unknown_and_never_sent_again,
    a_member_reads_a_bots_terminal_by_cursor_and_no_other_member_can,
    a_connector_the_machine_publishes_is_an_app_whose_tools_a_bot_calls_over_the_link,
    only_an_admin_who_may_use_the_computer_publishes_its_connector,
    a_connector_call_whose_answer_is_lost_is_outcome_unknown_and_never_sent_again,
    a_removed_members_machine_links_no_more,
);

async fn start(server: &Server, name: &str) -> Value {
    let response = server
        .http
        .post(format!("{}/v1/computers/pairings", server.base))
        .json(&json!({"name": name}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

async fn approve(server: &Server, token: &str, code: &str, shared: bool) -> reqwest::Response {
    server
        .post("/v1/computers/pairings/approve", token)
        .json(&json!({"code": code, "shared": shared}))
        .send()
        .await
        .unwrap()
}

async fn claim(server: &Server, pairing: &Value) -> reqwest::Response {
    server
        .http
        .post(format!(
            "{}/v1/computers/pairings/{}/claim",
            server.base,
            pairing["id"].as_str().unwrap()
        ))
        .json(&json!({"secret": pairing["secret"]}))
        .send()
        .await
        .unwrap()
}

/// A pairing approved by `token`: the pairing and the Computer.
async fn paired(server: &Server, token: &str, name: &str, shared: bool) -> (Value, Value) {
    let pairing = start(server, name).await;
    let response = approve(server, token, pairing["code"].as_str().unwrap(), shared).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    (pairing, response.json().await.unwrap())
}

async fn a_machine_pairs_when_a_member_approves_its_code_and_claims_its_own_credential(
    server: Server,
) {
    let pairing = start(&server, "laptop").await;
    let code = pairing["code"].as_str().unwrap();
    assert_eq!(code.len(), 9, "{code}");
    // Typed back in another case, without the dash.
    let response = approve(
        &server,
        &server.owner,
        &code.replace('-', "").to_lowercase(),
        false,
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let computer: Value = response.json().await.unwrap();
    assert_eq!(computer["name"], "laptop");
    let owner = server.owner_member().await;
    assert_eq!(computer["owner_member_id"], owner.member_id.to_string());
    assert!(computer.get("paired_at").is_none());
    let answer: Value = claim(&server, &pairing).await.json().await.unwrap();
    assert_eq!(answer["approved"], true);
    assert_eq!(answer["computer_id"], computer["id"]);
    assert!(answer["credential"].as_str().unwrap().starts_with("obc_"));
    let id = computer["id"].as_str().unwrap();
    let shown: Value = server
        .get(&format!("/v1/computers/{id}"), &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(shown["paired_at"].is_string(), "{shown}");
    let listed = server.items("/v1/computers", &server.owner).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], computer["id"]);
}

async fn a_claim_before_approval_waits_and_a_wrong_secret_is_not_found(server: Server) {
    let pairing = start(&server, "desk").await;
    let response = claim(&server, &pairing).await;
    assert_eq!(response.status(), StatusCode::OK);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["approved"], false);
    assert!(answer.get("credential").is_none());
    let mut wrong = pairing.clone();
    wrong["secret"] = json!("not-the-secret");
    let (status, code) = error_code(claim(&server, &wrong).await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
}

async fn an_unknown_expired_or_used_code_is_refused_with_its_reason(server: Server) {
    let (status, code) =
        error_code(approve(&server, &server.owner, "ABCD-EFGH", false).await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    let (status, code) = error_code(approve(&server, &server.owner, "0000", false).await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_REQUEST, "invalid_input")
    );

    let (pairing, _) = paired(&server, &server.owner, "used", false).await;
    let response = approve(
        &server,
        &server.owner,
        pairing["code"].as_str().unwrap(),
        false,
    )
    .await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let body: Value = response.json().await.unwrap();
    assert!(body["message"].as_str().unwrap().contains("used"), "{body}");

    let late = start(&server, "late").await;
    let id: uuid::Uuid = late["id"].as_str().unwrap().parse().unwrap();
    server
        .raw_execute(
            "UPDATE computer_pairings SET expires_at = 0 WHERE id = $1",
            id,
        )
        .await;
    let response = approve(
        &server,
        &server.owner,
        late["code"].as_str().unwrap(),
        false,
    )
    .await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["message"].as_str().unwrap().contains("expired"),
        "{body}"
    );
    let (status, _) = error_code(claim(&server, &late).await).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(server.items("/v1/computers", &server.owner).await.len() == 1);
}

async fn a_second_claim_issues_a_new_credential(server: Server) {
    let (pairing, computer) = paired(&server, &server.owner, "twice", false).await;
    let first: Value = claim(&server, &pairing).await.json().await.unwrap();
    let second: Value = claim(&server, &pairing).await.json().await.unwrap();
    assert_ne!(first["credential"], second["credential"]);
    let id: uuid::Uuid = computer["id"].as_str().unwrap().parse().unwrap();
    let hash = server
        .raw_text(
            "SELECT CAST(length(credential_hash) AS TEXT) FROM computers WHERE id = $1",
            id,
        )
        .await;
    assert_eq!(hash.as_deref(), Some("32"));
}

async fn a_member_never_reaches_another_members_computer_and_sees_shared_ones(server: Server) {
    let other = server.other_member_token().await;
    let (_, own) = paired(&server, &server.owner, "owner's", false).await;
    let (_, shared) = paired(&server, &server.owner, "team", true).await;
    let (_, theirs) = paired(&server, &other, "other's", false).await;
    let seen: Vec<Value> = server
        .items("/v1/computers", &other)
        .await
        .iter()
        .map(|c| c["id"].clone())
        .collect();
    assert_eq!(seen, vec![shared["id"].clone(), theirs["id"].clone()]);
    let own_id = own["id"].as_str().unwrap();
    let (status, _) = error_code(
        server
            .get(&format!("/v1/computers/{own_id}"), &other)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = error_code(
        server
            .delete(&format!("/v1/computers/{own_id}"), &other)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(server.items("/v1/computers", &server.owner).await.len(), 2);
}

async fn only_owners_and_admins_share_or_remove_a_shared_computer(server: Server) {
    let member = server.member_token_as(Role::Member, "m@example.com").await;
    let pairing = start(&server, "team").await;
    let (status, _) =
        error_code(approve(&server, &member, pairing["code"].as_str().unwrap(), true).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, shared) = paired(&server, &server.owner, "team", true).await;
    let id = shared["id"].as_str().unwrap();
    let (status, _) = error_code(
        server
            .delete(&format!("/v1/computers/{id}"), &member)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let admin = server.member_token_as(Role::Admin, "a@example.com").await;
    let response = server
        .delete(&format!("/v1/computers/{id}"), &admin)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
}

async fn removing_a_computer_refuses_its_claims_and_hides_it(server: Server) {
    let (pairing, computer) = paired(&server, &server.owner, "old", false).await;
    let answer: Value = claim(&server, &pairing).await.json().await.unwrap();
    assert!(answer["credential"].is_string());
    let id = computer["id"].as_str().unwrap();
    let response = server
        .delete(&format!("/v1/computers/{id}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    // Revoked at once: the stored credential is gone, and no claim brings one back.
    let uuid: uuid::Uuid = id.parse().unwrap();
    let hash = server
        .raw_text(
            "SELECT CAST(length(credential_hash) AS TEXT) FROM computers WHERE id = $1",
            uuid,
        )
        .await;
    assert_eq!(hash, None);
    let (status, _) = error_code(claim(&server, &pairing).await).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(
        server
            .items("/v1/computers", &server.owner)
            .await
            .is_empty()
    );
    let (status, _) = error_code(
        server
            .delete(&format!("/v1/computers/{id}"), &server.owner)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

async fn a_token_without_the_computers_right_or_limited_to_bots_reaches_no_computer(
    server: Server,
) {
    let reader = server
        .token_with(json!([{"resource": "computers", "action": "read"}]))
        .await;
    let pairing = start(&server, "x").await;
    let (status, _) =
        error_code(approve(&server, &reader, pairing["code"].as_str().unwrap(), false).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let response = server.get("/v1/computers", &reader).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bots_only = server
        .token_with(json!([{"resource": "bots", "action": "read"}]))
        .await;
    let (status, _) = error_code(
        server
            .get("/v1/computers", &bots_only)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let model = fake_openai::FakeOpenAi::start(vec![]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let limited = server.bot_limited_token(&bot).await;
    let (status, _) = error_code(server.get("/v1/computers", &limited).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

async fn no_code_secret_or_credential_is_stored_in_the_clear(server: Server) {
    let (pairing, _) = paired(&server, &server.owner, "quiet", false).await;
    let answer: Value = claim(&server, &pairing).await.json().await.unwrap();
    let code = pairing["code"].as_str().unwrap().replace('-', "");
    for needle in [
        code.as_str(),
        pairing["secret"].as_str().unwrap(),
        answer["credential"].as_str().unwrap(),
    ] {
        assert_eq!(
            server.columns_containing(needle).await,
            Vec::<String>::new()
        );
    }
}

async fn a_computer_credential_is_no_member_token(server: Server) {
    let (pairing, _) = paired(&server, &server.owner, "machine", false).await;
    let answer: Value = claim(&server, &pairing).await.json().await.unwrap();
    let credential = answer["credential"].as_str().unwrap();
    for path in ["/v1/bots", "/v1/computers"] {
        let (status, _) = error_code(server.get(path, credential).send().await.unwrap()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
    }
}

/// A paired machine's agent: `openbot computer run`, a real process, linked to the server.
struct Agent {
    child: tokio::process::Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    folder: PathBuf,
    _dir: tempfile::TempDir,
}

impl Agent {
    /// The agent's next JSON line.
    async fn next_event(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
            .await
            .expect("the agent said something within a minute")
            .unwrap()
            .expect("the agent's output goes on");
        serde_json::from_str(&line).unwrap()
    }

    /// Waits for the agent's event `event`, passing over others.
    async fn wait_for(&mut self, event: &str) -> Value {
        loop {
            let next = self.next_event().await;
            if next["event"] == event {
                return next;
            }
        }
    }
}

/// A Computer of `token`'s member, paired and claimed: the Computer, and a folder holding its
/// saved credential (`computer.json`) and the folder it allows (`work`).
async fn paired_machine(server: &Server, token: &str) -> (Value, tempfile::TempDir) {
    let (pairing, computer) = paired(server, token, "workstation", false).await;
    let answer: Value = claim(server, &pairing).await.json().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("work")).unwrap();
    std::fs::write(
        dir.path().join("computer.json"),
        json!({"server": server.base, "computer_id": computer["id"], "credential": answer["credential"]})
            .to_string(),
    )
    .unwrap();
    (computer, dir)
}

/// A copy of the machine's credential saved in `dir`, with an allowed folder of its own: for
/// its agent's second start after the first one is killed.
fn kept_credential(dir: &tempfile::TempDir) -> tempfile::TempDir {
    let kept = tempfile::tempdir().unwrap();
    std::fs::create_dir(kept.path().join("work")).unwrap();
    std::fs::copy(
        dir.path().join("computer.json"),
        kept.path().join("computer.json"),
    )
    .unwrap();
    kept
}

/// `openbot computer run` for the machine saved in `dir`, once it says it linked.
async fn run_agent(dir: tempfile::TempDir, computer: &Value) -> Agent {
    run_agent_with(dir, computer, &[]).await
}

/// [`run_agent`] with more arguments (Connectors, say).
async fn run_agent_with(dir: tempfile::TempDir, computer: &Value, more: &[String]) -> Agent {
    let folder = dir.path().join("work");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_openbot"))
        .args(["computer", "run", "--json", "--credential-file"])
        .arg(dir.path().join("computer.json"))
        .arg("--folder")
        .arg(&folder)
        .args(more)
        .env("OPENBOT_CONFIG_DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut agent = Agent {
        child,
        lines,
        folder,
        _dir: dir,
    };
    let linked = agent.wait_for("linked").await;
    assert!(
        linked["message"]
            .as_str()
            .unwrap()
            .contains(computer["id"].as_str().unwrap()),
        "{linked}"
    );
    agent
}

/// A Computer of `token`'s member, paired, its agent running and linked; allowed one folder.
async fn linked(server: &Server, token: &str) -> (Value, Agent) {
    let (computer, dir) = paired_machine(server, token).await;
    let agent = run_agent(dir, &computer).await;
    (computer, agent)
}

async fn grant(
    server: &Server,
    token: &str,
    computer: &Value,
    bot: &Value,
    body: Value,
) -> reqwest::Response {
    server
        .http
        .put(format!(
            "{}/v1/computers/{}/bots/{}",
            server.base,
            computer["id"].as_str().unwrap(),
            bot["id"].as_str().unwrap()
        ))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// A Bot of the owner on a scripted model whose script is `script`, naming every Computer
/// tool (granted a Computer, those route to it); the folder keeping the script with it.
async fn computer_bot(server: &Server, name: &str, script: Value) -> (Value, tempfile::TempDir) {
    server
        .scripted_bot_with_tools(name, &openbot_core::computer::TOOL_NAMES, script)
        .await
}

/// A Chat with a new Bot granted `computer` without asking, whose scripted model writes
/// `content` to `file` on it, then answers; the folder keeping the script with it.
async fn writer_chat(
    server: &Server,
    computer: &Value,
    name: &str,
    file: &str,
    content: &str,
) -> (String, tempfile::TempDir) {
    let (bot, script) = computer_bot(
        server,
        name,
        json!([
            {"tool_calls": [{"name": "computer_file_write", "arguments": {"path": file, "content": content}}]},
            {"text": "written"}
        ]),
    )
    .await;
    let granted = grant(server, &server.owner, computer, &bot, json!({"ask": false})).await;
    assert_eq!(granted.status(), StatusCode::OK);
    (server.chat(&server.owner, &bot).await, script)
}

/// The approval request a Turn's events ask for.
fn approval_request(events: &[openbot_schema::Event]) -> String {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ApprovalRequested { request_id, .. } => Some(request_id.to_string()),
            _ => None,
        })
        .expect("an approval_requested event")
}

/// The execution's state once it is `wanted`, or the last one seen when `within` passed.
async fn state_within(server: &Server, execution: &str, wanted: &str, within: Duration) -> String {
    let deadline = std::time::Instant::now() + within;
    loop {
        let view: Value = server
            .get(&format!("/v1/executions/{execution}"), &server.owner)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let state = view["state"].as_str().unwrap().to_string();
        if state == wanted || std::time::Instant::now() > deadline {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The owner takes `computer` back from `bot`.
async fn revoke(server: &Server, computer: &Value, bot: &Value) -> reqwest::Response {
    server
        .delete(
            &format!(
                "/v1/computers/{}/bots/{}",
                computer["id"].as_str().unwrap(),
                bot["id"].as_str().unwrap()
            ),
            &server.owner,
        )
        .send()
        .await
        .unwrap()
}

/// Waits up to 20 s for `path` to hold `text`.
async fn wait_for_file(path: &Path, text: &str) -> bool {
    for _ in 0..200 {
        if std::fs::read_to_string(path).is_ok_and(|held| held.contains(text)) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// The output texts of the Turn's tool results, by tool name.
fn tool_results(events: &[openbot_schema::Event]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } => Some((
                result.name.clone(),
                result
                    .output
                    .iter()
                    .filter_map(|part| match part {
                        openbot_schema::ContentPart::Text { text } => Some(text.clone()),
                        _ => None,
                    })
                    .collect::<String>(),
            )),
            _ => None,
        })
        .collect()
}

async fn a_bot_granted_a_computer_writes_reads_and_runs_on_the_linked_machine(server: Server) {
    let (computer, agent) = linked(&server, &server.owner).await;
    let (bot, _script) = computer_bot(
            &server,
            "Operator",
            json!([
                {"tool_calls": [{"name": "computer_file_write", "arguments": {"path": "note.txt", "content": "hello from the bot"}}]},
                {"tool_calls": [{"name": "computer_file_read", "arguments": {"path": "note.txt"}}]},
                {"tool_calls": [{"name": "computer_terminal_start", "arguments": {"command": "cat note.txt > copy.txt"}}]},
                {"text": "done"}
            ]),
        )
        .await;
    let granted = grant(
        &server,
        &server.owner,
        &computer,
        &bot,
        json!({"ask": false}),
    )
    .await;
    assert_eq!(granted.status(), StatusCode::OK);
    let granted: Value = granted.json().await.unwrap();
    assert_eq!(granted["ask"], false);
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(
        server
            .send(&server.owner, &chat, "Work on my machine", None)
            .await,
    )
    .await;
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(
        outcome_of(&events),
        Some(TurnOutcome::Completed),
        "{events:?}"
    );
    let results = tool_results(&events);
    let names: Vec<&str> = results.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "computer_file_write",
            "computer_file_read",
            "computer_terminal_start"
        ]
    );
    assert!(results[1].1.contains("hello from the bot"), "{results:?}");
    assert_eq!(
        std::fs::read_to_string(agent.folder.join("note.txt")).unwrap(),
        "hello from the bot"
    );
    // The command ran in the machine's terminal, in its allowed folder.
    assert!(wait_for_file(&agent.folder.join("copy.txt"), "hello from the bot").await);
}

async fn a_call_that_changes_the_machine_asks_first_by_default(server: Server) {
    let (computer, agent) = linked(&server, &server.owner).await;
    let (bot, _script) = computer_bot(
            &server,
            "Careful",
            json!([
                {"tool_calls": [{"name": "computer_file_write", "arguments": {"path": "asked.txt", "content": "approved"}}]},
                {"text": "asked"}
            ]),
        )
        .await;
    let granted: Value = grant(&server, &server.owner, &computer, &bot, json!({}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(granted["ask"], true, "asking is on unless turned off");
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "Write", None).await).await;
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    let request = approval_request(&events);
    let file = agent.folder.join("asked.txt");
    assert!(
        !file.exists(),
        "nothing reaches the machine before the decision"
    );
    let approved = server
        .post(&format!("/v1/approvals/{request}/decision"), &server.owner)
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), StatusCode::OK);
    assert!(
        wait_for_file(&file, "approved").await,
        "the approved call ran once approved"
    );
}

async fn a_grant_taken_back_stops_a_waiting_call_before_it_is_sent(server: Server) {
    let (computer, agent) = linked(&server, &server.owner).await;
    let (bot, _script) = computer_bot(
            &server,
            "Revoked",
            json!([
                {"tool_calls": [{"name": "computer_file_write", "arguments": {"path": "never.txt", "content": "x"}}]},
                {"text": "stopped"}
            ]),
        )
        .await;
    grant(&server, &server.owner, &computer, &bot, json!({})).await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "Write", None).await).await;
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    let request = approval_request(&events);
    let revoked = revoke(&server, &computer, &bot).await;
    assert_eq!(revoked.status(), StatusCode::NO_CONTENT);
    let approved = server
        .post(&format!("/v1/approvals/{request}/decision"), &server.owner)
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), StatusCode::OK);
    // The approved call's result says the grant was taken back; the machine saw nothing.
    let history = async {
        for _ in 0..200 {
            let history = server.history(&server.owner, &chat).await;
            if history.iter().any(|line| line.contains("taken back")) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    };
    assert!(
        history.await,
        "{:?}",
        server.history(&server.owner, &chat).await
    );
    assert!(!agent.folder.join("never.txt").exists());
    // A second revoke finds no grant.
    let again = revoke(&server, &computer, &bot).await;
    assert_eq!(again.status(), StatusCode::NOT_FOUND);
}

async fn removing_a_computer_ends_its_link_and_stops_its_agent(server: Server) {
    let (computer, mut agent) = linked(&server, &server.owner).await;
    let id = computer["id"].as_str().unwrap();
    // A session runs a program when the Computer is removed: a sleep this run alone starts.
    let sleep = format!(
        "sleep 4000.{}",
        u32::from_str_radix(&id[id.len() - 4..], 16).unwrap()
    );
    let (bot, _script) = computer_bot(
        &server,
        "Sleeper",
        json!([
            {"tool_calls": [{"name": "computer_terminal_start", "arguments": {"command": sleep}}]},
            {"text": "started"}
        ]),
    )
    .await;
    grant(
        &server,
        &server.owner,
        &computer,
        &bot,
        json!({"ask": false}),
    )
    .await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "Sleep", None).await).await;
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(
        outcome_of(&events),
        Some(TurnOutcome::Completed),
        "{events:?}"
    );
    let running = || {
        std::process::Command::new("pgrep")
            .args(["-f", &sleep])
            .status()
            .unwrap()
            .success()
    };
    assert!(running(), "the session's program runs");
    let removed = server
        .delete(&format!("/v1/computers/{id}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
    // The node closed the link before answering; the agent's next link is refused, so it stops.
    agent.wait_for("unlinked").await;
    let refused = agent.wait_for("refused").await;
    assert!(
        refused["message"].as_str().unwrap().contains("401"),
        "{refused}"
    );
    let status = tokio::time::timeout(Duration::from_secs(30), agent.child.wait())
        .await
        .expect("the agent stopped")
        .unwrap();
    assert!(!status.success());
    // The agent's sessions ended with it.
    let mut ended = false;
    for _ in 0..100 {
        if !running() {
            ended = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ended, "the session's program ended with the agent");
    // The link's close is saved in the resource directory.
    let resources = openbot_server::cluster::directory::store(&server.database.features)
        .unwrap()
        .resources_of_scope(&format!("computer:{id}"))
        .await
        .unwrap();
    assert_eq!(resources.len(), 1, "{resources:?}");
    assert!(
        matches!(
            resources[0].closed,
            Some(openbot_server::cluster::directory::CloseResult::Closed { .. })
        ),
        "{resources:?}"
    );
}

/// `GET /v1/computers/link` as a WebSocket client asks for it, with `authorization`.
async fn link_attempt(server: &Server, authorization: Option<&str>) -> StatusCode {
    let mut request = server
        .http
        .get(format!("{}/v1/computers/link", server.base))
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .header("openbot-computer-protocol", "1");
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    request.send().await.unwrap().status()
}

async fn a_link_needs_the_computers_own_current_credential(server: Server) {
    assert_eq!(link_attempt(&server, None).await, StatusCode::UNAUTHORIZED);
    let member = format!("Bearer {}", server.owner);
    assert_eq!(
        link_attempt(&server, Some(&member)).await,
        StatusCode::UNAUTHORIZED
    );
    let (pairing, computer) = paired(&server, &server.owner, "old", false).await;
    let answer: Value = claim(&server, &pairing).await.json().await.unwrap();
    let credential = format!("Bearer {}", answer["credential"].as_str().unwrap());
    assert_eq!(
        link_attempt(&server, Some(&credential)).await,
        StatusCode::SWITCHING_PROTOCOLS
    );
    server
        .delete(
            &format!("/v1/computers/{}", computer["id"].as_str().unwrap()),
            &server.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        link_attempt(&server, Some(&credential)).await,
        StatusCode::UNAUTHORIZED
    );
}

async fn only_a_member_who_sees_the_computer_and_may_change_the_bot_grants_it(server: Server) {
    let (_, computer) = paired(&server, &server.owner, "mine", false).await;
    let model = fake_openai::FakeOpenAi::start(vec![]).await;
    let bot = server.bot(&server.owner, &model, true).await;
    let other = server.other_member_token().await;
    // Another member sees neither the owner's Computer...
    let (status, _) = error_code(grant(&server, &other, &computer, &bot, json!({})).await).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // ...nor may change the owner's Bot with its own Computer.
    let (pairing, theirs) = paired(&server, &other, "theirs", false).await;
    drop(pairing);
    let (status, _) = error_code(grant(&server, &other, &theirs, &bot, json!({})).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A token limited to the Bot reaches no Computer.
    let limited = server.bot_limited_token(&bot).await;
    let (status, _) = error_code(grant(&server, &limited, &computer, &bot, json!({})).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let granted = grant(
        &server,
        &server.owner,
        &computer,
        &bot,
        json!({"ask": true}),
    )
    .await;
    assert_eq!(granted.status(), StatusCode::OK);
}

fn signal(pid: u32, which: &str) {
    let status = std::process::Command::new("kill")
        .args([which, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

async fn a_write_whose_answer_is_lost_with_the_agent_is_outcome_unknown_and_never_sent_again(
    server: Server,
) {
    let (computer, dir) = paired_machine(&server, &server.owner).await;
    // The machine's credential, kept for its agent's second start.
    let kept = kept_credential(&dir);
    let mut agent = run_agent(dir, &computer).await;
    let work = agent.folder.clone();
    let (bot, _script) = computer_bot(
            &server,
            "Lost",
            json!([
                {"tool_calls": [{"name": "computer_file_write", "arguments": {"path": "lost.txt", "content": "once"}}]},
                {"text": "unreachable"}
            ]),
        )
        .await;
    grant(
        &server,
        &server.owner,
        &computer,
        &bot,
        json!({"ask": false}),
    )
    .await;
    // The machine stops answering: the call reaches its socket and waits there.
    let pid = agent.child.id().unwrap();
    signal(pid, "-STOP");
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "Write", None).await).await;
    let execution = sent["execution_id"].as_str().unwrap().to_string();
    server.wait_started(&execution).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // SIGKILL mid-call: the link breaks with the call sent and no answer.
    signal(pid, "-KILL");
    let _ = agent.child.wait().await;
    assert_eq!(
        state_within(
            &server,
            &execution,
            "outcome_unknown",
            Duration::from_secs(90)
        )
        .await,
        "outcome_unknown"
    );
    // The machine comes back; the write is not sent again.
    let again = run_agent(kept, &computer).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!again.folder.join("lost.txt").exists());
    assert!(!work.join("lost.txt").exists());
}

/// A network namespace joined to this one by a veth pair, removed on drop: the agent runs in
/// it, and the link between the two is what the test cuts.
struct Netns {
    name: String,
    host_link: String,
    host_ip: String,
}

fn ip(args: &[&str]) {
    let status = std::process::Command::new("ip")
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "ip {args:?}");
}

impl Netns {
    fn new() -> Self {
        let n = std::process::id() % 200 + 20;
        let name = format!("obcut{n}");
        let (host_link, inner_link) = (format!("obh{n}"), format!("obp{n}"));
        let (host_ip, inner_ip) = (format!("10.231.{n}.1"), format!("10.231.{n}.2"));
        ip(&["netns", "add", &name]);
        ip(&[
            "link",
            "add",
            &host_link,
            "type",
            "veth",
            "peer",
            "name",
            &inner_link,
        ]);
        ip(&["link", "set", &inner_link, "netns", &name]);
        ip(&["addr", "add", &format!("{host_ip}/30"), "dev", &host_link]);
        ip(&["link", "set", &host_link, "up"]);
        ip(&[
            "netns",
            "exec",
            &name,
            "ip",
            "addr",
            "add",
            &format!("{inner_ip}/30"),
            "dev",
            &inner_link,
        ]);
        ip(&[
            "netns",
            "exec",
            &name,
            "ip",
            "link",
            "set",
            &inner_link,
            "up",
        ]);
        ip(&["netns", "exec", &name, "ip", "link", "set", "lo", "up"]);
        Self {
            name,
            host_link,
            host_ip,
        }
    }

    fn cut(&self) {
        ip(&["link", "set", &self.host_link, "down"]);
    }

    fn mend(&self) {
        ip(&["link", "set", &self.host_link, "up"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.host_link])
            .status();
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Forwards connections to `to` from an address on `host_ip` (the server listens on
/// 127.0.0.1, which the namespace cannot reach); the forwarder's base URL.
async fn forward(host_ip: &str, to: &str) -> String {
    let listener = tokio::net::TcpListener::bind(format!("{host_ip}:0"))
        .await
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let to = to.trim_start_matches("http://").to_string();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let to = to.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(&to).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    base
}

/// Whether this machine can make network namespaces (root and iproute2).
fn namespaces_work() -> bool {
    let probe = format!("obprobe{}", std::process::id() % 10000);
    let made = std::process::Command::new("ip")
        .args(["netns", "add", &probe])
        .status()
        .is_ok_and(|s| s.success());
    if made {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &probe])
            .status();
    }
    made
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_network_ends_the_link_on_both_sides_and_the_machine_links_again_once_mended() {
    if !namespaces_work() {
        // CI runs as root with iproute2; a developer's machine without them cannot cut a
        // network, and says so rather than pass quietly.
        panic!("this test needs network namespaces (root and `ip netns`)");
    }
    let server = server(sqlite().await).await;
    let netns = Netns::new();
    let base = forward(&netns.host_ip, &server.base).await;
    let (computer, dir) = paired_machine(&server, &server.owner).await;
    let saved = dir.path().join("computer.json");
    let mut text: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    text["server"] = json!(base);
    std::fs::write(&saved, text.to_string()).unwrap();
    let folder = dir.path().join("work");
    let mut child = tokio::process::Command::new("ip")
        .args(["netns", "exec", &netns.name, env!("CARGO_BIN_EXE_openbot")])
        .args(["computer", "run", "--json", "--credential-file"])
        .arg(&saved)
        .arg("--folder")
        .arg(&folder)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut agent = Agent {
        child,
        lines,
        folder,
        _dir: dir,
    };
    agent.wait_for("linked").await;
    let (chat, _script) = writer_chat(&server, &computer, "Cut", "cut.txt", "during the cut").await;
    netns.cut();
    // A write sent into the cut link gets no answer: outcome unknown once the node gives up
    // on the silent link (45 s without a pong), never sent again.
    let sent = receipt(server.send(&server.owner, &chat, "Write", None).await).await;
    let execution = sent["execution_id"].as_str().unwrap().to_string();
    assert_eq!(
        state_within(
            &server,
            &execution,
            "outcome_unknown",
            Duration::from_secs(90)
        )
        .await,
        "outcome_unknown"
    );
    // The node saves the silent link's close (it pings every 15 s and gives up after 45 s
    // without an answer); the agent, hearing nothing either, gives up on it too.
    let resources = openbot_server::cluster::directory::store(&server.database.features).unwrap();
    let scope = format!("computer:{}", computer["id"].as_str().unwrap());
    let mut links = Vec::new();
    for _ in 0..300 {
        links = resources.resources_of_scope(&scope).await.unwrap();
        if links[0].closed.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        matches!(
            links[0].closed,
            Some(openbot_server::cluster::directory::CloseResult::Closed { .. })
        ),
        "{links:?}"
    );
    // The agent saw the link die: silent, or its interface down under it.
    agent.wait_for("unlinked").await;
    netns.mend();
    agent.wait_for("linked").await;
    // The next Turn (of another Chat: this one waits for a decision on the unknown write)
    // reaches the machine again; the lost write never arrived.
    let (chat, _script) = writer_chat(&server, &computer, "Mended", "mended.txt", "after").await;
    let sent = receipt(server.send(&server.owner, &chat, "Again", None).await).await;
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(
        outcome_of(&events),
        Some(TurnOutcome::Completed),
        "{events:?}"
    );
    assert_eq!(
        std::fs::read_to_string(agent.folder.join("mended.txt")).unwrap(),
        "after"
    );
    assert!(!agent.folder.join("cut.txt").exists());
}

/// The output of a terminal session on `computer`, read by cursor through the API to its end.
async fn read_to_exit(server: &Server, token: &str, computer: &Value, session: &str) -> String {
    let (mut cursor, mut text) = (0, String::new());
    for _ in 0..100 {
        let response = server
            .get(
                &format!(
                    "/v1/computers/{}/terminals/{session}/output?after={cursor}&wait_ms=5000",
                    computer["id"].as_str().unwrap()
                ),
                token,
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let out: openbot_schema::TerminalOutput = response.json().await.unwrap();
        assert_eq!(out.dropped, 0);
        cursor = out.next_cursor;
        text.push_str(&out.text());
        if out.exited {
            return text;
        }
    }
    panic!("the session never ended: {text}");
}

async fn a_member_reads_a_bots_terminal_by_cursor_and_no_other_member_can(server: Server) {
    let (computer, mut agent) = linked(&server, &server.owner).await;
    let (bot, _script) = computer_bot(
        &server,
        "Counter",
        json!([
            {"tool_calls": [{"name": "computer_terminal_start", "arguments": {"command": "for i in 1 2 3 4 5; do echo line$i; sleep 0.2; done"}}]},
            {"text": "started"}
        ]),
    )
    .await;
    grant(
        &server,
        &server.owner,
        &computer,
        &bot,
        json!({"ask": false}),
    )
    .await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "Count", None).await).await;
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    let started: Value = serde_json::from_str(&tool_results(&events)[0].1).unwrap();
    let session = started["id"].as_str().unwrap();
    let text = read_to_exit(&server, &server.owner, &computer, session).await;
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines, ["line1", "line2", "line3", "line4", "line5"]);
    // Another member does not see the Computer at all.
    let other = server.other_member_token().await;
    let path = format!(
        "/v1/computers/{}/terminals/{session}/output",
        computer["id"].as_str().unwrap()
    );
    let (status, _) = error_code(server.get(&path, &other).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A session the server has no output of is not found.
    let unknown = path.replace(session, "no-such-session");
    let (status, _) = error_code(server.get(&unknown, &server.owner).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The output is the server's: read again once the machine is gone, from the start.
    agent.child.kill().await.unwrap();
    let _ = agent.child.wait().await;
    let again = read_to_exit(&server, &server.owner, &computer, session).await;
    assert_eq!(again, text);
}

/// The agent's `--connector` for the fixture MCP server on stdio, logging to `log`, each call
/// taking `delay` seconds.
fn fixture_connector(name: &str, log: &Path, delay: f64) -> Vec<String> {
    let openbot_schema::AppTransport::Stdio { command, args } =
        mcp_servers::fixture_stdio(log, delay, None)
    else {
        unreachable!("the fixture runs over stdio")
    };
    vec![
        "--connector".into(),
        format!("{name}={command} {}", args.join(" ")),
    ]
}

/// Registers the Connector `connector` of `computer` as the App `name` for `token`.
async fn publish(
    server: &Server,
    token: &str,
    name: &str,
    computer: &Value,
    connector: &str,
) -> reqwest::Response {
    server
        .post("/v1/apps", token)
        .json(&json!({"name": name, "transport": {"type": "connector", "computer_id": computer["id"], "connector": connector}}))
        .send()
        .await
        .unwrap()
}

/// Publishes, connects (no credentials) and discovers a Connector App: its discovery.
async fn connector_ready(server: &Server, computer: &Value, name: &str) -> Value {
    let app = publish(server, &server.owner, name, computer, name).await;
    assert_eq!(app.status(), StatusCode::CREATED);
    let app: Value = app.json().await.unwrap();
    let app = app["id"].as_str().unwrap();
    let connection: Value = server
        .post(&format!("/v1/apps/{app}/connections"), &server.owner)
        .json(&json!({"auth": "none"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let connection = connection["id"].as_str().unwrap();
    let found = server
        .post(
            &format!("/v1/apps/{app}/connections/{connection}/discover"),
            &server.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(found.status(), StatusCode::OK);
    found.json().await.unwrap()
}

/// A Turn of a new Bot whose scripted model calls the Connector App `notes`'s `write_note`
/// with `text`, then answers: its execution, and the folder keeping the script.
async fn note_turn(server: &Server, text: &str) -> (String, tempfile::TempDir) {
    let (bot, script) = server
        .scripted_bot_with_tools(
            "Noter",
            &["notes__write_note"],
            json!([
                {"tool_calls": [{"name": "notes__write_note", "arguments": {"text": text}}]},
                {"text": "noted"}
            ]),
        )
        .await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "Note it", None).await).await;
    (sent["execution_id"].as_str().unwrap().to_string(), script)
}

async fn a_connector_the_machine_publishes_is_an_app_whose_tools_a_bot_calls_over_the_link(
    server: Server,
) {
    let (computer, dir) = paired_machine(&server, &server.owner).await;
    let log = dir.path().join("fixture.log");
    let _agent = run_agent_with(dir, &computer, &fixture_connector("notes", &log, 0.0)).await;
    // Discovery reads the local server's tools, schemas and annotations over the link.
    let found = connector_ready(&server, &computer, "notes").await;
    let tools = found["tools"].as_array().unwrap();
    let read = tools.iter().find(|t| t["name"] == "read_note").unwrap();
    assert_eq!(read["annotations"]["readOnlyHint"], true);
    assert!(tools.iter().any(|t| t["name"] == "write_note"), "{found}");
    let (execution, _script) = note_turn(&server, "milk").await;
    let execution = execution.as_str();
    let events = server.finish(&server.owner, execution).await;
    assert_eq!(
        outcome_of(&events),
        Some(TurnOutcome::Completed),
        "{events:?}"
    );
    let results = tool_results(&events);
    assert_eq!(
        results,
        [(
            "notes__write_note".to_string(),
            "write_note: milk".to_string()
        )]
    );
    // The server on the machine got the call once, with the call's request ID.
    let calls: Vec<String> = mcp_servers::fixture_log(&log)
        .into_iter()
        .filter(|line| line.starts_with("call write_note"))
        .collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(calls[0].contains(&format!("{execution}:")), "{calls:?}");
    // The session on the machine was registered in the directory, and its close saved.
    server
        .assert_one_closed_app_session(execution, "mcp.connector")
        .await;
}

async fn only_an_admin_who_may_use_the_computer_publishes_its_connector(server: Server) {
    let other = server.other_member_token().await;
    let (_, theirs) = paired(&server, &other, "other's", false).await;
    let (_, shared) = paired(&server, &server.owner, "team", true).await;
    // Another member's machine is not the admin's to publish: it reads as not there.
    let (status, code) =
        error_code(publish(&server, &server.owner, "theirs", &theirs, "notes").await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    // A member registers no App, not even on a machine of their own.
    let (status, _) = error_code(publish(&server, &other, "mine", &theirs, "notes").await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A bad Connector name is refused by name.
    let (status, code) =
        error_code(publish(&server, &server.owner, "team", &shared, "Not Valid").await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_REQUEST, "invalid_input")
    );
    // The organization's machine is.
    let published = publish(&server, &server.owner, "team", &shared, "notes").await;
    assert_eq!(published.status(), StatusCode::CREATED);
    let app: Value = published.json().await.unwrap();
    assert_eq!(app["transport"]["type"], "connector");
    assert_eq!(app["transport"]["connector"], "notes");
    // A Connector takes no headers: the machine's owner decides what it sends.
    let (status, _) = error_code(
        server
            .post(
                &format!("/v1/apps/{}/connections", app["id"].as_str().unwrap()),
                &server.owner,
            )
            .json(&json!({"auth": "manual", "headers": {"Authorization": "Bearer x"}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

async fn a_connector_call_whose_answer_is_lost_is_outcome_unknown_and_never_sent_again(
    server: Server,
) {
    let (computer, dir) = paired_machine(&server, &server.owner).await;
    let kept = kept_credential(&dir);
    let log = kept.path().join("fixture.log");
    // Every call takes a minute: the agent dies while the call runs.
    let connector = fixture_connector("notes", &log, 60.0);
    let mut agent = run_agent_with(dir, &computer, &connector).await;
    connector_ready(&server, &computer, "notes").await;
    let (execution, _script) = note_turn(&server, "once").await;
    mcp_servers::wait_for_log(&log, "call write_note").await;
    signal(agent.child.id().unwrap(), "-KILL");
    let _ = agent.child.wait().await;
    assert_eq!(
        state_within(
            &server,
            &execution,
            "outcome_unknown",
            Duration::from_secs(90)
        )
        .await,
        "outcome_unknown"
    );
    // The machine comes back; the write is not sent again.
    let _again = run_agent_with(kept, &computer, &connector).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let calls = mcp_servers::fixture_log(&log)
        .into_iter()
        .filter(|line| line.starts_with("call write_note"))
        .count();
    assert_eq!(calls, 1);
}

async fn a_removed_members_machine_links_no_more(server: Server) {
    let other = server.other_member_token().await;
    let (pairing, _) = paired(&server, &other, "theirs", false).await;
    let answer: Value = claim(&server, &pairing).await.json().await.unwrap();
    let credential = format!("Bearer {}", answer["credential"].as_str().unwrap());
    assert_eq!(
        link_attempt(&server, Some(&credential)).await,
        StatusCode::SWITCHING_PROTOCOLS
    );
    let members = server.items("/v1/members", &server.owner).await;
    let member = members
        .iter()
        .find(|m| m["email"] == "other@example.com")
        .unwrap();
    let removed = server
        .delete(
            &format!("/v1/members/{}", member["id"].as_str().unwrap()),
            &server.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
    // The machine's credential went with its member's place in the organization.
    assert_eq!(
        link_attempt(&server, Some(&credential)).await,
        StatusCode::UNAUTHORIZED
    );
}
