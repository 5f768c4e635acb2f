//! The crash-point matrix (issue 13, point 6): a standard Turn (one tool step, then a text
//! step) runs on a real `openbot serve` process that is killed at every commit boundary of
//! the durable host, before and after each commit, after the tool was sent and before its
//! result was saved, and after a commit whose reply was lost; a second process takes over.
//! Each point has the one outcome the spec allows, checked here:
//!
//! - no lost or repeated event: sequences 1..n without a gap, each event once;
//! - an unsafe write reaches the outside at most once, and the Turn waits in
//!   `outcome_unknown` exactly when the call may have been sent and its result was not saved;
//! - a retry-safe write whose result was not saved after it was sent is sent again under the
//!   same idempotency key (applied once);
//! - a lost reply is found by its owner: nothing is written twice, nothing is asked again;
//! - the Turn ends completed, with its final text once.
//!
//! The points are not listed by hand: a first run of the same Turn logs the labels of each
//! commit (`OPENBOT_FAULT_LOG`, see `server/src/turns/faults.rs`), and the matrix is made from
//! them, so it follows the commits as they change.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "support/nodes.rs"]
mod nodes;
#[path = "support/outside.rs"]
mod outside;
#[path = "support/pg.rs"]
mod pg;
#[path = "support/served.rs"]
mod served;
#[macro_use]
#[path = "support/api.rs"]
#[allow(unused_macros)]
mod api;
#[path = "support/front.rs"]
mod front;

use std::sync::Arc;
use std::time::Duration;

use fake_openai::{Answer, FakeOpenAi};
use front::Front;
use futures::StreamExt;
use nodes::NodeProcess;
use openbot_schema::{Event, EventKind, ExecutionId, ExecutionState, Message, TurnOutcome};
use openbot_server::engine::Engine;
use openbot_server::store::Store;
use outside::Outside;
use serde_json::json;

/// The lease of the nodes: short, so a takeover after a kill comes soon.
const LEASE_MS: u64 = 1000;
/// How many points run at once (each on a database and processes of its own).
const AT_ONCE: usize = 3;
/// The final text of the standard Turn.
const FINAL_TEXT: &str = "done";

/// A database, its shared keys, and an HTTP front (an engine with no runner) that submits
/// through the public API with the owner's token and observes.
struct Cluster {
    store: Arc<dyn Store>,
    engine: Arc<Engine>,
    front: Front,
}

impl Cluster {
    async fn new() -> Self {
        let front = Front::new().await;
        Self {
            store: Arc::clone(&front.server.database.store),
            engine: Arc::clone(&front.server.engine),
            front,
        }
    }

    fn node(&self, name: &str, env: &[(&str, &str)]) -> NodeProcess {
        self.front.node_with(name, LEASE_MS, env)
    }

    /// The standard Turn: a new Bot with the organization's HTTP tool `write` (posting to
    /// `outside`), sent "go" in a new Chat through the API.
    async fn submit(&self, model: &FakeOpenAi, outside: &Outside, retry_safe: bool) -> ExecutionId {
        self.front
            .write_turn(&model.spec(), &outside.url, retry_safe)
            .await
    }

    /// The first event that matches, within 60 s.
    async fn wait_for(&self, id: ExecutionId, what: impl Fn(&Event) -> bool) -> Event {
        let mut stream = self.engine.observe(id, 0);
        loop {
            let next = tokio::time::timeout(Duration::from_secs(60), stream.next())
                .await
                .expect("the awaited event comes in time")
                .expect("the execution goes on until the awaited event")
                .unwrap();
            if what(&next) {
                return next;
            }
        }
    }

    /// Every event to the end, checking sequences 1..n with no gap and no duplicate, and that
    /// the log holds exactly these.
    async fn events(&self, id: ExecutionId) -> Vec<Event> {
        let events: Vec<Event> = tokio::time::timeout(
            Duration::from_secs(60),
            self.engine.observe(id, 0).map(|e| e.unwrap()).collect(),
        )
        .await
        .expect("the execution ends in time");
        for (i, event) in events.iter().enumerate() {
            assert_eq!(event.sequence, i as u64 + 1, "no gap, no duplicate");
        }
        let stored = self.store.execution(id).await.unwrap().last_sequence;
        assert_eq!(events.len() as i64, stored, "every committed event once");
        events
    }

