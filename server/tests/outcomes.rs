//! Unknown outcomes end to end over the HTTP API, on SQLite and on a real PostgreSQL. A Turn
//! sends an unsafe write (an HTTP tool without a retry rule) whose endpoint never answers;
//! its owner loses the lease meanwhile, so the new owner cannot know whether the write was
//! applied and waits in `outcome_unknown`. A person lists what waits and decides: applied
//! (with a result), not applied (sent again once), or give up; with its own right, the
//! caller's scope, conflicts, and an audit entry in the decision's transaction.

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

use api::{Raw, Server, error_code, outcome_of, postgres, receipt, server, sqlite};
use fake_openai::{Answer, FakeOpenAi};
use openbot_schema::{ErrorCategory, EventKind, ExecutionId, TurnOutcome};
use openbot_server::engine::Wake;
use outside::Outside;
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

http_tests!(
    the_list_shows_the_waiting_call_with_its_tool_and_arguments,
    the_list_is_paged_with_a_cursor,
    an_applied_decision_saves_the_result_and_the_turn_goes_on_without_sending_again,
    a_not_applied_decision_sends_the_call_again_exactly_once,
    giving_up_ends_the_execution_failed_with_the_reason_and_sends_nothing,
    a_token_without_the_outcomes_right_gets_403,
    another_members_unknown_outcome_is_not_found,
    a_bot_limited_token_neither_lists_nor_decides_another_bots_unknown_outcome,
    a_second_decision_for_the_same_call_is_a_conflict,
    a_decision_for_another_call_is_a_conflict,
    a_failed_audit_write_rolls_the_decision_back,
    a_lost_call_from_code_is_listed_and_an_applied_decision_replays_the_program_with_it,
    a_not_applied_decision_on_a_call_from_code_sends_it_again_exactly_once,
    a_lost_call_from_code_to_a_retry_safe_tool_is_sent_again_under_the_same_key,
);

/// The call a Code Mode Turn waits for: call 0 of the program of step 1's first code call.
const CODE_CALL: &str = "1/code:0:0/1";

/// A program that writes once and returns what the write answered.
const WRITING_PROGRAM: &str = "const r = await tools.write({text: 'pay 5'}); return {r};";

/// The call every test's Turn waits for: step 1, the first tool call, first attempt.
const CALL: &str = "1/tool:0/1";

/// Polls `check` until it gives a value, for up to 30 s.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..600 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

fn script() -> Vec<Answer> {
    vec![
        Answer::Tool("write", json!({"text": "pay 5"})),
        Answer::Text(vec!["done"]),
    ]
}

fn uuid_of(id: &str) -> Uuid {
    id.parse::<ExecutionId>().unwrap().as_uuid()
}

