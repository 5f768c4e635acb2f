//! The store and engine conformance suite: every behaviour runs against SQLite and against a
//! real PostgreSQL, with the same assertions.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/dump.rs"]
mod dump;
#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/outside.rs"]
mod outside;
#[path = "support/pg.rs"]
mod pg;

use std::sync::Arc;
use std::time::Duration;

use fake_openai::{Answer, FakeOpenAi};
use futures::StreamExt;
use openbot_core::turn::{CallKey, CallSlot};
use openbot_schema::{
    ContentPart, ErrorCategory, Event, EventKind, ExecutionId, ExecutionState, Limits,
    ToolDefinition, TurnOutcome,
};
use openbot_server::engine::{Engine, RunnerConfig, Submission};
use openbot_server::node::registry;
use openbot_server::sealed::KeyRing;
use openbot_server::store::*;
use openbot_server::turns::{SavedTool, TURN, ToolRoute, TurnInput};
use outside::Outside;
use serde_json::json;
use uuid::Uuid;

/// A store and whatever must outlive it.
struct Backend {
    store: Arc<dyn Store>,
    /// The database under the store, to open it again and to read its rows as they are.
    db: Db,
    _dir: Option<tempfile::TempDir>,
}

/// Where a backend's database is.
enum Db {
    /// The SQLite file (`openbot.db` in a data folder).
    Sqlite(std::path::PathBuf),
    /// The PostgreSQL URL.
    Postgres(String),
}

/// The key ring the conformance stores seal their rows with, and its text.
fn store_keys() -> (KeyRing, String) {
    static KEYS: std::sync::OnceLock<(KeyRing, String)> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| KeyRing::generate("store")).clone()
}

async fn sqlite() -> Backend {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openbot.db");
    SqliteStore::migrate(&path).await.unwrap();
    Backend {
        store: Arc::new(SqliteStore::open(&path, store_keys().0).await.unwrap()),
        db: Db::Sqlite(path),
        _dir: Some(dir),
    }
}

async fn postgres() -> Backend {
    let url = pg::fresh_database().await;
    Backend {
        store: Arc::new(
            PostgresStore::connect(&url, 8, store_keys().0)
                .await
                .unwrap(),
        ),
        db: Db::Postgres(url),
        _dir: None,
    }
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::sqlite().await).await })*
        }
        mod on_postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::postgres().await).await })*
        }
    };
}

conformance!(
    a_retired_workflow_kind_ends_interrupted_with_its_reason,
    a_command_key_retry_returns_the_same_execution,
    concurrent_submissions_with_one_key_create_one_execution,
    a_command_key_with_other_input_is_a_conflict,
    a_member_and_a_service_never_share_a_command_key,
    a_claim_adds_one_to_the_generation_and_a_live_lease_is_kept,
    an_old_generation_cannot_commit_after_a_takeover,
    a_late_result_is_saved_but_not_published,
    a_late_result_resolves_a_call_whose_outcome_was_unknown,
    events_get_gapless_sequences_in_commit_order,
    a_commit_after_another_writer_moved_the_sequence_stays_gapless,
    a_commit_writes_its_results_calls_events_and_output_together,
    commits_of_many_executions_at_once_land_or_are_refused_each_alone,
    a_cancel_signal_moves_running_work_to_cancelling,
    a_wait_is_claimed_once_the_node_clock_passes_its_wake_time,
    a_wait_saved_while_a_cancel_or_wake_is_pending_wakes_at_once,
    input_taken_for_a_step_is_the_same_on_replay,
    a_step_that_finds_no_input_is_marked_by_its_model_sending_commit,
    an_end_that_closes_input_is_refused_while_untaken_input_waits,
    input_added_under_a_recorded_command_key_adds_nothing,
    a_saved_result_wins_over_a_later_attempt_without_one,
    an_ended_execution_takes_no_more_commits,
    sealed_records_hold_no_plaintext,
    a_turn_runs_to_completion_on_the_engine,
    observe_resumes_from_any_cursor_and_reads_the_end_again,
    cancelling_a_running_turn_ends_it_cancelled,
    a_failed_turn_publishes_only_a_category_and_an_error_id,
    a_lost_tool_result_waits_in_outcome_unknown_until_resolved,
    a_waiting_execution_sleeps_without_an_owner_and_wakes_at_its_time,
    a_cancel_wakes_a_sleeping_execution_and_ends_it,
    an_outbox_message_is_delivered_after_its_commit_and_only_then,
    an_undeliverable_outbox_message_keeps_its_reason_and_never_blocks_the_next,
    a_row_sealed_under_an_old_key_opens_after_a_key_rotation,
    clear_text_rows_of_an_older_build_are_read_beside_sealed_ones,
    migrate_seals_the_clear_text_rows_of_an_older_build,
    events_are_read_with_the_end_that_follows_them,
    an_observer_ends_when_its_execution_ends_without_an_end_event,
    a_claim_says_whether_signals_wait_for_the_execution,
    a_chats_executions_are_read_with_their_outputs_in_one_read,
    a_submission_that_names_a_node_claims_its_work_for_it,
    a_chats_turn_claimed_by_its_submission_waits_for_the_earlier_turn,
    a_claim_written_by_a_submission_lapses_like_any_lease,
    a_retried_submission_claims_nothing,
    a_damaged_claimable_row_is_handed_back_apart_while_the_others_are_claimed,
    damaged_executions_are_interrupted_and_other_work_runs,
    a_statement_the_database_refuses_is_invalid_data_not_an_outage,
    reading_an_execution_takes_no_lock,
    signals_that_cannot_be_read_interrupt_the_execution_instead_of_looping,
    a_cancel_reaches_the_whole_open_tree_once_however_often_it_is_asked,
    cancelling_the_descendants_of_an_ended_execution_leaves_it_alone,
    an_event_that_cannot_be_written_rolls_back_the_input_and_its_execution,
);

fn keys() -> KeyRing {
    KeyRing::generate("test").0
}

fn new_execution(keys: &KeyRing, scope: Scope, key: Option<&str>, digest: &[u8]) -> NewExecution {
    NewExecution {
        id: ExecutionId::new(),
        kind: "test".into(),
        scope,
        command_key: key.map(str::to_string),
        input_digest: digest.to_vec(),
        input: keys.seal(Uuid::now_v7(), b"{}").unwrap(),
        parent_id: None,
        chat_id: None,
        admission_gate: None,
        events: vec![EventKind::TurnStarted {
            input: vec![ContentPart::text("hi")],
        }],
    }
}

fn member() -> Scope {
    Scope::Member("m1".into())
}

/// Submits one execution and claims it as `node`.
async fn claimed(store: &Arc<dyn Store>, node: &str) -> Claim {
    let submitted = store
        .submit(new_execution(&keys(), member(), None, b"x"))
        .await
        .unwrap();
    let claims = store.claim(node, &["test"], 60_000, 10).await.unwrap();
    claims
        .into_iter()
        .find(|c| c.id == submitted.execution_id())
        .unwrap()
}

fn model_key(step: u32, attempt: u32) -> CallKey {
    CallKey {
        step,
        slot: CallSlot::Model,
        attempt,
    }
}

fn tool_key(step: u32) -> CallKey {
    CallKey {
        step,
        slot: CallSlot::Tool(0),
        attempt: 1,
    }
}

fn call(key: CallKey, phase: CallPhase, result: Option<SealedBlob>) -> CallWrite {
    CallWrite {
        key,
        phase,
        idempotency_key: format!("k-{key}"),
        result,
        usage: None,
    }
}

fn delta(text: &str) -> EventKind {
    EventKind::TextDelta {
        step: 1,
        attempt: 1,
        text: text.into(),
    }
}

async fn a_command_key_retry_returns_the_same_execution(backend: Backend) {
    let store = backend.store;
    let keys = keys();
    let first = store
        .submit(new_execution(&keys, member(), Some("req-1"), b"same"))
        .await
        .unwrap();
    let again = store
        .submit(new_execution(&keys, member(), Some("req-1"), b"same"))
        .await
        .unwrap();
    assert!(matches!(first, Submitted::Created(_)));
    assert_eq!(again, Submitted::Existing(first.execution_id()));
}

async fn concurrent_submissions_with_one_key_create_one_execution(backend: Backend) {
    let store = backend.store;
    let keys = keys();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let store = Arc::clone(&store);
            let new = new_execution(&keys, member(), Some("req-race"), b"same");
            tokio::spawn(async move { store.submit(new).await.unwrap() })
        })
        .collect();
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.unwrap());
    }
    let created = ids
        .iter()
        .filter(|s| matches!(s, Submitted::Created(_)))
        .count();
    assert_eq!(created, 1, "{ids:?}");
    assert!(
        ids.iter()
            .all(|s| s.execution_id() == ids[0].execution_id())
    );
}

async fn a_command_key_with_other_input_is_a_conflict(backend: Backend) {
    let store = backend.store;
    let keys = keys();
    store
        .submit(new_execution(&keys, member(), Some("req-1"), b"one"))
        .await
        .unwrap();
    let err = store
        .submit(new_execution(&keys, member(), Some("req-1"), b"two"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::CommandKeyConflict(key) if key == "req-1"));
}

async fn a_member_and_a_service_never_share_a_command_key(backend: Backend) {
    let store = backend.store;
    let keys = keys();
    let by_member = store
        .submit(new_execution(&keys, member(), Some("k"), b"x"))
        .await
        .unwrap();
    let by_service = store
        .submit(new_execution(
            &keys,
            Scope::Service("cleanup".into()),
            Some("k"),
            b"x",
        ))
        .await
        .unwrap();
    assert!(matches!(by_service, Submitted::Created(_)));
    assert_ne!(by_member.execution_id(), by_service.execution_id());
}

async fn a_claim_adds_one_to_the_generation_and_a_live_lease_is_kept(backend: Backend) {
    let store = backend.store;
    let claim = claimed(&store, "node-a").await;
    assert_eq!(claim.generation, 1);
    let row = store.execution(claim.id).await.unwrap();
    assert_eq!(row.state, ExecutionState::Running);
    assert_eq!(row.owner_node.as_deref(), Some("node-a"));
    assert!(
        store
            .claim("node-b", &["test"], 60_000, 10)
            .await
            .unwrap()
            .is_empty(),
        "a live lease is not taken"
    );
    assert_eq!(
        store
            .renew("node-a", 60_000, &[(claim.id, 1)])
            .await
            .unwrap(),
        vec![claim.id]
    );
    assert!(
        store
            .renew("node-b", 60_000, &[(claim.id, 1)])
            .await
            .unwrap()
            .is_empty()
    );
}

