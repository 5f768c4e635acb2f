//! Triggers and reminders end to end over the HTTP API, on SQLite and on a real PostgreSQL:
//! schedules fired by moving the node's clock (never by waiting for it), signed webhooks
//! (signatures made with `openssl`, stale timestamps, repeated delivery IDs), the creator's
//! rights checked at each firing, one catch-up firing after downtime, and reminders set by
//! the model's `remind` call: delivered, cancelled, cancelled with their Chat, and kept
//! across a restart of the node's engine.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/pg.rs"]
mod pg;
#[macro_use]
#[path = "support/api.rs"]
mod api;

use std::sync::Arc;
use std::time::Duration;

use api::{Server, deliver_webhook, error_code, postgres, server, sqlite, test_keys};
use fake_openai::{Answer, FakeOpenAi};
use openbot_server::engine::{Clock, Engine, RunnerConfig};
use openbot_server::node::registry;
use reqwest::StatusCode;
use serde_json::{Value, json};

http_tests!(
    a_schedule_fires_when_the_clock_reaches_its_slot,
    a_server_that_was_down_fires_a_missed_schedule_once,
    a_firing_is_refused_and_the_trigger_paused_once_the_creator_token_is_revoked,
    a_paused_schedule_does_not_fire_and_a_resumed_one_fires_at_its_next_slot,
    a_deleted_schedule_ends_its_timer,
    a_schedule_and_its_timer_are_stored_together_or_not_at_all,
    bad_triggers_are_refused,
    triggers_are_listed_in_pages_and_only_to_their_creator,
    a_token_limited_to_one_bot_reaches_only_that_bots_triggers,
    a_signed_webhook_delivery_reaches_the_chat_once,
    a_webhook_refuses_bad_signatures_stale_timestamps_and_missing_headers,
    concurrent_deliveries_of_one_id_send_one_input,
    a_webhook_on_a_deleted_chat_is_refused_and_paused,
    a_reminder_reaches_the_chat_at_its_time,
    a_cancelled_reminder_never_reaches_the_chat,
    a_reminder_is_refused_once_the_token_that_set_it_is_revoked,
    deleting_a_chat_cancels_its_reminders,
    a_reminder_survives_a_restart_of_the_node,
    the_remind_tool_is_offered_only_with_the_bot_setting,
    bad_remind_calls_come_back_to_the_model_as_errors,
    a_reminder_asked_for_in_a_browser_session_comes_back_to_the_model_as_refused,
);

