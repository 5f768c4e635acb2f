//! Multi-process fault tests (F01, F03, F04): real `openbot serve` processes share a real
//! PostgreSQL; owners are killed with SIGKILL or frozen with SIGSTOP; a real HTTP endpoint
//! stands for an outside write and counts what it receives.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/nodes.rs"]
mod nodes;
#[path = "support/outside.rs"]
mod outside;
#[path = "support/pg.rs"]
mod pg;
#[macro_use]
#[path = "support/api.rs"]
#[allow(unused_macros)]
mod api;
#[path = "support/front.rs"]
mod front;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_openai::{Answer, FakeOpenAi};
use front::{Front, tool};
use futures::StreamExt;
use nodes::NodeProcess;
use openbot_core::turn::CallSlot;
use openbot_schema::{Event, EventKind, ExecutionId, ExecutionState, TurnOutcome};
use openbot_server::engine::Engine;
use openbot_server::store::{CallPhase, Store};
use outside::Outside;
use serde_json::json;

/// A database, its shared keys, and an HTTP front (an engine with no runner) that submits
/// through the public API with the owner's token and observes; every execution runs on a
/// node process.
struct Cluster {
    url: String,
    keys_text: String,
    store: Arc<dyn Store>,
    engine: Arc<Engine>,
    front: Front,
}

impl Cluster {
    async fn new() -> Self {
        let front = Front::new().await;
        Self {
            url: front.url.clone(),
            keys_text: front.keys_text.clone(),
            store: Arc::clone(&front.server.database.store),
            engine: Arc::clone(&front.server.engine),
            front,
        }
    }

    fn node(&self, name: &str, fault_point: Option<&str>) -> NodeProcess {
        let env: Vec<(&str, &str)> = fault_point
            .map(|point| ("OPENBOT_FAULT_POINT", point))
            .into_iter()
            .collect();
        self.front.node_with(name, 1000, &env)
    }

    /// A Turn of a new Bot on `model` with the organization's HTTP tool `write` (posting to
    /// `outside`), sent to a new Chat through the API.
    async fn submit(&self, model: &FakeOpenAi, outside: &Outside, retry_safe: bool) -> ExecutionId {
        self.front
            .write_turn(&model.spec(), &outside.url, retry_safe)
            .await
    }

    /// The first child a Turn started.
    async fn first_child(&self, id: ExecutionId) -> ExecutionId {
        let event = self
            .wait_for(id, |e| matches!(e.kind, EventKind::ChildStarted { .. }))
            .await;
        match event.kind {
            EventKind::ChildStarted { child_id, .. } => child_id,
            _ => unreachable!("matched above"),
        }
    }

    /// Every event to the end, checking there is no gap and no duplicate.
    async fn events(&self, id: ExecutionId, within: Duration) -> Vec<Event> {
        let events: Vec<Event> = tokio::time::timeout(
            within,
            self.engine.observe(id, 0).map(|e| e.unwrap()).collect(),
        )
        .await
        .expect("the execution ends in time");
        for (i, event) in events.iter().enumerate() {
            assert_eq!(event.sequence, i as u64 + 1, "no gap, no duplicate");
        }
        events
    }

    async fn wait_for(&self, id: ExecutionId, what: impl Fn(&Event) -> bool) -> Event {
        let mut stream = self.engine.observe(id, 0);
        let mut seen = Vec::new();
        loop {
            let Ok(next) = tokio::time::timeout(Duration::from_secs(30), stream.next()).await
            else {
                let row = self.store.execution(id).await;
                let calls = self.store.calls(id).await;
                let mut admin = sqlx::PgConnection::connect(&self.url).await.unwrap();
                let activity: Vec<(Option<String>, Option<String>, Option<String>)> = sqlx::query_as(
                    "SELECT application_name, state, left(query, 80) FROM pg_stat_activity WHERE datname = current_database()",
                )
                .fetch_all(&mut admin)
                .await
                .unwrap();
                panic!(
                    "timed out; seen {seen:#?}\nexecution {row:#?}\ncalls {calls:#?}\nactivity {activity:#?}"
                );
            };
            let Some(event) = next else {
                panic!("the execution ended first: {seen:#?}")
            };
            let event = event.unwrap();
            if what(&event) {
                return event;
            }
            seen.push(event);
        }
    }
}

