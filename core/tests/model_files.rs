//! Files the model reads: a stored image and a PDF attached to a message reach each provider in
//! its own format (checked on the exact request bodies a local server of each wire format
//! receives), and a file the provider cannot take, or cannot be read, is a clear error before
//! anything is sent.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/mock_provider.rs"]
mod mock_provider;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use mock_provider::{MockProvider, Reply, collect};
use openbot_core::model::{
    AnthropicMessages, FileBytes, FileReadError, FileSource, Model, ModelError, ModelRequest,
    OpenAiChat, OpenAiResponses, WithFiles,
};
use openbot_core::schema::{ContentPart, FileId, FileRef, Message};
use serde_json::{Value, json};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\nimage-bytes";
const PNG_B64: &str = "iVBORw0KGgppbWFnZS1ieXRlcw==";
const PDF: &[u8] = b"%PDF-1.7 document";
const PDF_B64: &str = "JVBERi0xLjcgZG9jdW1lbnQ=";

/// Files by ID, as a store would answer them.
struct Files(HashMap<FileId, FileBytes>);

#[async_trait]
impl FileSource for Files {
    async fn read(&self, id: FileId) -> Result<FileBytes, FileReadError> {
        self.0.get(&id).cloned().ok_or(FileReadError::NotFound(id))
    }
}

struct Attached {
    source: Arc<Files>,
    image: FileRef,
    pdf: FileRef,
}

fn stored(name: &str, media_type: &str) -> FileRef {
    FileRef {
        id: FileId::new(),
        media_type: media_type.into(),
        name: Some(name.into()),
        url: None,
    }
}

fn attached() -> Attached {
    let image = stored("chart.png", "image/png");
    let pdf = stored("report.pdf", "application/pdf");
    let source = Files(HashMap::from([
        (
            image.id,
            FileBytes {
                media_type: "image/png".into(),
                bytes: PNG.into(),
            },
        ),
        (
            pdf.id,
            FileBytes {
                media_type: "application/pdf".into(),
                bytes: PDF.into(),
            },
        ),
    ]));
    Attached {
        source: Arc::new(source),
        image,
        pdf,
    }
}

fn request(files: &[&FileRef]) -> ModelRequest {
    let mut content = vec![ContentPart::text("Compare them.")];
    content.extend(
        files
            .iter()
            .map(|f| ContentPart::File { file: (*f).clone() }),
    );
    ModelRequest {
        messages: vec![Arc::new(Message::User { content })],
        ..ModelRequest::default()
    }
}

/// Sends `request` through `model` with files from `source` and returns the one body the
/// server received (it answers 400, so nothing else follows).
async fn body_sent(
    mock: &MockProvider,
    spec: &str,
    model: Arc<dyn Model>,
    source: Arc<Files>,
    request: ModelRequest,
) -> Value {
    let model = WithFiles::wrap(spec, model, source);
    let _ = collect(model.as_ref(), request).await;
    mock.only_request().body
}

fn refusing() -> Reply {
    Reply::status(400, r#"{"error":{"message":"stop here"}}"#)
}

#[tokio::test]
async fn openai_chat_gets_an_image_url_part_and_a_file_part() {
    let files = attached();
    let mock = MockProvider::start("/v1", [refusing()]).await;
    let model = Arc::new(OpenAiChat::new("openai", "gpt-4o", mock.settings(0)).unwrap());
    let body = body_sent(
        &mock,
        "openai:gpt-4o",
        model,
        Arc::clone(&files.source),
        request(&[&files.image, &files.pdf]),
    )
    .await;
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "Compare them."},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG_B64}")}},
            {"type": "file", "file": {"filename": "report.pdf", "file_data": format!("data:application/pdf;base64,{PDF_B64}")}},
        ]}])
    );
}

