//! Usage and billing end to end, on SQLite and on a real PostgreSQL: prices, credits,
//! reservations that keep concurrent Turns inside a budget, unknown usage, late usage after a
//! takeover charged once, and usage reports.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/pg.rs"]
mod pg;
#[macro_use]
#[path = "support/api.rs"]
mod api;

use std::time::Duration;

use fake_openai::{Answer, FakeOpenAi};
use openbot_core::model::Pricing;
use openbot_core::turn::{CallKey, CallSlot, RequestEstimate};
use openbot_schema::{TurnOutcome, Usage};
use openbot_server::billing::{CallBilling, Release, Reservation, Settlement};
use openbot_server::engine::Submission;
use openbot_server::store::{CallPhase, CallWrite, Commit, Scope, TxWrite, TxWrites};
use reqwest::StatusCode;
use serde_json::{Value, json};

use api::{Server, error_code, outcome_of, postgres, receipt, server, sqlite};

http_tests!(
    concurrent_turns_against_a_small_budget_never_overspend,
    a_result_without_usage_is_unknown_usage_never_a_charge_and_blocks_nothing,
    credits_that_do_not_cover_the_reservation_end_the_turn_credits_exhausted,
    a_call_costs_its_confirmed_usage_at_the_price_saved_when_it_was_sent,
    late_usage_after_a_takeover_is_charged_once_and_a_duplicate_never_twice,
    a_call_reserved_twice_keeps_its_first_price_and_is_charged_at_it,
    a_receipt_for_unknown_usage_settles_once,
    usage_reports_sum_by_group_page_and_export_csv,
    billing_needs_an_admin_and_a_bot_limited_token_sees_its_bot_only,
    prices_list_the_catalog_with_its_date_and_the_organizations_overrides,
    a_model_spec_with_a_control_character_is_invalid_input_not_a_storage_fault,
    a_grant_past_the_balance_limit_is_invalid_input_not_a_storage_fault,
    an_interrupted_turn_releases_its_billing_hold,
    an_execution_whose_reply_had_no_usage_says_its_usage_is_unknown,
);

