//! Vaults end to end on SQLite and PostgreSQL: items and rules through the HTTP API, values
//! opened only in an HTTP tool's send (and found nowhere else: not in any row of any table, any
//! event, any model request or any log line of the run), rules and fields checked again before
//! each send, and the bad inputs refused.
#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/api.rs"]
mod api;
#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/pg.rs"]
mod pg;

use std::sync::{Arc, Mutex};

use api::{Server, error_code, logs, postgres, receipt, server, sqlite};
use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use fake_openai::{Answer, FakeOpenAi};
use openbot_schema::{Event, EventKind};
use reqwest::StatusCode;
use serde_json::{Value, json};

macro_rules! vault_tests {
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

vault_tests!(
    a_vault_value_reaches_the_tool_endpoint_and_nothing_else,
    a_removed_rule_is_checked_again_before_the_next_send,
    a_missing_bot_rule_is_an_error_result_the_model_sees,
    a_new_item_under_an_old_name_does_not_replace_a_saved_reference,
    a_removed_field_is_an_error_result_naming_the_field,
    values_are_write_only_through_the_api,
    bad_vault_inputs_are_refused,
    another_members_and_another_organizations_items_are_out_of_reach,
    a_token_limited_to_one_bot_adds_rules_only_for_it,
    a_background_tool_job_opens_its_references_at_its_send,
    a_reference_from_code_to_a_background_tool_opens_in_its_job,
    an_endpoint_that_echoes_the_value_does_not_hand_it_to_the_model,
    a_tool_registered_again_on_another_url_no_longer_reads,
    a_reference_from_code_reaches_the_endpoint_and_nothing_else,
    a_reference_from_code_without_a_code_mode_rule_is_a_clear_error,
    a_model_free_code_run_opens_a_reference_at_the_send,
    a_direct_model_call_does_not_open_a_reference_in_its_arguments,
);

/// A tool endpoint that records each request's headers and body and answers `done`.
#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
}

impl Recorder {
    async fn start() -> (String, Recorder) {
        Self::start_answering(false).await
    }

