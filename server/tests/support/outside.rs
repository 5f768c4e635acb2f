//! An outside service for engine tests: a real HTTP endpoint standing for a write to the
//! world. It counts every write and every idempotency key, and can hold writes until told.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use tokio::sync::{Notify, watch};

/// What the handler shares with the test.
type HandlerState = (Arc<Mutex<Shared>>, watch::Sender<bool>, Arc<Notify>);

#[derive(Default)]
struct Shared {
    /// Writes received, by idempotency key (including repeats).
    received: HashMap<String, u32>,
    /// Writes applied: one per key when deduplicating, else one per request.
    applied: u32,
    deduplicate: bool,
    /// How many of the first writes are never answered (received, then held until the
    /// connection closes), as a reply lost on the way back.
    unanswered: u32,
}

/// The running endpoint.
#[derive(Clone)]
pub struct Outside {
    pub url: String,
    shared: Arc<Mutex<Shared>>,
    /// Writes wait while this is `true`.
    held: watch::Sender<bool>,
    arrived: Arc<Notify>,
}

impl Outside {
    /// Starts the endpoint; with `deduplicate` it applies each idempotency key once.
    pub async fn start(deduplicate: bool) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            deduplicate,
            ..Shared::default()
        }));
        let held = watch::channel(false).0;
        let arrived = Arc::new(Notify::new());
        let state = (Arc::clone(&shared), held.clone(), Arc::clone(&arrived));
        let app = Router::new().route("/write", post(write)).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url: format!("http://{address}/write"),
            shared,
            held,
            arrived,
        }
    }

    /// An endpoint (applying every write) that never answers the first `unanswered` writes:
    /// their senders cannot know whether they were applied.
    pub async fn unanswering(unanswered: u32) -> Self {
        let outside = Self::start(false).await;
        outside.shared.lock().unwrap().unanswered = unanswered;
        outside
    }

    /// The idempotency keys of the writes received, each once, sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .shared
            .lock()
            .unwrap()
            .received
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    }

    /// Waits until `count` writes arrived.
    pub async fn wait_for_writes(&self, count: u32) {
        loop {
            let notified = self.arrived.notified();
            if self.received() >= count {
                return;
            }
            notified.await;
        }
    }

    /// Writes received so far (repeats included).
    pub fn received(&self) -> u32 {
        self.shared.lock().unwrap().received.values().sum()
    }

    /// Writes applied so far.
    pub fn applied(&self) -> u32 {
        self.shared.lock().unwrap().applied
    }

    /// Makes later writes wait (received, not answered) until [`Outside::release`].
    pub async fn hold(&self) {
        self.held.send_replace(true);
    }

    /// Lets held writes through.
    pub fn release(&self) {
        self.held.send_replace(false);
    }

    /// Waits until a write arrives.
    pub async fn wait_for_write(&self) {
        loop {
            let notified = self.arrived.notified();
            if self.received() > 0 {
                return;
            }
            notified.await;
        }
    }
}

async fn write(
    State((shared, held, arrived)): State<HandlerState>,
    headers: HeaderMap,
    body: String,
) -> String {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let answered = {
        let mut shared = shared.lock().unwrap();
        let answered = shared.received.values().sum::<u32>() >= shared.unanswered;
        let seen = shared.received.get(&key).copied().unwrap_or(0);
        *shared.received.entry(key.clone()).or_default() += 1;
        if !shared.deduplicate || seen == 0 {
            shared.applied += 1;
        }
        answered
    };
    arrived.notify_waiters();
    if !answered {
        std::future::pending::<()>().await;
    }
    let mut held = held.subscribe();
    let _ = held.wait_for(|held| !*held).await;
    format!("wrote {body}")
}
