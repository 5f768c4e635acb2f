//! Memory in `memory://` (in process, not durable): the same memory operations as a server
//! through the generated methods, recall into the model request and the memory tools.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/scripts.rs"]
mod support;

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use openbot_core::model::Model;
use openbot_core::{Client, ConnectOptions, Operations, connect};
use openbot_schema::{
    BotSpec, CreateMemory, ErrorCode, ExecutionId, Limits, MemorySearch, MemoryStatus,
    MemoryUpdate, SendInput,
};
use serde_json::json;
use support::{Recording, scripted};

async fn client_with(model: Arc<dyn Model>) -> Arc<dyn Client> {
    let options = ConnectOptions {
        models: HashMap::from([("test".to_string(), model)]),
        ..ConnectOptions::default()
    };
    connect("memory://", options).await.unwrap()
}

fn memory_bot() -> BotSpec {
    BotSpec {
        name: "Rememberer".into(),
        instructions: "Be brief.".into(),
        model: "test".into(),
        tools: Vec::new(),
        limits: Limits::default(),
        shared: false,
        memory: true,
        reminders: false,
        code_mode: false,
    }
}

async fn finish(client: &Arc<dyn Client>, id: ExecutionId) {
    client.observe(id, 0).await.unwrap().count().await;
}

#[tokio::test]
async fn memories_are_listed_searched_edited_and_deleted_in_memory() {
    let client = client_with(scripted(json!([]))).await;
    let bot = client.create_bot(memory_bot()).await.unwrap();
    let dog = client
        .create_memory(
            &bot.id,
            &CreateMemory {
                content: "The user's dog is called Rex.".into(),
                tags: vec!["pets".into()],
                private: true,
            },
        )
        .await
        .unwrap();
    client
        .create_memory(
            &bot.id,
            &CreateMemory {
                content: "The user plays the cello.".into(),
                tags: Vec::new(),
                private: true,
            },
        )
        .await
        .unwrap();
    let all = client.list_memories_all(&bot.id, None, None).await.unwrap();
    assert_eq!(all.len(), 2);
    let pets = client
        .list_memories(&bot.id, Some("pets"), None, None, None)
        .await
        .unwrap();
    assert_eq!(pets.items, vec![dog.clone()]);
    let found = client
        .search_memories(
            &bot.id,
            &MemorySearch {
                query: "what is the dog called".into(),
                tags: Vec::new(),
                limit: None,
                max_tokens: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(found.items[0].memory.id, dog.id);
    assert!(!found.embeddings);
    let retired = client
        .update_memory(
            &bot.id,
            &dog.id,
            &MemoryUpdate {
                status: Some(MemoryStatus::Retired),
                ..MemoryUpdate::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(retired.status, MemoryStatus::Retired);
    assert_eq!(retired.content, dog.content);
    client.delete_memory(&bot.id, &dog.id).await.unwrap();
    let err = client.get_memory(&bot.id, &dog.id).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    // Bad input is refused as on a server.
    let err = client
        .create_memory(
            &bot.id,
            &CreateMemory {
                content: String::new(),
                tags: Vec::new(),
                private: true,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidInput);
    let err = client
        .list_memories(&openbot_schema::BotId::new(), None, None, None, None)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    // The memory settings are a server's.
    assert_eq!(
        client.get_memory_settings().await.unwrap_err().code,
        ErrorCode::InvalidInput
    );
}

#[tokio::test]
async fn a_memory_bot_in_memory_remembers_with_a_tool_and_recalls_into_the_next_request() {
    let model = Recording::new(scripted(json!([
        {"tool_calls": [{"name": "remember", "arguments": {"content": "The user's name is Ada."}}]},
        {"text": "Noted."},
        {"text": "You are Ada."}
    ])));
    let client = client_with(model.clone()).await;
    let bot = client.create_bot(memory_bot()).await.unwrap();
    let chat = client.create_chat(bot.id).await.unwrap().id;
    let first = client
        .send(chat, SendInput::text("I am Ada."))
        .await
        .unwrap();
    finish(&client, first.execution_id).await;
    let memories = client.list_memories_all(&bot.id, None, None).await.unwrap();
    assert_eq!(memories.len(), 1);
    assert_eq!(memories[0].content, "The user's name is Ada.");
    assert_eq!(memories[0].evidence.execution_id, Some(first.execution_id));
    let tools: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(tools, ["remember", "recall", "forget"]);

    let other = client.create_chat(bot.id).await.unwrap().id;
    let second = client
        .send(other, SendInput::text("What is my name?"))
        .await
        .unwrap();
    finish(&client, second.execution_id).await;
    let request = model.requests().last().unwrap().clone();
    assert!(request.instructions.starts_with("Be brief."));
    assert!(
        request.instructions.contains("The user's name is Ada."),
        "{}",
        request.instructions
    );
}