async fn json_of(response: reqwest::Response) -> Value {
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "{status}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// Prices the fake model at `output` millionths of a dollar per million output tokens and
/// nothing for input: a request's estimate is then its 4096 reserved output tokens, and its
/// confirmed cost the fake's 5 output tokens.
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

async fn grant(server: &Server, micros: u64) -> Value {
    json_of(
        server
            .post("/v1/billing/credits/grants", &server.owner)
            .json(&json!({"amount_micros": micros, "note": "test"}))
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn turn(server: &Server, chat: &str, text: &str) -> Option<TurnOutcome> {
    let sent = receipt(server.send(&server.owner, chat, text, None).await).await;
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    outcome_of(&events)
}

async fn usage(server: &Server, token: &str, query: &str) -> Value {
    json_of(
        server
            .get(&format!("/v1/usage?{query}"), token)
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn concurrent_turns_against_a_small_budget_never_overspend(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["ok"])]).await;
    // Every request waits, so that all Turns want to send while the first ones are in flight.
    model.delay(0, Duration::from_millis(1500));
    // $1 per million output tokens: each request reserves 4096, and costs 5 once confirmed.
    price_fake(&server, &model, 1_000_000).await;
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
    let mut chats = Vec::new();
    for _ in 0..8 {
        chats.push(server.chat(&server.owner, &bot).await);
    }
    let runs = chats.iter().map(|chat| turn(&server, chat, "go"));
    let outcomes = futures::future::join_all(runs).await;
    let completed = outcomes
        .iter()
        .filter(|o| **o == Some(TurnOutcome::Completed))
        .count();
    let refused = outcomes
        .iter()
        .filter(|o| **o == Some(TurnOutcome::MaxCost))
        .count();
    assert_eq!(completed + refused, 8, "{outcomes:?}");
    // Two holds of 4096 fit under 10000, a third does not: never more than two in flight.
    assert!(
        model.max_in_flight() <= 2,
        "{} requests were in flight at once",
        model.max_in_flight()
    );
    assert!(refused >= 1, "{outcomes:?}");
    let budgets = json_of(
        server
            .get("/v1/budgets", &server.owner)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        budgets["items"][0]["spent_micros"],
        json!(5 * completed as u64)
    );
    assert!(budgets["items"][0]["spent_micros"].as_u64().unwrap() <= budget);
    let credits = json_of(
        server
            .get("/v1/billing/credits", &server.owner)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        credits["held_micros"], 0,
        "every hold was settled or released"
    );
}

async fn a_result_without_usage_is_unknown_usage_never_a_charge_and_blocks_nothing(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["ok"])]).await;
    model.without_usage();
    price_fake(&server, &model, 1_000_000).await;
    grant(&server, 1_000_000).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    assert_eq!(
        turn(&server, &chat, "one").await,
        Some(TurnOutcome::Completed)
    );
    // Unknown usage does not block the next call.
    assert_eq!(
        turn(&server, &chat, "two").await,
        Some(TurnOutcome::Completed)
    );
    let report = usage(&server, &server.owner, "group_by=model").await;
    let row = &report["items"][0];
    assert_eq!(row["calls"], 2);
    assert_eq!(row["unknown_calls"], 2);
    assert_eq!(row["confirmed_calls"], 0);
    assert_eq!(row["cost_micros"], 0);
    assert_eq!(row["input_tokens"], 0);
    // The estimates stay, in their own field: 4096 reserved output tokens each at $1/M.
    assert_eq!(row["unknown_estimate_micros"], 2 * 4096);
    let credits = json_of(
        server
            .get("/v1/billing/credits", &server.owner)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(credits["balance_micros"], 1_000_000, "nothing was charged");
    assert_eq!(credits["held_micros"], 0, "the holds were let go");
}

async fn credits_that_do_not_cover_the_reservation_end_the_turn_credits_exhausted(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["ok"])]).await;
    price_fake(&server, &model, 1_000_000).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    // Not on credits yet: nothing is refused for credits.
    assert_eq!(
        turn(&server, &chat, "free").await,
        Some(TurnOutcome::Completed)
    );
    grant(&server, 4000).await;
    // 4000 do not cover the 4096 a request reserves: it is not sent.
    let before = model.total_requests();
    assert_eq!(
        turn(&server, &chat, "short").await,
        Some(TurnOutcome::CreditsExhausted)
    );
    assert_eq!(
        model.total_requests(),
        before,
        "the refused request was not sent"
    );
    let balance = grant(&server, 10_000).await;
    assert_eq!(balance["balance_micros"], 14_000);
    assert_eq!(
        turn(&server, &chat, "paid").await,
        Some(TurnOutcome::Completed)
    );
    let credits = json_of(
        server
            .get("/v1/billing/credits", &server.owner)
            .send()
            .await
            .unwrap(),
    )
    .await;
    // Charged the confirmed 5 output tokens, not the estimate.
    assert_eq!(credits["balance_micros"], 14_000 - 5);
    let ledger = json_of(
        server
            .get("/v1/billing/credits/ledger", &server.owner)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let kinds: Vec<&str> = ledger["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["charge", "grant", "grant"]);
    assert_eq!(ledger["items"][0]["amount_micros"], -5);
}

async fn a_call_costs_its_confirmed_usage_at_the_price_saved_when_it_was_sent(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["ok"])]).await;
    model.delay(0, Duration::from_millis(800));
    // $2 per million input tokens and $10 per million output tokens.
    json_of(
        server
            .http
            .put(format!("{}/v1/billing/prices", server.base))
            .bearer_auth(&server.owner)
            .json(
                &json!({"model": model.spec(), "input_micros_per_million": 2_000_000,
                          "output_micros_per_million": 10_000_000}),
            )
            .send()
            .await
            .unwrap(),
    )
    .await;
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "go", None).await).await;
    let execution = sent["execution_id"].as_str().unwrap().to_string();
    server.wait_started(&execution).await;
    // A new price while the request is in flight applies to later calls only.
    price_fake(&server, &model, 1).await;
    let events = server.finish(&server.owner, &execution).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    let report = usage(&server, &server.owner, "group_by=model").await;
    // 10 input tokens at $2/M and 5 output tokens at $10/M: 20 + 50 micro-dollars.
    assert_eq!(report["items"][0]["cost_micros"], 70);
    assert_eq!(report["items"][0]["input_tokens"], 10);
    assert_eq!(report["items"][0]["output_tokens"], 5);
    let execution_view = json_of(
        server
            .get(&format!("/v1/executions/{execution}"), &server.owner)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(execution_view["usage"]["cost_micros"], 70);
}

