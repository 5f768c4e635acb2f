//! Child work end to end over the HTTP API, on SQLite and on a real PostgreSQL: approvals
//! (rules, requests, decisions, audit, notices), background tools, delegation with its limits
//! and budgets, and cancelling or deleting a tree of work.

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
use openbot_schema::{Event, EventKind, TurnOutcome};
use outside::Outside;
use reqwest::StatusCode;
use serde_json::{Value, json};

http_tests!(
    a_turn_ends_while_approval_waits_and_the_approved_call_runs_once_and_reaches_the_chat,
    a_denied_call_never_runs_and_the_model_gets_the_denial,
    an_approval_grants_nothing_once_the_original_token_is_revoked,
    a_request_that_expired_grants_nothing,
    a_failed_audit_write_rolls_the_decision_back,
    a_deny_rule_refuses_the_call_and_the_model_is_told,
    a_member_sees_and_decides_only_the_requests_of_their_own_work,
    a_background_tool_outlives_its_turn_and_its_result_reaches_the_chat_once,
    deleting_a_chat_cancels_its_children_and_finishes_after_they_closed,
    a_delegated_turn_works_in_private_and_its_answer_reaches_the_parent_before_it_ends,
    cancelling_a_turn_cancels_its_delegated_children,
    a_childs_step_limit_comes_from_its_source,
    a_chat_budget_stops_a_grandchild,
    a_chat_is_deleted_by_service_work_that_members_never_see,
    a_paused_turn_sends_nothing_until_it_is_resumed,
    paused_time_does_not_count_against_the_time_limit,
    a_child_cannot_resume_while_its_parent_is_paused,
    in_plan_mode_only_a_plan_is_proposed_and_its_approval_ends_plan_mode,
    a_failing_plan_mode_write_rolls_the_plan_approval_back,
    a_decision_does_not_bypass_a_pause,
    a_childs_time_limit_comes_from_its_source,
    a_childs_cost_limit_comes_from_its_source,
    a_bot_limited_token_does_not_list_another_bots_approvals,
    a_bot_limited_token_cannot_read_another_bots_approval,
    a_bot_limited_token_cannot_decide_another_bots_approval,
    a_bot_limited_token_cannot_read_a_child_of_another_bots_turn,
    a_delegated_turn_belongs_to_the_bot_of_its_chat,
    a_notice_is_sealed_at_rest,
    an_approval_request_is_sealed_at_rest,
    approval_requests_walk_once_newest_first_with_their_state_filter,
);

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

async fn json_of(response: reqwest::Response) -> Value {
    response.json().await.unwrap()
}

impl Server {
    fn put(&self, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.http
            .put(format!("{}{path}", self.base))
            .bearer_auth(token)
    }

