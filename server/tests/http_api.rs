//! The HTTP API end to end, on SQLite and on a real PostgreSQL: tokens and access, bad input,
//! execution visibility, resumable event streams, cancellation, and the fault boundary.

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

use std::sync::Arc;
use std::time::Duration;

use fake_openai::{Answer, FakeOpenAi};
use futures::StreamExt;
use openbot_schema::{ErrorCategory, Event, EventKind, EventPage, ExecutionId, TurnOutcome};
use openbot_server::http::ERROR_ID_HEADER;
use openbot_server::identity::{NewToken, Right, new_secret, secret_hash};
use reqwest::StatusCode;
use serde_json::{Value, json};

use api::{Raw, Server, error_code, logs, outcome_of, postgres, receipt, server, sqlite};

http_tests!(
    health_needs_no_token,
    a_missing_unknown_revoked_or_expired_token_is_401,
    a_token_without_the_right_gets_403,
    a_new_token_never_has_more_rights_than_its_creator,
    bad_input_gets_a_declared_error_and_writes_nothing,
    another_members_execution_is_not_found,
    events_stream_as_sse_and_resume_from_any_cursor_without_gap_or_duplicate,
    long_polling_waits_for_events_and_says_when_the_end_was_read,
    cancel_over_http_ends_the_turn_cancelled,
    a_server_fault_answers_request_failed_with_the_error_id_and_no_cause,
    a_fault_whose_error_record_cannot_be_saved_keeps_its_id_and_is_saved_later,
    a_stored_time_out_of_range_is_a_storage_fault_never_1970,
    the_bot_use_cases_refuse_a_caller_without_the_right_themselves,
    the_budget_use_cases_refuse_a_caller_without_the_right_themselves,
    the_account_use_cases_refuse_a_caller_without_the_right_themselves,
    the_provider_use_cases_refuse_a_caller_without_the_right_themselves,
    the_tool_use_cases_refuse_a_caller_without_the_right_themselves,
    the_execution_use_cases_refuse_a_caller_without_the_right_themselves,
    the_chat_use_cases_refuse_a_caller_without_the_right_themselves,
    a_chat_with_a_bot_answers_and_keeps_its_history,
    a_retried_send_returns_the_same_execution_and_other_input_is_a_conflict,
    a_retried_send_after_the_bot_changed_answers_the_recorded_turn,
    a_command_key_used_for_another_chat_is_a_conflict,
    input_sent_while_a_turn_runs_waits_its_turn_in_order,
    steering_input_joins_the_running_turn,
    a_steer_retried_with_its_key_joins_once,
    a_steer_key_used_for_other_input_is_a_conflict,
    a_steer_sent_as_its_own_input_and_retried_answers_the_same_execution,
    stop_cancels_the_running_turn_and_the_queue_goes_on,
    deleting_a_chat_cancels_its_turns_and_admits_nothing_more,
    a_member_cannot_read_or_send_to_another_members_chat,
    a_private_bot_is_its_owners_and_a_shared_bot_gives_each_member_their_own_chats,
    a_stale_bot_revision_is_a_conflict,
    deleting_a_shared_bot_closes_every_members_chats,
    concurrent_deletions_of_a_chat_run_one_deletion_and_both_answer,
    sends_racing_a_deletion_are_refused_or_cancelled_and_none_outlives_it,
    a_session_cookie_works_from_the_same_origin_only,
    long_lived_work_is_refused_to_a_browser_session,
    a_narrowed_token_can_never_hand_out_a_membership_or_an_organization,
    members_and_organizations_are_read_only_with_their_rights,
    a_token_limited_to_one_bot_changes_no_setting_of_the_whole_organization,
    a_token_limited_to_one_bot_reads_nothing_of_another_bot,
    a_token_limited_to_one_bot_sets_its_bots_budget_and_no_organization_tool_app_key_or_other_budget,
    an_organizations_provider_key_is_used_by_its_bots_and_never_returned,
    an_invited_person_joins_once_and_a_removed_member_loses_access_at_once,
    a_host_tool_result_delivered_over_http_reaches_the_model,
    a_turn_whose_token_is_revoked_while_it_waits_sends_nothing_more,
    a_turn_whose_shared_bot_is_made_private_while_it_waits_sends_nothing_more,
    a_turn_with_no_saved_identity_is_refused_as_unchecked_work,
    a_tool_result_that_comes_back_after_the_turns_token_was_revoked_is_saved_before_it_fails,
    a_used_up_chat_budget_ends_the_next_turn_before_its_model_request,
    a_scripted_model_follows_each_chat_from_its_first_step,
    an_exhausted_script_fails_the_turn_as_a_configuration_error,
    a_budget_needs_an_admin_and_a_target_of_the_organization,
    limits_are_set_listed_in_pages_and_deleted,
    a_limit_needs_an_admin_and_valid_settings,
    a_bot_turn_past_its_request_limit_waits_to_the_deadline_and_fails_with_timeout,
    a_fault_after_the_stream_started_ends_it_with_a_request_failed_event,
    organization_endpoints_never_read_or_command_service_work,
    a_registered_http_tool_is_called_once_and_a_later_change_never_changes_a_saved_call,
    an_admin_creates_an_organization_whose_token_acts_only_there,
    a_stored_file_is_its_owners_and_its_bytes_live_in_the_object_store,
    a_bot_limited_token_lists_only_its_bots_chats,
    a_bot_limited_token_cannot_read_or_send_to_another_bots_chat,
    a_bot_limited_token_cannot_read_another_bots_execution,
    a_bot_limited_token_cannot_poll_another_bots_events,
    a_bot_limited_token_cannot_stream_another_bots_events,
    a_bot_limited_token_cannot_cancel_another_bots_execution,
    a_bot_limited_token_cannot_pause_another_bots_execution,
    a_bot_limited_token_cannot_resume_another_bots_execution,
    a_bot_limited_token_cannot_deliver_tool_results_to_another_bots_execution,
    a_bot_limited_token_lists_only_the_files_it_uploaded,
    a_bot_limited_token_cannot_read_a_file_it_did_not_upload,
    a_bot_limited_token_cannot_read_the_bytes_of_a_file_it_did_not_upload,
    a_bot_limited_token_cannot_delete_a_file_it_did_not_upload,
    event_payloads_are_sealed_at_rest,
    steering_input_is_sealed_at_rest,
);

async fn health_needs_no_token(server: Server) {
    let response = server
        .http
        .get(format!("{}/v1/health", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"status": "ok"})
    );
}

async fn a_missing_unknown_revoked_or_expired_token_is_401(server: Server) {
    let missing = server
        .http
        .get(format!("{}/v1/tokens", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(missing).await,
        (StatusCode::UNAUTHORIZED, "unauthorized".into())
    );
    let unknown = server
        .get("/v1/tokens", "obt_not-a-real-token")
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(unknown).await,
        (StatusCode::UNAUTHORIZED, "unauthorized".into())
    );

    let response = server
        .post("/v1/tokens", &server.owner)
        .json(&json!({"name": "temp", "rights": []}))
        .send()
        .await
        .unwrap();
    let created: Value = response.json().await.unwrap();
    let (id, secret) = (
        created["token"]["id"].as_str().unwrap().to_string(),
        created["secret"].as_str().unwrap().to_string(),
    );
    let revoke = server
        .http
        .delete(format!("{}/v1/tokens/{id}", server.base))
        .bearer_auth(&server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(revoke.status(), StatusCode::NO_CONTENT);
    let revoked = server.get("/v1/tokens", &secret).send().await.unwrap();
    let status = revoked.status();
    let body: Value = revoked.json().await.unwrap();
    assert_eq!(
        (status, body["message"].as_str().unwrap()),
        (StatusCode::UNAUTHORIZED, "the token was revoked")
    );

    let owner = server.owner_member().await;
    let expired_secret = new_secret();
    let expired = NewToken {
        id: uuid::Uuid::now_v7(),
        name: "old".into(),
        secret_hash: secret_hash(&expired_secret),
        rights: Right::all(),
        bot_ids: None,
        expires_at: Some(openbot_server::store::now_ms() - 1),
    };
    server
        .database
        .identity
        .create_token(owner.member_id, expired)
        .await
        .unwrap();
    let response = server
        .get("/v1/tokens", &expired_secret)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (status, body["message"].as_str().unwrap()),
        (StatusCode::UNAUTHORIZED, "the token has expired")
    );
}