    /// With `echo`, the answer repeats the request's Authorization header.
    async fn start_answering(echo: bool) -> (String, Recorder) {
        let recorder = Recorder::default();
        let seen = Arc::clone(&recorder.seen);
        let app = Router::new().route(
            "/call",
            post(move |headers: HeaderMap, body: String| {
                let seen = Arc::clone(&seen);
                async move {
                    let body = serde_json::from_str(&body).unwrap_or(Value::Null);
                    let answer = if echo {
                        format!(
                            "you sent {}",
                            headers["authorization"].to_str().unwrap_or_default()
                        )
                    } else {
                        "done".to_string()
                    };
                    seen.lock().unwrap().push((headers, body));
                    answer
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/call", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (url, recorder)
    }

    fn requests(&self) -> Vec<(HeaderMap, Value)> {
        self.seen.lock().unwrap().clone()
    }
}

/// A value no other part of a run could produce.
fn secret_value() -> String {
    format!("sk-vault-{}", uuid::Uuid::now_v7().simple())
}

async fn json_of(response: reqwest::Response, status: StatusCode) -> Value {
    let got = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(got, status, "{body}");
    body
}

async fn create_item(server: &Server, token: &str, body: Value) -> Value {
    json_of(
        server
            .post("/v1/vault-items", token)
            .json(&body)
            .send()
            .await
            .unwrap(),
        StatusCode::CREATED,
    )
    .await
}

async fn allow(server: &Server, token: &str, item: &str, field: &str, reader: Value) -> Value {
    json_of(
        server
            .post(&format!("/v1/vault-items/{item}/rules"), token)
            .json(&json!({"field": field, "reader": reader}))
            .send()
            .await
            .unwrap(),
        StatusCode::CREATED,
    )
    .await
}

/// Registers the HTTP tool `call_api` sending `Authorization: Bearer <token field>` and the
/// body field `api_key` from `item`.
async fn register_tool(server: &Server, url: &str, item: &str) -> reqwest::Response {
    server
        .http
        .put(format!("{}/v1/tools/call_api", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({
            "description": "Calls the API.",
            "input_schema": {"type": "object"},
            "url": url,
            "headers": {"Authorization": format!("Bearer {{{{vault.{item}.token}}}}"), "X-Plain": "plain"},
            "body": {"auth": {"api_key": format!("{{{{vault.{item}.token}}}}")}},
        }))
        .send()
        .await
        .unwrap()
}

async fn tool_bot(server: &Server, model: &FakeOpenAi) -> Value {
    json_of(
        server
            .post("/v1/bots", &server.owner)
            .json(&json!({"name": "Caller", "model": model.spec(),
                          "tools": [{"name": "call_api", "input_schema": {"type": "object"}}]}))
            .send()
            .await
            .unwrap(),
        StatusCode::CREATED,
    )
    .await
}

/// A Bot with the tool, a member item holding `secret` and, as asked, rules for the Bot and
/// the tool. Returns the Bot and the item's ID.
async fn setup(
    server: &Server,
    model: &FakeOpenAi,
    url: &str,
    secret: &str,
    bot_rule: bool,
    tool_rule: bool,
) -> (Value, String) {
    let item = create_item(
        server,
        &server.owner,
        json!({"name": "payments", "fields": {"token": secret}}),
    )
    .await;
    let id = item["id"].as_str().unwrap().to_string();
    assert_eq!(
        register_tool(server, url, &id).await.status(),
        StatusCode::OK
    );
    let bot = tool_bot(server, model).await;
    if bot_rule {
        allow(
            server,
            &server.owner,
            &id,
            "token",
            json!({"type": "bot", "bot_id": bot["id"]}),
        )
        .await;
    }
    if tool_rule {
        allow(
            server,
            &server.owner,
            &id,
            "*",
            json!({"type": "tool", "name": "call_api"}),
        )
        .await;
    }
    (bot, id)
}

async fn run_turn(server: &Server, bot: &Value) -> (String, Vec<Event>) {
    let chat = server.chat(&server.owner, bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "Call it", None).await).await;
    let execution = sent["execution_id"].as_str().unwrap().to_string();
    let events = server.finish(&server.owner, &execution).await;
    (chat, events)
}

fn tool_results(events: &[Event]) -> Vec<(bool, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } => Some((
                result.is_error,
                result
                    .output
                    .iter()
                    .filter_map(|p| p.as_text())
                    .collect::<String>(),
            )),
            _ => None,
        })
        .collect()
}

async fn a_vault_value_reaches_the_tool_endpoint_and_nothing_else(server: Server) {
    let secret = secret_value();
    let model = FakeOpenAi::start(vec![
        Answer::Tool("call_api", json!({"amount": 5})),
        Answer::Text(vec!["Paid."]),
    ])
    .await;
    let (url, endpoint) = Recorder::start().await;
    let (bot, item) = setup(&server, &model, &url, &secret, true, true).await;
    let (chat, events) = run_turn(&server, &bot).await;

    assert_eq!(tool_results(&events), vec![(false, "done".to_string())]);
    let requests = endpoint.requests();
    assert_eq!(requests.len(), 1);
    let (headers, body) = &requests[0];
    assert_eq!(
        headers["authorization"],
        format!("Bearer {secret}").as_str()
    );
    assert_eq!(headers["x-plain"], "plain");
    assert_eq!(body, &json!({"amount": 5, "auth": {"api_key": secret}}));

    // Nowhere else: no row of any table, no event, no model request, no answer, no log line.
    server
        .assert_value_nowhere(&secret, &events, &chat, &model)
        .await;
    // The saved Turn keeps the tool with its reference (item ID and field), not the value.
    let execution = events[0].execution_id;
    let row = server.engine.execution(execution).await.unwrap();
    let input: openbot_server::turns::TurnInput = server
        .engine
        .context()
        .open_json(row.input_record)
        .await
        .unwrap();
    let saved = serde_json::to_string(&input.tools).unwrap();
    assert!(
        saved.contains(&format!("{{{{vault.{item}.token}}}}")),
        "{saved}"
    );
    assert!(!saved.contains(&secret));
    let shown = server
        .get(&format!("/v1/vault-items/{item}"), &server.owner)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        shown.contains("\"token\"") && !shown.contains(&secret),
        "{shown}"
    );
    let tools = server
        .get("/v1/tools", &server.owner)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(tools.contains(&item) && !tools.contains(&secret), "{tools}");
}