impl Server {
    /// A Bot of the owner's whose model calls `write`, an HTTP tool on `outside` with no retry
    /// rule, once, and then answers.
    async fn writing_bot(&self, outside: &Outside, model: &FakeOpenAi) -> Value {
        let registered = self
            .http
            .put(format!("{}/v1/tools/write", self.base))
            .bearer_auth(&self.owner)
            .json(&json!({"description": "Writes.", "input_schema": {"type": "object"}, "url": outside.url}))
            .send()
            .await
            .unwrap();
        assert_eq!(registered.status(), StatusCode::OK);
        let spec = json!({"name": "Writer", "model": model.spec(),
            "tools": [{"name": "write", "input_schema": {"type": "object"}}]});
        let created = self
            .post("/v1/bots", &self.owner)
            .json(&spec)
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), StatusCode::CREATED);
        created.json().await.unwrap()
    }

    /// Takes the execution's lease from its owner, as a node that took over and died would:
    /// the owner stops at its next renewal, and once the taker's lease lapses the engine
    /// takes the execution back and replays its call log.
    async fn steal(&self, id: &str) {
        let lease = chrono::Utc::now().timestamp_millis() + 3_000;
        match &self.raw {
            Raw::Sqlite(store, _) => {
                sqlx::query("UPDATE executions SET generation = generation + 1, owner_node = 'thief', lease_expires_at = ?2 WHERE id = ?1")
                    .bind(uuid_of(id))
                    .bind(lease)
                    .execute(store.pool())
                    .await
                    .unwrap();
            }
            Raw::Postgres(store) => {
                sqlx::query("UPDATE executions SET generation = generation + 1, owner_node = 'thief', lease_expires_at = $2 WHERE id = $1")
                    .bind(uuid_of(id))
                    .bind(lease)
                    .execute(store.pool())
                    .await
                    .unwrap();
            }
        }
        // The runner learns when the taker's lease lapses.
        self.engine.context().hub.announce(Wake::Work);
    }

    /// The same Bot with Code Mode on: its model writes from a program.
    async fn code_writing_bot(&self, outside: &Outside, model: &FakeOpenAi) -> Value {
        let bot = self.writing_bot(outside, model).await;
        let updated = self
            .http
            .patch(format!(
                "{}/v1/bots/{}",
                self.base,
                bot["id"].as_str().unwrap()
            ))
            .bearer_auth(&self.owner)
            .json(&json!({"code_mode": true}))
            .send()
            .await
            .unwrap();
        assert_eq!(updated.status(), StatusCode::OK);
        updated.json().await.unwrap()
    }

    async fn state(&self, id: &str) -> String {
        let view: Value = self
            .get(&format!("/v1/executions/{id}"), &self.owner)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        view["state"].as_str().unwrap().to_string()
    }

    async fn wait_state(&self, id: &str, wanted: &[&str]) -> String {
        eventually(&format!("execution {id} in {wanted:?}"), || async {
            let state = self.state(id).await;
            wanted.contains(&state.as_str()).then_some(state)
        })
        .await
    }

    /// Sends to a new Chat of `bot`; returns the Turn once it waits in `outcome_unknown` for
    /// its write, the `nth` write `outside` received.
    async fn unknown_turn(&self, bot: &Value, outside: &Outside, nth: u32) -> String {
        let chat = self.chat(&self.owner, bot).await;
        let sent = receipt(self.send(&self.owner, &chat, "Pay 5", None).await).await;
        let id = sent["execution_id"].as_str().unwrap().to_string();
        outside.wait_for_writes(nth).await;
        self.steal(&id).await;
        self.wait_state(&id, &["outcome_unknown"]).await;
        id
    }

    async fn unknown_outcomes(&self, token: &str, query: &str) -> reqwest::Response {
        self.get(&format!("/v1/unknown-outcomes{query}"), token)
            .send()
            .await
            .unwrap()
    }

    async fn decide_outcome(&self, token: &str, id: &str, body: Value) -> reqwest::Response {
        self.post(&format!("/v1/executions/{id}/outcome"), token)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// The audit entries of an execution's decisions: decision, member, token and reason.
    async fn audit(&self, id: &str) -> Vec<(String, Uuid, Option<Uuid>, Option<String>)> {
        let sql = match &self.raw {
            Raw::Sqlite(..) => {
                "SELECT decision, member_id, token_id, reason FROM outcome_decisions WHERE execution_id = ?1"
            }
            Raw::Postgres(_) => {
                "SELECT decision, member_id, token_id, reason FROM outcome_decisions WHERE execution_id = $1"
            }
        };
        match &self.raw {
            Raw::Sqlite(store, _) => {
                sqlx::query_as::<_, (String, Uuid, Option<Uuid>, Option<String>)>(sql)
                    .bind(uuid_of(id))
                    .fetch_all(store.pool())
                    .await
                    .unwrap()
            }
            Raw::Postgres(store) => {
                sqlx::query_as::<_, (String, Uuid, Option<Uuid>, Option<String>)>(sql)
                    .bind(uuid_of(id))
                    .fetch_all(store.pool())
                    .await
                    .unwrap()
            }
        }
    }
}

async fn audit_failing(server: &Server, fail: bool) {
    match &server.raw {
        Raw::Sqlite(store, _) => {
            let query = if fail {
                sqlx::query(
                    "CREATE TRIGGER fail_outcome_audit BEFORE INSERT ON outcome_decisions BEGIN SELECT RAISE(ABORT, 'audit unavailable'); END",
                )
            } else {
                sqlx::query("DROP TRIGGER fail_outcome_audit")
            };
            query.execute(store.pool()).await.unwrap();
        }
        Raw::Postgres(store) => {
            let queries = if fail {
                vec![
                    sqlx::query(
                        "CREATE FUNCTION fail_outcome_audit() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'audit unavailable'; END $$ LANGUAGE plpgsql",
                    ),
                    sqlx::query(
                        "CREATE TRIGGER fail_outcome_audit BEFORE INSERT ON outcome_decisions FOR EACH ROW EXECUTE FUNCTION fail_outcome_audit()",
                    ),
                ]
            } else {
                vec![sqlx::query(
                    "DROP TRIGGER fail_outcome_audit ON outcome_decisions",
                )]
            };
            for query in queries {
                query.execute(store.pool()).await.unwrap();
            }
        }
    }
}

