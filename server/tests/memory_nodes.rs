//! Learning across a real crash (issue 17, point 2): the `openbot serve` node that owns a
//! `memory_learning` execution is killed with SIGKILL while its helper model call is in flight
//! (sent, its answer not yet come: the helper is a slow local fake speaking OpenAI's wire
//! format), and a second node on the same PostgreSQL takes the learning over. The lost model
//! result is asked for again (a model call changes nothing outside, so a lost answer is safe
//! to ask again, and the killed call is never charged), the plan is applied once, no memory is
//! duplicated and the Chat's learning cursor only moves forward.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/nodes.rs"]
mod nodes;
#[path = "support/pg.rs"]
mod pg;
#[macro_use]
#[path = "support/api.rs"]
mod api;
#[path = "support/front.rs"]
mod front;

use std::time::Duration;

use api::{Server, outcome_of, receipt};
use fake_openai::{Answer, FakeOpenAi};
use front::Front;
use openbot_schema::{ExecutionId, TurnOutcome};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

/// The learning execution a Turn started, once there is one, with its state.
async fn learning_of(server: &Server, turn: &str) -> Option<(Uuid, String)> {
    let api::Raw::Postgres(store) = &server.raw else {
        panic!("the node tests run on PostgreSQL");
    };
    let turn: Uuid = turn.parse().unwrap();
    sqlx::query_as(
        "SELECT id, state FROM executions WHERE parent_id = $1 AND kind = 'memory_learning'",
    )
    .bind(turn)
    .fetch_optional(store.pool())
    .await
    .unwrap()
}

/// Waits until the learning of `turn` ended; its ID and end state.
async fn learning_ended(server: &Server, turn: &str) -> (Uuid, String) {
    for _ in 0..600 {
        if let Some((id, state)) = learning_of(server, turn).await
            && ["completed", "failed", "cancelled", "interrupted"].contains(&state.as_str())
        {
            return (id, state);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the learning of {turn} did not end");
}

async fn memory_contents(server: &Server, bot: &Value) -> Vec<String> {
    server
        .walk(
            &server.owner,
            &format!("/v1/bots/{}/memories", bot["id"].as_str().unwrap()),
            50,
        )
        .await
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learning_whose_owner_is_killed_mid_helper_call_is_taken_over_and_applied_once() {
    let front = Front::new().await;
    let server = &front.server;
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Hello, Ada."])]).await;
    let plan: &'static str = Box::leak(
        json!({"add": [{"content": "The user's name is Ada.", "tags": ["profile"]}]})
            .to_string()
            .into_boxed_str(),
    );
    let helper = FakeOpenAi::start(vec![Answer::Text(vec![plan])]).await;
    // The first helper request is answered only long after its node is gone.
    helper.delay_first(0, Duration::from_secs(600));
    let response = server
        .http
        .put(format!("{}/v1/memory-settings", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"helper_model": helper.spec()}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let response = server
        .post("/v1/bots", &server.owner)
        .json(&json!({"name": "Rememberer", "instructions": "Be brief.",
                      "model": model.spec(), "memory": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let bot: Value = response.json().await.unwrap();
    let chat = server.chat(&server.owner, &bot).await;
    let chat_id: Uuid = chat.parse().unwrap();

    let mut owner = front.node("learning-killed", 1000);
    let sent = receipt(
        server
            .send(&server.owner, &chat, "Hi, I am Ada.", None)
            .await,
    )
    .await;
    let turn = sent["execution_id"].as_str().unwrap().to_string();
    let events = server.finish(&server.owner, &turn).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    for _ in 0..600 {
        if helper.requests_at(0) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(helper.requests_at(0), 1, "the helper call was sent");
    owner.kill();
    let (learning, state) = learning_of(server, &turn).await.unwrap();
    assert!(
        !["completed", "failed"].contains(&state.as_str()),
        "killed mid-call: {state}"
    );
    assert!(memory_contents(server, &bot).await.is_empty());
    assert_eq!(server.database.memories.cursor(chat_id).await.unwrap(), 0);

    let _taker = front.node("learning-taker", 1000);
    let (ended, state) = learning_ended(server, &turn).await;
    assert_eq!((ended, state.as_str()), (learning, "completed"));
    assert_eq!(
        helper.requests_at(0),
        2,
        "the lost answer was asked for again, once"
    );
    assert_eq!(
        memory_contents(server, &bot).await,
        ["The user's name is Ada."],
        "the plan is applied once"
    );
    assert_eq!(server.database.memories.cursor(chat_id).await.unwrap(), 2);
    // The killed call got no answer, so it is not charged; its hold is given back.
    let learning_id: ExecutionId = learning.into();
    let killed = server
        .database
        .billing
        .usage_record(learning_id, "1/model/1")
        .await
        .unwrap()
        .map(|r| r.state);
    assert_eq!(killed.as_deref(), Some("released"));
    let credits = server
        .database
        .billing
        .credits(front.organization().await)
        .await
        .unwrap();
    assert_eq!(credits.held_micros, 0, "nothing is held after the learning");

    // The next Turn's learning starts at the cursor the taker moved: only new messages, and
    // the cursor moves on from there.
    let sent = receipt(server.send(&server.owner, &chat, "Thanks.", None).await).await;
    let second = sent["execution_id"].as_str().unwrap().to_string();
    server.finish(&server.owner, &second).await;
    assert_eq!(learning_ended(server, &second).await.1, "completed");
    assert_eq!(server.database.memories.cursor(chat_id).await.unwrap(), 4);
    let last = helper.bodies().last().unwrap().clone();
    assert!(last.contains("Thanks.") && !last.contains("Hi, I am Ada."));
}