/// A Bot (reminders on or off) and one of its Chats, for the owner.
async fn chat_with(s: &Server, model: &FakeOpenAi, reminders: bool) -> String {
    let response = s
        .post("/v1/bots", &s.owner)
        .json(&json!({"name": "Helper", "model": model.spec(), "reminders": reminders}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let bot: Value = response.json().await.unwrap();
    s.chat(&s.owner, &bot).await
}

async fn create(s: &Server, token: &str, body: Value) -> Value {
    let response = s
        .post("/v1/triggers", token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED, "{body}");
    response.json().await.unwrap()
}

async fn hourly(s: &Server, token: &str, chat: &str) -> Value {
    create(
        s,
        token,
        json!({"chat_id": chat, "kind": "schedule", "cron": "0 * * * *", "time_zone": "Europe/Berlin", "text": "hourly check"}),
    )
    .await["trigger"]
        .clone()
}

async fn trigger(s: &Server, id: &str) -> Value {
    s.get(&format!("/v1/triggers/{id}"), &s.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn firings(s: &Server, id: &str) -> Vec<Value> {
    s.walk(&s.owner, &format!("/v1/triggers/{id}/firings"), 50)
        .await
}

/// Milliseconds from the clock's now to an RFC 3339 time.
fn until(s: &Server, at: &Value) -> Duration {
    let at = chrono::DateTime::parse_from_rfc3339(at.as_str().unwrap())
        .unwrap()
        .timestamp_millis();
    Duration::from_millis((at - s.clock.now_ms()).max(0) as u64)
}

/// Waits (a bounded poll, not a timing) until `check` holds.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..400 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("never: {what}");
}

/// Waits until a timer execution waits again (no owner), so nothing more is on its way.
async fn timer_waits(s: &Server, execution: &str) {
    let id = execution.parse().unwrap();
    eventually("the timer waits again", || async {
        let row = s.database.store.execution(id).await.unwrap();
        row.state == openbot_schema::ExecutionState::Waiting && row.owner_node.is_none()
    })
    .await;
}

/// Lets the runner claim whatever the clock made due, then checks that nothing runs.
async fn timer_waits_none(s: &Server) {
    eventually("no work runs", || async { s.engine.running().await == 0 }).await;
}

async fn timer_of(s: &Server, trigger_id: &str) -> String {
    let row = s
        .database
        .triggers
        .trigger(trigger_id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    row.execution_id.unwrap().to_string()
}

async fn a_schedule_fires_when_the_clock_reaches_its_slot(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Checked."])]).await;
    let chat = chat_with(&s, &model, false).await;
    let made = hourly(&s, &s.owner, &chat).await;
    let id = made["id"].as_str().unwrap().to_string();
    assert_eq!(made["state"], "active");
    assert_eq!(made["time_zone"], "Europe/Berlin");
    let timer = timer_of(&s, &id).await;
    timer_waits(&s, &timer).await;
    assert!(firings(&s, &id).await.is_empty());

    s.clock
        .advance(until(&s, &made["next_fire_at"]) + Duration::from_secs(1));
    eventually("the slot fired", || async {
        !firings(&s, &id).await.is_empty()
    })
    .await;
    timer_waits(&s, &timer).await;
    let fired = firings(&s, &id).await;
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0]["outcome"], "sent");
    assert_eq!(fired[0]["catch_up"], false);
    assert_eq!(fired[0]["scheduled_for"], made["next_fire_at"]);
    let turn = fired[0]["execution_id"].as_str().unwrap();
    s.finish(&s.owner, turn).await;
    assert_eq!(
        s.history(&s.owner, &chat).await,
        vec!["hourly check", "Checked."]
    );
    // The next slot is an hour later.
    let after = trigger(&s, &id).await;
    let first =
        chrono::DateTime::parse_from_rfc3339(made["next_fire_at"].as_str().unwrap()).unwrap();
    let next =
        chrono::DateTime::parse_from_rfc3339(after["next_fire_at"].as_str().unwrap()).unwrap();
    assert_eq!((next - first).num_minutes(), 60);
}

async fn a_server_that_was_down_fires_a_missed_schedule_once(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Caught up."])]).await;
    let chat = chat_with(&s, &model, false).await;
    let made = hourly(&s, &s.owner, &chat).await;
    let id = made["id"].as_str().unwrap().to_string();
    let timer = timer_of(&s, &id).await;
    timer_waits(&s, &timer).await;
    // The node is down while five slots pass.
    s.engine.shutdown().await;
    s.clock
        .advance(until(&s, &made["next_fire_at"]) + Duration::from_secs(4 * 3600 + 60));
    let engine = restart(&s).await;
    eventually("the missed slot fired", || async {
        !firings(&s, &id).await.is_empty()
    })
    .await;
    timer_waits(&s, &timer).await;
    let fired = firings(&s, &id).await;
    assert_eq!(
        fired.len(),
        1,
        "one catch-up firing, not one per missed slot: {fired:?}"
    );
    assert_eq!(fired[0]["catch_up"], true);
    assert_eq!(fired[0]["scheduled_for"], made["next_fire_at"]);
    let next = trigger(&s, &id).await["next_fire_at"].clone();
    let next_ms = chrono::DateTime::parse_from_rfc3339(next.as_str().unwrap())
        .unwrap()
        .timestamp_millis();
    assert!(next_ms > s.clock.now_ms(), "the next slot is after now");
    engine.shutdown().await;
}

/// A new engine on the same database and clock, as a restarted node.
async fn restart(s: &Server) -> Arc<Engine> {
    let engine = Arc::new(Engine::open_with_clock(
        Arc::clone(&s.database.store),
        test_keys(),
        "node-b".into(),
        s.clock.clone(),
    ));
    engine
        .start_runner(
            registry(Some(&s.database), &api::test_platform()),
            RunnerConfig {
                lease: Duration::from_secs(5),
                capacity: 16,
                storage_retry_budget: openbot_server::engine::STORAGE_RETRY_BUDGET,
            },
        )
        .await;
    engine
}

async fn a_firing_is_refused_and_the_trigger_paused_once_the_creator_token_is_revoked(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["never"])]).await;
    let chat = chat_with(&s, &model, false).await;
    let response = s
        .post("/v1/tokens", &s.owner)
        .json(&json!({"name": "trigger maker", "rights": openbot_server::identity::Right::all()}))
        .send()
        .await
        .unwrap();
    let created: Value = response.json().await.unwrap();
    let token = created["secret"].as_str().unwrap().to_string();
    let made = hourly(&s, &token, &chat).await;
    let id = made["id"].as_str().unwrap().to_string();
    let timer = timer_of(&s, &id).await;
    timer_waits(&s, &timer).await;
    let revoked = s
        .delete(
            &format!("/v1/tokens/{}", created["token"]["id"].as_str().unwrap()),
            &s.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), StatusCode::NO_CONTENT);

    s.clock
        .advance(until(&s, &made["next_fire_at"]) + Duration::from_secs(1));
    eventually("the refused firing paused the trigger", || async {
        trigger(&s, &id).await["state"] == "paused"
    })
    .await;
    let fired = firings(&s, &id).await;
    assert_eq!(fired[0]["outcome"], "refused");
    assert_eq!(fired[0]["reason"], "the token was revoked");
    assert!(fired[0].get("execution_id").is_none());
    let paused = trigger(&s, &id).await;
    assert_eq!(paused["state"], "paused");
    assert_eq!(paused["paused_reason"], "the token was revoked");
    assert_eq!(model.total_requests(), 0, "nothing reached the Chat");
    assert!(s.history(&s.owner, &chat).await.is_empty());
}