async fn the_list_shows_the_waiting_call_with_its_tool_and_arguments(server: Server) {
    let outside = Outside::unanswering(1).await;
    let model = FakeOpenAi::start(script()).await;
    let bot = server.writing_bot(&outside, &model).await;
    let id = server.unknown_turn(&bot, &outside, 1).await;

    let listed = server.unknown_outcomes(&server.owner, "").await;
    assert_eq!(listed.status(), StatusCode::OK);
    let page: Value = listed.json().await.unwrap();
    let outcomes = page["items"].as_array().unwrap();
    assert_eq!(outcomes.len(), 1, "{page}");
    let outcome = &outcomes[0];
    assert_eq!(outcome["execution_id"], id.as_str());
    assert_eq!(outcome["kind"], "turn");
    assert_eq!(outcome["call"], CALL);
    assert_eq!(
        (outcome["step"].as_u64(), outcome["attempt"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(outcome["tool_call"]["name"], "write");
    assert_eq!(outcome["tool_call"]["arguments"], json!({"text": "pay 5"}));
    assert_eq!(
        outside.keys(),
        vec![outcome["idempotency_key"].as_str().unwrap().to_string()],
        "the key the endpoint received"
    );
    assert!(page.get("next_cursor").is_none(), "one page: {page}");
    assert_eq!(outside.received(), 1, "listing sends nothing");
}

async fn the_list_is_paged_with_a_cursor(server: Server) {
    let outside = Outside::unanswering(2).await;
    let model = FakeOpenAi::start(script()).await;
    let bot = server.writing_bot(&outside, &model).await;
    let first = server.unknown_turn(&bot, &outside, 1).await;
    let second = server.unknown_turn(&bot, &outside, 2).await;

    let page: Value = server
        .unknown_outcomes(&server.owner, "?limit=1")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["items"][0]["execution_id"], first.as_str());
    let cursor = page["next_cursor"].as_str().unwrap();
    let next: Value = server
        .unknown_outcomes(&server.owner, &format!("?limit=1&cursor={cursor}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(next["items"].as_array().unwrap().len(), 1);
    assert_eq!(next["items"][0]["execution_id"], second.as_str());
    assert!(next.get("next_cursor").is_none(), "the last page: {next}");
    let (status, code) = error_code(server.unknown_outcomes(&server.owner, "?limit=0").await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_REQUEST, "invalid_input")
    );
}

async fn an_applied_decision_saves_the_result_and_the_turn_goes_on_without_sending_again(
    server: Server,
) {
    let outside = Outside::unanswering(1).await;
    let model = FakeOpenAi::start(script()).await;
    let bot = server.writing_bot(&outside, &model).await;
    let id = server.unknown_turn(&bot, &outside, 1).await;

    let decided = server
        .decide_outcome(
            &server.owner,
            &id,
            json!({"call": CALL, "decision": "applied", "result": "paid, receipt 42", "reason": "seen in the ledger"}),
        )
        .await;
    assert_eq!(decided.status(), StatusCode::OK);
    let record: Value = decided.json().await.unwrap();
    assert_eq!(record["decision"], "applied");
    assert_eq!(record["call"], CALL);

    let events = server.finish(&server.owner, &id).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(outside.received(), 1, "the write was not sent again");
    let result = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } => Some(result.clone()),
            _ => None,
        })
        .expect("the decided result is published as the call's result");
    assert_eq!(result.name, "write");
    assert!(!result.is_error);
    assert!(
        model.bodies().last().unwrap().contains("paid, receipt 42"),
        "the model goes on with the decided result"
    );
    let owner = server.owner_member().await;
    let audit = server.audit(&id).await;
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].0, "applied");
    assert_eq!(audit[0].1, owner.member_id);
    assert_eq!(
        audit[0].2.map(|t| t.to_string()),
        record["token_id"].as_str().map(str::to_string)
    );
    assert!(audit[0].2.is_some(), "the token is recorded");
    assert_eq!(audit[0].3.as_deref(), Some("seen in the ledger"));
}

