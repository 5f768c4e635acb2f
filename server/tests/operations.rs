//! The one generic call path (issue 14): every operation of schema/openapi.json is in the
//! generated table and reachable through `Client::call` in both modes; the generated typed
//! methods carry JSON and bytes; in memory an operation only a server has says so.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/served.rs"]
mod served;

use std::collections::BTreeSet;
use std::sync::Arc;

use openbot_core::{
    ApiAnswer, ApiRequest, Client, ConnectOptions, OPERATIONS, Operations, connect,
};
use openbot_schema::{BotSpec, ContentPart, ErrorCode, EventPage, Limits, SendInput};
use serde_json::json;
use served::Served;

fn script(steps: serde_json::Value) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.json");
    std::fs::write(&path, json!({ "steps": steps }).to_string()).unwrap();
    (dir, format!("scripted:{}", path.display()))
}

fn bot(model: &str) -> BotSpec {
    BotSpec {
        name: "Ops".into(),
        instructions: String::new(),
        model: model.into(),
        tools: vec![],
        limits: Limits::default(),
        shared: false,
        code_mode: false,
    }
}

async fn remote(served: &Served) -> Arc<dyn Client> {
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

async fn memory() -> Arc<dyn Client> {
    connect("memory://", ConnectOptions::default())
        .await
        .unwrap()
}

fn request(params: serde_json::Value, body: Option<serde_json::Value>) -> ApiRequest {
    ApiRequest {
        params: params.as_object().cloned().unwrap_or_default(),
        body: body.map(openbot_core::ApiBody::Json),
    }
}

#[test]
fn the_operation_table_holds_every_operation_of_the_schema_and_no_other() {
    let document: serde_json::Value =
        serde_json::from_str(include_str!("../../schema/openapi.json")).unwrap();
    let mut in_schema = BTreeSet::new();
    for methods in document["paths"].as_object().unwrap().values() {
        for operation in methods.as_object().unwrap().values() {
            in_schema.insert(operation["operationId"].as_str().unwrap().to_string());
        }
    }
    let in_table: BTreeSet<String> = OPERATIONS.iter().map(|op| op.id.to_string()).collect();
    assert_eq!(in_schema, in_table);
}

#[tokio::test]
async fn in_memory_an_operation_only_a_server_has_is_invalid_input_that_says_so() {
    let client = memory().await;
    let server_only: Vec<_> = OPERATIONS
        .iter()
        .filter(|op| op.client_method.is_none())
        .collect();
    assert!(!server_only.is_empty());
    for op in server_only {
        let err = client.call(op.id, ApiRequest::default()).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidInput, "{}: {err}", op.id);
        assert!(
            err.message.contains("needs an OpenBot server"),
            "{}: {err}",
            op.id
        );
    }
}

#[tokio::test]
async fn an_operation_the_api_lacks_is_invalid_input_in_both_modes() {
    let served = Served::start();
    for client in [memory().await, remote(&served).await] {
        let err = client
            .call("launch_rockets", ApiRequest::default())
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidInput, "{err}");
    }
}

#[tokio::test]
async fn a_hand_declared_operation_through_the_call_path_does_what_its_method_does() {
    let served = Served::start();
    let (_dir, model) = script(json!([{"text": "Hello."}]));
    for client in [memory().await, remote(&served).await] {
        let created = client
            .call(
                "create_bot",
                request(json!({}), Some(serde_json::to_value(bot(&model)).unwrap())),
            )
            .await
            .unwrap();
        let ApiAnswer::Json(created) = created else {
            panic!("create_bot answers JSON")
        };
        let id: openbot_schema::BotId = serde_json::from_value(created["id"].clone()).unwrap();
        assert_eq!(client.get_bot(id).await.unwrap().spec.name, "Ops");
    }
}

#[tokio::test]
async fn the_events_operation_answers_pages_to_the_end_in_both_modes() {
    let served = Served::start();
    let (_dir, model) = script(json!([{"text": "Hello."}]));
    for client in [memory().await, remote(&served).await] {
        let created = client.create_bot(bot(&model)).await.unwrap();
        let chat = client.create_chat(created.id).await.unwrap();
        let receipt = client
            .send(
                chat.id,
                SendInput {
                    content: vec![ContentPart::text("hi")],
                    command_key: None,
                },
            )
            .await
            .unwrap();
        let mut after = 0;
        let mut types = Vec::new();
        for _ in 0..50 {
            let page: EventPage = client
                .call(
                    "events",
                    request(
                        json!({"id": receipt.execution_id.to_string(), "after": after, "wait": 5}),
                        None,
                    ),
                )
                .await
                .unwrap()
                .decode()
                .unwrap();
            types.extend(page.events.iter().map(|e| {
                serde_json::to_value(e).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_string()
            }));
            after = page.next_after;
            if page.ended {
                break;
            }
        }
        assert_eq!(types.first().map(String::as_str), Some("turn_started"));
        assert_eq!(types.last().map(String::as_str), Some("turn_ended"));
    }
}

#[tokio::test]
async fn a_file_keeps_its_bytes_and_media_type_through_the_generated_methods() {
    let served = Served::start();
    let client = remote(&served).await;
    let bytes = b"line one\n\x00\xffbinary".to_vec();
    let stored = client
        .upload_file("notes.bin", bytes.clone(), "application/octet-stream")
        .await
        .unwrap();
    let content = client.file_content(&stored.id).await.unwrap();
    assert_eq!(content.data, bytes);
    assert_eq!(content.content_type, "application/octet-stream");
    client.delete_file(&stored.id).await.unwrap();
    let gone = client.get_file(&stored.id).await.unwrap_err();
    assert_eq!(gone.code, ErrorCode::NotFound, "{gone}");
}

#[tokio::test]
async fn a_public_operation_needs_no_token() {
    let served = Served::start();
    let anonymous = connect(&served.base, ConnectOptions::default())
        .await
        .unwrap();
    assert_eq!(anonymous.health().await.unwrap().status, "ok");
    let refused = anonymous.list_tokens(None, None).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::Unauthorized, "{refused}");
}