async fn a_paused_schedule_does_not_fire_and_a_resumed_one_fires_at_its_next_slot(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Back."])]).await;
    let chat = chat_with(&s, &model, false).await;
    let made = hourly(&s, &s.owner, &chat).await;
    let id = made["id"].as_str().unwrap().to_string();
    let timer = timer_of(&s, &id).await;
    timer_waits(&s, &timer).await;
    let paused: Value = s
        .post(&format!("/v1/triggers/{id}/pause"), &s.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(paused["state"], "paused");
    assert!(paused.get("next_fire_at").is_none());
    // Three slots pass while paused: the timer wakes at the first, sees the pause and waits.
    s.clock
        .advance(until(&s, &made["next_fire_at"]) + Duration::from_secs(2 * 3600 + 60));
    timer_waits(&s, &timer).await;
    eventually("the timer took its pause", || async {
        let row = s
            .database
            .store
            .execution(timer.parse().unwrap())
            .await
            .unwrap();
        row.wake_at.is_none()
    })
    .await;
    assert!(firings(&s, &id).await.is_empty());

    let resumed: Value = s
        .post(&format!("/v1/triggers/{id}/resume"), &s.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resumed["state"], "active");
    let next = resumed["next_fire_at"].clone();
    let next_ms = chrono::DateTime::parse_from_rfc3339(next.as_str().unwrap())
        .unwrap()
        .timestamp_millis();
    assert!(next_ms > s.clock.now_ms(), "no catch-up for a pause");
    s.clock.advance(until(&s, &next) + Duration::from_secs(1));
    eventually("the resumed trigger fired", || async {
        !firings(&s, &id).await.is_empty()
    })
    .await;
    let fired = firings(&s, &id).await;
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0]["scheduled_for"], next);
    assert_eq!(fired[0]["catch_up"], false);
}

