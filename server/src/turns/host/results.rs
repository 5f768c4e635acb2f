//! Saving a call's result: with the child work admitted for the call and the deliveries it
//! handles, in one commit; a model answer with the intents of the tool calls it asked for (a
//! retry-safe tool's call already as `sending`); the last result of a step and a final answer
//! held for the next commit (see `held`); a known result held while its save retries, and a
//! result that comes back after a takeover kept as a late result.

use std::sync::PoisonError;
use std::time::Duration;

use openbot_core::turn::{CODE_CLOCK_CALL, CallKey, CallResult, CallSlot, HostError};
use openbot_schema::{EventKind, Message};

use super::DurableHost;
use super::held::lost_reply;
use crate::store::{CallPhase, Commit, StoreError};
use crate::turns::faults::{CommitFault, FaultPoint, fault, labels};

/// How long a known result is held while its save is retried (the spec's F03: the provider is
/// not called again). When it is spent the phase fails on storage: an unsafe write then waits
/// in `outcome_unknown` for a person's decision.
pub const RESULT_SAVE_BUDGET: Duration = Duration::from_secs(120);

impl DurableHost {
    /// Saves `key`'s result, and in the same commit the intents of `intents` (the tool calls a
    /// model answer asked for; a retry-safe tool's call is saved as `sending` at once, since
    /// sending it again repeats nothing). A plain result (no child work, no delivery) that
    /// ends its step, the last tool result or an answer that asks for no tool, is held for
    /// the next commit instead.
    pub(super) async fn save_result(
        &self,
        key: CallKey,
        result: CallResult,
        events: Vec<EventKind>,
        intents: Vec<CallKey>,
    ) -> Result<(), HostError> {
        // A program's saved time (`program_clock`) is no call: nothing was sent for it.
        let clock = matches!(key.slot, CallSlot::Code { call, .. } if call == CODE_CLOCK_CALL);
        if matches!(key.slot, CallSlot::Tool(_) | CallSlot::Code { .. }) && !clock {
            fault(FaultPoint::AfterToolSent);
        }
        let usage = match &result {
            CallResult::Model { usage, .. } => *usage,
            CallResult::Tool { .. } => None,
        };
        let sealed = self
            .cx
            .seal_json(&result)
            .map_err(|e| self.fail(StoreError::Invalid(e.to_string())))?;
        let call = self
            .calls()
            .write(key, CallPhase::Done, Some(sealed), usage);
        // A model call's usage settles its reservation in the same commit.
        let writes = self.settlement(key, usage);
        let usage = self.priced(key, usage);
        let handled_signals = self
            .log
            .delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key)
            .unwrap_or_default();
        let admitted = self
            .admissions
            .admitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
        let plain = handled_signals.is_empty() && admitted.is_none();
        let (children, events, admitted_writes) = match admitted {
            Some(admitted) => {
                let mut all = events;
                all.extend(admitted.events);
                (admitted.children, all, admitted.writes)
            }
            None => (Vec::new(), events, Default::default()),
        };
        let label = match key.slot {
            CallSlot::Model => labels::ANSWER,
            CallSlot::Code { .. } if clock => labels::CODE_CLOCK,
            CallSlot::Tool(_) | CallSlot::Code { .. } => labels::TOOL_RESULT,
        };
        let ends_step = match key.slot {
            CallSlot::Model => intents.is_empty(),
            CallSlot::Tool(index) => self.last_of_step(key.step, index).await?,
            // A program's call is followed by the code call's own result.
            CallSlot::Code { .. } => false,
        };
        if plain && ends_step {
            return self.hold(call, result, events, usage, writes, label).await;
        }
        let tool_calls = match &result {
            CallResult::Model {
                message: Message::Assistant { tool_calls, .. },
                ..
            } => tool_calls.as_slice(),
            _ => &[],
        };
        let mut own = vec![label];
        let mut calls = vec![call];
        for intent in intents {
            let safe = match intent.slot {
                CallSlot::Tool(index) => tool_calls
                    .get(index as usize)
                    .and_then(|c| self.retry_safe.get(&c.name))
                    .copied()
                    .unwrap_or(false),
                CallSlot::Model | CallSlot::Code { .. } => false,
            };
            let (phase, label) = if safe {
                (CallPhase::Sending, labels::TOOL_SENDING)
            } else {
                (CallPhase::Intent, labels::TOOL_INTENT)
            };
            if !own.contains(&label) {
                own.push(label);
            }
            calls.push(self.calls().write(intent, phase, None, None));
        }
        if matches!(key.slot, CallSlot::Model) && calls.len() > 1 {
            self.log
                .step_tools
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(key.step, calls.len() as u32 - 1);
        }
        let commit = Commit {
            calls,
            events,
            usage,
            handled_signals,
            children,
            // A capability's rows of the admitted call (a reminder's) commit with its result.
            writes: crate::store::TxWrites(
                writes.0.iter().cloned().chain(admitted_writes.0).collect(),
            ),
            ..Commit::default()
        };
        self.commit(commit, &own, Some(key)).await
    }

    /// Whether every other tool call of `step` has its result saved, so that the result of
    /// call `index` ends the step. Known only for a step whose answer this host saved.
    async fn last_of_step(&self, step: u32, index: u32) -> Result<bool, HostError> {
        let count = self
            .log
            .step_tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&step)
            .copied();
        let Some(count) = count else {
            return Ok(false);
        };
        for other in (0..count).filter(|&other| other != index) {
            let saved = self
                .saved_row(step, CallSlot::Tool(other))
                .await?
                .is_some_and(|row| row.phase == CallPhase::Done);
            if !saved {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Commits a step that saves a known result. A passing storage failure does not drop the
    /// result: it is held and its commit retried with the storage backoff (100 ms to 5 s) for
    /// up to [`RESULT_SAVE_BUDGET`]. Before each retry the call log is read, since a commit whose
    /// reply was lost may have landed: a saved result of this owner means it did.
    pub(super) async fn commit_known_result(
        &self,
        key: CallKey,
        commit: Commit,
        fault: &CommitFault,
    ) -> Result<(), StoreError> {
        let deadline = tokio::time::Instant::now() + RESULT_SAVE_BUDGET;
        let mut backoff = crate::engine::Backoff::new();
        loop {
            let err = match self
                .cx
                .commit(self.id, self.generation, commit.clone())
                .await
            {
                Ok(_) if fault.lose_reply() => lost_reply(),
                Ok(_) => return Ok(()),
                Err(err) => err,
            };
            if !err.is_transient() || tokio::time::Instant::now() >= deadline {
                return Err(err);
            }
            // The cause stays out of the log: it may carry stored text.
            tracing::warn!("a known result could not be saved; holding it and trying again");
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
