//! A scripted model provider on a real local HTTP server, for the provider adapter tests.
//!
//! Each request gets the next [`Reply`] of the script, in order, and is recorded (path,
//! headers, JSON body) for the test to check. Event streams are sent in small pieces (each its own
//! HTTP chunk), so the adapters must reassemble events split anywhere, as on a real network.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use futures::StreamExt;
use openbot_core::model::{
    HttpSettings, Model, ModelError, ModelEvent, ModelRequest, ModelResponse,
};
use openbot_core::schema::Message;
use serde_json::Value;
use tokio::net::TcpListener;

/// The API key every test uses; it must never appear in an error.
pub const API_KEY: &str = "sk-test-0123456789-secret";

/// The bytes per piece when an event stream is sent.
const PIECE: usize = 11;

/// What the mock answers to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200 text/event-stream` with this body, sent in pieces.
    Events(String),
    /// `200 text/event-stream`: this body in pieces, then the connection is dropped without
    /// ending the response properly.
    Cut(String),
    /// `200 text/event-stream`: this body, then nothing more while the connection stays open.
    Stall(String),
    /// `200 application/json` with this body in one piece: a whole answer, as a server sends
    /// it that ignores `stream: true`.
    Json(String),
    /// Any status with a body (JSON or not) and extra headers.
    Status {
        /// The HTTP status.
        status: u16,
        /// The body.
        body: String,
        /// Extra headers, e.g. `retry-after`.
        headers: Vec<(&'static str, String)>,
    },
    /// Wait this long before answering with the inner reply.
    Delayed(Duration, Box<Reply>),
}

impl Reply {
    /// An error status with a body.
    pub fn status(status: u16, body: impl Into<String>) -> Self {
        Reply::Status {
            status,
            body: body.into(),
            headers: Vec::new(),
        }
    }

    /// This reply with one more header (only for [`Reply::Status`]).
    pub fn with_header(self, name: &'static str, value: impl Into<String>) -> Self {
        match self {
            Reply::Status {
                status,
                body,
                mut headers,
            } => {
                headers.push((name, value.into()));
                Reply::Status {
                    status,
                    body,
                    headers,
                }
            }
            other => other,
        }
    }
}

/// One request the mock received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The request path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The headers, by lowercase name.
    pub headers: HashMap<String, String>,
    /// The body as JSON (`Null` when it was not JSON).
    pub body: Value,
}

struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
}

/// A running mock provider; it stops when dropped.
pub struct MockProvider {
    /// The base URL to give the adapter, e.g. `http://127.0.0.1:4711/v1`.
    pub base_url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockProvider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockProvider {
    /// Starts a server on `127.0.0.1:0` whose base URL ends with `prefix` (e.g. `/v1` or ``)
    /// and that answers requests with `replies` in order; past the end it answers 599.
    pub async fn start(prefix: &str, replies: impl IntoIterator<Item = Reply>) -> Self {
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
        });
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the mock");
        let address = listener.local_addr().expect("mock address");
        let router = Router::new().fallback(handle).with_state(shared.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.expect("serve the mock");
        });
        Self {
            base_url: format!("http://{address}{prefix}"),
            shared,
            task,
        }
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().expect("requests").clone()
    }

    /// The only request received; panics unless there was exactly one.
    pub fn only_request(&self) -> Recorded {
        let requests = self.requests();
        assert_eq!(
            requests.len(),
            1,
            "expected one request, got {}",
            requests.len()
        );
        requests.into_iter().next().expect("one request")
    }

    /// Settings for this mock: the test key, short timeouts, `retries` retries.
    pub fn settings(&self, retries: u32) -> HttpSettings {
        let mut settings = HttpSettings::new(self.base_url.clone(), Some(API_KEY.to_string()));
        settings.connect_timeout = Duration::from_secs(2);
        settings.response_timeout = Duration::from_secs(5);
        settings.idle_timeout = Duration::from_secs(5);
        settings.max_retries = retries;
        settings
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = Recorded {
        path: uri.path().to_string(),
        headers: headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_string(),
                    value.to_str().unwrap_or("").to_string(),
                )
            })
            .collect(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    shared.requests.lock().expect("requests").push(recorded);
    let reply = shared.replies.lock().expect("replies").pop_front();
    respond(reply.unwrap_or_else(|| Reply::status(599, "the mock has no reply left"))).await
}

