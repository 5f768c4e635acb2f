//! Host tools: a call whose result the caller delivers. The Turn waits (state `waiting`) until a
//! delivered result arrives as a numbered signal naming a sealed result; the first one wins, and
//! every delivery for the call is handled when the result is saved.

use std::sync::PoisonError;
use std::time::Duration;

use openbot_core::turn::{CallKey, HostError};
use openbot_schema::{ExecutionState, ToolCall, ToolResult};

use super::DurableHost;
use super::children::waiting_free;
use crate::store::{Commit, StateChange};
use crate::turns::delivery::DeliveredResult;

/// How long a waiting host tool re-reads its call without a wake-up.
const DELIVERY_POLL: Duration = Duration::from_secs(2);

impl DurableHost {
    /// The first result delivered for `call`, if any. Every delivery for it is noted, to be
    /// handled when the result is saved.
    pub(super) async fn take_delivery(
        &self,
        key: CallKey,
        call: &ToolCall,
    ) -> Result<Option<ToolResult>, HostError> {
        let signals = self
            .cx
            .store
            .pending_signals(self.id)
            .await
            .map_err(|e| self.fail(e))?;
        let mut numbers = Vec::new();
        let mut record = None;
        for signal in &signals {
            if let Some(delivered) = DeliveredResult::from_signal(signal)
                && delivered.call_id == call.id
            {
                numbers.push(signal.number);
                record.get_or_insert(delivered.record);
            }
        }
        let Some(record) = record else {
            return Ok(None);
        };
        let delivered: ToolResult = self.open_sealed(record).await?;
        self.log
            .delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, numbers);
        // The call's own ID and name, whatever the caller sent.
        Ok(Some(ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            ..delivered
        }))
    }

    pub(super) async fn wait_delivered(
        &self,
        key: CallKey,
        call: &ToolCall,
    ) -> Result<ToolResult, HostError> {
        let waiting = StateChange {
            state: ExecutionState::Waiting,
            outcome: None,
            failure: None,
            wake_at: None,
            unknown_call: None,
            output: None,
            release: false,
            reason: None,
        };
        self.commit(
            Commit {
                state: Some(waiting),
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
                // Paused: stop waiting here; a resumed owner waits again.
                return Err(HostError::Closed);
            }
            if let Some(result) = self.take_delivery(key, call).await? {
                let running = StateChange {
                    state: ExecutionState::Running,
                    ..waiting_free()
                };
                self.commit(
                    Commit {
                        state: Some(running),
                        ..Commit::default()
                    },
                    &[crate::turns::faults::labels::STATE],
                    None,
                )
                .await?;
                return Ok(result);
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(DELIVERY_POLL) => {}
                _ = cancelled.cancelled() => return Err(HostError::Abandoned),
            }
            tracing::trace!(call = %call.id, "still waiting for a delivered result");
        }
    }

    /// The cancel signals not yet handled; the end of a cancelled Turn handles them.
    pub(super) async fn pending_cancels(&self) -> Vec<i64> {
        match self.cx.store.pending_signals(self.id).await {
            Ok(signals) => signals
                .into_iter()
                .filter(|s| s.kind == "cancel")
                .map(|s| s.number)
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}