#[tokio::test]
async fn openai_responses_gets_input_image_and_input_file() {
    let files = attached();
    let mock = MockProvider::start("/v1", [refusing()]).await;
    let model = Arc::new(OpenAiResponses::new("gpt-4.1", mock.settings(0)).unwrap());
    let body = body_sent(
        &mock,
        "openai-responses:gpt-4.1",
        model,
        Arc::clone(&files.source),
        request(&[&files.image, &files.pdf]),
    )
    .await;
    assert_eq!(
        body["input"],
        json!([{"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Compare them."},
            {"type": "input_image", "image_url": format!("data:image/png;base64,{PNG_B64}")},
            {"type": "input_file", "filename": "report.pdf", "file_data": format!("data:application/pdf;base64,{PDF_B64}")},
        ]}])
    );
}

#[tokio::test]
async fn anthropic_gets_image_and_document_blocks_with_base64_sources() {
    let files = attached();
    let mock = MockProvider::start("", [refusing()]).await;
    let model = Arc::new(AnthropicMessages::new("claude-sonnet-4-5", mock.settings(0)).unwrap());
    let body = body_sent(
        &mock,
        "anthropic:claude-sonnet-4-5",
        model,
        Arc::clone(&files.source),
        request(&[&files.image, &files.pdf]),
    )
    .await;
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "Compare them."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64}},
        ]}])
    );
}

#[tokio::test]
async fn a_type_the_provider_cannot_take_is_a_clear_error_and_nothing_is_sent() {
    let archive = stored("data.zip", "application/zip");
    let source = Arc::new(Files(HashMap::from([(
        archive.id,
        FileBytes {
            media_type: "application/zip".into(),
            bytes: b"PK".as_slice().into(),
        },
    )])));
    let mock = MockProvider::start("/v1", [refusing()]).await;
    let model = WithFiles::wrap(
        "openai:gpt-4o",
        Arc::new(OpenAiChat::new("openai", "gpt-4o", mock.settings(0)).unwrap()),
        source,
    );
    let error = collect(model.as_ref(), request(&[&archive]))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::File(why) if why.contains("`data.zip` (application/zip)")),
        "{error}"
    );
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn an_image_too_large_for_anthropic_is_a_clear_error() {
    let big = stored("big.png", "image/png");
    let source = Arc::new(Files(HashMap::from([(
        big.id,
        FileBytes {
            media_type: "image/png".into(),
            bytes: vec![0u8; 5 * 1024 * 1024 + 1].into(),
        },
    )])));
    let mock = MockProvider::start("", [refusing()]).await;
    let model = WithFiles::wrap(
        "anthropic:claude-sonnet-4-5",
        Arc::new(AnthropicMessages::new("claude-sonnet-4-5", mock.settings(0)).unwrap()),
        source,
    );
    let error = collect(model.as_ref(), request(&[&big])).await.unwrap_err();
    assert!(
        matches!(&error, ModelError::File(why) if why.contains("at most 5 MiB")),
        "{error}"
    );
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn a_file_the_source_does_not_answer_is_a_clear_error() {
    let files = attached();
    let unknown = stored("other.png", "image/png");
    let mock = MockProvider::start("/v1", [refusing()]).await;
    let model = WithFiles::wrap(
        "openai:gpt-4o",
        Arc::new(OpenAiChat::new("openai", "gpt-4o", mock.settings(0)).unwrap()),
        files.source,
    );
    let error = collect(model.as_ref(), request(&[&unknown]))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::File(why) if why.contains(&unknown.id.to_string())),
        "{error}"
    );
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn the_stored_media_type_decides_not_the_claimed_one() {
    // A message claims an image; the store says it is an archive.
    let claimed = stored("photo.png", "image/png");
    let source = Arc::new(Files(HashMap::from([(
        claimed.id,
        FileBytes {
            media_type: "application/zip".into(),
            bytes: b"PK".as_slice().into(),
        },
    )])));
    let mock = MockProvider::start("/v1", [refusing()]).await;
    let model = WithFiles::wrap(
        "openai:gpt-4o",
        Arc::new(OpenAiChat::new("openai", "gpt-4o", mock.settings(0)).unwrap()),
        source,
    );
    let error = collect(model.as_ref(), request(&[&claimed]))
        .await
        .unwrap_err();
    assert!(matches!(error, ModelError::File(_)), "{error}");
    assert!(mock.requests().is_empty());
}