async fn a_token_without_the_right_gets_403(server: Server) {
    let reader = server
        .token_with(json!([{"resource": "tokens", "action": "read"}]))
        .await;
    assert_eq!(
        server
            .get("/v1/tokens", &reader)
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    let write = server
        .post("/v1/tokens", &reader)
        .json(&json!({"name": "x", "rights": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(write).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
    let execution = server
        .get(&format!("/v1/executions/{}", ExecutionId::new()), &reader)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(execution).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
}

async fn a_new_token_never_has_more_rights_than_its_creator(server: Server) {
    let limited = server
        .token_with(json!([{"resource": "tokens", "action": "write"}]))
        .await;
    let wider = server
        .post("/v1/tokens", &limited)
        .json(&json!({"name": "wider", "rights": [{"resource": "bots", "action": "write"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(wider).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
}

async fn bad_input_gets_a_declared_error_and_writes_nothing(server: Server) {
    let post = |body: &'static str, content_type: &'static str| {
        server
            .post("/v1/tokens", &server.owner)
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    assert_eq!(
        error_code(post("{\"name\":", "application/json").await.unwrap()).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    assert_eq!(
        error_code(
            post(
                "{\"name\":\"x\",\"rights\":[],\"admin\":true}",
                "application/json"
            )
            .await
            .unwrap()
        )
        .await,
        (StatusCode::BAD_REQUEST, "invalid_input".into()),
        "unknown fields are refused"
    );
    assert_eq!(
        error_code(
            post("{\"name\":\"x\",\"rights\":[]}", "text/plain")
                .await
                .unwrap()
        )
        .await,
        (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type".into()
        )
    );
    // Its own connection: the server closes a connection whose body it refused.
    let huge = format!(
        "{{\"name\":\"{}\",\"rights\":[]}}",
        "x".repeat(2 * 1024 * 1024)
    );
    let response = reqwest::Client::new()
        .post(format!("{}/v1/tokens", server.base))
        .bearer_auth(&server.owner)
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(response).await,
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large".into())
    );
    let nul = server
        .post("/v1/tokens", &server.owner)
        .json(&json!({"name": "a\u{0}b", "rights": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(nul).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into()),
        "NUL in text is refused, not a fault"
    );
    let bad_id = server
        .get("/v1/executions/not-an-id", &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(bad_id).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    let tokens: Vec<Value> = server.items("/v1/tokens", &server.owner).await;
    assert_eq!(tokens.len(), 1, "nothing was half-written");
}

async fn another_members_execution_is_not_found(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    let id = server.owner_turn(&model).await;
    let other = server.other_member_token().await;
    let theirs = server
        .get(&format!("/v1/executions/{id}"), &other)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(theirs).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    let events = server
        .get(&format!("/v1/executions/{id}/events"), &other)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), StatusCode::NOT_FOUND);
    let cancel = server
        .post(&format!("/v1/executions/{id}/cancel"), &other)
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status(), StatusCode::NOT_FOUND);
    let mine = server
        .get(&format!("/v1/executions/{id}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(mine.status(), StatusCode::OK);
}

/// Reads server-sent events until `stop_after` events or the stream ends.
async fn read_sse(
    server: &Server,
    id: ExecutionId,
    last_event_id: Option<u64>,
    stop_after: usize,
) -> Vec<Event> {
    let mut request = server
        .get(&format!("/v1/executions/{id}/events"), &server.owner)
        .header("accept", "text/event-stream");
    if let Some(last) = last_event_id {
        request = request.header("last-event-id", last.to_string());
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut bytes = response.bytes_stream();
    let mut buffer = String::new();
    let mut events = Vec::new();
    while events.len() < stop_after {
        let Some(chunk) = tokio::time::timeout(Duration::from_secs(30), bytes.next())
            .await
            .unwrap()
        else {
            break;
        };
        buffer.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let mut sse_id = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("id:") {
                    sse_id = Some(value.trim().parse::<u64>().unwrap());
                } else if let Some(value) = line.strip_prefix("data:") {
                    data = Some(value.trim().to_string());
                }
            }
            if let Some(data) = data {
                let event: Event = serde_json::from_str(&data).unwrap();
                assert_eq!(sse_id, Some(event.sequence), "the SSE id is the sequence");
                events.push(event);
                if events.len() >= stop_after {
                    break;
                }
            }
        }
    }
    events
}

async fn events_stream_as_sse_and_resume_from_any_cursor_without_gap_or_duplicate(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec![
        "a", "b", "c", "d", "e", "f", "g", "h",
    ])])
    .await;
    model.piece_delay(Duration::from_millis(40));
    let id = server.owner_turn(&model).await;
    let mut seen: Vec<Event> = Vec::new();
    // Disconnect after 1, then 2, then 3 ... events and resume from the last one seen.
    let mut take = 1;
    loop {
        let last = seen.last().map(|e| e.sequence);
        let batch = read_sse(&server, id, last, take).await;
        let ended = batch.last().is_some_and(|e| e.kind.is_terminal()) || batch.is_empty();
        seen.extend(batch);
        if ended {
            break;
        }
        take += 1;
    }
    let sequences: Vec<u64> = seen.iter().map(|e| e.sequence).collect();
    assert_eq!(
        sequences,
        (1..=sequences.len() as u64).collect::<Vec<_>>(),
        "no gap, no duplicate"
    );
    assert!(matches!(
        seen.last().unwrap().kind,
        EventKind::TurnEnded {
            outcome: TurnOutcome::Completed,
            ..
        }
    ));
    let after_end = read_sse(&server, id, seen.last().map(|e| e.sequence), 10).await;
    assert!(
        after_end.is_empty(),
        "after the end the stream ends at once"
    );
}

async fn long_polling_waits_for_events_and_says_when_the_end_was_read(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["slow"])]).await;
    model.delay(0, Duration::from_millis(500));
    let id = server.owner_turn(&model).await;
    let mut after = 0;
    let mut all = Vec::new();
    for _ in 0..50 {
        let page: EventPage = server
            .get(
                &format!("/v1/executions/{id}/events?after={after}&wait=10"),
                &server.owner,
            )
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(
            !page.events.is_empty() || page.ended,
            "a long poll returns events or the end"
        );
        all.extend(page.events);
        after = page.next_after;
        if page.ended {
            break;
        }
    }
    assert!(matches!(
        all.last().unwrap().kind,
        EventKind::TurnEnded { .. }
    ));
    let again: EventPage = server
        .get(
            &format!("/v1/executions/{id}/events?after={after}&wait=10"),
            &server.owner,
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        again.events.is_empty() && again.ended,
        "the end is answered at once"
    );
}

async fn cancel_over_http_ends_the_turn_cancelled(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["never"])]).await;
    model.delay(0, Duration::from_secs(30));
    let id = server.owner_turn(&model).await;
    let response = server
        .post(&format!("/v1/executions/{id}/cancel"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let mut last = None;
    for _ in 0..100 {
        let page: EventPage = server
            .get(
                &format!("/v1/executions/{id}/events?after=0"),
                &server.owner,
            )
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if page.ended {
            last = page.events.last().cloned();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(matches!(
        last.unwrap().kind,
        EventKind::TurnEnded {
            outcome: TurnOutcome::Cancelled,
            ..
        }
    ));
    let again = server
        .post(&format!("/v1/executions/{id}/cancel"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(again).await,
        (StatusCode::CONFLICT, "conflict".into())
    );
}

/// Damages the stored execution rows (reading one is then a fault, not a passing outage) and
/// reads execution `id`. On PostgreSQL under load a read right after the observed end once
/// met a valid row (something wrote it after the end event was visible; not yet traced): the
/// damage is written again until a read meets it.
async fn read_damaged(server: &Server, id: ExecutionId) -> reqwest::Response {
    for _ in 0..100 {
        server
            .raw_execute(
                "UPDATE executions SET state = 'damaged-beyond-repair' WHERE id <> $1",
                uuid::Uuid::nil(),
            )
            .await;
        let response = server
            .get(&format!("/v1/executions/{id}"), &server.owner)
            .send()
            .await
            .unwrap();
        if response.status() != StatusCode::OK {
            return response;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the damaged row was written again every time");
}

/// The error recorder fails too (here its table is away): the answer keeps its category and
/// error ID, and the record is saved once the database takes it again.
async fn a_fault_whose_error_record_cannot_be_saved_keeps_its_id_and_is_saved_later(
    server: Server,
) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    let id = server.owner_turn(&model).await;
    server.finish(&server.owner, &id.to_string()).await;
    let nil = uuid::Uuid::nil();
    server
        .raw_execute(
            "ALTER TABLE error_records RENAME TO error_records_away",
            nil,
        )
        .await;
    let response = read_damaged(&server, id).await;
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "request_failed");
    assert_eq!(body["category"], "storage");
    let error_id: uuid::Uuid = body["error_id"].as_str().unwrap().parse().unwrap();
    server
        .raw_execute(
            "ALTER TABLE error_records_away RENAME TO error_records",
            nil,
        )
        .await;
    let mut saved = None;
    for _ in 0..200 {
        saved = server.database.store.error_record(error_id).await.unwrap();
        if saved.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, blob) = saved.expect("the record is saved once the database takes it");
    let cause = String::from_utf8(server.engine.context().keys.open(&blob).unwrap()).unwrap();
    assert!(cause.contains("bad state"), "{cause}");
}

/// The caller of a token of the owner, with only the rights `keep` allows.
async fn owner_caller_with(
    server: &Server,
    keep: impl Fn(&Right) -> bool,
) -> openbot_server::identity::Caller {
    let (token, member) = server
        .database
        .identity
        .token_by_hash(&secret_hash(&server.owner))
        .await
        .unwrap()
        .unwrap();
    openbot_server::identity::Caller {
        member,
        credential: openbot_server::identity::Credential::Token { id: token.id },
        rights: token.rights.into_iter().filter(keep).collect(),
        bot_ids: None,
    }
}

/// The Bot use cases check the caller's right themselves (not only their HTTP handlers): a
/// caller whose token lacks `bots` is refused by the service, and nothing is created.
async fn the_bot_use_cases_refuse_a_caller_without_the_right_themselves(server: Server) {
    use openbot_server::bots::Bots;
    use openbot_server::service::ServiceError;
    let model = FakeOpenAi::start(vec![]).await;
    let caller = owner_caller_with(&server, |right| {
        right.resource != openbot_schema::Resource::Bots
    })
    .await;
    let bots = Bots::new(
        Arc::clone(&server.engine),
        Arc::clone(&server.database.bots),
        api::test_platform(),
    );
    let spec: openbot_schema::BotSpec =
        serde_json::from_value(json!({"name": "Helper", "model": model.spec()})).unwrap();
    let refused = bots.create(&caller, &spec).await.unwrap_err();
    assert!(matches!(refused, ServiceError::Forbidden(_)), "{refused:?}");
    let paging = openbot_server::paging::Paging::first(10);
    let refused = bots.list(&caller, &paging).await.unwrap_err();
    assert!(matches!(refused, ServiceError::Forbidden(_)), "{refused:?}");
    let listed: Vec<Value> = server.items("/v1/bots", &server.owner).await;
    assert!(listed.is_empty(), "nothing was created: {listed:?}");
}

/// The budget use cases refuse a caller without the `models` right themselves.
async fn the_budget_use_cases_refuse_a_caller_without_the_right_themselves(server: Server) {
    use openbot_server::budgets::Budgets;
    use openbot_server::service::ServiceError;
    let caller = owner_caller_with(&server, |right| {
        right.resource != openbot_schema::Resource::Models
    })
    .await;
    let budgets = Budgets::new(Arc::clone(&server.database.budgets));
    let organization = caller.member.organization_id;
    let put = openbot_schema::PutBudget { max_cost_micros: 5 };
    let refused = budgets
        .put(
            &caller,
            openbot_schema::BudgetScope::Organization,
            organization,
            &put,
        )
        .await
        .unwrap_err();
    assert!(matches!(refused, ServiceError::Forbidden(_)), "{refused:?}");
    let refused = budgets
        .list(&caller, &openbot_server::paging::Paging::first(10))
        .await
        .unwrap_err();
    assert!(matches!(refused, ServiceError::Forbidden(_)), "{refused:?}");
    let listed: Vec<Value> = server.items("/v1/budgets", &server.owner).await;
    assert!(listed.is_empty(), "nothing was set: {listed:?}");
}

/// The account use cases refuse a caller without the `tokens` and `members` rights
/// themselves: no token is made, no member read.
async fn the_account_use_cases_refuse_a_caller_without_the_right_themselves(server: Server) {
    use openbot_server::identity::Accounts;
    use openbot_server::service::ServiceError;
    let caller = owner_caller_with(&server, |right| {
        right.resource != openbot_schema::Resource::Tokens
            && right.resource != openbot_schema::Resource::Members
    })
    .await;
    let accounts = Accounts::new(Arc::clone(&server.database.identity));
    let request: openbot_schema::CreateToken =
        serde_json::from_value(json!({"name": "more", "rights": []})).unwrap();
    let before: Vec<Value> = server.items("/v1/tokens", &server.owner).await;
    let refused = accounts.create_token(&caller, request).await.unwrap_err();
    assert!(matches!(refused, ServiceError::Forbidden(_)), "{refused:?}");
    let paging = openbot_server::paging::Paging::first(10);
    let refused = accounts.members(&caller, &paging).await.unwrap_err();
    assert!(matches!(refused, ServiceError::Forbidden(_)), "{refused:?}");
    let after: Vec<Value> = server.items("/v1/tokens", &server.owner).await;
    assert_eq!(before.len(), after.len(), "no token was made");
}

/// The provider settings use cases refuse a caller without the `models` right themselves:
/// no key is stored.
async fn the_provider_use_cases_refuse_a_caller_without_the_right_themselves(server: Server) {
    use openbot_server::models::Providers;
    use openbot_server::service::ServiceError;
    let caller = owner_caller_with(&server, |right| {
        right.resource != openbot_schema::Resource::Models
    })
    .await;
    let providers = Providers::new(
        Arc::clone(&server.database.models),
        server.engine.context().keys.clone(),
        api::test_platform(),
    );
    let put: openbot_schema::PutProvider =
        serde_json::from_value(json!({"api_key": "sk-not-stored"})).unwrap();
    let refused = providers.put(&caller, "openai", &put).await.unwrap_err();
    assert!(matches!(refused, ServiceError::Forbidden(_)), "{refused:?}");
    let listed: Vec<Value> = server.items("/v1/models/providers", &server.owner).await;
    assert!(listed.is_empty(), "nothing was stored: {listed:?}");
}

/// The tool registry use cases refuse a caller without the `bots` right themselves.
async fn the_tool_use_cases_refuse_a_caller_without_the_right_themselves(server: Server) {
    use openbot_server::service::ServiceError;
    use openbot_server::tools::Tools;
    let caller = owner_caller_with(&server, |right| {
        right.resource != openbot_schema::Resource::Bots
    })
    .await;
    let keys = server.engine.context().keys.clone();
    let vaults = openbot_server::vaults::Vaults::new(
        Arc::clone(&server.database.vaults),
        keys,
        Arc::clone(&server.database.bots),
        Arc::clone(&server.database.tools),
    );
    let bots = openbot_server::bots::Bots::new(
        Arc::clone(&server.engine),
        Arc::clone(&server.database.bots),
        api::test_platform(),
    );
    let tools = Tools::new(
        Arc::clone(&server.database.tools),
        api::test_platform(),
        vaults,
        bots,
    );
    let put: openbot_schema::PutHttpTool = serde_json::from_value(json!({
        "description": "looks", "input_schema": {"type": "object"}, "url": "http://127.0.0.1:9/look"
    }))
    .unwrap();
    let refused = tools.put_http(&caller, "look", put).await.unwrap_err();
    assert!(matches!(refused, ServiceError::Forbidden(_)), "{refused:?}");
    let refused = tools
        .list_http(&caller, &openbot_server::paging::Paging::first(10))
        .await
        .unwrap_err();
    assert!(matches!(refused, ServiceError::Forbidden(_)), "{refused:?}");
    let listed: Vec<Value> = server.items("/v1/tools", &server.owner).await;
    assert!(listed.is_empty(), "nothing was registered: {listed:?}");
}

/// The execution use cases refuse a caller without the `executions` right themselves: its
/// own Turn is neither read nor cancelled.
async fn the_execution_use_cases_refuse_a_caller_without_the_right_themselves(server: Server) {
    use openbot_server::executions::{Command, ExecutionError, Executions};
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    let id = server.owner_turn(&model).await;
    let caller = owner_caller_with(&server, |right| {
        right.resource != openbot_schema::Resource::Executions
    })
    .await;
    let executions = Executions::new(Arc::clone(&server.engine));
    let refused = executions.get(&caller, id).await.unwrap_err();
    assert!(
        matches!(refused, ExecutionError::Forbidden(_)),
        "{refused:?}"
    );
    let refused = executions
        .command(&caller, id, Command::Cancel)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ExecutionError::Forbidden(_)),
        "{refused:?}"
    );
    let outcome = server.finish(&server.owner, &id.to_string()).await;
    assert_eq!(
        outcome_of(&outcome),
        Some(TurnOutcome::Completed),
        "not cancelled"
    );
}

/// The Chat use cases check the caller's right themselves: a caller without `chats` neither
/// reads its own Chat nor sends to it.
async fn the_chat_use_cases_refuse_a_caller_without_the_right_themselves(server: Server) {
    use openbot_server::chats::ChatError;
    let model = FakeOpenAi::start(vec![]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let chat: openbot_schema::ChatId = server.chat(&server.owner, &bot).await.parse().unwrap();
    let caller = owner_caller_with(&server, |right| {
        right.resource != openbot_schema::Resource::Chats
    })
    .await;
    let chats = openbot_server::chats::Chats::new(
        Arc::clone(&server.engine),
        Arc::clone(&server.database.chats),
        Arc::clone(&server.database.bots),
        openbot_server::node::tool_routing(&server.database),
    );
    let refused = chats.get(&caller, chat).await.unwrap_err();
    assert!(matches!(refused, ChatError::Forbidden(_)), "{refused:?}");
    let input = openbot_schema::SendInput {
        content: vec![openbot_schema::ContentPart::text("hi")],
        command_key: None,
    };
    let refused = chats.send(&caller, chat, input).await.unwrap_err();
    assert!(matches!(refused, ChatError::Forbidden(_)), "{refused:?}");
    assert_eq!(model.total_requests(), 0, "nothing was sent");
}

/// A stored time no calendar holds is damage: the read fails as a storage fault with an error
/// ID, and never shows the row as created in 1970.
async fn a_stored_time_out_of_range_is_a_storage_fault_never_1970(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let id: uuid::Uuid = bot["id"].as_str().unwrap().parse().unwrap();
    server
        .raw_execute(
            "UPDATE bots SET created_at = 9223372036854775807 WHERE id = $1",
            id,
        )
        .await;
    for path in [format!("/v1/bots/{id}"), "/v1/bots".to_string()] {
        let response = server.get(&path, &server.owner).send().await.unwrap();
        assert_eq!(
            response.status(),
            StatusCode::INTERNAL_SERVER_ERROR,
            "{path}"
        );
        assert!(response.headers().contains_key(ERROR_ID_HEADER), "{path}");
        let text = response.text().await.unwrap();
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["category"], "storage", "{path}");
        assert!(!text.contains("1970"), "{path}: {text}");
    }
}

async fn a_server_fault_answers_request_failed_with_the_error_id_and_no_cause(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    let id = server.owner_turn(&model).await;
    server.finish(&server.owner, &id.to_string()).await;
    let response = read_damaged(&server, id).await;
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let header = response.headers()[ERROR_ID_HEADER]
        .to_str()
        .unwrap()
        .to_string();
    let text = response.text().await.unwrap();
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["code"], "request_failed");
    assert_eq!(body["category"], "storage");
    assert_eq!(body["error_id"], header.as_str());
    assert!(
        !text.contains("bad state") && !text.contains("damaged"),
        "no cause in the answer: {text}"
    );
    let (_, blob) = server
        .database
        .store
        .error_record(header.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let cause = String::from_utf8(server.engine.context().keys.open(&blob).unwrap()).unwrap();
    assert!(
        cause.contains("bad state"),
        "the sealed record keeps the cause: {cause}"
    );
    let logged = String::from_utf8_lossy(&logs().lock().unwrap()).to_string();
    assert!(logged.contains(&header), "the error ID is logged");
    assert!(!logged.contains("bad state"), "the cause is in no log line");
}

// ---- Bots and Chats ----

async fn a_chat_with_a_bot_answers_and_keeps_its_history(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["Hel", "lo!"])]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "Hi", None).await).await;
    assert_eq!(sent["disposition"], "started");
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(server.history(&server.owner, &chat).await, ["Hi", "Hello!"]);
}