    async fn register_http(&self, name: &str, url: &str, background: bool) {
        let response = self
            .put(&format!("/v1/tools/{name}"), &self.owner)
            .json(&json!({"description": "Writes.", "input_schema": {"type": "object"}, "url": url, "background": background}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }

    async fn register_delegate(&self, name: &str, bot: &Value, limits: Value) {
        let response = self
            .put(&format!("/v1/delegates/{name}"), &self.owner)
            .json(&json!({"bot_id": bot["id"], "limits": limits}))
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "{:?}",
            response.text().await
        );
    }

    async fn rule(&self, rule: Value) -> Value {
        let response = self
            .post("/v1/approval-rules", &self.owner)
            .json(&rule)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        json_of(response).await
    }

    /// A Bot of the owner's with these tools on `model` (a model spec).
    async fn bot_with(&self, token: &str, name: &str, model: &str, tools: &[&str]) -> Value {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| json!({"name": t, "input_schema": {"type": "object"}}))
            .collect();
        let response = self
            .post("/v1/bots", token)
            .json(&json!({"name": name, "model": model, "tools": tools}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        json_of(response).await
    }

    async fn execution(&self, id: &str) -> Value {
        json_of(
            self.get(&format!("/v1/executions/{id}"), &self.owner)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    /// Waits until an execution ended; returns its view.
    async fn ended(&self, id: &str) -> Value {
        eventually(&format!("execution {id} to end"), || async {
            let view = self.execution(id).await;
            matches!(
                view["state"].as_str(),
                Some("completed" | "failed" | "cancelled" | "interrupted")
            )
            .then_some(view)
        })
        .await
    }

    async fn approvals(&self, token: &str, state: &str) -> Vec<Value> {
        json_of(
            self.get(&format!("/v1/approvals?state={state}"), token)
                .send()
                .await
                .unwrap(),
        )
        .await["items"]
            .as_array()
            .unwrap()
            .clone()
    }

    async fn approval(&self, id: &str) -> Value {
        json_of(
            self.get(&format!("/v1/approvals/{id}"), &self.owner)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    async fn decide(
        &self,
        token: &str,
        id: &str,
        decision: &str,
        reason: Option<&str>,
    ) -> reqwest::Response {
        let mut body = json!({"decision": decision});
        if let Some(reason) = reason {
            body["reason"] = json!(reason);
        }
        self.post(&format!("/v1/approvals/{id}/decision"), token)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// Sends `text` to a new Chat of `bot` and waits for the Turn's end.
    async fn run_turn(&self, token: &str, bot: &Value, text: &str) -> (String, String, Vec<Event>) {
        let chat = self.chat(token, bot).await;
        let sent = receipt(self.send(token, &chat, text, None).await).await;
        let execution = sent["execution_id"].as_str().unwrap().to_string();
        let events = self.finish(token, &execution).await;
        (chat, execution, events)
    }
}

fn children(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ChildStarted { child_id, .. } => Some(child_id.to_string()),
            _ => None,
        })
        .collect()
}

fn requested(events: &[Event]) -> Option<String> {
    events.iter().find_map(|e| match &e.kind {
        EventKind::ApprovalRequested { request_id, .. } => Some(request_id.to_string()),
        _ => None,
    })
}

/// A Bot whose model calls `pay` once and then answers; `pay` is an HTTP tool on `outside`
/// that a rule asks approval for.
async fn paying_bot(server: &Server, outside: &Outside, model: &FakeOpenAi, rule: Value) -> Value {
    server.register_http("pay", &outside.url, false).await;
    server.rule(rule).await;
    server
        .bot_with(&server.owner, "Payer", &model.spec(), &["pay"])
        .await
}

fn pay_script() -> Vec<Answer> {
    vec![
        Answer::Tool("pay", json!({"amount": 5})),
        Answer::Text(vec!["I asked for approval."]),
        Answer::Text(vec!["Understood."]),
    ]
}

async fn approval_requests_walk_once_newest_first_with_their_state_filter(server: Server) {
    let outside = Outside::start(false).await;
    let mut script = Vec::new();
    for _ in 0..4 {
        script.push(Answer::Tool("pay", json!({"amount": 5})));
        script.push(Answer::Text(vec!["I asked for approval."]));
    }
    let model = FakeOpenAi::start(script).await;
    let bot = paying_bot(
        &server,
        &outside,
        &model,
        json!({"tool": "pay", "action": "ask"}),
    )
    .await;
    let mut made = Vec::new();
    for _ in 0..4 {
        let (_, _, events) = server.run_turn(&server.owner, &bot, "Pay 5").await;
        made.push(requested(&events).expect("an approval_requested event"));
    }
    let denied = server.decide(&server.owner, &made[1], "deny", None).await;
    assert_eq!(denied.status(), StatusCode::OK);
    let ids = |items: &[Value]| -> Vec<String> {
        items
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    for (path, expected) in [
        (
            "/v1/approvals",
            made.iter().rev().cloned().collect::<Vec<_>>(),
        ),
        (
            "/v1/approvals?state=pending",
            [&made[3], &made[2], &made[0]].map(String::clone).to_vec(),
        ),
    ] {
        let whole = server.walk(&server.owner, path, 200).await;
        assert_eq!(ids(&whole), expected, "{path}: newest first, each once");
        for limit in [1, 2] {
            assert_eq!(
                server.walk(&server.owner, path, limit).await,
                whole,
                "{path} in pages of {limit}"
            );
        }
    }
}

async fn a_turn_ends_while_approval_waits_and_the_approved_call_runs_once_and_reaches_the_chat(
    server: Server,
) {
    let outside = Outside::start(false).await;
    let model = FakeOpenAi::start(pay_script()).await;
    let bot = paying_bot(
        &server,
        &outside,
        &model,
        json!({"tool": "pay", "action": "ask"}),
    )
    .await;
    let (chat, _, events) = server.run_turn(&server.owner, &bot, "Pay 5").await;
    assert_eq!(
        outcome_of(&events),
        Some(TurnOutcome::Completed),
        "the Turn ends while approval waits"
    );
    assert_eq!(outside.received(), 0, "nothing runs before the decision");
    let request = requested(&events).expect("an approval_requested event");
    let pending = server.approvals(&server.owner, "pending").await;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0]["id"], request.as_str());
    assert_eq!(pending[0]["call"]["arguments"]["amount"], 5);

    let decided = server
        .decide(&server.owner, &request, "approve", Some("fine"))
        .await;
    assert_eq!(decided.status(), StatusCode::OK);
    assert_eq!(json_of(decided).await["state"], "approved");
    let job = pending[0]["execution_id"].as_str().unwrap();
    assert_eq!(server.ended(job).await["state"], "completed");
    assert_eq!(outside.received(), 1, "the approved call ran once");
    let again = server
        .decide(&server.owner, &request, "approve", None)
        .await;
    assert_eq!(
        error_code(again).await,
        (StatusCode::CONFLICT, "conflict".into())
    );

    let history = server.history(&server.owner, &chat).await;
    assert!(
        history.iter().any(|m| m.contains("was approved: fine")),
        "{history:?}"
    );
    assert!(
        history
            .iter()
            .any(|m| m.contains("`pay`") && m.contains("finished")),
        "{history:?}"
    );
    assert_eq!(
        model.total_requests(),
        2,
        "a notice to an ended Turn starts no Turn"
    );
    assert_eq!(outside.received(), 1);
}

async fn a_denied_call_never_runs_and_the_model_gets_the_denial(server: Server) {
    let outside = Outside::start(false).await;
    let model = FakeOpenAi::start(pay_script()).await;
    let bot = paying_bot(
        &server,
        &outside,
        &model,
        json!({"tool": "pay", "action": "ask"}),
    )
    .await;
    let (chat, _, events) = server.run_turn(&server.owner, &bot, "Pay 5").await;
    let request = requested(&events).unwrap();
    let decided = server
        .decide(&server.owner, &request, "deny", Some("too much"))
        .await;
    assert_eq!(json_of(decided).await["state"], "denied");
    let job = &children(&events)[0];
    assert_eq!(server.ended(job).await["state"], "cancelled");
    // The next Turn's model request holds the denial.
    let sent = receipt(server.send(&server.owner, &chat, "And now?", None).await).await;
    server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    let last = model.bodies().last().unwrap().clone();
    assert!(last.contains("was denied: too much"), "{last}");
    assert_eq!(outside.received(), 0, "a denied call never runs");
}

async fn an_approval_grants_nothing_once_the_original_token_is_revoked(server: Server) {
    let outside = Outside::start(false).await;
    let model = FakeOpenAi::start(pay_script()).await;
    let created = json_of(
        server
            .post("/v1/tokens", &server.owner)
            .json(&json!({"name": "turn", "rights": [
                {"resource": "bots", "action": "read"}, {"resource": "chats", "action": "read"},
                {"resource": "chats", "action": "write"}, {"resource": "executions", "action": "read"}]}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let token = created["secret"].as_str().unwrap().to_string();
    let bot = paying_bot(
        &server,
        &outside,
        &model,
        json!({"tool": "pay", "action": "ask"}),
    )
    .await;
    let (chat, _, events) = server.run_turn(&token, &bot, "Pay 5").await;
    let request = requested(&events).unwrap();
    let revoked = server
        .delete(
            &format!("/v1/tokens/{}", created["token"]["id"].as_str().unwrap()),
            &server.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), StatusCode::NO_CONTENT);

    let decided = server
        .decide(&server.owner, &request, "approve", None)
        .await;
    assert_eq!(decided.status(), StatusCode::OK);
    assert_eq!(
        json_of(decided).await["state"],
        "revoked",
        "the approval grants nothing"
    );
    let job = &children(&events)[0];
    server.ended(job).await;
    assert_eq!(outside.received(), 0, "the call never ran");
    let history = server.history(&server.owner, &chat).await;
    assert!(
        history
            .iter()
            .any(|m| m.contains("rights it was asked with are gone")),
        "{history:?}"
    );
}

async fn a_request_that_expired_grants_nothing(server: Server) {
    let outside = Outside::start(false).await;
    let model = FakeOpenAi::start(pay_script()).await;
    let bot = paying_bot(
        &server,
        &outside,
        &model,
        json!({"tool": "pay", "action": "ask", "expires_after_ms": 300}),
    )
    .await;
    let (chat, _, events) = server.run_turn(&server.owner, &bot, "Pay 5").await;
    let request = requested(&events).unwrap();
    let job = &children(&events)[0];
    assert_eq!(server.ended(job).await["state"], "cancelled");
    let decided = server
        .decide(&server.owner, &request, "approve", None)
        .await;
    assert_eq!(
        error_code(decided).await,
        (StatusCode::CONFLICT, "conflict".into())
    );
    let view = server.approval(&request).await;
    assert_eq!(view["state"], "expired");
    assert_eq!(outside.received(), 0);
    let history = server.history(&server.owner, &chat).await;
    assert!(
        history
            .iter()
            .any(|m| m.contains("expired; the call did not run")),
        "{history:?}"
    );
}

async fn audit_failing(server: &Server, fail: bool) {
    match &server.raw {
        Raw::Sqlite(store, _) => {
            let query = if fail {
                sqlx::query(
                    "CREATE TRIGGER fail_audit BEFORE INSERT ON request_audit BEGIN SELECT RAISE(ABORT, 'audit unavailable'); END",
                )
            } else {
                sqlx::query("DROP TRIGGER fail_audit")
            };
            query.execute(store.pool()).await.unwrap();
        }
        Raw::Postgres(store) => {
            let queries = if fail {
                vec![
                    sqlx::query(
                        "CREATE FUNCTION fail_audit() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'audit unavailable'; END $$ LANGUAGE plpgsql",
                    ),
                    sqlx::query(
                        "CREATE TRIGGER fail_audit BEFORE INSERT ON request_audit FOR EACH ROW EXECUTE FUNCTION fail_audit()",
                    ),
                ]
            } else {
                vec![sqlx::query("DROP TRIGGER fail_audit ON request_audit")]
            };
            for query in queries {
                query.execute(store.pool()).await.unwrap();
            }
        }
    }
}

async fn a_failed_audit_write_rolls_the_decision_back(server: Server) {
    let outside = Outside::start(false).await;
    let model = FakeOpenAi::start(pay_script()).await;
    let bot = paying_bot(
        &server,
        &outside,
        &model,
        json!({"tool": "pay", "action": "ask"}),
    )
    .await;
    let (chat, _, events) = server.run_turn(&server.owner, &bot, "Pay 5").await;
    let request = requested(&events).unwrap();
    let job = children(&events)[0].clone();

    audit_failing(&server, true).await;
    let failed = server
        .decide(&server.owner, &request, "approve", None)
        .await;
    assert_eq!(
        error_code(failed).await,
        (StatusCode::INTERNAL_SERVER_ERROR, "request_failed".into())
    );
    let view = server.approval(&request).await;
    assert_eq!(view["state"], "pending", "the decision was rolled back");
    assert_eq!(server.execution(&job).await["state"], "waiting");
    let history = server.history(&server.owner, &chat).await;
    assert!(
        !history.iter().any(|m| m.contains("approved")),
        "no notice without its decision"
    );

    audit_failing(&server, false).await;
    let decided = server
        .decide(&server.owner, &request, "approve", None)
        .await;
    assert_eq!(decided.status(), StatusCode::OK);
    assert_eq!(server.ended(&job).await["state"], "completed");
    assert_eq!(outside.received(), 1);
}

async fn a_deny_rule_refuses_the_call_and_the_model_is_told(server: Server) {
    let outside = Outside::start(false).await;
    let model = FakeOpenAi::start(pay_script()).await;
    let bot = paying_bot(
        &server,
        &outside,
        &model,
        json!({"tool": "p*", "arguments": "*\"amount\":5*", "action": "deny"}),
    )
    .await;
    let (_, _, events) = server.run_turn(&server.owner, &bot, "Pay 5").await;
    let result = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } => Some(result.clone()),
            _ => None,
        })
        .unwrap();
    assert!(result.is_error);
    assert!(
        format!("{:?}", result.output).contains("do not allow"),
        "{result:?}"
    );
    assert!(server.approvals(&server.owner, "pending").await.is_empty());
    assert_eq!(outside.received(), 0);
}

async fn a_member_sees_and_decides_only_the_requests_of_their_own_work(server: Server) {
    let outside = Outside::start(false).await;
    let model = FakeOpenAi::start(pay_script()).await;
    let bot = paying_bot(
        &server,
        &outside,
        &model,
        json!({"tool": "pay", "action": "ask"}),
    )
    .await;
    let (_, _, events) = server.run_turn(&server.owner, &bot, "Pay 5").await;
    let request = requested(&events).unwrap();
    let other = server.other_member_token().await;
    assert!(server.approvals(&other, "pending").await.is_empty());
    let decided = server.decide(&other, &request, "approve", None).await;
    assert_eq!(
        error_code(decided).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    // A member may not add rules for the whole organization.
    let rule = server
        .post("/v1/approval-rules", &other)
        .json(&json!({"tool": "*", "action": "allow"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(rule).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
    assert_eq!(outside.received(), 0);
}

async fn a_background_tool_outlives_its_turn_and_its_result_reaches_the_chat_once(server: Server) {
    let outside = Outside::start(false).await;
    server.register_http("crawl", &outside.url, true).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("crawl", json!({"site": "example.org"})),
        Answer::Text(vec!["Crawling in the background."]),
    ])
    .await;
    let bot = server
        .bot_with(&server.owner, "Crawler", &model.spec(), &["crawl"])
        .await;
    outside.hold().await;
    let (chat, _, events) = server.run_turn(&server.owner, &bot, "Crawl").await;
    assert_eq!(
        outcome_of(&events),
        Some(TurnOutcome::Completed),
        "the Turn ended first"
    );
    let job = children(&events)[0].clone();
    outside.wait_for_write().await;
    assert_eq!(server.execution(&job).await["kind"], "tool_job");
    outside.release();
    assert_eq!(server.ended(&job).await["state"], "completed");
    assert_eq!(outside.received(), 1);
    let history = server.history(&server.owner, &chat).await;
    let notices: Vec<&String> = history
        .iter()
        .filter(|m| m.contains("[notice] The tool call `crawl`"))
        .collect();
    assert_eq!(notices.len(), 1, "{history:?}");
}

async fn deleting_a_chat_cancels_its_children_and_finishes_after_they_closed(server: Server) {
    let outside = Outside::start(false).await;
    server.register_http("crawl", &outside.url, true).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("crawl", json!({})),
        Answer::Text(vec!["Crawling."]),
    ])
    .await;
    let bot = server
        .bot_with(&server.owner, "Crawler", &model.spec(), &["crawl"])
        .await;
    outside.hold().await;
    let (chat, _, events) = server.run_turn(&server.owner, &bot, "Crawl").await;
    let job = children(&events)[0].clone();
    outside.wait_for_write().await;
    let deleted = server
        .delete(&format!("/v1/chats/{chat}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(
        deleted.status(),
        StatusCode::NO_CONTENT,
        "every child closed before the delete finished"
    );
    let state = server.execution(&job).await["state"].clone();
    assert_eq!(state, "cancelled");
    let sent = server.send(&server.owner, &chat, "more", None).await;
    assert_eq!(
        sent.status(),
        StatusCode::NOT_FOUND,
        "a deleted Chat admits nothing"
    );
    outside.release();
}

/// A Bot that delegates `calculator` to a child Bot; returns both.
async fn delegating_bots(
    server: &Server,
    parent: &FakeOpenAi,
    child: &FakeOpenAi,
    limits: Value,
) -> (Value, Value) {
    let calculator = server
        .bot_with(&server.owner, "Calculator", &child.spec(), &[])
        .await;
    server
        .register_delegate("calculator", &calculator, limits)
        .await;
    let boss = server
        .bot_with(&server.owner, "Boss", &parent.spec(), &["calculator"])
        .await;
    (boss, calculator)
}

async fn a_delegated_turn_works_in_private_and_its_answer_reaches_the_parent_before_it_ends(
    server: Server,
) {
    let parent = FakeOpenAi::start(vec![
        Answer::Tool("calculator", json!({"task": "What is 6*7?"})),
        Answer::Text(vec!["Waiting for the calculator."]),
        Answer::Text(vec!["The answer is 42."]),
    ])
    .await;
    let child = FakeOpenAi::start(vec![Answer::Text(vec!["42"])]).await;
    let (boss, _) = delegating_bots(&server, &parent, &child, json!({})).await;
    let (_, _, events) = server
        .run_turn(&server.owner, &boss, "Please compute, my secret is xyzzy")
        .await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    let kids = children(&events);
    assert_eq!(kids.len(), 1);
    assert_eq!(server.ended(&kids[0]).await["state"], "completed");
    assert_eq!(
        parent.total_requests(),
        3,
        "the parent waited and saw the answer"
    );
    let last = parent.bodies().last().unwrap().clone();
    assert!(
        last.contains("the delegate Calculator") && last.contains("42"),
        "{last}"
    );
    let child_request = child.bodies()[0].clone();
    assert!(child_request.contains("What is 6*7?"));
    assert!(
        !child_request.contains("xyzzy"),
        "the child's history is its own"
    );
    let usage = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::TurnEnded { usage, .. } => Some(*usage),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        usage.input_tokens, 40,
        "the Turn's usage includes its child's"
    );
}

async fn cancelling_a_turn_cancels_its_delegated_children(server: Server) {
    let parent = FakeOpenAi::start(vec![
        Answer::Tool("calculator", json!({"task": "Think long"})),
        Answer::Text(vec!["Waiting."]),
    ])
    .await;
    let child = FakeOpenAi::start(vec![Answer::Text(vec!["too late"])]).await;
    child.delay(0, Duration::from_secs(60));
    let (boss, _) = delegating_bots(&server, &parent, &child, json!({})).await;
    let chat = server.chat(&server.owner, &boss).await;
    let sent = receipt(server.send(&server.owner, &chat, "Go", None).await).await;
    let execution = sent["execution_id"].as_str().unwrap().to_string();
    eventually("the child's model request", || async {
        (child.total_requests() > 0).then_some(())
    })
    .await;
    let stopped = server
        .post(&format!("/v1/chats/{chat}/stop"), &server.owner)
        .send()
        .await
        .unwrap();
    assert!(stopped.status().is_success());
    let events = server.finish(&server.owner, &execution).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Cancelled));
    let kid = &children(&events)[0];
    assert_eq!(server.ended(kid).await["state"], "cancelled");
}

async fn a_childs_step_limit_comes_from_its_source(server: Server) {
    let outside = Outside::start(false).await;
    server.register_http("write", &outside.url, false).await;
    let parent = FakeOpenAi::start(vec![
        Answer::Tool("calculator", json!({"task": "Write a lot"})),
        Answer::Text(vec!["Waiting."]),
        Answer::Text(vec!["Done."]),
    ])
    .await;
    let child = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"n": 1})),
        Answer::Tool("write", json!({"n": 2})),
        Answer::Tool("write", json!({"n": 3})),
        Answer::Text(vec!["wrote three"]),
    ])
    .await;
    let writer = server
        .bot_with(&server.owner, "Writer", &child.spec(), &["write"])
        .await;
    server
        .register_delegate("calculator", &writer, json!({"max_steps": 2}))
        .await;
    let boss = server
        .bot_with(&server.owner, "Boss", &parent.spec(), &["calculator"])
        .await;
    let (_, _, events) = server.run_turn(&server.owner, &boss, "Go").await;
    let kid = &children(&events)[0];
    let kid_events = server.finish(&server.owner, kid).await;
    assert_eq!(outcome_of(&kid_events), Some(TurnOutcome::MaxSteps));
    assert_eq!(
        outside.received(),
        2,
        "the child stopped at the limit it was given"
    );
    let last = parent.bodies().last().unwrap().clone();
    assert!(last.contains("ended (max_steps)"), "{last}");
}

