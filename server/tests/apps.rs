//! Apps end to end over the HTTP API, on SQLite and on a real PostgreSQL, against real MCP
//! servers (installed by `scripts/mcp-install`): server-everything over stdio and streamable
//! HTTP, mcp-server-time over stdio, and the fixture server for slow, cancelled and retried
//! calls. Registration and rights, sealed manual credentials, discovery, Turns that call App
//! tools with saved declarations, revisions, `outcome_unknown`, retries with the same request
//! ID, `notifications/cancelled`, and bad input.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "../../core/tests/support/mcp_servers.rs"]
mod mcp_servers;
#[path = "support/pg.rs"]
mod pg;
#[macro_use]
#[path = "support/api.rs"]
mod api;

use std::time::Duration;

use api::{
    Raw, Server, error_code, outcome_of, postgres, receipt, server_on, sqlite, test_platform,
};
use fake_openai::{Answer, FakeOpenAi};
use mcp_servers::*;
use openbot_schema::{AppTransport, ContentPart, EventKind, ExecutionId, TurnOutcome};
use openbot_server::engine::Wake;
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

/// A node that allows stdio Apps (and loopback HTTP Apps, as every test node does).
async fn server(raw: Raw) -> Server {
    server_on(raw, test_platform().with_stdio_apps(true)).await
}

macro_rules! app_tests {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::server(super::sqlite().await).await).await })*
        }
        mod on_postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::server(super::postgres().await).await).await })*
        }
    };
}

app_tests!(
    removing_a_connection_closes_its_open_sessions_before_it_answers,
    discovery_lists_every_tool_with_its_schema_and_annotations,
    discovery_over_streamable_http_reaches_the_server,
    a_turn_calls_an_app_tool_and_the_model_sees_its_result,
    a_turn_a_webhook_starts_calls_an_app_tool_as_a_sent_turn_does,
    a_turn_calls_the_time_server,
    an_app_tools_image_reaches_the_model_and_is_replayed_the_same_after_a_takeover,
    a_saved_declaration_is_kept_when_the_server_changes,
    a_saved_call_on_a_removed_connection_fails_clearly_and_sends_nothing,
    a_lost_result_of_an_unsafe_tool_waits_in_outcome_unknown,
    a_lost_result_of_a_read_only_tool_is_sent_again_with_the_same_request_id,
    cancelling_a_turn_sends_notifications_cancelled,
    a_member_uses_apps_but_only_owners_and_admins_change_them,
    a_token_without_the_apps_write_right_cannot_register,
    manual_credentials_are_sealed_and_never_shown,
    bad_app_input_is_refused,
    a_bot_naming_an_unknown_app_tool_cannot_send,
    apps_and_connections_are_paged,
    a_removed_app_is_gone_with_its_connections,
    an_approval_rule_holds_an_app_call_until_a_person_approves_it,
    manual_headers_reach_the_app_on_each_call,
    a_session_lost_mid_call_of_an_unsafe_tool_waits_in_outcome_unknown,
    a_session_lost_mid_call_of_a_read_only_tool_is_sent_again_with_the_same_request_id,
    an_app_call_takes_room_in_its_apps_shared_limit,
    a_manual_connection_opens_its_vault_references_only_at_each_request,
);

async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..600 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn register(
    server: &Server,
    token: &str,
    name: &str,
    transport: &AppTransport,
) -> reqwest::Response {
    server
        .post("/v1/apps", token)
        .json(&json!({"name": name, "transport": transport}))
        .send()
        .await
        .unwrap()
}

async fn connect(server: &Server, token: &str, app: &str, body: Value) -> reqwest::Response {
    server
        .post(&format!("/v1/apps/{app}/connections"), token)
        .json(&body)
        .send()
        .await
        .unwrap()
}

async fn discover(server: &Server, token: &str, app: &str, connection: &str) -> reqwest::Response {
    server
        .post(
            &format!("/v1/apps/{app}/connections/{connection}/discover"),
            token,
        )
        .send()
        .await
        .unwrap()
}

/// Registers an App, opens a `none` Connection and runs discovery; returns the App's and the
/// Connection's IDs and the discovery.
async fn app_ready(
    server: &Server,
    name: &str,
    transport: &AppTransport,
) -> (String, String, Value) {
    let app = register(server, &server.owner, name, transport).await;
    assert_eq!(app.status(), StatusCode::CREATED);
    let app: Value = app.json().await.unwrap();
    let app = app["id"].as_str().unwrap().to_string();
    let connection = connect(server, &server.owner, &app, json!({"auth": "none"})).await;
    assert_eq!(connection.status(), StatusCode::CREATED);
    let connection: Value = connection.json().await.unwrap();
    assert_eq!(connection["status"], "ready");
    let connection = connection["id"].as_str().unwrap().to_string();
    let found = discover(server, &server.owner, &app, &connection).await;
    assert_eq!(found.status(), StatusCode::OK);
    (app, connection, found.json().await.unwrap())
}

async fn bot_with(server: &Server, model: &FakeOpenAi, tools: &[&str]) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|name| json!({"name": name, "input_schema": {"type": "object"}}))
        .collect();
    let created = server
        .post("/v1/bots", &server.owner)
        .json(&json!({"name": "Apps", "model": model.spec(), "tools": tools}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    created.json().await.unwrap()
}

/// Sends `text` to a new Chat of `bot`; returns the Chat and the Turn's execution.
async fn start(server: &Server, bot: &Value, text: &str) -> (String, String) {
    let chat = server.chat(&server.owner, bot).await;
    let sent = receipt(server.send(&server.owner, &chat, text, None).await).await;
    (chat, sent["execution_id"].as_str().unwrap().to_string())
}

fn tool_results(events: &[openbot_schema::Event]) -> Vec<openbot_schema::ToolResult> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } => Some(result.clone()),
            _ => None,
        })
        .collect()
}

fn uuid_of(id: &str) -> Uuid {
    id.parse::<ExecutionId>().unwrap().as_uuid()
}