async fn an_old_generation_cannot_commit_after_a_takeover(backend: Backend) {
    let store = backend.store;
    let submitted = store
        .submit(new_execution(&keys(), member(), None, b"x"))
        .await
        .unwrap();
    let old = store
        .claim("node-a", &["test"], 1, 10)
        .await
        .unwrap()
        .remove(0);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let new = store
        .claim("node-b", &["test"], 60_000, 10)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(new.id, submitted.execution_id());
    assert_eq!(new.generation, old.generation + 1, "takeover adds one");
    let before = store.execution(new.id).await.unwrap();
    let stale = Commit {
        events: vec![delta("stale")],
        ..Commit::default()
    };
    let err = store
        .commit(new.id, old.generation, stale)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Fenced(id) if id == new.id));
    let after = store.execution(new.id).await.unwrap();
    assert_eq!(
        after.last_sequence, before.last_sequence,
        "nothing was written"
    );
    assert_eq!(store.events(new.id, 0, 100).await.unwrap().len(), 1);
    assert!(
        store
            .renew("node-a", 60_000, &[(new.id, old.generation)])
            .await
            .unwrap()
            .is_empty()
    );
    store
        .commit(
            new.id,
            new.generation,
            Commit {
                events: vec![delta("fresh")],
                ..Commit::default()
            },
        )
        .await
        .unwrap();
}

