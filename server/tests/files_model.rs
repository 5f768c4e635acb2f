//! Files reach the model, end to end on SQLite and PostgreSQL: a stored image and a PDF
//! attached to a message are sent to the model (here the fake OpenAI server, Chat Completions)
//! as content parts with their stored bytes; the caller's right to each file is checked when
//! the message is sent, and a file the provider cannot take is refused then, with a message
//! that names it.
#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/api.rs"]
mod api;
#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/pg.rs"]
mod pg;

use api::{Server, error_code, postgres, receipt, server, sqlite};
use base64::Engine as _;
use fake_openai::{Answer, FakeOpenAi};
use reqwest::StatusCode;
use serde_json::{Value, json};

macro_rules! file_tests {
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

file_tests!(
    an_attached_image_and_pdf_reach_the_model_with_their_stored_bytes,
    a_file_of_another_member_or_token_is_not_found_when_sent,
    a_file_the_provider_cannot_take_is_refused_when_sent,
);

const PNG: &[u8] = b"\x89PNG\r\n\x1a\nstored-image";
const PDF: &[u8] = b"%PDF-1.7 stored report";

async fn upload(server: &Server, token: &str, name: &str, media_type: &str, bytes: &[u8]) -> Value {
    let response = server
        .post(&format!("/v1/files?name={name}"), token)
        .header("content-type", media_type)
        .body(bytes.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    response.json().await.unwrap()
}

/// Sends text and the files (each claimed with `claimed` as its media type) to `chat`.
async fn send_files(
    server: &Server,
    token: &str,
    chat: &str,
    files: &[(&Value, &str)],
) -> reqwest::Response {
    let mut content = vec![json!({"type": "text", "text": "Compare them."})];
    content.extend(files.iter().map(|(file, claimed)| {
        json!({"type": "file", "file": {"id": file["id"], "media_type": claimed,
               "url": "https://attacker.example/elsewhere.png"}})
    }));
    server
        .post(&format!("/v1/chats/{chat}/messages"), token)
        .json(&json!({"content": content}))
        .send()
        .await
        .unwrap()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

async fn an_attached_image_and_pdf_reach_the_model_with_their_stored_bytes(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Seen."])]).await;
    let image = upload(&server, &server.owner, "chart.png", "image/png", PNG).await;
    let pdf = upload(&server, &server.owner, "report.pdf", "application/pdf", PDF).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    // The claimed types and URLs are not what is sent: the stored description and bytes are.
    let sent = receipt(
        send_files(
            &server,
            &server.owner,
            &chat,
            &[(&image, "application/octet-stream"), (&pdf, "image/png")],
        )
        .await,
    )
    .await;
    server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;

    let bodies = model.bodies();
    assert_eq!(bodies.len(), 1);
    let body: Value = serde_json::from_str(&bodies[0]).unwrap();
    let user = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap();
    assert_eq!(
        user["content"],
        json!([
            {"type": "text", "text": "Compare them."},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{}", b64(PNG))}},
            {"type": "file", "file": {"filename": "report.pdf", "file_data": format!("data:application/pdf;base64,{}", b64(PDF))}},
        ])
    );
    // The history keeps the references, not the bytes.
    let history = server
        .items(&format!("/v1/chats/{chat}/messages"), &server.owner)
        .await;
    let first = serde_json::to_string(&history[0]).unwrap();
    assert!(
        first.contains(image["id"].as_str().unwrap()) && !first.contains(&b64(PNG)),
        "{first}"
    );
    assert!(!first.contains("attacker.example"), "{first}");
}

async fn a_file_of_another_member_or_token_is_not_found_when_sent(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["-"])]).await;
    let member = server.other_member_token().await;
    let theirs = upload(&server, &member, "theirs.png", "image/png", PNG).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let refused = send_files(&server, &server.owner, &chat, &[(&theirs, "image/png")]).await;
    assert_eq!(
        error_code(refused).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    let unknown = json!({"id": openbot_schema::FileId::new()});
    let refused = send_files(&server, &server.owner, &chat, &[(&unknown, "image/png")]).await;
    assert_eq!(
        error_code(refused).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    // A token limited to the Bot reaches only the files it stored itself.
    let mine = upload(&server, &server.owner, "mine.png", "image/png", PNG).await;
    let limited = server.bot_limited_token(&bot).await;
    let refused = send_files(&server, &limited, &chat, &[(&mine, "image/png")]).await;
    assert_eq!(
        error_code(refused).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    let own = upload(&server, &limited, "own.png", "image/png", PNG).await;
    let sent = receipt(send_files(&server, &limited, &chat, &[(&own, "image/png")]).await).await;
    server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(
        model.total_requests(),
        1,
        "only the accepted message reached the model"
    );
}

async fn a_file_the_provider_cannot_take_is_refused_when_sent(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["-"])]).await;
    let archive = upload(
        &server,
        &server.owner,
        "data.zip",
        "application/zip",
        b"PK\x03\x04",
    )
    .await;
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let refused = send_files(&server, &server.owner, &chat, &[(&archive, "image/png")]).await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "invalid_input");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("`data.zip` (application/zip)"),
        "{message}"
    );
    // Steering input is checked the same way.
    let steered = server
        .post(&format!("/v1/chats/{chat}/steer"), &server.owner)
        .json(&json!({"content": [{"type": "file", "file": {"id": archive["id"], "media_type": "image/png"}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(steered).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    assert_eq!(model.total_requests(), 0, "nothing reached the model");
    let history = server
        .items(&format!("/v1/chats/{chat}/messages"), &server.owner)
        .await;
    assert!(history.is_empty());
}