/// Takes the execution's lease from its owner, as a node that took over and died would: the
/// owner stops at its next renewal, and once the taker's lease lapses the engine takes the
/// execution back and replays its call log.
async fn steal(server: &Server, id: &str) {
    let lease = chrono::Utc::now().timestamp_millis() + 3_000;
    match &server.raw {
        Raw::Sqlite(store, _) => {
            sqlx::query("UPDATE executions SET generation = generation + 1, owner_node = 'thief', lease_expires_at = ?2 WHERE id = ?1")
                .bind(uuid_of(id))
                .bind(lease)
                .execute(store.pool())
                .await
                .unwrap();
        }
        Raw::Postgres(store) => {
            sqlx::query("UPDATE executions SET generation = generation + 1, owner_node = 'thief', lease_expires_at = $2 WHERE id = $1")
                .bind(uuid_of(id))
                .bind(lease)
                .execute(store.pool())
                .await
                .unwrap();
        }
    }
    server.engine.context().hub.announce(Wake::Work);
}

async fn state(server: &Server, id: &str) -> String {
    let view: Value = server
        .get(&format!("/v1/executions/{id}"), &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    view["state"].as_str().unwrap().to_string()
}

async fn discovery_lists_every_tool_with_its_schema_and_annotations(server: Server) {
    let (app, connection, found) = app_ready(&server, "everything", &everything_stdio()).await;
    let tools = found["tools"].as_array().unwrap();
    let echo = tools.iter().find(|t| t["name"] == "echo").unwrap();
    assert_eq!(echo["input_schema"]["type"], "object");
    assert!(echo["input_schema"]["properties"]["message"].is_object());
    assert_eq!(echo["annotations"]["readOnlyHint"], true);
    let view: Value = server
        .get(
            &format!("/v1/apps/{app}/connections/{connection}"),
            &server.owner,
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(view["tool_count"].as_u64().unwrap() as usize, tools.len());
    assert!(view["discovered_at"].is_string());
    assert_eq!(view["revision"], found["revision"]);
}

async fn discovery_over_streamable_http_reaches_the_server(server: Server) {
    let everything = everything_http().await;
    let transport = AppTransport::Http {
        url: everything.url.clone(),
    };
    let (_, _, found) = app_ready(&server, "everything-http", &transport).await;
    let names: Vec<&str> = found["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"echo") && names.contains(&"get-sum"),
        "{names:?}"
    );
}

async fn a_turn_calls_an_app_tool_and_the_model_sees_its_result(server: Server) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    app_ready(&server, "notes", &fixture_stdio(&log, 0.0, None)).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__write_note", json!({"text": "milk"})),
        Answer::Text(vec!["noted"]),
    ])
    .await;
    let bot = bot_with(&server, &model, &["notes__write_note"]).await;
    let (_, execution) = start(&server, &bot, "Note milk").await;
    let events = server.finish(&server.owner, &execution).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(!results[0].is_error, "{:?}", results[0]);
    assert_eq!(results[0].output[0].as_text(), Some("write_note: milk"));
    // The call's MCP session was registered in the node's directory before it connected,
    // and its close was saved before the call returned.
    server
        .assert_one_closed_app_session(&execution, "mcp.stdio")
        .await;
    let calls: Vec<String> = fixture_log(&log)
        .into_iter()
        .filter(|l| l.starts_with("call write_note"))
        .collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
    // The request ID in `_meta` is the call's idempotency key, not a blank.
    assert!(!calls[0].contains(" - "), "{calls:?}");
    // The model saw the saved declaration's schema.
    assert!(
        model.bodies()[0].contains("\"required\":[\"text\"]"),
        "{}",
        model.bodies()[0]
    );
}

/// Input that arrives through a trigger resolves the Bot's App tools as input sent over the
/// API does: the Turn a webhook starts calls the App, never waits on it as a host tool.
async fn a_turn_a_webhook_starts_calls_an_app_tool_as_a_sent_turn_does(server: Server) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    app_ready(&server, "notes", &fixture_stdio(&log, 0.0, None)).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__write_note", json!({"text": "deploy"})),
        Answer::Text(vec!["noted"]),
    ])
    .await;
    let bot = bot_with(&server, &model, &["notes__write_note"]).await;
    let chat = server.chat(&server.owner, &bot).await;
    let made = server
        .post("/v1/triggers", &server.owner)
        .json(&json!({"chat_id": chat, "kind": "webhook", "text": "A deploy finished:"}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);
    let made: Value = made.json().await.unwrap();
    let id = made["trigger"]["id"].as_str().unwrap();
    let secret = made["signing_secret"].as_str().unwrap();
    let now = openbot_server::engine::Clock::now_ms(server.clock.as_ref()) / 1000;
    let delivered = api::deliver_webhook(&server, id, secret, now, Some("d-1"), r#"{"v":1}"#).await;
    assert_eq!(delivered.status(), StatusCode::ACCEPTED);
    let delivered: Value = delivered.json().await.unwrap();
    let execution = delivered["execution_id"].as_str().unwrap();
    let events = server.finish(&server.owner, execution).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    let results = tool_results(&events);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].output[0].as_text(), Some("write_note: deploy"));
    let calls = fixture_log(&log)
        .into_iter()
        .filter(|l| l.starts_with("call write_note"))
        .count();
    assert_eq!(calls, 1);
}

/// An MCP image goes to the model as an image (a Chat Completions model: a user message of
/// `image_url` parts after the tool messages); its saved result is sent the same by the owner
/// that takes the Turn over.
async fn an_app_tools_image_reaches_the_model_and_is_replayed_the_same_after_a_takeover(
    server: Server,
) {
    app_ready(&server, "everything", &everything_stdio()).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("everything__get-tiny-image", json!({})),
        Answer::Text(vec!["the MCP logo"]),
    ])
    .await;
    // The request after the result (saved with its sending) waits until the Turn is taken over.
    model.delay_first(1, Duration::from_secs(60));
    let bot = bot_with(&server, &model, &["everything__get-tiny-image"]).await;
    let (_, execution) = start(&server, &bot, "Show me the logo").await;
    eventually("the request after the tool result", || async {
        (model.requests_at(1) == 1).then_some(())
    })
    .await;
    steal(&server, &execution).await;
    let events = server.finish(&server.owner, &execution).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(
        model.requests_at(0),
        1,
        "the saved answer is not asked for again"
    );
    assert_eq!(model.requests_at(1), 2, "the new owner asks again");
    let result = &tool_results(&events)[0];
    assert!(
        matches!(&result.output[1], ContentPart::Media { media_type, data, .. }
            if media_type == "image/png" && data.starts_with("iVBORw0KGgo")),
        "{:?}",
        result.output
    );
    let after: Vec<Value> = model
        .bodies()
        .iter()
        .map(|body| serde_json::from_str::<Value>(body).unwrap())
        .filter(|body| {
            body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["role"] == "tool")
        })
        .collect();
    assert_eq!(after.len(), 2);
    assert_eq!(
        after[0]["messages"], after[1]["messages"],
        "the saved result is replayed as it was first sent"
    );
    let messages = after[1]["messages"].as_array().unwrap();
    let files = messages.last().unwrap();
    assert_eq!(files["role"], "user");
    let url = files["content"][1]["image_url"]["url"].as_str().unwrap();
    assert!(
        url.starts_with("data:image/png;base64,iVBORw0KGgo"),
        "{url:.60}"
    );
    let tool = &messages[messages.len() - 2];
    assert_eq!(tool["role"], "tool");
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .contains("[file: media (image/png)]"),
        "{tool}"
    );
}

