//! `memory://` with Apps: the server's App operations in this process, MCP servers as tool
//! sources of a Bot, without a server (real servers from `scripts/mcp-install`).

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/mcp_servers.rs"]
mod mcp_servers;
#[path = "support/scripts.rs"]
mod support;

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use mcp_servers::*;
use openbot_core::{Client, ConnectOptions, Operations, connect};
use openbot_schema::{
    AppAuthKind, BotSpec, ContentPart, ErrorCode, Event, EventKind, Limits, Message, NewApp,
    NewAppConnection, SendInput, ToolDefinition,
};
use serde_json::json;
use support::scripted;

async fn client(script: serde_json::Value) -> Arc<dyn Client> {
    let options = ConnectOptions {
        models: HashMap::from([("test".to_string(), scripted(script) as _)]),
        ..ConnectOptions::default()
    };
    connect("memory://", options).await.unwrap()
}

fn none() -> NewAppConnection {
    NewAppConnection {
        auth: AppAuthKind::None,
        headers: Default::default(),
    }
}

#[tokio::test]
async fn a_bot_calls_a_discovered_app_tool_in_memory() {
    let client = client(json!([
        {"tool_calls": [{"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}]},
        {"text": "done"}
    ]))
    .await;
    let app = client
        .register_app(&NewApp {
            name: "time".into(),
            transport: time_stdio(),
        })
        .await
        .unwrap();
    let connection = client.open_app_connection(&app.id, &none()).await.unwrap();
    let found = client
        .discover_app_tools(&app.id, &connection.id)
        .await
        .unwrap();
    assert!(found.tools.iter().any(|t| t.name == "get_current_time"));
    assert_eq!(client.list_apps_all().await.unwrap().len(), 1);
    let shown = client
        .get_app_connection(&app.id, &connection.id)
        .await
        .unwrap();
    assert_eq!(
        shown.tool_count.map(|n| n as usize),
        Some(found.tools.len())
    );
    let bot = client
        .create_bot(BotSpec {
            name: "Clock".into(),
            instructions: String::new(),
            model: "test".into(),
            tools: vec![ToolDefinition {
                name: "time__get_current_time".into(),
                description: String::new(),
                input_schema: json!({"type": "object"}),
            }],
            limits: Limits::default(),
            shared: false,
            memory: false,
            reminders: false,
            code_mode: false,
        })
        .await
        .unwrap();
    let chat = client.create_chat(bot.id).await.unwrap();
    let receipt = client
        .send(chat.id, SendInput::text("time?"))
        .await
        .unwrap();
    let events: Vec<Event> = client
        .observe(receipt.execution_id, 0)
        .await
        .unwrap()
        .map(|e| e.unwrap())
        .collect()
        .await;
    let result = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } => Some(result.clone()),
            _ => None,
        })
        .unwrap();
    assert!(!result.is_error, "{result:?}");
    assert!(result.output[0].as_text().unwrap().contains("UTC"));
}

#[tokio::test]
async fn app_operations_refuse_bad_input_in_memory() {
    let client = client(json!([{"text": "x"}])).await;
    let bad = client
        .register_app(&NewApp {
            name: "Bad Name".into(),
            transport: time_stdio(),
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code, ErrorCode::InvalidInput);
    let app = client
        .register_app(&NewApp {
            name: "time".into(),
            transport: time_stdio(),
        })
        .await
        .unwrap();
    let twice = client
        .register_app(&NewApp {
            name: "time".into(),
            transport: time_stdio(),
        })
        .await
        .unwrap_err();
    assert_eq!(twice.code, ErrorCode::Conflict);
    let oauth = client
        .open_app_connection(
            &app.id,
            &NewAppConnection {
                auth: AppAuthKind::Oauth,
                headers: Default::default(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(oauth.code, ErrorCode::InvalidInput);
    let missing = client.get_app(&uuid::Uuid::now_v7()).await.unwrap_err();
    assert_eq!(missing.code, ErrorCode::NotFound);
    // A server that does not start is unavailable on discovery.
    let broken = client
        .register_app(&NewApp {
            name: "broken".into(),
            transport: openbot_schema::AppTransport::Stdio {
                command: "/nonexistent/mcp-server".into(),
                args: Vec::new(),
            },
        })
        .await
        .unwrap();
    let connection = client
        .open_app_connection(&broken.id, &none())
        .await
        .unwrap();
    let failed = client
        .discover_app_tools(&broken.id, &connection.id)
        .await
        .unwrap_err();
    assert_eq!(failed.code, ErrorCode::Unavailable);
}

#[tokio::test]
async fn an_app_tools_image_reaches_the_model_as_an_image_part() {
    let model = support::Recording::new(scripted(json!([
        {"tool_calls": [{"name": "everything__get-tiny-image", "arguments": {}}]},
        {"text": "the MCP logo"}
    ])));
    let options = ConnectOptions {
        models: HashMap::from([("test".to_string(), model.clone() as _)]),
        ..ConnectOptions::default()
    };
    let client = connect("memory://", options).await.unwrap();
    let app = client
        .register_app(&NewApp {
            name: "everything".into(),
            transport: everything_stdio(),
        })
        .await
        .unwrap();
    let connection = client.open_app_connection(&app.id, &none()).await.unwrap();
    client
        .discover_app_tools(&app.id, &connection.id)
        .await
        .unwrap();
    let bot = client
        .create_bot(BotSpec {
            name: "Viewer".into(),
            instructions: String::new(),
            model: "test".into(),
            tools: vec![ToolDefinition {
                name: "everything__get-tiny-image".into(),
                description: String::new(),
                input_schema: json!({"type": "object"}),
            }],
            limits: Limits::default(),
            shared: false,
            memory: false,
            reminders: false,
            code_mode: false,
        })
        .await
        .unwrap();
    let chat = client.create_chat(bot.id).await.unwrap();
    let receipt = client
        .send(chat.id, SendInput::text("show me"))
        .await
        .unwrap();
    let _: Vec<Event> = client
        .observe(receipt.execution_id, 0)
        .await
        .unwrap()
        .map(|e| e.unwrap())
        .collect()
        .await;
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let result = requests[1]
        .messages
        .iter()
        .find_map(|m| match m.as_ref() {
            Message::Tool { result } => Some(result.clone()),
            _ => None,
        })
        .unwrap();
    assert!(!result.is_error, "{result:?}");
    assert_eq!(
        result.output[0].as_text(),
        Some("Here's the image you requested:")
    );
    let ContentPart::Media {
        media_type, data, ..
    } = &result.output[1]
    else {
        panic!("the image is not a media part: {:?}", result.output[1]);
    };
    assert_eq!(media_type, "image/png");
    // The PNG signature, base64: the bytes themselves, not a JSON text of them.
    assert!(data.starts_with("iVBORw0KGgo"), "{data:.40}");
    assert_eq!(
        result.output[2].as_text(),
        Some("The image above is the MCP logo.")
    );
}
