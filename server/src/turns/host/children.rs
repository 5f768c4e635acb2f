//! Child work of a Turn: waiting for attached children (delegated Turns) before it ends, and
//! the notice a delegated Turn sends its source when it ends.

use std::sync::Arc;
use std::time::Duration;

use openbot_core::turn::{CallSlot, HostError, TurnEnd};
use openbot_schema::ExecutionState;

use super::DurableHost;
use crate::store::{Commit, NoticeWrite, StateChange};
use crate::work::notice_content;

/// How often a Turn that waits for its attached children re-reads them without a wake-up.
const CHILDREN_POLL: Duration = Duration::from_millis(500);

impl DurableHost {
    /// Waits while the Turn has attached children (delegated Turns) that have not ended: their
    /// notices come in as input. Returns at once when it has none, without a read when it
    /// made no tool call (a child is admitted for a tool call and committed with its result).
    pub(super) async fn wait_for_children(&self) -> Result<(), HostError> {
        if !self
            .any_call(|row| !matches!(row.key.slot, CallSlot::Model))
            .await?
        {
            return Ok(());
        }
        let open = |this: &Self| {
            let store = Arc::clone(&this.cx.store);
            let id = this.id;
            async move { store.open_children(id, true).await }
        };
        if open(self).await.map_err(|e| self.fail(e))?.is_empty() {
            return Ok(());
        }
        self.commit(
            Commit {
                state: Some(StateChange {
                    state: ExecutionState::Waiting,
                    ..waiting_free()
                }),
                ..Commit::default()
            },
            &[crate::turns::faults::labels::STATE],
            None,
        )
        .await?;
        let cancelled = self.scope.cancellation();
        loop {
            let notified = self.signals.notified();
            if !self.scope.gate_open() {
                return Err(HostError::Closed);
            }
            if open(self).await.map_err(|e| self.fail(e))?.is_empty() {
                break;
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(CHILDREN_POLL) => {}
                _ = cancelled.cancelled() => return Err(HostError::Abandoned),
            }
        }
        self.commit(
            Commit {
                state: Some(waiting_free()),
                ..Commit::default()
            },
            &[crate::turns::faults::labels::STATE],
            None,
        )
        .await
    }

    /// The notice a delegated Turn sends its source when it ends.
    pub(super) fn source_notice(&self, end: &TurnEnd) -> Option<NoticeWrite> {
        let (source, _) = self.ending.source.as_ref()?;
        let text = match &end.outcome {
            Ok(outcome) => format!(
                "[notice] {} ended ({}). Its answer:\n{}",
                source.label,
                crate::store::outcome_name(*outcome),
                crate::work::final_answer(&end.messages)
            ),
            Err(failure) => format!(
                "[notice] {} failed ({}).",
                source.label,
                crate::store::category_name(failure.category)
            ),
        };
        Some(NoticeWrite {
            target: source.notice.into(),
            content: notice_content(&text),
        })
    }
}

pub(super) fn waiting_free() -> StateChange {
    StateChange {
        state: ExecutionState::Running,
        outcome: None,
        failure: None,
        wake_at: None,
        unknown_call: None,
        output: None,
        release: false,
        reason: None,
    }
}