    /// The messages the Turn saved for its Chat's history.
    async fn output(&self, id: ExecutionId) -> Vec<Message> {
        let record = self
            .store
            .execution(id)
            .await
            .unwrap()
            .output_record
            .expect("an ended Turn saves its messages");
        self.engine.context().open_json(record).await.unwrap()
    }
}

fn script() -> Vec<Answer> {
    vec![
        Answer::Tool("write", json!({"text": "a"})),
        Answer::Text(vec![FINAL_TEXT]),
    ]
}

/// The labels of each commit of a standard Turn, in order, from a run with the fault log.
async fn commit_labels(retry_safe: bool) -> Vec<Vec<String>> {
    let cluster = Cluster::new().await;
    let model = FakeOpenAi::start(script()).await;
    let outside = Outside::start(retry_safe).await;
    let log = tempfile::NamedTempFile::new().unwrap();
    let log_path = log.path().to_str().unwrap().to_string();
    let name = format!(
        "matrix-labels-{}",
        if retry_safe { "safe" } else { "unsafe" }
    );
    let mut node = cluster.node(&name, &[("OPENBOT_FAULT_LOG", &log_path)]);
    let id = cluster.submit(&model, &outside, retry_safe).await;
    let events = cluster.events(id).await;
    assert!(matches!(
        events.last().unwrap().kind,
        EventKind::TurnEnded {
            outcome: TurnOutcome::Completed,
            ..
        }
    ));
    node.stop();
    std::fs::read_to_string(log.path())
        .unwrap()
        .lines()
        .map(|line| line.split('+').map(str::to_string).collect())
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Before,
    After,
    LostReply,
    /// After the tool was sent and answered, before its result is saved.
    AfterSent,
}

/// One point of the matrix.
#[derive(Debug, Clone)]
struct Point {
    /// The value of `OPENBOT_FAULT_POINT`.
    name: String,
    stage: Stage,
    /// The commit it names (its index in the Turn's commits); none for `AfterSent`.
    commit: Option<usize>,
}

/// Every point of a Turn with these commits: before, after and a lost reply of each commit,
/// named by its labels (and which such commit, when an earlier one carries them too), and the
/// point between the tool's send and its result.
fn points(commits: &[Vec<String>]) -> Vec<Point> {
    let mut points = Vec::new();
    for (i, labels) in commits.iter().enumerate() {
        let carries = |other: &Vec<String>| labels.iter().all(|l| other.contains(l));
        let occurrence = commits[..=i].iter().filter(|c| carries(c)).count();
        let mut label = labels.join("+");
        if occurrence > 1 {
            label = format!("{label}#{occurrence}");
        }
        for (stage, word) in [
            (Stage::Before, "before"),
            (Stage::After, "after"),
            (Stage::LostReply, "lost_reply"),
        ] {
            points.push(Point {
                name: format!("{word}:{label}"),
                stage,
                commit: Some(i),
            });
        }
    }
    points.push(Point {
        name: "after_tool_sent".into(),
        stage: Stage::AfterSent,
        commit: None,
    });
    points
}

/// What the one allowed outcome of a point is.
#[derive(Debug, PartialEq, Eq)]
struct Expected {
    /// The owner dies at the point (every point but a lost reply).
    crashes: bool,
    /// The Turn waits in `outcome_unknown` for a decision.
    unknown: bool,
    /// Writes the outside received.
    received: u32,
}

fn expected(commits: &[Vec<String>], point: &Point, retry_safe: bool) -> Expected {
    let carrying = |label: &str| {
        commits
            .iter()
            .position(|c| c.iter().any(|l| l == label))
            .unwrap_or_else(|| panic!("a commit carries {label}: {commits:?}"))
    };
    let sending = carrying("tool_sending");
    let result = carrying("tool_result");
    if point.stage == Stage::LostReply {
        return Expected {
            crashes: false,
            unknown: false,
            received: 1,
        };
    }
    // The commits that landed before the crash, and whether the tool had been sent.
    let (landed, sent) = match (point.stage, point.commit) {
        (Stage::AfterSent, _) => (result, true),
        (Stage::Before, Some(i)) => (i, i > sending),
        (Stage::After, Some(i)) => (i + 1, i > sending),
        _ => unreachable!("every other point names a commit"),
    };
    let result_saved = landed > result;
    let sending_saved = landed > sending;
    let maybe_sent = sending_saved && !result_saved;
    let (unknown, received) = if result_saved || !maybe_sent {
        (false, 1)
    } else if retry_safe {
        // Sent again under the same key; a call that never left is sent once.
        (false, if sent { 2 } else { 1 })
    } else {
        (true, u32::from(sent))
    };
    Expected {
        crashes: true,
        unknown,
        received,
    }
}

