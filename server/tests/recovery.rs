//! Storage faults inside a Turn, on SQLite and on a real PostgreSQL: a known result is held
//! while its save retries, and work that cannot be rebuilt ends `interrupted` with a reason
//! without stopping other work.

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

use std::time::Duration;

use fake_openai::{Answer, FakeOpenAi};
use openbot_schema::{ErrorCategory, EventKind, Execution, ExecutionState, TurnOutcome};
use reqwest::StatusCode;
use serde_json::{Value, json};

use api::{Raw, Server, outcome_of, postgres, receipt, server, server_with, sqlite, test_platform};
use openbot_server::engine::RunnerConfig;

http_tests!(
    a_known_tool_result_is_held_while_its_save_retries,
    a_known_model_result_is_held_while_its_save_retries,
    a_damaged_record_interrupts_its_turn_and_stops_no_other_chat,
);

mod budget_spent {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_sqlite() {
        super::storage_that_keeps_failing_interrupts_the_turn_with_its_reason(super::sqlite().await)
            .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_postgres() {
        super::storage_that_keeps_failing_interrupts_the_turn_with_its_reason(
            super::postgres().await,
        )
        .await
    }
}

/// Makes every save of a result in `slot_pattern` (a SQL LIKE pattern: `tool:%`, `model`) fail
/// while `fail` holds, like a database that refuses writes for a while.
async fn result_saves_failing(server: &Server, slot_pattern: &str, fail: bool) {
    match &server.raw {
        Raw::Sqlite(store, _) => {
            let queries = if fail {
                ["INSERT", "UPDATE"]
                    .iter()
                    .map(|op| {
                        format!(
                            "CREATE TRIGGER fail_result_{op} BEFORE {op} ON calls \
                             WHEN NEW.status = 'done' AND NEW.slot LIKE '{slot_pattern}' \
                             BEGIN SELECT RAISE(ABORT, 'the database refuses writes'); END"
                        )
                    })
                    .collect::<Vec<_>>()
            } else {
                vec![
                    "DROP TRIGGER fail_result_INSERT".into(),
                    "DROP TRIGGER fail_result_UPDATE".into(),
                ]
            };
            for query in queries {
                sqlx::query(sqlx::AssertSqlSafe(query))
                    .execute(store.pool())
                    .await
                    .unwrap();
            }
        }
        Raw::Postgres(store) => {
            let queries = if fail {
                vec![
                    format!(
                        "CREATE FUNCTION fail_result() RETURNS trigger AS $$ BEGIN \
                         IF NEW.status = 'done' AND NEW.slot LIKE '{slot_pattern}' THEN \
                         RAISE EXCEPTION 'the database refuses writes'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
                    ),
                    "CREATE TRIGGER fail_result BEFORE INSERT OR UPDATE ON calls FOR EACH ROW EXECUTE FUNCTION fail_result()".into(),
                ]
            } else {
                vec![
                    "DROP TRIGGER fail_result ON calls".into(),
                    "DROP FUNCTION fail_result()".into(),
                ]
            };
            for query in queries {
                sqlx::query(sqlx::AssertSqlSafe(query))
                    .execute(store.pool())
                    .await
                    .unwrap();
            }
        }
    }
}

async fn a_known_tool_result_is_held_while_its_save_retries(server: Server) {
    let outside = outside::Outside::start(false).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "hi"})),
        Answer::Text(vec!["written"]),
    ])
    .await;
    let bot = register_and_bot(&server, &model, &outside).await;
    let chat = server.chat(&server.owner, &bot).await;
    result_saves_failing(&server, "tool:%", true).await;
    let sent = receipt(server.send(&server.owner, &chat, "Write", None).await).await;
    outside.wait_for_write().await;
    // A few failed saves (100 ms, 200 ms, 400 ms...), then the database takes writes again.
    tokio::time::sleep(Duration::from_millis(800)).await;
    result_saves_failing(&server, "tool:%", false).await;
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(
        outcome_of(&events),
        Some(TurnOutcome::Completed),
        "the held result was saved: no outcome_unknown"
    );
    assert_eq!(outside.received(), 1, "the unsafe write was sent once");
    assert_eq!(model.requests_at(0), 1);
}

