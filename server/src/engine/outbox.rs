//! The outbox: outgoing commands committed with the step that produced them, delivered after
//! the commit by a dispatcher on every node. Delivery is at least once, in order per pass; a
//! message that keeps failing is tried again later and never holds up the ones after it, and
//! after its attempts are used up it stays in the outbox with its last error for a person.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use openbot_schema::ExecutionId;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::EngineContext;
use super::program::err_kind;
use super::signals::Wake;
use crate::store::{OutboxRow, StoreError};

/// How long a dispatcher holds the messages it claimed.
const CLAIM_MS: i64 = 30_000;
/// How many messages a dispatcher claims at a time.
const PAGE: i64 = 100;
/// How long a dispatcher sleeps without a wake-up before it looks anyway.
const IDLE_POLL: Duration = Duration::from_secs(5);

/// Delivers one kind of outbox message. Must be idempotent: a message may be delivered again
/// if its node stops between delivering it and recording that.
#[async_trait]
pub trait OutboxHandler: Send + Sync + 'static {
    /// Delivers the message; an error is kept as the message's last error, safe to show.
    async fn deliver(&self, cx: &EngineContext, message: &OutboxRow) -> Result<(), String>;
}

/// The outbox kind that sends a signal to another execution.
pub const SIGNAL: &str = "signal";

/// The payload of a [`SIGNAL`] message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalMessage {
    /// The execution to signal.
    pub execution: ExecutionId,
    /// The signal, e.g. `cancel`.
    pub signal: String,
}

impl SignalMessage {
    /// This message as an outbox entry for [`crate::store::Commit::outbox`].
    pub fn to_outbox(&self) -> (String, String) {
        (
            SIGNAL.to_string(),
            serde_json::to_string(self).unwrap_or_default(),
        )
    }
}

struct SignalHandler;

#[async_trait]
impl OutboxHandler for SignalHandler {
    async fn deliver(&self, cx: &EngineContext, message: &OutboxRow) -> Result<(), String> {
        let signal: SignalMessage = serde_json::from_str(&message.payload)
            .map_err(|e| format!("invalid signal message: {e}"))?;
        match cx
            .store
            .signal(signal.execution, &signal.signal, "{}")
            .await
        {
            // A signal to work that has ended has nothing left to do.
            Ok(_) | Err(StoreError::Ended(_)) => {
                cx.hub.announce(Wake::Signal(signal.execution));
                cx.hub.announce(Wake::Work);
                Ok(())
            }
            Err(StoreError::NotFound(id)) => Err(format!("execution {id} does not exist")),
            Err(err) => Err(format!("storage: {}", err_kind(&err))),
        }
    }
}

/// The outbox handlers of a node, by kind.
#[derive(Clone)]
pub struct OutboxHandlers {
    handlers: HashMap<String, Arc<dyn OutboxHandler>>,
}

impl Default for OutboxHandlers {
    fn default() -> Self {
        let mut handlers: HashMap<String, Arc<dyn OutboxHandler>> = HashMap::new();
        handlers.insert(SIGNAL.into(), Arc::new(SignalHandler));
        Self { handlers }
    }
}

impl OutboxHandlers {
    /// Registers the handler of a kind.
    pub fn register(&mut self, kind: &str, handler: Arc<dyn OutboxHandler>) {
        self.handlers.insert(kind.to_string(), handler);
    }
}

/// Delivers outbox messages until `stop`.
pub(crate) async fn dispatch(
    cx: Arc<EngineContext>,
    handlers: OutboxHandlers,
    stop: CancellationToken,
) {
    loop {
        let claimed = match cx.store.claim_outbox(CLAIM_MS, PAGE).await {
            Ok(claimed) => claimed,
            Err(err) => {
                tracing::warn!(
                    error_kind = err_kind(&err),
                    "claiming outbox messages failed"
                );
                Vec::new()
            }
        };
        let full = claimed.len() as i64 == PAGE;
        for message in claimed {
            let result = match handlers.handlers.get(&message.kind) {
                Some(handler) => handler.deliver(&cx, &message).await,
                None => Err(format!("no handler for outbox kind `{}`", message.kind)),
            };
            if let Err(reason) = &result {
                tracing::warn!(outbox = message.id, kind = %message.kind, "outbox delivery failed; it is tried again later");
                tracing::debug!(outbox = message.id, %reason, "outbox delivery failure");
            }
            // A failed message waits 1 s, doubling per failure up to 5 min, so it never holds
            // up the messages after it.
            let retry_at =
                crate::store::now_ms() + (1000i64 << message.attempts.clamp(0, 8)).min(300_000);
            if let Err(err) = cx
                .store
                .finish_outbox(message.id, result.err().as_deref(), retry_at)
                .await
            {
                tracing::warn!(
                    outbox = message.id,
                    error_kind = err_kind(&err),
                    "recording an outbox delivery failed"
                );
            }
        }
        if full {
            continue;
        }
        tokio::select! {
            _ = cx.hub.outbox() => {}
            _ = tokio::time::sleep(IDLE_POLL) => {}
            _ = stop.cancelled() => return,
        }
    }
}