/// Runs one point and checks its outcome.
#[allow(clippy::too_many_lines)] // each allowed outcome of a point checked in turn
async fn run_point(point: Point, expect: Expected, retry_safe: bool) -> String {
    let cluster = Cluster::new().await;
    let model = FakeOpenAi::start(script()).await;
    let outside = Outside::start(retry_safe).await;
    let tag = format!(
        "{}-{}",
        if retry_safe { "safe" } else { "unsafe" },
        point.name.replace([':', '+', '#'], "-")
    );
    let mut owner = cluster.node(
        &format!("matrix-{tag}-owner"),
        &[("OPENBOT_FAULT_POINT", &point.name)],
    );
    let id = cluster.submit(&model, &outside, retry_safe).await;
    let _other = if expect.crashes {
        assert!(
            owner.wait_exit(Duration::from_secs(30)),
            "{}: the owner crashed at the point",
            point.name
        );
        Some(cluster.node(&format!("matrix-{tag}-other"), &[]))
    } else {
        None
    };
    let first = cluster
        .wait_for(id, |e| {
            matches!(
                e.kind,
                EventKind::CallOutcomeUnknown { .. } | EventKind::TurnEnded { .. }
            )
        })
        .await;
    let unknown = matches!(first.kind, EventKind::CallOutcomeUnknown { .. });
    assert_eq!(unknown, expect.unknown, "{}: outcome_unknown", point.name);
    if unknown {
        assert!(matches!(
            first.kind,
            EventKind::CallOutcomeUnknown { step: 1, .. }
        ));
        let row = cluster.store.execution(id).await.unwrap();
        assert_eq!(row.state, ExecutionState::OutcomeUnknown, "{}", point.name);
        assert_eq!(
            outside.received(),
            expect.received,
            "{}: the maybe-sent write was not repeated",
            point.name
        );
        // The decision, through the API: the write happened, with this result.
        cluster
            .front
            .decide_outcome(
                id,
                json!({"call": "1/tool:0/1", "decision": "applied", "result": "written, as decided"}),
            )
            .await;
    }

    let events = cluster.events(id).await;
    let ends: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::TurnEnded { .. }))
        .collect();
    assert_eq!(ends.len(), 1, "{}: one end", point.name);
    assert!(
        matches!(
            events.last().unwrap().kind,
            EventKind::TurnEnded {
                outcome: TurnOutcome::Completed,
                ..
            }
        ),
        "{}: completed: {events:?}",
        point.name
    );
    assert_eq!(
        outside.received(),
        expect.received,
        "{}: writes received",
        point.name
    );
    if retry_safe {
        assert_eq!(outside.applied(), 1, "{}: applied once", point.name);
        assert_eq!(
            outside.keys().len(),
            1,
            "{}: every send under the same key",
            point.name
        );
    }
    let count = |what: fn(&EventKind) -> bool| events.iter().filter(|e| what(&e.kind)).count();
    assert_eq!(
        count(|k| matches!(k, EventKind::ToolCall { .. })),
        1,
        "{}: the tool call published once",
        point.name
    );
    assert!(
        count(|k| matches!(k, EventKind::ToolResult { .. })) <= 1,
        "{}: the tool result published at most once",
        point.name
    );
    // The text of the attempt that ended the Turn is the final text, once.
    let last_attempt = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::ModelStepStarted { step: 2, attempt } => Some(attempt),
            _ => None,
        })
        .max()
        .expect("step 2 started");
    let text: String = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TextDelta {
                step: 2,
                attempt,
                text,
            } if *attempt == last_attempt => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, FINAL_TEXT, "{}: the final text", point.name);
    let answers: Vec<Message> = cluster
        .output(id)
        .await
        .into_iter()
        .filter(|m| matches!(m, Message::Assistant { .. }))
        .collect();
    assert_eq!(
        answers.len(),
        2,
        "{}: two answers in the Turn's messages",
        point.name
    );
    assert_eq!(
        answers[1].text(),
        FINAL_TEXT,
        "{}: the final text once",
        point.name
    );
    if point.stage == Stage::LostReply {
        // The owner found its own commit: nothing asked again, nothing sent again.
        assert_eq!(
            count(|k| matches!(k, EventKind::ModelStepStarted { .. })),
            2,
            "{}: one model attempt per step",
            point.name
        );
        assert_eq!(model.requests_at(0), 1, "{}", point.name);
        assert_eq!(model.requests_at(1), 1, "{}", point.name);
        assert_eq!(
            cluster.store.execution(id).await.unwrap().generation,
            1,
            "{}: no takeover",
            point.name
        );
    }
    format!("{}: {expect:?}", point.name)
}