async fn a_chat_budget_stops_a_grandchild(server: Server) {
    let outside = Outside::start(false).await;
    server.register_http("write", &outside.url, false).await;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("costly.json");
    std::fs::write(
        &script,
        json!([{"tool_calls": [{"name": "write", "arguments": {}}], "usage": {"input_tokens": 10, "output_tokens": 5, "cost_micros": 600}},
               {"text": "never asked"}])
        .to_string(),
    )
    .unwrap();
    let grandchild = server
        .bot_with(
            &server.owner,
            "Spender",
            &format!("scripted:{}", script.display()),
            &["write"],
        )
        .await;
    server
        .register_delegate("spend", &grandchild, json!({}))
        .await;
    let middle_model = FakeOpenAi::start(vec![
        Answer::Tool("spend", json!({"task": "Spend"})),
        Answer::Text(vec!["Waiting."]),
        Answer::Text(vec!["never asked"]),
    ])
    .await;
    let middle = server
        .bot_with(&server.owner, "Middle", &middle_model.spec(), &["spend"])
        .await;
    server.register_delegate("middle", &middle, json!({})).await;
    let root_model = FakeOpenAi::start(vec![
        Answer::Tool("middle", json!({"task": "Go"})),
        Answer::Text(vec!["Waiting."]),
        Answer::Text(vec!["never asked"]),
    ])
    .await;
    let root = server
        .bot_with(&server.owner, "Root", &root_model.spec(), &["middle"])
        .await;
    let chat = server.chat(&server.owner, &root).await;
    let set = server
        .put(&format!("/v1/budgets/chat/{chat}"), &server.owner)
        .json(&json!({"max_cost_micros": 100}))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), StatusCode::OK);
    let sent = receipt(server.send(&server.owner, &chat, "Go", None).await).await;
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    let middle_id = &children(&events)[0];
    let middle_events = server.finish(&server.owner, middle_id).await;
    let spender = &children(&middle_events)[0];
    let spender_events = server.finish(&server.owner, spender).await;
    assert_eq!(
        outcome_of(&spender_events),
        Some(TurnOutcome::MaxCost),
        "{spender_events:?}"
    );
    assert_eq!(
        outside.received(),
        1,
        "the grandchild's first step ran; its next request was refused"
    );
    assert_eq!(outcome_of(&middle_events), Some(TurnOutcome::MaxCost));
    assert_eq!(outcome_of(&events), Some(TurnOutcome::MaxCost));
    let budgets: Value = json_of(
        server
            .get("/v1/budgets", &server.owner)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        budgets["items"][0]["spent_micros"], 600,
        "the Chat's spending includes the grandchild's"
    );
}

