//! Saving a call's result: with the child work admitted for the call and the deliveries it
//! handles, in one commit; a known result is held while its save retries, and a result that
//! comes back after a takeover is kept as a late result.

use std::sync::PoisonError;
use std::time::Duration;

use openbot_core::turn::{CallKey, CallResult, CallSlot, HostError};
use openbot_schema::EventKind;

use super::DurableHost;
use crate::engine::Wake;
use crate::store::{CallPhase, CallWrite, Commit, StoreError};
use crate::turns::faults::{FaultPoint, fault};

/// How long a known result is held while its save is retried (the spec's F03: the provider is
/// not called again). When it is spent the phase fails on storage: an unsafe write then waits
/// in `outcome_unknown` for a person's decision.
pub const RESULT_SAVE_BUDGET: Duration = Duration::from_secs(120);

impl DurableHost {
    /// Saves `key`'s result, and in the same commit the intents of `intents` (the tool calls a
    /// model answer asked for).
    pub(super) async fn save_result(
        &self,
        key: CallKey,
        result: CallResult,
        events: Vec<EventKind>,
        intents: Vec<CallKey>,
    ) -> Result<(), HostError> {
        self.barrier().await?;
        let usage = match &result {
            CallResult::Model { usage, .. } => *usage,
            CallResult::Tool { .. } => None,
        };
        let sealed = self
            .cx
            .seal_json(&result)
            .map_err(|e| self.fail(StoreError::Invalid(e.to_string())))?;
        let call = CallWrite {
            key,
            phase: CallPhase::Done,
            idempotency_key: self.idempotency_key(key),
            result: Some(sealed),
            usage,
        };
        // A model call's usage settles its reservation in the same commit.
        let writes = self.settlement(key, usage);
        let usage = self.priced(key, usage);
        let handled_signals = self
            .delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key)
            .unwrap_or_default();
        let (children, events) = match self
            .admitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key)
        {
            Some(admitted) => {
                let mut all = events;
                all.extend(admitted.events);
                (admitted.children, all)
            }
            None => (Vec::new(), events),
        };
        let intents: Vec<CallWrite> = intents
            .into_iter()
            .map(|key| CallWrite {
                key,
                phase: CallPhase::Intent,
                idempotency_key: self.idempotency_key(key),
                result: None,
                usage: None,
            })
            .collect();
        let mut calls = vec![call.clone()];
        calls.extend(intents.iter().cloned());
        let commit = Commit {
            calls,
            events,
            usage,
            handled_signals,
            children,
            writes: writes.clone(),
            ..Commit::default()
        };
        match self.commit_known_result(key, commit).await {
            Ok(()) => {
                self.settled(key);
                self.remember(&call);
                for intent in &intents {
                    self.remember(intent);
                }
                if matches!(key.slot, CallSlot::Tool(_)) {
                    fault(FaultPoint::AfterToolResult);
                }
                Ok(())
            }
            Err(StoreError::Fenced(_)) => {
                // A late result: kept in the call log, never published by this old owner.
                if let Err(err) = self
                    .cx
                    .store
                    .save_late_result(self.id, self.generation, call, writes)
                    .await
                {
                    tracing::warn!(execution = %self.id, error = %err, "could not save a late result");
                } else {
                    self.cx.hub.announce(Wake::Work);
                }
                Err(self.fail(StoreError::Fenced(self.id)))
            }
            // The Chat was deleted: its tree starts nothing new, and this Turn stops.
            Err(StoreError::AdmissionClosed) => Err(HostError::Denied(
                "the Chat was deleted: it admits no new work".into(),
            )),
            Err(err) => Err(self.fail(err)),
        }
    }

    /// Commits a step that saves a known result. A passing storage failure does not drop the
    /// result: it is held and its commit retried with the storage backoff (100 ms to 5 s) for
    /// up to [`RESULT_SAVE_BUDGET`]. Before each retry the call log is read, since a commit whose
    /// reply was lost may have landed: a saved result of this owner means it did.
    pub(super) async fn commit_known_result(
        &self,
        key: CallKey,
        commit: Commit,
    ) -> Result<(), StoreError> {
        let deadline = tokio::time::Instant::now() + RESULT_SAVE_BUDGET;
        let mut backoff = crate::engine::Backoff::new();
        loop {
            match self
                .cx
                .commit(self.id, self.generation, commit.clone())
                .await
            {
                Ok(_) => return Ok(()),
                Err(err) if err.is_transient() && tokio::time::Instant::now() < deadline => {}
                Err(err) => return Err(err),
            }
            // The cause stays out of the log: it may carry stored text.
            tracing::warn!(
                execution = %self.id,
                "a known result could not be saved; holding it and trying again"
            );
            tokio::time::sleep(backoff.next_delay()).await;
            if let Ok(Some(row)) = self.cx.store.latest_call(self.id, key.step, key.slot).await
                && row.key == key
                && row.phase == CallPhase::Done
                && row.generation == self.generation
                && !row.late
            {
                return Ok(());
            }
        }
    }
}
