//! Code Mode on a server, over the HTTP API on SQLite and on a real PostgreSQL: a Bot with
//! Code Mode on offers `run_code`, its program's calls reach a registered HTTP tool's real
//! endpoint with the same rules as direct calls (approval rules), and the result is the tool
//! result the model reads.

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

use api::{Raw, Server, postgres, receipt, server, sqlite};
use fake_openai::{Answer, FakeOpenAi};
use openbot_schema::{Event, EventKind, ToolResult};
use outside::Outside;
use reqwest::StatusCode;
use serde_json::{Value, json};

http_tests!(
    a_program_calls_an_http_tool_twice_and_its_result_reaches_the_model,
    a_deny_rule_refuses_a_call_from_code_and_the_program_sees_a_tool_error,
    code_mode_is_turned_on_and_off_by_a_bot_update,
    a_program_runs_against_a_bots_tools_without_a_model,
    a_model_free_run_keeps_the_approval_rules_and_the_limits,
    a_model_free_run_refuses_bad_input_and_unknown_bots,
    a_token_limited_to_one_bot_runs_no_code_against_another_bot,
    a_paused_program_resumes_with_the_time_it_saw_before_the_pause,
    a_retried_code_run_writes_once_and_other_input_under_its_key_conflicts,
    a_code_run_taken_over_midway_never_repeats_its_writes,
);

impl Server {
    async fn register_http(&self, name: &str, url: &str) {
        let response = self
            .http
            .put(format!("{}/v1/tools/{name}", self.base))
            .bearer_auth(&self.owner)
            .json(&json!({"description": "Pays.", "input_schema": {"type": "object", "properties": {"amount": {"type": "number"}}}, "url": url}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }

    async fn code_bot(&self, model: &FakeOpenAi) -> Value {
        let response = self
            .post("/v1/bots", &self.owner)
            .json(
                &json!({"name": "Coder", "model": model.spec(), "code_mode": true,
                          "tools": [{"name": "pay", "input_schema": {"type": "object"}}]}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        response.json().await.unwrap()
    }

    async fn run_turn(&self, bot: &Value, text: &str) -> Vec<Event> {
        let chat = self.chat(&self.owner, bot).await;
        let sent = receipt(self.send(&self.owner, &chat, text, None).await).await;
        let execution = sent["execution_id"].as_str().unwrap().to_string();
        self.finish(&self.owner, &execution).await
    }
}

fn results(events: &[Event]) -> Vec<ToolResult> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } => Some(result.clone()),
            _ => None,
        })
        .collect()
}

fn code_result(events: &[Event]) -> Value {
    let result = results(events)
        .into_iter()
        .find(|r| r.name == "run_code")
        .expect("a run_code result");
    serde_json::from_str(result.output[0].as_text().unwrap()).unwrap()
}

const TWO_PAYMENTS: &str = "const a = await tools.pay({amount: 1}); const b = await tools.pay({amount: 2}); return [a, b];";

async fn a_program_calls_an_http_tool_twice_and_its_result_reaches_the_model(server: Server) {
    let outside = Outside::start(false).await;
    server.register_http("pay", &outside.url).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("run_code", json!({"code": TWO_PAYMENTS})),
        Answer::Text(vec!["Paid twice."]),
    ])
    .await;
    let bot = server.code_bot(&model).await;
    let events = server.run_turn(&bot, "Pay 1 and 2").await;
    let result = code_result(&events);
    assert_eq!(result["ok"], json!(true), "{result}");
    assert_eq!(result["tool_calls"], json!(2));
    assert_eq!(outside.received(), 2);
    // Each call from code is a call of the Turn: its own tool_result, keyed below the code call.
    let inner: Vec<ToolResult> = results(&events)
        .into_iter()
        .filter(|r| r.name == "pay")
        .collect();
    assert_eq!(inner.len(), 2);
    assert!(
        inner
            .iter()
            .all(|r| r.call_id.contains(".0.") || r.call_id.contains(".1.")),
        "{inner:?}"
    );
    assert_eq!(model.total_requests(), 2);
}