async fn a_late_result_is_saved_but_not_published(backend: Backend) {
    let store = backend.store;
    let keys = keys();
    let submitted = store
        .submit(new_execution(&keys, member(), None, b"x"))
        .await
        .unwrap();
    let old = store
        .claim("node-a", &["test"], 1, 10)
        .await
        .unwrap()
        .remove(0);
    store
        .commit(
            old.id,
            old.generation,
            Commit {
                calls: vec![call(tool_key(1), CallPhase::Sending, None)],
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let new = store
        .claim("node-b", &["test"], 60_000, 10)
        .await
        .unwrap()
        .remove(0);
    let result = keys.seal(Uuid::now_v7(), b"late").unwrap();
    store
        .save_late_result(
            submitted.execution_id(),
            old.generation,
            call(tool_key(1), CallPhase::Done, Some(result)),
            openbot_server::store::TxWrites::default(),
        )
        .await
        .unwrap();
    let row = store
        .latest_call(new.id, 1, CallSlot::Tool(0))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.phase, CallPhase::Done);
    assert!(row.late);
    assert_eq!(row.generation, old.generation);
    assert_eq!(
        store.events(new.id, 0, 100).await.unwrap().len(),
        1,
        "the late result published nothing"
    );
    assert_eq!(
        store.execution(new.id).await.unwrap().generation,
        new.generation
    );
}

async fn a_late_result_resolves_a_call_whose_outcome_was_unknown(backend: Backend) {
    let store = backend.store;
    let keys = keys();
    let old = claimed(&store, "node-a").await;
    let unknown = StateChange {
        state: ExecutionState::OutcomeUnknown,
        outcome: None,
        failure: None,
        wake_at: None,
        unknown_call: Some(tool_key(1)),
        output: None,
        release: true,
        reason: None,
    };
    store
        .commit(
            old.id,
            old.generation,
            Commit {
                state: Some(unknown),
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    assert!(
        store
            .claim("node-b", &["test"], 60_000, 10)
            .await
            .unwrap()
            .is_empty(),
        "unknown work waits"
    );
    let result = keys.seal(Uuid::now_v7(), b"late").unwrap();
    store
        .save_late_result(
            old.id,
            old.generation,
            call(tool_key(1), CallPhase::Done, Some(result)),
            openbot_server::store::TxWrites::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        store.execution(old.id).await.unwrap().state,
        ExecutionState::Queued
    );
    let again = store.claim("node-b", &["test"], 60_000, 10).await.unwrap();
    assert_eq!(again[0].id, old.id, "queued again to use the saved result");
}

async fn events_get_gapless_sequences_in_commit_order(backend: Backend) {
    let store = backend.store;
    let claim = claimed(&store, "node-a").await;
    for batch in [vec![delta("a"), delta("b")], vec![], vec![delta("c")]] {
        store
            .commit(
                claim.id,
                claim.generation,
                Commit {
                    events: batch,
                    ..Commit::default()
                },
            )
            .await
            .unwrap();
    }
    let events = store.events(claim.id, 0, 100).await.unwrap();
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, [1, 2, 3, 4]);
    assert_eq!(events[3].kind, delta("c"));
    assert_eq!(store.events(claim.id, 2, 1).await.unwrap()[0].sequence, 3);
    assert_eq!(store.execution(claim.id).await.unwrap().last_sequence, 4);
}

/// A store remembers where its last commit left an execution (PostgreSQL then writes the next
/// commit in one statement); another writer moving the execution on makes that a stale hint,
/// never a gap or a reused sequence.
async fn a_commit_after_another_writer_moved_the_sequence_stays_gapless(backend: Backend) {
    let store = Arc::clone(&backend.store);
    let claim = claimed(&store, "node-a").await;
    let commit = |text: &str| Commit {
        events: vec![delta(text)],
        ..Commit::default()
    };
    store
        .commit(claim.id, claim.generation, commit("a"))
        .await
        .unwrap();
    let other = backend.reopen(store_keys().0).await;
    let moved = other
        .commit(claim.id, claim.generation, commit("b"))
        .await
        .unwrap();
    assert_eq!(moved, 3); // after `turn_started` (1) and "a" (2)
    let last = store
        .commit(claim.id, claim.generation, commit("c"))
        .await
        .unwrap();
    assert_eq!(last, 4);
    store
        .commit(claim.id, claim.generation, commit("d"))
        .await
        .unwrap();
    let events = store.events(claim.id, 1, 100).await.unwrap();
    let kinds: Vec<(u64, EventKind)> = events.into_iter().map(|e| (e.sequence, e.kind)).collect();
    assert_eq!(
        kinds,
        [
            (2, delta("a")),
            (3, delta("b")),
            (4, delta("c")),
            (5, delta("d"))
        ]
    );
}

/// Everything of a commit lands with it: the sealed results, the calls in their phases, the
/// events and an ended execution's output, also when the commit follows another one.
async fn a_commit_writes_its_results_calls_events_and_output_together(backend: Backend) {
    let store = backend.store;
    let keys = store_keys().0;
    let claim = claimed(&store, "node-a").await;
    let sending = Commit {
        calls: vec![call(model_key(1, 1), CallPhase::Sending, None)],
        events: vec![delta("a")],
        input_step: Some(1),
        ..Commit::default()
    };
    store
        .commit(claim.id, claim.generation, sending)
        .await
        .unwrap();
    let answer = keys.seal(Uuid::now_v7(), b"answer").unwrap();
    let output = keys.seal(Uuid::now_v7(), b"output").unwrap();
    let usage = openbot_schema::Usage {
        input_tokens: 5,
        output_tokens: 7,
        ..Default::default()
    };
    let end = Commit {
        calls: vec![
            CallWrite {
                usage: Some(usage),
                ..call(model_key(1, 1), CallPhase::Done, Some(answer.clone()))
            },
            call(tool_key(1), CallPhase::Intent, None),
        ],
        events: vec![delta("b"), delta("c")],
        state: Some(StateChange {
            output: Some(output.clone()),
            ..StateChange::ended(ExecutionState::Completed)
        }),
        usage: Some(usage),
        ..Commit::default()
    };
    // After `turn_started` (1) and "a" (2).
    assert_eq!(
        store.commit(claim.id, claim.generation, end).await.unwrap(),
        4
    );
    let calls = store.calls(claim.id).await.unwrap();
    let phases: Vec<(CallKey, CallPhase)> = calls.iter().map(|c| (c.key, c.phase)).collect();
    assert_eq!(
        phases,
        [
            (model_key(1, 1), CallPhase::Done),
            (tool_key(1), CallPhase::Intent)
        ]
    );
    assert_eq!(calls[0].result_record, Some(answer.id));
    assert_eq!(calls[0].usage.map(|u| u.output_tokens), Some(7));
    assert_eq!(store.sealed(answer.id).await.unwrap(), Some(answer));
    let row = store.execution(claim.id).await.unwrap();
    assert_eq!(row.state, ExecutionState::Completed);
    assert_eq!(row.output_record, Some(output.id));
    assert_eq!(row.usage.input_tokens, 5);
    assert_eq!(store.sealed(output.id).await.unwrap(), Some(output));
    let sequences: Vec<u64> = store
        .events(claim.id, 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.sequence)
        .collect();
    assert_eq!(sequences, [1, 2, 3, 4]);
}

/// Commits of several executions at the same time (SQLite writes those waiting for its writer
/// in one transaction, PostgreSQL those that need only their rows in one statement): each lands
/// whole, and one that is refused or fails writes nothing and costs no other its commit. Among
/// them: one from an old owner (refused), one whose execution another writer moved on since
/// this store's last commit (lands after that writer's event), one the database rejects (its
/// result record's ID is taken).
async fn commits_of_many_executions_at_once_land_or_are_refused_each_alone(backend: Backend) {
    let store = Arc::clone(&backend.store);
    let mut claims = Vec::new();
    for _ in 0..8 {
        claims.push(claimed(&store, "node-a").await);
    }
    let (old_owner, moved, rejected) = (3, 5, 6);
    let other = backend.reopen(store_keys().0).await;
    let other_event = Commit {
        events: vec![delta("elsewhere")],
        ..Commit::default()
    };
    let moved_claim = &claims[moved];
    other
        .commit(moved_claim.id, moved_claim.generation, other_event)
        .await
        .unwrap();
    let taken = keys().seal(Uuid::now_v7(), b"taken").unwrap();
    store.put_sealed(None, taken.clone()).await.unwrap();
    let commits = claims.iter().enumerate().map(|(i, claim)| {
        let store = Arc::clone(&store);
        let generation = if i == old_owner {
            claim.generation - 1
        } else {
            claim.generation
        };
        let result = (i == rejected).then(|| taken.clone());
        let commit = Commit {
            calls: vec![call(model_key(1, 1), CallPhase::Done, result)],
            events: vec![delta(&format!("text {i}"))],
            ..Commit::default()
        };
        async move { store.commit(claim.id, generation, commit).await }
    });
    let answers = futures::future::join_all(commits).await;
    for (i, (claim, answer)) in claims.iter().zip(answers).enumerate() {
        let texts: Vec<EventKind> = store
            .events(claim.id, 1, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect();
        let calls = store.calls(claim.id).await.unwrap();
        if i == old_owner {
            assert!(matches!(answer, Err(StoreError::Fenced(_))), "{answer:?}");
            assert!(texts.is_empty() && calls.is_empty());
        } else if i == rejected {
            assert!(answer.is_err(), "{answer:?}");
            assert!(texts.is_empty() && calls.is_empty());
        } else if i == moved {
            assert_eq!(answer.unwrap(), 3);
            assert_eq!(texts, [delta("elsewhere"), delta(&format!("text {i}"))]);
            assert_eq!(calls.len(), 1);
        } else {
            assert_eq!(answer.unwrap(), 2);
            assert_eq!(texts, [delta(&format!("text {i}"))]);
            assert_eq!(calls.len(), 1);
        }
    }
}

async fn a_cancel_signal_moves_running_work_to_cancelling(backend: Backend) {
    let store = backend.store;
    let claim = claimed(&store, "node-a").await;
    let first = store.signal(claim.id, "cancel", "{}").await.unwrap();
    let second = store.signal(claim.id, "cancel", "{}").await.unwrap();
    assert_eq!((first, second), (1, 2), "each signal has its own number");
    assert_eq!(
        store.execution(claim.id).await.unwrap().state,
        ExecutionState::Cancelling
    );
    let pending = store.pending_signals(claim.id).await.unwrap();
    assert_eq!(pending.len(), 2);
    store
        .commit(
            claim.id,
            claim.generation,
            Commit {
                handled_signals: vec![1],
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(store.pending_signals(claim.id).await.unwrap()[0].number, 2);
}

fn waiting_until(at: i64) -> Commit {
    Commit {
        state: Some(StateChange {
            state: ExecutionState::Waiting,
            outcome: None,
            failure: None,
            wake_at: Some(at),
            unknown_call: None,
            output: None,
            release: true,
            reason: None,
        }),
        ..Commit::default()
    }
}

async fn a_wait_is_claimed_once_the_node_clock_passes_its_wake_time(backend: Backend) {
    let store = backend.store;
    let claim = claimed(&store, "node-a").await;
    let at = now_ms() + 3_600_000;
    store
        .commit(claim.id, claim.generation, waiting_until(at))
        .await
        .unwrap();
    // A clock a minute short of the wake time claims nothing; one at it claims the wait.
    let early = store
        .claim_due("node-b", &["test"], 60_000, 10, at - 60_000)
        .await
        .unwrap();
    assert!(early.claims.iter().all(|c| c.id != claim.id));
    let due = store
        .claim_due("node-b", &["test"], 60_000, 10, at)
        .await
        .unwrap();
    assert!(due.claims.iter().any(|c| c.id == claim.id));
}

async fn a_wait_saved_while_a_cancel_or_wake_is_pending_wakes_at_once(backend: Backend) {
    let store = backend.store;
    for kind in ["cancel", "wake"] {
        let claim = claimed(&store, "node-a").await;
        // The signal arrives while the owner saves a wait an hour ahead.
        store.signal(claim.id, kind, "{}").await.unwrap();
        store
            .commit(
                claim.id,
                claim.generation,
                waiting_until(now_ms() + 3_600_000),
            )
            .await
            .unwrap();
        let row = store.execution(claim.id).await.unwrap();
        assert!(
            row.wake_at.is_some_and(|at| at <= now_ms()),
            "{kind}: the wait wakes at once"
        );
        let claims = store.claim("node-b", &["test"], 60_000, 10).await.unwrap();
        assert!(
            claims.iter().any(|c| c.id == claim.id),
            "{kind}: claimed again"
        );
    }
    // Without a pending signal the wait keeps its time.
    let claim = claimed(&store, "node-a").await;
    let at = now_ms() + 3_600_000;
    store
        .commit(claim.id, claim.generation, waiting_until(at))
        .await
        .unwrap();
    assert_eq!(store.execution(claim.id).await.unwrap().wake_at, Some(at));
}

async fn input_taken_for_a_step_is_the_same_on_replay(backend: Backend) {
    let store = backend.store;
    let claim = claimed(&store, "node-a").await;
    let input = |text: &str| serde_json::to_string(&vec![ContentPart::text(text)]).unwrap();
    store
        .add_input(claim.id, input("one"), None)
        .await
        .unwrap()
        .unwrap();
    let taken = store
        .take_inputs(claim.id, claim.generation, 2, false)
        .await
        .unwrap();
    store
        .add_input(claim.id, input("two"), None)
        .await
        .unwrap()
        .unwrap();
    let replayed = store
        .take_inputs(claim.id, claim.generation, 2, false)
        .await
        .unwrap();
    assert_eq!(taken, replayed, "step 2 gets the same input again");
    assert_eq!(
        store
            .take_inputs(claim.id, claim.generation, 3, false)
            .await
            .unwrap(),
        vec![input("two")]
    );
    let events = store.events(claim.id, 0, 100).await.unwrap();
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::InputSteered { .. }))
            .count(),
        2
    );
    assert!(
        store
            .take_inputs(claim.id, claim.generation, 4, true)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .add_input(claim.id, input("late"), None)
            .await
            .unwrap(),
        None,
        "a Turn that is ending takes no input"
    );
}

async fn a_step_that_finds_no_input_is_marked_by_its_model_sending_commit(backend: Backend) {
    let store = backend.store;
    let claim = claimed(&store, "node-a").await;
    let input = |text: &str| serde_json::to_string(&vec![ContentPart::text(text)]).unwrap();
    let before = store.execution(claim.id).await.unwrap().last_sequence;
    assert!(
        store
            .take_inputs(claim.id, claim.generation, 2, false)
            .await
            .unwrap()
            .is_empty()
    );
    // The model request of step 2 is marked sending, and with it the step's input.
    store
        .commit(
            claim.id,
            claim.generation,
            Commit {
                input_step: Some(2),
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    store
        .add_input(claim.id, input("after"), None)
        .await
        .unwrap()
        .unwrap();
    assert!(
        store
            .take_inputs(claim.id, claim.generation, 2, false)
            .await
            .unwrap()
            .is_empty(),
        "step 2 found nothing when its request was sent; its replay finds nothing too"
    );
    assert_eq!(
        store
            .take_inputs(claim.id, claim.generation, 3, false)
            .await
            .unwrap(),
        vec![input("after")],
        "the input goes to the next step"
    );
    assert_eq!(
        store.execution(claim.id).await.unwrap().last_sequence,
        before + 1,
        "one input_steered event, for the input taken"
    );
}

async fn an_end_that_closes_input_is_refused_while_untaken_input_waits(backend: Backend) {
    let store = backend.store;
    let claim = claimed(&store, "node-a").await;
    let input = |text: &str| serde_json::to_string(&vec![ContentPart::text(text)]).unwrap();
    // The last check found nothing; then input arrived before the end's commit.
    assert!(
        store
            .take_inputs(claim.id, claim.generation, 2, false)
            .await
            .unwrap()
            .is_empty()
    );
    store
        .add_input(claim.id, input("just in time"), None)
        .await
        .unwrap()
        .unwrap();
    let end = || Commit {
        state: Some(StateChange {
            state: ExecutionState::Completed,
            outcome: Some(TurnOutcome::Completed),
            failure: None,
            wake_at: None,
            unknown_call: None,
            output: None,
            release: true,
            reason: None,
        }),
        close_input: true,
        ..Commit::default()
    };
    let refused = store.commit(claim.id, claim.generation, end()).await;
    assert!(
        matches!(refused, Err(StoreError::InputWaiting(id)) if id == claim.id),
        "{refused:?}"
    );
    assert_eq!(
        store.execution(claim.id).await.unwrap().state,
        ExecutionState::Running,
        "nothing was written"
    );
    assert_eq!(
        store
            .take_inputs(claim.id, claim.generation, 2, false)
            .await
            .unwrap(),
        vec![input("just in time")],
        "the Turn takes it instead"
    );
    store
        .commit(claim.id, claim.generation, end())
        .await
        .unwrap();
    assert_eq!(
        store
            .add_input(claim.id, input("late"), None)
            .await
            .unwrap(),
        None,
        "an ended Turn takes no input"
    );
}

async fn input_added_under_a_recorded_command_key_adds_nothing(backend: Backend) {
    let store = backend.store;
    let claim = claimed(&store, "node-a").await;
    let input = serde_json::to_string(&vec![ContentPart::text("once")]).unwrap();
    let key = KeyWrite {
        scope: member(),
        key: "steer-1".into(),
        input_digest: b"steer once".to_vec(),
    };
    store
        .add_input(claim.id, input.clone(), Some(key.clone()))
        .await
        .unwrap()
        .unwrap();
    let again = store.add_input(claim.id, input.clone(), Some(key)).await;
    assert!(matches!(again, Err(StoreError::CommandKeyConflict(_))));
    assert_eq!(
        store.command_key(&member(), "steer-1").await.unwrap(),
        Some(CommandKeyRow {
            input_digest: b"steer once".to_vec(),
            execution_id: claim.id,
        })
    );
    assert_eq!(
        store
            .take_inputs(claim.id, claim.generation, 2, false)
            .await
            .unwrap(),
        vec![input],
        "the input joined once"
    );
}

async fn a_saved_result_wins_over_a_later_attempt_without_one(backend: Backend) {
    let store = backend.store;
    let keys = keys();
    let claim = claimed(&store, "node-a").await;
    let saved = keys.seal(Uuid::now_v7(), b"{}").unwrap();
    let calls = vec![
        call(model_key(1, 1), CallPhase::Done, Some(saved)),
        call(model_key(1, 2), CallPhase::Sending, None),
        call(model_key(2, 1), CallPhase::Intent, None),
        call(model_key(2, 2), CallPhase::Sending, None),
    ];
    store
        .commit(
            claim.id,
            claim.generation,
            Commit {
                calls,
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    let first = store
        .latest_call(claim.id, 1, CallSlot::Model)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((first.key.attempt, first.phase), (1, CallPhase::Done));
    let second = store
        .latest_call(claim.id, 2, CallSlot::Model)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((second.key.attempt, second.phase), (2, CallPhase::Sending));
    assert_eq!(
        store.calls(claim.id).await.unwrap().len(),
        4,
        "the full history stays for audit"
    );
    let overwrite = call(model_key(1, 1), CallPhase::Sending, None);
    store
        .commit(
            claim.id,
            claim.generation,
            Commit {
                calls: vec![overwrite],
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    let kept = store
        .latest_call(claim.id, 1, CallSlot::Model)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        kept.phase,
        CallPhase::Done,
        "a saved result is never overwritten"
    );
}

async fn an_ended_execution_takes_no_more_commits(backend: Backend) {
    let store = backend.store;
    let claim = claimed(&store, "node-a").await;
    let end = StateChange {
        state: ExecutionState::Completed,
        outcome: Some(TurnOutcome::Completed),
        failure: None,
        wake_at: None,
        unknown_call: None,
        output: None,
        release: true,
        reason: None,
    };
    store
        .commit(
            claim.id,
            claim.generation,
            Commit {
                state: Some(end),
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    let err = store
        .commit(
            claim.id,
            claim.generation,
            Commit {
                events: vec![delta("x")],
                ..Commit::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Ended(_)));
    assert!(matches!(
        store.signal(claim.id, "cancel", "{}").await.unwrap_err(),
        StoreError::Ended(_)
    ));
    assert!(
        store
            .claim("node-b", &["test"], 60_000, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn sealed_records_hold_no_plaintext(backend: Backend) {
    let store = backend.store;
    let keys = keys();
    let blob = keys
        .seal(Uuid::now_v7(), b"the private cause of a failure")
        .unwrap();
    store.put_sealed(None, blob.clone()).await.unwrap();
    let read = store.sealed(blob.id).await.unwrap().unwrap();
    assert_eq!(read, blob);
    assert!(!read.ciphertext.windows(7).any(|w| w == b"private"));
    assert_eq!(keys.open(&read).unwrap(), b"the private cause of a failure");
}

// ---- the engine and the Turn workflow ----

fn engine_on(store: &Arc<dyn Store>, keys: &KeyRing, node: &str) -> Engine {
    Engine::open(Arc::clone(store), keys.clone(), node.to_string())
}

async fn running_engine(store: &Arc<dyn Store>, keys: &KeyRing) -> Engine {
    let engine = engine_on(store, keys, "node-a");
    engine
        .start_runner(
            registry(
                None,
                &openbot_server::platform::Platform::new(
                    openbot_core::outbound::OutboundPolicy::parse("loopback").unwrap(),
                    Some(&std::env::temp_dir()),
                )
                .unwrap(),
            ),
            RunnerConfig {
                lease: Duration::from_secs(5),
                capacity: 32,
                storage_retry_budget: openbot_server::engine::STORAGE_RETRY_BUDGET,
            },
        )
        .await;
    engine
}

fn turn_input(model: &str, outside: Option<&Outside>) -> TurnInput {
    let tools = outside
        .map(|o| {
            vec![SavedTool {
                definition: ToolDefinition {
                    name: "write".into(),
                    description: "Writes to the outside world.".into(),
                    input_schema: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
                },
                route: ToolRoute::Http { url: o.url.clone(), retry_safe: false, background: false, template: Default::default() },
            }]
        })
        .unwrap_or_default();
    TurnInput {
        instructions: "Be brief.".into(),
        model: model.into(),
        tools,
        limits: Limits::default(),
        history: Vec::new(),
        input: vec![ContentPart::text("go")],
        max_output_tokens: None,
        organization_id: None,
        identity: None,
        source: None,
        plan_mode: false,
        memory: false,
        code_mode: false,
    }
}

async fn submit_turn(engine: &Engine, input: &TurnInput) -> ExecutionId {
    let submission =
        Submission::new(TURN, member(), input).with_events(vec![EventKind::TurnStarted {
            input: input.input.clone(),
        }]);
    engine.submit(submission).await.unwrap().execution_id()
}

async fn all_events(engine: &Engine, id: ExecutionId, after: u64) -> Vec<Event> {
    let events = tokio::time::timeout(
        Duration::from_secs(30),
        engine
            .observe(id, after)
            .map(|e| e.unwrap())
            .collect::<Vec<_>>(),
    )
    .await
    .expect("the execution ends in time");
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.sequence, after + 1 + i as u64, "no gap, no duplicate");
    }
    events
}

fn types(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| event_type(&e.kind)).collect()
}

async fn a_turn_runs_to_completion_on_the_engine(backend: Backend) {
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "hello"})),
        Answer::Text(vec!["Wrote ", "it."]),
    ])
    .await;
    let outside = Outside::start(false).await;
    let keys = keys();
    let engine = running_engine(&backend.store, &keys).await;
    let id = submit_turn(&engine, &turn_input(&model.spec(), Some(&outside))).await;
    let events = all_events(&engine, id, 0).await;
    let mut kinds = types(&events);
    kinds.dedup(); // text may come in one batch or several
    assert_eq!(
        kinds,
        [
            "turn_started",
            "model_step_started",
            "tool_call",
            "tool_result",
            "model_step_started",
            "text_delta",
            "turn_ended"
        ]
    );
    let text: String = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Wrote it.");
    assert!(
        matches!(events.last().unwrap().kind, EventKind::TurnEnded { outcome: TurnOutcome::Completed, usage } if usage.input_tokens == 20)
    );
    assert_eq!(outside.applied(), 1);
    assert_eq!(model.total_requests(), 2);
    let row = engine.execution(id).await.unwrap();
    assert_eq!(row.state, ExecutionState::Completed);
    assert_eq!(row.owner_node, None);
    engine.shutdown().await;
}

async fn observe_resumes_from_any_cursor_and_reads_the_end_again(backend: Backend) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["a", "b", "c", "d"])]).await;
    model.piece_delay(Duration::from_millis(30));
    let keys = keys();
    let engine = running_engine(&backend.store, &keys).await;
    let id = submit_turn(&engine, &turn_input(&model.spec(), None)).await;
    let mut first = engine.observe(id, 0);
    let seen = first.next().await.unwrap().unwrap();
    drop(first);
    let rest = all_events(&engine, id, seen.sequence).await;
    let all = all_events(&engine, id, 0).await;
    assert_eq!(all[1..], rest[..]);
    let last = all.last().unwrap().sequence;
    assert!(
        all_events(&engine, id, last).await.is_empty(),
        "after the end: nothing, and the stream ends"
    );
    assert_eq!(
        all_events(&engine, id, last - 1).await.len(),
        1,
        "the end can be read again"
    );
    engine.shutdown().await;
}