async fn a_not_applied_decision_sends_the_call_again_exactly_once(server: Server) {
    let outside = Outside::unanswering(1).await;
    let model = FakeOpenAi::start(script()).await;
    let bot = server.writing_bot(&outside, &model).await;
    let id = server.unknown_turn(&bot, &outside, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(outside.received(), 1, "nothing is sent without a decision");

    let decided = server
        .decide_outcome(
            &server.owner,
            &id,
            json!({"call": CALL, "decision": "not_applied"}),
        )
        .await;
    assert_eq!(decided.status(), StatusCode::OK);
    let events = server.finish(&server.owner, &id).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(outside.received(), 2, "sent again exactly once");
    let keys = outside.keys();
    assert_eq!(
        keys.len(),
        2,
        "a new attempt has its own idempotency key: {keys:?}"
    );
    assert!(keys.iter().any(|k| k.ends_with(":1:tool0:2")), "{keys:?}");
    let results: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } => Some(result.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 1);
    assert!(!results[0].is_error, "{results:?}");
}

async fn giving_up_ends_the_execution_failed_with_the_reason_and_sends_nothing(server: Server) {
    let outside = Outside::unanswering(1).await;
    let model = FakeOpenAi::start(script()).await;
    let bot = server.writing_bot(&outside, &model).await;
    let id = server.unknown_turn(&bot, &outside, 1).await;

    let decided = server
        .decide_outcome(
            &server.owner,
            &id,
            json!({"call": CALL, "decision": "give_up", "reason": "the bank cannot tell"}),
        )
        .await;
    assert_eq!(decided.status(), StatusCode::OK);
    let events = server.finish(&server.owner, &id).await;
    let error_id = match &events.last().unwrap().kind {
        EventKind::Failed { category, error_id } => {
            assert_eq!(*category, ErrorCategory::Tool);
            *error_id
        }
        other => panic!("expected a failed end, got {other:?}"),
    };
    assert_eq!(server.state(&id).await, "failed");
    assert_eq!(outside.received(), 1, "nothing was sent again");
    assert_eq!(model.requests_at(1), 0, "no further model request");
    let cx = server.engine.context();
    let (_, blob) = cx
        .store
        .error_record(error_id.as_uuid())
        .await
        .unwrap()
        .unwrap();
    let cause = String::from_utf8(cx.keys.open(&blob).unwrap()).unwrap();
    assert!(cause.contains("the bank cannot tell"), "{cause}");
    assert_eq!(server.audit(&id).await[0].0, "give_up");
}

async fn a_token_without_the_outcomes_right_gets_403(server: Server) {
    let outside = Outside::unanswering(1).await;
    let model = FakeOpenAi::start(script()).await;
    let bot = server.writing_bot(&outside, &model).await;
    let id = server.unknown_turn(&bot, &outside, 1).await;
    let limited = server
        .token_with(json!([
            {"resource": "executions", "action": "read"},
            {"resource": "executions", "action": "write"},
            {"resource": "chats", "action": "write"}
        ]))
        .await;

    let (status, code) = error_code(server.unknown_outcomes(&limited, "").await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::FORBIDDEN, "forbidden")
    );
    let decided = server
        .decide_outcome(
            &limited,
            &id,
            json!({"call": CALL, "decision": "not_applied"}),
        )
        .await;
    let (status, code) = error_code(decided).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::FORBIDDEN, "forbidden")
    );
    assert_eq!(server.state(&id).await, "outcome_unknown");
    assert!(server.audit(&id).await.is_empty());
    assert_eq!(outside.received(), 1);
}

async fn another_members_unknown_outcome_is_not_found(server: Server) {
    let outside = Outside::unanswering(1).await;
    let model = FakeOpenAi::start(script()).await;
    let bot = server.writing_bot(&outside, &model).await;
    let id = server.unknown_turn(&bot, &outside, 1).await;
    let other = server.other_member_token().await;

    let page: Value = server
        .unknown_outcomes(&other, "")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        page["items"],
        json!([]),
        "another member's work is not listed"
    );
    let decided = server
        .decide_outcome(
            &other,
            &id,
            json!({"call": CALL, "decision": "not_applied"}),
        )
        .await;
    let (status, code) = error_code(decided).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    assert_eq!(server.state(&id).await, "outcome_unknown");
    assert_eq!(outside.received(), 1);
}