async fn a_deny_rule_refuses_a_call_from_code_and_the_program_sees_a_tool_error(server: Server) {
    let outside = Outside::start(false).await;
    server.register_http("pay", &outside.url).await;
    let rule = server
        .post("/v1/approval-rules", &server.owner)
        .json(&json!({"tool": "pay", "arguments": "*\"amount\":2*", "action": "deny"}))
        .send()
        .await
        .unwrap();
    assert_eq!(rule.status(), StatusCode::CREATED);
    let code = "const a = await tools.pay({amount: 1}); \
                try { await tools.pay({amount: 2}); return 'paid'; } catch (e) { return [a, e.name, e.message]; }";
    let model = FakeOpenAi::start(vec![
        Answer::Tool("run_code", json!({"code": code})),
        Answer::Text(vec!["One was refused."]),
    ])
    .await;
    let bot = server.code_bot(&model).await;
    let events = server.run_turn(&bot, "Pay").await;
    let result = code_result(&events);
    assert_eq!(result["value"][1], json!("ToolError"), "{result}");
    assert!(
        result["value"][2]
            .as_str()
            .unwrap()
            .contains("do not allow"),
        "{result}"
    );
    assert_eq!(
        outside.received(),
        1,
        "the refused call never reached the endpoint"
    );
}

