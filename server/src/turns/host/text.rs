//! Text batching: text deltas go to a flush task, which holds them for up to [`TEXT_LINGER`]
//! and then commits what arrived as one event per step and attempt. The host's next commit
//! takes the deltas not yet committed (`drain_text`) and carries them itself, in order before
//! its own events, so a stream that ends within the linger costs no commit of its own.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use openbot_core::turn::HostError;
use openbot_schema::{EventKind, ExecutionId};
use tokio::sync::{mpsc, oneshot};

use super::DurableHost;
use crate::engine::EngineContext;
use crate::store::{Commit, StoreError};
use crate::turns::faults::{commit_starts, labels};

/// How long the flush task holds the first delta of a batch before it commits the batch: a
/// stream that ends sooner has its text committed with the answer, and observers of a longer
/// one see its text this much later at most (plus the commit).
pub const TEXT_LINGER: Duration = Duration::from_millis(20);

/// What the host and its flush task share about text not yet committed.
#[derive(Default)]
pub(super) struct TextState {
    /// Deltas sent to the flush task and not yet committed or handed back.
    pub(super) unflushed: AtomicUsize,
    /// Why flushing stopped, once it did.
    pub(super) broken: Mutex<Option<HostError>>,
}

/// The host's part for text: the sender to its flush task and what they share.
pub(super) struct TextBatches {
    sender: mpsc::UnboundedSender<TextMessage>,
    state: Arc<TextState>,
}

impl TextBatches {
    /// Starts the flush task of `generation`'s run of execution `id`; a commit it cannot make
    /// is kept typed in `failure`.
    pub(super) fn start(
        cx: &Arc<EngineContext>,
        id: ExecutionId,
        generation: i64,
        failure: &Arc<Mutex<Option<StoreError>>>,
    ) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        let state = Arc::new(TextState::default());
        crate::telemetry::spawn(flush_text(
            Arc::clone(cx),
            id,
            generation,
            receiver,
            Arc::clone(failure),
            Arc::clone(&state),
        ));
        Self { sender, state }
    }
}

pub(super) enum TextMessage {
    Delta {
        step: u32,
        attempt: u32,
        text: String,
    },
    /// Hands back the deltas not yet committed, for the sender's own commit.
    Drain(oneshot::Sender<Result<Vec<EventKind>, HostError>>),
}

impl DurableHost {
    /// Takes the text deltas sent so far and not yet committed, joined per step and attempt,
    /// for the caller to commit before its own events. Fails once flushing failed.
    pub(super) async fn drain_text(&self) -> Result<Vec<EventKind>, HostError> {
        // Nothing sent and not yet committed: no round trip to the flush task.
        if self.text.state.unflushed.load(Ordering::SeqCst) == 0 {
            let broken = self
                .text
                .state
                .broken
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            return broken.map_or(Ok(Vec::new()), Err);
        }
        let (ack, done) = oneshot::channel();
        self.text
            .sender
            .send(TextMessage::Drain(ack))
            .map_err(|_| HostError::Closed)?;
        done.await.map_err(|_| HostError::Closed)?
    }

    /// Whether text deltas wait to be committed.
    pub(super) fn text_waiting(&self) -> bool {
        self.text.state.unflushed.load(Ordering::SeqCst) > 0
    }

    /// Hands a text delta to the flush task; it is committed with the next batch or the
    /// host's next commit, whichever comes first.
    pub(super) fn send_delta(
        &self,
        step: u32,
        attempt: u32,
        text: String,
    ) -> Result<(), HostError> {
        self.text.state.unflushed.fetch_add(1, Ordering::SeqCst);
        self.text
            .sender
            .send(TextMessage::Delta {
                step,
                attempt,
                text,
            })
            .map_err(|_| HostError::Closed)
    }
}

/// Adds a delta to `events`, joined to the last one of the same step and attempt.
fn join(events: &mut Vec<EventKind>, step: u32, attempt: u32, text: String) {
    match events.last_mut() {
        Some(EventKind::TextDelta {
            step: s,
            attempt: a,
            text: joined,
        }) if *s == step && *a == attempt => joined.push_str(&text),
        _ => events.push(EventKind::TextDelta {
            step,
            attempt,
            text,
        }),
    }
}

/// Holds text deltas for up to [`TEXT_LINGER`] and commits them as a batch, unless the host
/// drains them first for its own commit.
pub(super) async fn flush_text(
    cx: Arc<EngineContext>,
    id: ExecutionId,
    generation: i64,
    mut receiver: mpsc::UnboundedReceiver<TextMessage>,
    failure: Arc<Mutex<Option<StoreError>>>,
    state: Arc<TextState>,
) {
    let mut broken: Option<HostError> = None;
    let mut held: Vec<EventKind> = Vec::new();
    let mut deltas = 0usize;
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        let message = match deadline {
            None => receiver.recv().await,
            Some(at) => tokio::select! {
                message = receiver.recv() => message,
                _ = tokio::time::sleep_until(at) => {
                    deadline = None;
                    let events = std::mem::take(&mut held);
                    if broken.is_none() {
                        let fault = commit_starts(&[labels::TEXT]);
                        let commit = Commit { events, ..Commit::default() };
                        match cx.commit(id, generation, commit).await {
                            Ok(_) if !fault.lose_reply() => fault.after(),
                            Ok(_) => broken = Some(HostError::Storage("the text commit's reply was lost".into())),
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
                    state.unflushed.fetch_sub(std::mem::take(&mut deltas), Ordering::SeqCst);
                    continue;
                }
            },
        };
        match message {
            // The host is gone: text it never committed belongs to no saved step.
            None => break,
            Some(TextMessage::Delta {
                step,
                attempt,
                text,
            }) => {
                join(&mut held, step, attempt, text);
                deltas += 1;
                if deadline.is_none() {
                    deadline = Some(tokio::time::Instant::now() + TEXT_LINGER);
                }
            }
            Some(TextMessage::Drain(ack)) => {
                deadline = None;
                let events = std::mem::take(&mut held);
                state
                    .unflushed
                    .fetch_sub(std::mem::take(&mut deltas), Ordering::SeqCst);
                let _ = ack.send(match &broken {
                    Some(err) => Err(err.clone()),
                    None => Ok(events),
                });
            }
        }
    }
}
