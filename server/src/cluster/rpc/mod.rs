//! Private RPC between the nodes of a cluster: `POST /rpc/v1/{operation}` on each node's RPC
//! listener (`--rpc-bind`, never the public port), signed with the cluster key both ways
//! ([`auth`]), with a deadline and a request ID on every call.
//!
//! Operations register themselves ([`Operations::with`]); the listener knows none by name but
//! its own `ping`. A call fails with a typed [`RpcError`] that says what is known about the
//! call: never run ([`RpcError::Unreachable`], [`RpcError::Refused`]), or maybe run
//! ([`RpcError::Deadline`], [`RpcError::Lost`], [`RpcError::Failed`]). None claims success,
//! and none is proof of anything about the other node's resources.

pub mod auth;
mod client;
mod listener;

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;

pub use client::NodeClient;
pub use listener::{Listener, PING};

/// The path prefix of RPC operations.
pub const PREFIX: &str = "/rpc/v1/";

/// Why a call to another node gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// No connection could be made: the call was not delivered, so it did not run.
    #[error("node {node} is unreachable")]
    Unreachable {
        /// The node called.
        node: String,
    },
    /// The node refused the call before running it (a bad signature, a replay, an unknown
    /// operation, a deadline already passed, a bad request).
    #[error("node {node} refused the call ({status}): {reason}")]
    Refused {
        /// The node called.
        node: String,
        /// The HTTP status of its refusal.
        status: u16,
        /// What it said.
        reason: String,
    },
    /// No answer came before the deadline: the call may have run, or may still run.
    #[error("node {node} gave no answer within the deadline; the call may have run")]
    Deadline {
        /// The node called.
        node: String,
    },
    /// The connection broke after the call was sent: it may have run.
    #[error("the connection to node {node} broke during the call; it may have run")]
    Lost {
        /// The node called.
        node: String,
    },
    /// The operation failed on the node: it may have run in part.
    #[error("node {node} failed the call ({status}): {reason}")]
    Failed {
        /// The node called.
        node: String,
        /// The HTTP status of its answer.
        status: u16,
        /// What it said.
        reason: String,
    },
    /// The answer is not signed with the cluster key for this call: whoever answered is not
    /// a node of this cluster, so nothing it said is believed.
    #[error("the answer from {node} is not signed for this call")]
    Unauthenticated {
        /// The node called.
        node: String,
    },
    /// The caller could not be set up (its HTTP client).
    #[error("the RPC client cannot start: {0}")]
    Setup(String),
}

impl RpcError {
    /// Whether the call may have run on the other node (so only its saved result, or the
    /// operation's own idempotency, can say what happened).
    pub fn may_have_run(&self) -> bool {
        matches!(
            self,
            RpcError::Deadline { .. }
                | RpcError::Lost { .. }
                | RpcError::Failed { .. }
                | RpcError::Unauthenticated { .. }
        )
    }
}

/// One call as its operation receives it, checked: from a node of the cluster, signed, fresh.
#[derive(Debug, Clone)]
pub struct Call {
    /// The calling node's name.
    pub from: String,
    /// The call's ID, the same on each try of one call: what an operation that may be tried
    /// twice keys its effect by.
    pub request_id: String,
    /// The request body.
    pub body: bytes::Bytes,
    /// When the caller stops waiting (ms since the epoch); the operation is cut off then.
    pub deadline_ms: i64,
}

/// Why an operation gave no result.
#[derive(Debug, thiserror::Error)]
pub enum OperationError {
    /// The request is not one the operation takes (answered 400; it did not run).
    #[error("{0}")]
    BadRequest(String),
    /// It failed (answered 500 with this text, which must hold no secret or full cause).
    #[error("{0}")]
    Failed(String),
}

/// An operation's handler.
pub type Handler =
    Arc<dyn Fn(Call) -> BoxFuture<'static, Result<Vec<u8>, OperationError>> + Send + Sync>;

/// The operations a node answers, by name.
#[derive(Clone, Default)]
pub struct Operations(HashMap<&'static str, Handler>);

impl std::fmt::Debug for Operations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<_> = self.0.keys().collect();
        names.sort();
        f.debug_tuple("Operations").field(&names).finish()
    }
}

impl Operations {
    /// These operations with `name` answered by `handler` (replacing an earlier one).
    pub fn with<F, Fut>(mut self, name: &'static str, handler: F) -> Self
    where
        F: Fn(Call) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Vec<u8>, OperationError>> + Send + 'static,
    {
        self.0
            .insert(name, Arc::new(move |call| Box::pin(handler(call))));
        self
    }

    fn get(&self, name: &str) -> Option<&Handler> {
        self.0.get(name)
    }
}
