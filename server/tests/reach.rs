//! What a member can make the server reach, on SQLite and on a real PostgreSQL: platform keys
//! go only to the platform's endpoints, outbound requests keep to the deployment's policy on
//! the resolved address, and scripted models come only from the operator's folder.

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

use std::sync::Arc;

use fake_openai::{Answer, FakeOpenAi};
use openbot_core::outbound::OutboundPolicy;
use openbot_schema::{ErrorCategory, EventKind, TurnOutcome};
use openbot_server::platform::Platform;
use reqwest::StatusCode;
use serde_json::{Value, json};

use api::{Raw, Server, error_code, outcome_of, postgres, receipt, server_on, sqlite};

const PLATFORM_KEY: &str = "sk-platform-secret-0123456789";

/// Runs each test on both databases with the raw database, so that it picks its platform.
macro_rules! reach_tests {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::sqlite().await).await })*
        }
        mod on_postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::postgres().await).await })*
        }
    };
}

reach_tests!(
    a_platform_key_never_goes_to_a_compatible_endpoint,
    an_organization_base_url_never_gets_the_platform_key,
    a_compatible_key_goes_only_to_the_base_url_saved_with_it,
    the_platform_key_goes_to_the_platform_endpoint,
    an_http_tool_on_an_internal_address_is_refused_when_registered,
    an_http_tool_whose_name_resolves_to_loopback_is_never_called,
    a_model_endpoint_on_an_internal_address_is_refused,
    an_allowed_host_is_reached,
    a_scripted_model_outside_the_operators_folder_is_refused,
);

/// A platform whose own OpenAI key (and a stray compatible key) sit in its environment, with
/// the platform's OpenAI endpoint at `openai_base`.
fn keyed_platform(openai_base: Option<String>) -> Platform {
    Platform::new(
        OutboundPolicy::parse("loopback").unwrap(),
        Some(&std::env::temp_dir()),
    )
    .unwrap()
    .with_env(Arc::new(move |name| match name {
        "OPENAI_API_KEY" | "OPENBOT_COMPATIBLE_API_KEY" | "ANTHROPIC_API_KEY" => {
            Some(PLATFORM_KEY.into())
        }
        "OPENAI_BASE_URL" => openai_base.clone(),
        _ => None,
    }))
}

/// A deployment that denies every internal address (the PostgreSQL default).
fn strict_platform() -> Platform {
    Platform::new(OutboundPolicy::default(), Some(&std::env::temp_dir())).unwrap()
}

/// A scripted model in the temp folder: a call of `tool`, then a text.
fn tool_script(tool: &str) -> String {
    let dir = tempfile::Builder::new()
        .prefix("openbot-reach-")
        .tempdir()
        .unwrap()
        .keep();
    let path = dir.join("script.json");
    std::fs::write(
        &path,
        json!([{"tool_calls": [{"name": tool, "arguments": {}}]}, {"deltas": ["done"]}])
            .to_string(),
    )
    .unwrap();
    format!("scripted:{}", path.display())
}

async fn create_bot(server: &Server, spec: Value) -> reqwest::Response {
    server
        .post("/v1/bots", &server.owner)
        .json(&spec)
        .send()
        .await
        .unwrap()
}

/// Sends "hi" to a new Chat with `bot` and reads the Turn to its end.
async fn run_turn(server: &Server, bot: &Value) -> Vec<openbot_schema::Event> {
    let chat = server.chat(&server.owner, bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "hi", None).await).await;
    server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await
}

fn failure_category(events: &[openbot_schema::Event]) -> Option<ErrorCategory> {
    events.iter().find_map(|e| match &e.kind {
        EventKind::Failed { category, .. } => Some(*category),
        _ => None,
    })
}

async fn a_platform_key_never_goes_to_a_compatible_endpoint(raw: Raw) {
    let server = server_on(raw, keyed_platform(None)).await;
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let events = run_turn(&server, &bot).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(model.total_requests(), 1);
    assert_eq!(
        model.last_authorization(),
        None,
        "a compatible endpoint without a key of its own gets no key"
    );
}

async fn an_organization_base_url_never_gets_the_platform_key(raw: Raw) {
    let server = server_on(raw, keyed_platform(None)).await;
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    // The API refuses a base URL without the organization's own key...
    let put = server
        .http
        .put(format!("{}/v1/models/providers/openai", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"base_url": model.base_url}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(put).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    // ...and a setting saved that way (before this rule) is never filled with the platform key.
    let organization = server.owner_member().await.organization_id;
    server
        .database
        .models
        .put_provider(organization, "openai", Some(&model.base_url), None)
        .await
        .unwrap();
    let bot: Value = create_bot(&server, json!({"name": "B", "model": "openai:gpt-test"}))
        .await
        .json()
        .await
        .unwrap();
    let events = run_turn(&server, &bot).await;
    assert_eq!(
        failure_category(&events),
        Some(ErrorCategory::Configuration)
    );
    assert_eq!(
        model.total_requests(),
        0,
        "nothing was sent to the organization's URL"
    );
}

async fn a_compatible_key_goes_only_to_the_base_url_saved_with_it(raw: Raw) {
    let server = server_on(raw, keyed_platform(None)).await;
    let own = FakeOpenAi::start(vec![Answer::Text(vec!["own"])]).await;
    let other = FakeOpenAi::start(vec![Answer::Text(vec!["other"])]).await;
    let org_key = "sk-org-compatible-0123456789";
    let keyless = server
        .http
        .put(format!("{}/v1/models/providers/compatible", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"api_key": org_key}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(keyless).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into()),
        "a compatible key needs the URL it is for"
    );
    let put = server
        .http
        .put(format!("{}/v1/models/providers/compatible", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"api_key": org_key, "base_url": own.base_url}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::OK);
    let to_own = server.bot(&server.owner, &own, false).await;
    let to_other = server.bot(&server.owner, &other, false).await;
    assert_eq!(
        outcome_of(&run_turn(&server, &to_own).await),
        Some(TurnOutcome::Completed)
    );
    assert_eq!(
        outcome_of(&run_turn(&server, &to_other).await),
        Some(TurnOutcome::Completed)
    );
    assert_eq!(
        own.last_authorization().as_deref(),
        Some(format!("Bearer {org_key}").as_str())
    );
    assert_eq!(
        other.last_authorization(),
        None,
        "another URL gets neither the organization's nor the platform's key"
    );
}