async fn a_second_decision_for_the_same_call_is_a_conflict(server: Server) {
    let outside = Outside::unanswering(1).await;
    let model = FakeOpenAi::start(script()).await;
    let bot = server.writing_bot(&outside, &model).await;
    let id = server.unknown_turn(&bot, &outside, 1).await;

    let first = server
        .decide_outcome(
            &server.owner,
            &id,
            json!({"call": CALL, "decision": "applied", "result": "paid"}),
        )
        .await;
    assert_eq!(first.status(), StatusCode::OK);
    let second = server
        .decide_outcome(
            &server.owner,
            &id,
            json!({"call": CALL, "decision": "not_applied"}),
        )
        .await;
    let (status, code) = error_code(second).await;
    assert_eq!((status, code.as_str()), (StatusCode::CONFLICT, "conflict"));
    let events = server.finish(&server.owner, &id).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(outside.received(), 1, "the second decision sent nothing");
    assert_eq!(server.audit(&id).await.len(), 1, "one decision recorded");
}

async fn a_decision_for_another_call_is_a_conflict(server: Server) {
    let outside = Outside::unanswering(1).await;
    let model = FakeOpenAi::start(script()).await;
    let bot = server.writing_bot(&outside, &model).await;
    let id = server.unknown_turn(&bot, &outside, 1).await;

    let stale = server
        .decide_outcome(
            &server.owner,
            &id,
            json!({"call": "1/tool:0/2", "decision": "not_applied"}),
        )
        .await;
    let (status, code) = error_code(stale).await;
    assert_eq!((status, code.as_str()), (StatusCode::CONFLICT, "conflict"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.state(&id).await, "outcome_unknown");
    assert_eq!(outside.received(), 1);
    assert!(server.audit(&id).await.is_empty());
}

async fn a_failed_audit_write_rolls_the_decision_back(server: Server) {
    let outside = Outside::unanswering(1).await;
    let model = FakeOpenAi::start(script()).await;
    let bot = server.writing_bot(&outside, &model).await;
    let id = server.unknown_turn(&bot, &outside, 1).await;

    audit_failing(&server, true).await;
    let failed = server
        .decide_outcome(
            &server.owner,
            &id,
            json!({"call": CALL, "decision": "applied", "result": "paid"}),
        )
        .await;
    assert_eq!(
        error_code(failed).await,
        (StatusCode::INTERNAL_SERVER_ERROR, "request_failed".into())
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        server.state(&id).await,
        "outcome_unknown",
        "the decision was rolled back"
    );
    let call = server
        .engine
        .context()
        .store
        .latest_call(
            id.parse().unwrap(),
            1,
            openbot_core::turn::CallSlot::Tool(0),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        call.phase,
        openbot_server::store::CallPhase::Sending,
        "no result was saved"
    );
    let page: Value = server
        .unknown_outcomes(&server.owner, "")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(page["items"].as_array().unwrap().len(), 1, "it still waits");

    audit_failing(&server, false).await;
    let decided = server
        .decide_outcome(
            &server.owner,
            &id,
            json!({"call": CALL, "decision": "applied", "result": "paid"}),
        )
        .await;
    assert_eq!(decided.status(), StatusCode::OK);
    let events = server.finish(&server.owner, &id).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(outside.received(), 1);
}

async fn a_bot_limited_token_neither_lists_nor_decides_another_bots_unknown_outcome(
    server: Server,
) {
    let outside = Outside::unanswering(1).await;
    let model = FakeOpenAi::start(script()).await;
    let bot = server.writing_bot(&outside, &model).await;
    let id = server.unknown_turn(&bot, &outside, 1).await;
    // The same member's token, limited to another Bot.
    let other_model = FakeOpenAi::start(script()).await;
    let other_bot = server.bot(&server.owner, &other_model, false).await;
    let limited = server.bot_limited_token(&other_bot).await;

    let page: Value = server
        .unknown_outcomes(&limited, "")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(page["items"], json!([]), "another Bot's work is not listed");
    let decided = server
        .decide_outcome(
            &limited,
            &id,
            json!({"call": CALL, "decision": "not_applied"}),
        )
        .await;
    let (status, code) = error_code(decided).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    assert_eq!(server.state(&id).await, "outcome_unknown");
    assert_eq!(outside.received(), 1);
    // A token limited to the Turn's own Bot sees it.
    let own = server.bot_limited_token(&bot).await;
    let page: Value = server
        .unknown_outcomes(&own, "")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(page["items"].as_array().map(Vec::len), Some(1));
}

fn code_script() -> Vec<Answer> {
    vec![
        Answer::Tool("run_code", json!({"code": WRITING_PROGRAM})),
        Answer::Text(vec!["done"]),
    ]
}

async fn a_lost_call_from_code_is_listed_and_an_applied_decision_replays_the_program_with_it(
    server: Server,
) {
    let outside = Outside::unanswering(1).await;
    let model = FakeOpenAi::start(code_script()).await;
    let bot = server.code_writing_bot(&outside, &model).await;
    let id = server.unknown_turn(&bot, &outside, 1).await;

    let page: Value = server
        .unknown_outcomes(&server.owner, "")
        .await
        .json()
        .await
        .unwrap();
    let outcome = &page["items"][0];
    assert_eq!(outcome["call"], CODE_CALL, "{page}");
    assert_eq!(outcome["tool_call"]["name"], "write");
    assert_eq!(outcome["tool_call"]["arguments"], json!({"text": "pay 5"}));
    assert_eq!(
        outside.keys(),
        vec![outcome["idempotency_key"].as_str().unwrap().to_string()]
    );
    // A decision must name the call the execution waits for, not the code call itself.
    let wrong = server
        .decide_outcome(
            &server.owner,
            &id,
            json!({"call": "1/tool:0/1", "decision": "applied", "result": "x"}),
        )
        .await;
    assert_eq!(wrong.status(), StatusCode::CONFLICT);

    let decided = server
        .decide_outcome(
            &server.owner,
            &id,
            json!({"call": CODE_CALL, "decision": "applied", "result": "paid, receipt 42"}),
        )
        .await;
    assert_eq!(decided.status(), StatusCode::OK);
    let events = server.finish(&server.owner, &id).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(outside.received(), 1, "the write was not sent again");
    // The program ran again and got the decided result at its call.
    let code = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } if result.name == "run_code" => {
                Some(serde_json::from_str::<Value>(result.output[0].as_text().unwrap()).unwrap())
            }
            _ => None,
        })
        .expect("the code call's result");
    assert_eq!(code["ok"], json!(true), "{code}");
    assert_eq!(code["value"], json!({"r": "paid, receipt 42"}));
    assert!(
        model.bodies().last().unwrap().contains("paid, receipt 42"),
        "the model goes on with the program's result"
    );
    assert_eq!(server.audit(&id).await.len(), 1);
}