async fn a_chat_is_deleted_by_service_work_that_members_never_see(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    let bot = server
        .bot_with(&server.owner, "Plain", &model.spec(), &[])
        .await;
    let (chat, _, _) = server.run_turn(&server.owner, &bot, "Hi").await;
    let deleted = server
        .delete(&format!("/v1/chats/{chat}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    let rows: Vec<(uuid::Uuid, String, String)> = match &server.raw {
        Raw::Sqlite(store, _) => {
            sqlx::query_as("SELECT id, scope, state FROM executions WHERE kind = 'chat_deletion'")
                .fetch_all(store.pool())
                .await
                .unwrap()
        }
        Raw::Postgres(store) => {
            sqlx::query_as("SELECT id, scope, state FROM executions WHERE kind = 'chat_deletion'")
                .fetch_all(store.pool())
                .await
                .unwrap()
        }
    };
    assert_eq!(rows.len(), 1);
    let (id, scope, state) = &rows[0];
    assert!(
        scope.starts_with("service:org-") && scope.ends_with("/chat-deletion"),
        "{scope}"
    );
    assert_eq!(state, "completed");
    let seen = server
        .get(&format!("/v1/executions/{id}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(
        seen.status(),
        StatusCode::NOT_FOUND,
        "members never see service work"
    );
}

impl Server {
    async fn command(&self, execution: &str, what: &str) -> reqwest::Response {
        self.post(&format!("/v1/executions/{execution}/{what}"), &self.owner)
            .send()
            .await
            .unwrap()
    }

    /// Waits until an execution is paused (waiting, with no owner).
    async fn paused(&self, execution: &str) {
        eventually("the pause", || async {
            (self.execution(execution).await["state"] == "waiting").then_some(())
        })
        .await;
    }
}

/// A model that calls `write` once (its answer after `delay`) and then answers.
async fn writing_model(delay: Duration) -> FakeOpenAi {
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "a"})),
        Answer::Text(vec!["written"]),
    ])
    .await;
    model.delay(0, delay);
    model
}