async fn cancelling_a_running_turn_ends_it_cancelled(backend: Backend) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["slow"])]).await;
    model.delay(0, Duration::from_secs(30));
    let keys = keys();
    let engine = running_engine(&backend.store, &keys).await;
    let id = submit_turn(&engine, &turn_input(&model.spec(), None)).await;
    let mut events = engine.observe(id, 0);
    while let Some(event) = events.next().await {
        if matches!(event.unwrap().kind, EventKind::ModelStepStarted { .. }) {
            break;
        }
    }
    engine.cancel(id).await.unwrap();
    let rest: Vec<Event> = tokio::time::timeout(
        Duration::from_secs(20),
        events.map(|e| e.unwrap()).collect(),
    )
    .await
    .unwrap();
    assert!(matches!(
        rest.last().unwrap().kind,
        EventKind::TurnEnded {
            outcome: TurnOutcome::Cancelled,
            ..
        }
    ));
    let row = engine.execution(id).await.unwrap();
    assert_eq!(row.state, ExecutionState::Cancelled);
    assert!(
        backend.store.pending_signals(id).await.unwrap().is_empty(),
        "the cancel signal was handled"
    );
    engine.shutdown().await;
}

async fn a_failed_turn_publishes_only_a_category_and_an_error_id(backend: Backend) {
    let keys = keys();
    let engine = running_engine(&backend.store, &keys).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let id = submit_turn(
        &engine,
        &turn_input(&format!("compatible:http://127.0.0.1:{port}/v1:m"), None),
    )
    .await;
    let events = all_events(&engine, id, 0).await;
    let EventKind::Failed { category, error_id } = events.last().unwrap().kind.clone() else {
        panic!("{events:?}")
    };
    assert_eq!(category, ErrorCategory::Network);
    let (stored_category, blob) = backend
        .store
        .error_record(error_id.as_uuid())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored_category, "network");
    let cause = String::from_utf8(keys.open(&blob).unwrap()).unwrap();
    assert!(cause.contains("could not reach the provider"), "{cause}");
    let public = serde_json::to_string(&events).unwrap();
    assert!(
        !public.contains("could not reach"),
        "the cause is in no event"
    );
    let row = engine.execution(id).await.unwrap();
    assert_eq!(
        (row.state, row.failure_category),
        (ExecutionState::Failed, Some(ErrorCategory::Network))
    );
    engine.shutdown().await;
}

