//! Usage and billing with real processes (issue 19, point 7): two `openbot serve` nodes on one
//! PostgreSQL run the Turns that an HTTP front (no runner of its own) submits. A frozen owner's
//! late answer after a takeover is charged once under its own billing identity; concurrent
//! Turns over both nodes never spend past a small budget, and the refused ones end `max_cost`;
//! missing, zero and low-estimated usage are recorded as they are.

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

use std::collections::HashMap;
use std::time::Duration;

use api::{Server, outcome_of, receipt};
use fake_openai::{Answer, FakeOpenAi};
use front::Front;
use openbot_schema::{ExecutionId, TurnOutcome};
use openbot_server::billing::LedgerRow;
use serde_json::{Value, json};
use uuid::Uuid;

/// The organization's ledger entries that are charges.
async fn charges(front: &Front) -> Vec<LedgerRow> {
    let organization = front.organization().await;
    front
        .server
        .database
        .billing
        .ledger(organization, None, 500)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "charge")
        .collect()
}

/// The state of a call's usage record.
async fn record_state(front: &Front, id: ExecutionId, call_key: &str) -> Option<String> {
    front
        .server
        .database
        .billing
        .usage_record(id, call_key)
        .await
        .unwrap()
        .map(|r| r.state)
}

async fn json_of(response: reqwest::Response) -> Value {
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "{status}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// Prices the fake model at `output` millionths of a dollar per million output tokens and
/// nothing for input: a request's estimate is its 4096 reserved output tokens at that price.
async fn price_fake(server: &Server, model: &FakeOpenAi, output: u64) {
    json_of(
        server
            .http
            .put(format!("{}/v1/billing/prices", server.base))
            .bearer_auth(&server.owner)
            .json(
                &json!({"model": model.spec(), "input_micros_per_million": 0,
                          "output_micros_per_million": output}),
            )
            .send()
            .await
            .unwrap(),
    )
    .await;
}

async fn grant(server: &Server, micros: u64) {
    json_of(
        server
            .post("/v1/billing/credits/grants", &server.owner)
            .json(&json!({"amount_micros": micros, "note": "test"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
}

/// Sends "go" to `chat` and returns the Turn's execution.
async fn send(server: &Server, chat: &str) -> String {
    let sent = receipt(server.send(&server.owner, chat, "go", None).await).await;
    sent["execution_id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_answer_after_a_takeover_is_charged_once_under_its_own_billing_identity() {
    let front = Front::new().await;
    let server = &front.server;
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["done"])]).await;
    // The frozen owner's request is answered while it is frozen: the answer waits in its
    // socket and is read when it goes on, after the other node took the Turn over.
    model.delay_first(0, Duration::from_secs(4));
    model.report_usage(10, 700);
    price_fake(server, &model, 1_000_000).await;
    let granted = 1_000_000;
    grant(server, granted).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;

    let owner = front.node("billing-owner", 1000);
    let execution = send(server, &chat).await;
    server.wait_started(&execution).await;
    owner.pause();
    let id: ExecutionId = execution.parse().unwrap();
    assert_eq!(
        record_state(&front, id, "1/model/1").await.as_deref(),
        Some("held"),
        "the first request holds its reservation"
    );

    let _other = front.node("billing-other", 1000);
    let events = server.finish(&server.owner, &execution).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    let row = server.database.store.execution(id).await.unwrap();
    assert!(row.generation >= 2, "the other node took the Turn over");
    assert_eq!(
        record_state(&front, id, "1/model/1").await.as_deref(),
        Some("released"),
        "the takeover released the old attempt's hold"
    );
    let before: Vec<String> = charges(&front)
        .await
        .into_iter()
        .filter_map(|c| c.call_key)
        .collect();
    assert!(
        !before.contains(&"1/model/1".to_string()),
        "the old attempt is not charged before its answer: {before:?}"
    );

    // The old owner goes on, reads the answer it was sent and saves it late.
    tokio::time::sleep(Duration::from_secs(4)).await;
    owner.resume();
    let mut settled = false;
    for _ in 0..300 {
        if record_state(&front, id, "1/model/1").await.as_deref() == Some("settled") {
            settled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(settled, "the late answer's usage settled the old attempt");
    // Any second save of the late answer would come within the grace the old owner has.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let charges = charges(&front).await;
    let mut per_call: HashMap<(Option<Uuid>, Option<String>), usize> = HashMap::new();
    for charge in &charges {
        *per_call
            .entry((charge.execution_id, charge.call_key.clone()))
            .or_default() += 1;
    }
    assert!(
        per_call.values().all(|n| *n == 1),
        "one charge per billing identity: {charges:#?}"
    );
    let old = charges
        .iter()
        .filter(|c| {
            c.execution_id == Some(id.as_uuid()) && c.call_key.as_deref() == Some("1/model/1")
        })
        .count();
    assert_eq!(old, 1, "the late answer is charged once: {charges:#?}");
    // Each request the provider answered is charged once, at its confirmed usage.
    let cost = 700;
    assert_eq!(charges.len() as u32, model.total_requests(), "{charges:#?}");
    assert!(charges.iter().all(|c| c.amount_micros == -cost));
    let organization = front.organization().await;
    let credits = server.database.billing.credits(organization).await.unwrap();
    assert_eq!(
        credits.balance_micros,
        granted as i64 - cost * charges.len() as i64
    );
    assert_eq!(credits.held_micros, 0, "nothing is held after the Turn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_owners_hold_is_released_by_the_takeover_and_only_answered_calls_are_charged() {
    let front = Front::new().await;
    let server = &front.server;
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["done"])]).await;
    model.delay_first(0, Duration::from_secs(600));
    model.report_usage(10, 700);
    price_fake(server, &model, 1_000_000).await;
    let granted = 1_000_000;
    grant(server, granted).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;

    let mut owner = front.node("billing-killed", 1000);
    let execution = send(server, &chat).await;
    server.wait_started(&execution).await;
    owner.kill();
    let id: ExecutionId = execution.parse().unwrap();

    let _other = front.node("billing-taker", 1000);
    let events = server.finish(&server.owner, &execution).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(
        record_state(&front, id, "1/model/1").await.as_deref(),
        Some("released")
    );
    let charges = charges(&front).await;
    assert!(
        charges
            .iter()
            .all(|c| c.call_key.as_deref() != Some("1/model/1")),
        "the killed owner's unanswered request is not charged: {charges:#?}"
    );
    // Only answered requests are charged: the killed one's answer never came.
    assert_eq!(
        charges.len() as u32 + 1,
        model.total_requests(),
        "{charges:#?}"
    );
    let credits = server
        .database
        .billing
        .credits(front.organization().await)
        .await
        .unwrap();
    assert_eq!(credits.held_micros, 0, "the killed owner's hold is gone");
    assert_eq!(
        credits.balance_micros,
        granted as i64 - 700 * charges.len() as i64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_turns_on_two_nodes_never_spend_past_a_small_budget() {
    let front = Front::new().await;
    let server = &front.server;
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["ok"])]).await;
    // Every request waits, so that all Turns want to send while the first are in flight.
    model.delay(0, Duration::from_millis(1500));
    // $1 per million output tokens: a request reserves its 4096 output tokens (4096) and
    // costs its confirmed 4000 (4000), so a budget of 10000 covers two calls.
    price_fake(server, &model, 1_000_000).await;
    model.report_usage(10, 4000);
    let cost = 4000;
    grant(server, 1_000_000).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let budget = 10_000;
    json_of(
        server
            .http
            .put(format!(
                "{}/v1/budgets/bot/{}",
                server.base,
                bot["id"].as_str().unwrap()
            ))
            .bearer_auth(&server.owner)
            .json(&json!({"max_cost_micros": budget}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let turns = 12;
    let mut chats = Vec::new();
    for _ in 0..turns {
        chats.push(server.chat(&server.owner, &bot).await);
    }
    // A long lease: a takeover on a busy machine would only add a (budgeted) repeat.
    let _a = front.node("budget-a", 5000);
    let _b = front.node("budget-b", 5000);
    let mut executions = Vec::new();
    for chat in &chats {
        executions.push(send(server, chat).await);
    }
    let runs = executions.iter().map(|e| server.finish(&server.owner, e));
    let outcomes: Vec<Option<TurnOutcome>> = futures::future::join_all(runs)
        .await
        .iter()
        .map(|events| outcome_of(events))
        .collect();
    let completed = outcomes
        .iter()
        .filter(|o| **o == Some(TurnOutcome::Completed))
        .count();
    let refused = outcomes
        .iter()
        .filter(|o| **o == Some(TurnOutcome::MaxCost))
        .count();
    assert_eq!(completed + refused, turns, "{outcomes:?}");
    assert!(completed >= 1, "the budget covers some calls: {outcomes:?}");
    assert!(refused >= turns - (budget / cost) as usize, "{outcomes:?}");

    let charges = charges(&front).await;
    let spent: i64 = charges.iter().map(|c| -c.amount_micros).sum();
    println!(
        "{completed} completed, {refused} refused max_cost, {} requests sent, {spent} of {budget} spent",
        model.total_requests()
    );
    assert!(spent <= budget, "spent {spent} past the budget {budget}");
    assert_eq!(charges.len() as u32, model.total_requests());
    assert!(
        model.total_requests() as i64 <= budget / cost,
        "{} requests sent",
        model.total_requests()
    );
    let report: Value = json_of(
        server
            .get("/v1/usage?group_by=bot", &server.owner)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let reported: i64 = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["cost_micros"].as_i64().unwrap())
        .sum();
    assert_eq!(reported, spent, "{report:#}");
    let credits = server
        .database
        .billing
        .credits(front.organization().await)
        .await
        .unwrap();
    assert_eq!(credits.held_micros, 0);
}

/// The usage record of a one-step Turn's model request.
async fn usage(front: &Front, id: ExecutionId) -> openbot_server::billing::UsageRecordRow {
    front
        .server
        .database
        .billing
        .usage_record(id, "1/model/1")
        .await
        .unwrap()
        .unwrap()
}

/// One Turn of a new Bot on `model`, run by a real node; returns its execution.
async fn one_turn(front: &Front, model: &FakeOpenAi) -> ExecutionId {
    let server = &front.server;
    price_fake(server, model, 1_000_000).await;
    let bot = server.bot(&server.owner, model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let execution = send(server, &chat).await;
    let events = server.finish(&server.owner, &execution).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    execution.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_real_node_missing_zero_and_low_estimated_usage_are_recorded_as_they_are() {
    let front = Front::new().await;
    grant(&front.server, 1_000_000).await;
    let _node = front.node("estimates", 5000);

    // Missing usage: unknown, with its estimate (4096 reserved output tokens at $1/M) in its
    // own field, never a successful zero, and no charge.
    let missing = FakeOpenAi::start(vec![Answer::Text(vec!["ok"])]).await;
    missing.without_usage();
    let record = usage(&front, one_turn(&front, &missing).await).await;
    assert_eq!(record.state, "unknown");
    assert_eq!(record.estimate_micros, Some(4096));
    assert_eq!(record.cost_micros, None);
    assert!(charges(&front).await.is_empty());

    // Zero usage: confirmed, settled at zero.
    let zero = FakeOpenAi::start(vec![Answer::Text(vec!["ok"])]).await;
    zero.report_usage(0, 0);
    let record = usage(&front, one_turn(&front, &zero).await).await;
    assert_eq!(record.state, "settled");
    assert_eq!(record.cost_micros, Some(0));

    // A low estimate: the confirmed 8000 output tokens cost 8000, past the 4096 reserved, and
    // the charge is the confirmed cost, not the estimate.
    let low = FakeOpenAi::start(vec![Answer::Text(vec!["ok"])]).await;
    low.report_usage(0, 8000);
    let record = usage(&front, one_turn(&front, &low).await).await;
    assert_eq!(record.state, "settled");
    assert_eq!(record.estimate_micros, Some(4096));
    assert_eq!(record.cost_micros, Some(8000));
    let spent: i64 = charges(&front).await.iter().map(|c| -c.amount_micros).sum();
    assert_eq!(spent, 8000);
}