async fn a_paused_turn_sends_nothing_until_it_is_resumed(server: Server) {
    let outside = Outside::start(false).await;
    server.register_http("write", &outside.url, false).await;
    let model = writing_model(Duration::from_millis(500)).await;
    let bot = server
        .bot_with(&server.owner, "Writer", &model.spec(), &["write"])
        .await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "Write", None).await).await;
    let execution = sent["execution_id"].as_str().unwrap().to_string();
    eventually("the model request", || async {
        (model.total_requests() > 0).then_some(())
    })
    .await;
    assert_eq!(
        server.command(&execution, "pause").await.status(),
        StatusCode::ACCEPTED
    );
    server.paused(&execution).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        model.total_requests(),
        1,
        "the request in flight finished; nothing new was sent"
    );
    assert_eq!(outside.received(), 0, "the tool call waits for the resume");
    assert_eq!(
        server.command(&execution, "resume").await.status(),
        StatusCode::ACCEPTED
    );
    let events = server.finish(&server.owner, &execution).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(outside.received(), 1);
    assert_eq!(
        model.requests_at(0),
        1,
        "the saved answer was not asked for again"
    );
}

async fn paused_time_does_not_count_against_the_time_limit(server: Server) {
    let outside = Outside::start(false).await;
    server.register_http("write", &outside.url, false).await;
    let model = writing_model(Duration::from_millis(300)).await;
    let response = server
        .post("/v1/bots", &server.owner)
        .json(&json!({"name": "Timed", "model": model.spec(),
            "tools": [{"name": "write", "input_schema": {"type": "object"}}],
            "limits": {"max_wall_time_ms": 1500}}))
        .send()
        .await
        .unwrap();
    let bot = json_of(response).await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "Write", None).await).await;
    let execution = sent["execution_id"].as_str().unwrap().to_string();
    assert_eq!(
        server.command(&execution, "pause").await.status(),
        StatusCode::ACCEPTED
    );
    server.paused(&execution).await;
    // Longer than the whole limit, while paused.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(
        server.command(&execution, "resume").await.status(),
        StatusCode::ACCEPTED
    );
    let events = server.finish(&server.owner, &execution).await;
    assert_eq!(
        outcome_of(&events),
        Some(TurnOutcome::Completed),
        "{events:?}"
    );
    assert_eq!(outside.received(), 1);
}