fn ended(events: &[Event]) -> Option<TurnOutcome> {
    match events.last()?.kind {
        EventKind::TurnEnded { outcome, .. } => Some(outcome),
        _ => None,
    }
}

fn two_writes() -> Vec<Answer> {
    vec![
        Answer::Tool("write", json!({"text": "a"})),
        Answer::Tool("write", json!({"text": "b"})),
        Answer::Text(vec!["done"]),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f01_another_node_takes_over_a_turn_from_its_saved_step_after_the_owner_is_killed() {
    let cluster = Cluster::new().await;
    let model = FakeOpenAi::start(two_writes()).await;
    let outside = Outside::start(false).await;
    // The second model request hangs, so the owner dies in the middle of the Turn.
    model.delay(1, Duration::from_secs(600));
    let mut owner = cluster.node("f01-owner", None);
    let id = cluster.submit(&model, &outside, false).await;
    cluster
        .wait_for(id, |e| {
            matches!(e.kind, EventKind::ModelStepStarted { step: 2, .. })
        })
        .await;
    assert_eq!(
        outside.received(),
        1,
        "the first write happened before the kill"
    );

    let _other = cluster.node("f01-other", None);
    model.delay(1, Duration::ZERO);
    let killed = Instant::now();
    owner.kill();
    let events = cluster.events(id, Duration::from_secs(60)).await;
    println!("takeover and finish after SIGKILL: {:?}", killed.elapsed());

    assert_eq!(ended(&events), Some(TurnOutcome::Completed));
    assert_eq!(
        outside.received(),
        2,
        "each write reached the endpoint exactly once"
    );
    assert_eq!(
        model.requests_at(0),
        1,
        "the saved first answer was not asked for again"
    );
    assert_eq!(model.requests_at(2), 1);
    let row = cluster.store.execution(id).await.unwrap();
    assert_eq!(row.generation, 2, "one takeover");
    assert_eq!(row.state, ExecutionState::Completed);
    let attempts: Vec<u32> = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::ModelStepStarted { step: 2, attempt } => Some(attempt),
            _ => None,
        })
        .collect();
    assert_eq!(
        attempts,
        [1, 2],
        "the repeated request is a new attempt with its own start event"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f03_a_crash_before_the_send_reruns_the_call_safely() {
    let cluster = Cluster::new().await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "a"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let outside = Outside::start(false).await;
    let mut owner = cluster.node("f03a-owner", Some("after_tool_intent"));
    let id = cluster.submit(&model, &outside, false).await;
    assert!(
        owner.wait_exit(Duration::from_secs(30)),
        "the owner crashed at its fault point"
    );
    assert_eq!(outside.received(), 0);
    let call = cluster
        .store
        .latest_call(id, 1, CallSlot::Tool(0))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(call.phase, CallPhase::Intent, "intent saved, nothing sent");

    let _other = cluster.node("f03a-other", None);
    let events = cluster.events(id, Duration::from_secs(60)).await;
    assert_eq!(ended(&events), Some(TurnOutcome::Completed));
    assert_eq!(outside.received(), 1, "sent once, by the new owner");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f03_a_lost_result_of_an_unsafe_write_waits_in_outcome_unknown_until_a_decision() {
    let cluster = Cluster::new().await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "a"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let outside = Outside::start(false).await;
    let mut owner = cluster.node("f03b-owner", Some("after_tool_sending"));
    let id = cluster.submit(&model, &outside, false).await;
    assert!(owner.wait_exit(Duration::from_secs(30)));

    let _other = cluster.node("f03b-other", None);
    let unknown = cluster
        .wait_for(id, |e| {
            matches!(e.kind, EventKind::CallOutcomeUnknown { .. })
        })
        .await;
    assert!(matches!(
        unknown.kind,
        EventKind::CallOutcomeUnknown { step: 1, .. }
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let row = cluster.store.execution(id).await.unwrap();
    assert_eq!(row.state, ExecutionState::OutcomeUnknown, "it stays there");
    assert_eq!(
        outside.received(),
        0,
        "the maybe-sent write was not repeated"
    );

    // The decision, through the API: the write is known to have happened, with this result.
    cluster
        .front
        .decide_outcome(
            id,
            json!({"call": "1/tool:0/1", "decision": "applied", "result": "written by hand"}),
        )
        .await;
    let events = cluster.events(id, Duration::from_secs(60)).await;
    assert_eq!(ended(&events), Some(TurnOutcome::Completed));
    assert_eq!(outside.received(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f03_a_lost_result_of_a_safe_write_is_sent_again_under_the_same_key() {
    let cluster = Cluster::new().await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "a"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let outside = Outside::start(true).await;
    // The owner dies after the endpoint received the write and before it saved the answer.
    outside.hold().await;
    let mut owner = cluster.node("f03c-owner", None);
    let id = cluster.submit(&model, &outside, true).await;
    outside.wait_for_write().await;
    owner.kill();
    outside.release();
    let _other = cluster.node("f03c-other", None);
    let events = cluster.events(id, Duration::from_secs(60)).await;
    assert_eq!(ended(&events), Some(TurnOutcome::Completed));
    assert_eq!(outside.received(), 2, "sent again");
    assert_eq!(
        outside.applied(),
        1,
        "under the same idempotency key, so applied once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f03_a_crash_after_the_result_was_saved_never_sends_again() {
    let cluster = Cluster::new().await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "a"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let outside = Outside::start(false).await;
    let mut owner = cluster.node("f03d-owner", Some("after_tool_result"));
    let id = cluster.submit(&model, &outside, false).await;
    assert!(owner.wait_exit(Duration::from_secs(30)));
    let _other = cluster.node("f03d-other", None);
    let events = cluster.events(id, Duration::from_secs(60)).await;
    assert_eq!(ended(&events), Some(TurnOutcome::Completed));
    assert_eq!(outside.received(), 1, "the saved result was reused");
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::ToolResult { .. }))
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f03_a_frozen_owners_late_result_is_saved_not_published() {
    let cluster = Cluster::new().await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "a"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let outside = Outside::start(false).await;
    outside.hold().await;
    // Named in pg_stat_activity, so its own connections can be cut.
    let owner = NodeProcess::start(
        &format!("{}?application_name=f03e-owner", cluster.url),
        &cluster.keys_text,
        "f03e-owner",
        1000,
        None,
    );
    let id = cluster.submit(&model, &outside, false).await;
    outside.wait_for_write().await;
    owner.pause();

    let _other = cluster.node("f03e-other", None);
    cluster
        .wait_for(id, |e| {
            matches!(e.kind, EventKind::CallOutcomeUnknown { .. })
        })
        .await;
    assert_eq!(cluster.store.execution(id).await.unwrap().generation, 2);
    // The frozen owner's database connections are terminated while it sleeps, as a server
    // does with a client that stopped answering: it must come back on new ones.
    let admin = sqlx::PgPool::connect(&cluster.url).await.unwrap();
    let cut: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = 'f03e-owner') t",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    assert!(cut > 0, "the owner had connections to cut");
    admin.close().await;

    // The old owner wakes up and gets its answer: too late to publish, kept in the call log,
    // and the execution that waited for exactly this result goes on with it.
    outside.release();
    owner.resume();
    let events = cluster.events(id, Duration::from_secs(60)).await;
    assert_eq!(ended(&events), Some(TurnOutcome::Completed));
    let call = cluster
        .store
        .latest_call(id, 1, CallSlot::Tool(0))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(call.phase, CallPhase::Done);
    assert!(call.late, "saved as a late result");
    assert_eq!(call.generation, 1, "by the old owner");
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::ToolResult { .. }))
            .count(),
        0,
        "never published"
    );
    assert_eq!(outside.received(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f04_a_slow_reader_passes_128_events_without_loss() {
    let cluster = Cluster::new().await;
    let mut script: Vec<Answer> = (0..45)
        .map(|_| Answer::Tool("write", json!({"text": "x"})))
        .collect();
    script.push(Answer::Text(vec!["done"]));
    let model = FakeOpenAi::start(script).await;
    let outside = Outside::start(false).await;
    let _node = cluster.node("f04a-node", None);
    let id = cluster.submit(&model, &outside, false).await;
    let mut stream = cluster.engine.observe(id, 0);
    let mut expected = 1;
    while let Some(event) = tokio::time::timeout(Duration::from_secs(60), stream.next())
        .await
        .unwrap()
    {
        let event = event.unwrap();
        assert_eq!(event.sequence, expected);
        expected += 1;
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    let read = expected - 1;
    assert!(read >= 128, "read {read} events");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f04_readers_get_every_event_after_the_listen_connections_are_killed() {
    let cluster = Cluster::new().await;
    let mut script: Vec<Answer> = (0..10)
        .map(|_| Answer::Tool("write", json!({"text": "x"})))
        .collect();
    script.push(Answer::Text(vec!["done"]));
    let model = FakeOpenAi::start(script).await;
    model.piece_delay(Duration::from_millis(40));
    let outside = Outside::start(false).await;
    let _node = cluster.node("f04b-node", None);
    let id = cluster.submit(&model, &outside, false).await;
    let reader = {
        let stream = cluster.engine.observe(id, 0);
        tokio::spawn(async move { stream.map(|e| e.unwrap()).collect::<Vec<Event>>().await })
    };
    cluster
        .wait_for(id, |e| {
            matches!(e.kind, EventKind::ToolResult { step: 3, .. })
        })
        .await;
    let mut admin = sqlx::PgConnection::connect(&cluster.url).await.unwrap();
    let killed: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE query ILIKE 'LISTEN%' AND pg_terminate_backend(pid)",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert!(!killed.is_empty(), "a LISTEN connection was killed");
    let events = tokio::time::timeout(Duration::from_secs(60), reader)
        .await
        .unwrap()
        .unwrap();
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.sequence, i as u64 + 1);
    }
    assert_eq!(ended(&events), Some(TurnOutcome::Completed));
    let stored = cluster.store.execution(id).await.unwrap().last_sequence;
    assert_eq!(
        events.len() as i64,
        stored,
        "every event reached the reader"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f04_two_readers_in_two_processes_read_from_their_cursors() {
    let cluster = Cluster::new().await;
    let model = FakeOpenAi::start(two_writes()).await;
    model.piece_delay(Duration::from_millis(20));
    let outside = Outside::start(false).await;
    let _node = cluster.node("f04c-node", None);
    let id = cluster.submit(&model, &outside, false).await;
    let read = |after: u64| {
        let url = cluster.url.clone();
        let keys = cluster.keys_text.clone();
        tokio::task::spawn_blocking(move || {
            let output = std::process::Command::new(env!("CARGO_BIN_EXE_openbot"))
                .args([
                    "admin",
                    "--database-url",
                    &url,
                    "events",
                    &id.to_string(),
                    "--after",
                    &after.to_string(),
                ])
                // The events are sealed: reading them needs the deployment's keys.
                .env("OPENBOT_SEAL_KEYS", &keys)
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            String::from_utf8(output.stdout)
                .unwrap()
                .lines()
                .map(|line| serde_json::from_str::<Event>(line).unwrap())
                .collect::<Vec<Event>>()
        })
    };
    let (from_start, from_three) = tokio::join!(read(0), read(3));
    let (from_start, from_three) = (from_start.unwrap(), from_three.unwrap());
    assert_eq!(ended(&from_start), Some(TurnOutcome::Completed));
    assert_eq!(from_start[0].sequence, 1);
    assert_eq!(from_three[0].sequence, 4);
    assert_eq!(
        from_start[3..],
        from_three[..],
        "both saw the same log from their cursors"
    );
}

use sqlx::Connection as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_tools_result_is_delivered_once_after_its_owner_is_killed() {
    let cluster = Cluster::new().await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "a"})),
        Answer::Text(vec!["started"]),
    ])
    .await;
    let outside = Outside::start(true).await;
    outside.hold().await;
    let mut owner = cluster.node("bg-owner", None);
    cluster.front.put_write_tool(&outside.url, true, true).await;
    let bot = cluster
        .front
        .create_bot(json!({"name": "Writer", "model": model.spec(), "tools": [tool("write")]}))
        .await;
    let (chat, turn) = cluster.front.start_turn(&bot).await;
    let job = cluster.first_child(turn).await;
    assert_eq!(
        ended(&cluster.events(turn, Duration::from_secs(60)).await),
        Some(TurnOutcome::Completed)
    );
    // The owner dies while the background call is in flight.
    outside.wait_for_write().await;
    owner.kill();
    outside.release();
    let _other = cluster.node("bg-other", None);
    let events = cluster.events(job, Duration::from_secs(60)).await;
    assert!(
        matches!(
            events.last().unwrap().kind,
            EventKind::JobEnded {
                state: ExecutionState::Completed
            }
        ),
        "{events:?}"
    );
    assert_eq!(outside.applied(), 1, "the write was applied once");
    let notices = cluster.store.chat_notices(chat).await.unwrap();
    assert_eq!(notices.len(), 1, "the result reached the Chat once");
    assert_eq!(notices[0].source_id, job);
    assert_eq!(
        cluster.store.execution(job).await.unwrap().generation,
        2,
        "one takeover"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_step_limit_is_not_reset_by_a_takeover() {
    let cluster = Cluster::new().await;
    let parent = FakeOpenAi::start(vec![
        Answer::Tool("helper", json!({"task": "write"})),
        Answer::Text(vec!["waiting"]),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let child = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"n": 1})),
        Answer::Tool("write", json!({"n": 2})),
        Answer::Tool("write", json!({"n": 3})),
        Answer::Text(vec!["wrote three"]),
    ])
    .await;
    let outside = Outside::start(true).await;
    cluster
        .front
        .put_write_tool(&outside.url, true, false)
        .await;
    let helper = cluster
        .front
        .create_bot(json!({"name": "Helper", "model": child.spec(), "tools": [tool("write")]}))
        .await;
    cluster.front.put_delegate("helper", &helper).await;
    // The parent's limit is the child's too.
    let bot = cluster
        .front
        .create_bot(
            json!({"name": "Parent", "model": parent.spec(), "tools": [tool("helper")],
            "limits": {"max_steps": 2}}),
        )
        .await;
    // The child's second write is held; its owner dies then.
    child.delay(1, Duration::ZERO);
    let mut owner = cluster.node("limit-owner", None);
    let (_, turn) = cluster.front.start_turn(&bot).await;
    let kid = cluster.first_child(turn).await;
    cluster
        .wait_for(kid, |e| {
            matches!(e.kind, EventKind::ToolResult { step: 1, .. })
        })
        .await;
    outside.hold().await;
    outside.wait_for_write().await;
    owner.kill();
    outside.release();
    let _other = cluster.node("limit-other", None);
    let kid_events = cluster.events(kid, Duration::from_secs(60)).await;
    assert_eq!(
        ended(&kid_events),
        Some(TurnOutcome::MaxSteps),
        "{kid_events:?}"
    );
    assert_eq!(
        outside.applied(),
        2,
        "two steps in all, across the takeover"
    );
    assert!(
        cluster.store.execution(kid).await.unwrap().generation >= 2,
        "taken over"
    );
    let parent_events = cluster.events(turn, Duration::from_secs(60)).await;
    assert_eq!(
        ended(&parent_events),
        Some(TurnOutcome::MaxSteps),
        "the parent's own limit holds too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_run_killed_midway_replays_its_saved_call_on_another_node() {
    let cluster = Cluster::new().await;
    // The first write, then about a second of computing, then the second write: the owner is
    // killed while it computes, after the first write's result was saved.
    let code = "const a = await tools.write({text: 'a'}); let n = 0; \
                for (let i = 0; i < 2000000; i++) { n += i % 7; } \
                const b = await tools.write({text: 'b'}); return [a, b, n > 0];";
    let model = FakeOpenAi::start(vec![
        Answer::Tool("run_code", json!({"code": code})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let outside = Outside::start(false).await;
    cluster
        .front
        .put_write_tool(&outside.url, false, false)
        .await;
    let bot = cluster
        .front
        .create_bot(
            json!({"name": "Coder", "model": model.spec(), "tools": [tool("write")],
            "code_mode": true}),
        )
        .await;
    let mut owner = cluster.node("code-owner", None);
    let (_, id) = cluster.front.start_turn(&bot).await;
    outside.wait_for_writes(1).await;
    let first = CallSlot::Code { tool: 0, call: 0 };
    for _ in 0..200 {
        let saved = cluster.store.latest_call(id, 1, first).await.unwrap();
        if saved.is_some_and(|c| c.phase == CallPhase::Done) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    owner.kill();
    assert_eq!(outside.received(), 1, "killed before the second write");

    let _other = cluster.node("code-other", None);
    let events = cluster.events(id, Duration::from_secs(60)).await;
    assert_eq!(ended(&events), Some(TurnOutcome::Completed));
    let results: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult { result, .. } => {
                Some(format!("{}: {:?}", result.name, result.output))
            }
            EventKind::CallOutcomeUnknown { .. } => Some(format!("{:?}", e.kind)),
            _ => None,
        })
        .collect();
    assert_eq!(
        outside.received(),
        2,
        "the saved write was replayed, not sent again: {results:?}"
    );
    let row = cluster.store.execution(id).await.unwrap();
    assert_eq!(row.generation, 2, "one takeover");
    let code_call = cluster
        .store
        .latest_call(id, 1, CallSlot::Tool(0))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(code_call.phase, CallPhase::Done);
    assert_eq!(
        code_call.generation, 2,
        "the run's result was saved by the new owner"
    );
}

/// A request with the session `cookie`, from the page of `base` (its own origin, as a browser
/// sends it).
fn with_cookie(
    method: reqwest::Method,
    base: &str,
    path: &str,
    cookie: &str,
) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .header("cookie", cookie)
        .header("origin", base)
}

fn bot_spec(
    name: &str,
    model: String,
    tools: Vec<openbot_schema::ToolDefinition>,
) -> openbot_schema::BotSpec {
    openbot_schema::BotSpec {
        name: name.into(),
        instructions: String::new(),
        model,
        tools,
        limits: Default::default(),
        shared: false,
        memory: false,
        reminders: false,
        code_mode: false,
    }
}

/// Starts a Chat of `bot` and sends to it with the session `cookie` on the node at `base`,
/// then cancels the Turn there; every event of the Turn.
async fn send_and_cancel_with_cookie(
    cluster: &Cluster,
    base: &str,
    cookie: &str,
    bot: openbot_schema::BotId,
) -> Vec<Event> {
    let created = with_cookie(reqwest::Method::POST, base, "/v1/chats", cookie)
        .json(&json!({"bot_id": bot}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let chat: serde_json::Value = created.json().await.unwrap();
    let sent = with_cookie(
        reqwest::Method::POST,
        base,
        &format!("/v1/chats/{}/messages", chat["id"].as_str().unwrap()),
        cookie,
    )
    .json(&json!({"content": [{"type": "text", "text": "wait"}], "command_key": "a01-cookie"}))
    .send()
    .await
    .unwrap();
    let sent: serde_json::Value = api::receipt(sent).await;
    let id: ExecutionId = sent["execution_id"].as_str().unwrap().parse().unwrap();
    cluster
        .wait_for(id, |e| matches!(e.kind, EventKind::ModelStepStarted { .. }))
        .await;
    let cancel = with_cookie(
        reqwest::Method::POST,
        base,
        &format!("/v1/executions/{id}/cancel"),
        cookie,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(cancel.status(), 202, "{}", cancel.text().await.unwrap());
    cluster.events(id, Duration::from_secs(60)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a01_a_client_fails_over_to_another_complete_server_and_everything_finishes_once() {
    use openbot_core::{ConnectOptions, connect};
    use openbot_schema::{ApprovalState, DecideApproval, Decision, SendInput};

    let cluster = Cluster::new().await;
    let outside = Outside::start(false).await;
    // The Turn's write waits for approval; its second model step hangs on the first node only.
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "a"})),
        Answer::Text(vec!["asked"]),
    ])
    .await;
    model.delay_first(1, Duration::from_secs(600));
    let slow = FakeOpenAi::start(vec![Answer::Text(vec!["late"])]).await;
    slow.delay(0, Duration::from_secs(600));
    cluster
        .front
        .put_write_tool(&outside.url, false, false)
        .await;
    let rule = cluster
        .front
        .server
        .post("/v1/approval-rules", cluster.front.token())
        .json(&json!({"tool": "write", "action": "ask"}))
        .send()
        .await
        .unwrap();
    assert_eq!(rule.status(), 201, "{}", rule.text().await.unwrap());

    let (a_addr, b_addr) = (NodeProcess::free_address(), NodeProcess::free_address());
    let (a, b) = (format!("http://{a_addr}"), format!("http://{b_addr}"));
    let mut node_a = cluster.front.node_at("a01-a", 1000, &a_addr, &[]);
    let _node_b = cluster.front.node_at("a01-b", 1000, &b_addr, &[]);
    NodeProcess::wait_ready(&a).await;
    NodeProcess::wait_ready(&b).await;
    let client = connect(
        &format!("{a},{b}"),
        ConnectOptions {
            token: Some(cluster.front.token().to_string()),
            ..ConnectOptions::default()
        },
    )
    .await
    .unwrap();
    let write: openbot_schema::ToolDefinition = serde_json::from_value(tool("write")).unwrap();

    // On node A: a session cookie, and a Turn sent with the token and observed.
    let started = reqwest::Client::new()
        .post(format!("{a}/v1/sessions"))
        .bearer_auth(cluster.front.token())
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 201);
    let cookie = started.headers()["set-cookie"].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_string();
    let bot = client
        .create_bot(bot_spec("Writer", model.spec(), vec![write]))
        .await
        .unwrap();
    let chat = client.create_chat(bot.id).await.unwrap();
    let input = SendInput::text("go").with_command_key("a01-turn");
    let receipt = client.send(chat.id, input.clone()).await.unwrap();
    let mut stream = client.observe(receipt.execution_id, 0).await.unwrap();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event.unwrap();
        let hanging = matches!(event.kind, EventKind::ModelStepStarted { step: 2, .. });
        events.push(event);
        if hanging {
            break;
        }
    }
    assert!(
        events
            .iter()
            .any(|e| matches!(e.kind, EventKind::ApprovalRequested { .. })),
        "{events:#?}"
    );

    node_a.kill();

    // The same stream goes on from its cursor on node B, which takes the Turn over.
    while let Some(event) = stream.next().await {
        events.push(event.unwrap());
    }
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.sequence, i as u64 + 1, "no gap, no duplicate");
    }
    assert_eq!(ended(&events), Some(TurnOutcome::Completed), "{events:#?}");
    assert_eq!(model.requests_at(0), 1, "the saved first answer is reused");
    // The same command key on another node is the same input, not a second Turn.
    let again = client.send(chat.id, input).await.unwrap();
    assert_eq!(again.execution_id, receipt.execution_id);

    // Approving goes to node B; the approved write runs there, once.
    let pending = client
        .list_approvals(Some(ApprovalState::Pending))
        .await
        .unwrap();
    assert_eq!(pending.len(), 1);
    let decided = client
        .decide_approval(
            pending[0].id,
            DecideApproval {
                decision: Decision::Approve,
                reason: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(decided.state, ApprovalState::Approved);
    cluster
        .events(pending[0].execution_id, Duration::from_secs(60))
        .await;
    let job = cluster
        .store
        .execution(pending[0].execution_id)
        .await
        .unwrap();
    assert_eq!(job.state, ExecutionState::Completed);
    assert_eq!(outside.received(), 1, "the approved write ran once");

    // The session cookie made on node A works on node B: send, then cancel.
    let slow_bot = client
        .create_bot(bot_spec("Slow", slow.spec(), vec![]))
        .await
        .unwrap();
    let cancelled = send_and_cancel_with_cookie(&cluster, &b, &cookie, slow_bot.id).await;
    assert_eq!(ended(&cancelled), Some(TurnOutcome::Cancelled));

    let row = cluster.store.execution(receipt.execution_id).await.unwrap();
    assert_eq!(row.generation, 2, "one takeover");
    assert_eq!(outside.received(), 1, "no write repeated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a02_a_database_cut_at_a_chat_checkpoint_keeps_one_result_one_turn_one_event_set() {
    let cluster = Cluster::new().await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("write", json!({"text": "a"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let outside = Outside::start(false).await;
    let dir = tempfile::tempdir().unwrap();
    let release = dir.path().join("release");
    let held = dir.path().join("release.held");
    // The node's connections are named, so that exactly they can be cut.
    let url = format!("{}?application_name=a02-node", cluster.url);
    let objects = cluster
        .front
        .server
        .objects
        .path()
        .to_string_lossy()
        .to_string();
    let release_text = release.to_string_lossy().to_string();
    let _node = NodeProcess::start_at(
        &url,
        &cluster.keys_text,
        "a02-node",
        1000,
        "127.0.0.1:0",
        &[
            ("OPENBOT_OBJECTS_DIR", objects.as_str()),
            ("OPENBOT_FAULT_POINT", "hold:answer"),
            ("OPENBOT_FAULT_RELEASE", release_text.as_str()),
        ],
    );
    let id = cluster.submit(&model, &outside, false).await;
    // The node stops just after it saved the model's first answer (a Chat checkpoint).
    let deadline = Instant::now() + Duration::from_secs(30);
    while !held.exists() {
        assert!(
            Instant::now() < deadline,
            "the checkpoint was never reached"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut admin = sqlx::PgConnection::connect(&cluster.url).await.unwrap();
    let cut: i64 = sqlx::query_scalar(
        // Materialized first: the filter must run before any backend is terminated.
        "WITH named AS MATERIALIZED (SELECT pid FROM pg_stat_activity WHERE application_name = 'a02-node') SELECT count(*) FROM named WHERE pg_terminate_backend(pid)",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert!(cut > 0, "the live node's connections were cut");
    std::fs::write(&release, b"go").unwrap();

    let events = cluster.events(id, Duration::from_secs(60)).await;
    assert_eq!(ended(&events), Some(TurnOutcome::Completed), "{events:#?}");
    let ends = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::TurnEnded { .. }))
        .count();
    assert_eq!(ends, 1, "one event set");
    assert_eq!(
        model.requests_at(0),
        1,
        "one saved model result, never asked again"
    );
    assert_eq!(outside.received(), 1, "the write was sent once");
    let row = cluster.store.execution(id).await.unwrap();
    let turns: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM executions WHERE chat_id = (SELECT chat_id FROM executions WHERE id = $1)",
    )
    .bind(id.as_uuid())
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(turns, 1, "one Turn: {row:?}");
}
