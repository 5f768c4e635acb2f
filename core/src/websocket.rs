//! A WebSocket opened with an HTTP client, so that the upgrade request keeps to whatever that
//! client keeps to (the outbound policy's resolver, TLS, no proxy): a Computer agent's link
//! to its server and a live session's socket to its provider both open this way.

use base64::Engine as _;
use reqwest::header;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

/// An open client socket.
pub type ClientSocket = WebSocketStream<reqwest::Upgraded>;

/// Why a WebSocket did not open.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// The request did not reach an answer.
    #[error("the request failed")]
    Send(#[source] reqwest::Error),
    /// The server answered with a status other than 101.
    #[error("the server answered {status}")]
    Status {
        /// The status.
        status: reqwest::StatusCode,
        /// The `error.message` of its JSON body, when it has one.
        message: Option<String>,
    },
    /// The answer does not accept this request's key.
    #[error("the answer is no WebSocket for this request")]
    NotWebSocket,
    /// The connection could not be taken over.
    #[error("the socket could not start")]
    Upgrade(#[source] reqwest::Error),
}

/// Sends `request` (a GET of a client built HTTP/1 only) as a WebSocket upgrade and answers
/// the socket, taking messages of up to `max_message` bytes.
pub async fn open(
    request: reqwest::RequestBuilder,
    max_message: usize,
) -> Result<ClientSocket, UpgradeError> {
    // Not a secret: it only pairs the request with its answer (a v7 UUID has random bits).
    let key = base64::engine::general_purpose::STANDARD.encode(uuid::Uuid::now_v7().as_bytes());
    let response = request
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "websocket")
        .header(header::SEC_WEBSOCKET_VERSION, "13")
        .header(header::SEC_WEBSOCKET_KEY, &key)
        .send()
        .await
        .map_err(UpgradeError::Send)?;
    let status = response.status();
    if status != reqwest::StatusCode::SWITCHING_PROTOCOLS {
        let message = response
            .json::<serde_json::Value>()
            .await
            .ok()
            .and_then(|body| body["error"]["message"].as_str().map(str::to_string));
        return Err(UpgradeError::Status { status, message });
    }
    let accepted = response
        .headers()
        .get(header::SEC_WEBSOCKET_ACCEPT)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    if accepted.as_deref() != Some(derive_accept_key(key.as_bytes()).as_str()) {
        return Err(UpgradeError::NotWebSocket);
    }
    let upgraded = response.upgrade().await.map_err(UpgradeError::Upgrade)?;
    let config = WebSocketConfig::default()
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message));
    Ok(WebSocketStream::from_raw_socket(upgraded, Role::Client, Some(config)).await)
}