async fn a_turn_calls_the_time_server(server: Server) {
    app_ready(&server, "time", &time_stdio()).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("time__get_current_time", json!({"timezone": "UTC"})),
        Answer::Text(vec!["it is now"]),
    ])
    .await;
    let bot = bot_with(&server, &model, &["time__get_current_time"]).await;
    let (_, execution) = start(&server, &bot, "What time is it?").await;
    let events = server.finish(&server.owner, &execution).await;
    let results = tool_results(&events);
    assert!(!results[0].is_error, "{:?}", results[0]);
    let text = results[0].output[0].as_text().unwrap();
    let answer: Value = serde_json::from_str(text).unwrap();
    assert_eq!(answer["timezone"], "UTC");
}

async fn a_saved_declaration_is_kept_when_the_server_changes(server: Server) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let description = dir.path().join("description");
    std::fs::write(&description, "Version one of the note writer.").unwrap();
    let transport = fixture_stdio(&log, 0.0, Some(&description));
    let (app, connection, _) = app_ready(&server, "notes", &transport).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__write_note", json!({"text": "a"})),
        Answer::Text(vec!["done"]),
        Answer::Text(vec!["again"]),
    ])
    .await;
    // The first answer waits, so the server changes while the Turn runs.
    model.delay(0, Duration::from_secs(3));
    let bot = bot_with(&server, &model, &["notes__write_note"]).await;
    let (_, first) = start(&server, &bot, "Write").await;
    std::fs::write(&description, "Version two of the note writer.").unwrap();
    let found: Value = discover(&server, &server.owner, &app, &connection)
        .await
        .json()
        .await
        .unwrap();
    assert!(found.to_string().contains("Version two"), "{found}");
    let events = server.finish(&server.owner, &first).await;
    let results = tool_results(&events);
    assert!(!results[0].is_error, "{:?}", results[0]);
    let bodies = model.bodies();
    // Every model request of the first Turn offered the declaration it saved.
    assert!(bodies[1].contains("Version one") && !bodies[1].contains("Version two"));
    // A Turn submitted now takes the new discovery.
    let (_, second) = start(&server, &bot, "Again").await;
    server.finish(&server.owner, &second).await;
    assert!(model.bodies()[2].contains("Version two"));
}

async fn a_saved_call_on_a_removed_connection_fails_clearly_and_sends_nothing(server: Server) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let (app, connection, _) = app_ready(&server, "notes", &fixture_stdio(&log, 0.0, None)).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__write_note", json!({"text": "a"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    model.delay(0, Duration::from_secs(3));
    let bot = bot_with(&server, &model, &["notes__write_note"]).await;
    let (_, execution) = start(&server, &bot, "Write").await;
    let removed = server
        .delete(
            &format!("/v1/apps/{app}/connections/{connection}"),
            &server.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
    let events = server.finish(&server.owner, &execution).await;
    let results = tool_results(&events);
    assert!(results[0].is_error);
    let text = results[0].output[0].as_text().unwrap();
    assert!(
        text.contains("removed") && text.contains("not sent"),
        "{text}"
    );
    assert!(
        !fixture_log(&log).iter().any(|l| l.starts_with("call")),
        "nothing reached the server"
    );
}

async fn a_lost_result_of_an_unsafe_tool_waits_in_outcome_unknown(server: Server) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    app_ready(&server, "notes", &fixture_stdio(&log, 60.0, None)).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__write_note", json!({"text": "pay 5"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let bot = bot_with(&server, &model, &["notes__write_note"]).await;
    let (_, execution) = start(&server, &bot, "Pay").await;
    wait_for_log(&log, "call write_note").await;
    steal(&server, &execution).await;
    eventually("outcome_unknown", || async {
        (state(&server, &execution).await == "outcome_unknown").then_some(())
    })
    .await;
    let calls = fixture_log(&log)
        .iter()
        .filter(|l| l.starts_with("call write_note"))
        .count();
    assert_eq!(calls, 1, "the unsafe write was never sent again");
}

async fn a_lost_result_of_a_read_only_tool_is_sent_again_with_the_same_request_id(server: Server) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let marker = dir.path().join("slow-once");
    let transport = fixture_stdio_with(&log, 60.0, None, Some(&marker));
    app_ready(&server, "notes", &transport).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__read_note", json!({"text": "list"})),
        Answer::Text(vec!["read"]),
    ])
    .await;
    let bot = bot_with(&server, &model, &["notes__read_note"]).await;
    let (_, execution) = start(&server, &bot, "Read").await;
    wait_for_log(&log, "call read_note").await;
    steal(&server, &execution).await;
    let events = server.finish(&server.owner, &execution).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    let calls: Vec<String> = fixture_log(&log)
        .into_iter()
        .filter(|l| l.starts_with("call read_note"))
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0], calls[1], "the same request ID both times");
    let results = tool_results(&events);
    assert_eq!(
        results.last().unwrap().output[0].as_text(),
        Some("read_note: list")
    );
}

