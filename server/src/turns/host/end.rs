//! The end of a Turn, saved in one commit, with what the host held for it (the final answer,
//! its text).

use openbot_core::turn::{HostError, TurnEnd};
use openbot_schema::{ErrorId, EventKind, ExecutionState, TurnOutcome};

use super::DurableHost;
use crate::engine::Wake;
use crate::store::{Commit, StateChange, StoreError};
use crate::turns::faults::labels;

/// The host's part for the Turn's end: where a delegated Turn's answer goes, the work its
/// completion starts, and whether the last input check found nothing.
#[derive(Default)]
pub(super) struct Ending {
    /// For a delegated Turn: where its answer goes when it ends, and its parent to wake.
    pub(super) source: Option<(crate::turns::SourceLink, openbot_schema::ExecutionId)>,
    /// Work the Turn's end starts when it completes (its memory learning).
    pub(super) end_children: Vec<crate::store::NewChild>,
    /// The last input check found nothing: the Turn's end closes its input.
    pub(super) closing: std::sync::atomic::AtomicBool,
}

impl DurableHost {
    /// Saves the Turn's end: its state, its last event, its messages (sealed, for the Chat's
    /// history), the cancel signals it handled and, for a delegated Turn, its notice.
    pub(super) async fn finish_turn(&self, end: TurnEnd) -> Result<(), HostError> {
        let (state, outcome, failure, event) = match &end.outcome {
            Ok(outcome) => {
                let state = if *outcome == TurnOutcome::Cancelled {
                    ExecutionState::Cancelled
                } else {
                    ExecutionState::Completed
                };
                (
                    state,
                    Some(*outcome),
                    None,
                    EventKind::TurnEnded {
                        outcome: *outcome,
                        // The saved total (the Turn's own usage and its children's), with
                        // the final answer's, held for this commit.
                        usage: {
                            let mut usage = self
                                .cx
                                .store
                                .execution(self.id)
                                .await
                                .map_err(|e| self.fail(e))?
                                .usage;
                            if let Some(held) = self.held_usage() {
                                usage += held;
                            }
                            usage
                        },
                    },
                )
            }
            Err(failure) => {
                let blob = self
                    .cx
                    .keys
                    .seal(uuid::Uuid::now_v7(), failure.cause.as_bytes())
                    .map_err(|e| self.fail(StoreError::Invalid(e.to_string())))?;
                let error_id = ErrorId::from(blob.id);
                tracing::warn!(category = ?failure.category, %error_id, "turn failed");
                (
                    ExecutionState::Failed,
                    None,
                    Some((failure.category, blob)),
                    EventKind::Failed {
                        category: failure.category,
                        error_id,
                    },
                )
            }
        };
        let handled_signals = if state == ExecutionState::Cancelled {
            self.pending_cancels().await
        } else {
            Vec::new()
        };
        let notice = self.source_notice(&end);
        let children = if matches!(end.outcome, Ok(TurnOutcome::Completed)) {
            self.ending.end_children.clone()
        } else {
            Vec::new()
        };
        // The Turn's messages, kept for its Chat's history.
        let output = self
            .cx
            .seal_json(&end.messages)
            .map_err(|e| self.fail(StoreError::Invalid(e.to_string())))?;
        let change = StateChange {
            state,
            outcome,
            failure,
            wake_at: None,
            unknown_call: None,
            output: Some(output),
            release: true,
            reason: None,
        };
        // After a last input check that found nothing, this commit closes the input; input that
        // arrived after that check refuses it (`HostError::InputArrived`), and the Turn goes on.
        let writes = self.release_holds(&self.held_results()).await?;
        let close_input = self
            .ending
            .closing
            .swap(false, std::sync::atomic::Ordering::SeqCst);
        self.commit(
            Commit {
                events: vec![event],
                state: Some(change),
                handled_signals,
                notice,
                close_input,
                children,
                writes,
                ..Commit::default()
            },
            &[labels::END],
            None,
        )
        .await?;
        if let Some((_, parent)) = &self.ending.source {
            self.cx.hub.announce(Wake::Signal(*parent));
        }
        Ok(())
    }
}