// The same in `memory://`: a file uploaded to the in-memory Client and attached to a message
// reaches the Bot's provider in its format, checked by the same rules as on a server.

mod in_memory {
    use super::*;
    use futures::StreamExt as _;
    use openbot_core::{ConnectOptions, Operations, connect};
    use openbot_schema::ErrorCode;
    use openbot_schema::{BotSpec, Limits, SendInput};

    /// An in-memory Client whose model `spec` is `model`, and a Chat of a Bot of that model.
    async fn chat_with(
        spec: &str,
        model: Arc<dyn Model>,
    ) -> (Arc<dyn openbot_core::Client>, openbot_schema::ChatId) {
        let options = ConnectOptions {
            models: HashMap::from([(spec.to_string(), model)]),
            ..ConnectOptions::default()
        };
        let client = connect("memory://", options).await.unwrap();
        let bot = client
            .create_bot(BotSpec {
                name: "Reader".into(),
                instructions: "Read the files.".into(),
                model: spec.into(),
                tools: vec![],
                limits: Limits::default(),
                shared: false,
                memory: false,
                reminders: false,
                code_mode: false,
            })
            .await
            .unwrap();
        let chat = client.create_chat(bot.id).await.unwrap();
        (client, chat.id)
    }

    /// A message with the text and the stored files, named as a caller would name them
    /// (a claimed media type and URL the check replaces with the stored ones).
    fn message(files: &[&openbot_schema::StoredFile]) -> SendInput {
        let mut content = vec![ContentPart::text("Compare them.")];
        content.extend(files.iter().map(|f| ContentPart::File {
            file: FileRef {
                id: f.id,
                media_type: "text/plain".into(),
                name: None,
                url: Some("https://attacker.example/x.png".into()),
            },
        }));
        SendInput {
            content,
            command_key: None,
        }
    }

    async fn run(
        client: &Arc<dyn openbot_core::Client>,
        chat: openbot_schema::ChatId,
        input: SendInput,
    ) {
        let receipt = client.send(chat, input).await.unwrap();
        client
            .observe(receipt.execution_id, 0)
            .await
            .unwrap()
            .count()
            .await;
    }

