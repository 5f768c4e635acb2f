//! A model provider for engine tests: a real HTTP server speaking OpenAI's streamed Chat
//! Completions format. It answers by the conversation's position (how many answers the
//! request already holds), so a node that takes over and repeats a request gets the same
//! answer, and it counts every request per position.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Answer {
    /// Call a tool with these arguments.
    Tool(&'static str, Value),
    /// Final text, sent in these pieces.
    Text(Vec<&'static str>),
}

#[derive(Default)]
struct Shared {
    script: Vec<Answer>,
    requests: HashMap<usize, u32>,
    /// Positions whose answers wait this long before the first byte.
    delays: HashMap<usize, Duration>,
    /// Positions whose first answer only waits this long.
    first_delays: HashMap<usize, Duration>,
    /// Delay between text pieces.
    piece_delay: Duration,
    /// The Authorization header of the last request.
    last_authorization: Option<String>,
    /// Every request body, in order.
    bodies: Vec<String>,
    /// Requests whose answers are being sent now, and the most there ever were at once.
    in_flight: u32,
    peak_in_flight: u32,
    /// Answers leave out their usage.
    no_usage: bool,
    /// The prompt and completion tokens answers report, when not the default 10 and 5.
    reported: Option<(u64, u64)>,
}

/// One request in flight: counted from its arrival until its answer ended or was dropped.
struct Flight(Arc<Mutex<Shared>>);

impl Flight {
    fn start(shared: &Arc<Mutex<Shared>>) -> Self {
        let mut state = shared.lock().unwrap();
        state.in_flight += 1;
        state.peak_in_flight = state.peak_in_flight.max(state.in_flight);
        Self(Arc::clone(shared))
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        let mut state = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.in_flight = state.in_flight.saturating_sub(1);
    }
}

/// The running fake provider.
#[derive(Clone)]
pub struct FakeOpenAi {
    pub base_url: String,
    shared: Arc<Mutex<Shared>>,
}

impl FakeOpenAi {
    /// Starts the server on 127.0.0.1 with a script.
    pub async fn start(script: Vec<Answer>) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            script,
            ..Shared::default()
        }));
        let app = Router::new()
            .route("/v1/chat/completions", post(answer))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            base_url: format!("http://{address}/v1"),
            shared,
        }
    }

    /// Adds an answer at the end of the script (for answers that name what a test creates
    /// after the provider started).
    pub fn push(&self, answer: Answer) {
        self.shared.lock().unwrap().script.push(answer);
    }

    /// The model spec that reaches this server.
    pub fn spec(&self) -> String {
        format!("compatible:{}:fake-model", self.base_url)
    }

    /// How many requests asked for the answer at `position` (from 0).
    pub fn requests_at(&self, position: usize) -> u32 {
        self.shared
            .lock()
            .unwrap()
            .requests
            .get(&position)
            .copied()
            .unwrap_or(0)
    }

    /// All requests.
    pub fn total_requests(&self) -> u32 {
        self.shared.lock().unwrap().requests.values().sum()
    }

    /// The most requests that were ever answered at the same time.
    pub fn peak_in_flight(&self) -> u32 {
        self.shared.lock().unwrap().peak_in_flight
    }

    /// How many requests are being answered now.
    pub fn in_flight(&self) -> u32 {
        self.shared.lock().unwrap().in_flight
    }

    /// Makes the answer at `position` wait before its first byte.
    pub fn delay(&self, position: usize, delay: Duration) {
        self.shared.lock().unwrap().delays.insert(position, delay);
    }

    /// The Authorization header of the last request.
    pub fn last_authorization(&self) -> Option<String> {
        self.shared.lock().unwrap().last_authorization.clone()
    }

    /// Makes only the first request at `position` wait before its first byte.
    pub fn delay_first(&self, position: usize, delay: Duration) {
        self.shared
            .lock()
            .unwrap()
            .first_delays
            .insert(position, delay);
    }

    /// Waits this long between text pieces.
    /// Every request body received so far, in order.
    pub fn bodies(&self) -> Vec<String> {
        self.shared.lock().unwrap().bodies.clone()
    }

    /// Leaves the usage out of every answer from now on.
    pub fn without_usage(&self) {
        self.shared.lock().unwrap().no_usage = true;
    }

    /// Makes every answer from now on report this usage (prompt and completion tokens).
    pub fn report_usage(&self, prompt_tokens: u64, completion_tokens: u64) {
        self.shared.lock().unwrap().reported = Some((prompt_tokens, completion_tokens));
    }

    /// The most requests that were being answered at once.
    pub fn max_in_flight(&self) -> usize {
        self.shared.lock().unwrap().peak_in_flight as usize
    }

    pub fn piece_delay(&self, delay: Duration) {
        self.shared.lock().unwrap().piece_delay = delay;
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let body = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {body}\n\n")
}

async fn answer(
    State(shared): State<Arc<Mutex<Shared>>>,
    headers: axum::http::HeaderMap,
    body: String,
) -> Response {
    let flight = Flight::start(&shared);
    let request: Value = serde_json::from_str(&body).unwrap_or_default();
    let position = request["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "assistant").count())
        .unwrap_or(0);
    let (answer, delay, piece_delay, no_usage, reported) = {
        let mut shared = shared.lock().unwrap();
        *shared.requests.entry(position).or_default() += 1;
        shared.bodies.push(body.clone());
        shared.last_authorization = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let delay = shared
            .first_delays
            .remove(&position)
            .or_else(|| shared.delays.get(&position).copied());
        (
            shared.script.get(position).cloned(),
            delay,
            shared.piece_delay,
            shared.no_usage,
            shared.reported.unwrap_or((10, 5)),
        )
    };
    let answer = answer.unwrap_or(Answer::Text(vec!["(script ended)"]));
    let mut pieces = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    let finish = match &answer {
        Answer::Tool(name, args) => {
            pieces.push(chunk(json!({"tool_calls": [{"index": 0, "id": format!("call_{position}"), "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}]}), None));
            "tool_calls"
        }
        Answer::Text(parts) => {
            for part in parts {
                pieces.push(chunk(json!({"content": part}), None));
            }
            "stop"
        }
    };
    pieces.push(chunk(json!({}), Some(finish)));
    if !no_usage {
        pieces.push(format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": reported.0, "completion_tokens": reported.1,
                "total_tokens": reported.0 + reported.1}})
        ));
    }
    pieces.push("data: [DONE]\n\n".to_string());
    let stream = futures::stream::unfold(
        (pieces.into_iter(), delay, true, Some(flight)),
        move |(mut rest, delay, first, mut flight)| async move {
            if first && let Some(delay) = delay {
                tokio::time::sleep(delay).await;
            } else if !first && !piece_delay.is_zero() {
                tokio::time::sleep(piece_delay).await;
            }
            let piece = rest.next()?;
            if rest.len() == 0 {
                // The answer is over before its last piece leaves: a request that follows it
                // is never counted as overlapping it.
                flight = None;
            }
            Some((Ok::<_, std::io::Error>(piece), (rest, delay, false, flight)))
        },
    );
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}