async fn a_child_cannot_resume_while_its_parent_is_paused(server: Server) {
    let outside = Outside::start(false).await;
    server.register_http("write", &outside.url, false).await;
    let parent = FakeOpenAi::start(vec![
        Answer::Tool("calculator", json!({"task": "Write"})),
        Answer::Text(vec!["Waiting."]),
        Answer::Text(vec!["Done."]),
    ])
    .await;
    let child = writing_model(Duration::from_millis(500)).await;
    let writer = server
        .bot_with(&server.owner, "Writer", &child.spec(), &["write"])
        .await;
    server
        .register_delegate("calculator", &writer, json!({}))
        .await;
    let boss = server
        .bot_with(&server.owner, "Boss", &parent.spec(), &["calculator"])
        .await;
    let chat = server.chat(&server.owner, &boss).await;
    let sent = receipt(server.send(&server.owner, &chat, "Go", None).await).await;
    let execution = sent["execution_id"].as_str().unwrap().to_string();
    eventually("the child's model request", || async {
        (child.total_requests() > 0).then_some(())
    })
    .await;
    assert_eq!(
        server.command(&execution, "pause").await.status(),
        StatusCode::ACCEPTED
    );
    let events = server
        .get(
            &format!("/v1/executions/{execution}/events?after=0"),
            &server.owner,
        )
        .send()
        .await
        .unwrap();
    let page: openbot_schema::EventPage = events.json().await.unwrap();
    let kid = children(&page.events)[0].clone();
    server.paused(&execution).await;
    server.paused(&kid).await;
    let refused = server.command(&kid, "resume").await;
    assert_eq!(
        error_code(refused).await,
        (StatusCode::CONFLICT, "conflict".into())
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(outside.received(), 0, "the paused child sent nothing");
    assert_eq!(
        server.command(&execution, "resume").await.status(),
        StatusCode::ACCEPTED
    );
    let events = server.finish(&server.owner, &execution).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(outside.received(), 1);
}

async fn in_plan_mode_only_a_plan_is_proposed_and_its_approval_ends_plan_mode(server: Server) {
    let outside = Outside::start(false).await;
    server.register_http("write", &outside.url, false).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "too early"})),
        Answer::Tool("propose_plan", json!({"plan": "1. write the report"})),
        Answer::Text(vec!["I proposed a plan."]),
    ])
    .await;
    let bot = server
        .bot_with(&server.owner, "Planner", &model.spec(), &["write"])
        .await;
    let chat = server.chat(&server.owner, &bot).await;
    let on = server
        .put(&format!("/v1/chats/{chat}/plan-mode"), &server.owner)
        .json(&json!({"enabled": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(json_of(on).await["enabled"], true);
    let sent = receipt(
        server
            .send(&server.owner, &chat, "Write the report", None)
            .await,
    )
    .await;
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    let results: Vec<openbot_schema::ToolResult> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } => Some(result.clone()),
            _ => None,
        })
        .collect();
    assert!(
        results[0].is_error,
        "nothing but a plan runs in plan mode: {results:?}"
    );
    assert_eq!(outside.received(), 0);
    let request = requested(&events).expect("the plan waits for approval");
    let pending = server.approvals(&server.owner, "pending").await;
    assert_eq!(pending[0]["call"]["name"], "propose_plan");

    let decided = server
        .decide(&server.owner, &request, "approve", Some("go"))
        .await;
    assert_eq!(json_of(decided).await["state"], "approved");
    let mode = json_of(
        server
            .get(&format!("/v1/chats/{chat}/plan-mode"), &server.owner)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        mode["enabled"], false,
        "the approved plan switched plan mode off"
    );
    let history = server.history(&server.owner, &chat).await;
    assert!(
        history
            .iter()
            .any(|m| m.contains("Your plan was approved: go")),
        "{history:?}"
    );
    let job = &children(&events)[0];
    assert_eq!(
        server.ended(job).await["state"],
        "completed",
        "an approved plan has nothing more to run"
    );

    // Out of plan mode the next Turn runs its tools and is offered no plan tool.
    let again = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "the report"})),
        Answer::Text(vec!["Written."]),
    ])
    .await;
    let worker = server
        .bot_with(&server.owner, "Worker", &again.spec(), &["write"])
        .await;
    let (_, _, events) = server
        .run_turn(&server.owner, &worker, "Now write it")
        .await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(outside.received(), 1);
    assert!(!again.bodies()[0].contains("propose_plan"));
}