async fn the_platform_key_goes_to_the_platform_endpoint(raw: Raw) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    let server = server_on(raw, keyed_platform(Some(model.base_url.clone()))).await;
    let bot: Value = create_bot(&server, json!({"name": "B", "model": "openai:gpt-test"}))
        .await
        .json()
        .await
        .unwrap();
    let events = run_turn(&server, &bot).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(
        model.last_authorization().as_deref(),
        Some(format!("Bearer {PLATFORM_KEY}").as_str())
    );
}

async fn register_tool(server: &Server, url: &str) -> reqwest::Response {
    server
        .http
        .put(format!("{}/v1/tools/write", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"description": "Writes.", "input_schema": {"type": "object"}, "url": url}))
        .send()
        .await
        .unwrap()
}

async fn an_http_tool_on_an_internal_address_is_refused_when_registered(raw: Raw) {
    let server = server_on(raw, strict_platform()).await;
    for url in [
        "http://127.0.0.1:9/write",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:9/write",
        "http://10.0.0.1/write",
        "http://[::ffff:127.0.0.1]:9/write",
    ] {
        let response = register_tool(&server, url).await;
        assert_eq!(
            error_code(response).await,
            (StatusCode::BAD_REQUEST, "invalid_input".into()),
            "{url}"
        );
    }
}

async fn an_http_tool_whose_name_resolves_to_loopback_is_never_called(raw: Raw) {
    let server = server_on(raw, strict_platform()).await;
    let outside = outside::Outside::start(false).await;
    // A name passes registration; the address it resolves to is checked at the call.
    let by_name = outside.url.replace("127.0.0.1", "localhost");
    assert_eq!(
        register_tool(&server, &by_name).await.status(),
        StatusCode::OK
    );
    let response = create_bot(
        &server,
        json!({"name": "Writer", "model": tool_script("write"),
            "tools": [{"name": "write", "input_schema": {}}]}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let bot: Value = response.json().await.unwrap();
    let events = run_turn(&server, &bot).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    let result = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } => Some(result.clone()),
            _ => None,
        })
        .unwrap();
    assert!(result.is_error, "{result:?}");
    assert!(
        format!("{result:?}").contains("outbound policy"),
        "the model reads why: {result:?}"
    );
    assert_eq!(
        outside.received(),
        0,
        "nothing reached the internal endpoint"
    );
}

async fn a_model_endpoint_on_an_internal_address_is_refused(raw: Raw) {
    let server = server_on(raw, strict_platform()).await;
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    // An address in the spec is refused when the Bot is created...
    let response = create_bot(&server, json!({"name": "B", "model": model.spec()})).await;
    assert_eq!(
        error_code(response).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    let put = server
        .http
        .put(format!("{}/v1/models/providers/openai", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"api_key": "sk-x", "base_url": "http://169.254.169.254/v1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(put).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    // ...and a name that resolves to loopback is refused when the request would be sent.
    let by_name = model.spec().replace("127.0.0.1", "localhost");
    let response = create_bot(&server, json!({"name": "B", "model": by_name})).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let bot: Value = response.json().await.unwrap();
    let events = run_turn(&server, &bot).await;
    assert_eq!(
        failure_category(&events),
        Some(ErrorCategory::Configuration)
    );
    assert_eq!(model.total_requests(), 0);
}

async fn an_allowed_host_is_reached(raw: Raw) {
    let platform = Platform::new(
        OutboundPolicy::parse("localhost").unwrap(),
        Some(&std::env::temp_dir()),
    )
    .unwrap();
    let server = server_on(raw, platform).await;
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    let by_name = model.spec().replace("127.0.0.1", "localhost");
    let bot: Value = create_bot(&server, json!({"name": "B", "model": by_name}))
        .await
        .json()
        .await
        .unwrap();
    let events = run_turn(&server, &bot).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(model.total_requests(), 1);
}

async fn a_scripted_model_outside_the_operators_folder_is_refused(raw: Raw) {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("hello.json"), r#"[{"deltas": ["hi"]}]"#).unwrap();
    let platform = Platform::new(OutboundPolicy::default(), Some(folder.path())).unwrap();
    let server = server_on(raw, platform).await;
    for model in [
        "scripted:/etc/passwd",
        "scripted:../hello.json",
        "scripted:missing.json",
    ] {
        let response = create_bot(&server, json!({"name": "B", "model": model})).await;
        assert_eq!(
            error_code(response).await,
            (StatusCode::BAD_REQUEST, "invalid_input".into()),
            "{model}"
        );
    }
    let response = create_bot(
        &server,
        json!({"name": "B", "model": "scripted:hello.json"}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let bot: Value = response.json().await.unwrap();
    let changed = server
        .patch(
            &format!("/v1/bots/{}", bot["id"].as_str().unwrap()),
            &server.owner,
        )
        .json(&json!({"model": "scripted:/etc/passwd"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(changed).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    let events = run_turn(&server, &bot).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
}
