//! Writes held for the next commit, and the one commit path of the host.
//!
//! The last result of a step (every other call of the step saved) and a final answer need no
//! commit of their own: the host holds them and its next commit carries them (the next step's
//! model `sending`, the Turn's end, or any other write that comes first). Between the two the
//! loop only reads (the input check, the budget, the guards), so a crash in that window is a
//! crash before the result came back, which the call log already handles: an unsafe call is
//! `outcome_unknown`, a retry-safe one is sent again under the same key, a model request is
//! asked again. A loop that stops with an error first still saves what is held (`settle`).
//!
//! Every commit goes through [`DurableHost::commit`]: it takes the text deltas not yet
//! committed and what is held, puts them before its own writes, labels the commit for the
//! fault points, and checks after a lost reply whether it landed.

use std::sync::PoisonError;

use openbot_core::turn::{CallKey, CallResult, CallSlot, HostError};
use openbot_schema::{EventKind, Usage};

use super::DurableHost;
use crate::store::{CallPhase, CallWrite, Commit, StoreError, TxWrites};
use crate::turns::faults::{CommitFault, commit_starts, labels};

/// Writes saved with the host's next commit.
#[derive(Debug, Default)]
pub(super) struct Held {
    /// Call log writes (results), in order.
    pub(super) calls: Vec<CallWrite>,
    /// The results of those calls, for `saved_call` until they are committed.
    pub(super) results: Vec<(CallKey, CallResult)>,
    /// Their events, in order (text deltas of the answer first).
    pub(super) events: Vec<EventKind>,
    /// Their usage.
    pub(super) usage: Option<Usage>,
    /// What they are, for the fault points.
    pub(super) labels: Vec<&'static str>,
    /// A known result among them: the commit that carries it is retried while it fails.
    pub(super) known: Option<CallKey>,
    /// Capability rows their commit carries (a model answer's settlement).
    pub(super) writes: TxWrites,
}

impl Held {
    fn is_empty(&self) -> bool {
        self.calls.is_empty() && self.events.is_empty()
    }

    fn add_usage(&mut self, usage: Option<Usage>) {
        if let Some(usage) = usage {
            *self.usage.get_or_insert_with(Usage::default) += usage;
        }
    }
}

fn add_label(labels: &mut Vec<&'static str>, label: &'static str) {
    if !labels.contains(&label) {
        labels.push(label);
    }
}

impl DurableHost {
    /// Holds a saved result (with its events and usage) for the next commit.
    pub(super) async fn hold(
        &self,
        call: CallWrite,
        result: CallResult,
        events: Vec<EventKind>,
        usage: Option<Usage>,
        writes: TxWrites,
        label: &'static str,
    ) -> Result<(), HostError> {
        // The answer's streamed text goes before it, as it would have been committed.
        let text = self.drain_text().await?;
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if !text.is_empty() {
            add_label(&mut held.labels, labels::TEXT);
            held.events.extend(text);
        }
        held.known.get_or_insert(call.key);
        held.results.push((call.key, result));
        held.calls.push(call);
        held.events.extend(events);
        held.writes.0.extend(writes.0);
        held.add_usage(usage);
        add_label(&mut held.labels, label);
        Ok(())
    }

    /// The held result of a call slot, if any.
    pub(super) fn held_result(&self, step: u32, slot: CallSlot) -> Option<(CallKey, CallResult)> {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .results
            .iter()
            .find(|(key, _)| key.step == step && key.slot == slot)
            .cloned()
    }

    /// The usage of held answers, not yet in the execution's saved total.
    pub(super) fn held_usage(&self) -> Option<Usage> {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .usage
    }

    /// The calls whose held results the next commit saves.
    pub(super) fn held_results(&self) -> Vec<CallKey> {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .calls
            .iter()
            .filter(|call| call.phase == CallPhase::Done)
            .map(|call| call.key)
            .collect()
    }

    /// Whether anything waits for a commit: a held result or text deltas.
    pub(super) fn unsaved(&self) -> bool {
        self.text_waiting()
            || !self
                .held
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
    }

    /// Commits what is held and the text not yet committed, if anything.
    pub(super) async fn flush(&self) -> Result<(), HostError> {
        if !self.unsaved() {
            return Ok(());
        }
        self.commit(Commit::default(), &[], None).await
    }

