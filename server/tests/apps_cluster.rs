//! App calls across a takeover: two real `openbot serve` processes on a real PostgreSQL, the
//! owner killed with SIGKILL while an App call is in flight on a real MCP server (the fixture
//! on the `mcp` SDK, over stdio). A read-only tool is sent again by the new owner with the same
//! request ID; an unsafe one waits in `outcome_unknown` and is never sent again.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/fake_openai.rs"]
mod fake_openai;
#[path = "../../core/tests/support/mcp_servers.rs"]
mod mcp_servers;
#[path = "support/nodes.rs"]
mod nodes;
#[path = "support/pg.rs"]
mod pg;
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
use mcp_servers::*;
use nodes::NodeProcess;
use openbot_core::mcp::{McpEndpoint, McpSession, OpenOptions};
use openbot_schema::{
    AppAuthKind, AppConnectionStatus, Event, EventKind, ExecutionId, ExecutionState, TurnOutcome,
};
use openbot_server::apps::tool::AppRoute;
use openbot_server::apps::{AppRow, AppStore, ConnectionRow};
use openbot_server::engine::Engine;
use openbot_server::store::{ExecutionStore, PostgresStore, now_ms};
use serde_json::json;
use uuid::Uuid;

/// A database, an HTTP front (an engine with no runner) that submits through the public API
/// with the owner's token, and the store to set up Apps with.
struct Cluster {
    store: Arc<PostgresStore>,
    engine: Arc<Engine>,
    front: Front,
}

impl Cluster {
    async fn new() -> Self {
        let front = Front::new().await;
        let store = match &front.server.raw {
            api::Raw::Postgres(store) => Arc::new(store.clone()),
            api::Raw::Sqlite(..) => unreachable!("the front is on PostgreSQL"),
        };
        Self {
            store,
            engine: Arc::clone(&front.server.engine),
            front,
        }
    }

    fn node(&self, name: &str) -> NodeProcess {
        self.front
            .node_with(name, 1000, &[("OPENBOT_STDIO_APPS", "true")])
    }

    /// An App on `transport` with a ready `none` Connection whose discovery ran; returns the
    /// route of its tool `tool`.
    async fn app(&self, transport: openbot_schema::AppTransport, tool: &str) -> AppRoute {
        // Stdio Apps are the deployment's choice (`OPENBOT_STDIO_APPS`), not the API's: the
        // App and its Connection are set up in the store, as an operator's tooling would.
        let organization = self.front.organization().await;
        let app = self
            .store
            .create_app(AppRow {
                id: Uuid::now_v7(),
                organization_id: organization,
                name: "notes".into(),
                transport: transport.clone(),
                created_at: now_ms(),
                removed_at: None,
            })
            .await
            .unwrap()
            .unwrap();
        let connection = self
            .store
            .create_connection(ConnectionRow {
                id: Uuid::now_v7(),
                app_id: app.id,
                organization_id: organization,
                auth: AppAuthKind::None,
                status: AppConnectionStatus::Ready,
                revision: 1,
                header_names: Vec::new(),
                credentials: None,
                tools: None,
                discovered_at: None,
                created_by: None,
                created_at: now_ms(),
            })
            .await
            .unwrap();
        let endpoint = McpEndpoint {
            transport,
            headers: Default::default(),
        };
        let session = McpSession::open(&endpoint, &OpenOptions::standalone())
            .await
            .unwrap();
        let tools = session.list_tools().await.unwrap();
        session.close().await.unwrap();
        self.store
            .save_discovery(organization, connection.id, 1, &tools, now_ms())
            .await
            .unwrap()
            .unwrap();
        AppRoute {
            organization_id: organization,
            app_id: app.id,
            app_name: app.name,
            connection_id: connection.id,
            revision: 1,
            declaration: tools.into_iter().find(|t| t.name == tool).unwrap(),
        }
    }

    /// Sends "go" to a new Chat of a new Bot on `model` that has the App tool of `route`,
    /// through the API.
    async fn submit(&self, model: &FakeOpenAi, route: AppRoute) -> ExecutionId {
        let definition = route.definition();
        let bot = self
            .front
            .create_bot(json!({"name": "Notes", "model": model.spec(), "tools": [definition]}))
            .await;
        self.front.start_turn(&bot).await.1
    }

    async fn events(&self, id: ExecutionId) -> Vec<Event> {
        tokio::time::timeout(
            Duration::from_secs(90),
            self.engine.observe(id, 0).map(|e| e.unwrap()).collect(),
        )
        .await
        .expect("the execution ends in time")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_app_call_in_flight_is_sent_again_by_the_new_owner_with_the_same_request_id() {
    let cluster = Cluster::new().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let marker = dir.path().join("slow-once");
    let route = cluster
        .app(
            fixture_stdio_with(&log, 600.0, None, Some(&marker)),
            "read_note",
        )
        .await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__read_note", json!({"text": "list"})),
        Answer::Text(vec!["read"]),
    ])
    .await;
    let mut owner = cluster.node("apps-owner");
    let id = cluster.submit(&model, route).await;
    wait_for_log(&log, "call read_note").await;
    let _other = cluster.node("apps-other");
    owner.kill();
    let events = cluster.events(id).await;
    assert!(matches!(
        events.last().unwrap().kind,
        EventKind::TurnEnded {
            outcome: TurnOutcome::Completed,
            ..
        }
    ));
    let calls: Vec<String> = fixture_log(&log)
        .into_iter()
        .filter(|l| l.starts_with("call read_note"))
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0], calls[1], "the same request ID both times");
    let row = cluster.store.execution(id).await.unwrap();
    assert_eq!(row.generation, 2, "one takeover");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsafe_app_call_in_flight_waits_in_outcome_unknown_after_the_owner_is_killed() {
    let cluster = Cluster::new().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let route = cluster
        .app(fixture_stdio(&log, 600.0, None), "write_note")
        .await;
    let model = FakeOpenAi::start(vec![
        Answer::Tool("notes__write_note", json!({"text": "pay 5"})),
        Answer::Text(vec!["done"]),
    ])
    .await;
    let mut owner = cluster.node("apps-unsafe-owner");
    let id = cluster.submit(&model, route).await;
    wait_for_log(&log, "call write_note").await;
    let _other = cluster.node("apps-unsafe-other");
    owner.kill();
    let mut state = ExecutionState::Running;
    for _ in 0..300 {
        state = cluster.store.execution(id).await.unwrap().state;
        if state == ExecutionState::OutcomeUnknown {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(state, ExecutionState::OutcomeUnknown);
    let calls = fixture_log(&log)
        .iter()
        .filter(|l| l.starts_with("call write_note"))
        .count();
    assert_eq!(calls, 1, "the unsafe write was never sent again");
}