async fn a_known_model_result_is_held_while_its_save_retries(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hello"])]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    result_saves_failing(&server, "model", true).await;
    let sent = receipt(server.send(&server.owner, &chat, "Hi", None).await).await;
    for _ in 0..200 {
        if model.total_requests() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    result_saves_failing(&server, "model", false).await;
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(
        model.total_requests(),
        1,
        "the provider is not called again for a known result"
    );
}

async fn register_and_bot(
    server: &Server,
    model: &FakeOpenAi,
    outside: &outside::Outside,
) -> Value {
    let response = server
        .http
        .put(format!("{}/v1/tools/write", server.base))
        .bearer_auth(&server.owner)
        .json(
            &json!({"description": "Writes.", "input_schema": {"type": "object"},
            "url": outside.url}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let spec = json!({"name": "Writer", "model": model.spec(),
        "tools": [{"name": "write", "input_schema": {}}]});
    server
        .post("/v1/bots", &server.owner)
        .json(&spec)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Makes every sealed record saved while `on` holds unreadable, like damage on disk.
async fn sealed_records_damaged(server: &Server, on: bool) {
    let queries: Vec<&str> = match (&server.raw, on) {
        (Raw::Sqlite(..), true) => vec![
            "CREATE TRIGGER damage AFTER INSERT ON sealed_records BEGIN \
             UPDATE sealed_records SET ciphertext = X'00' WHERE id = NEW.id; END",
        ],
        (Raw::Sqlite(..), false) => vec!["DROP TRIGGER damage"],
        (Raw::Postgres(_), true) => vec![
            "CREATE FUNCTION damage() RETURNS trigger AS $$ BEGIN NEW.ciphertext := '\\x00'::bytea; RETURN NEW; END $$ LANGUAGE plpgsql",
            "CREATE TRIGGER damage BEFORE INSERT ON sealed_records FOR EACH ROW EXECUTE FUNCTION damage()",
        ],
        (Raw::Postgres(_), false) => vec![
            "DROP TRIGGER damage ON sealed_records",
            "DROP FUNCTION damage()",
        ],
    };
    for query in queries {
        match &server.raw {
            Raw::Sqlite(store, _) => {
                sqlx::query(query).execute(store.pool()).await.unwrap();
            }
            Raw::Postgres(store) => {
                sqlx::query(query).execute(store.pool()).await.unwrap();
            }
        }
    }
}

async fn a_damaged_record_interrupts_its_turn_and_stops_no_other_chat(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hello"])]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let damaged_chat = server.chat(&server.owner, &bot).await;
    let other_chat = server.chat(&server.owner, &bot).await;
    // A Turn that starts from its send runs on the input its send held; the damage shows on a
    // Turn that is read back from the database: one queued behind the Chat's running Turn.
    model.delay_first(0, Duration::from_millis(1500));
    let first = receipt(
        server
            .send(&server.owner, &damaged_chat, "First", None)
            .await,
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while model.in_flight() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the first Turn asks its model"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    sealed_records_damaged(&server, true).await;
    let damaged = receipt(server.send(&server.owner, &damaged_chat, "Hi", None).await).await;
    sealed_records_damaged(&server, false).await;
    assert_eq!(damaged["disposition"], "queued", "{damaged}");
    let first_events = server
        .finish(&server.owner, first["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(outcome_of(&first_events), Some(TurnOutcome::Completed));
    let damaged = damaged["execution_id"].as_str().unwrap().to_string();
    let events = server.finish(&server.owner, &damaged).await;
    let failed = events.iter().find_map(|e| match &e.kind {
        EventKind::Failed { category, .. } => Some(*category),
        _ => None,
    });
    assert_eq!(failed, Some(ErrorCategory::Storage), "{events:?}");
    let view: Execution = server
        .get(&format!("/v1/executions/{damaged}"), &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(view.state, ExecutionState::Interrupted);
    assert!(
        view.reason
            .as_deref()
            .is_some_and(|r| r.contains("can no longer be read")),
        "a readable reason: {view:?}"
    );
    // Another Chat, and the damaged Chat's next input, go on.
    for chat in [&other_chat, &damaged_chat] {
        let sent = receipt(server.send(&server.owner, chat, "Hi again", None).await).await;
        let events = server
            .finish(&server.owner, sent["execution_id"].as_str().unwrap())
            .await;
        assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    }
}

/// Makes every save of a tool call as `sending` fail, for good (the other writes go through).
async fn tool_sends_failing(server: &Server) {
    let queries: Vec<&str> = match &server.raw {
        Raw::Sqlite(..) => vec![
            "CREATE TRIGGER fail_send_i BEFORE INSERT ON calls WHEN NEW.status = 'sending' AND NEW.slot LIKE 'tool:%' \
             BEGIN SELECT RAISE(ABORT, 'the database refuses writes'); END",
            "CREATE TRIGGER fail_send_u BEFORE UPDATE ON calls WHEN NEW.status = 'sending' AND NEW.slot LIKE 'tool:%' \
             BEGIN SELECT RAISE(ABORT, 'the database refuses writes'); END",
        ],
        Raw::Postgres(_) => vec![
            "CREATE FUNCTION fail_send() RETURNS trigger AS $$ BEGIN \
             IF NEW.status = 'sending' AND NEW.slot LIKE 'tool:%' THEN RAISE EXCEPTION 'the database refuses writes'; END IF; \
             RETURN NEW; END $$ LANGUAGE plpgsql",
            "CREATE TRIGGER fail_send BEFORE INSERT OR UPDATE ON calls FOR EACH ROW EXECUTE FUNCTION fail_send()",
        ],
    };
    for query in queries {
        match &server.raw {
            Raw::Sqlite(store, _) => {
                sqlx::query(query).execute(store.pool()).await.unwrap();
            }
            Raw::Postgres(store) => {
                sqlx::query(query).execute(store.pool()).await.unwrap();
            }
        }
    }
}

async fn storage_that_keeps_failing_interrupts_the_turn_with_its_reason(raw: Raw) {
    // A small budget, so that the test does not wait for 30 retries.
    let runner = RunnerConfig {
        lease: Duration::from_secs(5),
        capacity: 16,
        storage_retry_budget: 3,
    };
    let server = server_with(raw, test_platform(), runner).await;
    let outside = outside::Outside::start(false).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "hi"})),
        Answer::Text(vec!["written"]),
    ])
    .await;
    let bot = register_and_bot(&server, &model, &outside).await;
    let chat = server.chat(&server.owner, &bot).await;
    tool_sends_failing(&server).await;
    let sent = receipt(server.send(&server.owner, &chat, "Write", None).await).await;
    let execution = sent["execution_id"].as_str().unwrap().to_string();
    let events = server.finish(&server.owner, &execution).await;
    let failed = events.iter().find_map(|e| match &e.kind {
        EventKind::Failed { category, .. } => Some(*category),
        _ => None,
    });
    assert_eq!(failed, Some(ErrorCategory::Storage), "{events:?}");
    let view: Execution = server
        .get(&format!("/v1/executions/{execution}"), &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(view.state, ExecutionState::Interrupted);
    assert!(
        view.reason
            .as_deref()
            .is_some_and(|r| r.contains("storage kept failing")),
        "{view:?}"
    );
    assert_eq!(
        outside.received(),
        0,
        "a call never marked sending is never sent"
    );
}