async fn cancelling_a_turn_sends_notifications_cancelled(server: Server) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    app_ready(&server, "notes", &fixture_stdio(&log, 60.0, None)).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__write_note", json!({"text": "slow"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let bot = bot_with(&server, &model, &["notes__write_note"]).await;
    let (_, execution) = start(&server, &bot, "Write slowly").await;
    wait_for_log(&log, "call write_note").await;
    let cancelled = server
        .post(&format!("/v1/executions/{execution}/cancel"), &server.owner)
        .send()
        .await
        .unwrap();
    assert!(cancelled.status().is_success(), "{}", cancelled.status());
    let lines = wait_for_log(&log, "cancelled write_note").await;
    assert!(!lines.iter().any(|l| l.starts_with("done")), "{lines:?}");
    let events = server.finish(&server.owner, &execution).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Cancelled));
}

async fn a_member_uses_apps_but_only_owners_and_admins_change_them(server: Server) {
    let (app, connection, _) = app_ready(&server, "time", &time_stdio()).await;
    let member = server.other_member_token().await;
    let (status, code) = error_code(register(&server, &member, "other", &time_stdio()).await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::FORBIDDEN, "forbidden")
    );
    let (status, _) =
        error_code(connect(&server, &member, &app, json!({"auth": "none"})).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let removed = server
        .delete(&format!("/v1/apps/{app}"), &member)
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::FORBIDDEN);
    // Members see Apps and run discovery.
    assert_eq!(server.items("/v1/apps", &member).await.len(), 1);
    assert_eq!(
        discover(&server, &member, &app, &connection).await.status(),
        StatusCode::OK
    );
    // Another organization sees nothing of them.
    let organization: Value = server
        .post("/v1/organizations", &server.owner)
        .json(&json!({"name": "elsewhere"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = organization["token_secret"].as_str().unwrap();
    assert!(server.items("/v1/apps", token).await.is_empty());
    let other = server
        .get(&format!("/v1/apps/{app}"), token)
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
    let other = discover(&server, token, &app, &connection).await;
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
}

async fn a_token_without_the_apps_write_right_cannot_register(server: Server) {
    let token = server
        .token_with(json!([{"resource": "apps", "action": "read"}]))
        .await;
    let (status, _) = error_code(register(&server, &token, "time", &time_stdio()).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let listed = server.get("/v1/apps", &token).send().await.unwrap();
    assert_eq!(listed.status(), StatusCode::OK);
    // The `bots` rights, which App routes took before, reach no App route now.
    let bots = server
        .token_with(json!([{"resource": "bots", "action": "read"}, {"resource": "bots", "action": "write"}]))
        .await;
    let listed = server.get("/v1/apps", &bots).send().await.unwrap();
    assert_eq!(listed.status(), StatusCode::FORBIDDEN);
    let (status, _) = error_code(register(&server, &bots, "time", &time_stdio()).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let none = server
        .token_with(json!([{"resource": "chats", "action": "read"}]))
        .await;
    let listed = server.get("/v1/apps", &none).send().await.unwrap();
    assert_eq!(listed.status(), StatusCode::FORBIDDEN);
}

async fn manual_credentials_are_sealed_and_never_shown(server: Server) {
    let everything = everything_http().await;
    let transport = AppTransport::Http {
        url: everything.url.clone(),
    };
    let app: Value = register(&server, &server.owner, "everything", &transport)
        .await
        .json()
        .await
        .unwrap();
    let app = app["id"].as_str().unwrap();
    let secret = "Bearer sk-very-secret-4711";
    let created = connect(
        &server,
        &server.owner,
        app,
        json!({"auth": "manual", "headers": {"Authorization": secret}}),
    )
    .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let created: Value = created.json().await.unwrap();
    assert_eq!(created["header_names"], json!(["Authorization"]));
    assert!(!created.to_string().contains("very-secret"));
    let id = created["id"].as_str().unwrap();
    // The headers reach the server: discovery over the manual connection works.
    assert_eq!(
        discover(&server, &server.owner, app, id).await.status(),
        StatusCode::OK
    );
    let listed = server
        .items(&format!("/v1/apps/{app}/connections"), &server.owner)
        .await;
    assert!(!Value::Array(listed).to_string().contains("very-secret"));
    assert!(
        server.columns_containing("very-secret").await.is_empty(),
        "the secret is sealed at rest"
    );
    // Manual headers are checked: none, too many, or one the transport sets are refused.
    for body in [
        json!({"auth": "manual"}),
        json!({"auth": "manual", "headers": {"Host": "x"}}),
        json!({"auth": "manual", "headers": {"bad header": "x"}}),
        json!({"auth": "none", "headers": {"Authorization": "x"}}),
    ] {
        let (status, code) =
            error_code(connect(&server, &server.owner, app, body.clone()).await).await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::BAD_REQUEST, "invalid_input"),
            "{body}"
        );
    }
}

async fn bad_app_input_is_refused(server: Server) {
    for (name, transport) in [
        (
            "bad-url",
            json!({"type": "http", "url": "ftp://example.com/mcp"}),
        ),
        ("no-host", json!({"type": "http", "url": "http://"})),
        (
            "Bad_Name",
            json!({"type": "http", "url": "https://example.com/mcp"}),
        ),
        ("empty-command", json!({"type": "stdio", "command": " "})),
    ] {
        let response = server
            .post("/v1/apps", &server.owner)
            .json(&json!({"name": name, "transport": transport}))
            .send()
            .await
            .unwrap();
        let (status, code) = error_code(response).await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::BAD_REQUEST, "invalid_input"),
            "{name}"
        );
    }
    // An unknown transport type is refused by the schema.
    let response = server
        .post("/v1/apps", &server.owner)
        .json(&json!({"name": "x", "transport": {"type": "sse", "url": "https://example.com"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    // A taken name is a conflict.
    assert_eq!(
        register(&server, &server.owner, "time", &time_stdio())
            .await
            .status(),
        StatusCode::CREATED
    );
    let (status, _) =
        error_code(register(&server, &server.owner, "time", &time_stdio()).await).await;
    assert_eq!(status, StatusCode::CONFLICT);
    // An unknown App or Connection is not found.
    let missing = server
        .post(
            &format!(
                "/v1/apps/{}/connections/{}/discover",
                Uuid::now_v7(),
                Uuid::now_v7()
            ),
            &server.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    // A server that is not there answers 502 on discovery, with a reason.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let transport = AppTransport::Http {
        url: format!("http://127.0.0.1:{port}/mcp"),
    };
    let app: Value = register(&server, &server.owner, "gone", &transport)
        .await
        .json()
        .await
        .unwrap();
    let app = app["id"].as_str().unwrap();
    let connection: Value = connect(&server, &server.owner, app, json!({"auth": "none"}))
        .await
        .json()
        .await
        .unwrap();
    let (status, code) = error_code(
        discover(
            &server,
            &server.owner,
            app,
            connection["id"].as_str().unwrap(),
        )
        .await,
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_GATEWAY, "unavailable")
    );
    // An OAuth connection waits for a person to sign in; discovery says so.
    let oauth: Value = connect(&server, &server.owner, app, json!({"auth": "oauth"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(oauth["status"], "needs_sign_in");
    let (status, _) =
        error_code(discover(&server, &server.owner, app, oauth["id"].as_str().unwrap()).await)
            .await;
    assert_eq!(status, StatusCode::CONFLICT);
}

async fn a_bot_naming_an_unknown_app_tool_cannot_send(server: Server) {
    app_ready(&server, "time", &time_stdio()).await;
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    let bot = bot_with(&server, &model, &["time__no_such_tool"]).await;
    let chat = server.chat(&server.owner, &bot).await;
    let (status, code) = error_code(server.send(&server.owner, &chat, "Hi", None).await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_REQUEST, "invalid_input")
    );
    assert_eq!(model.total_requests(), 0);
}

async fn apps_and_connections_are_paged(server: Server) {
    let mut apps = Vec::new();
    for name in ["a1", "a2", "a3"] {
        let app: Value = register(&server, &server.owner, name, &time_stdio())
            .await
            .json()
            .await
            .unwrap();
        apps.push(app["id"].as_str().unwrap().to_string());
    }
    let walked = server.walk(&server.owner, "/v1/apps", 2).await;
    let ids: Vec<&str> = walked.iter().map(|a| a["id"].as_str().unwrap()).collect();
    assert_eq!(ids, apps.iter().map(String::as_str).collect::<Vec<_>>());
    for _ in 0..3 {
        connect(&server, &server.owner, &apps[0], json!({"auth": "none"})).await;
    }
    let walked = server
        .walk(
            &server.owner,
            &format!("/v1/apps/{}/connections", apps[0]),
            2,
        )
        .await;
    assert_eq!(walked.len(), 3);
}

async fn a_removed_app_is_gone_with_its_connections(server: Server) {
    let (app, connection, _) = app_ready(&server, "time", &time_stdio()).await;
    let removed = server
        .delete(&format!("/v1/apps/{app}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
    assert!(server.items("/v1/apps", &server.owner).await.is_empty());
    let gone = server
        .get(
            &format!("/v1/apps/{app}/connections/{connection}"),
            &server.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), StatusCode::NOT_FOUND);
    // Its name is free again.
    assert_eq!(
        register(&server, &server.owner, "time", &time_stdio())
            .await
            .status(),
        StatusCode::CREATED
    );
    // A Bot naming its tools now has them as host tools no more: the name is a new App's,
    // which has no ready connection yet.
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    let bot = bot_with(&server, &model, &["time__get_current_time"]).await;
    let chat = server.chat(&server.owner, &bot).await;
    let (status, _) = error_code(server.send(&server.owner, &chat, "Hi", None).await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

async fn an_approval_rule_holds_an_app_call_until_a_person_approves_it(server: Server) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    app_ready(&server, "notes", &fixture_stdio(&log, 0.0, None)).await;
    let rule = server
        .post("/v1/approval-rules", &server.owner)
        .json(&json!({"tool": "notes__write_note", "action": "ask"}))
        .send()
        .await
        .unwrap();
    assert_eq!(rule.status(), StatusCode::CREATED);
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__write_note", json!({"text": "approved note"})),
        Answer::Text(vec!["asked"]),
    ])
    .await;
    let bot = bot_with(&server, &model, &["notes__write_note"]).await;
    let (_, execution) = start(&server, &bot, "Write").await;
    let events = server.finish(&server.owner, &execution).await;
    let request = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ApprovalRequested { request_id, .. } => Some(request_id.to_string()),
            _ => None,
        })
        .expect("an approval_requested event");
    assert!(
        !fixture_log(&log).iter().any(|l| l.starts_with("call")),
        "nothing is sent before the decision"
    );
    let approved = server
        .post(&format!("/v1/approvals/{request}/decision"), &server.owner)
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), StatusCode::OK);
    // The approved call runs once, in its tool job, over the saved route.
    let lines = wait_for_log(&log, "done write_note").await;
    let calls = lines
        .iter()
        .filter(|l| l.starts_with("call write_note"))
        .count();
    assert_eq!(calls, 1, "{lines:?}");
}

async fn manual_headers_reach_the_app_on_each_call(server: Server) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let fixture = fixture_http(&log, 0.0).await;
    let transport = AppTransport::Http {
        url: fixture.url.clone(),
    };
    let app: Value = register(&server, &server.owner, "notes", &transport)
        .await
        .json()
        .await
        .unwrap();
    let app = app["id"].as_str().unwrap();
    let connection: Value = connect(
        &server,
        &server.owner,
        app,
        json!({"auth": "manual", "headers": {"X-Fixture-Key": "key-2718"}}),
    )
    .await
    .json()
    .await
    .unwrap();
    let connection = connection["id"].as_str().unwrap();
    assert_eq!(
        discover(&server, &server.owner, app, connection)
            .await
            .status(),
        StatusCode::OK
    );
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__write_note", json!({"text": "over http"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let bot = bot_with(&server, &model, &["notes__write_note"]).await;
    let (_, execution) = start(&server, &bot, "Write").await;
    let events = server.finish(&server.owner, &execution).await;
    let results = tool_results(&events);
    assert_eq!(
        results[0].output[0].as_text(),
        Some("write_note: over http"),
        "{results:?}"
    );
    assert!(
        fixture_log(&log).contains(&"header x-fixture-key key-2718".to_string()),
        "{:?}",
        fixture_log(&log)
    );
    // Neither the events nor the model saw the header's value.
    assert!(!serde_json::to_string(&events).unwrap().contains("key-2718"));
    assert!(!model.bodies().iter().any(|b| b.contains("key-2718")));
    // Nor did the logs (debug level, rmcp's and reqwest's included).
    let logs = String::from_utf8_lossy(&api::logs().lock().unwrap()).to_string();
    assert!(!logs.is_empty() && !logs.contains("key-2718"));
}