    #[tokio::test]
    async fn an_uploaded_file_reaches_openai_chat_as_image_and_file_parts() {
        let mock = MockProvider::start("/v1", [refusing()]).await;
        let model = Arc::new(OpenAiChat::new("openai", "gpt-4o", mock.settings(0)).unwrap());
        let (client, chat) = chat_with("openai:gpt-4o", model).await;
        let image = client
            .upload_file("chart.png", PNG.to_vec(), "image/png")
            .await
            .unwrap();
        let pdf = client
            .upload_file("report.pdf", PDF.to_vec(), "application/pdf")
            .await
            .unwrap();
        run(&client, chat, message(&[&image, &pdf])).await;
        let body = mock.only_request().body;
        assert_eq!(
            body["messages"][1],
            json!({"role": "user", "content": [
                {"type": "text", "text": "Compare them."},
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG_B64}")}},
                {"type": "file", "file": {"filename": "report.pdf", "file_data": format!("data:application/pdf;base64,{PDF_B64}")}},
            ]})
        );
        assert!(!body.to_string().contains("attacker.example"));
    }

    #[tokio::test]
    async fn an_uploaded_file_reaches_anthropic_as_image_and_document_blocks() {
        let mock = MockProvider::start("", [refusing()]).await;
        let model =
            Arc::new(AnthropicMessages::new("claude-sonnet-4-5", mock.settings(0)).unwrap());
        let (client, chat) = chat_with("anthropic:claude-sonnet-4-5", model).await;
        let image = client
            .upload_file("chart.png", PNG.to_vec(), "image/png")
            .await
            .unwrap();
        let pdf = client
            .upload_file("report.pdf", PDF.to_vec(), "application/pdf")
            .await
            .unwrap();
        run(&client, chat, message(&[&image, &pdf])).await;
        assert_eq!(
            mock.only_request().body["messages"],
            json!([{"role": "user", "content": [
                {"type": "text", "text": "Compare them."},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64}},
            ]}])
        );
    }

    #[tokio::test]
    async fn a_file_the_provider_cannot_take_is_refused_when_sent_and_nothing_is_sent() {
        let mock = MockProvider::start("", [refusing()]).await;
        let model =
            Arc::new(AnthropicMessages::new("claude-sonnet-4-5", mock.settings(0)).unwrap());
        let (client, chat) = chat_with("anthropic:claude-sonnet-4-5", model).await;
        let archive = client
            .upload_file("data.zip", b"PK".to_vec(), "application/zip")
            .await
            .unwrap();
        let refused = client.send(chat, message(&[&archive])).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::InvalidInput);
        assert!(
            refused.message.contains("`data.zip` (application/zip)"),
            "{}",
            refused.message
        );
        // Larger than Anthropic takes an image (5 MiB), though the store keeps it.
        let large = client
            .upload_file("large.png", vec![0; 6 * 1024 * 1024], "image/png")
            .await
            .unwrap();
        let refused = client.send(chat, message(&[&large])).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::InvalidInput);
        assert!(refused.message.contains("large.png"), "{}", refused.message);
        assert!(mock.requests().is_empty(), "nothing reached the provider");
    }

    #[tokio::test]
    async fn a_file_that_is_not_stored_is_not_found_when_sent() {
        let mock = MockProvider::start("/v1", [refusing()]).await;
        let model = Arc::new(OpenAiChat::new("openai", "gpt-4o", mock.settings(0)).unwrap());
        let (client, chat) = chat_with("openai:gpt-4o", model).await;
        let image = client
            .upload_file("chart.png", PNG.to_vec(), "image/png")
            .await
            .unwrap();
        client.delete_file(&image.id).await.unwrap();
        let refused = client.send(chat, message(&[&image])).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::NotFound);
        assert!(mock.requests().is_empty());
    }
}

#[tokio::test]
async fn a_tool_results_stored_file_is_sent_and_one_not_readable_is_a_text_saying_why() {
    let files = attached();
    let mock = MockProvider::start("/v1", [refusing()]).await;
    let model = Arc::new(AnthropicMessages::new("claude-sonnet-4-5", mock.settings(0)).unwrap());
    let call = openbot_core::schema::ToolCall {
        id: "toolu_1".into(),
        name: "render".into(),
        arguments: json!({}),
    };
    let missing = stored("gone.png", "image/png");
    let result = openbot_core::schema::ToolResult {
        output: vec![
            ContentPart::File {
                file: files.image.clone(),
            },
            ContentPart::File {
                file: missing.clone(),
            },
        ],
        ..openbot_core::schema::ToolResult::text(&call, "")
    };
    let request = ModelRequest {
        messages: vec![
            Arc::new(Message::user("Render it")),
            Arc::new(Message::Assistant {
                content: vec![],
                tool_calls: vec![call],
            }),
            Arc::new(Message::Tool { result }),
        ],
        ..ModelRequest::default()
    };
    let body = body_sent(
        &mock,
        "anthropic:claude-sonnet-4-5",
        model,
        Arc::clone(&files.source),
        request,
    )
    .await;
    assert_eq!(
        body["messages"][2]["content"][0]["content"],
        json!([
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
            {"type": "text", "text": format!(
                "[file: gone.png (image/png)] not sent: file {} is not stored, or not readable by this Turn's member",
                missing.id
            )},
        ])
    );
}