async fn a_removed_rule_is_checked_again_before_the_next_send(server: Server) {
    let secret = secret_value();
    let model = FakeOpenAi::start(vec![
        Answer::Tool("call_api", json!({})),
        Answer::Text(vec!["ok"]),
        Answer::Tool("call_api", json!({})),
        Answer::Text(vec!["refused"]),
    ])
    .await;
    let (url, endpoint) = Recorder::start().await;
    let (bot, item) = setup(&server, &model, &url, &secret, true, false).await;
    let rule = allow(
        &server,
        &server.owner,
        &item,
        "token",
        json!({"type": "tool", "name": "call_api"}),
    )
    .await;
    let chat = server.chat(&server.owner, &bot).await;
    let first = receipt(server.send(&server.owner, &chat, "one", None).await).await;
    let events = server
        .finish(&server.owner, first["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(tool_results(&events), vec![(false, "done".to_string())]);

    let removed = server
        .delete(
            &format!("/v1/vault-rules/{}", rule["id"].as_str().unwrap()),
            &server.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
    let second = receipt(server.send(&server.owner, &chat, "two", None).await).await;
    let events = server
        .finish(&server.owner, second["execution_id"].as_str().unwrap())
        .await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(results[0].0, "{results:?}");
    assert!(
        results[0]
            .1
            .contains("no Vault rule lets the tool `call_api` at its endpoint"),
        "{results:?}"
    );
    assert_eq!(endpoint.requests().len(), 1, "the second call was not sent");
}

async fn a_missing_bot_rule_is_an_error_result_the_model_sees(server: Server) {
    let secret = secret_value();
    let model = FakeOpenAi::start(vec![
        Answer::Tool("call_api", json!({})),
        Answer::Text(vec!["It was refused."]),
    ])
    .await;
    let (url, endpoint) = Recorder::start().await;
    let (bot, item) = setup(&server, &model, &url, &secret, false, true).await;
    let (_, events) = run_turn(&server, &bot).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(results[0].0);
    let expected = format!(
        "no Vault rule lets the Bot {} read field `token` of Vault item {item}",
        bot["id"].as_str().unwrap()
    );
    assert!(results[0].1.contains(&expected), "{results:?}");
    assert!(endpoint.requests().is_empty(), "nothing was sent");
    let bodies = model.bodies();
    assert_eq!(bodies.len(), 2);
    assert!(
        bodies[1].contains("no Vault rule lets the Bot"),
        "the model reads the error"
    );
    assert!(bodies.iter().all(|b| !b.contains(&secret)));
    assert!(matches!(
        events.last().map(|e| &e.kind),
        Some(EventKind::TurnEnded { .. })
    ));
}

async fn a_new_item_under_an_old_name_does_not_replace_a_saved_reference(server: Server) {
    let secret = secret_value();
    let model = FakeOpenAi::start(vec![
        Answer::Tool("call_api", json!({})),
        Answer::Text(vec!["gone"]),
    ])
    .await;
    let (url, endpoint) = Recorder::start().await;
    let (bot, old) = setup(&server, &model, &url, &secret, true, true).await;
    let deleted = server
        .delete(&format!("/v1/vault-items/{old}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    // The same name, the same field, every rule: still another item.
    let replacement = create_item(
        &server,
        &server.owner,
        json!({"name": "payments", "fields": {"token": secret_value()}}),
    )
    .await;
    let new = replacement["id"].as_str().unwrap();
    allow(
        &server,
        &server.owner,
        new,
        "*",
        json!({"type": "bot", "bot_id": bot["id"]}),
    )
    .await;
    allow(
        &server,
        &server.owner,
        new,
        "*",
        json!({"type": "tool", "name": "call_api"}),
    )
    .await;
    let (_, events) = run_turn(&server, &bot).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(results[0].0);
    assert!(
        results[0]
            .1
            .contains(&format!("Vault item {old} does not exist")),
        "{results:?}"
    );
    assert!(endpoint.requests().is_empty());
}

async fn a_removed_field_is_an_error_result_naming_the_field(server: Server) {
    let secret = secret_value();
    let model = FakeOpenAi::start(vec![
        Answer::Tool("call_api", json!({})),
        Answer::Text(vec!["missing"]),
    ])
    .await;
    let (url, endpoint) = Recorder::start().await;
    let (bot, item) = setup(&server, &model, &url, &secret, true, true).await;
    let removed = server
        .delete(
            &format!("/v1/vault-items/{item}/fields/token"),
            &server.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
    let (_, events) = run_turn(&server, &bot).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(results[0].0);
    assert!(
        results[0]
            .1
            .contains(&format!("Vault item {item} has no field `token`")),
        "{results:?}"
    );
    assert!(endpoint.requests().is_empty());
}

async fn values_are_write_only_through_the_api(server: Server) {
    let first = secret_value();
    let item = create_item(
        &server,
        &server.owner,
        json!({"name": "mail", "fields": {"password": first, "user": "bot@example.com"}}),
    )
    .await;
    let id = item["id"].as_str().unwrap();
    assert_eq!(item["owner"], "member");
    let names: Vec<&str> = item["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["password", "user"]);
    let second = secret_value();
    let updated = json_of(
        server
            .http
            .put(format!(
                "{}/v1/vault-items/{id}/fields/password",
                server.base
            ))
            .bearer_auth(&server.owner)
            .json(&json!({"value": second}))
            .send()
            .await
            .unwrap(),
        StatusCode::OK,
    )
    .await;
    assert_eq!(updated["fields"].as_array().unwrap().len(), 2);
    for path in [
        format!("/v1/vault-items/{id}"),
        "/v1/vault-items".to_string(),
    ] {
        let text = server
            .get(&path, &server.owner)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(text.contains(id));
        assert!(
            !text.contains(&first) && !text.contains(&second) && !text.contains("bot@example.com"),
            "{text}"
        );
    }
    for value in [&first, &second, &"bot@example.com".to_string()] {
        assert_eq!(server.columns_containing(value).await, Vec::<String>::new());
    }
}

#[allow(clippy::too_many_lines)] // one table of bad inputs, each refused
async fn bad_vault_inputs_are_refused(server: Server) {
    let item = create_item(
        &server,
        &server.owner,
        json!({"name": "x", "fields": {"token": "v"}}),
    )
    .await;
    let id = item["id"].as_str().unwrap();
    let unknown = uuid::Uuid::now_v7();
    let cases: Vec<(reqwest::RequestBuilder, StatusCode, &str)> = vec![
        (
            server.get(&format!("/v1/vault-items/{unknown}"), &server.owner),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            server.get("/v1/vault-items/not-an-id", &server.owner),
            StatusCode::BAD_REQUEST,
            "invalid_input",
        ),
        (
            server
                .post("/v1/vault-items", &server.owner)
                .json(&json!({"name": "", "fields": {}})),
            StatusCode::BAD_REQUEST,
            "invalid_input",
        ),
        (
            server
                .post("/v1/vault-items", &server.owner)
                .json(&json!({"name": "a\u{0}b"})),
            StatusCode::BAD_REQUEST,
            "invalid_input",
        ),
        (
            server
                .post("/v1/vault-items", &server.owner)
                .json(&json!({"name": "y", "fields": {"bad name": "v"}})),
            StatusCode::BAD_REQUEST,
            "invalid_input",
        ),
        (
            server
                .post("/v1/vault-items", &server.owner)
                .json(&json!({"name": "y", "fields": {"big": "x".repeat(16 * 1024 + 1)}})),
            StatusCode::BAD_REQUEST,
            "invalid_input",
        ),
        (
            server
                .post(&format!("/v1/vault-items/{id}/rules"), &server.owner)
                .json(&json!({"field": "missing", "reader": {"type": "tool", "name": "t"}})),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            server
                .post(&format!("/v1/vault-items/{id}/rules"), &server.owner)
                .json(
                    &json!({"field": "token", "reader": {"type": "tool", "name": "unregistered"}}),
                ),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            server
                .post(&format!("/v1/vault-items/{id}/rules"), &server.owner)
                .json(&json!({"field": "token", "reader": {"type": "bot", "bot_id": unknown}})),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            server
                .post(&format!("/v1/vault-items/{id}/rules"), &server.owner)
                .json(&json!({"field": "token", "reader": {"type": "app", "id": "x"}})),
            StatusCode::BAD_REQUEST,
            "invalid_input",
        ),
        (
            server
                .post(&format!("/v1/vault-items/{unknown}/rules"), &server.owner)
                .json(&json!({"field": "*", "reader": {"type": "tool", "name": "t"}})),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            server.delete(&format!("/v1/vault-rules/{unknown}"), &server.owner),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            server.delete(
                &format!("/v1/vault-items/{id}/fields/missing"),
                &server.owner,
            ),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
    ];
    for (request, status, code) in cases {
        assert_eq!(
            error_code(request.send().await.unwrap()).await,
            (status, code.to_string())
        );
    }
    // A tool may not name an unknown item, a missing field or a malformed reference.
    for header in [
        format!("{{{{vault.{unknown}.token}}}}"),
        format!("{{{{vault.{id}.missing}}}}"),
        "{{vault.x.token}}".to_string(),
        format!("{{{{vault.{id}.token"),
    ] {
        let response = server
            .http
            .put(format!("{}/v1/tools/bad", server.base))
            .bearer_auth(&server.owner)
            .json(&json!({"input_schema": {"type": "object"}, "url": "http://127.0.0.1:9/x", "headers": {"Authorization": header}}))
            .send()
            .await
            .unwrap();
        assert_eq!(
            error_code(response).await,
            (StatusCode::BAD_REQUEST, "invalid_input".into()),
            "{header}"
        );
    }
    let in_url = server
        .http
        .put(format!("{}/v1/tools/bad", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"input_schema": {"type": "object"}, "url": format!("http://127.0.0.1:9/x?key={{{{vault.{id}.token}}}}")}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(in_url).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    let reserved = server
        .http
        .put(format!("{}/v1/tools/bad", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"input_schema": {"type": "object"}, "url": "http://127.0.0.1:9/x", "headers": {"Idempotency-Key": "k"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(reserved).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    // Without the vaults right.
    let no_vaults = server
        .token_with(json!([{"resource": "bots", "action": "read"}]))
        .await;
    let refused = server
        .get("/v1/vault-items", &no_vaults)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(refused).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
    let read_only = server
        .token_with(json!([{"resource": "vaults", "action": "read"}]))
        .await;
    let refused = server
        .post("/v1/vault-items", &read_only)
        .json(&json!({"name": "z"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(refused).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
}

async fn another_members_and_another_organizations_items_are_out_of_reach(server: Server) {
    let private = create_item(
        &server,
        &server.owner,
        json!({"name": "mine", "fields": {"token": "v"}}),
    )
    .await;
    let private_id = private["id"].as_str().unwrap();
    let shared = create_item(
        &server,
        &server.owner,
        json!({"name": "team", "owner": "organization", "fields": {"token": "v"}}),
    )
    .await;
    let shared_id = shared["id"].as_str().unwrap();
    assert_eq!(shared["owner"], "organization");
    let member = server.other_member_token().await;

    // Another member sees the organization's item (never changes it) and not the owner's own.
    let listed: Vec<String> = server
        .items("/v1/vault-items", &member)
        .await
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, vec![shared_id.to_string()]);
    let hidden = server
        .get(&format!("/v1/vault-items/{private_id}"), &member)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(hidden).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    let hidden = server
        .delete(&format!("/v1/vault-items/{private_id}"), &member)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(hidden).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    let not_admin = server
        .http
        .put(format!(
            "{}/v1/vault-items/{shared_id}/fields/token",
            server.base
        ))
        .bearer_auth(&member)
        .json(&json!({"value": "changed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(not_admin).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
    let not_admin = server
        .post("/v1/vault-items", &member)
        .json(&json!({"name": "org", "owner": "organization"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(not_admin).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
    // The member's own item is its own.
    let own = create_item(
        &server,
        &member,
        json!({"name": "own", "fields": {"token": "m"}}),
    )
    .await;
    let own_id = own["id"].as_str().unwrap();
    let hidden = server
        .get(&format!("/v1/vault-items/{own_id}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(hidden).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    // The owner cannot register a tool that reads another member's item.
    let response = server
        .http
        .put(format!("{}/v1/tools/theirs", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"input_schema": {"type": "object"}, "url": "http://127.0.0.1:9/x", "headers": {"X-Key": format!("{{{{vault.{own_id}.token}}}}")}}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(response).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );

    // Another organization sees none of them, and its tools cannot name them.
    let created = json_of(
        server
            .post("/v1/organizations", &server.owner)
            .json(&json!({"name": "Elsewhere"}))
            .send()
            .await
            .unwrap(),
        StatusCode::CREATED,
    )
    .await;
    let elsewhere = created["token_secret"].as_str().unwrap().to_string();
    assert!(server.items("/v1/vault-items", &elsewhere).await.is_empty());
    for id in [private_id, shared_id] {
        let hidden = server
            .get(&format!("/v1/vault-items/{id}"), &elsewhere)
            .send()
            .await
            .unwrap();
        assert_eq!(
            error_code(hidden).await,
            (StatusCode::NOT_FOUND, "not_found".into())
        );
        let response = server
            .http
            .put(format!("{}/v1/tools/foreign", server.base))
            .bearer_auth(&elsewhere)
            .json(&json!({"input_schema": {"type": "object"}, "url": "http://127.0.0.1:9/x", "headers": {"X-Key": format!("{{{{vault.{id}.token}}}}")}}))
            .send()
            .await
            .unwrap();
        assert_eq!(
            error_code(response).await,
            (StatusCode::BAD_REQUEST, "invalid_input".into())
        );
    }
}

async fn a_token_limited_to_one_bot_adds_rules_only_for_it(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["-"])]).await;
    let mine = server.bot(&server.owner, &model, false).await;
    let other = server.bot(&server.owner, &model, false).await;
    let limited = server.bot_limited_token(&mine).await;
    let item = create_item(
        &server,
        &limited,
        json!({"name": "k", "fields": {"token": "v"}}),
    )
    .await;
    let id = item["id"].as_str().unwrap();
    allow(
        &server,
        &limited,
        id,
        "token",
        json!({"type": "bot", "bot_id": mine["id"]}),
    )
    .await;
    let refused = server
        .post(&format!("/v1/vault-items/{id}/rules"), &limited)
        .json(&json!({"field": "token", "reader": {"type": "bot", "bot_id": other["id"]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(refused).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    let (url, _) = Recorder::start().await;
    assert_eq!(
        register_tool(&server, &url, id).await.status(),
        StatusCode::OK
    );
    let refused = server
        .post(&format!("/v1/vault-items/{id}/rules"), &limited)
        .json(&json!({"field": "token", "reader": {"type": "tool", "name": "call_api"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(refused).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
    let rules = server
        .items(&format!("/v1/vault-items/{id}/rules"), &server.owner)
        .await;
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0]["reader"],
        json!({"type": "bot", "bot_id": mine["id"]})
    );
}

async fn a_background_tool_job_opens_its_references_at_its_send(server: Server) {
    let secret = secret_value();
    let model = FakeOpenAi::start(vec![
        Answer::Tool("call_api", json!({"n": 1})),
        Answer::Text(vec!["Started."]),
    ])
    .await;
    let (url, endpoint) = Recorder::start().await;
    let (bot, item) = setup(&server, &model, &url, &secret, true, true).await;
    // The same tool, now detached: each call runs in its own tool job.
    let response = server
        .http
        .put(format!("{}/v1/tools/call_api", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({
            "input_schema": {"type": "object"},
            "url": url,
            "background": true,
            "headers": {"Authorization": format!("Bearer {{{{vault.{item}.token}}}}")},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    run_turn(&server, &bot).await;
    for _ in 0..200 {
        if !endpoint.requests().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let requests = endpoint.requests();
    assert_eq!(requests.len(), 1, "the job sent its call");
    assert_eq!(
        requests[0].0["authorization"],
        format!("Bearer {secret}").as_str()
    );
    assert_eq!(requests[0].1, json!({"n": 1}));
    assert_eq!(
        server.columns_containing(&secret).await,
        Vec::<String>::new()
    );
}

async fn an_endpoint_that_echoes_the_value_does_not_hand_it_to_the_model(server: Server) {
    let secret = secret_value();
    let model = FakeOpenAi::start(vec![
        Answer::Tool("call_api", json!({})),
        Answer::Text(vec!["ok"]),
    ])
    .await;
    let (url, endpoint) = Recorder::start_answering(true).await;
    let (bot, _) = setup(&server, &model, &url, &secret, true, true).await;
    let (_, events) = run_turn(&server, &bot).await;
    assert_eq!(endpoint.requests().len(), 1);
    assert_eq!(
        tool_results(&events),
        vec![(false, "you sent Bearer [vault value]".to_string())]
    );
    assert!(model.bodies().iter().all(|b| !b.contains(&secret)));
    assert!(!serde_json::to_string(&events).unwrap().contains(&secret));
    assert_eq!(
        server.columns_containing(&secret).await,
        Vec::<String>::new()
    );
}

async fn a_tool_registered_again_on_another_url_no_longer_reads(server: Server) {
    let secret = secret_value();
    let model = FakeOpenAi::start(vec![
        Answer::Tool("call_api", json!({})),
        Answer::Text(vec!["refused"]),
    ])
    .await;
    let (url, first) = Recorder::start().await;
    let (bot, item) = setup(&server, &model, &url, &secret, true, true).await;
    let rules = server
        .items(&format!("/v1/vault-items/{item}/rules"), &server.owner)
        .await;
    let tool_rule = rules
        .iter()
        .find(|r| r["reader"]["type"] == "tool")
        .unwrap();
    assert_eq!(tool_rule["tool_url"], url.as_str());
    // An admin points the tool elsewhere: the item's tool rule covered the old endpoint only.
    let (elsewhere, second) = Recorder::start().await;
    assert_eq!(
        register_tool(&server, &elsewhere, &item).await.status(),
        StatusCode::OK
    );
    let (_, events) = run_turn(&server, &bot).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(results[0].0);
    assert!(
        results[0]
            .1
            .contains("no Vault rule lets the tool `call_api` at its endpoint"),
        "{results:?}"
    );
    assert!(first.requests().is_empty() && second.requests().is_empty());
}

/// A Bot with Code Mode on and the tool `call_api`.
async fn code_bot(server: &Server, model: &FakeOpenAi) -> Value {
    json_of(
        server
            .post("/v1/bots", &server.owner)
            .json(
                &json!({"name": "Coder", "model": model.spec(), "code_mode": true,
                          "tools": [{"name": "call_api", "input_schema": {"type": "object"}}]}),
            )
            .send()
            .await
            .unwrap(),
        StatusCode::CREATED,
    )
    .await
}

/// An item with `secret` in field `key`, the tool `call_api` (its template reads field
/// `token`), and rules for the Bot, the tool and, as asked, the Bot's Code Mode runs.
async fn code_setup(
    server: &Server,
    bot: &Value,
    url: &str,
    secret: &str,
    code_rule: bool,
) -> String {
    let item = create_item(
        server,
        &server.owner,
        json!({"name": "api", "fields": {"token": "tok-plain-header", "key": secret}}),
    )
    .await;
    let id = item["id"].as_str().unwrap().to_string();
    assert_eq!(
        register_tool(server, url, &id).await.status(),
        StatusCode::OK
    );
    allow(
        server,
        &server.owner,
        &id,
        "*",
        json!({"type": "bot", "bot_id": bot["id"]}),
    )
    .await;
    allow(
        server,
        &server.owner,
        &id,
        "*",
        json!({"type": "tool", "name": "call_api"}),
    )
    .await;
    if code_rule {
        let rule = allow(
            server,
            &server.owner,
            &id,
            "key",
            json!({"type": "code_mode", "bot_id": bot["id"]}),
        )
        .await;
        assert_eq!(rule["reader"]["type"], json!("code_mode"), "{rule}");
    }
    id
}

/// A program that passes field `key` of `item` to `call_api` and returns what it answered.
fn program_with_reference(item: &str) -> String {
    format!(
        "const answer = await tools.call_api({{secret: 'Key {{{{vault.{item}.key}}}}', n: 1}}); \
         console.log('answer', answer); return {{answer}};"
    )
}

fn code_result(events: &[Event]) -> Value {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } if result.name == "run_code" => {
                Some(serde_json::from_str(result.output[0].as_text().unwrap()).unwrap())
            }
            _ => None,
        })
        .expect("a run_code result")
}

async fn a_reference_from_code_reaches_the_endpoint_and_nothing_else(server: Server) {
    let secret = secret_value();
    let (url, endpoint) = Recorder::start().await;
    // The item's ID is known only after setup: the model's program is written then.
    let model = FakeOpenAi::start(vec![]).await;
    let bot = code_bot(&server, &model).await;
    let item = code_setup(&server, &bot, &url, &secret, true).await;
    model.push(Answer::Tool(
        "run_code",
        json!({"code": program_with_reference(&item)}),
    ));
    model.push(Answer::Text(vec!["Called."]));
    let (chat, events) = run_turn(&server, &bot).await;

    let result = code_result(&events);
    assert_eq!(result["ok"], json!(true), "{result}");
    assert_eq!(result["value"], json!({"answer": "done"}));
    let requests = endpoint.requests();
    assert_eq!(requests.len(), 1);
    let (headers, body) = &requests[0];
    assert_eq!(body["secret"], json!(format!("Key {secret}")), "{body}");
    assert_eq!(body["n"], json!(1));
    assert_eq!(headers["authorization"], "Bearer tok-plain-header");

    // The sandbox saw the reference only; the call log keeps it as written.
    assert_eq!(
        server.columns_containing(&secret).await,
        Vec::<String>::new()
    );
    let events_json = serde_json::to_string(&events).unwrap();
    assert!(!events_json.contains(&secret));
    assert!(
        events_json.contains(&format!("{{{{vault.{item}.key}}}}")),
        "{events_json}"
    );
    for body in model.bodies() {
        assert!(!body.contains(&secret), "a model request held the value");
    }
    let history = server.history(&server.owner, &chat).await.join("\n");
    assert!(!history.contains(&secret));
    let logged = String::from_utf8_lossy(&logs().lock().unwrap()).to_string();
    assert!(!logged.contains(&secret), "a log line held the value");
}

async fn a_reference_from_code_to_a_background_tool_opens_in_its_job(server: Server) {
    let secret = secret_value();
    let (url, endpoint) = Recorder::start().await;
    let model = FakeOpenAi::start(vec![]).await;
    let bot = code_bot(&server, &model).await;
    let item = code_setup(&server, &bot, &url, &secret, true).await;
    // The same tool, detached: the program's call runs in a tool job of its own.
    let response = server
        .http
        .put(format!("{}/v1/tools/call_api", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({
            "input_schema": {"type": "object"},
            "url": url,
            "background": true,
            "headers": {"Authorization": format!("Bearer {{{{vault.{item}.token}}}}")},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    model.push(Answer::Tool(
        "run_code",
        json!({"code": program_with_reference(&item)}),
    ));
    model.push(Answer::Text(vec!["Started."]));
    let (_, events) = run_turn(&server, &bot).await;
    assert_eq!(code_result(&events)["ok"], json!(true));
    for _ in 0..200 {
        if !endpoint.requests().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let requests = endpoint.requests();
    assert_eq!(requests.len(), 1, "the job sent the program's call");
    assert_eq!(requests[0].1["secret"], json!(format!("Key {secret}")));
    assert_eq!(requests[0].0["authorization"], "Bearer tok-plain-header");
    // The job's saved input keeps the reference, never the value.
    assert_eq!(
        server.columns_containing(&secret).await,
        Vec::<String>::new()
    );
    let events_json = serde_json::to_string(&events).unwrap();
    assert!(!events_json.contains(&secret));
}

async fn a_reference_from_code_without_a_code_mode_rule_is_a_clear_error(server: Server) {
    let secret = secret_value();
    let (url, endpoint) = Recorder::start().await;
    let model = FakeOpenAi::start(vec![]).await;
    let bot = code_bot(&server, &model).await;
    // Rules for the Bot and the tool, none for its Code Mode runs.
    let item = code_setup(&server, &bot, &url, &secret, false).await;
    model.push(Answer::Tool(
        "run_code",
        json!({"code": program_with_reference(&item)}),
    ));
    model.push(Answer::Text(vec!["Refused."]));
    let (_, events) = run_turn(&server, &bot).await;

    let result = code_result(&events);
    assert_eq!(result["ok"], json!(false), "{result}");
    assert_eq!(result["error"]["code"], json!("tool.error"), "{result}");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("Code Mode runs") && message.contains(&item) && message.contains("`key`"),
        "{message}"
    );
    assert!(endpoint.requests().is_empty(), "nothing was sent");
    assert_eq!(
        server.columns_containing(&secret).await,
        Vec::<String>::new()
    );
}

async fn a_model_free_code_run_opens_a_reference_at_the_send(server: Server) {
    let secret = secret_value();
    let (url, endpoint) = Recorder::start_answering(true).await;
    let model = FakeOpenAi::start(vec![]).await;
    let bot = code_bot(&server, &model).await;
    let item = code_setup(&server, &bot, &url, &secret, true).await;
    let bot_id = bot["id"].as_str().unwrap();
    let run = |code: String| {
        server
            .post(&format!("/v1/bots/{bot_id}/code-runs"), &server.owner)
            .json(&json!({"code": code}))
            .send()
    };
    let answer = json_of(
        run(program_with_reference(&item)).await.unwrap(),
        StatusCode::OK,
    )
    .await;
    assert_eq!(answer["ok"], json!(true), "{answer}");
    let requests = endpoint.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].1["secret"], json!(format!("Key {secret}")));
    assert!(!answer.to_string().contains(&secret), "{answer}");

    // A field without a Code Mode rule: the program reads a clear error, nothing is sent.
    let other = format!("{{{{vault.{item}.token}}}}");
    let code = format!(
        "try {{ await tools.call_api({{secret: '{other}'}}); return 'sent'; }} catch (e) {{ return e.message; }}"
    );
    let answer = json_of(run(code).await.unwrap(), StatusCode::OK).await;
    let message = answer["value"].as_str().unwrap_or_default();
    assert!(
        message.contains("Code Mode runs") && message.contains("`token`"),
        "{answer}"
    );
    assert_eq!(endpoint.requests().len(), 1);
    // A reference to an item that does not exist.
    let code = format!(
        "await tools.call_api({{secret: '{{{{vault.{}.key}}}}'}});",
        uuid::Uuid::now_v7()
    );
    let answer = json_of(run(code).await.unwrap(), StatusCode::OK).await;
    assert_eq!(answer["ok"], json!(false), "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{answer}"
    );
    assert_eq!(endpoint.requests().len(), 1);
    // A reference by name, or unclosed, is refused before anything is sent.
    for bad in ["{{vault.api.key}}", "{{vault.0195"] {
        let code = format!("await tools.call_api({{secret: '{bad}'}});");
        let answer = json_of(run(code).await.unwrap(), StatusCode::OK).await;
        assert_eq!(answer["ok"], json!(false), "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("Vault reference"), "{answer}");
    }
    assert_eq!(endpoint.requests().len(), 1);
    assert_eq!(
        server.columns_containing(&secret).await,
        Vec::<String>::new()
    );
    let logged = String::from_utf8_lossy(&logs().lock().unwrap()).to_string();
    assert!(!logged.contains(&secret), "a log line held the value");
}

async fn a_direct_model_call_does_not_open_a_reference_in_its_arguments(server: Server) {
    let secret = secret_value();
    let (url, endpoint) = Recorder::start().await;
    let model = FakeOpenAi::start(vec![]).await;
    let bot = tool_bot(&server, &model).await;
    let item = code_setup(&server, &bot, &url, &secret, true).await;
    let reference = format!("{{{{vault.{item}.key}}}}");
    model.push(Answer::Tool("call_api", json!({"secret": reference})));
    model.push(Answer::Text(vec!["ok"]));
    run_turn(&server, &bot).await;
    let requests = endpoint.requests();
    assert_eq!(requests.len(), 1);
    // Sent as written: only a program's calls open references in their arguments.
    assert_eq!(requests[0].1["secret"], json!(reference));
    assert_eq!(
        server.columns_containing(&secret).await,
        Vec::<String>::new()
    );
}