/// A store-level call of an execution of a kind no workflow runs, claimed by hand.
async fn bare_execution(server: &Server) -> openbot_schema::ExecutionId {
    let owner = server.owner_member().await;
    server
        .engine
        .submit(Submission::new(
            "billing-test",
            Scope::Member(owner.member_id.to_string()),
            &json!({}),
        ))
        .await
        .unwrap()
        .execution_id()
}

fn billing_of(
    execution: openbot_schema::ExecutionId,
    key: CallKey,
    generation: i64,
    organization: uuid::Uuid,
) -> CallBilling {
    CallBilling {
        execution,
        call_key: openbot_server::store::call_key_name(&key),
        generation,
        organization,
        bot: uuid::Uuid::now_v7(),
        budget_bot: uuid::Uuid::now_v7(),
        chat: None,
        member: None,
        model: "openai:gpt-4o".into(),
        catalog: Some(Pricing {
            input_per_million: 1_000_000,
            output_per_million: 1_000_000,
            cached_input_per_million: 1_000_000,
        }),
    }
}

fn model_key(attempt: u32) -> CallKey {
    CallKey {
        step: 1,
        slot: CallSlot::Model,
        attempt,
    }
}

fn sending(key: CallKey, write: std::sync::Arc<dyn TxWrite>) -> Commit {
    Commit {
        calls: vec![CallWrite {
            key,
            phase: CallPhase::Sending,
            idempotency_key: format!("k-{key}"),
            result: None,
            usage: None,
        }],
        writes: TxWrites(vec![write]),
        ..Commit::default()
    }
}

fn done(server: &Server, key: CallKey, usage: Usage) -> CallWrite {
    CallWrite {
        key,
        phase: CallPhase::Done,
        idempotency_key: format!("k-{key}"),
        result: Some(
            server
                .engine
                .context()
                .keys
                .seal(uuid::Uuid::now_v7(), b"answer")
                .unwrap(),
        ),
        usage: Some(usage),
    }
}