async fn respond(mut reply: Reply) -> Response {
    while let Reply::Delayed(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    let (text, ending) = match reply {
        Reply::Status {
            status,
            body,
            headers,
        } => {
            let mut response =
                Response::builder().status(StatusCode::from_u16(status).expect("status"));
            for (name, value) in headers {
                response = response.header(name, value);
            }
            let content_type = if body.starts_with('{') {
                "application/json"
            } else {
                "text/plain"
            };
            return response
                .header("content-type", content_type)
                .body(Body::from(body))
                .expect("response");
        }
        Reply::Json(body) => {
            return Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "application/json")
                .body(Body::from(body))
                .expect("response");
        }
        Reply::Events(text) => (text, Ending::Clean),
        Reply::Cut(text) => (text, Ending::Drop),
        Reply::Stall(text) => (text, Ending::Stall),
        Reply::Delayed(..) => unreachable!("delays are unwrapped above"),
    };
    let pieces: Vec<Bytes> = text
        .into_bytes()
        .chunks(PIECE)
        .map(Bytes::copy_from_slice)
        .collect();
    let body = futures::stream::iter(pieces)
        .then(|piece| async move {
            tokio::task::yield_now().await;
            Ok::<_, std::io::Error>(piece)
        })
        .chain(futures::stream::once(async move {
            match ending {
                Ending::Clean => Ok(Bytes::new()),
                Ending::Drop => {
                    // Let what was sent reach the client before the connection goes.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Err(std::io::Error::other("the mock drops the connection"))
                }
                Ending::Stall => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(Bytes::new())
                }
            }
        }));
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(body))
        .expect("response")
}

#[derive(Debug, Clone, Copy)]
enum Ending {
    Clean,
    Drop,
    Stall,
}

/// One server-sent event: an optional `event:` line and the data, ended by a blank line.
pub fn sse(event: Option<&str>, data: &str) -> String {
    match event {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// Sends `request` to `model` and collects the whole answer, or the first error.
pub async fn collect(
    model: &dyn Model,
    request: ModelRequest,
) -> Result<ModelResponse, ModelError> {
    let events = collect_events(model, request).await?;
    let mut response = ModelResponse::default();
    for event in &events {
        response.apply(event);
    }
    Ok(response)
}

/// Sends `request` to `model` and collects its events, or the first error.
pub async fn collect_events(
    model: &dyn Model,
    request: ModelRequest,
) -> Result<Vec<ModelEvent>, ModelError> {
    let mut stream = model.stream(request).await?;
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event?);
    }
    Ok(events)
}

/// Sends `request` and returns the events that arrived before the stream failed, and the error;
/// panics if the stream did not fail.
pub async fn events_then_error(
    model: &dyn Model,
    request: ModelRequest,
) -> (Vec<ModelEvent>, ModelError) {
    let mut stream = match model.stream(request).await {
        Ok(stream) => stream,
        Err(error) => return (Vec::new(), error),
    };
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => events.push(event),
            Err(error) => {
                assert!(
                    stream.next().await.is_none(),
                    "the stream goes on after an error"
                );
                return (events, error);
            }
        }
    }
    panic!("the stream ended without an error after {events:?}");
}

/// A request with one user message.
pub fn ask(text: &str) -> ModelRequest {
    ModelRequest {
        messages: vec![std::sync::Arc::new(Message::user(text))],
        ..ModelRequest::default()
    }
}

/// Asserts that neither the message nor the debug form of `error` holds the API key.
pub fn assert_no_key(error: &ModelError) {
    assert!(
        !error.to_string().contains(API_KEY),
        "the key leaked: {error}"
    );
    assert!(
        !format!("{error:?}").contains(API_KEY),
        "the key leaked: {error:?}"
    );
}