async fn a_deleted_schedule_ends_its_timer(s: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let chat = chat_with(&s, &model, false).await;
    let made = hourly(&s, &s.owner, &chat).await;
    let id = made["id"].as_str().unwrap().to_string();
    let timer = timer_of(&s, &id).await;
    let deleted = s
        .delete(&format!("/v1/triggers/{id}"), &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    let mut row = None;
    for _ in 0..400 {
        let now = s
            .database
            .store
            .execution(timer.parse().unwrap())
            .await
            .unwrap();
        if now.state.is_terminal() {
            row = None;
            break;
        }
        row = Some(now);
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(row.is_none(), "the timer never ended: {row:?}");
    let gone = s
        .get(&format!("/v1/triggers/{id}"), &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(gone).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    let again = s
        .delete(&format!("/v1/triggers/{id}"), &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_FOUND);
    s.clock.advance(Duration::from_secs(7200));
    assert_eq!(model.total_requests(), 0);
}

/// The trigger's row and the timer that fires it are one transaction: when the timer cannot
/// be stored, no trigger row is left behind (not even a deleted one), and a created schedule
/// names its timer from the start.
async fn a_schedule_and_its_timer_are_stored_together_or_not_at_all(s: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let chat = chat_with(&s, &model, false).await;
    let nil = uuid::Uuid::nil();
    let (refuse, allow): (Vec<&str>, Vec<&str>) = match &s.raw {
        api::Raw::Sqlite(..) => (
            vec![
                "CREATE TRIGGER refuse_timers BEFORE INSERT ON command_keys \
                 BEGIN SELECT RAISE(ABORT, 'no timers today'); END",
            ],
            vec!["DROP TRIGGER refuse_timers"],
        ),
        api::Raw::Postgres(_) => (
            vec![
                "CREATE FUNCTION refuse_timers() RETURNS trigger AS $$ BEGIN \
                 RAISE EXCEPTION USING ERRCODE = '23514', MESSAGE = 'no timers today'; END $$ LANGUAGE plpgsql",
                "CREATE TRIGGER refuse_timers BEFORE INSERT ON command_keys FOR EACH ROW EXECUTE FUNCTION refuse_timers()",
            ],
            vec![
                "DROP TRIGGER refuse_timers ON command_keys",
                "DROP FUNCTION refuse_timers()",
            ],
        ),
    };
    for statement in refuse {
        s.raw_execute(statement, nil).await;
    }
    let refused = s
        .post("/v1/triggers", &s.owner)
        .json(&json!({"chat_id": chat, "kind": "schedule", "cron": "0 * * * *", "text": "hourly"}))
        .send()
        .await
        .unwrap();
    assert!(refused.status().is_server_error(), "{}", refused.status());
    let rows = s
        .raw_text(
            "SELECT CAST(COUNT(*) AS TEXT) FROM triggers WHERE id <> $1",
            nil,
        )
        .await;
    assert_eq!(rows.as_deref(), Some("0"), "no trigger without its timer");
    for statement in allow {
        s.raw_execute(statement, nil).await;
    }
    let made = hourly(&s, &s.owner, &chat).await;
    let timer = timer_of(&s, made["id"].as_str().unwrap()).await;
    let row = s
        .database
        .store
        .execution(timer.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(row.kind, "trigger_schedule");
}

/// A token limited to Bot A neither lists, reads, pauses nor deletes the trigger of a Chat
/// with Bot B, though the same member made both.
async fn a_token_limited_to_one_bot_reaches_only_that_bots_triggers(s: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let a = s.bot(&s.owner, &model, false).await;
    let b = s.bot(&s.owner, &model, false).await;
    let chat_a = s.chat(&s.owner, &a).await;
    let chat_b = s.chat(&s.owner, &b).await;
    let mine = hourly(&s, &s.owner, &chat_a).await["id"].clone();
    let other = hourly(&s, &s.owner, &chat_b).await["id"].clone();
    let limited = s.bot_limited_token(&a).await;
    let listed: Vec<Value> = s
        .walk(&limited, "/v1/triggers", 10)
        .await
        .into_iter()
        .map(|t| t["id"].clone())
        .collect();
    assert_eq!(listed, std::slice::from_ref(&mine));
    let other = other.as_str().unwrap();
    let read = s
        .get(&format!("/v1/triggers/{other}"), &limited)
        .send()
        .await
        .unwrap();
    let pause = s
        .post(&format!("/v1/triggers/{other}/pause"), &limited)
        .send()
        .await
        .unwrap();
    let delete = s
        .delete(&format!("/v1/triggers/{other}"), &limited)
        .send()
        .await
        .unwrap();
    for refused in [read, pause, delete] {
        assert_eq!(refused.status(), StatusCode::NOT_FOUND);
    }
    assert_eq!(trigger(&s, other).await["state"], "active");
    let own = s
        .post(
            &format!("/v1/triggers/{}/pause", mine.as_str().unwrap()),
            &limited,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), StatusCode::OK);
}

async fn bad_triggers_are_refused(s: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let chat = chat_with(&s, &model, false).await;
    for body in [
        json!({"chat_id": chat, "kind": "schedule", "cron": "61 * * * *", "text": "x"}),
        json!({"chat_id": chat, "kind": "schedule", "cron": "0 9 * * *", "time_zone": "Mars/Olympus", "text": "x"}),
        json!({"chat_id": chat, "kind": "schedule", "cron": "* * * * * *", "text": "every second"}),
        json!({"chat_id": chat, "kind": "schedule", "cron": "0 9 * * *"}),
        json!({"chat_id": chat, "kind": "schedule", "text": "no cron"}),
        json!({"chat_id": chat, "kind": "schedule", "cron": "0 9 * * *", "text": ""}),
        json!({"chat_id": chat, "kind": "schedule", "cron": "0 9 * * *", "text": "x".repeat(4001)}),
        json!({"chat_id": chat, "kind": "webhook", "cron": "0 9 * * *"}),
        json!({"chat_id": chat, "kind": "nightly", "text": "x"}),
        json!({"chat_id": chat, "kind": "webhook", "secret": "mine"}),
    ] {
        let response = s
            .post("/v1/triggers", &s.owner)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            error_code(response).await,
            (StatusCode::BAD_REQUEST, "invalid_input".into()),
            "{body}"
        );
    }
    // Another member's Chat, and a Chat that is not there, are not found.
    let other = s.other_member_token().await;
    let response = s
        .post("/v1/triggers", &other)
        .json(&json!({"chat_id": chat, "kind": "webhook"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(response).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    // A token that may only read Chats may not create one.
    let reader = s
        .token_with(json!([{"resource": "chats", "action": "read"}]))
        .await;
    let response = s
        .post("/v1/triggers", &reader)
        .json(&json!({"chat_id": chat, "kind": "webhook"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(response).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
}

async fn triggers_are_listed_in_pages_and_only_to_their_creator(s: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let chat = chat_with(&s, &model, false).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        let made = create(&s, &s.owner, json!({"chat_id": chat, "kind": "webhook"})).await;
        ids.push(made["trigger"]["id"].clone());
    }
    let listed: Vec<Value> = s
        .walk(&s.owner, "/v1/triggers", 2)
        .await
        .into_iter()
        .map(|t| t["id"].clone())
        .collect();
    assert_eq!(listed, ids);
    let other = s.other_member_token().await;
    assert!(s.walk(&other, "/v1/triggers", 50).await.is_empty());
    let theirs = s
        .get(
            &format!("/v1/triggers/{}", ids[0].as_str().unwrap()),
            &other,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    let pause = s
        .post(
            &format!("/v1/triggers/{}/pause", ids[0].as_str().unwrap()),
            &other,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(pause.status(), StatusCode::NOT_FOUND);
    let bad = s
        .get("/v1/triggers?limit=0", &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    // The signing secret is shown once: never in a list, a read, or the database in clear.
    let made = create(&s, &s.owner, json!({"chat_id": chat, "kind": "webhook"})).await;
    let secret = made["signing_secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"));
    let id = made["trigger"]["id"].as_str().unwrap();
    let shown = s
        .get(&format!("/v1/triggers/{id}"), &s.owner)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!shown.contains(&secret));
    assert!(s.columns_containing(&secret).await.is_empty());
}

async fn a_signed_webhook_delivery_reaches_the_chat_once(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Deploy noted."])]).await;
    let chat = chat_with(&s, &model, false).await;
    let made = create(
        &s,
        &s.owner,
        json!({"chat_id": chat, "kind": "webhook", "text": "A deploy finished:"}),
    )
    .await;
    let id = made["trigger"]["id"].as_str().unwrap().to_string();
    assert_eq!(made["trigger"]["hook_path"], format!("/v1/hooks/{id}"));
    let secret = made["signing_secret"].as_str().unwrap().to_string();
    let now = s.clock.now_ms() / 1000;
    let body = r#"{"service":"api","version":"1.4.2"}"#;
    let first = deliver_webhook(&s, &id, &secret, now, Some("d-1"), body).await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["outcome"], "sent");
    assert_eq!(first["delivery_id"], "d-1");
    // The sender retries the same delivery: the same firing, no second input.
    let again = deliver_webhook(&s, &id, &secret, now, Some("d-1"), body).await;
    assert_eq!(again.status(), StatusCode::OK);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["id"], first["id"]);
    s.finish(&s.owner, first["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(
        s.history(&s.owner, &chat).await,
        vec![
            format!("A deploy finished:\n\n{body}"),
            "Deploy noted.".to_string()
        ]
    );
    assert_eq!(model.total_requests(), 1);
    assert_eq!(firings(&s, &id).await.len(), 1);
    // A paused webhook refuses deliveries; a known delivery ID still answers its firing.
    s.post(&format!("/v1/triggers/{id}/pause"), &s.owner)
        .send()
        .await
        .unwrap();
    let paused = deliver_webhook(&s, &id, &secret, now, Some("d-2"), body).await;
    assert_eq!(
        error_code(paused).await,
        (StatusCode::CONFLICT, "conflict".into())
    );
    let known = deliver_webhook(&s, &id, &secret, now, Some("d-1"), body).await;
    assert_eq!(known.status(), StatusCode::OK);
}

async fn a_webhook_refuses_bad_signatures_stale_timestamps_and_missing_headers(s: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let chat = chat_with(&s, &model, false).await;
    let made = create(&s, &s.owner, json!({"chat_id": chat, "kind": "webhook"})).await;
    let id = made["trigger"]["id"].as_str().unwrap().to_string();
    let secret = made["signing_secret"].as_str().unwrap().to_string();
    let now = s.clock.now_ms() / 1000;
    let body = r#"{"n":1}"#;
    // Signed with another secret.
    let wrong = deliver_webhook(&s, &id, "whsec_not_the_secret", now, Some("x-1"), body).await;
    assert_eq!(
        error_code(wrong).await,
        (StatusCode::UNAUTHORIZED, "unauthorized".into())
    );
    // A changed body.
    let ts = now.to_string();
    let tampered = s
        .http
        .post(format!("{}/v1/hooks/{id}", s.base))
        .header("x-openbot-timestamp", &ts)
        .header(
            "x-openbot-signature",
            api::openssl_signature(&secret, &ts, body),
        )
        .header("x-openbot-delivery", "x-2")
        .body(r#"{"n":2}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(tampered).await,
        (StatusCode::UNAUTHORIZED, "unauthorized".into())
    );
    // Ten minutes old, and ten minutes ahead.
    for skew in [-600, 600] {
        let stale = deliver_webhook(&s, &id, &secret, now + skew, Some("x-3"), body).await;
        assert_eq!(
            error_code(stale).await,
            (StatusCode::UNAUTHORIZED, "unauthorized".into())
        );
    }
    // No delivery ID; no signature; a malformed signature; an unknown trigger.
    let no_delivery = deliver_webhook(&s, &id, &secret, now, None, body).await;
    assert_eq!(
        error_code(no_delivery).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    let unsigned = s
        .http
        .post(format!("{}/v1/hooks/{id}", s.base))
        .header("x-openbot-timestamp", &ts)
        .header("x-openbot-delivery", "x-4")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(unsigned).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    let malformed = s
        .http
        .post(format!("{}/v1/hooks/{id}", s.base))
        .header("x-openbot-timestamp", &ts)
        .header("x-openbot-signature", "sha256=abc")
        .header("x-openbot-delivery", "x-5")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), StatusCode::BAD_REQUEST);
    let unknown = deliver_webhook(
        &s,
        &uuid::Uuid::now_v7().to_string(),
        &secret,
        now,
        Some("x-6"),
        body,
    )
    .await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    // A schedule has no hook.
    let schedule = hourly(&s, &s.owner, &chat).await;
    let not_hook = deliver_webhook(
        &s,
        schedule["id"].as_str().unwrap(),
        &secret,
        now,
        Some("x-7"),
        body,
    )
    .await;
    assert_eq!(not_hook.status(), StatusCode::NOT_FOUND);
    assert!(firings(&s, &id).await.is_empty());
    assert_eq!(model.total_requests(), 0);
}

/// A Chat whose Bot sets a reminder in ten minutes in its first Turn; returns the Chat and the
/// reminder.
async fn chat_with_reminder(s: &Server, model: &FakeOpenAi) -> (String, Value) {
    let chat = chat_with(s, model, true).await;
    let sent: Value = s
        .send(&s.owner, &chat, "remind me to water the plants", None)
        .await
        .json()
        .await
        .unwrap();
    s.finish(&s.owner, sent["execution_id"].as_str().unwrap())
        .await;
    let reminders = s
        .walk(&s.owner, &format!("/v1/chats/{chat}/reminders"), 50)
        .await;
    assert_eq!(reminders.len(), 1, "{reminders:?}");
    (chat, reminders[0].clone())
}

fn reminder_model_script() -> Vec<Answer> {
    vec![
        Answer::Tool("remind", json!({"text": "water the plants", "in": 600})),
        Answer::Text(vec!["I will remind you."]),
        Answer::Text(vec!["Time to water the plants!"]),
    ]
}

async fn reminder_row(s: &Server, id: &Value) -> openbot_server::reminders::ReminderRow {
    s.database
        .reminders
        .reminder(id.as_str().unwrap().parse().unwrap())
        .await
        .unwrap()
        .unwrap()
}

async fn a_reminder_reaches_the_chat_at_its_time(s: Server) {
    let model = FakeOpenAi::start(reminder_model_script()).await;
    let (chat, reminder) = chat_with_reminder(&s, &model).await;
    assert_eq!(reminder["state"], "pending");
    assert_eq!(reminder["text"], "water the plants");
    let wait = until(&s, &reminder["due_at"]);
    assert!(
        wait > Duration::from_secs(590) && wait <= Duration::from_secs(600),
        "{wait:?}"
    );
    // Before its time nothing comes.
    let timer = reminder_row(&s, &reminder["id"])
        .await
        .execution_id
        .to_string();
    timer_waits(&s, &timer).await;
    let before = s.history(&s.owner, &chat).await;
    assert_eq!(before.last().unwrap(), "I will remind you.");

    s.clock.advance(wait + Duration::from_secs(1));
    eventually("the reminder was delivered", || async {
        reminder_row(&s, &reminder["id"]).await.state == openbot_schema::ReminderState::Delivered
    })
    .await;
    let row = reminder_row(&s, &reminder["id"]).await;
    s.finish(&s.owner, &row.delivered_execution_id.unwrap().to_string())
        .await;
    let history = s.history(&s.owner, &chat).await;
    assert_eq!(
        history[history.len() - 2..],
        [
            "Reminder: water the plants".to_string(),
            "Time to water the plants!".to_string()
        ]
    );
    let listed = s
        .walk(&s.owner, &format!("/v1/chats/{chat}/reminders"), 50)
        .await;
    assert_eq!(listed[0]["state"], "delivered");
}

async fn a_cancelled_reminder_never_reaches_the_chat(s: Server) {
    let model = FakeOpenAi::start(reminder_model_script()).await;
    let (chat, reminder) = chat_with_reminder(&s, &model).await;
    let id = reminder["id"].as_str().unwrap();
    let cancelled = s
        .delete(&format!("/v1/chats/{chat}/reminders/{id}"), &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), StatusCode::OK);
    let cancelled: Value = cancelled.json().await.unwrap();
    assert_eq!(cancelled["state"], "cancelled");
    let again = s
        .delete(&format!("/v1/chats/{chat}/reminders/{id}"), &s.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(again).await,
        (StatusCode::CONFLICT, "conflict".into())
    );
    let timer = reminder_row(&s, &reminder["id"]).await.execution_id;
    eventually("the timer ended cancelled", || async {
        s.database.store.execution(timer).await.unwrap().state
            == openbot_schema::ExecutionState::Cancelled
    })
    .await;
    let before = s.history(&s.owner, &chat).await.len();
    s.clock.advance(Duration::from_secs(3600));
    timer_waits_none(&s).await;
    assert_eq!(s.history(&s.owner, &chat).await.len(), before);
    assert_eq!(
        model.total_requests(),
        2,
        "no Turn for a cancelled reminder"
    );
    assert_eq!(
        reminder_row(&s, &reminder["id"]).await.state,
        openbot_schema::ReminderState::Cancelled
    );
    // Another member neither sees nor cancels it.
    let other = s.other_member_token().await;
    let theirs = s
        .get(&format!("/v1/chats/{chat}/reminders"), &other)
        .send()
        .await
        .unwrap();
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    let unknown = s
        .delete(
            &format!("/v1/chats/{chat}/reminders/{}", uuid::Uuid::now_v7()),
            &s.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
}

async fn deleting_a_chat_cancels_its_reminders(s: Server) {
    let model = FakeOpenAi::start(reminder_model_script()).await;
    let (chat, reminder) = chat_with_reminder(&s, &model).await;
    let deleted = s
        .delete(&format!("/v1/chats/{chat}"), &s.owner)
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    eventually("the reminder was cancelled with its Chat", || async {
        reminder_row(&s, &reminder["id"]).await.state == openbot_schema::ReminderState::Cancelled
    })
    .await;
    s.clock.advance(Duration::from_secs(3600));
    let timer = reminder_row(&s, &reminder["id"]).await.execution_id;
    assert_eq!(
        s.database.store.execution(timer).await.unwrap().state,
        openbot_schema::ExecutionState::Cancelled
    );
    assert_eq!(model.total_requests(), 2, "no Turn after the deletion");
}

async fn a_reminder_survives_a_restart_of_the_node(s: Server) {
    let model = FakeOpenAi::start(reminder_model_script()).await;
    let (chat, reminder) = chat_with_reminder(&s, &model).await;
    let timer = reminder_row(&s, &reminder["id"])
        .await
        .execution_id
        .to_string();
    timer_waits(&s, &timer).await;
    s.engine.shutdown().await;
    s.clock
        .advance(until(&s, &reminder["due_at"]) + Duration::from_secs(1));
    let engine = restart(&s).await;
    eventually("the reminder was delivered after the restart", || async {
        reminder_row(&s, &reminder["id"]).await.state == openbot_schema::ReminderState::Delivered
    })
    .await;
    let row = reminder_row(&s, &reminder["id"]).await;
    s.finish(&s.owner, &row.delivered_execution_id.unwrap().to_string())
        .await;
    let history = s.history(&s.owner, &chat).await;
    assert_eq!(history[history.len() - 2], "Reminder: water the plants");
    engine.shutdown().await;
}

async fn the_remind_tool_is_offered_only_with_the_bot_setting(s: Server) {
    let off = FakeOpenAi::start(vec![Answer::Text(vec!["ok"])]).await;
    let chat = chat_with(&s, &off, false).await;
    let sent: Value = s
        .send(&s.owner, &chat, "hi", None)
        .await
        .json()
        .await
        .unwrap();
    s.finish(&s.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert!(!off.bodies()[0].contains("\"remind\""));
    let on = FakeOpenAi::start(vec![Answer::Text(vec!["ok"])]).await;
    let chat = chat_with(&s, &on, true).await;
    let sent: Value = s
        .send(&s.owner, &chat, "hi", None)
        .await
        .json()
        .await
        .unwrap();
    s.finish(&s.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert!(on.bodies()[0].contains("\"remind\""));
}

async fn bad_remind_calls_come_back_to_the_model_as_errors(s: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Tool(
            "remind",
            json!({"text": "late", "at": "2001-01-01T00:00:00Z"}),
        ),
        Answer::Tool("remind", json!({"text": "never", "in": "next week"})),
        Answer::Tool("remind", json!({"in": 60})),
        Answer::Text(vec!["Sorry."]),
    ])
    .await;
    let chat = chat_with(&s, &model, true).await;
    let sent: Value = s
        .send(&s.owner, &chat, "remind me", None)
        .await
        .json()
        .await
        .unwrap();
    s.finish(&s.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert!(
        s.walk(&s.owner, &format!("/v1/chats/{chat}/reminders"), 50)
            .await
            .is_empty()
    );
    let history = s.history(&s.owner, &chat).await.join("\n");
    assert!(history.contains("already passed"), "{history}");
    assert!(history.contains("ISO 8601"), "{history}");
    assert!(
        history.contains("\"text\" is a required property"),
        "{history}"
    );
}

async fn concurrent_deliveries_of_one_id_send_one_input(s: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Once."])]).await;
    let chat = chat_with(&s, &model, false).await;
    let made = create(&s, &s.owner, json!({"chat_id": chat, "kind": "webhook"})).await;
    let id = made["trigger"]["id"].as_str().unwrap().to_string();
    let secret = made["signing_secret"].as_str().unwrap().to_string();
    let now = s.clock.now_ms() / 1000;
    let answers = futures::future::join_all(
        (0..6).map(|_| deliver_webhook(&s, &id, &secret, now, Some("same"), r#"{"a":1}"#)),
    )
    .await;
    let mut firing_ids = std::collections::BTreeSet::new();
    for answer in answers {
        assert!(answer.status().is_success(), "{}", answer.status());
        let firing: Value = answer.json().await.unwrap();
        firing_ids.insert(firing["id"].as_str().unwrap().to_string());
    }
    assert_eq!(firing_ids.len(), 1, "one firing: {firing_ids:?}");
    let fired = firings(&s, &id).await;
    assert_eq!(fired.len(), 1);
    s.finish(&s.owner, fired[0]["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(
        s.history(&s.owner, &chat).await.len(),
        2,
        "one input, one answer"
    );
    assert_eq!(model.total_requests(), 1);
}

async fn a_webhook_on_a_deleted_chat_is_refused_and_paused(s: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let chat = chat_with(&s, &model, false).await;
    let made = create(&s, &s.owner, json!({"chat_id": chat, "kind": "webhook"})).await;
    let id = made["trigger"]["id"].as_str().unwrap().to_string();
    let secret = made["signing_secret"].as_str().unwrap().to_string();
    let deleted = s
        .delete(&format!("/v1/chats/{chat}"), &s.owner)
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success());
    let now = s.clock.now_ms() / 1000;
    let answer = deliver_webhook(&s, &id, &secret, now, Some("late"), "{}").await;
    assert_eq!(answer.status(), StatusCode::ACCEPTED);
    let firing: Value = answer.json().await.unwrap();
    assert_eq!(firing["outcome"], "refused");
    assert!(
        firing["reason"].as_str().unwrap().contains("chat"),
        "{firing}"
    );
    let paused = trigger(&s, &id).await;
    assert_eq!(paused["state"], "paused");
    assert_eq!(model.total_requests(), 0);
}

async fn a_reminder_is_refused_once_the_token_that_set_it_is_revoked(s: Server) {
    let model = FakeOpenAi::start(reminder_model_script()).await;
    let chat = chat_with(&s, &model, true).await;
    let created: Value = s
        .post("/v1/tokens", &s.owner)
        .json(&json!({"name": "chatter", "rights": openbot_server::identity::Right::all()}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = created["secret"].as_str().unwrap().to_string();
    let sent: Value = s
        .send(&token, &chat, "remind me to water the plants", None)
        .await
        .json()
        .await
        .unwrap();
    s.finish(&s.owner, sent["execution_id"].as_str().unwrap())
        .await;
    let reminder = s
        .walk(&s.owner, &format!("/v1/chats/{chat}/reminders"), 50)
        .await[0]
        .clone();
    let revoked = s
        .delete(
            &format!("/v1/tokens/{}", created["token"]["id"].as_str().unwrap()),
            &s.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), StatusCode::NO_CONTENT);
    s.clock
        .advance(until(&s, &reminder["due_at"]) + Duration::from_secs(1));
    eventually("the reminder was refused", || async {
        reminder_row(&s, &reminder["id"]).await.state == openbot_schema::ReminderState::Refused
    })
    .await;
    assert_eq!(
        model.total_requests(),
        2,
        "no Turn for the refused reminder"
    );
    assert!(
        reminder_row(&s, &reminder["id"])
            .await
            .delivered_execution_id
            .is_none()
    );
}

/// A reminder acts through the credential of the Turn that set it, when it is due; a
/// browser session ends after a day, so a Turn sent through one gets the call back as an
/// error that says why, and no reminder is set.
async fn a_reminder_asked_for_in_a_browser_session_comes_back_to_the_model_as_refused(s: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Tool("remind", json!({"text": "water the plants", "in": 600})),
        Answer::Text(vec!["I cannot."]),
    ])
    .await;
    let chat = chat_with(&s, &model, true).await;
    let cookie = s.session_cookie().await;
    let sent: Value = s
        .http
        .post(format!("{}/v1/chats/{chat}/messages", s.base))
        .header("cookie", &cookie)
        .header("origin", &s.base)
        .json(&json!({"content": [{"type": "text", "text": "remind me"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    s.finish(&s.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert!(
        s.walk(&s.owner, &format!("/v1/chats/{chat}/reminders"), 50)
            .await
            .is_empty()
    );
    let history = s.history(&s.owner, &chat).await.join("\n");
    assert!(
        history.contains("browser session") && history.contains("API token"),
        "{history}"
    );
}
