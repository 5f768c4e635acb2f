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
    // No helper model until one is set; embeddings are a server's.
    assert_eq!(
        client.get_memory_settings().await.unwrap(),
        openbot_schema::MemorySettings::default()
    );
    let err = client
        .put_memory_settings(&openbot_schema::MemorySettings {
            embeddings_model: Some("compatible:http://127.0.0.1:1/v1:e5".into()),
            helper_model: None,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidInput);
    let err = client
        .put_memory_settings(&openbot_schema::MemorySettings {
            embeddings_model: None,
            helper_model: Some("no-such-provider:x".into()),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidInput);
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

/// Waits until `bot` has `n` memories (learning runs after the Turn's end, in the background).
async fn memories_after_learning(
    client: &Arc<dyn Client>,
    bot: openbot_schema::BotId,
    n: usize,
) -> Vec<openbot_schema::Memory> {
    for _ in 0..200 {
        let memories = client.list_memories_all(&bot, None, None).await.unwrap();
        if memories.len() >= n {
            return memories;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("learning wrote fewer than {n} memories");
}

#[tokio::test]
async fn with_a_helper_model_a_turn_in_memory_learns_and_the_next_learning_reads_only_new_messages()
{
    let model = scripted(json!([
        {"text": "Nice to meet you, Ada."},
        {"text": "Tea it is."},
        {"text": "Goodbye."}
    ]));
    let plan = json!({"add": [{"content": "The user's name is Ada.", "tags": ["profile"]}]});
    let helper = Recording::new(scripted(json!([
        {"text": plan.to_string()},
        {"text": "not a plan"},
        {"text": "{\"add\": []}"}
    ])));
    let options = ConnectOptions {
        models: HashMap::from([
            ("test".to_string(), model as Arc<dyn Model>),
            ("helper".to_string(), helper.clone() as Arc<dyn Model>),
        ]),
        ..ConnectOptions::default()
    };
    let client = connect("memory://", options).await.unwrap();
    let settings = client
        .put_memory_settings(&openbot_schema::MemorySettings {
            embeddings_model: None,
            helper_model: Some("helper".into()),
        })
        .await
        .unwrap();
    assert_eq!(settings.helper_model.as_deref(), Some("helper"));
    let bot = client.create_bot(memory_bot()).await.unwrap();
    let chat = client.create_chat(bot.id).await.unwrap().id;
    let first = client
        .send(chat, SendInput::text("Hi, I am Ada."))
        .await
        .unwrap();
    finish(&client, first.execution_id).await;
    let memories = memories_after_learning(&client, bot.id, 1).await;
    assert_eq!(memories[0].content, "The user's name is Ada.");
    assert_eq!(memories[0].tags, ["profile"]);
    assert_eq!(memories[0].evidence.chat_id, Some(chat));
    assert_eq!(memories[0].evidence.execution_id, Some(first.execution_id));
    assert_eq!(memories[0].evidence.message, Some(1));
    let asked = &helper.requests()[0];
    assert!(asked.instructions.contains("long-term memory"));

    // The helper's next answer is not a plan: nothing changes and the cursor stays, so the
    // learning after that reads those messages again, with the new ones.
    let second = client
        .send(chat, SendInput::text("I like tea."))
        .await
        .unwrap();
    finish(&client, second.execution_id).await;
    let third = client.send(chat, SendInput::text("Bye.")).await.unwrap();
    finish(&client, third.execution_id).await;
    for _ in 0..200 {
        if helper.requests().len() == 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let requests = helper.requests();
    assert_eq!(requests.len(), 3, "one helper call per completed Turn");
    let text = |r: &openbot_core::model::ModelRequest| format!("{:?}", r.messages);
    assert!(
        !text(&requests[1]).contains("Hi, I am Ada."),
        "from the cursor on"
    );
    assert!(text(&requests[2]).contains("I like tea.") && text(&requests[2]).contains("Bye."));
    assert!(
        text(&requests[2]).contains("The user's name is Ada."),
        "shown with its ID"
    );
    assert_eq!(
        client
            .list_memories_all(&bot.id, None, None)
            .await
            .unwrap()
            .len(),
        1
    );
}