async fn a_lost_tool_result_waits_in_outcome_unknown_until_resolved(backend: Backend) {
    // The first owner marked the tool call `sending` and vanished: its result is lost, and the
    // endpoint has no idempotency rule, so the call is never repeated.
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "x"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let outside = Outside::start(false).await;
    let keys = keys();
    let store = backend.store;
    let engine = engine_on(&store, &keys, "submitter");
    let id = submit_turn(&engine, &turn_input(&model.spec(), Some(&outside))).await;
    let ghost = store
        .claim("ghost", &["turn"], 1, 10)
        .await
        .unwrap()
        .remove(0);
    let tool_call = openbot_schema::ToolCall {
        id: "call_0".into(),
        name: "write".into(),
        arguments: json!({"text": "x"}),
    };
    let answer = openbot_core::turn::CallResult::Model {
        message: openbot_schema::Message::Assistant {
            content: vec![],
            tool_calls: vec![tool_call.clone()],
        },
        usage: None,
    };
    let sealed = keys
        .seal(Uuid::now_v7(), &serde_json::to_vec(&answer).unwrap())
        .unwrap();
    let calls = vec![
        call(model_key(1, 1), CallPhase::Done, Some(sealed)),
        call(tool_key(1), CallPhase::Sending, None),
    ];
    store
        .commit(
            id,
            ghost.generation,
            Commit {
                calls,
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    engine
        .start_runner(
            registry(
                None,
                &openbot_server::platform::Platform::new(
                    openbot_core::outbound::OutboundPolicy::parse("loopback").unwrap(),
                    Some(&std::env::temp_dir()),
                )
                .unwrap(),
            ),
            RunnerConfig {
                lease: Duration::from_secs(5),
                capacity: 8,
                storage_retry_budget: openbot_server::engine::STORAGE_RETRY_BUDGET,
            },
        )
        .await;

    let mut events = engine.observe(id, 0);
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let EventKind::CallOutcomeUnknown { step, call } = &event.kind {
            assert_eq!((*step, call.as_str()), (1, "1/tool:0/1"));
            break;
        }
    }
    let row = store.execution(id).await.unwrap();
    assert_eq!(row.state, ExecutionState::OutcomeUnknown);
    assert_eq!(outside.received(), 0, "the unsure write was not repeated");

    // A person decides: the write happened, with this result.
    let result = openbot_core::turn::CallResult::Tool {
        result: openbot_schema::ToolResult::text(&tool_call, "written"),
    };
    let blob = keys
        .seal(Uuid::now_v7(), &serde_json::to_vec(&result).unwrap())
        .unwrap();
    store.resolve_unknown(id, tool_key(1), blob).await.unwrap();
    engine
        .context()
        .hub
        .announce(openbot_server::engine::Wake::Work);
    let rest: Vec<Event> = tokio::time::timeout(
        Duration::from_secs(20),
        events.map(|e| e.unwrap()).collect(),
    )
    .await
    .unwrap();
    assert!(matches!(
        rest.last().unwrap().kind,
        EventKind::TurnEnded {
            outcome: TurnOutcome::Completed,
            ..
        }
    ));
    assert_eq!(outside.received(), 0);
    assert_eq!(model.requests_at(0), 0, "the saved model answer was reused");
    engine.shutdown().await;
}

// ---- durable timers, through a workflow registered by the test, like any feature's ----

/// Sleeps until the time in its input, then ends.
struct Sleepy;

#[derive(serde::Serialize, serde::Deserialize)]
struct SleepyInput {
    wake_at: i64,
}

#[async_trait::async_trait]
impl openbot_server::engine::Workflow for Sleepy {
    fn kind(&self) -> &'static str {
        "sleepy"
    }

    async fn next(
        &self,
        cx: &openbot_server::engine::PhaseContext,
    ) -> Result<openbot_server::engine::Next, openbot_server::engine::PhaseError> {
        use openbot_server::engine::Next;
        let input: SleepyInput = cx
            .engine
            .open_json(cx.execution.input_record)
            .await
            .unwrap();
        Ok(if cx.execution.state.is_terminal() {
            Next::Done
        } else if now_ms() < input.wake_at {
            Next::Wait {
                until: Some(input.wake_at),
            }
        } else {
            Next::Run("wake".into())
        })
    }

    async fn run(
        &self,
        cx: &openbot_server::engine::PhaseContext,
        _phase: &str,
        _scope: &openbot_server::engine::RunScope,
    ) -> Result<(), openbot_server::engine::PhaseError> {
        let end = StateChange {
            state: ExecutionState::Completed,
            outcome: Some(TurnOutcome::Completed),
            failure: None,
            wake_at: None,
            unknown_call: None,
            output: None,
            release: true,
            reason: None,
        };
        let event = EventKind::TurnEnded {
            outcome: TurnOutcome::Completed,
            usage: Default::default(),
        };
        cx.engine
            .store
            .commit(
                cx.execution.id,
                cx.generation,
                Commit {
                    events: vec![event],
                    state: Some(end),
                    ..Commit::default()
                },
            )
            .await?;
        cx.engine
            .hub
            .announce(openbot_server::engine::Wake::Events(cx.execution.id));
        Ok(())
    }

    async fn end(
        &self,
        cx: &openbot_server::engine::PhaseContext,
        end: openbot_server::engine::EngineEnd,
    ) -> Result<(), openbot_server::engine::PhaseError> {
        let outcome = match end {
            openbot_server::engine::EngineEnd::Cancelled { .. } => TurnOutcome::Cancelled,
            openbot_server::engine::EngineEnd::Failed { .. } => TurnOutcome::Completed,
        };
        let change = StateChange {
            state: ExecutionState::Cancelled,
            outcome: Some(outcome),
            failure: None,
            wake_at: None,
            unknown_call: None,
            output: None,
            release: true,
            reason: None,
        };
        let event = EventKind::TurnEnded {
            outcome,
            usage: Default::default(),
        };
        cx.engine
            .store
            .commit(
                cx.execution.id,
                cx.generation,
                Commit {
                    events: vec![event],
                    state: Some(change),
                    ..Commit::default()
                },
            )
            .await?;
        cx.engine
            .hub
            .announce(openbot_server::engine::Wake::Events(cx.execution.id));
        Ok(())
    }
}

async fn sleepy_engine(store: &Arc<dyn Store>) -> Engine {
    let engine = engine_on(store, &keys(), "node-a");
    let mut registry = openbot_server::engine::Registry::new();
    registry.register(Arc::new(Sleepy));
    engine
        .start_runner(
            registry,
            RunnerConfig {
                lease: Duration::from_secs(5),
                capacity: 8,
                storage_retry_budget: openbot_server::engine::STORAGE_RETRY_BUDGET,
            },
        )
        .await;
    engine
}

async fn submit_sleepy(engine: &Engine, wake_at: i64) -> ExecutionId {
    let input = SleepyInput { wake_at };
    let submission = Submission::new("sleepy", member(), &input);
    engine.submit(submission).await.unwrap().execution_id()
}