async fn a_decision_does_not_bypass_a_pause(server: Server) {
    let outside = Outside::start(false).await;
    let model = FakeOpenAi::start(pay_script()).await;
    let bot = paying_bot(
        &server,
        &outside,
        &model,
        json!({"tool": "pay", "action": "ask"}),
    )
    .await;
    let (_, _, events) = server.run_turn(&server.owner, &bot, "Pay 5").await;
    let request = requested(&events).unwrap();
    let job = children(&events)[0].clone();
    assert_eq!(
        server.command(&job, "pause").await.status(),
        StatusCode::ACCEPTED
    );
    eventually("the job's pause", || async {
        let rows: Vec<(Option<i64>,)> = match &server.raw {
            Raw::Sqlite(store, _) => {
                sqlx::query_as("SELECT paused_at FROM executions WHERE kind = 'tool_job'")
                    .fetch_all(store.pool())
                    .await
                    .unwrap()
            }
            Raw::Postgres(store) => {
                sqlx::query_as("SELECT paused_at FROM executions WHERE kind = 'tool_job'")
                    .fetch_all(store.pool())
                    .await
                    .unwrap()
            }
        };
        rows[0].0.map(|_| ())
    })
    .await;
    let decided = server
        .decide(&server.owner, &request, "approve", None)
        .await;
    assert_eq!(json_of(decided).await["state"], "approved");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        outside.received(),
        0,
        "the approved call waits for the resume"
    );
    assert_eq!(server.execution(&job).await["state"], "waiting");
    assert_eq!(
        server.command(&job, "resume").await.status(),
        StatusCode::ACCEPTED
    );
    assert_eq!(server.ended(&job).await["state"], "completed");
    assert_eq!(outside.received(), 1);
}

/// A parent that delegates to a child Bot on `child_model` with the delegate tool's `limits`,
/// waits and answers; returns the child's events.
async fn delegated_child_events(server: &Server, child_model: &str, limits: Value) -> Vec<Event> {
    let parent = FakeOpenAi::start(vec![
        Answer::Tool("helper", json!({"task": "Work"})),
        Answer::Text(vec!["Waiting."]),
        Answer::Text(vec!["Done."]),
    ])
    .await;
    let worker = server
        .bot_with(&server.owner, "Worker", child_model, &[])
        .await;
    server.register_delegate("helper", &worker, limits).await;
    let boss = server
        .bot_with(&server.owner, "Boss", &parent.spec(), &["helper"])
        .await;
    let (_, _, events) = server.run_turn(&server.owner, &boss, "Go").await;
    assert_eq!(
        outcome_of(&events),
        Some(TurnOutcome::Completed),
        "the parent goes on"
    );
    let kid = &children(&events)[0];
    server.finish(&server.owner, kid).await
}

async fn a_childs_time_limit_comes_from_its_source(server: Server) {
    let slow = FakeOpenAi::start(vec![Answer::Text(vec!["too late"])]).await;
    slow.delay(0, Duration::from_secs(30));
    let events =
        delegated_child_events(&server, &slow.spec(), json!({"max_wall_time_ms": 300})).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::MaxTime));
}

async fn a_childs_cost_limit_comes_from_its_source(server: Server) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("costly.json");
    std::fs::write(
        &script,
        json!({"steps": [{"tool_calls": [{"name": "missing", "arguments": {}}],
                          "usage": {"input_tokens": 10, "output_tokens": 5, "cost_micros": 600}}],
               "repeat": true})
        .to_string(),
    )
    .unwrap();
    let events = delegated_child_events(
        &server,
        &format!("scripted:{}", script.display()),
        json!({"max_cost_micros": 1000}),
    )
    .await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::MaxCost));
    let usage = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::TurnEnded { usage, .. } => Some(*usage),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        usage.cost_micros,
        Some(1200),
        "two steps of 600: the second crossed 1000"
    );
}

/// A pending approval of the paying Bot's Turn: the request, its tool job, a token limited to
/// the paying Bot and one limited to another Bot.
struct BotApproval {
    request: String,
    job: String,
    paying: String,
    other: String,
}

async fn another_bots_approval(
    server: &Server,
    outside: &Outside,
    model: &FakeOpenAi,
) -> BotApproval {
    let bot = paying_bot(
        server,
        outside,
        model,
        json!({"tool": "pay", "action": "ask"}),
    )
    .await;
    let other_bot = server
        .bot_with(&server.owner, "Other", &model.spec(), &[])
        .await;
    let (_, _, events) = server.run_turn(&server.owner, &bot, "Pay 5").await;
    BotApproval {
        request: requested(&events).unwrap(),
        job: children(&events).pop().unwrap(),
        paying: server.bot_limited_token(&bot).await,
        other: server.bot_limited_token(&other_bot).await,
    }
}

async fn a_bot_limited_token_does_not_list_another_bots_approvals(server: Server) {
    let outside = Outside::start(false).await;
    let model = FakeOpenAi::start(pay_script()).await;
    let approval = another_bots_approval(&server, &outside, &model).await;
    assert!(
        server
            .approvals(&approval.other, "pending")
            .await
            .is_empty()
    );
    let listed = server.approvals(&approval.paying, "pending").await;
    assert_eq!(listed.len(), 1, "a token of the request's Bot lists it");
    assert_eq!(listed[0]["id"], approval.request.as_str());
}

