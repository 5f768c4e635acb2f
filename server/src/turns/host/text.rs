//! Text batching: text deltas go to a flush task that commits whatever arrived while the last
//! batch was being committed as one event per step and attempt, so a fast stream costs a few
//! commits; a barrier waits until every delta sent so far is committed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use openbot_core::turn::HostError;
use openbot_schema::{EventKind, ExecutionId};
use tokio::sync::{mpsc, oneshot};

use super::DurableHost;
use crate::engine::EngineContext;
use crate::store::{Commit, StoreError};

/// What the host and its flush task share about text not yet committed.
#[derive(Default)]
pub(super) struct TextState {
    /// Deltas sent to the flush task and not yet committed (or given up).
    pub(super) unflushed: AtomicUsize,
    /// Why flushing stopped, once it did.
    pub(super) broken: Mutex<Option<HostError>>,
}

pub(super) enum TextMessage {
    Delta {
        step: u32,
        attempt: u32,
        text: String,
    },
    Barrier(oneshot::Sender<Result<(), HostError>>),
}

impl DurableHost {
    /// Waits until every text delta sent so far is committed.
    pub(super) async fn barrier(&self) -> Result<(), HostError> {
        // Nothing sent and not yet committed: no round trip to the flush task.
        if self.text_state.unflushed.load(Ordering::SeqCst) == 0 {
            let broken = self
                .text_state
                .broken
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            return broken.map_or(Ok(()), Err);
        }
        let (ack, done) = oneshot::channel();
        self.text
            .send(TextMessage::Barrier(ack))
            .map_err(|_| HostError::Closed)?;
        done.await.map_err(|_| HostError::Closed)?
    }

    /// Hands a text delta to the flush task; it is committed with the next batch.
    pub(super) fn send_delta(
        &self,
        step: u32,
        attempt: u32,
        text: String,
    ) -> Result<(), HostError> {
        self.text_state.unflushed.fetch_add(1, Ordering::SeqCst);
        self.text
            .send(TextMessage::Delta {
                step,
                attempt,
                text,
            })
            .map_err(|_| HostError::Closed)
    }
}

/// Commits text deltas in small batches: whatever arrived while the last batch was being
/// committed goes out as one event per step and attempt. A barrier waits for all before it.
pub(super) async fn flush_text(
    cx: Arc<EngineContext>,
    id: ExecutionId,
    generation: i64,
    mut receiver: mpsc::UnboundedReceiver<TextMessage>,
    failure: Arc<Mutex<Option<StoreError>>>,
    state: Arc<TextState>,
) {
    let mut broken: Option<HostError> = None;
    while let Some(first) = receiver.recv().await {
        let mut batch = vec![first];
        while let Ok(next) = receiver.try_recv() {
            batch.push(next);
        }
        let mut events: Vec<EventKind> = Vec::new();
        let mut acks = Vec::new();
        let deltas = batch
            .iter()
            .filter(|m| matches!(m, TextMessage::Delta { .. }))
            .count();
        for message in batch {
            match message {
                TextMessage::Delta {
                    step,
                    attempt,
                    text,
                } => match events.last_mut() {
                    Some(EventKind::TextDelta {
                        step: s,
                        attempt: a,
                        text: joined,
                    }) if *s == step && *a == attempt => {
                        joined.push_str(&text);
                    }
                    _ => events.push(EventKind::TextDelta {
                        step,
                        attempt,
                        text,
                    }),
                },
                TextMessage::Barrier(ack) => acks.push(ack),
            }
        }
        if !events.is_empty() && broken.is_none() {
            match cx
                .commit(
                    id,
                    generation,
                    Commit {
                        events,
                        ..Commit::default()
                    },
                )
                .await
            {
                Ok(_) => {}
                Err(err) => {
                    broken = Some(match &err {
                        StoreError::Fenced(_) => HostError::Fenced,
                        StoreError::Ended(_) => HostError::Closed,
                        other => HostError::Storage(other.to_string()),
                    });
                    *failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(err);
                }
            }
        }
        if let Some(err) = &broken {
            *state.broken.lock().unwrap_or_else(PoisonError::into_inner) = Some(err.clone());
        }
        state.unflushed.fetch_sub(deltas, Ordering::SeqCst);
        for ack in acks {
            let _ = ack.send(match &broken {
                Some(err) => Err(err.clone()),
                None => Ok(()),
            });
        }
    }
}