async fn matrix(retry_safe: bool) {
    let commits = commit_labels(retry_safe).await;
    println!("commits of the standard Turn: {commits:?}");
    let cases: Vec<(Point, Expected)> = points(&commits)
        .into_iter()
        .map(|point| {
            let expect = expected(&commits, &point, retry_safe);
            (point, expect)
        })
        .collect();
    // The matrix covers what the spec cares about: at least one point that loses a sent
    // result (unknown for an unsafe write, sent again for a safe one).
    assert!(
        cases.iter().any(|(_, e)| e.unknown || e.received == 2),
        "the matrix has a point between a send and its saved result"
    );
    let done: Vec<String> = futures::stream::iter(
        cases
            .into_iter()
            .map(|(point, expect)| run_point(point, expect, retry_safe)),
    )
    .buffer_unordered(AT_ONCE)
    .collect()
    .await;
    for line in done {
        println!("ok {line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_of_a_turn_with_an_unsafe_write_has_its_one_allowed_outcome() {
    matrix(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_of_a_turn_with_a_retry_safe_write_has_its_one_allowed_outcome() {
    matrix(true).await;
}

/// One more boundary, outside the durable host: a send that claims its own Turn (the node had
/// room) commits the Turn already owned by the node, then hands it to the runner. A node that
/// dies in between leaves a Turn whose lease lapses like any other: the restarted node takes it
/// over, the send's retry under its command key answers the same Turn, and the Turn runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_its_send_claimed_is_taken_over_when_the_node_dies_before_running_it() {
    let mut server = tokio::task::spawn_blocking(served::Served::start)
        .await
        .unwrap();
    let script = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
    std::fs::write(script.path(), r#"[{"deltas": ["hello"]}]"#).unwrap();
    // The same address and token after each restart.
    let (base, token) = (server.base.clone(), server.token.clone());
    let http = reqwest::Client::new();
    let post = |path: &str, body: serde_json::Value| {
        http.post(format!("{base}{path}"))
            .bearer_auth(&token)
            .json(&body)
            .send()
    };
    let bot: serde_json::Value = post(
        "/v1/bots",
        json!({"name": "B", "model": format!("scripted:{}", script.path().display())}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let chat: serde_json::Value = post("/v1/chats", json!({"bot_id": bot["id"]}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Armed only now: the node's own work submitted at its first start is claimed the same way.
    server = tokio::task::spawn_blocking(move || {
        server.restart_with(&[("OPENBOT_FAULT_POINT", "after_submission_claimed")]);
        server
    })
    .await
    .unwrap();
    let messages = format!("/v1/chats/{}/messages", chat["id"].as_str().unwrap());
    let message = json!({"content": [{"type": "text", "text": "Hi"}], "command_key": "send-1"});
    let lost = post(&messages, message.clone()).await;
    assert!(lost.is_err(), "the node died before answering: {lost:?}");

    let restarted = tokio::task::spawn_blocking(move || {
        server.restart();
        server
    })
    .await
    .unwrap();
    let retried: serde_json::Value = post(&messages, message.clone())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let execution = retried["execution_id"].as_str().unwrap();
    let (events, ended) = restarted.events_to_end(execution).await;
    assert!(ended, "the Turn ended");
    let sequences: Vec<u64> = events
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(
        sequences,
        (1..=sequences.len() as u64).collect::<Vec<_>>(),
        "no event lost or repeated"
    );
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "turn_started").count(), 1);
    assert_eq!(
        kinds.iter().filter(|k| **k == "model_step_started").count(),
        1,
        "the Turn ran once: {kinds:?}"
    );
    let end = events.last().unwrap();
    assert_eq!(end["type"], "turn_ended", "{end}");
    assert_eq!(end["outcome"], "completed", "{end}");
}