/// Kills the fixture process that logged the last `pid` line, as a crashed MCP server.
fn kill_fixture(log: &std::path::Path) {
    let pid = fixture_log(log)
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("pid ").map(str::to_string))
        .unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
}

async fn a_session_lost_mid_call_of_an_unsafe_tool_waits_in_outcome_unknown(server: Server) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    app_ready(&server, "notes", &fixture_stdio(&log, 60.0, None)).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__write_note", json!({"text": "pay 5"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let bot = bot_with(&server, &model, &["notes__write_note"]).await;
    let (_, execution) = start(&server, &bot, "Pay").await;
    wait_for_log(&log, "call write_note").await;
    kill_fixture(&log);
    eventually("outcome_unknown", || async {
        (state(&server, &execution).await == "outcome_unknown").then_some(())
    })
    .await;
    let waiting = server.items("/v1/unknown-outcomes", &server.owner).await;
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    let calls = fixture_log(&log)
        .iter()
        .filter(|l| l.starts_with("call write_note"))
        .count();
    assert_eq!(calls, 1, "the unsafe write was not sent again");
    assert_eq!(model.total_requests(), 1, "the model got no guessed result");
}

async fn a_session_lost_mid_call_of_a_read_only_tool_is_sent_again_with_the_same_request_id(
    server: Server,
) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let marker = dir.path().join("slow-once");
    let transport = fixture_stdio_with(&log, 60.0, None, Some(&marker));
    app_ready(&server, "notes", &transport).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__read_note", json!({"text": "list"})),
        Answer::Text(vec!["read"]),
    ])
    .await;
    let bot = bot_with(&server, &model, &["notes__read_note"]).await;
    let (_, execution) = start(&server, &bot, "Read").await;
    wait_for_log(&log, "call read_note").await;
    kill_fixture(&log);
    let events = server.finish(&server.owner, &execution).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    let calls: Vec<String> = fixture_log(&log)
        .into_iter()
        .filter(|l| l.starts_with("call read_note"))
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0], calls[1], "the same request ID both times");
    assert_eq!(
        tool_results(&events)[0].output[0].as_text(),
        Some("read_note: list")
    );
}