async fn wait_for_state(
    store: &Arc<dyn Store>,
    id: ExecutionId,
    state: ExecutionState,
) -> ExecutionRow {
    for _ in 0..400 {
        let row = store.execution(id).await.unwrap();
        if row.state == state {
            return row;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("execution never reached {state:?}");
}

async fn a_waiting_execution_sleeps_without_an_owner_and_wakes_at_its_time(backend: Backend) {
    let store = backend.store;
    let engine = sleepy_engine(&store).await;
    let wake_at = now_ms() + 700;
    let id = submit_sleepy(&engine, wake_at).await;
    let waiting = wait_for_state(&store, id, ExecutionState::Waiting).await;
    assert_eq!(
        waiting.owner_node, None,
        "a sleeping execution holds no lease"
    );
    assert_eq!(waiting.wake_at, Some(wake_at), "its timer is a saved row");
    let done = wait_for_state(&store, id, ExecutionState::Completed).await;
    assert!(
        done.updated_at >= wake_at,
        "it woke no earlier than its time"
    );
    assert_eq!(done.generation, 2, "claimed again at its time");
    engine.shutdown().await;
}

async fn a_cancel_wakes_a_sleeping_execution_and_ends_it(backend: Backend) {
    let store = backend.store;
    let engine = sleepy_engine(&store).await;
    let id = submit_sleepy(&engine, now_ms() + 3_600_000).await;
    wait_for_state(&store, id, ExecutionState::Waiting).await;
    engine.cancel(id).await.unwrap();
    let row = wait_for_state(&store, id, ExecutionState::Cancelled).await;
    assert_eq!(row.outcome, Some(TurnOutcome::Cancelled));
    engine.shutdown().await;
}

// ---- the outbox ----

async fn an_outbox_message_is_delivered_after_its_commit_and_only_then(backend: Backend) {
    let store = backend.store;
    let engine = sleepy_engine(&store).await;
    let target = submit_sleepy(&engine, now_ms() + 3_600_000).await;
    wait_for_state(&store, target, ExecutionState::Waiting).await;
    let source = claimed(&store, "node-b").await;
    let message = openbot_server::engine::SignalMessage {
        execution: target,
        signal: "cancel".into(),
    };

    // A step that is refused (an old generation) commits nothing, so it sends nothing.
    let refused = Commit {
        outbox: vec![message.to_outbox()],
        ..Commit::default()
    };
    assert!(
        engine
            .context()
            .commit(source.id, source.generation + 1, refused)
            .await
            .is_err()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        store.execution(target).await.unwrap().state,
        ExecutionState::Waiting
    );

    let step = Commit {
        events: vec![delta("sent")],
        outbox: vec![message.to_outbox()],
        ..Commit::default()
    };
    engine
        .context()
        .commit(source.id, source.generation, step)
        .await
        .unwrap();
    let row = wait_for_state(&store, target, ExecutionState::Cancelled).await;
    assert_eq!(row.outcome, Some(TurnOutcome::Cancelled));
    engine.shutdown().await;
}

async fn an_undeliverable_outbox_message_keeps_its_reason_and_never_blocks_the_next(
    backend: Backend,
) {
    let store = backend.store;
    let engine = sleepy_engine(&store).await;
    let target = submit_sleepy(&engine, now_ms() + 3_600_000).await;
    wait_for_state(&store, target, ExecutionState::Waiting).await;
    let source = claimed(&store, "node-b").await;
    let broken = ("no-such-kind".to_string(), "{}".to_string());
    let good = openbot_server::engine::SignalMessage {
        execution: target,
        signal: "cancel".into(),
    }
    .to_outbox();
    let step = Commit {
        outbox: vec![broken, good],
        ..Commit::default()
    };
    engine
        .context()
        .commit(source.id, source.generation, step)
        .await
        .unwrap();
    wait_for_state(&store, target, ExecutionState::Cancelled).await;
    // The broken message stays undelivered, with its reason, and is tried again later.
    let messages = store.outbox_of(source.id).await.unwrap();
    assert_eq!(messages.len(), 2);
    assert!(!messages[0].delivered);
    assert_eq!(messages[0].attempts, 1);
    assert_eq!(
        messages[0].last_error.as_deref(),
        Some("no handler for outbox kind `no-such-kind`")
    );
    assert!(messages[1].delivered, "the next message was not held up");
    engine.shutdown().await;
}

async fn a_retired_workflow_kind_ends_interrupted_with_its_reason(backend: Backend) {
    let keys = keys();
    let engine = engine_on(&backend.store, &keys, "node-a");
    // Work of a kind an earlier build ran, waiting in the database.
    let id = engine
        .submit(Submission::new(
            "legacy_report",
            member(),
            &json!({"report": 1}),
        ))
        .await
        .unwrap()
        .execution_id();
    let platform = openbot_server::platform::Platform::new(Default::default(), None).unwrap();
    let mut workflows = registry(None, &platform);
    workflows.retire("legacy_report", "reports moved to the Turn workflow");
    engine
        .start_runner(
            workflows,
            RunnerConfig {
                lease: Duration::from_secs(5),
                capacity: 8,
                storage_retry_budget: openbot_server::engine::STORAGE_RETRY_BUDGET,
            },
        )
        .await;
    let events = all_events(&engine, id, 0).await;
    assert_eq!(types(&events), ["failed"], "one failed event ends it");
    let row = engine.execution(id).await.unwrap();
    assert_eq!(row.state, ExecutionState::Interrupted);
    let reason = row.reason.unwrap_or_default();
    assert!(
        reason.contains("legacy_report") && reason.contains("reports moved"),
        "{reason}"
    );
    engine.shutdown().await;
}

// ---- sealed rows ----

/// A parameter of a raw statement.
enum P {
    Id(Uuid),
    Text(String),
    Int(i64),
}

impl Backend {
    /// The same database opened again, sealing with `keys`.
    async fn reopen(&self, keys: KeyRing) -> Arc<dyn Store> {
        match &self.db {
            Db::Sqlite(path) => Arc::new(SqliteStore::open(path, keys).await.unwrap()),
            Db::Postgres(url) => Arc::new(PostgresStore::connect(url, 4, keys).await.unwrap()),
        }
    }

    /// Runs `sql` (with `$1`, `$2`, ... placeholders) on the database directly, as an older
    /// build or a person with a dump would; returns the first column of the first row as text.
    async fn raw(&self, sql: &str, params: Vec<P>) -> Option<String> {
        match &self.db {
            Db::Sqlite(path) => {
                let options = sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(path)
                    .busy_timeout(Duration::from_secs(10));
                let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
                let sql = sql.replace('$', "?");
                let mut query = sqlx::query_scalar::<_, Option<String>>(sqlx::AssertSqlSafe(sql));
                for param in params {
                    query = match param {
                        P::Id(id) => query.bind(id),
                        P::Text(text) => query.bind(text),
                        P::Int(n) => query.bind(n),
                    };
                }
                let value = query.fetch_optional(&pool).await.unwrap().flatten();
                pool.close().await;
                value
            }
            Db::Postgres(url) => {
                let pool = sqlx::PgPool::connect(url).await.unwrap();
                let mut query =
                    sqlx::query_scalar::<_, Option<String>>(sqlx::AssertSqlSafe(sql.to_string()));
                for param in params {
                    query = match param {
                        P::Id(id) => query.bind(id),
                        P::Text(text) => query.bind(text),
                        P::Int(n) => query.bind(n),
                    };
                }
                let value = query.fetch_optional(&pool).await.unwrap().flatten();
                pool.close().await;
                value
            }
        }
    }

    /// The `table.column`s in which some row holds `needle`.
    async fn columns_containing(&self, needle: &str) -> Vec<String> {
        match &self.db {
            Db::Sqlite(path) => {
                let options = sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(path)
                    .read_only(true);
                let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
                let found = dump::sqlite_columns_containing(&pool, needle).await;
                pool.close().await;
                found
            }
            Db::Postgres(url) => {
                let pool = sqlx::PgPool::connect(url).await.unwrap();
                let found = dump::pg_columns_containing(&pool, needle).await;
                pool.close().await;
                found
            }
        }
    }

    /// The configuration `openbot migrate` would run with on this database.
    fn node_config(&self, keys: &str) -> openbot_server::node::NodeConfig {
        let (data_dir, database_url) = match &self.db {
            Db::Sqlite(path) => (path.parent().unwrap().to_path_buf(), None),
            Db::Postgres(url) => (std::env::temp_dir(), Some(url.clone())),
        };
        openbot_server::node::NodeConfig {
            data_dir,
            database_url,
            seal_keys: Some(keys.to_string()),
            node_name: "migrate".into(),
            lease: Duration::from_secs(2),
            max_connections: 4,
            objects_dir: None,
            objects_url: None,
            platform: openbot_server::platform::Platform::new(
                openbot_core::outbound::OutboundPolicy::parse("none").unwrap(),
                None,
            )
            .unwrap(),
        }
    }
}

fn turn_input_json(text: &str) -> String {
    serde_json::to_string(&vec![ContentPart::text(text)]).unwrap()
}

/// The rows of one kind each that an older build wrote in clear text for execution `id`, all
/// holding `marker`: an event, a Turn input, a Chat notice and a request.
struct ClearRows {
    id: ExecutionId,
    chat: Uuid,
    request: Uuid,
}

async fn write_clear_rows(backend: &Backend, id: ExecutionId, marker: &str) -> ClearRows {
    let event = serde_json::to_string(&EventKind::InputSteered {
        input: vec![ContentPart::text(marker)],
    })
    .unwrap();
    backend
        .raw(
            "INSERT INTO events (execution_id, sequence, kind, payload, at) VALUES ($1, 2, 'input_steered', $2, 0)",
            vec![P::Id(id.as_uuid()), P::Text(event)],
        )
        .await;
    backend
        .raw(
            "UPDATE executions SET last_sequence = 2 WHERE id = $1",
            vec![P::Id(id.as_uuid())],
        )
        .await;
    backend
        .raw(
            "INSERT INTO turn_inputs (execution_id, position, content, created_at) VALUES ($1, 1, $2, 0)",
            vec![P::Id(id.as_uuid()), P::Text(turn_input_json(marker))],
        )
        .await;
    let chat = Uuid::now_v7();
    backend
        .raw(
            "INSERT INTO chat_notices (chat_id, source_id, content, created_at) VALUES ($1, $2, $3, 0)",
            vec![P::Id(chat), P::Id(id.as_uuid()), P::Text(turn_input_json(marker))],
        )
        .await;
    let request = Uuid::now_v7();
    backend
        .raw(
            "INSERT INTO requests (id, kind, execution_id, source_execution_id, organization_id, owner_member_id, \
                 bot_id, payload, state, created_at, expires_at) \
             VALUES ($1, 'approval', $2, $2, $3, $3, $3, $4, 'pending', 0, $5)",
            vec![
                P::Id(request),
                P::Id(id.as_uuid()),
                P::Id(Uuid::now_v7()),
                P::Text(json!({"name": "pay", "arguments": {"memo": marker}}).to_string()),
                P::Int(i64::MAX),
            ],
        )
        .await;
    ClearRows { id, chat, request }
}

/// Reads the rows back through `store` and checks each shows `marker`.
async fn read_back(store: &Arc<dyn Store>, rows: &ClearRows, marker: &str) {
    let events = store.events(rows.id, 0, 10).await.unwrap();
    assert_eq!(events.len(), 2);
    assert!(
        matches!(&events[1].kind, EventKind::InputSteered { input } if input == &vec![ContentPart::text(marker)]),
        "{events:?}"
    );
    let claims = store.claim("node-a", &["test"], 60_000, 10).await.unwrap();
    let claim = claims.iter().find(|c| c.id == rows.id).unwrap();
    assert_eq!(
        store
            .take_inputs(rows.id, claim.generation, 1, false)
            .await
            .unwrap(),
        vec![turn_input_json(marker)]
    );
    let notices = store.chat_notices(rows.chat).await.unwrap();
    assert_eq!(notices[0].content, turn_input_json(marker));
    let request = store.request(rows.request).await.unwrap().unwrap();
    assert!(request.payload.contains(marker), "{}", request.payload);
}

async fn a_row_sealed_under_an_old_key_opens_after_a_key_rotation(backend: Backend) {
    let marker = "rotationMARKERq1";
    let (old, old_text) = KeyRing::generate("old");
    let store = backend.reopen(old).await;
    let mut new = new_execution(&keys(), member(), None, b"x");
    new.events = vec![EventKind::TurnStarted {
        input: vec![ContentPart::text(marker)],
    }];
    let id = store.submit(new).await.unwrap().execution_id();
    store
        .add_input(id, turn_input_json(marker), None)
        .await
        .unwrap()
        .unwrap();
    let event_key = "SELECT key_id FROM events WHERE execution_id = $1 AND sequence = $2";
    assert_eq!(
        backend
            .raw(event_key, vec![P::Id(id.as_uuid()), P::Int(1)])
            .await
            .as_deref(),
        Some("old")
    );
    assert_eq!(
        backend.columns_containing(marker).await,
        Vec::<String>::new()
    );

    // Rotation: the new key first, the old one kept after it.
    let (_, new_text) = KeyRing::generate("new");
    let rotated = KeyRing::parse(&format!("{new_text},{old_text}")).unwrap();
    let store = backend.reopen(rotated).await;
    let events = store.events(id, 0, 10).await.unwrap();
    assert!(
        matches!(&events[0].kind, EventKind::TurnStarted { input } if input == &vec![ContentPart::text(marker)]),
        "{events:?}"
    );
    let claims = store.claim("node-a", &["test"], 60_000, 10).await.unwrap();
    let claim = claims.iter().find(|c| c.id == id).unwrap();
    let taken = store
        .take_inputs(id, claim.generation, 1, false)
        .await
        .unwrap();
    assert_eq!(taken, vec![turn_input_json(marker)], "the old input opens");
    assert_eq!(
        backend
            .raw(event_key, vec![P::Id(id.as_uuid()), P::Int(2)])
            .await
            .as_deref(),
        Some("new"),
        "new rows are sealed with the new key"
    );
}

async fn clear_text_rows_of_an_older_build_are_read_beside_sealed_ones(backend: Backend) {
    let marker = "olderBuildMARKERq2";
    let id = backend
        .store
        .submit(new_execution(&keys(), member(), None, b"x"))
        .await
        .unwrap()
        .execution_id();
    let rows = write_clear_rows(&backend, id, marker).await;
    let key_of = |sequence: i64| {
        backend.raw(
            "SELECT key_id FROM events WHERE execution_id = $1 AND sequence = $2",
            vec![P::Id(id.as_uuid()), P::Int(sequence)],
        )
    };
    assert_eq!(
        key_of(1).await.as_deref(),
        Some("store"),
        "this build seals"
    );
    assert_eq!(key_of(2).await, None, "the older build's row is clear");
    read_back(&backend.store, &rows, marker).await;
}

async fn migrate_seals_the_clear_text_rows_of_an_older_build(backend: Backend) {
    let marker = "migrateMARKERq3";
    let id = backend
        .store
        .submit(new_execution(&keys(), member(), None, b"x"))
        .await
        .unwrap()
        .execution_id();
    let rows = write_clear_rows(&backend, id, marker).await;
    assert_eq!(backend.columns_containing(marker).await.len(), 4);

    let config = backend.node_config(&store_keys().1);
    let migrated = openbot_server::node::migrate(&config).await.unwrap();
    assert_eq!(
        migrated.sealed_rows,
        Some(4),
        "one row of each kind was sealed"
    );
    assert_eq!(
        backend.columns_containing(marker).await,
        Vec::<String>::new()
    );
    read_back(&backend.store, &rows, marker).await;
    let again = openbot_server::node::migrate(&config).await.unwrap();
    assert_eq!(again.sealed_rows, Some(0), "nothing is sealed twice");
}

async fn events_are_read_with_the_end_that_follows_them(backend: Backend) {
    let store = backend.store;
    let claim = claimed(&store, "node-a").await;
    let open = store.events_to_end(claim.id, 0, 100).await.unwrap();
    assert_eq!(open.events.len(), 1, "the submit's event");
    assert_eq!(open.ended_at, None, "still running");
    let last = store
        .commit(
            claim.id,
            claim.generation,
            Commit {
                events: vec![delta("a"), delta("b")],
                state: Some(StateChange::ended(ExecutionState::Completed)),
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    let page = store.events_to_end(claim.id, 0, 100).await.unwrap();
    let sequences: Vec<u64> = page.events.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, [1, 2, 3]);
    assert_eq!(page.ended_at, Some(last));
    assert_eq!(last, 3);
    let short = store.events_to_end(claim.id, 1, 1).await.unwrap();
    assert_eq!(short.events.len(), 1, "the page's limit holds");
    assert_eq!(short.events[0].sequence, 2);
    assert_eq!(
        short.ended_at,
        Some(last),
        "the end is known before it is read"
    );
    let after = store.events_to_end(claim.id, last, 100).await.unwrap();
    assert!(after.events.is_empty());
    assert_eq!(after.ended_at, Some(last));
    assert!(matches!(
        store.events_to_end(ExecutionId::new(), 0, 100).await,
        Err(StoreError::NotFound(_))
    ));
}

async fn an_observer_ends_when_its_execution_ends_without_an_end_event(backend: Backend) {
    let store = backend.store;
    let engine = engine_on(&store, &keys(), "node-a");
    let claim = claimed(&store, "node-a").await;
    let mut observed = engine.observe(claim.id, 0);
    assert_eq!(observed.next().await.unwrap().unwrap().sequence, 1);
    store
        .commit(
            claim.id,
            claim.generation,
            Commit {
                events: vec![delta("a")],
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    // An end with no event of its own (as some jobs end), announced once with the event.
    store
        .commit(
            claim.id,
            claim.generation,
            Commit {
                state: Some(StateChange::ended(ExecutionState::Completed)),
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    engine
        .context()
        .hub
        .announce(openbot_server::engine::Wake::Events(claim.id));
    let rest = tokio::time::timeout(
        openbot_server::engine::FALLBACK_POLL / 2,
        observed.collect::<Vec<_>>(),
    )
    .await
    .expect("the stream ends at the wake-up, not at a fallback poll");
    let sequences: Vec<u64> = rest.into_iter().map(|e| e.unwrap().sequence).collect();
    assert_eq!(sequences, [2]);
    engine.shutdown().await;
}

async fn a_claim_says_whether_signals_wait_for_the_execution(backend: Backend) {
    let store = backend.store;
    let quiet = store
        .submit(new_execution(&keys(), member(), None, b"quiet"))
        .await
        .unwrap()
        .execution_id();
    let signalled = store
        .submit(new_execution(&keys(), member(), None, b"signalled"))
        .await
        .unwrap()
        .execution_id();
    store.signal(signalled, "wake", "{}").await.unwrap();
    let claims = store.claim("node-a", &["test"], 60_000, 10).await.unwrap();
    let pending = |id: ExecutionId| claims.iter().find(|c| c.id == id).unwrap().signals_pending;
    assert!(!pending(quiet));
    assert!(pending(signalled));
}

async fn a_chats_executions_are_read_with_their_outputs_in_one_read(backend: Backend) {
    let store = backend.store;
    let keys = keys();
    let chat = Uuid::now_v7();
    let mut ids = Vec::new();
    for (i, output) in [Some("first"), None, Some("third"), Some("fourth")]
        .into_iter()
        .enumerate()
    {
        let mut new = new_execution(&keys, member(), None, format!("{i}").as_bytes());
        new.chat_id = Some(chat);
        let id = store.submit(new).await.unwrap().execution_id();
        let claim = store
            .claim("node-a", &["test"], 60_000, 1)
            .await
            .unwrap()
            .pop()
            .unwrap();
        assert_eq!(claim.id, id, "a Chat's executions are claimed in order");
        let output = output.map(|text| keys.seal(Uuid::now_v7(), text.as_bytes()).unwrap());
        store
            .commit(
                id,
                claim.generation,
                Commit {
                    state: Some(StateChange {
                        output: output.clone(),
                        ..StateChange::ended(ExecutionState::Completed)
                    }),
                    ..Commit::default()
                },
            )
            .await
            .unwrap();
        ids.push((id, output));
    }
    let all = store.chat_outputs(chat, None).await.unwrap();
    assert_eq!(
        all.iter().map(|o| o.id).collect::<Vec<_>>(),
        ids.iter().map(|(id, _)| *id).collect::<Vec<_>>()
    );
    for (read, (_, output)) in all.iter().zip(&ids) {
        assert_eq!(read.output, *output);
        assert_eq!(read.output_record, output.as_ref().map(|blob| blob.id));
    }
    let opened = keys.open(all[3].output.as_ref().unwrap()).unwrap();
    assert_eq!(opened, b"fourth");
    let before_third = store.chat_outputs(chat, Some(ids[2].0)).await.unwrap();
    assert_eq!(before_third.len(), 2, "only the executions before it");
    assert!(
        store
            .chat_outputs(Uuid::now_v7(), None)
            .await
            .unwrap()
            .is_empty()
    );
}

fn node_a(lease_ms: i64) -> ClaimFor {
    ClaimFor {
        node: "node-a".into(),
        lease_ms,
    }
}

async fn a_submission_that_names_a_node_claims_its_work_for_it(backend: Backend) {
    let store = backend.store;
    let new = new_execution(&keys(), member(), None, b"x");
    let last = new.events.len() as i64;
    let (submitted, claim) = store
        .submit_claiming(new, TxWrites::default(), Some(&node_a(60_000)))
        .await
        .unwrap();
    let claim = claim.expect("claimed by its submission");
    assert_eq!(claim.id, submitted.execution_id());
    assert_eq!(claim.generation, 1);
    assert!(!claim.signals_pending);
    assert_eq!(claim.execution.state, ExecutionState::Running);
    assert_eq!(claim.execution.owner_node.as_deref(), Some("node-a"));
    assert_eq!(claim.execution.last_sequence, last);
    assert_eq!(store.execution(claim.id).await.unwrap(), claim.execution);
    assert!(
        store
            .claim("node-b", &["test"], 60_000, 10)
            .await
            .unwrap()
            .is_empty(),
        "a live lease is kept"
    );
    // The owner commits on the generation its submission wrote.
    store
        .commit(
            claim.id,
            claim.generation,
            Commit {
                events: vec![delta("a")],
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    // Without a node named, the work waits for a claim.
    let (_, none) = store
        .submit_claiming(
            new_execution(&keys(), member(), None, b"y"),
            TxWrites::default(),
            None,
        )
        .await
        .unwrap();
    assert!(none.is_none());
    assert_eq!(
        store
            .claim("node-b", &["test"], 60_000, 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn a_chats_turn_claimed_by_its_submission_waits_for_the_earlier_turn(backend: Backend) {
    let store = backend.store;
    let chat = Uuid::now_v7();
    let in_chat = |digest: &[u8]| {
        let mut new = new_execution(&keys(), member(), None, digest);
        new.chat_id = Some(chat);
        new
    };
    let (_, first) = store
        .submit_claiming(in_chat(b"1"), TxWrites::default(), Some(&node_a(60_000)))
        .await
        .unwrap();
    let first = first.expect("the Chat's first Turn starts at once");
    let (second, claim) = store
        .submit_claiming(in_chat(b"2"), TxWrites::default(), Some(&node_a(60_000)))
        .await
        .unwrap();
    assert!(claim.is_none(), "the earlier Turn is still open");
    let second = second.execution_id();
    let row = store.execution(second).await.unwrap();
    assert_eq!(row.state, ExecutionState::Queued);
    assert_eq!(row.owner_node, None);
    assert_eq!(row.generation, 0);
    store
        .commit(
            first.id,
            first.generation,
            Commit {
                state: Some(StateChange::ended(ExecutionState::Completed)),
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    let claims = store.claim("node-b", &["test"], 60_000, 10).await.unwrap();
    assert_eq!(claims.iter().map(|c| c.id).collect::<Vec<_>>(), [second]);
    assert_eq!(claims[0].generation, 1);
}

async fn a_claim_written_by_a_submission_lapses_like_any_lease(backend: Backend) {
    let store = backend.store;
    let (_, claim) = store
        .submit_claiming(
            new_execution(&keys(), member(), None, b"x"),
            TxWrites::default(),
            Some(&node_a(1)),
        )
        .await
        .unwrap();
    let old = claim.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let taken = store.claim("node-b", &["test"], 60_000, 10).await.unwrap();
    assert_eq!(taken.len(), 1, "a dead submitter's work is taken over");
    assert_eq!(taken[0].id, old.id);
    assert_eq!(taken[0].generation, 2);
    let stale = store
        .commit(
            old.id,
            old.generation,
            Commit {
                events: vec![delta("late")],
                ..Commit::default()
            },
        )
        .await;
    assert!(matches!(stale, Err(StoreError::Fenced(_))), "{stale:?}");
}

async fn a_retried_submission_claims_nothing(backend: Backend) {
    let store = backend.store;
    let (first, claim) = store
        .submit_claiming(
            new_execution(&keys(), member(), Some("k"), b"x"),
            TxWrites::default(),
            Some(&node_a(60_000)),
        )
        .await
        .unwrap();
    assert!(claim.is_some());
    let (again, claim) = store
        .submit_claiming(
            new_execution(&keys(), member(), Some("k"), b"x"),
            TxWrites::default(),
            Some(&node_a(60_000)),
        )
        .await
        .unwrap();
    assert_eq!(again, Submitted::Existing(first.execution_id()));
    assert!(claim.is_none(), "the earlier execution keeps its owner");
    assert_eq!(
        store
            .execution(first.execution_id())
            .await
            .unwrap()
            .generation,
        1
    );
}

// ---- damage and refusals (issue 32, points 5, 6 and 9) ----

/// The three ways a claimable row was found damaged: a scope, an outcome and an unknown call
/// this build cannot read.
const DAMAGE: [(&str, &str); 3] = [
    ("scope", "nobody"),
    ("outcome", "exploded"),
    ("unknown_call", "not/a/key"),
];

async fn damage(backend: &Backend, id: ExecutionId, column: &str, value: &str) {
    backend
        .raw(
            &format!("UPDATE executions SET {column} = $1 WHERE id = $2"),
            vec![P::Text(value.into()), P::Id(id.as_uuid())],
        )
        .await;
}

async fn a_damaged_claimable_row_is_handed_back_apart_while_the_others_are_claimed(
    backend: Backend,
) {
    let store = Arc::clone(&backend.store);
    let mut damaged = Vec::new();
    for (column, value) in DAMAGE {
        let id = store
            .submit(new_execution(&keys(), member(), None, b"x"))
            .await
            .unwrap()
            .execution_id();
        damage(&backend, id, column, value).await;
        damaged.push(id);
    }
    let sound = store
        .submit(new_execution(&keys(), member(), None, b"x"))
        .await
        .unwrap()
        .execution_id();
    let claimed = store
        .claim_due("node-a", &["test"], 60_000, 10, now_ms())
        .await
        .unwrap();
    let claims: Vec<ExecutionId> = claimed.claims.iter().map(|c| c.id).collect();
    assert_eq!(
        claims,
        [sound],
        "the sound row is claimed in the same batch"
    );
    let mut apart: Vec<ExecutionId> = claimed.damaged.iter().map(|d| d.id).collect();
    apart.sort_by_key(|id| id.as_uuid());
    damaged.sort_by_key(|id| id.as_uuid());
    assert_eq!(
        apart, damaged,
        "each damaged row comes back, owned by the claim"
    );
    assert!(claimed.damaged.iter().all(|d| d.generation == 1));
    // Owned by this claim: another node's claim does not take them again.
    let again = store
        .claim_due("node-b", &["test"], 60_000, 10, now_ms())
        .await
        .unwrap();
    assert!(again.claims.is_empty() && again.damaged.is_empty());
}

async fn damaged_executions_are_interrupted_and_other_work_runs(backend: Backend) {
    let model = FakeOpenAi::start(vec![Answer::Text(vec!["fine"])]).await;
    let keys = keys();
    let input = turn_input(&model.spec(), None);
    // Submitted before any runner, so the damaged ones are the oldest claimable work.
    let before = engine_on(&backend.store, &keys, "node-a");
    let mut damaged = Vec::new();
    for (column, value) in DAMAGE {
        let id = submit_turn(&before, &input).await;
        damage(&backend, id, column, value).await;
        damaged.push(id);
    }
    let sound = submit_turn(&before, &input).await;
    let engine = running_engine(&backend.store, &keys).await;
    let events = all_events(&engine, sound, 0).await;
    assert!(
        matches!(
            events.last().unwrap().kind,
            EventKind::TurnEnded {
                outcome: TurnOutcome::Completed,
                ..
            }
        ),
        "{events:?}"
    );
    for id in damaged {
        let mut state = None;
        for _ in 0..500 {
            state = backend
                .raw(
                    "SELECT state FROM executions WHERE id = $1",
                    vec![P::Id(id.as_uuid())],
                )
                .await;
            if state.as_deref() == Some("interrupted") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(state.as_deref(), Some("interrupted"), "{id}");
        let reason = backend
            .raw(
                "SELECT reason FROM executions WHERE id = $1",
                vec![P::Id(id.as_uuid())],
            )
            .await
            .unwrap_or_default();
        assert!(reason.contains("can no longer be read"), "{reason}");
        let error_records = backend
            .raw(
                "SELECT CAST(COUNT(*) AS TEXT) FROM error_records WHERE execution_id = $1",
                vec![P::Id(id.as_uuid())],
            )
            .await;
        assert_eq!(error_records.as_deref(), Some("1"), "the cause is sealed");
    }
    engine.shutdown().await;
    before.shutdown().await;
}

async fn a_statement_the_database_refuses_is_invalid_data_not_an_outage(backend: Backend) {
    let store = backend.store;
    let claim = claimed(&store, "node-a").await;
    let taken = keys().seal(Uuid::now_v7(), b"taken").unwrap();
    store.put_sealed(None, taken.clone()).await.unwrap();
    // The result record's ID is taken: the database refuses the row (a unique constraint).
    let commit = Commit {
        calls: vec![call(model_key(1, 1), CallPhase::Done, Some(taken))],
        ..Commit::default()
    };
    let err = store
        .commit(claim.id, claim.generation, commit)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err:?}");
    assert!(!err.is_transient(), "never retried as an outage");
}

async fn reading_an_execution_takes_no_lock(backend: Backend) {
    let claim = claimed(&backend.store, "node-a").await;
    match &backend.db {
        Db::Postgres(url) => {
            // Another transaction holds the row's lock, as an owner's commit does.
            let holder = sqlx::PgPool::connect(url).await.unwrap();
            let mut tx = holder.begin().await.unwrap();
            sqlx::query("SELECT 1 FROM executions WHERE id = $1 FOR UPDATE")
                .bind(claim.id.as_uuid())
                .execute(&mut *tx)
                .await
                .unwrap();
            // And a store whose every transaction is read-only, as on a read replica, where
            // a locking read fails at once.
            let replica_url = format!(
                "{url}{}options=-c%20default_transaction_read_only%3Don%20-c%20lock_timeout%3D2000",
                if url.contains('?') { "&" } else { "?" }
            );
            let replica = PostgresStore::connect(&replica_url, 2, store_keys().0)
                .await
                .unwrap();
            let row = replica.execution(claim.id).await.unwrap();
            assert_eq!(row.generation, claim.generation);
            tx.rollback().await.unwrap();
        }
        Db::Sqlite(_) => {
            // One writer holds the database; a read beside an open write still answers.
            let row = backend.store.execution(claim.id).await.unwrap();
            assert_eq!(row.generation, claim.generation);
        }
    }
}

/// Reading signals failed on a path that never counted its retries: now every storage failure
/// of the program loop goes by the same rules, and damage ends the execution at once.
async fn signals_that_cannot_be_read_interrupt_the_execution_instead_of_looping(backend: Backend) {
    let before = engine_on(&backend.store, &keys(), "node-a");
    let id = submit_sleepy(&before, now_ms() + 3_600_000).await;
    backend.store.signal(id, "wake", "{}").await.unwrap();
    // The signal's row no longer reads as one.
    match &backend.db {
        Db::Sqlite(_) => {
            backend
                .raw(
                    "UPDATE signals SET number = 'not a number' WHERE execution_id = $1",
                    vec![P::Id(id.as_uuid())],
                )
                .await;
        }
        Db::Postgres(_) => {
            for change in [
                "ALTER TABLE signals ALTER COLUMN payload DROP DEFAULT",
                "ALTER TABLE signals ALTER COLUMN payload TYPE bytea USING convert_to(payload, 'UTF8')",
            ] {
                backend.raw(change, Vec::new()).await;
            }
        }
    }
    let engine = sleepy_engine(&backend.store).await;
    let row = wait_for_state(&backend.store, id, ExecutionState::Interrupted).await;
    assert!(
        row.reason
            .as_deref()
            .is_some_and(|r| r.contains("can no longer be read")),
        "{:?}",
        row.reason
    );
    engine.shutdown().await;
    before.shutdown().await;
}

/// A root, its child and grandchild, and a child that already ended.
async fn tree(store: &Arc<dyn Store>) -> (ExecutionId, ExecutionId, ExecutionId, ExecutionId) {
    let keys = keys();
    let submit = |parent: Option<ExecutionId>| {
        let mut new = new_execution(&keys, member(), None, b"x");
        new.parent_id = parent;
        let store = Arc::clone(store);
        async move { store.submit(new).await.unwrap().execution_id() }
    };
    let root = submit(None).await;
    let child = submit(Some(root)).await;
    let grandchild = submit(Some(child)).await;
    let ended = submit(Some(root)).await;
    let claims = store.claim("node-a", &["test"], 60_000, 10).await.unwrap();
    let claim = claims.iter().find(|c| c.id == ended).unwrap();
    store
        .commit(
            ended,
            claim.generation,
            Commit {
                state: Some(StateChange::ended(ExecutionState::Completed)),
                ..Commit::default()
            },
        )
        .await
        .unwrap();
    (root, child, grandchild, ended)
}

async fn cancel_signals(backend: &Backend, id: ExecutionId) -> String {
    backend
        .raw(
            "SELECT CAST(COUNT(*) AS TEXT) FROM signals WHERE execution_id = $1 AND kind = 'cancel'",
            vec![P::Id(id.as_uuid())],
        )
        .await
        .unwrap()
}

async fn a_cancel_reaches_the_whole_open_tree_once_however_often_it_is_asked(backend: Backend) {
    let store = Arc::clone(&backend.store);
    let (root, child, grandchild, ended) = tree(&store).await;
    let first = store.cancel_tree(root, true).await.unwrap();
    let mut reached = first.cancelling.clone();
    reached.sort_by_key(|id| id.as_uuid());
    let mut open = vec![root, child, grandchild];
    open.sort_by_key(|id| id.as_uuid());
    assert_eq!(reached, open, "the open tree, and not the ended child");
    // Asked again (a retried request, a deletion's next look): nothing more is written.
    for _ in 0..5 {
        let again = store.cancel_tree(root, true).await.unwrap();
        assert_eq!(again.root, first.root, "the waiting cancel answers");
    }
    for id in [root, child, grandchild] {
        assert_eq!(cancel_signals(&backend, id).await, "1", "{id}");
        let row = store.execution(id).await.unwrap();
        assert_eq!(row.state, ExecutionState::Cancelling);
    }
    assert_eq!(cancel_signals(&backend, ended).await, "0");
    assert_eq!(
        store.execution(ended).await.unwrap().state,
        ExecutionState::Completed
    );
}

async fn cancelling_the_descendants_of_an_ended_execution_leaves_it_alone(backend: Backend) {
    let store = Arc::clone(&backend.store);
    let (root, child, grandchild, ended) = tree(&store).await;
    assert!(matches!(
        store.cancel_tree(ended, true).await,
        Err(StoreError::Ended(_))
    ));
    let below = store.cancel_tree(root, false).await.unwrap();
    assert_eq!(below.root, None);
    assert_eq!(below.cancelling.len(), 2);
    assert_eq!(cancel_signals(&backend, root).await, "0");
    for id in [child, grandchild] {
        assert_eq!(cancel_signals(&backend, id).await, "1", "{id}");
    }
}

/// F02: a submission's events are written with its input, its execution and its command key,
/// or none of them is: an event the database refuses leaves nothing behind, and the same
/// request later creates its execution afresh.
async fn an_event_that_cannot_be_written_rolls_back_the_input_and_its_execution(backend: Backend) {
    let store = Arc::clone(&backend.store);
    let count = |table: &'static str| {
        let backend = &backend;
        async move {
            backend
                .raw(
                    &format!("SELECT CAST(COUNT(*) AS TEXT) FROM {table}"),
                    Vec::new(),
                )
                .await
                .unwrap()
        }
    };
    let before = (
        count("executions").await,
        count("sealed_records").await,
        count("command_keys").await,
    );
    let refuse = match &backend.db {
        Db::Sqlite(_) => vec![
            "CREATE TRIGGER refuse_events BEFORE INSERT ON events \
             BEGIN SELECT RAISE(ABORT, 'no events today'); END",
        ],
        Db::Postgres(_) => vec![
            "CREATE FUNCTION refuse_events() RETURNS trigger AS $$ BEGIN \
             RAISE EXCEPTION 'no events today'; END $$ LANGUAGE plpgsql",
            "CREATE TRIGGER refuse_events BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION refuse_events()",
        ],
    };
    for statement in refuse {
        backend.raw(statement, Vec::new()).await;
    }
    let new = new_execution(&keys(), member(), Some("req-events"), b"same");
    let id = new.id;
    assert!(store.submit(new).await.is_err());
    assert_eq!(
        (
            count("executions").await,
            count("sealed_records").await,
            count("command_keys").await,
        ),
        before,
        "neither the execution, its input nor its command key stayed"
    );
    assert!(matches!(
        store.execution(id).await,
        Err(StoreError::NotFound(_))
    ));
    backend
        .raw(
            match &backend.db {
                Db::Sqlite(_) => "DROP TRIGGER refuse_events",
                Db::Postgres(_) => "DROP TRIGGER refuse_events ON events",
            },
            Vec::new(),
        )
        .await;
    let again = store
        .submit(new_execution(
            &keys(),
            member(),
            Some("req-events"),
            b"same",
        ))
        .await
        .unwrap();
    assert!(matches!(again, Submitted::Created(_)), "{again:?}");
}