async fn a_retried_send_returns_the_same_execution_and_other_input_is_a_conflict(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["once"])]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let first = receipt(server.send(&server.owner, &chat, "Hi", Some("k1")).await).await;
    let again = receipt(server.send(&server.owner, &chat, "Hi", Some("k1")).await).await;
    assert_eq!(first["execution_id"], again["execution_id"]);
    let other = server.send(&server.owner, &chat, "Other", Some("k1")).await;
    assert_eq!(
        error_code(other).await,
        (StatusCode::CONFLICT, "conflict".into())
    );
    server
        .finish(&server.owner, first["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(
        server.history(&server.owner, &chat).await.len(),
        2,
        "one Turn"
    );
    assert_eq!(model.total_requests(), 1);
}

async fn a_retried_send_after_the_bot_changed_answers_the_recorded_turn(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["once"])]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let first = receipt(server.send(&server.owner, &chat, "Hi", Some("k1")).await).await;
    // The answer was lost; meanwhile someone changed the Bot. The retry is the same request.
    let changed = server
        .patch(
            &format!("/v1/bots/{}", bot["id"].as_str().unwrap()),
            &server.owner,
        )
        .json(&json!({"instructions": "Answer in French."}))
        .send()
        .await
        .unwrap();
    assert_eq!(changed.status(), StatusCode::OK);
    let again = receipt(server.send(&server.owner, &chat, "Hi", Some("k1")).await).await;
    assert_eq!(first["execution_id"], again["execution_id"]);
    server
        .finish(&server.owner, first["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(model.total_requests(), 1);
}

async fn a_command_key_used_for_another_chat_is_a_conflict(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["once"])]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let first_chat = server.chat(&server.owner, &bot).await;
    let second_chat = server.chat(&server.owner, &bot).await;
    let first = receipt(
        server
            .send(&server.owner, &first_chat, "Hi", Some("k1"))
            .await,
    )
    .await;
    // The same key and input for another Chat names another request.
    let other = server
        .send(&server.owner, &second_chat, "Hi", Some("k1"))
        .await;
    assert_eq!(
        error_code(other).await,
        (StatusCode::CONFLICT, "conflict".into())
    );
    server
        .finish(&server.owner, first["execution_id"].as_str().unwrap())
        .await;
    assert!(server.history(&server.owner, &second_chat).await.is_empty());
    assert_eq!(model.total_requests(), 1);
}

async fn input_sent_while_a_turn_runs_waits_its_turn_in_order(server: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Text(vec!["one"]),
        Answer::Text(vec!["two"]),
        Answer::Text(vec!["three"]),
    ])
    .await;
    model.delay(0, Duration::from_millis(400));
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let a = receipt(server.send(&server.owner, &chat, "a", None).await).await;
    let b = receipt(server.send(&server.owner, &chat, "b", None).await).await;
    let c = receipt(server.send(&server.owner, &chat, "c", None).await).await;
    assert_eq!(
        (
            a["disposition"].as_str(),
            b["disposition"].as_str(),
            c["disposition"].as_str()
        ),
        (Some("started"), Some("queued"), Some("queued"))
    );
    for r in [&c, &b, &a] {
        let events = server
            .finish(&server.owner, r["execution_id"].as_str().unwrap())
            .await;
        assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    }
    // Each Turn saw the ones before it: the model answered by the conversation's position.
    assert_eq!(
        server.history(&server.owner, &chat).await,
        ["a", "one", "b", "two", "c", "three"]
    );
}

async fn steering_input_joins_the_running_turn(server: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Text(vec!["first"]),
        Answer::Text(vec!["saw both"]),
    ])
    .await;
    model.delay(0, Duration::from_millis(500));
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "start", None).await).await;
    // Wait until the first model request is on its way, so the steer joins the next step.
    server
        .wait_started(sent["execution_id"].as_str().unwrap())
        .await;
    let steer = server
        .post(&format!("/v1/chats/{chat}/steer"), &server.owner)
        .json(&json!({"content": [{"type": "text", "text": "also this"}]}))
        .send()
        .await
        .unwrap();
    let steered = receipt(steer).await;
    assert_eq!(steered["disposition"], "steered");
    assert_eq!(steered["execution_id"], sent["execution_id"]);
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::InputSteered { .. }))
    );
    assert_eq!(
        server.history(&server.owner, &chat).await,
        ["start", "first", "also this", "saw both"]
    );
}

async fn steer(server: &Server, chat: &str, text: &str, key: &str) -> reqwest::Response {
    server
        .post(&format!("/v1/chats/{chat}/steer"), &server.owner)
        .json(&json!({"content": [{"type": "text", "text": text}], "command_key": key}))
        .send()
        .await
        .unwrap()
}

async fn a_steer_retried_with_its_key_joins_once(server: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Text(vec!["first"]),
        Answer::Text(vec!["saw it once"]),
    ])
    .await;
    model.delay(0, Duration::from_millis(500));
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "start", None).await).await;
    server
        .wait_started(sent["execution_id"].as_str().unwrap())
        .await;
    let steered = receipt(steer(&server, &chat, "also this", "s1").await).await;
    let again = receipt(steer(&server, &chat, "also this", "s1").await).await;
    assert_eq!(steered, again, "the retry answers the same receipt");
    assert_eq!(again["disposition"], "steered");
    assert_eq!(again["execution_id"], sent["execution_id"]);
    server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(
        server.history(&server.owner, &chat).await,
        ["start", "first", "also this", "saw it once"]
    );
}

async fn a_steer_key_used_for_other_input_is_a_conflict(server: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Text(vec!["first"]),
        Answer::Text(vec!["saw one"]),
    ])
    .await;
    model.delay(0, Duration::from_millis(500));
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "start", None).await).await;
    server
        .wait_started(sent["execution_id"].as_str().unwrap())
        .await;
    receipt(steer(&server, &chat, "also this", "s1").await).await;
    let other = steer(&server, &chat, "something else", "s1").await;
    assert_eq!(
        error_code(other).await,
        (StatusCode::CONFLICT, "conflict".into())
    );
    server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(
        server.history(&server.owner, &chat).await,
        ["start", "first", "also this", "saw one"]
    );
}

async fn a_steer_sent_as_its_own_input_and_retried_answers_the_same_execution(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["once"])]).await;
    model.delay(0, Duration::from_millis(500));
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    // No Turn runs, so the steer is sent as its own input; its retry finds that Turn running
    // and must not join it.
    let first = receipt(steer(&server, &chat, "hello", "s1").await).await;
    assert_eq!(first["disposition"], "started");
    let again = receipt(steer(&server, &chat, "hello", "s1").await).await;
    assert_eq!(again, first);
    server
        .finish(&server.owner, first["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(
        server.history(&server.owner, &chat).await,
        ["hello", "once"]
    );
    assert_eq!(model.total_requests(), 1);
}

async fn stop_cancels_the_running_turn_and_the_queue_goes_on(server: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Text(vec!["never"]),
        Answer::Text(vec!["next"]),
    ])
    .await;
    model.delay_first(0, Duration::from_secs(30));
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let first = receipt(server.send(&server.owner, &chat, "a", None).await).await;
    let second = receipt(server.send(&server.owner, &chat, "b", None).await).await;
    // Stop only once the first request hangs at the model, so the delay is spent on it.
    while model.requests_at(0) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stop = server
        .post(&format!("/v1/chats/{chat}/stop"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(stop.status(), StatusCode::ACCEPTED);
    let events = server
        .finish(&server.owner, first["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Cancelled));
    let events = server
        .finish(&server.owner, second["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
}

async fn deleting_a_chat_cancels_its_turns_and_admits_nothing_more(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["never"])]).await;
    model.delay(0, Duration::from_secs(30));
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let running = receipt(server.send(&server.owner, &chat, "a", None).await).await;
    let queued = receipt(server.send(&server.owner, &chat, "b", None).await).await;
    let deleted = server
        .delete(&format!("/v1/chats/{chat}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(
        deleted.status(),
        StatusCode::NO_CONTENT,
        "returns once every Turn ended"
    );
    for r in [&running, &queued] {
        let execution: Value = server
            .get(
                &format!("/v1/executions/{}", r["execution_id"].as_str().unwrap()),
                &server.owner,
            )
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(execution["state"], "cancelled");
    }
    let after = server.send(&server.owner, &chat, "c", None).await;
    assert_eq!(
        error_code(after).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
}

/// F10: two deletions of one Chat at once start one deletion; both answer once it is done.
async fn concurrent_deletions_of_a_chat_run_one_deletion_and_both_answer(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["never"])]).await;
    model.delay(0, Duration::from_secs(30));
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let running = receipt(server.send(&server.owner, &chat, "a", None).await).await;
    let path = format!("/v1/chats/{chat}");
    let (first, second) = tokio::join!(
        server.delete(&path, &server.owner).send(),
        server.delete(&path, &server.owner).send()
    );
    let statuses = [first.unwrap().status(), second.unwrap().status()];
    // Each is answered once the work ended, or is a 404 when it came after the Chat was gone.
    assert!(
        statuses.contains(&StatusCode::NO_CONTENT)
            && statuses
                .iter()
                .all(|s| *s == StatusCode::NO_CONTENT || *s == StatusCode::NOT_FOUND),
        "{statuses:?}"
    );
    let deletions = server
        .raw_text(
            "SELECT CAST(COUNT(*) AS TEXT) FROM executions WHERE kind = 'chat_deletion' AND id <> $1",
            uuid::Uuid::nil(),
        )
        .await;
    assert_eq!(deletions.as_deref(), Some("1"), "one deletion for both");
    let turn: Value = server
        .get(
            &format!(
                "/v1/executions/{}",
                running["execution_id"].as_str().unwrap()
            ),
            &server.owner,
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(turn["state"], "cancelled");
}

/// F10: messages sent while the Chat is being deleted either got in before its gate closed,
/// and were cancelled with it, or are refused; nothing admitted is still open afterwards.
async fn sends_racing_a_deletion_are_refused_or_cancelled_and_none_outlives_it(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["slow"])]).await;
    model.delay(0, Duration::from_secs(30));
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    receipt(server.send(&server.owner, &chat, "first", None).await).await;
    let sends = (0..8).map(|i| {
        let text = format!("racing {i}");
        let server = &server;
        let chat = &chat;
        async move { server.send(&server.owner, chat, &text, None).await }
    });
    let delete = server
        .delete(&format!("/v1/chats/{chat}"), &server.owner)
        .send();
    let (answers, deleted) = tokio::join!(futures::future::join_all(sends), delete);
    assert_eq!(deleted.unwrap().status(), StatusCode::NO_CONTENT);
    let mut admitted = Vec::new();
    for answer in answers {
        match answer.status() {
            StatusCode::ACCEPTED | StatusCode::OK | StatusCode::CREATED => {
                let body: Value = answer.json().await.unwrap();
                admitted.push(body["execution_id"].as_str().unwrap().to_string());
            }
            StatusCode::NOT_FOUND | StatusCode::CONFLICT => {}
            other => panic!("a send answered {other}"),
        }
    }
    for id in admitted {
        let state = server
            .raw_text(
                "SELECT state FROM executions WHERE id = $1",
                id.parse().unwrap(),
            )
            .await;
        assert_eq!(state.as_deref(), Some("cancelled"), "{id}");
    }
    let open = server
        .raw_text(
            "SELECT CAST(COUNT(*) AS TEXT) FROM executions WHERE kind = 'turn' \
             AND state NOT IN ('completed', 'failed', 'cancelled', 'interrupted') AND id <> $1",
            uuid::Uuid::nil(),
        )
        .await;
    assert_eq!(open.as_deref(), Some("0"), "no Turn outlives the deletion");
}