/// A close that fails (a stdio server that outlives its client's close) saves its error ID,
/// and the run sends nothing new on any App afterwards (spec: "A close failure keeps its full
/// cause and a safe error ID. It blocks new sends."). One database: the rule is the
/// directory's, and the stubborn server costs seconds per close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_session_close_blocks_the_runs_next_app_call_and_keeps_its_error_id() {
    let server = server(sqlite().await).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let AppTransport::Stdio { command, mut args } = fixture_stdio(&log, 0.0, None) else {
        unreachable!("the fixture runs over stdio")
    };
    args.push("--stubborn".into());
    app_ready(&server, "notes", &AppTransport::Stdio { command, args }).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__write_note", json!({"text": "one"})),
        Answer::Tool("notes__write_note", json!({"text": "two"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let bot = bot_with(&server, &model, &["notes__write_note"]).await;
    let (_, execution) = start(&server, &bot, "Note twice").await;
    let events = server.finish(&server.owner, &execution).await;

    let sessions = openbot_server::cluster::directory::store(&server.database.features)
        .unwrap()
        .resources_of_execution(uuid_of(&execution))
        .await
        .unwrap();
    assert_eq!(sessions.len(), 1, "the second session was never registered");
    let Some(openbot_server::cluster::directory::CloseResult::Failed { error_id, .. }) =
        sessions[0].closed
    else {
        panic!("the stubborn server's close is saved failed: {sessions:?}");
    };
    let results = tool_results(&events);
    assert_eq!(results.len(), 2);
    assert!(!results[0].is_error, "the first call was sent: {results:?}");
    assert!(results[1].is_error, "{results:?}");
    let refusal = results[1].output[0].as_text().unwrap();
    assert!(refusal.contains(&error_id.to_string()), "{refusal}");
    let calls = fixture_log(&log)
        .iter()
        .filter(|l| l.starts_with("call write_note"))
        .count();
    assert_eq!(calls, 1, "nothing was sent after the failed close");
}

/// Removing a Connection closes the sessions it has open (here one mid-call), answers only
/// once their closes are saved, and the call whose session it closed is not taken as done:
/// an unsafe write waits for a decision.
async fn removing_a_connection_closes_its_open_sessions_before_it_answers(server: Server) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let (app, connection, _) = app_ready(&server, "notes", &fixture_stdio(&log, 60.0, None)).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__write_note", json!({"text": "pay 5"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let bot = bot_with(&server, &model, &["notes__write_note"]).await;
    let (_, execution) = start(&server, &bot, "Pay").await;
    wait_for_log(&log, "call write_note").await;

    let removed = server
        .delete(
            &format!("/v1/apps/{app}/connections/{connection}"),
            &server.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
    let sessions = openbot_server::cluster::directory::store(&server.database.features)
        .unwrap()
        .resources_of_scope(&format!("app_connection:{connection}"))
        .await
        .unwrap();
    let in_call: Vec<_> = sessions
        .iter()
        .filter(|row| row.execution_id == Some(uuid_of(&execution)))
        .collect();
    assert_eq!(in_call.len(), 1, "{sessions:?}");
    assert!(
        matches!(
            in_call[0].closed,
            Some(openbot_server::cluster::directory::CloseResult::Closed { .. })
        ),
        "the close was saved before the removal answered: {sessions:?}"
    );
    eventually("outcome_unknown", || async {
        (state(&server, &execution).await == "outcome_unknown").then_some(())
    })
    .await;
    assert!(
        !fixture_log(&log).iter().any(|l| l.starts_with("done")),
        "the write did not finish"
    );
}

/// Apps on a node with the default platform: stdio off, internal addresses denied.
mod platform_rules {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stdio_apps_are_refused_unless_the_operator_enables_them() {
        let server = api::server(sqlite().await).await;
        let (status, code) =
            error_code(register(&server, &server.owner, "time", &time_stdio()).await).await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::BAD_REQUEST, "invalid_input")
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_internal_address_is_refused_unless_allowed() {
        let platform = openbot_server::platform::Platform::new(
            openbot_core::outbound::OutboundPolicy::default(),
            None,
        )
        .unwrap();
        let server = server_on(sqlite().await, platform).await;
        for url in [
            "http://127.0.0.1:9/mcp",
            "http://[::1]:9/mcp",
            "http://169.254.169.254/mcp",
            "http://10.0.0.1/mcp",
        ] {
            let transport = AppTransport::Http { url: url.into() };
            let response = register(&server, &server.owner, "inside", &transport).await;
            let status = response.status();
            let body: Value = response.json().await.unwrap();
            assert_eq!(status, StatusCode::BAD_REQUEST, "{url}");
            assert!(
                body["message"]
                    .as_str()
                    .unwrap()
                    .contains("outbound policy"),
                "{body}"
            );
        }
    }
}

/// `openbot apps ...` against a node, as a person would run it.
mod cli {
    use super::*;

    async fn openbot(
        server: &Server,
        config: &std::path::Path,
        args: &[&str],
    ) -> std::process::Output {
        // The server options go first: everything after `--` is a stdio command's arguments.
        tokio::process::Command::new(env!("CARGO_BIN_EXE_openbot"))
            .args(&args[..1])
            .args(["--server", &server.base, "--token", &server.owner])
            .args(&args[1..])
            .env("OPENBOT_CONFIG_DIR", config)
            .env_remove("OPENBOT_SERVER")
            .env_remove("OPENBOT_TOKEN")
            .output()
            .await
            .unwrap()
    }

    async fn ok(server: &Server, config: &std::path::Path, args: &[&str]) -> String {
        let output = openbot(server, config, args).await;
        assert!(
            output.status.success(),
            "openbot {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn add_connect_discover_show_and_remove_from_the_command_line() {
        let server = super::server(sqlite().await).await;
        let config = tempfile::tempdir().unwrap();
        let config = config.path();
        let AppTransport::Stdio { command, args } = time_stdio() else {
            unreachable!()
        };
        let mut add = vec!["apps", "add", "time", "--command", command.as_str(), "--"];
        add.extend(args.iter().map(String::as_str));
        assert!(ok(&server, config, &add).await.contains("stdio:"));
        let connected = ok(&server, config, &["apps", "connect", "time"]).await;
        assert!(
            connected.contains("none") && connected.contains("ready"),
            "{connected}"
        );
        let tools = ok(&server, config, &["apps", "discover", "time"]).await;
        assert!(tools.contains("get_current_time"), "{tools}");
        let listed: Value =
            serde_json::from_str(&ok(&server, config, &["apps", "list", "--json"]).await).unwrap();
        assert_eq!(listed["items"][0]["name"], "time");
        let shown = ok(&server, config, &["apps", "show", "time"]).await;
        assert!(
            shown.contains("1 tools") || shown.contains("2 tools"),
            "{shown}"
        );
        let connections: Value = serde_json::from_str(
            &ok(&server, config, &["apps", "connections", "time", "--json"]).await,
        )
        .unwrap();
        assert_eq!(connections["items"].as_array().unwrap().len(), 1);
        // A header without a colon is refused before anything is sent.
        let bad = openbot(
            &server,
            config,
            &["apps", "connect", "time", "--header", "nocolon"],
        )
        .await;
        assert!(!bad.status.success());
        // An unknown App is a clear error.
        let missing = openbot(&server, config, &["apps", "show", "nope"]).await;
        assert!(String::from_utf8_lossy(&missing.stderr).contains("no App named"));
        ok(&server, config, &["apps", "remove", "time"]).await;
        assert!(
            ok(&server, config, &["apps", "list"])
                .await
                .contains("(no apps)")
        );
    }
}

async fn an_app_call_takes_room_in_its_apps_shared_limit(server: Server) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    // Each call takes 2 s, so the first holds the App's one permit while the second waits.
    app_ready(&server, "notes", &fixture_stdio(&log, 2.0, None)).await;
    let limit = server
        .http
        .put(format!("{}/v1/limits/app:notes", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"max_concurrent": 1, "max_wait_ms": 300}))
        .send()
        .await
        .unwrap();
    assert!(limit.status().is_success(), "{}", limit.status());
    // Each Turn is answered by its own step: a call, then text.
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__write_note", json!({"text": "milk"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let bot = bot_with(&server, &model, &["notes__write_note"]).await;
    let (_, first) = start(&server, &bot, "Note milk").await;
    let (_, second) = start(&server, &bot, "Note milk too").await;
    let mut results = tool_results(&server.finish(&server.owner, &first).await);
    results.extend(tool_results(&server.finish(&server.owner, &second).await));
    assert_eq!(results.len(), 2, "{results:?}");
    let refused: Vec<_> = results.iter().filter(|r| r.is_error).collect();
    assert_eq!(refused.len(), 1, "one call found no room: {results:?}");
    let text = refused[0].output[0].as_text().unwrap_or_default();
    assert!(
        text.contains("app:notes") && text.contains("not sent"),
        "{text}"
    );
    // Only the call that had room reached the App, and its room was given back.
    let calls = fixture_log(&log)
        .into_iter()
        .filter(|l| l.starts_with("call write_note"))
        .count();
    assert_eq!(calls, 1);
    let limits: Value = server
        .get("/v1/limits", &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let notes = limits["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["scope"] == "app:notes")
        .cloned()
        .unwrap();
    assert_eq!(notes["in_use"], 0, "{notes}");
}

/// Adds a Vault rule letting `reader` read `field` of `item`.
async fn vault_rule(server: &Server, item: &str, field: &str, reader: Value) -> reqwest::Response {
    server
        .post(&format!("/v1/vault-items/{item}/rules"), &server.owner)
        .json(&json!({"field": field, "reader": reader}))
        .send()
        .await
        .unwrap()
}

#[allow(clippy::too_many_lines)] // a real MCP server and Vault set up, then one request each
async fn a_manual_connection_opens_its_vault_references_only_at_each_request(server: Server) {
    let secret = format!("vk-{}", Uuid::now_v7().simple());
    let item: Value = server
        .post("/v1/vault-items", &server.owner)
        .json(&json!({"name": "fixture", "fields": {"key": secret}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let item = item["id"].as_str().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let fixture = fixture_http(&log, 0.0).await;
    let transport = AppTransport::Http {
        url: fixture.url.clone(),
    };
    let app: Value = register(&server, &server.owner, "notes", &transport)
        .await
        .json()
        .await
        .unwrap();
    let app = app["id"].as_str().unwrap();
    let reference = format!("{{{{vault.{item}.key}}}}");

    // References are checked when the Connection is opened: by ID, to a field that exists.
    for (headers, why) in [
        (
            json!({"X-Fixture-Key": "{{vault.fixture.key}}"}),
            "not a Vault reference",
        ),
        (
            json!({"X-Fixture-Key": format!("{{{{vault.{}.key}}}}", Uuid::now_v7())}),
            "does not exist",
        ),
        (
            json!({"X-Fixture-Key": format!("{{{{vault.{item}.missing}}}}")}),
            "does not exist",
        ),
        (
            json!({"X-Fixture-Key": format!("{{{{vault.{item}.key")}),
            "unclosed",
        ),
    ] {
        let refused = connect(
            &server,
            &server.owner,
            app,
            json!({"auth": "manual", "headers": headers}),
        )
        .await;
        let (status, body) = (refused.status(), refused.json::<Value>().await.unwrap());
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(
            body["message"].as_str().unwrap().contains(why),
            "{why}: {body}"
        );
    }
    let connection: Value = connect(
        &server,
        &server.owner,
        app,
        json!({"auth": "manual", "headers": {"X-Fixture-Key": format!("Key {reference}")}}),
    )
    .await
    .json()
    .await
    .unwrap();
    let connection = connection["id"].as_str().unwrap().to_string();

    // Discovery reads as the member through the Connection: without its rule nothing is sent.
    let refused = discover(&server, &server.owner, app, &connection).await;
    let (status, body) = (refused.status(), refused.json::<Value>().await.unwrap());
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains(&format!("the connection {connection}")),
        "{body}"
    );
    assert!(fixture_log(&log).is_empty(), "nothing reached the App");
    // A rule for an unknown connection, or one of another kind, is refused.
    let unknown = vault_rule(
        &server,
        &item,
        "key",
        json!({"type": "app_connection", "connection_id": Uuid::now_v7()}),
    )
    .await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    let plain: Value = connect(&server, &server.owner, app, json!({"auth": "none"}))
        .await
        .json()
        .await
        .unwrap();
    let other_kind = vault_rule(
        &server,
        &item,
        "key",
        json!({"type": "app_connection", "connection_id": plain["id"]}),
    )
    .await;
    assert_eq!(other_kind.status(), StatusCode::NOT_FOUND);
    // A Bot uses the App's newest ready Connection: the plain one goes.
    let gone = server
        .delete(
            &format!(
                "/v1/apps/{app}/connections/{}",
                plain["id"].as_str().unwrap()
            ),
            &server.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), StatusCode::NO_CONTENT);
    let rule = vault_rule(
        &server,
        &item,
        "key",
        json!({"type": "app_connection", "connection_id": connection}),
    )
    .await;
    assert_eq!(rule.status(), StatusCode::CREATED);
    assert_eq!(
        discover(&server, &server.owner, app, &connection)
            .await
            .status(),
        StatusCode::OK
    );

    // A Turn's call reads as its Bot and the Connection: without the Bot's rule, a clear
    // error result and nothing sent.
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__write_note", json!({"text": "first"})),
        Answer::Text(vec!["refused"]),
        Answer::Tool("notes__write_note", json!({"text": "second"})),
        Answer::Text(vec!["done"]),
        Answer::Tool("notes__write_note", json!({"text": "third"})),
        Answer::Text(vec!["gone"]),
    ])
    .await;
    let bot = bot_with(&server, &model, &["notes__write_note"]).await;
    let calls_before = fixture_log(&log)
        .iter()
        .filter(|l| l.starts_with("call "))
        .count();
    let (chat, execution) = start(&server, &bot, "Write").await;
    let events = server.finish(&server.owner, &execution).await;
    let results = tool_results(&events);
    assert!(results[0].is_error, "{results:?}");
    let text = results[0].output[0].as_text().unwrap().to_string();
    assert!(text.contains("no Vault rule lets the Bot"), "{text}");
    assert!(text.contains(&item) && text.contains("`key`"), "{text}");
    assert_eq!(
        fixture_log(&log)
            .iter()
            .filter(|l| l.starts_with("call "))
            .count(),
        calls_before,
        "the call was not sent"
    );
    let bot_id = bot["id"].as_str().unwrap();
    let rule = vault_rule(
        &server,
        &item,
        "key",
        json!({"type": "bot", "bot_id": bot_id}),
    )
    .await;
    assert_eq!(rule.status(), StatusCode::CREATED);
    let sent = receipt(server.send(&server.owner, &chat, "Again", None).await).await;
    let second = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    let results = tool_results(&second);
    assert!(!results[0].is_error, "{results:?}");
    assert!(
        fixture_log(&log).contains(&format!("header x-fixture-key Key {secret}")),
        "{:?}",
        fixture_log(&log)
    );
    // The Turn saved the Connection, never the value; the Connection shows header names.
    let shown = server
        .get(
            &format!("/v1/apps/{app}/connections/{connection}"),
            &server.owner,
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!shown.contains(&secret), "{shown}");

    // The field is removed: the next send is a clear error naming it, and nothing is sent.
    let removed = server
        .delete(&format!("/v1/vault-items/{item}/fields/key"), &server.owner)
        .send()
        .await
        .unwrap();
    assert!(removed.status().is_success());
    let calls_before = fixture_log(&log)
        .iter()
        .filter(|l| l.starts_with("call "))
        .count();
    let sent = receipt(server.send(&server.owner, &chat, "Once more", None).await).await;
    let third = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    let results = tool_results(&third);
    assert!(results[0].is_error, "{results:?}");
    let text = results[0].output[0].as_text().unwrap().to_string();
    assert!(text.contains("has no field `key`"), "{text}");
    assert_eq!(
        fixture_log(&log)
            .iter()
            .filter(|l| l.starts_with("call "))
            .count(),
        calls_before
    );

    // The value is in no row, event, message, model request or log line of the run.
    let mut all = events;
    all.extend(second);
    all.extend(third);
    server
        .assert_value_nowhere(&secret, &all, &chat, &model)
        .await;
}
