//! Slack's and Telegram's send APIs on 127.0.0.1, speaking their wire formats: Slack's
//! `POST /api/chat.postMessage` (Bearer bot token, JSON `{channel, text, thread_ts?}`, answer
//! `{ok, ts}` / `{ok: false, error}`, HTTP 429 with `Retry-After`) and Telegram's
//! `POST /bot<token>/sendMessage` (`{chat_id, text}`, answer `{ok, result: {message_id}}` /
//! `{ok: false, error_code, description, parameters: {retry_after}}`). A plain TCP server,
//! so a test can make it read a request and then close the connection with no answer.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// How the fake answers one request.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Takes the message.
    Take,
    /// Reads the request, then closes the connection without an answer.
    Lose,
    /// HTTP 429 asking to wait this many seconds.
    RateLimit(u64),
    /// A final refusal: Slack `channel_not_found`, Telegram `Bad Request: chat not found`.
    Refuse,
    /// Waits for [`FakePlatform::release`], then takes the message.
    Hold,
    /// Waits for [`FakePlatform::release`], then closes the connection without an answer.
    HoldLose,
}

/// One request as the fake read it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The request path.
    pub path: String,
    /// The Authorization header.
    pub authorization: Option<String>,
    /// The JSON body.
    pub body: Value,
}

#[derive(Default)]
struct Shared {
    modes: VecDeque<Mode>,
    seen: Vec<Seen>,
}

/// A fake platform API.
#[derive(Clone)]
pub struct FakePlatform {
    /// `http://127.0.0.1:<port>`: Slack's base is `{base}/api`, Telegram's is `{base}`.
    pub base: String,
    shared: Arc<Mutex<Shared>>,
    released: Arc<Notify>,
    token: String,
}

impl FakePlatform {
    /// A fake that accepts `token` as the bot token.
    pub async fn start(token: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let fake = Self {
            base,
            shared: Arc::default(),
            released: Arc::new(Notify::new()),
            token: token.to_string(),
        };
        let serving = fake.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let fake = serving.clone();
                tokio::spawn(async move { fake.serve(stream).await });
            }
        });
        fake
    }

    /// Answers the next requests as `modes` say, then takes messages.
    pub fn then(&self, modes: &[Mode]) {
        self.shared
            .lock()
            .unwrap()
            .modes
            .extend(modes.iter().cloned());
    }

    /// Lets a held request be answered.
    pub fn release(&self) {
        self.released.notify_one();
    }

    /// Every request read, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.lock().unwrap().seen.clone()
    }

    /// How many requests were read.
    pub fn count(&self) -> usize {
        self.shared.lock().unwrap().seen.len()
    }

    async fn serve(&self, mut stream: TcpStream) {
        loop {
            let Some((path, headers, body)) = read_request(&mut stream).await else {
                return;
            };
            let authorization = headers
                .iter()
                .find(|(k, _)| k == "authorization")
                .map(|(_, v)| v.clone());
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let mode = {
                let mut shared = self.shared.lock().unwrap();
                shared.seen.push(Seen {
                    path: path.clone(),
                    authorization: authorization.clone(),
                    body: body.clone(),
                });
                shared.modes.pop_front().unwrap_or(Mode::Take)
            };
            let slack = path.ends_with("/chat.postMessage");
            let authorized = if slack {
                authorization.as_deref() == Some(&format!("Bearer {}", self.token))
            } else {
                path == format!("/bot{}/sendMessage", self.token)
            };
            if matches!(mode, Mode::HoldLose) {
                self.released.notified().await;
                return;
            }
            let (status, extra, answer) = match mode {
                Mode::Lose | Mode::HoldLose => return,
                _ if !authorized && slack => {
                    (200, "", json!({"ok": false, "error": "invalid_auth"}))
                }
                _ if !authorized => (
                    401,
                    "",
                    json!({"ok": false, "error_code": 401, "description": "Unauthorized"}),
                ),
                Mode::RateLimit(seconds) if slack => (
                    429,
                    if seconds == 0 { "" } else { "retry" },
                    json!({"ok": false, "error": "ratelimited", "retry": seconds}),
                ),
                Mode::RateLimit(seconds) => (
                    429,
                    "",
                    json!({"ok": false, "error_code": 429, "description": format!("Too Many Requests: retry after {seconds}"), "parameters": {"retry_after": seconds}}),
                ),
                Mode::Refuse if slack => {
                    (200, "", json!({"ok": false, "error": "channel_not_found"}))
                }
                Mode::Refuse => (
                    400,
                    "",
                    json!({"ok": false, "error_code": 400, "description": "Bad Request: chat not found"}),
                ),
                Mode::Hold | Mode::Take => {
                    if matches!(mode, Mode::Hold) {
                        self.released.notified().await;
                    }
                    let n = self.count();
                    if slack {
                        (
                            200,
                            "",
                            json!({"ok": true, "channel": body["channel"], "ts": format!("1700000000.{n:06}"), "message": {"text": body["text"]}}),
                        )
                    } else {
                        (
                            200,
                            "",
                            json!({"ok": true, "result": {"message_id": n, "chat": {"id": body["chat_id"]}, "text": body["text"]}}),
                        )
                    }
                }
            };
            let retry_header = match (extra, &answer["retry"]) {
                ("retry", Value::Number(n)) => format!("Retry-After: {n}\r\n"),
                _ => String::new(),
            };
            let text = answer.to_string();
            let response = format!(
                "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\n{retry_header}Content-Length: {}\r\n\r\n{text}",
                if status == 200 { "OK" } else { "Error" },
                text.len()
            );
            if stream.write_all(response.as_bytes()).await.is_err() {
                return;
            }
        }
    }
}

/// Reads one HTTP/1.1 request: its path, lowercased headers and body.
async fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<(String, String)>, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split_whitespace().nth(1)?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((path, headers, body))
}