    /// Saves what is held before the loop's error goes to the runner, so that no known result
    /// is lost with it. Its own failure is logged: the loop's error is what the runner acts on.
    pub async fn settle(&self) {
        if let Err(err) = self.flush().await {
            tracing::warn!(error = %err, "held writes could not be saved");
        }
    }

    /// Commits `commit`, labelled `own` for the fault points, after what is held and the text
    /// deltas not yet committed. `known` names a known result in `commit`: a commit that
    /// carries one (its own or a held one) is retried while storage fails passingly
    /// (`commit_known_result`). Refused for input that arrived (`Commit::close_input`), it
    /// wrote nothing and what was held is held again. Fenced, the results it carried are kept
    /// as late results.
    pub(super) async fn commit(
        &self,
        commit: Commit,
        own: &[&'static str],
        known: Option<CallKey>,
    ) -> Result<(), HostError> {
        let text = self.drain_text().await?;
        let held = std::mem::take(&mut *self.held.lock().unwrap_or_else(PoisonError::into_inner));
        let mut names = held.labels.clone();
        if !text.is_empty() {
            add_label(&mut names, labels::TEXT);
        }
        for label in own {
            add_label(&mut names, label);
        }
        let mut merged = commit;
        let own_calls = std::mem::take(&mut merged.calls);
        let own_events = std::mem::take(&mut merged.events);
        merged.calls = held.calls.iter().cloned().chain(own_calls).collect();
        merged.events = held
            .events
            .iter()
            .cloned()
            .chain(text.iter().cloned())
            .chain(own_events)
            .collect();
        let mut usage = held.usage;
        if let Some(own) = merged.usage {
            *usage.get_or_insert_with(Usage::default) += own;
        }
        merged.usage = usage;
        let own_writes = std::mem::take(&mut merged.writes);
        merged.writes = TxWrites(held.writes.0.iter().cloned().chain(own_writes.0).collect());
        let calls = merged.calls.clone();
        let fault = commit_starts(&names);
        let outcome = match held.known.or(known) {
            Some(key) => self.commit_known_result(key, merged, &fault).await,
            None => self.commit_once(merged, &fault).await,
        };
        match outcome {
            Ok(()) => {
                fault.after();
                for call in &calls {
                    self.remember(call);
                    if call.phase == CallPhase::Done {
                        self.settled(call.key);
                    }
                }
                Ok(())
            }
            Err(err) => {
                match &err {
                    // Nothing was written: what was held waits for the next commit.
                    StoreError::InputWaiting(_) => {
                        let mut again = held;
                        if !text.is_empty() {
                            add_label(&mut again.labels, labels::TEXT);
                            // The drained text goes after the held events, as it came.
                            again.events.extend(text);
                        }
                        *self.held.lock().unwrap_or_else(PoisonError::into_inner) = again;
                    }
                    // Results this old owner got are kept in the call log, never published.
                    StoreError::Fenced(_) => {
                        for call in calls.iter().filter(|c| c.phase == CallPhase::Done) {
                            self.save_late(call.clone()).await;
                        }
                    }
                    _ => {}
                }
                Err(match err {
                    // The Chat was deleted: its tree starts nothing new, and this Turn stops.
                    StoreError::AdmissionClosed => {
                        HostError::Denied("the Chat was deleted: it admits no new work".into())
                    }
                    other => self.fail(other),
                })
            }
        }
    }

    /// Commits once. After a passing failure (the reply may have been lost) a commit that
    /// landed counts as done: it is never written twice ([`crate::engine::SavedCalls`]).
    async fn commit_once(&self, commit: Commit, fault: &CommitFault) -> Result<(), StoreError> {
        match self
            .cx
            .commit(self.id, self.generation, commit.clone())
            .await
        {
            Ok(_) if fault.lose_reply() => self.calls().recover(&commit, lost_reply()).await,
            Ok(_) => Ok(()),
            Err(err) => self.calls().recover(&commit, err).await,
        }
    }

    /// Keeps a result this owner got after it lost the execution, with the settlement of a
    /// model call's reservation (a late answer is charged once, at its saved price).
    pub(super) async fn save_late(&self, call: CallWrite) {
        let writes = self.settlement(call.key, call.usage);
        if let Err(err) = self.calls().save_late(call, writes).await {
            tracing::warn!(error = %err, "could not save a late result");
        }
    }
}

/// The failure a lost reply looks like to the host (fault points only).
pub(super) fn lost_reply() -> StoreError {
    StoreError::Unavailable(sqlx::Error::PoolTimedOut)
}
