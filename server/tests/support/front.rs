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
        let objects = self.server.objects.path().to_string_lossy().to_string();
        let mut all = vec![("OPENBOT_OBJECTS_DIR", objects.as_str())];
        all.extend_from_slice(env);
        NodeProcess::start_with(&self.url, &self.keys_text, name, lease_ms, &all)
    }

    pub async fn organization(&self) -> Uuid {
        self.server.owner_member().await.organization_id
    }
}
