//! `openbot computer run`: the agent on a paired machine. It keeps one outbound WebSocket to
//! its server (machines sit behind NAT), answers the calls of Bots granted the Computer with
//! this machine's terminal and files inside the folders given here, and links again with
//! backoff when the connection ends (to the next of the server's nodes given, if several). A refused credential (the Computer removed) stops it.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::{SinkExt as _, StreamExt as _};
use openbot_core::computer::connector::{ConnectorHost, ConnectorSpec};
use openbot_core::computer::link::{
    AgentMessage, LinkCall, LinkReply, LinkServer, MAX_MESSAGE_BYTES, OutputBatch, PROTOCOL,
    PROTOCOL_HEADER, TERMINAL_HEADER,
};
use openbot_core::computer::{Computer, ComputerOptions, LocalComputer};
use openbot_core::mcp::OpenOptions;
use openbot_core::websocket::UpgradeError;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The first wait before linking again; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait before linking again.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How often the agent pings its node.
const PING: Duration = Duration::from_secs(15);
/// A link that heard nothing from its node for this long is dead.
const SILENT: Duration = Duration::from_secs(45);

/// How the agent runs.
pub struct Agent {
    /// The server's nodes, e.g. `https://openbot.example.com`: the agent links to the first,
    /// and after a link ends, to the next one (round the list).
    pub servers: Vec<String>,
    /// The Computer's ID.
    pub computer_id: Uuid,
    /// Its credential (`obc_...`).
    pub credential: String,
    /// What the machine offers.
    pub options: ComputerOptions,
    /// The local MCP servers it publishes as Connectors.
    pub connectors: Vec<ConnectorSpec>,
    /// Print JSON lines instead of text.
    pub json: bool,
}

/// Why one link ended.
enum Ended {
    /// The connection ended: link again.
    Again(String),
    /// The server refused the machine: stop.
    Refused(String),
}

impl Agent {
    fn say(&self, event: &str, text: &str) {
        if self.json {
            println!("{}", serde_json::json!({"event": event, "message": text}));
        } else {
            eprintln!("openbot computer: {text}");
        }
    }