async fn a_not_applied_decision_on_a_call_from_code_sends_it_again_exactly_once(server: Server) {
    let outside = Outside::unanswering(1).await;
    let model = FakeOpenAi::start(code_script()).await;
    let bot = server.code_writing_bot(&outside, &model).await;
    let id = server.unknown_turn(&bot, &outside, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(outside.received(), 1, "nothing is sent without a decision");

    let decided = server
        .decide_outcome(
            &server.owner,
            &id,
            json!({"call": CODE_CALL, "decision": "not_applied"}),
        )
        .await;
    assert_eq!(decided.status(), StatusCode::OK);
    let events = server.finish(&server.owner, &id).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(outside.received(), 2, "sent again exactly once");
    let keys = outside.keys();
    assert_eq!(keys.len(), 2, "a new attempt has its own key: {keys:?}");
    assert_ne!(keys[0], keys[1]);
}

async fn a_lost_call_from_code_to_a_retry_safe_tool_is_sent_again_under_the_same_key(
    server: Server,
) {
    let outside = Outside::unanswering(1).await;
    let model = FakeOpenAi::start(code_script()).await;
    let bot = server.code_writing_bot(&outside, &model).await;
    // The same tool, registered as deduplicating by its idempotency key.
    let registered = server
        .http
        .put(format!("{}/v1/tools/write", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"description": "Writes.", "input_schema": {"type": "object"}, "url": outside.url, "retry_safe": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), StatusCode::OK);
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "Pay 5", None).await).await;
    let id = sent["execution_id"].as_str().unwrap().to_string();
    outside.wait_for_writes(1).await;
    server.steal(&id).await;

    let events = server.finish(&server.owner, &id).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::CallOutcomeUnknown { .. })),
        "a retry-safe call never waits for a decision"
    );
    assert_eq!(outside.received(), 2, "sent again once");
    assert_eq!(
        outside.keys().len(),
        1,
        "under the same key: {:?}",
        outside.keys()
    );
}