async fn late_usage_after_a_takeover_is_charged_once_and_a_duplicate_never_twice(server: Server) {
    let store = &server.database.store;
    let billing = &server.database.billing;
    let organization = server.owner_member().await.organization_id;
    grant(&server, 1_000_000).await;
    let id = bare_execution(&server).await;
    let old = store
        .claim("node-x", &["billing-test"], 1, 10)
        .await
        .unwrap()
        .remove(0);
    let estimate = RequestEstimate {
        input_tokens: 100,
        output_tokens: 50,
    };
    let first = std::sync::Arc::new(Reservation::new(
        billing_of(id, model_key(1), old.generation, organization),
        estimate,
        false,
    ));
    store
        .commit(id, old.generation, sending(model_key(1), first.clone()))
        .await
        .unwrap();
    assert_eq!(
        billing.credits(organization).await.unwrap().held_micros,
        150
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    let new = store
        .claim("node-y", &["billing-test"], 60_000, 10)
        .await
        .unwrap()
        .remove(0);
    assert!(new.generation > old.generation);
    // The new owner's attempt releases the old attempt's hold in its own reservation (its
    // call log shows the old attempt sent without a result).
    let second = std::sync::Arc::new(Reservation::new(
        billing_of(id, model_key(2), new.generation, organization),
        estimate,
        true,
    ));
    store
        .commit(id, new.generation, sending(model_key(2), second.clone()))
        .await
        .unwrap();
    let old_record = billing
        .usage_record(id, "1/model/1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(old_record.state, "released");
    assert_eq!(
        old_record.estimate_micros,
        Some(150),
        "the old estimate stays"
    );
    assert_eq!(
        billing.credits(organization).await.unwrap().held_micros,
        150
    );
    // The old owner's answer comes late, with its usage: kept and charged once, twice over.
    let late = Usage {
        input_tokens: 30,
        output_tokens: 7,
        ..Usage::default()
    };
    for _ in 0..2 {
        // The old owner wrote the record: it settles without reading it.
        let settle = Settlement {
            call: billing_of(id, model_key(1), old.generation, organization),
            usage: Some(late),
            record_price: first.record_price(),
        };
        store
            .save_late_result(
                id,
                old.generation,
                done(&server, model_key(1), late),
                TxWrites::one(settle),
            )
            .await
            .unwrap();
    }
    let old_record = billing
        .usage_record(id, "1/model/1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(old_record.state, "settled");
    assert_eq!(old_record.cost_micros, Some(37));
    let credits = billing.credits(organization).await.unwrap();
    assert_eq!(credits.balance_micros, 1_000_000 - 37, "charged once");
    // The new owner's answer settles its own attempt in its commit; a duplicate is refused
    // by the call log and the settlement alike.
    let usage = Usage {
        input_tokens: 40,
        output_tokens: 2,
        ..Usage::default()
    };
    for _ in 0..2 {
        let settle = Settlement {
            call: billing_of(id, model_key(2), new.generation, organization),
            usage: Some(usage),
            record_price: second.record_price(),
        };
        store
            .commit(
                id,
                new.generation,
                Commit {
                    calls: vec![done(&server, model_key(2), usage)],
                    writes: TxWrites::one(settle),
                    ..Commit::default()
                },
            )
            .await
            .unwrap();
    }
    let credits = billing.credits(organization).await.unwrap();
    assert_eq!(credits.balance_micros, 1_000_000 - 37 - 42);
    assert_eq!(credits.held_micros, 0);
    let ledger = billing.ledger(organization, None, 10).await.unwrap();
    assert_eq!(ledger.iter().filter(|e| e.kind == "charge").count(), 2);
    // A release after everything settled changes nothing.
    store
        .commit(
            id,
            new.generation,
            Commit {
                writes: TxWrites::one(Release { execution: id }),
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        billing
            .usage_record(id, "1/model/2")
            .await
            .unwrap()
            .unwrap()
            .state,
        "settled"
    );
}

/// A reservation that finds the call's record already written (the same attempt reserved
/// before) writes nothing and does not claim the record's price: its settlement reads the
/// price saved with the record, not the one in force now.
async fn a_call_reserved_twice_keeps_its_first_price_and_is_charged_at_it(server: Server) {
    let store = &server.database.store;
    let billing = &server.database.billing;
    let organization = server.owner_member().await.organization_id;
    grant(&server, 1_000_000).await;
    let id = bare_execution(&server).await;
    let owner = store
        .claim("node-x", &["billing-test"], 60_000, 10)
        .await
        .unwrap()
        .remove(0);
    let estimate = RequestEstimate {
        input_tokens: 10,
        output_tokens: 10,
    };
    let first = std::sync::Arc::new(Reservation::new(
        billing_of(id, model_key(1), owner.generation, organization),
        estimate,
        false,
    ));
    store
        .commit(id, owner.generation, sending(model_key(1), first.clone()))
        .await
        .unwrap();
    assert!(first.record_price().is_some(), "the first wrote the record");
    // The organization's own price for the model, ten times the catalog's, comes later.
    json_of(
        server
            .http
            .put(format!("{}/v1/billing/prices", server.base))
            .bearer_auth(&server.owner)
            .json(
                &json!({"model": "openai:gpt-4o", "input_micros_per_million": 10_000_000,
                          "output_micros_per_million": 10_000_000}),
            )
            .send()
            .await
            .unwrap(),
    )
    .await;
    let again = std::sync::Arc::new(Reservation::new(
        billing_of(id, model_key(1), owner.generation, organization),
        estimate,
        true,
    ));
    store
        .commit(id, owner.generation, sending(model_key(1), again.clone()))
        .await
        .unwrap();
    assert_eq!(
        again.record_price(),
        None,
        "the record was there: not this one's"
    );
    let usage = Usage {
        input_tokens: 3,
        output_tokens: 4,
        ..Usage::default()
    };
    store
        .commit(
            id,
            owner.generation,
            Commit {
                calls: vec![done(&server, model_key(1), usage)],
                writes: TxWrites::one(Settlement {
                    call: billing_of(id, model_key(1), owner.generation, organization),
                    usage: Some(usage),
                    record_price: again.record_price(),
                }),
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    let record = billing
        .usage_record(id, "1/model/1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.state, "settled");
    assert_eq!(
        record.cost_micros,
        Some(7),
        "7 tokens at the catalog's $1/M"
    );
}

async fn a_receipt_for_unknown_usage_settles_once(server: Server) {
    let store = &server.database.store;
    let billing = &server.database.billing;
    let organization = server.owner_member().await.organization_id;
    grant(&server, 1_000).await;
    let id = bare_execution(&server).await;
    let owner = store
        .claim("node-x", &["billing-test"], 60_000, 10)
        .await
        .unwrap()
        .remove(0);
    // A zero estimate (a request with no tokens) is still a hold, of 0.
    let zero = std::sync::Arc::new(Reservation::new(
        billing_of(id, model_key(1), owner.generation, organization),
        RequestEstimate::default(),
        false,
    ));
    store
        .commit(id, owner.generation, sending(model_key(1), zero))
        .await
        .unwrap();
    let record = billing
        .usage_record(id, "1/model/1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (record.state.as_str(), record.estimate_micros),
        ("held", Some(0))
    );
    // The answer has no usage: unknown, not a successful zero.
    let settle = Settlement {
        call: billing_of(id, model_key(1), owner.generation, organization),
        usage: None,
        record_price: None,
    };
    let mut answer = done(&server, model_key(1), Usage::default());
    answer.usage = None;
    store
        .commit(
            id,
            owner.generation,
            Commit {
                calls: vec![answer],
                writes: TxWrites::one(settle),
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    let record = billing
        .usage_record(id, "1/model/1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.state, "unknown");
    assert_eq!(record.cost_micros, None);
    // A low estimate: the receipt's confirmed usage is charged in full, once.
    let receipt = Usage {
        input_tokens: 300,
        output_tokens: 200,
        ..Usage::default()
    };
    assert!(
        billing
            .settle_receipt(id, "1/model/1", receipt)
            .await
            .unwrap()
    );
    assert!(
        !billing
            .settle_receipt(id, "1/model/1", receipt)
            .await
            .unwrap()
    );
    let credits = billing.credits(organization).await.unwrap();
    assert_eq!(credits.balance_micros, 1_000 - 500);
    // A result for a call that had no reservation (sent before billing): its estimate is
    // missing and stays so.
    let settle = Settlement {
        call: billing_of(id, model_key(3), owner.generation, organization),
        usage: Some(receipt),
        record_price: None,
    };
    store
        .commit(
            id,
            owner.generation,
            Commit {
                calls: vec![done(&server, model_key(3), receipt)],
                writes: TxWrites::one(settle),
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    let record = billing
        .usage_record(id, "1/model/3")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.estimate_micros, None);
    assert_eq!(record.cost_micros, Some(500));
    assert_eq!(
        billing.credits(organization).await.unwrap().balance_micros,
        0,
        "the receipt's 500 and the unreserved call's 500, each charged once, from 1000"
    );
}

async fn usage_reports_sum_by_group_page_and_export_csv(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["ok"])]).await;
    price_fake(&server, &model, 1_000_000).await;
    let first = server.bot(&server.owner, &model, false).await;
    let second = server.bot(&server.owner, &model, false).await;
    let chat_a = server.chat(&server.owner, &first).await;
    let chat_b = server.chat(&server.owner, &second).await;
    for _ in 0..3 {
        assert_eq!(
            turn(&server, &chat_a, "a").await,
            Some(TurnOutcome::Completed)
        );
    }
    assert_eq!(
        turn(&server, &chat_b, "b").await,
        Some(TurnOutcome::Completed)
    );
    let by_bot = usage(&server, &server.owner, "group_by=bot").await;
    let mut rows: Vec<(String, u64, u64)> = by_bot["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["calls"].as_u64().unwrap(),
                r["cost_micros"].as_u64().unwrap(),
            )
        })
        .collect();
    rows.sort();
    let mut expected = vec![
        (first["id"].as_str().unwrap().to_string(), 3, 15),
        (second["id"].as_str().unwrap().to_string(), 1, 5),
    ];
    expected.sort();
    assert_eq!(rows, expected);
    assert!(by_bot.get("next_cursor").is_none());
    let org = usage(&server, &server.owner, "group_by=organization").await;
    assert_eq!(org["items"][0]["calls"], 4);
    assert_eq!(org["items"][0]["cost_micros"], 20);
    assert_eq!(org["items"][0]["input_tokens"], 40);
    let member = usage(&server, &server.owner, "group_by=member").await;
    assert_eq!(
        member["items"][0]["key"],
        json!(server.owner_member().await.member_id.to_string())
    );
    // One Chat by filter.
    let one = usage(
        &server,
        &server.owner,
        &format!("group_by=chat&chat_id={chat_b}"),
    )
    .await;
    assert_eq!(one["items"].as_array().unwrap().len(), 1);
    assert_eq!(one["items"][0]["cost_micros"], 5);
    // Paged: one row a page, the cursor absent on the last.
    let page = usage(&server, &server.owner, "group_by=chat&limit=1").await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    let cursor = page["next_cursor"].as_str().unwrap().to_string();
    let next = usage(
        &server,
        &server.owner,
        &format!("group_by=chat&limit=1&cursor={cursor}"),
    )
    .await;
    assert_eq!(next["items"].as_array().unwrap().len(), 1);
    assert_ne!(next["items"][0]["key"], page["items"][0]["key"]);
    assert!(next.get("next_cursor").is_none());
    // A time range after every call selects nothing.
    let later = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let empty = usage(
        &server,
        &server.owner,
        &format!("from={}", later.replace('+', "%2B")),
    )
    .await;
    assert_eq!(empty["items"], json!([]));
    // The CSV export: a header, then one line per group.
    let csv = server
        .get("/v1/usage/export?group_by=bot", &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(csv.status(), StatusCode::OK);
    assert!(
        csv.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let text = csv.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("bot,calls,"));
    assert!(
        lines.contains(&format!("{},3,3,0,30,15,0,15,0", first["id"].as_str().unwrap()).as_str())
    );
    let bad = server
        .get("/v1/usage?group_by=galaxy", &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(bad).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
}

async fn billing_needs_an_admin_and_a_bot_limited_token_sees_its_bot_only(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["ok"])]).await;
    let first = server.bot(&server.owner, &model, false).await;
    let second = server.bot(&server.owner, &model, false).await;
    let chat_a = server.chat(&server.owner, &first).await;
    let chat_b = server.chat(&server.owner, &second).await;
    turn(&server, &chat_a, "a").await;
    turn(&server, &chat_b, "b").await;
    let member = server.other_member_token().await;
    for path in ["/v1/usage", "/v1/billing/credits", "/v1/billing/prices"] {
        let response = server.get(path, &member).send().await.unwrap();
        assert_eq!(
            error_code(response).await,
            (StatusCode::FORBIDDEN, "forbidden".into()),
            "{path}"
        );
    }
    let granted = server
        .post("/v1/billing/credits/grants", &member)
        .json(&json!({"amount_micros": 5}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(granted).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
    let limited = server.bot_limited_token(&first).await;
    let seen = usage(&server, &limited, "group_by=bot").await;
    let keys: Vec<&str> = seen["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, [first["id"].as_str().unwrap()]);
    let price = server
        .http
        .put(format!("{}/v1/billing/prices", server.base))
        .bearer_auth(&limited)
        .json(&json!({"model": "openai:gpt-4o", "input_micros_per_million": 1, "output_micros_per_million": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(price).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
}

async fn prices_list_the_catalog_with_its_date_and_the_organizations_overrides(server: Server) {
    let prices = json_of(
        server
            .get("/v1/billing/prices", &server.owner)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let gpt4o = prices["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["model"] == "openai:gpt-4o")
        .unwrap()
        .clone();
    assert_eq!(gpt4o["source"], "catalog");
    assert_eq!(gpt4o["as_of"], openbot_server::billing::CATALOG_DATE);
    assert_eq!(gpt4o["input_micros_per_million"], 2_500_000);
    let set = json_of(
        server
            .http
            .put(format!("{}/v1/billing/prices", server.base))
            .bearer_auth(&server.owner)
            .json(
                &json!({"model": "openai:gpt-4o", "input_micros_per_million": 7,
                          "output_micros_per_million": 9}),
            )
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(set["source"], "organization");
    assert_eq!(set["cached_input_micros_per_million"], 7);
    let prices = json_of(
        server
            .get("/v1/billing/prices", &server.owner)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let listed: Vec<&Value> = prices["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["model"] == "openai:gpt-4o")
        .collect();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["source"], "organization");
    let removed = server
        .delete("/v1/billing/prices?model=openai:gpt-4o", &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
    let again = server
        .delete("/v1/billing/prices?model=openai:gpt-4o", &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(again).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
}

async fn a_model_spec_with_a_control_character_is_invalid_input_not_a_storage_fault(
    server: Server,
) {
    // Found by the API contract run on PostgreSQL: a NUL cannot be stored, so it is bad input.
    for path in [
        "/v1/billing/prices?model=openai%3Agpt%00x",
        "/v1/usage?model=a%00b",
        "/v1/usage?group_by=model&cursor=a%00b",
    ] {
        let answer = if path.starts_with("/v1/billing") {
            server.delete(path, &server.owner).send().await.unwrap()
        } else {
            server.get(path, &server.owner).send().await.unwrap()
        };
        assert_eq!(
            error_code(answer).await,
            (StatusCode::BAD_REQUEST, "invalid_input".into()),
            "{path}"
        );
    }
}

async fn a_grant_past_the_balance_limit_is_invalid_input_not_a_storage_fault(server: Server) {
    // Found by the API contract run on PostgreSQL: grants that summed past the integer limit.
    let grant = |amount: u64| {
        server
            .http
            .post(format!("{}/v1/billing/credits/grants", server.base))
            .bearer_auth(&server.owner)
            .json(&json!({ "amount_micros": amount }))
            .send()
    };
    for _ in 0..2 {
        let answer = grant(1_000_000_000_000).await.unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
    }
    let too_big = grant(1_000_000_000_001).await.unwrap();
    assert_eq!(
        error_code(too_big).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    let huge = grant(i64::MAX as u64).await.unwrap();
    assert_eq!(
        error_code(huge).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
}

/// A Turn whose owner reserved a model request and died, and whose row was then damaged: the
/// node that claims it ends it `interrupted`, and that end releases the hold, which would
/// otherwise count against the credits for good. Other work runs meanwhile.
async fn an_interrupted_turn_releases_its_billing_hold(server: Server) {
    let store = &server.database.store;
    let billing = &server.database.billing;
    let organization = server.owner_member().await.organization_id;
    grant(&server, 1_000_000).await;
    let id = bare_execution(&server).await;
    let owner = store
        .claim("node-x", &["billing-test"], 60_000, 10)
        .await
        .unwrap()
        .remove(0);
    let reservation = std::sync::Arc::new(Reservation::new(
        billing_of(id, model_key(1), owner.generation, organization),
        RequestEstimate {
            input_tokens: 100,
            output_tokens: 50,
        },
        false,
    ));
    store
        .commit(id, owner.generation, sending(model_key(1), reservation))
        .await
        .unwrap();
    assert_eq!(
        billing.credits(organization).await.unwrap().held_micros,
        150
    );
    // The owner is gone and the row is a Turn's that this build cannot read.
    server
        .raw_execute(
            "UPDATE executions SET kind = 'turn', scope = 'nobody', lease_expires_at = 0 WHERE id = $1",
            id.as_uuid(),
        )
        .await;
    // A new Turn wakes the node's claims, and runs.
    let (bot, _script) = priced_bot(&server).await;
    let chat = server.chat(&server.owner, &bot).await;
    assert_eq!(
        turn(&server, &chat, "hello").await,
        Some(TurnOutcome::Completed)
    );
    let mut state = None;
    for _ in 0..500 {
        state = server
            .raw_text("SELECT state FROM executions WHERE id = $1", id.as_uuid())
            .await;
        if state.as_deref() == Some("interrupted") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(state.as_deref(), Some("interrupted"));
    let record = billing
        .usage_record(id, "1/model/1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.state, "released");
    assert_eq!(billing.credits(organization).await.unwrap().held_micros, 0);
}

/// A Bot on a free one-answer scripted model that repeats, and the folder of its script.
async fn priced_bot(server: &Server) -> (Value, tempfile::TempDir) {
    server
        .scripted_bot(
            "Free",
            json!({"steps": [{"text": "ok", "usage": {"input_tokens": 1, "output_tokens": 1, "cost_micros": 0}}],
                   "repeat": true}),
        )
        .await
}

async fn an_execution_whose_reply_had_no_usage_says_its_usage_is_unknown(server: Server) {
    let reported = FakeOpenAi::start(vec![Answer::Text(vec!["ok"])]).await;
    let silent = FakeOpenAi::start(vec![Answer::Text(vec!["ok"])]).await;
    silent.without_usage();
    let mut known = Vec::new();
    for model in [&reported, &silent] {
        let bot = server.bot(&server.owner, model, false).await;
        let chat = server.chat(&server.owner, &bot).await;
        let sent = receipt(server.send(&server.owner, &chat, "hi", None).await).await;
        let id = sent["execution_id"].as_str().unwrap();
        server.finish(&server.owner, id).await;
        let view = json_of(
            server
                .get(&format!("/v1/executions/{id}"), &server.owner)
                .send()
                .await
                .unwrap(),
        )
        .await;
        known.push((
            view["usage_known"].clone(),
            view["usage"]["input_tokens"].clone(),
        ));
    }
    // A real count is known; a reply without usage is unknown, not a zero like a real one.
    assert_eq!(known[0].0, true);
    assert_ne!(known[0].1, 0);
    assert_eq!(known[1], (Value::Bool(false), Value::from(0)));
}