    /// Runs until the server refuses the machine or the process is stopped.
    pub async fn run(self) -> anyhow::Result<ExitCode> {
        let terminal = self.options.terminal;
        // Session IDs unique to this run: the server keeps the output of earlier runs' sessions.
        let run: String = random_bytes::<3>()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let options = self.options.clone().with_session_prefix(format!("t{run}-"));
        let computer: Arc<dyn Computer> = Arc::new(
            LocalComputer::new(options)
                .map_err(|err| anyhow::anyhow!("this machine cannot be offered: {err}"))?,
        );
        let mut answers = LinkServer::new(computer, terminal);
        if !self.connectors.is_empty() {
            // The machine's owner chose these servers: what they reach is theirs to decide.
            let host = ConnectorHost::new(self.connectors.clone(), OpenOptions::standalone())
                .map_err(|err| anyhow::anyhow!("{err}"))?;
            answers = answers.with_connectors(Arc::new(host));
        }
        let http = reqwest::Client::builder()
            .http1_only()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .context("the HTTP client cannot start")?;
        let mut backoff = FIRST_BACKOFF;
        let mut next = 0;
        loop {
            let started = std::time::Instant::now();
            let Some(server) = self.servers.get(next % self.servers.len().max(1)) else {
                anyhow::bail!("no server to link to");
            };
            next += 1;
            match self.link_once(&http, server, &answers).await {
                Ended::Refused(reason) => {
                    self.say("refused", &reason);
                    return Ok(ExitCode::FAILURE);
                }
                Ended::Again(reason) => {
                    // A link that lasted a while starts the backoff over.
                    if started.elapsed() > MAX_BACKOFF {
                        backoff = FIRST_BACKOFF;
                    }
                    self.say(
                        "unlinked",
                        &format!("{reason}; linking again in {} ms", backoff.as_millis()),
                    );
                }
            }
            tokio::time::sleep(jitter(backoff)).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    async fn link_once(&self, http: &reqwest::Client, server: &str, answers: &LinkServer) -> Ended {
        let url = format!("{}/v1/computers/link", server.trim_end_matches('/'));
        let request = http
            .get(&url)
            .header(PROTOCOL_HEADER, PROTOCOL.to_string())
            .header(
                TERMINAL_HEADER,
                if self.options.terminal { "on" } else { "off" },
            )
            .bearer_auth(&self.credential);
        let socket = match openbot_core::websocket::open(request, MAX_MESSAGE_BYTES).await {
            Ok(socket) => socket,
            Err(UpgradeError::Send(err)) => {
                return Ended::Again(format!("cannot reach {server}: {}", kind(&err)));
            }
            Err(UpgradeError::Status { status, message }) => {
                let message = message.unwrap_or_else(|| status.to_string());
                return match status.as_u16() {
                    400 | 401 | 403 | 404 => Ended::Refused(format!(
                        "the server refused this Computer ({status}): {message}"
                    )),
                    _ => Ended::Again(format!("the server answered {status}: {message}")),
                };
            }
            Err(UpgradeError::NotWebSocket) => {
                return Ended::Again("the server's answer is no WebSocket for this request".into());
            }
            Err(UpgradeError::Upgrade(err)) => {
                return Ended::Again(format!("the link could not start: {}", kind(&err)));
            }
        };
        self.say(
            "linked",
            &format!("linked to {server} as Computer {}", self.computer_id),
        );
        serve(socket, answers).await
    }
}

/// Answers calls on `socket` until it ends; the calls still running are stopped then (their
/// answers could reach no one).
async fn serve<S>(socket: WebSocketStream<S>, answers: &LinkServer) -> Ended
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut sink, mut stream) = socket.split();
    let (reply, mut replies) = mpsc::channel::<LinkReply>(64);
    let ended = CancellationToken::new();
    // Terminal output goes to the node as it comes, so that the server keeps it.
    let (batch, mut batches) = mpsc::channel::<OutputBatch>(64);
    {
        let (answers, ended) = (answers.clone(), ended.clone());
        tokio::spawn(async move { answers.forward_output(batch, ended).await });
    }
    // A cut network ends no connection: the node pings every 15 s, so a link that heard
    // nothing for 45 s is dead, and this side pings too, for the NATs on the way.
    let mut beat = tokio::time::interval(PING);
    let mut heard = std::time::Instant::now();
    let why = loop {
        tokio::select! {
            _ = beat.tick() => {
                if heard.elapsed() > SILENT {
                    break "the server went silent".to_string();
                }
                if let Err(err) = sink.send(Message::Ping(Default::default())).await {
                    break format!("the link broke ({})", ws_kind(&err));
                }
            }
            message = stream.next() => {
                if matches!(message, Some(Ok(_))) {
                    heard = std::time::Instant::now();
                }
                match message {
                    Some(Ok(Message::Text(text))) => match serde_json::from_str::<LinkCall>(text.as_str()) {
                        Ok(call) => {
                            let (answers, reply, cancel) = (answers.clone(), reply.clone(), ended.child_token());
                            tokio::spawn(async move {
                                let answer = answers.answer(call, cancel).await;
                                let _ = reply.send(answer).await;
                            });
                        }
                        Err(_) => break "the server sent a message that is no call".to_string(),
                    },
                    Some(Ok(Message::Close(_))) | None => break "the server ended the link".to_string(),
                    Some(Ok(_)) => {}
                    Some(Err(err)) => break format!("the link broke ({})", ws_kind(&err)),
                }
            }
            Some(output) = batches.recv() => {
                let text = match serde_json::to_string(&AgentMessage::Output { output }) {
                    Ok(text) => text,
                    Err(_) => break "terminal output could not be written".to_string(),
                };
                if let Err(err) = sink.send(Message::text(text)).await {
                    break format!("the link broke ({})", ws_kind(&err));
                }
            }
            Some(answer) = replies.recv() => {
                let text = match serde_json::to_string(&answer) {
                    Ok(text) => text,
                    Err(_) => break "an answer could not be written".to_string(),
                };
                if let Err(err) = sink.send(Message::text(text)).await {
                    break format!("the link broke ({})", ws_kind(&err));
                }
            }
        }
    };
    ended.cancel();
    answers.link_ended().await;
    Ended::Again(why)
}

/// `wait`, give or take a fifth, so that machines cut off together do not link again together.
fn jitter(wait: Duration) -> Duration {
    let spread = wait.as_millis() as u64 / 5;
    if spread == 0 {
        return wait;
    }
    let offset = u64::from(random_bytes::<1>()[0]) * spread * 2 / 255;
    Duration::from_millis(wait.as_millis() as u64 - spread + offset)
}

fn random_bytes<const N: usize>() -> [u8; N] {
    use chacha20poly1305::aead::OsRng;
    use chacha20poly1305::aead::rand_core::RngCore as _;
    let mut bytes = [0u8; N];
    OsRng.fill_bytes(&mut bytes);
    bytes
}

/// What kind of failure an HTTP error is, without its full text (which may name the URL).
fn kind(err: &reqwest::Error) -> &'static str {
    if err.is_connect() {
        "no connection"
    } else if err.is_timeout() {
        "timed out"
    } else {
        "the connection failed"
    }
}

fn ws_kind(err: &tokio_tungstenite::tungstenite::Error) -> &'static str {
    use tokio_tungstenite::tungstenite::Error;
    match err {
        Error::ConnectionClosed | Error::AlreadyClosed => "closed",
        Error::Io(_) => "connection lost",
        Error::Capacity(_) => "message too large",
        Error::Protocol(_) => "protocol error",
        _ => "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_a_fifth_of_the_wait() {
        for _ in 0..100 {
            let wait = jitter(Duration::from_secs(10)).as_millis();
            assert!((8000..=12000).contains(&wait), "{wait}");
        }
    }
}