async fn code_mode_is_turned_on_and_off_by_a_bot_update(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = server.code_bot(&model).await;
    assert_eq!(bot["spec"]["code_mode"], json!(true));
    let id = bot["id"].as_str().unwrap();
    let response = server
        .patch(&format!("/v1/bots/{id}"), &server.owner)
        .json(&json!({"code_mode": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let updated: Value = response.json().await.unwrap();
    assert_eq!(updated["spec"]["code_mode"], json!(false));
    let bad = server
        .patch(&format!("/v1/bots/{id}"), &server.owner)
        .json(&json!({"code_mode": "yes"}))
        .send()
        .await
        .unwrap();
    assert!(bad.status().is_client_error(), "{}", bad.status());
}

async fn code_run(server: &Server, bot: &Value, body: Value) -> reqwest::Response {
    let id = bot["id"].as_str().unwrap();
    server
        .post(&format!("/v1/bots/{id}/code-runs"), &server.owner)
        .json(&body)
        .send()
        .await
        .unwrap()
}

async fn a_program_runs_against_a_bots_tools_without_a_model(server: Server) {
    let outside = Outside::start(false).await;
    server.register_http("pay", &outside.url).await;
    let model = FakeOpenAi::start(vec![]).await;
    let bot = server.code_bot(&model).await;
    let response = code_run(
        &server,
        &bot,
        json!({"code": "console.log('paying'); return await tools.pay({amount: 3});"}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let result: Value = response.json().await.unwrap();
    assert_eq!(result["ok"], json!(true), "{result}");
    assert_eq!(result["value"], json!("wrote {\"amount\":3}"));
    assert_eq!(result["console"][0]["text"], json!("paying"));
    assert_eq!(result["tool_calls"], json!(1));
    assert_eq!(outside.received(), 1);
    assert_eq!(model.total_requests(), 0, "no model is asked");
}

async fn a_model_free_run_keeps_the_approval_rules_and_the_limits(server: Server) {
    let outside = Outside::start(false).await;
    server.register_http("pay", &outside.url).await;
    for rule in [
        json!({"tool": "pay", "arguments": "*\"amount\":2*", "action": "deny"}),
        json!({"tool": "pay", "arguments": "*\"amount\":9*", "action": "ask"}),
    ] {
        let response = server
            .post("/v1/approval-rules", &server.owner)
            .json(&rule)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    }
    let model = FakeOpenAi::start(vec![]).await;
    let bot = server.code_bot(&model).await;
    let code = "const out = []; for (const amount of [2, 9]) { try { await tools.pay({amount}); } catch (e) { out.push(e.code); } } return out;";
    let result: Value = code_run(&server, &bot, json!({"code": code}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        result["value"],
        json!(["tool.denied", "tool.needs_approval"]),
        "{result}"
    );
    assert_eq!(outside.received(), 0, "neither call reached the endpoint");
    let result: Value = code_run(&server, &bot, json!({"code": "while (true) {}"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(result["ok"], json!(false));
    assert_eq!(
        result["error"]["code"],
        json!("code_mode.fuel_exhausted"),
        "{result}"
    );
}

async fn a_model_free_run_refuses_bad_input_and_unknown_bots(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = server.code_bot(&model).await;
    let bad = code_run(&server, &bot, json!({"code": "return 1", "extra": true})).await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let missing = code_run(&server, &bot, json!({})).await;
    assert_eq!(missing.status(), StatusCode::BAD_REQUEST);
    let unknown = json!({"id": openbot_schema::BotId::new().to_string()});
    assert_eq!(
        code_run(&server, &unknown, json!({"code": "return 1"}))
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    let other = server.other_member_token().await;
    let id = bot["id"].as_str().unwrap();
    let response = server
        .post(&format!("/v1/bots/{id}/code-runs"), &other)
        .json(&json!({"code": "return 1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        StatusCode::NOT_FOUND,
        "another member's private Bot is not visible"
    );
}

/// A token limited to Bot A runs programs against Bot A only: Bot B (the same owner's) is
/// `404`, as if it did not exist, and nothing runs.
async fn a_token_limited_to_one_bot_runs_no_code_against_another_bot(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let a = server.code_bot(&model).await;
    let b = server.code_bot(&model).await;
    let limited = server.bot_limited_token(&a).await;
    let run = |bot: &Value| {
        let id = bot["id"].as_str().unwrap().to_string();
        server
            .post(&format!("/v1/bots/{id}/code-runs"), &limited)
            .json(&json!({"code": "return 1"}))
            .send()
    };
    let own = run(&a).await.unwrap();
    assert_eq!(own.status(), StatusCode::OK);
    let other = run(&b).await.unwrap();
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
}

/// The program passes its `Date.now()` to both writes. Paused while its first write is out,
/// it lets that write save its result, stops before the second and waits; resumed later (its
/// limit start moved by the pause), it runs again from the start, reads the time it saved when
/// it first started, replays the first write and sends only the second.
async fn a_paused_program_resumes_with_the_time_it_saw_before_the_pause(server: Server) {
    let outside = Outside::start(false).await;
    server.register_http("pay", &outside.url).await;
    let code = "const t = Date.now(); const a = await tools.pay({amount: 1, t}); \
                const b = await tools.pay({amount: 2, t}); return [t, a, b];";
    let model = FakeOpenAi::start(vec![
        Answer::Tool("run_code", json!({"code": code})),
        Answer::Text(vec!["Paid twice."]),
    ])
    .await;
    let bot = server.code_bot(&model).await;
    let chat = server.chat(&server.owner, &bot).await;
    outside.hold().await;
    let sent = receipt(server.send(&server.owner, &chat, "Pay", None).await).await;
    let execution = sent["execution_id"].as_str().unwrap().to_string();
    outside.wait_for_writes(1).await;
    let paused = server
        .post(&format!("/v1/executions/{execution}/pause"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(paused.status(), StatusCode::ACCEPTED);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    outside.release();
    // Paused: the first write saved its result and the second was not sent.
    let mut state = Value::Null;
    for _ in 0..200 {
        let execution: Value = server
            .get(&format!("/v1/executions/{execution}"), &server.owner)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        state = execution["state"].clone();
        if state == json!("waiting") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(state, json!("waiting"), "the paused Turn waits");
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(outside.received(), 1, "nothing is sent while paused");
    let resumed = server
        .post(&format!("/v1/executions/{execution}/resume"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), StatusCode::ACCEPTED);
    let events = server.finish(&server.owner, &execution).await;
    let result = code_result(&events);
    assert_eq!(result["ok"], json!(true), "{result}");
    let t = result["value"][0].as_i64().unwrap();
    for write in [&result["value"][1], &result["value"][2]] {
        assert!(
            write.as_str().unwrap().contains(&format!("\"t\":{t}")),
            "both writes carry the same time: {result}"
        );
    }
    assert_eq!(outside.received(), 2, "the first write was not sent again");
}

async fn code_run_json(server: &Server, bot: &Value, body: Value) -> (StatusCode, Value) {
    let response = code_run(server, bot, body).await;
    (response.status(), response.json().await.unwrap())
}

/// A model-free run is an execution with a command key: a retry answers the first run's
/// execution and saved result and sends nothing again; another program under the key is a
/// conflict; without a key each request is a run of its own.
async fn a_retried_code_run_writes_once_and_other_input_under_its_key_conflicts(server: Server) {
    let outside = Outside::start(false).await;
    server.register_http("pay", &outside.url).await;
    let model = FakeOpenAi::start(vec![]).await;
    let bot = server.code_bot(&model).await;
    let code = "console.log('paying'); return await tools.pay({amount: 5});";
    let body = json!({"code": code, "command_key": "pay-5"});
    let (status, first) = code_run_json(&server, &bot, body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["ok"], json!(true), "{first}");
    assert_eq!(first["value"], json!("wrote {\"amount\":5}"));
    let execution = first["execution_id"].as_str().unwrap().to_string();
    assert_eq!(outside.received(), 1);

    // The run is an execution of its own, its write a call of its call log.
    let view: Value = server
        .get(&format!("/v1/executions/{execution}"), &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(view["kind"], json!("code_run"), "{view}");
    assert_eq!(view["state"], json!("completed"), "{view}");
    let events = server.finish(&server.owner, &execution).await;
    assert!(
        events.iter().any(|e| matches!(&e.kind,
            EventKind::ToolCall { call, .. } if call.name == "pay")),
        "{events:?}"
    );
    assert_eq!(code_result(&events)["value"], first["value"]);

    // A retry (a lost answer): the same execution and result, nothing sent again.
    let (status, again) = code_run_json(&server, &bot, body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again, first);
    assert_eq!(outside.received(), 1, "the retry sent nothing");

    // Another program under the same key is a conflict, and sends nothing.
    let other = code_run(
        &server,
        &bot,
        json!({"code": "return await tools.pay({amount: 6});", "command_key": "pay-5"}),
    )
    .await;
    assert_eq!(other.status(), StatusCode::CONFLICT);
    assert_eq!(outside.received(), 1);

    // Without a key, each request is a run of its own.
    let (_, one) = code_run_json(&server, &bot, json!({"code": code})).await;
    let (_, two) = code_run_json(&server, &bot, json!({"code": code})).await;
    assert_ne!(one["execution_id"], two["execution_id"]);
    assert_eq!(outside.received(), 3);
}

impl Server {
    /// Takes the code run's lease from its owner, as a node that took over and died would:
    /// the owner stops at its next renewal, and once the taker's lease lapses the engine takes
    /// the run back and runs its program again from its call log.
    async fn steal_code_run(&self) {
        let lease = chrono::Utc::now().timestamp_millis() + 3_000;
        let taken = match &self.raw {
            Raw::Sqlite(store, _) => sqlx::query(
                "UPDATE executions SET generation = generation + 1, owner_node = 'thief', \
                 lease_expires_at = ?1 WHERE kind = 'code_run'",
            )
            .bind(lease)
            .execute(store.pool())
            .await
            .unwrap()
            .rows_affected(),
            Raw::Postgres(store) => sqlx::query(
                "UPDATE executions SET generation = generation + 1, owner_node = 'thief', \
                 lease_expires_at = $1 WHERE kind = 'code_run'",
            )
            .bind(lease)
            .execute(store.pool())
            .await
            .unwrap()
            .rows_affected(),
        };
        assert_eq!(taken, 1, "one code run to take over");
        self.engine
            .context()
            .hub
            .announce(openbot_server::engine::Wake::Work);
    }
}

/// The program writes to `pay` (answered) and then to `send`, whose answer never comes. The
/// run is taken over while that write is out: the new owner runs the program again, answers
/// `pay` from the call log (not sent again) and, since `send` was maybe applied and has no
/// retry rule, waits in `outcome_unknown` instead of sending it again. The route answers 202
/// with the execution; once the write is decided `applied`, a retry under the same command
/// key answers the completed run, and each endpoint got exactly one write.
async fn a_code_run_taken_over_midway_never_repeats_its_writes(server: Server) {
    let pay = Outside::start(false).await;
    let send = Outside::unanswering(1).await;
    server.register_http("pay", &pay.url).await;
    server.register_http("send", &send.url).await;
    let model = FakeOpenAi::start(vec![]).await;
    let response = server
        .post("/v1/bots", &server.owner)
        .json(
            &json!({"name": "Coder", "model": model.spec(), "code_mode": true,
            "tools": [{"name": "pay", "input_schema": {"type": "object"}},
                      {"name": "send", "input_schema": {"type": "object"}}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let bot: Value = response.json().await.unwrap();
    let body = json!({"code": "const a = await tools.pay({amount: 1}); \
                                const b = await tools.send({amount: 2}); return [a, b];",
                      "command_key": "pay-and-send"});
    let first = {
        let (base, owner, http) = (
            server.base.clone(),
            server.owner.clone(),
            server.http.clone(),
        );
        let (id, body) = (bot["id"].as_str().unwrap().to_string(), body.clone());
        tokio::spawn(async move {
            let response = http
                .post(format!("{base}/v1/bots/{id}/code-runs"))
                .bearer_auth(owner)
                .json(&body)
                .send()
                .await
                .unwrap();
            (response.status(), response.json::<Value>().await.unwrap())
        })
    };
    send.wait_for_writes(1).await;
    server.steal_code_run().await;
    let (status, waiting) = first.await.unwrap();
    assert_eq!(status, StatusCode::ACCEPTED, "{waiting}");
    assert_eq!(
        waiting["error"]["code"],
        json!("code_mode.outcome_unknown"),
        "{waiting}"
    );
    let execution = waiting["execution_id"].as_str().unwrap().to_string();
    assert_eq!(pay.received(), 1, "the saved write was not sent again");
    assert_eq!(send.received(), 1, "the lost write was not sent again");

    let page: Value = server
        .get("/v1/unknown-outcomes", &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let outcome = &page["items"][0];
    assert_eq!(outcome["execution_id"], json!(execution), "{page}");
    assert_eq!(outcome["kind"], json!("code_run"), "{page}");
    assert_eq!(outcome["tool_call"]["name"], json!("send"), "{page}");
    let call = outcome["call"].as_str().unwrap().to_string();
    let decided = server
        .post(
            &format!("/v1/executions/{execution}/outcome"),
            &server.owner,
        )
        .json(&json!({"call": call, "decision": "applied", "result": "sent, receipt 7"}))
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), StatusCode::OK);

    let (status, done) = code_run_json(&server, &bot, body).await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["ok"], json!(true), "{done}");
    assert_eq!(
        done["value"],
        json!(["wrote {\"amount\":1}", "sent, receipt 7"]),
        "{done}"
    );
    assert_eq!(done["execution_id"], json!(execution));
    assert_eq!(pay.received(), 1);
    assert_eq!(send.received(), 1);
}