async fn a_bot_limited_token_cannot_read_another_bots_approval(server: Server) {
    let outside = Outside::start(false).await;
    let model = FakeOpenAi::start(pay_script()).await;
    let approval = another_bots_approval(&server, &outside, &model).await;
    let read = server
        .get(
            &format!("/v1/approvals/{}", approval.request),
            &approval.other,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(read).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
}

async fn a_bot_limited_token_cannot_decide_another_bots_approval(server: Server) {
    let outside = Outside::start(false).await;
    let model = FakeOpenAi::start(pay_script()).await;
    let approval = another_bots_approval(&server, &outside, &model).await;
    let decided = server
        .decide(&approval.other, &approval.request, "approve", None)
        .await;
    assert_eq!(
        error_code(decided).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    assert_eq!(server.approval(&approval.request).await["state"], "pending");
    assert_eq!(outside.received(), 0, "nothing ran");
}

async fn a_bot_limited_token_cannot_read_a_child_of_another_bots_turn(server: Server) {
    let outside = Outside::start(false).await;
    let model = FakeOpenAi::start(pay_script()).await;
    let approval = another_bots_approval(&server, &outside, &model).await;
    let read = |token: String| {
        let request = server.get(&format!("/v1/executions/{}", approval.job), &token);
        async move { request.send().await.unwrap() }
    };
    assert_eq!(
        error_code(read(approval.other.clone()).await).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    assert_eq!(
        read(approval.paying.clone()).await.status(),
        StatusCode::OK,
        "the tool job is the work of its Turn's Bot"
    );
}

async fn a_delegated_turn_belongs_to_the_bot_of_its_chat(server: Server) {
    let parent = FakeOpenAi::start(vec![
        Answer::Tool("calculator", json!({"task": "What is 6*7?"})),
        Answer::Text(vec!["Waiting for the calculator."]),
        Answer::Text(vec!["The answer is 42."]),
    ])
    .await;
    let child = FakeOpenAi::start(vec![Answer::Text(vec!["42"])]).await;
    let (boss, calculator) = delegating_bots(&server, &parent, &child, json!({})).await;
    let (_, _, events) = server
        .run_turn(&server.owner, &boss, "Please compute, my secret is xyzzy")
        .await;
    let delegated = children(&events).pop().unwrap();
    server.ended(&delegated).await;
    let read = |token: String| {
        let request = server.get(&format!("/v1/executions/{delegated}/events"), &token);
        async move { request.send().await.unwrap() }
    };
    // The delegate's own token does not reach into the Chat of another Bot.
    let calculators = server.bot_limited_token(&calculator).await;
    assert_eq!(
        error_code(read(calculators).await).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    let bosses = server.bot_limited_token(&boss).await;
    assert_eq!(read(bosses).await.status(), StatusCode::OK);
}

/// Makes every change of a Chat fail while `fail` holds.
async fn chat_updates_failing(server: &Server, fail: bool) {
    match &server.raw {
        Raw::Sqlite(store, _) => {
            let query = if fail {
                sqlx::query(
                    "CREATE TRIGGER fail_chats BEFORE UPDATE ON chats BEGIN SELECT RAISE(ABORT, 'chats unavailable'); END",
                )
            } else {
                sqlx::query("DROP TRIGGER fail_chats")
            };
            query.execute(store.pool()).await.unwrap();
        }
        Raw::Postgres(store) => {
            let queries = if fail {
                vec![
                    sqlx::query(
                        "CREATE FUNCTION fail_chats() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'chats unavailable'; END $$ LANGUAGE plpgsql",
                    ),
                    sqlx::query(
                        "CREATE TRIGGER fail_chats BEFORE UPDATE ON chats FOR EACH ROW EXECUTE FUNCTION fail_chats()",
                    ),
                ]
            } else {
                vec![sqlx::query("DROP TRIGGER fail_chats ON chats")]
            };
            for query in queries {
                query.execute(store.pool()).await.unwrap();
            }
        }
    }
}

/// Plan mode's own row (a capability's write in the decision's transaction) commits with the
/// decision or not at all.
async fn a_failing_plan_mode_write_rolls_the_plan_approval_back(server: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Tool("propose_plan", json!({"plan": "1. write the report"})),
        Answer::Text(vec!["I proposed a plan."]),
    ])
    .await;
    let bot = server
        .bot_with(&server.owner, "Planner", &model.spec(), &[])
        .await;
    let chat = server.chat(&server.owner, &bot).await;
    let on = server
        .put(&format!("/v1/chats/{chat}/plan-mode"), &server.owner)
        .json(&json!({"enabled": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(json_of(on).await["enabled"], true);
    let sent = receipt(server.send(&server.owner, &chat, "Plan it", None).await).await;
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    let request = requested(&events).expect("the plan waits for approval");

    chat_updates_failing(&server, true).await;
    let decided = server
        .decide(&server.owner, &request, "approve", None)
        .await;
    assert!(decided.status().is_server_error(), "{}", decided.status());
    assert_eq!(
        server.approval(&request).await["state"],
        "pending",
        "the decision was rolled back with the plan mode write"
    );

    chat_updates_failing(&server, false).await;
    let decided = server
        .decide(&server.owner, &request, "approve", None)
        .await;
    assert_eq!(decided.status(), StatusCode::OK);
    let mode = json_of(
        server
            .get(&format!("/v1/chats/{chat}/plan-mode"), &server.owner)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(mode["enabled"], false);
}

/// What the sensitive values of the sealing tests carry, to look for in the database.
const MARKER: &str = "zq7SealedMarker";

async fn a_notice_is_sealed_at_rest(server: Server) {
    let outside = Outside::start(false).await;
    server.register_http("crawl", &outside.url, true).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("crawl", json!({"site": MARKER})),
        Answer::Text(vec!["Crawling in the background."]),
    ])
    .await;
    let bot = server
        .bot_with(&server.owner, "Crawler", &model.spec(), &["crawl"])
        .await;
    // The job ends after its Turn, so its notice (the result, which echoes the arguments)
    // is kept as the Chat's history.
    outside.hold().await;
    let (chat, _, events) = server.run_turn(&server.owner, &bot, "Crawl").await;
    let job = children(&events)[0].clone();
    outside.wait_for_write().await;
    outside.release();
    assert_eq!(server.ended(&job).await["state"], "completed");
    let history = server.history(&server.owner, &chat).await;
    assert!(
        history
            .iter()
            .any(|m| m.contains("[notice] The tool call `crawl`") && m.contains(MARKER)),
        "{history:?}"
    );
    assert_eq!(
        server.columns_containing(MARKER).await,
        Vec::<String>::new()
    );
}

async fn an_approval_request_is_sealed_at_rest(server: Server) {
    let outside = Outside::start(false).await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("pay", json!({"amount": 5, "memo": MARKER})),
        Answer::Text(vec!["I asked for approval."]),
    ])
    .await;
    let bot = paying_bot(
        &server,
        &outside,
        &model,
        json!({"tool": "pay", "action": "ask"}),
    )
    .await;
    let (_, _, events) = server.run_turn(&server.owner, &bot, "Pay 5").await;
    let request = requested(&events).expect("an approval_requested event");
    let pending = server.approvals(&server.owner, "pending").await;
    assert_eq!(pending[0]["call"]["arguments"]["memo"], MARKER);
    assert_eq!(
        server.approval(&request).await["call"]["arguments"]["memo"],
        MARKER
    );
    assert_eq!(
        server.columns_containing(MARKER).await,
        Vec::<String>::new()
    );
}