async fn a_member_cannot_read_or_send_to_another_members_chat(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    let bot = server.bot(&server.owner, &model, true).await;
    let chat = server.chat(&server.owner, &bot).await;
    let other = server.other_member_token().await;
    assert_eq!(
        server
            .get(&format!("/v1/chats/{chat}"), &other)
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        error_code(server.send(&other, &chat, "hi", None).await).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    assert_eq!(
        server
            .get(&format!("/v1/chats/{chat}/messages"), &other)
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::NOT_FOUND
    );
    let theirs: Vec<Value> = server.items("/v1/chats", &other).await;
    assert!(theirs.is_empty(), "lists show only the caller's Chats");
}

async fn a_private_bot_is_its_owners_and_a_shared_bot_gives_each_member_their_own_chats(
    server: Server,
) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    let private = server.bot(&server.owner, &model, false).await;
    let shared = server.bot(&server.owner, &model, true).await;
    let other = server.other_member_token().await;
    let visible: Vec<Value> = server.items("/v1/bots", &other).await;
    assert_eq!(visible.len(), 1);
    assert_eq!(visible[0]["id"], shared["id"]);
    let hidden = server
        .post("/v1/chats", &other)
        .json(&json!({"bot_id": private["id"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(hidden.status(), StatusCode::NOT_FOUND);
    let theirs = server.chat(&other, &shared).await;
    let mine = server.chat(&server.owner, &shared).await;
    assert_ne!(theirs, mine);
    let change = server
        .patch(
            &format!("/v1/bots/{}", shared["id"].as_str().unwrap()),
            &other,
        )
        .json(&json!({"name": "Mine now"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        change.status(),
        StatusCode::FORBIDDEN,
        "only the owner changes a shared Bot"
    );
}

async fn deleting_a_shared_bot_closes_every_members_chats(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["slow"])]).await;
    model.delay(0, Duration::from_secs(30));
    let bot = server.bot(&server.owner, &model, true).await;
    // Another member's Chat, with a Turn running: nobody but that member sees it.
    let other = server.other_member_token().await;
    let chat = server.chat(&other, &bot).await;
    let sent = receipt(server.send(&other, &chat, "Hi", None).await).await;
    let turn = sent["execution_id"].as_str().unwrap().to_string();
    for _ in 0..200 {
        if model.in_flight() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(model.in_flight(), 1, "the Turn is asking the model");
    let path = format!("/v1/bots/{}", bot["id"].as_str().unwrap());
    let deleted = server.delete(&path, &server.owner).send().await.unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    let gone = server.get(&path, &other).send().await.unwrap();
    assert_eq!(gone.status(), StatusCode::NOT_FOUND);
    let no_new = server
        .post("/v1/chats", &other)
        .json(&json!({"bot_id": bot["id"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_new.status(), StatusCode::NOT_FOUND);
    // The other member's Turn is cancelled and the Chat closed, as a Chat's deletion does.
    let events = server.finish(&other, &turn).await;
    assert_eq!(
        outcome_of(&events),
        Some(TurnOutcome::Cancelled),
        "{events:?}"
    );
    let mut status = StatusCode::OK;
    for _ in 0..200 {
        status = server
            .get(&format!("/v1/chats/{chat}"), &other)
            .send()
            .await
            .unwrap()
            .status();
        if status == StatusCode::NOT_FOUND {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Asked again: the Bot is gone.
    let again = server.delete(&path, &server.owner).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::NOT_FOUND);
}

async fn a_stale_bot_revision_is_a_conflict(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let path = format!("/v1/bots/{}", bot["id"].as_str().unwrap());
    let first = server
        .patch(&path, &server.owner)
        .json(&json!({"revision": 1, "name": "Renamed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.json::<Value>().await.unwrap()["revision"], 2);
    let stale = server
        .patch(&path, &server.owner)
        .json(&json!({"revision": 1, "name": "Again"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(stale).await,
        (StatusCode::CONFLICT, "conflict".into())
    );
    let bad = server
        .post("/v1/bots", &server.owner)
        .json(&json!({"name": "x", "model": "gpt-4o"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(bad).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
}

// ---- browser sessions ----

/// An owner's token narrowed to a right or a Bot cannot invite (an admin would get an
/// every-right token), remove members, manage invitations or create an organization (whose
/// first token holds every right): a token never leads to more than it holds.
async fn a_narrowed_token_can_never_hand_out_a_membership_or_an_organization(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let narrowed = [
        server
            .token_with(json!([{"resource": "bots", "action": "read"}]))
            .await,
        // Members write, but not every right: it may not hand out more than it holds.
        server
            .token_with(json!([{"resource": "members", "action": "write"}, {"resource": "organizations", "action": "write"}]))
            .await,
        server.bot_limited_token(&bot).await,
    ];
    let member = server.other_member_token().await;
    let other_member: Value = server.items("/v1/members", &server.owner).await[1].clone();
    for token in &narrowed {
        let invite = server
            .post("/v1/invitations", token)
            .json(&json!({"email": "new@example.com", "role": "admin"}))
            .send()
            .await
            .unwrap();
        let organization = server
            .post("/v1/organizations", token)
            .json(&json!({"name": "Mine"}))
            .send()
            .await
            .unwrap();
        for refused in [invite, organization] {
            assert_eq!(
                error_code(refused).await,
                (StatusCode::FORBIDDEN, "forbidden".into())
            );
        }
    }
    // Removing members and managing invitations: not with a right short of members write,
    // nor limited to a Bot.
    for token in [&narrowed[0], &narrowed[2]] {
        let removed = server
            .delete(
                &format!("/v1/members/{}", other_member["id"].as_str().unwrap()),
                token,
            )
            .send()
            .await
            .unwrap();
        let listed = server.get("/v1/invitations", token).send().await.unwrap();
        for refused in [removed, listed] {
            assert_eq!(
                error_code(refused).await,
                (StatusCode::FORBIDDEN, "forbidden".into())
            );
        }
    }
    // Nothing was handed out or taken away.
    assert!(
        server
            .items("/v1/invitations", &server.owner)
            .await
            .is_empty()
    );
    assert_eq!(server.items("/v1/members", &server.owner).await.len(), 2);
    assert_eq!(
        server.items("/v1/organizations", &server.owner).await.len(),
        1
    );
    let still = server.get("/v1/bots", &member).send().await.unwrap();
    assert_eq!(still.status(), StatusCode::OK, "the member is still there");
}

/// An owner's token limited to Bot A sets no limit, no memory setting and no approval rule
/// that reaches other Bots; a rule for Bot A itself it may add and remove.
async fn a_token_limited_to_one_bot_changes_no_setting_of_the_whole_organization(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let a = server.bot(&server.owner, &model, false).await;
    let b = server.bot(&server.owner, &model, false).await;
    let limited = server.bot_limited_token(&a).await;
    let set = put_limit(
        &server,
        &limited,
        "organization",
        json!({"max_concurrent": 1}),
    )
    .send()
    .await
    .unwrap();
    let owner_set = put_limit(
        &server,
        &server.owner,
        "memory",
        json!({"max_concurrent": 2}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(owner_set.status(), StatusCode::OK);
    let deleted = server
        .delete("/v1/limits/memory", &limited)
        .send()
        .await
        .unwrap();
    let memory = server
        .http
        .put(format!("{}/v1/memory-settings", server.base))
        .bearer_auth(&limited)
        .json(&json!({"helper_model": "openai:gpt-4o-mini"}))
        .send()
        .await
        .unwrap();
    let rule = |bot: Option<&Value>| {
        let mut body = json!({"tool": "write", "action": "ask"});
        if let Some(bot) = bot {
            body["bot_id"] = bot["id"].clone();
        }
        server
            .post("/v1/approval-rules", &limited)
            .json(&body)
            .send()
    };
    let everyone = rule(None).await.unwrap();
    let other_bot = rule(Some(&b)).await.unwrap();
    for refused in [set, deleted, memory, everyone, other_bot] {
        assert_eq!(
            error_code(refused).await,
            (StatusCode::FORBIDDEN, "forbidden".into())
        );
    }
    assert_eq!(server.items("/v1/limits", &server.owner).await.len(), 1);
    assert!(
        server
            .items("/v1/approval-rules", &server.owner)
            .await
            .is_empty()
    );
    let own = rule(Some(&a)).await.unwrap();
    assert_eq!(own.status(), StatusCode::CREATED);
    let own: Value = own.json().await.unwrap();
    let removed = server
        .delete(
            &format!("/v1/approval-rules/{}", own["id"].as_str().unwrap()),
            &limited,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
}

/// A token limited to Bot A lists and reads nothing of Bot B: not the Bot, not B's limit
/// (`bot:<B>`), not a rule for B only, not B's memories; what applies to every Bot (the
/// organization's limit, a rule for every Bot) it sees.
async fn a_token_limited_to_one_bot_reads_nothing_of_another_bot(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let a = server.bot(&server.owner, &model, false).await;
    let b = server.bot(&server.owner, &model, false).await;
    let (a_id, b_id) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());
    let limited = server.bot_limited_token(&a).await;
    for scope in [
        "organization".to_string(),
        format!("bot:{a_id}"),
        format!("bot:{b_id}"),
    ] {
        let set = put_limit(&server, &server.owner, &scope, json!({"max_concurrent": 2}))
            .send()
            .await
            .unwrap();
        assert_eq!(set.status(), StatusCode::OK);
    }
    for bot in [None, Some(a_id), Some(b_id)] {
        let mut body = json!({"tool": "write", "action": "ask"});
        if let Some(bot) = bot {
            body["bot_id"] = json!(bot);
        }
        let added = server
            .post("/v1/approval-rules", &server.owner)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(added.status(), StatusCode::CREATED);
    }
    let memory = server
        .post(&format!("/v1/bots/{b_id}/memories"), &server.owner)
        .json(&json!({"content": "B's secret plan", "private": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(memory.status(), StatusCode::CREATED);
    let memory: Value = memory.json().await.unwrap();

    let scopes: Vec<String> = server
        .items("/v1/limits", &limited)
        .await
        .iter()
        .map(|l| l["scope"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(scopes, [format!("bot:{a_id}"), "organization".to_string()]);
    let rule_bots: Vec<Value> = server
        .items("/v1/approval-rules", &limited)
        .await
        .iter()
        .map(|r| r["bot_id"].clone())
        .collect();
    assert_eq!(rule_bots, [Value::Null, json!(a_id)]);
    let bots: Vec<Value> = server
        .items("/v1/bots", &limited)
        .await
        .iter()
        .map(|b| b["id"].clone())
        .collect();
    assert_eq!(bots, [json!(a_id)]);
    assert_not_found(
        server
            .get(&format!("/v1/bots/{b_id}"), &limited)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let memory_id = memory["id"].as_str().unwrap();
    for response in [
        server.get(&format!("/v1/bots/{b_id}/memories"), &limited),
        server.get(&format!("/v1/bots/{b_id}/memories/{memory_id}"), &limited),
        server
            .post(&format!("/v1/bots/{b_id}/memories/search"), &limited)
            .json(&json!({"query": "plan"})),
        server
            .post(&format!("/v1/bots/{b_id}/memories"), &limited)
            .json(&json!({"content": "planted"})),
    ] {
        assert_not_found(response.send().await.unwrap()).await;
    }
    assert_eq!(
        server
            .items(&format!("/v1/bots/{b_id}/memories"), &server.owner)
            .await
            .len(),
        1,
        "nothing was planted in B"
    );
}

/// An owner's token limited to Bot A registers no HTTP tool, delegate, App or model provider
/// key (the organization's, which every Bot may reach), sets no budget of the organization or of Bot
/// B, and lists no budget of B; Bot A's own budget it sets and removes.
async fn a_token_limited_to_one_bot_sets_its_bots_budget_and_no_organization_tool_app_key_or_other_budget(
    server: Server,
) {
    let model = FakeOpenAi::start(vec![]).await;
    let a = server.bot(&server.owner, &model, false).await;
    let b = server.bot(&server.owner, &model, false).await;
    let (a_id, b_id) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());
    let limited = server.bot_limited_token(&a).await;
    let put = |path: String, token: &str, body: Value| {
        server
            .http
            .put(format!("{}{path}", server.base))
            .bearer_auth(token)
            .json(&body)
            .send()
    };
    let budget = json!({"max_cost_micros": 1000});
    let organization = server.owner_member().await.organization_id;
    let refused = [
        put(
            "/v1/tools/write".into(),
            &limited,
            json!({"description": "Writes.", "input_schema": {"type": "object"},
                   "url": "https://tools.example/write"}),
        )
        .await
        .unwrap(),
        put(
            "/v1/delegates/research".into(),
            &limited,
            json!({"bot_id": b_id}),
        )
        .await
        .unwrap(),
        server
            .post("/v1/apps", &limited)
            .json(&json!({"name": "time", "transport": {"type": "http", "url": "https://mcp.example/mcp"}}))
            .send()
            .await
            .unwrap(),
        put(format!("/v1/budgets/organization/{organization}"), &limited, budget.clone())
            .await
            .unwrap(),
        put(format!("/v1/budgets/bot/{b_id}"), &limited, budget.clone())
            .await
            .unwrap(),
        put(
            "/v1/models/providers/openai".into(),
            &limited,
            json!({"api_key": "sk-from-a-limited-token"}),
        )
        .await
        .unwrap(),
    ];
    for response in refused {
        assert_eq!(
            error_code(response).await,
            (StatusCode::FORBIDDEN, "forbidden".into())
        );
    }
    for path in [
        "/v1/tools",
        "/v1/delegates",
        "/v1/apps",
        "/v1/budgets",
        "/v1/models/providers",
    ] {
        assert!(server.items(path, &server.owner).await.is_empty(), "{path}");
    }
    let own = put(format!("/v1/budgets/bot/{a_id}"), &limited, budget.clone())
        .await
        .unwrap();
    assert_eq!(own.status(), StatusCode::OK);
    let other = put(
        format!("/v1/budgets/bot/{b_id}"),
        &server.owner,
        budget.clone(),
    )
    .await
    .unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    let seen: Vec<Value> = server
        .items("/v1/budgets", &limited)
        .await
        .iter()
        .map(|b| b["target_id"].clone())
        .collect();
    assert_eq!(seen, [json!(a_id)]);
    assert_eq!(server.items("/v1/budgets", &server.owner).await.len(), 2);
    let removed = server
        .delete(&format!("/v1/budgets/bot/{a_id}"), &limited)
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
}

/// A token without the `members` or `organizations` read right lists neither (a zero-right
/// token once listed every member's email).
async fn members_and_organizations_are_read_only_with_their_rights(server: Server) {
    let none = server
        .token_with(json!([{"resource": "bots", "action": "read"}]))
        .await;
    for path in ["/v1/members", "/v1/organizations"] {
        let refused = server.get(path, &none).send().await.unwrap();
        assert_eq!(
            error_code(refused).await,
            (StatusCode::FORBIDDEN, "forbidden".into()),
            "{path}"
        );
    }
    let reader = server
        .token_with(json!([{"resource": "members", "action": "read"}, {"resource": "organizations", "action": "read"}]))
        .await;
    assert_eq!(server.items("/v1/members", &reader).await.len(), 1);
    assert_eq!(server.items("/v1/organizations", &reader).await.len(), 1);
}

/// A Trigger or a Channel acts through the credential that created it, for as long as it
/// lives; a browser session ends after a day, so such work is refused to one, with a message
/// that says why and what to use instead. Nothing is created.
async fn long_lived_work_is_refused_to_a_browser_session(server: Server) {
    let model = FakeOpenAi::start(vec![]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let cookie = server.session_cookie().await;
    let origin = server.base.clone();
    let post = |path: &str, body: Value| {
        server
            .http
            .post(format!("{}{path}", server.base))
            .header("cookie", &cookie)
            .header("origin", &origin)
            .json(&body)
            .send()
    };
    let trigger = post(
        "/v1/triggers",
        json!({"chat_id": chat, "kind": "schedule", "cron": "0 * * * *", "text": "hourly"}),
    )
    .await
    .unwrap();
    let channel = post(
        "/v1/channels",
        json!({"bot_id": bot["id"], "kind": "telegram", "bot_token": "123:abc"}),
    )
    .await
    .unwrap();
    for refused in [trigger, channel] {
        let status = refused.status();
        let body: Value = refused.json().await.unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains("browser session") && message.contains("API token"),
            "{message}"
        );
    }
    assert!(server.items("/v1/triggers", &server.owner).await.is_empty());
    assert!(server.items("/v1/channels", &server.owner).await.is_empty());
}

async fn a_session_cookie_works_from_the_same_origin_only(server: Server) {
    let started = server
        .post("/v1/sessions", &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), StatusCode::CREATED);
    let set_cookie = started.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"),
        "{set_cookie}"
    );
    let cookie = set_cookie.split(';').next().unwrap().to_string();
    let host = server.base.trim_start_matches("http://").to_string();
    let bot = json!({"name": "Cookie Bot", "model": "openai:gpt-4o-mini"});
    let with_cookie = |method: reqwest::Method, path: &str| {
        server
            .http
            .request(method, format!("{}{path}", server.base))
            .header("cookie", &cookie)
    };

    let read = with_cookie(reqwest::Method::GET, "/v1/bots")
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), StatusCode::OK, "a cookie reads like a token");
    let foreign = with_cookie(reqwest::Method::POST, "/v1/bots")
        .header("origin", "http://evil.example")
        .json(&bot)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(foreign).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
    let no_origin = with_cookie(reqwest::Method::POST, "/v1/bots")
        .json(&bot)
        .send()
        .await
        .unwrap();
    assert_eq!(no_origin.status(), StatusCode::FORBIDDEN);
    let bots: Vec<Value> = server.items("/v1/bots", &server.owner).await;
    assert!(bots.is_empty(), "refused requests wrote nothing");
    let same = with_cookie(reqwest::Method::POST, "/v1/bots")
        .header("origin", format!("http://{host}"))
        .json(&bot)
        .send()
        .await
        .unwrap();
    assert_eq!(
        same.status(),
        StatusCode::CREATED,
        "same origin: the same use case as a token"
    );

    let ended = with_cookie(reqwest::Method::DELETE, "/v1/sessions")
        .header("origin", format!("http://{host}"))
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), StatusCode::NO_CONTENT);
    let after = with_cookie(reqwest::Method::GET, "/v1/bots")
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), StatusCode::UNAUTHORIZED);
    let limited = server
        .token_with(json!([{"resource": "bots", "action": "read"}]))
        .await;
    let refused = server.post("/v1/sessions", &limited).send().await.unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::FORBIDDEN,
        "a session never widens a token"
    );
}

// ---- the model registry ----

async fn an_organizations_provider_key_is_used_by_its_bots_and_never_returned(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["keyed"])]).await;
    let key = "sk-org-secret-0123456789";
    let put = server
        .http
        .put(format!("{}/v1/models/providers/openai", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"api_key": key, "base_url": model.base_url}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::OK);
    let text = put.text().await.unwrap();
    assert!(!text.contains(key), "the key is never returned: {text}");
    let listed = server
        .get("/v1/models/providers", &server.owner)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        listed.contains("\"has_key\":true") && !listed.contains(key),
        "{listed}"
    );

    // A Bot on `openai:` now talks to the organization's endpoint with the organization's key.
    let bot = server
        .post("/v1/bots", &server.owner)
        .json(&json!({"name": "Keyed", "model": "openai:gpt-test"}))
        .send()
        .await
        .unwrap();
    let bot: Value = bot.json().await.unwrap();
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "hi", None).await).await;
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(model.total_requests(), 1);
    assert_eq!(
        model.last_authorization().as_deref(),
        Some(format!("Bearer {key}").as_str())
    );

    let member = server.other_member_token().await;
    let refused = server
        .http
        .put(format!("{}/v1/models/providers/openai", server.base))
        .bearer_auth(&member)
        .json(&json!({"api_key": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::FORBIDDEN,
        "only owners and admins set keys"
    );
    let unknown = server
        .http
        .put(format!("{}/v1/models/providers/nope", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::BAD_REQUEST);
    let logged = String::from_utf8_lossy(&logs().lock().unwrap()).to_string();
    assert!(!logged.contains(key), "the key is in no log line");
}

// ---- members and invitations ----

async fn an_invited_person_joins_once_and_a_removed_member_loses_access_at_once(server: Server) {
    let invite = server
        .post("/v1/invitations", &server.owner)
        .json(&json!({"email": "new@example.com", "role": "member"}))
        .send()
        .await
        .unwrap();
    assert_eq!(invite.status(), StatusCode::CREATED);
    let invite: Value = invite.json().await.unwrap();
    let secret = invite["secret"].as_str().unwrap().to_string();
    let accept = |secret: String| {
        server
            .http
            .post(format!("{}/v1/invitations/accept", server.base))
            .json(&json!({"secret": secret}))
            .send()
    };
    let joined = accept(secret.clone()).await.unwrap();
    assert_eq!(joined.status(), StatusCode::CREATED);
    let joined: Value = joined.json().await.unwrap();
    let token = joined["token_secret"].as_str().unwrap().to_string();
    assert_eq!(
        accept(secret).await.unwrap().status(),
        StatusCode::NOT_FOUND,
        "an invitation is accepted once"
    );

    let members: Vec<Value> = server.items("/v1/members", &token).await;
    assert_eq!(members.len(), 2);
    let as_member = server
        .post("/v1/invitations", &token)
        .json(&json!({"email": "x@example.com", "role": "admin"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        as_member.status(),
        StatusCode::FORBIDDEN,
        "members do not invite"
    );

    let revoked: Value = server
        .post("/v1/invitations", &server.owner)
        .json(&json!({"email": "late@example.com", "role": "member"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = revoked["invitation"]["id"].as_str().unwrap();
    let revoke = server
        .delete(&format!("/v1/invitations/{id}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(revoke.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        accept(revoked["secret"].as_str().unwrap().to_string())
            .await
            .unwrap()
            .status(),
        StatusCode::NOT_FOUND
    );

    assert_eq!(
        server
            .get("/v1/bots", &token)
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    let member_id = joined["member_id"].as_str().unwrap();
    let removed = server
        .delete(&format!("/v1/members/{member_id}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        server
            .get("/v1/bots", &token)
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::UNAUTHORIZED,
        "a removed member's token stops at once"
    );
    let owner = server.owner_member().await;
    let owner_removal = server
        .delete(&format!("/v1/members/{}", owner.member_id), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(
        owner_removal.status(),
        StatusCode::NOT_FOUND,
        "the owner cannot be removed"
    );
}

/// A Bot with one host tool `lookup` on `model`; returns the Bot.
async fn bot_with_lookup(server: &Server, token: &str, model: &FakeOpenAi) -> Value {
    let spec = json!({"name": "Looker", "model": model.spec(),
        "tools": [{"name": "lookup", "description": "Looks up.", "input_schema": {"type": "object"}}]});
    let response = server
        .post("/v1/bots", token)
        .json(&spec)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    response.json().await.unwrap()
}

/// Waits until the execution published its first tool call; returns the call's ID.
async fn open_call(server: &Server, token: &str, execution: &str) -> String {
    for _ in 0..200 {
        let page: EventPage = server
            .get(
                &format!("/v1/executions/{execution}/events?after=0&wait=5"),
                token,
            )
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for event in page.events {
            if let EventKind::ToolCall { call, .. } = event.kind {
                return call.id;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no tool call");
}

async fn deliver(
    server: &Server,
    token: &str,
    execution: &str,
    call_id: &str,
) -> reqwest::Response {
    server
        .post(&format!("/v1/executions/{execution}/tool-results"), token)
        .json(&json!({"call_id": call_id, "name": "lookup", "output": [{"type": "text", "text": "found"}]}))
        .send()
        .await
        .unwrap()
}

async fn a_host_tool_result_delivered_over_http_reaches_the_model(server: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Tool("lookup", json!({"word": "turn"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let bot = bot_with_lookup(&server, &server.owner, &model).await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "Look", None).await).await;
    let execution = sent["execution_id"].as_str().unwrap();
    let call_id = open_call(&server, &server.owner, execution).await;
    assert_eq!(
        deliver(&server, &server.owner, execution, &call_id)
            .await
            .status(),
        StatusCode::ACCEPTED
    );
    let events = server.finish(&server.owner, execution).await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    let again = deliver(&server, &server.owner, execution, &call_id).await;
    assert_eq!(
        error_code(again).await,
        (StatusCode::CONFLICT, "conflict".into())
    );
    assert_eq!(model.total_requests(), 2);
}

async fn a_turn_whose_token_is_revoked_while_it_waits_sends_nothing_more(server: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Tool("lookup", json!({})),
        Answer::Text(vec!["never sent"]),
    ])
    .await;
    let rights = json!([{"resource": "bots", "action": "write"}, {"resource": "bots", "action": "read"},
        {"resource": "chats", "action": "write"}, {"resource": "chats", "action": "read"},
        {"resource": "executions", "action": "write"}, {"resource": "executions", "action": "read"}]);
    let created: Value = server
        .post("/v1/tokens", &server.owner)
        .json(&json!({"name": "short-lived", "rights": rights}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = created["secret"].as_str().unwrap().to_string();
    let bot = bot_with_lookup(&server, &token, &model).await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&token, &chat, "Look", None).await).await;
    let execution = sent["execution_id"].as_str().unwrap();
    let call_id = open_call(&server, &token, execution).await;
    // The call was sent (with the token still valid) and the Turn waits for its result.
    for _ in 0..400 {
        let view: Value = server
            .get(&format!("/v1/executions/{execution}"), &server.owner)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if view["state"] == "waiting" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let revoked = server
        .delete(
            &format!("/v1/tokens/{}", created["token"]["id"].as_str().unwrap()),
            &server.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), StatusCode::NO_CONTENT);
    // The owner (same member, another token) answers the call; the Turn's own token is gone.
    assert_eq!(
        deliver(&server, &server.owner, execution, &call_id)
            .await
            .status(),
        StatusCode::ACCEPTED
    );
    let events = server.finish(&server.owner, execution).await;
    let failed = failure_category(&events);
    assert_eq!(failed, Some(ErrorCategory::Access), "{events:?}");
    assert_eq!(
        model.total_requests(),
        1,
        "no model request after the revocation"
    );
}

/// A member's Turn with the owner's shared Bot waits for a host tool; the owner makes the Bot
/// private. Restored by the result, the Turn re-checks that its member may still use the Bot,
/// and stops before its next model request.
async fn a_turn_whose_shared_bot_is_made_private_while_it_waits_sends_nothing_more(server: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Tool("lookup", json!({})),
        Answer::Text(vec!["never sent"]),
    ])
    .await;
    let spec = json!({"name": "Looker", "model": model.spec(), "shared": true,
        "tools": [{"name": "lookup", "description": "Looks up.", "input_schema": {"type": "object"}}]});
    let bot: Value = server
        .post("/v1/bots", &server.owner)
        .json(&spec)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let member = server.other_member_token().await;
    let chat = server.chat(&member, &bot).await;
    let sent = receipt(server.send(&member, &chat, "Look", None).await).await;
    let execution = sent["execution_id"].as_str().unwrap();
    let call_id = open_call(&server, &member, execution).await;
    let unshared = server
        .http
        .patch(format!(
            "{}/v1/bots/{}",
            server.base,
            bot["id"].as_str().unwrap()
        ))
        .bearer_auth(&server.owner)
        .json(&json!({"shared": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(unshared.status(), StatusCode::OK);
    // The result wakes the waiting Turn, which checks its rights again. On a loaded machine
    // the Turn may still be in the phase that published the call when the Bot turns private,
    // check its rights there and end at once: the delivery is then refused as a call no longer
    // open (409; seen once in CI). Either way what follows must hold.
    let delivered = deliver(&server, &member, execution, &call_id)
        .await
        .status();
    assert!(
        delivered == StatusCode::ACCEPTED || delivered == StatusCode::CONFLICT,
        "{delivered}"
    );
    let events = server.finish(&member, execution).await;
    let failed = failure_category(&events);
    assert_eq!(failed, Some(ErrorCategory::Access), "{events:?}");
    assert_eq!(
        model.total_requests(),
        1,
        "no model request once the Bot is private"
    );
}

/// A Turn submitted to the engine with no saved identity (no token, no member) is refused by
/// the node: it ends failed with the category `access` and sends no model request.
async fn a_turn_with_no_saved_identity_is_refused_as_unchecked_work(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["never sent"])]).await;
    let owner = server.owner_member().await;
    let id = server
        .turn_in(
            openbot_server::store::Scope::Member(owner.member_id.to_string()),
            &model,
        )
        .await;
    let events = server.finish(&server.owner, &id.to_string()).await;
    assert!(
        matches!(
            events.last().map(|e| &e.kind),
            Some(EventKind::Failed {
                category: ErrorCategory::Access,
                ..
            })
        ),
        "{events:?}"
    );
    assert_eq!(model.total_requests(), 0);
}

/// The last tool result of a step rides in the next commit; when the loop stops first (here the
/// next model request is refused: the Turn's token was revoked), the result is still saved.
async fn a_tool_result_that_comes_back_after_the_turns_token_was_revoked_is_saved_before_it_fails(
    server: Server,
) {
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "a"})),
        Answer::Text(vec!["never sent"]),
    ])
    .await;
    let outside = outside::Outside::start(false).await;
    outside.hold().await;
    let response = server
        .http
        .put(format!("{}/v1/tools/write", server.base))
        .bearer_auth(&server.owner)
        .json(
            &json!({"description": "Writes.", "input_schema": {"type": "object"},
                      "url": outside.url, "retry_safe": false}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let rights = json!([{"resource": "bots", "action": "read"},
        {"resource": "chats", "action": "write"}, {"resource": "chats", "action": "read"},
        {"resource": "executions", "action": "write"}, {"resource": "executions", "action": "read"}]);
    let created: Value = server
        .post("/v1/tokens", &server.owner)
        .json(&json!({"name": "short-lived", "rights": rights}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = created["secret"].as_str().unwrap().to_string();
    let response = server
        .post("/v1/bots", &server.owner)
        .json(&json!({"name": "Writer", "model": model.spec(),
                      "tools": [{"name": "write", "input_schema": {"type": "object"}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let bot: Value = response.json().await.unwrap();
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&token, &chat, "Write", None).await).await;
    let execution = sent["execution_id"].as_str().unwrap();
    // The write was sent with the token still valid; its answer waits.
    outside.wait_for_write().await;
    let revoked = server
        .delete(
            &format!("/v1/tokens/{}", created["token"]["id"].as_str().unwrap()),
            &server.owner,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), StatusCode::NO_CONTENT);
    outside.release();

    let events = server.finish(&server.owner, execution).await;
    let failed = failure_category(&events);
    assert_eq!(failed, Some(ErrorCategory::Access), "{events:?}");
    assert_eq!(
        model.total_requests(),
        1,
        "no model request after the revocation"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::ToolResult { .. }))
            .count(),
        1,
        "the write's result was saved and published before the Turn failed: {events:?}"
    );
    assert_eq!(outside.received(), 1);
}

/// A Bot on a scripted model whose every answer costs 600 micro-dollars; returns the Bot and
/// the folder that keeps the script.
async fn costly_bot(server: &Server) -> (Value, tempfile::TempDir) {
    server
        .scripted_bot(
            "Costly",
            json!({"steps": [{"text": "paid", "usage": {"input_tokens": 10, "output_tokens": 5, "cost_micros": 600}}],
                   "repeat": true}),
        )
        .await
}

/// A Bot on a one-step scripted model (not repeating), and the folder that keeps the script.
async fn one_step_bot(server: &Server) -> (Value, tempfile::TempDir) {
    server
        .scripted_bot("Greeter", json!([{"text": "Hello!"}]))
        .await
}

async fn a_scripted_model_follows_each_chat_from_its_first_step(server: Server) {
    let (bot, _script) = one_step_bot(&server).await;
    let (other_bot, _other_script) = one_step_bot(&server).await;
    // Three Chats on one server, two Bots on the same kind of script: each starts at step one.
    for bot in [&bot, &bot, &other_bot] {
        let chat = server.chat(&server.owner, bot).await;
        let sent = receipt(server.send(&server.owner, &chat, "Hi", None).await).await;
        let events = server
            .finish(&server.owner, sent["execution_id"].as_str().unwrap())
            .await;
        assert_eq!(
            outcome_of(&events),
            Some(TurnOutcome::Completed),
            "{events:?}"
        );
    }
}

async fn an_exhausted_script_fails_the_turn_as_a_configuration_error(server: Server) {
    let (bot, _script) = one_step_bot(&server).await;
    let chat = server.chat(&server.owner, &bot).await;
    let first = receipt(server.send(&server.owner, &chat, "Hi", None).await).await;
    server
        .finish(&server.owner, first["execution_id"].as_str().unwrap())
        .await;
    // The Chat's second answer would be the script's second step, which it does not have.
    let second = receipt(server.send(&server.owner, &chat, "Again", None).await).await;
    let events = server
        .finish(&server.owner, second["execution_id"].as_str().unwrap())
        .await;
    let failed = failure_category(&events);
    assert_eq!(failed, Some(ErrorCategory::Configuration), "{events:?}");
}

async fn a_used_up_chat_budget_ends_the_next_turn_before_its_model_request(server: Server) {
    let (bot, _script) = costly_bot(&server).await;
    let chat = server.chat(&server.owner, &bot).await;
    let set = server
        .http
        .put(format!("{}/v1/budgets/chat/{chat}", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"max_cost_micros": 1000}))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), StatusCode::OK);
    let mut outcomes = Vec::new();
    for text in ["one", "two", "three"] {
        let sent = receipt(server.send(&server.owner, &chat, text, None).await).await;
        let events = server
            .finish(&server.owner, sent["execution_id"].as_str().unwrap())
            .await;
        outcomes.push(outcome_of(&events));
    }
    // 0 and 600 spent are under 1000; 1200 is not, so the third Turn never asks the model.
    assert_eq!(
        outcomes,
        [
            Some(TurnOutcome::Completed),
            Some(TurnOutcome::Completed),
            Some(TurnOutcome::MaxCost)
        ]
    );
    let budgets = Value::from(server.items("/v1/budgets", &server.owner).await);
    assert_eq!(budgets[0]["scope"], "chat");
    assert_eq!(budgets[0]["spent_micros"], 1200);
    // Another Chat with the same Bot has its own spending.
    let other = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &other, "hi", None).await).await;
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
}

async fn a_budget_needs_an_admin_and_a_target_of_the_organization(server: Server) {
    let (bot, _script) = costly_bot(&server).await;
    let put = |token: String, path: String| {
        let request = server
            .http
            .put(format!("{}{path}", server.base))
            .bearer_auth(token)
            .json(&json!({"max_cost_micros": 5}));
        async move { request.send().await.unwrap() }
    };
    let member = server.other_member_token().await;
    let path = format!("/v1/budgets/bot/{}", bot["id"].as_str().unwrap());
    assert_eq!(
        error_code(put(member, path.clone()).await).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
    let unknown = format!("/v1/budgets/bot/{}", uuid::Uuid::now_v7());
    assert_eq!(
        error_code(put(server.owner.clone(), unknown).await).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    let bad = "/v1/budgets/galaxy/00000000-0000-0000-0000-000000000000".to_string();
    assert_eq!(
        error_code(put(server.owner.clone(), bad).await).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
    assert_eq!(
        put(server.owner.clone(), path.clone()).await.status(),
        StatusCode::OK
    );
    let removed = server.delete(&path, &server.owner).send().await.unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
}

fn put_limit(server: &Server, token: &str, scope: &str, body: Value) -> reqwest::RequestBuilder {
    server
        .http
        .put(format!("{}/v1/limits/{scope}", server.base))
        .bearer_auth(token)
        .json(&body)
}

async fn limits_are_set_listed_in_pages_and_deleted(server: Server) {
    for scope in ["provider:openai", "organization", "memory"] {
        let set = put_limit(&server, &server.owner, scope, json!({"max_concurrent": 2}))
            .send()
            .await
            .unwrap();
        assert_eq!(set.status(), StatusCode::OK);
    }
    let set: Value = put_limit(
        &server,
        &server.owner,
        "organization",
        json!({"requests_per_window": 60, "tokens_per_window": 10000, "max_wait_ms": 5000}),
    )
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(
        set,
        json!({"scope": "organization", "requests_per_window": 60, "tokens_per_window": 10000,
            "window_ms": 60000, "max_wait_ms": 5000, "in_use": 0, "updated_at": set["updated_at"]}),
        "a put replaces the whole limit"
    );
    let first: Value = server
        .get("/v1/limits?limit=2", &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let scopes: Vec<&str> = first["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["scope"].as_str().unwrap())
        .collect();
    assert_eq!(scopes, ["memory", "organization"]);
    let cursor = first["next_cursor"].as_str().unwrap();
    let rest: Value = server
        .get(
            &format!("/v1/limits?limit=2&cursor={cursor}"),
            &server.owner,
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(rest["items"][0]["scope"], "provider:openai");
    assert_eq!(rest["items"][0]["max_concurrent"], 2);
    assert!(rest.get("next_cursor").is_none(), "absent on the last page");
    let removed = server
        .delete("/v1/limits/memory", &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::NO_CONTENT);
    let again = server
        .delete("/v1/limits/memory", &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(again).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
}

async fn a_limit_needs_an_admin_and_valid_settings(server: Server) {
    let member = server.other_member_token().await;
    let denied = put_limit(
        &server,
        &member,
        "organization",
        json!({"max_concurrent": 1}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(
        error_code(denied).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
    for (scope, body) in [
        ("organization", json!({})),
        ("organization", json!({"max_concurrent": 0})),
        (
            "organization",
            json!({"requests_per_window": 5, "window_ms": 10}),
        ),
        ("bad%20scope", json!({"max_concurrent": 1})),
    ] {
        let refused = put_limit(&server, &server.owner, scope, body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(
            error_code(refused).await,
            (StatusCode::BAD_REQUEST, "invalid_input".into()),
            "{scope} {body}"
        );
    }
    let listed: Value = server
        .get("/v1/limits", &member)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed, json!({"items": []}), "nothing was written");
}

async fn a_bot_turn_past_its_request_limit_waits_to_the_deadline_and_fails_with_timeout(
    server: Server,
) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let scope = format!("bot:{}", bot["id"].as_str().unwrap());
    let set = put_limit(
        &server,
        &server.owner,
        &scope,
        json!({"requests_per_window": 1, "max_wait_ms": 200}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(set.status(), StatusCode::OK);
    let chat = server.chat(&server.owner, &bot).await;
    let mut last = Vec::new();
    for text in ["one", "two"] {
        let sent = receipt(server.send(&server.owner, &chat, text, None).await).await;
        last = server
            .finish(&server.owner, sent["execution_id"].as_str().unwrap())
            .await;
        if text == "one" {
            assert_eq!(outcome_of(&last), Some(TurnOutcome::Completed));
        }
    }
    assert!(
        matches!(
            last.last().map(|e| &e.kind),
            Some(EventKind::Failed {
                category: ErrorCategory::Timeout,
                ..
            })
        ),
        "{last:#?}"
    );
    assert_eq!(
        model.total_requests(),
        1,
        "the second request was never sent"
    );
}

async fn a_fault_after_the_stream_started_ends_it_with_a_request_failed_event(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["a", "b", "c", "d", "e", "f"])]).await;
    model.piece_delay(Duration::from_millis(150));
    let id = server.owner_turn(&model).await;
    let response = server
        .get(&format!("/v1/executions/{id}/events"), &server.owner)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut bytes = response.bytes_stream();
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = tokio::time::timeout(Duration::from_secs(30), bytes.next())
            .await
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk.unwrap().unwrap()).unwrap());
    }
    // From now on every stored event is unreadable (its sealed payload is damaged): the
    // stream's next read is a fault.
    match &server.raw {
        Raw::Sqlite(store, _) => {
            sqlx::query(
                "CREATE TRIGGER corrupt_events AFTER INSERT ON events BEGIN \
                 UPDATE events SET sealed = X'00' WHERE execution_id = NEW.execution_id AND sequence = NEW.sequence; END",
            )
            .execute(store.pool())
            .await
            .unwrap();
        }
        Raw::Postgres(store) => {
            sqlx::query(
                "CREATE FUNCTION corrupt_event() RETURNS trigger AS $$ BEGIN NEW.sealed := '\\x00'::bytea; RETURN NEW; END $$ LANGUAGE plpgsql",
            )
            .execute(store.pool())
            .await
            .unwrap();
            sqlx::query("CREATE TRIGGER corrupt_events BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION corrupt_event()")
                .execute(store.pool())
                .await
                .unwrap();
        }
    }
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(30), bytes.next())
        .await
        .unwrap()
    {
        text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    let failure = text
        .split("\n\n")
        .find(|block| block.lines().any(|l| l.trim() == "event: request_failed"))
        .unwrap_or_else(|| panic!("no request_failed event in {text}"));
    let data = failure
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .unwrap()
        .trim();
    let body: Value = serde_json::from_str(data).unwrap();
    assert_eq!(body["code"], "request_failed");
    assert_eq!(body["category"], "storage");
    let error_id = body["error_id"].as_str().unwrap();
    assert!(
        !text.contains("not json") && !text.contains("expected"),
        "no cause: {text}"
    );
    assert!(
        text.trim_end().ends_with(data),
        "the failure is the stream's last event"
    );
    let logged = String::from_utf8_lossy(&logs().lock().unwrap()).to_string();
    assert!(logged.contains(error_id), "the error ID is logged");
}

async fn organization_endpoints_never_read_or_command_service_work(server: Server) {
    use openbot_server::identity::{ServiceIdentity, ServiceOwner};
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["platform work"])]).await;
    let owner = server.owner_member().await;
    for service in [
        ServiceIdentity::new(ServiceOwner::Platform, "reminders").unwrap(),
        ServiceIdentity::new(
            ServiceOwner::Organization(owner.organization_id),
            "reminders",
        )
        .unwrap(),
    ] {
        let id = server.turn_in(service.scope(), &model).await;
        for path in [
            format!("/v1/executions/{id}"),
            format!("/v1/executions/{id}/events"),
        ] {
            let read = server.get(&path, &server.owner).send().await.unwrap();
            assert_eq!(
                error_code(read).await,
                (StatusCode::NOT_FOUND, "not_found".into())
            );
        }
        let cancel = server
            .post(&format!("/v1/executions/{id}/cancel"), &server.owner)
            .send()
            .await
            .unwrap();
        assert_eq!(
            error_code(cancel).await,
            (StatusCode::NOT_FOUND, "not_found".into())
        );
        // The service's own work went on untouched: it ended as its node decided (a Turn with
        // no saved identity is refused as unchecked work), never cancelled by the member.
        let mut events = server.engine.observe(id, 0);
        let mut ended = None;
        while let Some(event) = events.next().await {
            ended = Some(event.unwrap().kind);
        }
        assert!(
            matches!(
                ended,
                Some(EventKind::Failed {
                    category: ErrorCategory::Access,
                    ..
                })
            ),
            "{ended:?}"
        );
    }
}

async fn a_registered_http_tool_is_called_once_and_a_later_change_never_changes_a_saved_call(
    server: Server,
) {
    let outside = outside::Outside::start(false).await;
    let register = |url: String| {
        let request = server
            .http
            .put(format!("{}/v1/tools/write", server.base))
            .bearer_auth(&server.owner)
            .json(
                &json!({"description": "Writes.", "input_schema": {"type": "object"}, "url": url}),
            );
        async move { request.send().await.unwrap() }
    };
    assert_eq!(register(outside.url.clone()).await.status(), StatusCode::OK);
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "hi"})),
        Answer::Text(vec!["written"]),
    ])
    .await;
    let spec = json!({"name": "Writer", "model": model.spec(),
        "tools": [{"name": "write", "input_schema": {}}]});
    let bot: Value = server
        .post("/v1/bots", &server.owner)
        .json(&spec)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let chat = server.chat(&server.owner, &bot).await;
    outside.hold().await;
    let sent = receipt(server.send(&server.owner, &chat, "Write", None).await).await;
    outside.wait_for_write().await;
    // The Turn saved the endpoint it was submitted with; moving the tool changes later Turns.
    assert_eq!(
        register("http://127.0.0.1:9/nowhere".into()).await.status(),
        StatusCode::OK
    );
    outside.release();
    let events = server
        .finish(&server.owner, sent["execution_id"].as_str().unwrap())
        .await;
    assert_eq!(outcome_of(&events), Some(TurnOutcome::Completed));
    assert_eq!(outside.received(), 1, "called exactly once");
    let result = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } => Some(result.clone()),
            _ => None,
        })
        .unwrap();
    assert!(!result.is_error, "{result:?}");
    let listed = Value::from(server.items("/v1/tools", &server.owner).await);
    assert_eq!(listed[0]["url"], "http://127.0.0.1:9/nowhere");
}

async fn an_admin_creates_an_organization_whose_token_acts_only_there(server: Server) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    server.bot(&server.owner, &model, true).await;
    let created = server
        .post("/v1/organizations", &server.owner)
        .json(&json!({"name": "Second"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let created: Value = created.json().await.unwrap();
    assert_eq!(created["organization"]["role"], "owner");
    let token = created["token_secret"].as_str().unwrap().to_string();
    let bots = Value::from(server.items("/v1/bots", &token).await);
    assert_eq!(
        bots,
        json!([]),
        "the new organization sees none of the first one's Bots"
    );
    let members = Value::from(server.items("/v1/members", &token).await);
    assert_eq!(members.as_array().unwrap().len(), 1);
    let listed = Value::from(server.items("/v1/organizations", &server.owner).await);
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{listed}");
    assert!(names.contains(&"Second"));
    let member = server.other_member_token().await;
    let refused = server
        .post("/v1/organizations", &member)
        .json(&json!({"name": "Mine"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(refused).await,
        (StatusCode::FORBIDDEN, "forbidden".into())
    );
    let blank = server
        .post("/v1/organizations", &server.owner)
        .json(&json!({"name": "  "}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(blank).await,
        (StatusCode::BAD_REQUEST, "invalid_input".into())
    );
}

async fn a_stored_file_is_its_owners_and_its_bytes_live_in_the_object_store(server: Server) {
    let upload = |token: String, body: Vec<u8>, content_type: Option<&'static str>| {
        let mut request = server.post("/v1/files?name=notes.txt", &token).body(body);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        async move { request.send().await.unwrap() }
    };
    let stored = upload(
        server.owner.clone(),
        b"hello files".to_vec(),
        Some("text/plain"),
    )
    .await;
    assert_eq!(stored.status(), StatusCode::CREATED);
    let stored: Value = stored.json().await.unwrap();
    assert_eq!(stored["size"], 11);
    assert_eq!(stored["media_type"], "text/plain");
    let id = stored["id"].as_str().unwrap().to_string();
    let content = server
        .get(&format!("/v1/files/{id}/content"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(content.headers()["content-type"], "text/plain");
    // Served as a download, never sniffed or shown as a page of the API's origin.
    assert_eq!(content.headers()["x-content-type-options"], "nosniff");
    assert_eq!(
        content.headers()["content-disposition"],
        "attachment; filename=\"notes.txt\"; filename*=UTF-8''notes.txt"
    );
    assert_eq!(content.bytes().await.unwrap().as_ref(), b"hello files");
    let organization = server.owner_member().await.organization_id;
    let object = server
        .objects
        .path()
        .join(format!("org-{organization}"))
        .join(&id);
    assert_eq!(
        std::fs::read(&object).unwrap(),
        b"hello files",
        "the bytes are in the object store"
    );

    let other = server.other_member_token().await;
    let hidden = server
        .get(&format!("/v1/files/{id}"), &other)
        .send()
        .await
        .unwrap();
    assert_eq!(
        error_code(hidden).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    let untyped = upload(server.owner.clone(), b"x".to_vec(), None).await;
    assert_eq!(
        error_code(untyped).await,
        (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type".into()
        )
    );
    let huge = upload(
        server.owner.clone(),
        vec![0u8; 20 * 1024 * 1024 + 1],
        Some("application/octet-stream"),
    )
    .await;
    assert_eq!(
        error_code(huge).await,
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large".into())
    );
    let listed = Value::from(server.items("/v1/files", &server.owner).await);
    assert_eq!(
        listed.as_array().unwrap().len(),
        1,
        "nothing half-written: {listed}"
    );

    let deleted = server
        .delete(&format!("/v1/files/{id}"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    // The bytes go with the file's deletion work, which the delete waits for a while.
    for _ in 0..200 {
        if !object.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(!object.exists(), "its bytes are gone");
    let gone = server
        .get(&format!("/v1/files/{id}/content"), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), StatusCode::NOT_FOUND);
}

/// Bot A's and Bot B's Turns of the owner, and a token limited to Bot A.
struct TwoBots {
    limited: String,
    own: String,
    other: String,
}

/// Bot A's Turn ends; Bot B's ends too, or with `hold_other` keeps running (its model request
/// hangs), so a command on it would take effect.
async fn two_bots(server: &Server, hold_other: bool) -> TwoBots {
    let model_a = FakeOpenAi::start(vec![Answer::Text(vec!["for A"])]).await;
    let model_b = FakeOpenAi::start(vec![Answer::Text(vec!["for B"])]).await;
    if hold_other {
        model_b.delay(0, Duration::from_secs(30));
    }
    let a = server.bot(&server.owner, &model_a, false).await;
    let b = server.bot(&server.owner, &model_b, false).await;
    let limited = server.bot_limited_token(&a).await;
    let chat = server.chat(&server.owner, &a).await;
    let sent = receipt(
        server
            .send(&server.owner, &chat, "A's question", None)
            .await,
    )
    .await;
    let own = sent["execution_id"].as_str().unwrap().to_string();
    server.finish(&server.owner, &own).await;
    let chat = server.chat(&server.owner, &b).await;
    let sent = receipt(server.send(&server.owner, &chat, "B's secret", None).await).await;
    let other = sent["execution_id"].as_str().unwrap().to_string();
    if hold_other {
        server.wait_started(&other).await;
    } else {
        server.finish(&server.owner, &other).await;
    }
    TwoBots {
        limited,
        own,
        other,
    }
}

/// The state of an execution as its owner reads it.
async fn state_of(server: &Server, id: &str) -> String {
    let view: Value = server
        .get(&format!("/v1/executions/{id}"), &server.owner)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    view["state"].as_str().unwrap().to_string()
}

/// The category of the execution's failure, if it failed.
fn failure_category(events: &[Event]) -> Option<ErrorCategory> {
    events.iter().find_map(|e| match &e.kind {
        EventKind::Failed { category, .. } => Some(*category),
        _ => None,
    })
}

async fn assert_not_found(response: reqwest::Response) {
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        error_code(response).await,
        (StatusCode::NOT_FOUND, "not_found".into())
    );
}

/// A Chat of Bot A and one of Bot B, both the owner's, and a token limited to Bot A.
async fn two_chats(server: &Server) -> (String, String, String) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["hi"])]).await;
    let a = server.bot(&server.owner, &model, false).await;
    let b = server.bot(&server.owner, &model, false).await;
    let limited = server.bot_limited_token(&a).await;
    let own = server.chat(&server.owner, &a).await;
    let other = server.chat(&server.owner, &b).await;
    (limited, own, other)
}

async fn a_bot_limited_token_lists_only_its_bots_chats(server: Server) {
    let (limited, own, _) = two_chats(&server).await;
    let listed = Value::from(server.items("/v1/chats", &limited).await);
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [own.as_str()]);
}

async fn a_bot_limited_token_cannot_read_or_send_to_another_bots_chat(server: Server) {
    let (limited, own, other) = two_chats(&server).await;
    let read = |chat: String| {
        let request = server.get(&format!("/v1/chats/{chat}"), &limited);
        async move { request.send().await.unwrap() }
    };
    assert_eq!(read(own).await.status(), StatusCode::OK);
    assert_not_found(read(other.clone()).await).await;
    assert_not_found(server.send(&limited, &other, "Hi", None).await).await;
    assert_not_found(
        server
            .get(&format!("/v1/chats/{other}/messages"), &limited)
            .send()
            .await
            .unwrap(),
    )
    .await;
}

async fn a_bot_limited_token_cannot_read_another_bots_execution(server: Server) {
    let bots = two_bots(&server, false).await;
    let own = server
        .get(&format!("/v1/executions/{}", bots.own), &bots.limited)
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), StatusCode::OK, "its own Bot's work it reads");
    let other = server
        .get(&format!("/v1/executions/{}", bots.other), &bots.limited)
        .send()
        .await
        .unwrap();
    assert_not_found(other).await;
}

async fn a_bot_limited_token_cannot_poll_another_bots_events(server: Server) {
    let bots = two_bots(&server, false).await;
    let events = server
        .get(
            &format!("/v1/executions/{}/events?after=0", bots.other),
            &bots.limited,
        )
        .send()
        .await
        .unwrap();
    assert_not_found(events).await;
}

async fn a_bot_limited_token_cannot_stream_another_bots_events(server: Server) {
    let bots = two_bots(&server, false).await;
    let events = server
        .get(
            &format!("/v1/executions/{}/events", bots.other),
            &bots.limited,
        )
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_not_found(events).await;
}

async fn a_bot_limited_token_cannot_cancel_another_bots_execution(server: Server) {
    let bots = two_bots(&server, true).await;
    let cancel = server
        .post(
            &format!("/v1/executions/{}/cancel", bots.other),
            &bots.limited,
        )
        .send()
        .await
        .unwrap();
    assert_not_found(cancel).await;
    assert_eq!(state_of(&server, &bots.other).await, "running");
}

async fn a_bot_limited_token_cannot_pause_another_bots_execution(server: Server) {
    let bots = two_bots(&server, true).await;
    let pause = server
        .post(
            &format!("/v1/executions/{}/pause", bots.other),
            &bots.limited,
        )
        .send()
        .await
        .unwrap();
    assert_not_found(pause).await;
    assert_eq!(state_of(&server, &bots.other).await, "running");
}

async fn a_bot_limited_token_cannot_resume_another_bots_execution(server: Server) {
    let bots = two_bots(&server, true).await;
    let resume = server
        .post(
            &format!("/v1/executions/{}/resume", bots.other),
            &bots.limited,
        )
        .send()
        .await
        .unwrap();
    assert_not_found(resume).await;
    assert_eq!(state_of(&server, &bots.other).await, "running");
}

async fn a_bot_limited_token_cannot_deliver_tool_results_to_another_bots_execution(server: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Tool("lookup", json!({"word": "turn"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let other_bot = bot_with_lookup(&server, &server.owner, &model).await;
    let own_bot = server.bot(&server.owner, &model, false).await;
    let limited = server.bot_limited_token(&own_bot).await;
    let chat = server.chat(&server.owner, &other_bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "Look", None).await).await;
    let execution = sent["execution_id"].as_str().unwrap();
    // The other Bot's Turn waits for this call's result.
    let call_id = open_call(&server, &server.owner, execution).await;
    assert_not_found(deliver(&server, &limited, execution, &call_id).await).await;
    let delivered = deliver(&server, &server.owner, execution, &call_id).await;
    assert_eq!(
        delivered.status(),
        StatusCode::ACCEPTED,
        "the call is still open"
    );
}

/// A file the owner's unlimited token uploaded, one a token limited to a Bot uploaded, and
/// that token.
struct TwoFiles {
    limited: String,
    owners: String,
    own: String,
}

async fn two_files(server: &Server) -> TwoFiles {
    let model = FakeOpenAi::start(Vec::new()).await;
    let bot = server.bot(&server.owner, &model, false).await;
    let limited = server.bot_limited_token(&bot).await;
    let upload = |token: String, text: &'static str| {
        let request = server
            .post("/v1/files?name=notes.txt", &token)
            .header("content-type", "text/plain")
            .body(text);
        async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), StatusCode::CREATED);
            response.json::<Value>().await.unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let owners = upload(server.owner.clone(), "the owner's notes").await;
    let own = upload(limited.clone(), "the widget's upload").await;
    TwoFiles {
        limited,
        owners,
        own,
    }
}

async fn a_bot_limited_token_lists_only_the_files_it_uploaded(server: Server) {
    let files = two_files(&server).await;
    let ids = |list: Value| -> Vec<String> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|f| f["id"].as_str().unwrap().to_string())
            .collect()
    };
    let limited = Value::from(server.items("/v1/files", &files.limited).await);
    assert_eq!(ids(limited), std::slice::from_ref(&files.own));
    let owner = Value::from(server.items("/v1/files", &server.owner).await);
    assert_eq!(
        ids(owner),
        [files.own, files.owners],
        "the member sees both"
    );
}

async fn a_bot_limited_token_cannot_read_a_file_it_did_not_upload(server: Server) {
    let files = two_files(&server).await;
    let own = server
        .get(&format!("/v1/files/{}", files.own), &files.limited)
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), StatusCode::OK);
    let owners = server
        .get(&format!("/v1/files/{}", files.owners), &files.limited)
        .send()
        .await
        .unwrap();
    assert_not_found(owners).await;
}

async fn a_bot_limited_token_cannot_read_the_bytes_of_a_file_it_did_not_upload(server: Server) {
    let files = two_files(&server).await;
    let owners = server
        .get(
            &format!("/v1/files/{}/content", files.owners),
            &files.limited,
        )
        .send()
        .await
        .unwrap();
    assert_not_found(owners).await;
}

async fn a_bot_limited_token_cannot_delete_a_file_it_did_not_upload(server: Server) {
    let files = two_files(&server).await;
    let deleted = server
        .delete(&format!("/v1/files/{}", files.owners), &files.limited)
        .send()
        .await
        .unwrap();
    assert_not_found(deleted).await;
    let still = server
        .get(&format!("/v1/files/{}", files.owners), &server.owner)
        .send()
        .await
        .unwrap();
    assert_eq!(still.status(), StatusCode::OK, "the file is still there");
}

/// What the sensitive values of the sealing tests carry, to look for in the database.
const MARKER: &str = "zq7SealedMarker";

async fn event_payloads_are_sealed_at_rest(server: Server) {
    let outside = outside::Outside::start(false).await;
    let registered = server
        .http
        .put(format!("{}/v1/tools/write", server.base))
        .bearer_auth(&server.owner)
        .json(&json!({"description": "Writes.", "input_schema": {"type": "object"}, "url": outside.url}))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), StatusCode::OK);
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": format!("argument {MARKER}")})),
        Answer::Text(vec!["answer ", MARKER]),
    ])
    .await;
    let spec = json!({"name": "Writer", "model": model.spec(),
        "tools": [{"name": "write", "input_schema": {}}]});
    let bot: Value = server
        .post("/v1/bots", &server.owner)
        .json(&spec)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(
        server
            .send(&server.owner, &chat, &format!("input {MARKER}"), None)
            .await,
    )
    .await;
    let id = sent["execution_id"].as_str().unwrap();
    let polled = server.finish(&server.owner, id).await;
    assert_eq!(outcome_of(&polled), Some(TurnOutcome::Completed));

    // Those allowed still read every value, by long polling and over SSE.
    let carries = |kind: &EventKind| serde_json::to_string(kind).unwrap().contains(MARKER);
    for (name, wanted) in [
        ("input", "turn_started"),
        ("arguments", "tool_call"),
        ("result", "tool_result"),
        ("text", "text_delta"),
    ] {
        assert!(
            polled
                .iter()
                .any(|e| openbot_server::store::event_type(&e.kind) == wanted && carries(&e.kind)),
            "the {name} shows in a {wanted} event: {polled:?}"
        );
    }
    let streamed = read_sse(&server, id.parse().unwrap(), None, polled.len()).await;
    assert_eq!(
        serde_json::to_value(&streamed).unwrap(),
        serde_json::to_value(&polled).unwrap()
    );
    // A dump shows none of them.
    assert_eq!(
        server.columns_containing(MARKER).await,
        Vec::<String>::new()
    );
}

async fn steering_input_is_sealed_at_rest(server: Server) {
    let model = FakeOpenAi::start(vec![
        Answer::Text(vec!["first"]),
        Answer::Text(vec!["saw both"]),
    ])
    .await;
    model.delay(0, Duration::from_millis(500));
    let bot = server.bot(&server.owner, &model, false).await;
    let chat = server.chat(&server.owner, &bot).await;
    let sent = receipt(server.send(&server.owner, &chat, "start", None).await).await;
    let id = sent["execution_id"].as_str().unwrap();
    server.wait_started(id).await;
    let steer = server
        .post(&format!("/v1/chats/{chat}/steer"), &server.owner)
        .json(&json!({"content": [{"type": "text", "text": format!("also {MARKER}")}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(receipt(steer).await["disposition"], "steered");
    let events = server.finish(&server.owner, id).await;
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::InputSteered { .. })
                && serde_json::to_string(&e.kind).unwrap().contains(MARKER)),
        "{events:?}"
    );
    assert!(
        server
            .history(&server.owner, &chat)
            .await
            .contains(&format!("also {MARKER}"))
    );
    assert!(
        model.bodies().iter().any(|body| body.contains(MARKER)),
        "the model got the input"
    );
    assert_eq!(
        server.columns_containing(MARKER).await,
        Vec::<String>::new()
    );
}
