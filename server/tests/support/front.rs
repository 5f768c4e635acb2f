//! An HTTP front for the multi-process tests: a fresh PostgreSQL database, the seal keys its
//! `openbot serve` nodes share, a shared object store folder, and the HTTP API on them with an
//! engine that submits and observes but runs no work: every execution runs on a node process.
#![allow(dead_code)]

use std::sync::Arc;

use openbot_server::engine::{Engine, TestClock};
use openbot_server::http::{AppState, app};
use openbot_server::node::{Database, bootstrap};
use openbot_server::sealed::KeyRing;
use openbot_server::store::PostgresStore;
use uuid::Uuid;

use super::api::{Raw, Server, test_platform};
use super::nodes::NodeProcess;
use super::pg;

pub struct Front {
    pub url: String,
    pub keys_text: String,
    pub server: Server,
}

impl Front {
    pub async fn new() -> Self {
        let url = pg::fresh_database().await;
        let (keys, keys_text) = KeyRing::generate("k1");
        let store = PostgresStore::connect(&url, 8, keys.clone()).await.unwrap();
        let objects = tempfile::tempdir().unwrap();
        let objects_store = openbot_server::files::local_objects(objects.path()).unwrap();
        let database =
            Database::on(Arc::new(store.clone())).with_objects(Arc::clone(&objects_store));
        let owner = bootstrap(database.identity.as_ref())
            .await
            .unwrap()
            .unwrap();
        let clock = TestClock::new();
        let engine = Arc::new(Engine::open_with_clock(
            Arc::clone(&database.store),
            keys,
            "front".into(),
            clock.clone(),
        ));
        let state = AppState::new(
            Arc::clone(&engine),
            &database,
            objects_store,
            test_platform(),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            // The node's own server loop, as `openbot serve` runs it.
            let _ = openbot_server::http::serve(listener, app(state), std::future::pending()).await;
        });
        let server = Server {
            base,
            owner,
            database,
            engine,
            raw: Raw::Postgres(store),
            http: reqwest::Client::new(),
            objects,
            clock,
        };
        Self {
            url,
            keys_text,
            server,
        }
    }

    /// A node on the front's database and object store folder.
    pub fn node(&self, name: &str, lease_ms: u64) -> NodeProcess {
        self.node_with(name, lease_ms, &[])
    }

    /// A node with these extra environment variables (a fault point).
    pub fn node_with(&self, name: &str, lease_ms: u64, env: &[(&str, &str)]) -> NodeProcess {
        self.node_at(name, lease_ms, "127.0.0.1:0", env)
    }

    /// A node whose public API listens on `bind`.
    pub fn node_at(
        &self,
        name: &str,
        lease_ms: u64,
        bind: &str,
        env: &[(&str, &str)],
    ) -> NodeProcess {
        let objects = self.server.objects.path().to_string_lossy().to_string();
        let mut all = vec![("OPENBOT_OBJECTS_DIR", objects.as_str())];
        all.extend_from_slice(env);
        NodeProcess::start_at(&self.url, &self.keys_text, name, lease_ms, bind, &all)
    }

    pub async fn organization(&self) -> Uuid {
        self.server.owner_member().await.organization_id
    }
}

/// A tool definition a Bot names: the organization's HTTP tool, delegate or App tool of that
/// name answers it (the same resolution a Chat's Turn uses).
pub fn tool(name: &str) -> serde_json::Value {
    serde_json::json!({"name": name, "description": "A tool.", "input_schema": {"type": "object"}})
}

impl Front {
    /// The owner's token, with every right.
    pub fn token(&self) -> &str {
        &self.server.owner
    }

    /// Registers the organization's HTTP tool `write`, which posts to `url`, through the API.
    pub async fn put_write_tool(&self, url: &str, retry_safe: bool, background: bool) {
        let response = self
            .server
            .http
            .put(format!("{}/v1/tools/write", self.server.base))
            .bearer_auth(self.token())
            .json(&serde_json::json!({
                "description": "Writes to the outside world.",
                "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
                "url": url, "retry_safe": retry_safe, "background": background}))
            .send()
            .await
            .unwrap();
        let status = response.status();
        assert_eq!(status, 200, "{}", response.text().await.unwrap());
    }

    /// Registers the organization's delegate tool `name`, handing tasks to `bot`.
    pub async fn put_delegate(&self, name: &str, bot: &serde_json::Value) {
        let response = self
            .server
            .http
            .put(format!("{}/v1/delegates/{name}", self.server.base))
            .bearer_auth(self.token())
            .json(&serde_json::json!({"description": "Hands a task to a helper.", "bot_id": bot["id"]}))
            .send()
            .await
            .unwrap();
        let status = response.status();
        assert_eq!(status, 200, "{}", response.text().await.unwrap());
    }

    /// Creates the owner's Bot from `spec` (`name`, `model`, `tools`, `limits`, ...).
    pub async fn create_bot(&self, spec: serde_json::Value) -> serde_json::Value {
        let response = self
            .server
            .post("/v1/bots", self.token())
            .json(&spec)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(status, 201, "{body}");
        body
    }

    /// Sends "go" to a new Chat of `bot` with the owner's token: the Chat and the Turn's
    /// execution, as any client starts one.
    pub async fn start_turn(&self, bot: &serde_json::Value) -> (Uuid, openbot_schema::ExecutionId) {
        let chat = self.server.chat(self.token(), bot).await;
        let sent =
            super::api::receipt(self.server.send(self.token(), &chat, "go", None).await).await;
        (
            chat.parse().unwrap(),
            sent["execution_id"].as_str().unwrap().parse().unwrap(),
        )
    }

    /// The multi-process suites' standard Turn: a new Bot on `model` with the organization's
    /// HTTP tool `write` (posting to `url`), sent "go" in a new Chat through the API.
    pub async fn write_turn(
        &self,
        model: &str,
        url: &str,
        retry_safe: bool,
    ) -> openbot_schema::ExecutionId {
        self.put_write_tool(url, retry_safe, false).await;
        let bot = self
            .create_bot(
                serde_json::json!({"name": "Writer", "model": model, "tools": [tool("write")]}),
            )
            .await;
        self.start_turn(&bot).await.1
    }

    /// Decides the unknown outcome of `call` (as listed, e.g. `1/tool:0/1`) through the API.
    pub async fn decide_outcome(
        &self,
        execution: openbot_schema::ExecutionId,
        decision: serde_json::Value,
    ) {
        let response = self
            .server
            .post(&format!("/v1/executions/{execution}/outcome"), self.token())
            .json(&decision)
            .send()
            .await
            .unwrap();
        let status = response.status();
        assert_eq!(status, 200, "{}", response.text().await.unwrap());
    }
}
