//! A node's RPC listener: `POST /rpc/v1/{operation}` for signed, fresh calls from the
//! cluster's nodes, and nothing else (every other path and method is a 404, and the public
//! API is never served here).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tracing::Instrument as _;
use uuid::Uuid;

use super::auth::{self, ClusterKey, SeenNonces, header};
use super::{Call, OperationError, Operations, PREFIX};
use crate::store::now_ms;

/// The operation every node answers: its name, incarnation and clock.
pub const PING: &str = "ping";

/// The target of RPC spans.
const TARGET: &str = "openbot::rpc";

/// A node's RPC listener.
#[derive(Debug)]
pub struct Listener {
    node: String,
    key: ClusterKey,
    operations: Operations,
    seen: SeenNonces,
}

impl Listener {
    /// The listener of node `node` (incarnation `incarnation`), answering `operations` and
    /// [`PING`].
    pub fn new(
        node: &str,
        incarnation: Uuid,
        key: ClusterKey,
        operations: Operations,
    ) -> Arc<Self> {
        let name = node.to_string();
        let operations = operations.with(PING, move |_call| {
            let name = name.clone();
            async move {
                Ok(
                    json!({"node": name, "incarnation": incarnation, "time_ms": now_ms()})
                        .to_string()
                        .into_bytes(),
                )
            }
        });
        Arc::new(Self {
            node: node.to_string(),
            key,
            operations,
            seen: SeenNonces::default(),
        })
    }

    /// The listener's router: the operations, and a 404 for anything else.
    pub fn router(self: Arc<Self>) -> axum::Router {
        axum::Router::new()
            .route(
                &format!("{PREFIX}{{operation}}"),
                axum::routing::post(answer),
            )
            .fallback(|| async { (StatusCode::NOT_FOUND, "not an RPC operation") })
            .with_state(self)
    }

    /// A refusal or answer, signed for the request's nonce (when it had one).
    fn reply(&self, nonce: Option<&str>, status: StatusCode, body: Vec<u8>) -> Response {
        let mut response = (status, body.clone()).into_response();
        if let Some(nonce) = nonce {
            let digest = auth::digest(&body);
            let code = status.as_u16().to_string();
            let signature = self
                .key
                .sign(&auth::answer_parts(nonce, &code, &self.node, &digest));
            let headers = response.headers_mut();
            if let Ok(value) = HeaderValue::from_str(&signature) {
                headers.insert(header::SIGNATURE, value);
            }
            if let Ok(value) = HeaderValue::from_str(&self.node) {
                headers.insert(header::NODE, value);
            }
        }
        response
    }

    fn refuse(&self, nonce: Option<&str>, status: StatusCode, reason: &str) -> Response {
        tracing::debug!(target: TARGET, status = status.as_u16(), reason, "RPC call refused");
        let body = json!({"error": reason}).to_string().into_bytes();
        self.reply(nonce, status, body)
    }
}

fn text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

async fn answer(
    State(listener): State<Arc<Listener>>,
    Path(operation): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let nonce = text(&headers, header::NONCE);
    let (Some(nonce), Some(node), Some(time), Some(deadline), Some(request_id), Some(signature)) = (
        nonce,
        text(&headers, header::NODE),
        text(&headers, header::TIME),
        text(&headers, header::DEADLINE),
        text(&headers, header::REQUEST_ID),
        text(&headers, header::SIGNATURE),
    ) else {
        return listener.refuse(nonce, StatusCode::UNAUTHORIZED, "unsigned call");
    };
    let path = format!("{PREFIX}{operation}");
    let digest = auth::digest(&body);
    let head = auth::RequestHead {
        method: "POST",
        path: &path,
        node,
        time,
        nonce,
        deadline,
        request_id,
    };
    let parts = head.parts(&digest);
    if !listener.key.verify(&parts, signature) {
        return listener.refuse(Some(nonce), StatusCode::UNAUTHORIZED, "bad signature");
    }
    let (Ok(time), Ok(deadline_ms)) = (time.parse::<i64>(), deadline.parse::<i64>()) else {
        return listener.refuse(Some(nonce), StatusCode::BAD_REQUEST, "bad time or deadline");
    };
    let now = now_ms();
    if (now - time).abs() > auth::WINDOW.as_millis() as i64 {
        return listener.refuse(Some(nonce), StatusCode::UNAUTHORIZED, "stale call");
    }
    if !listener.seen.first_time(nonce, now) {
        return listener.refuse(Some(nonce), StatusCode::UNAUTHORIZED, "replayed call");
    }
    if deadline_ms <= now {
        return listener.refuse(Some(nonce), StatusCode::REQUEST_TIMEOUT, "deadline passed");
    }
    let Some(handler) = listener.operations.get(&operation) else {
        return listener.refuse(Some(nonce), StatusCode::NOT_FOUND, "unknown operation");
    };
    let span = tracing::info_span!(
        target: TARGET,
        "rpc",
        "otel.name" = %format!("rpc {operation}"),
        "otel.kind" = "server",
        "rpc.method" = %operation,
        from = %node,
        request_id = %request_id,
    );
    let call = Call {
        from: node.to_string(),
        request_id: request_id.to_string(),
        body,
        deadline_ms,
    };
    let left = Duration::from_millis((deadline_ms - now) as u64);
    match tokio::time::timeout(left, handler(call).instrument(span)).await {
        Ok(Ok(body)) => listener.reply(Some(nonce), StatusCode::OK, body),
        Ok(Err(OperationError::BadRequest(reason))) => {
            listener.refuse(Some(nonce), StatusCode::BAD_REQUEST, &reason)
        }
        Ok(Err(OperationError::Failed(reason))) => {
            listener.refuse(Some(nonce), StatusCode::INTERNAL_SERVER_ERROR, &reason)
        }
        Err(_) => listener.refuse(
            Some(nonce),
            StatusCode::GATEWAY_TIMEOUT,
            "the deadline passed while it ran",
        ),
    }
}
