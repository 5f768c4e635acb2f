//! The one saved-call primitive: every outside send of an execution (a Turn's model and tool
//! calls, an OAuth token request, a Channel reply) goes through the call log the same way.
//!
//! 1. Its **intent** commits first (optional: a send that writes nothing outside may skip it).
//! 2. **`sending`** commits before the request leaves. A new owner that finds `sending` does
//!    not know whether it arrived, so it sends again only what is proven safe (an endpoint
//!    that deduplicates by the call's idempotency key) and otherwise saves `unknown`.
//! 3. The **result** (`done`) or **`unknown`** commits with what it changes, in one
//!    transaction.
//!
//! Every commit carries the owner's generation, so an owner that lost the work writes nothing
//! over the new owner's; a result it got anyway is kept as a **late result**
//! ([`SavedCalls::save_late`]), never published. A commit whose reply was lost is read back
//! ([`SavedCalls::landed`]) and counts as done when it landed: nothing is written twice.

use std::sync::Arc;

use openbot_core::turn::CallKey;
use openbot_schema::{ExecutionId, Usage};

use super::{EngineContext, PhaseContext, Wake};
use crate::store::{CallPhase, CallRow, CallWrite, Commit, SealedBlob, StoreError, TxWrites};

/// The call log of one execution, written by one owner (one generation).
#[derive(Clone)]
pub struct SavedCalls {
    engine: Arc<EngineContext>,
    id: ExecutionId,
    generation: i64,
}

impl SavedCalls {
    /// The calls of execution `id`, written as its owner of `generation`.
    pub fn new(engine: Arc<EngineContext>, id: ExecutionId, generation: i64) -> Self {
        Self {
            engine,
            id,
            generation,
        }
    }

    /// The calls of the phase's execution, written as its current owner.
    pub fn of(cx: &PhaseContext) -> Self {
        Self::new(Arc::clone(&cx.engine), cx.execution.id, cx.generation)
    }

    /// The row that saves `key` in `phase`, with its result (for `done`) and usage. The
    /// idempotency key is the call's own: the same after a takeover.
    pub fn write(
        &self,
        key: CallKey,
        phase: CallPhase,
        result: Option<SealedBlob>,
        usage: Option<Usage>,
    ) -> CallWrite {
        CallWrite {
            key,
            phase,
            idempotency_key: key.idempotency_key(self.id),
            result,
            usage,
        }
    }

    /// The latest saved attempt of the call in `key`'s step and slot: what a new owner finds.
    pub async fn latest(&self, key: CallKey) -> Result<Option<CallRow>, StoreError> {
        self.engine
            .store
            .latest_call(self.id, key.step, key.slot)
            .await
    }

    /// Commits `commit` (its call rows with what they change) as this owner. After a passing
    /// failure whose reply may have been lost, a commit that landed counts as done.
    /// `Fenced` means this owner lost the work: nothing was written.
    pub async fn commit(&self, commit: Commit) -> Result<(), StoreError> {
        match self
            .engine
            .commit(self.id, self.generation, commit.clone())
            .await
        {
            Ok(_) => Ok(()),
            Err(err) => self.recover(&commit, err).await,
        }
    }

    /// What a failed commit of `commit` comes to: done when the failure was passing and the
    /// commit landed anyway (its reply was lost), else `err`.
    pub async fn recover(&self, commit: &Commit, err: StoreError) -> Result<(), StoreError> {
        if err.is_transient() && self.landed(commit).await {
            return Ok(());
        }
        Err(err)
    }

    /// Whether `commit` of this owner is in the database: its first call write is the latest
    /// row of its slot, in its phase and by this generation; or, without calls, the execution
    /// is in the end state it sets. Any other commit cannot be told apart: no.
    pub async fn landed(&self, commit: &Commit) -> bool {
        if let Some(call) = commit.calls.first() {
            return matches!(
                self.latest(call.key).await,
                Ok(Some(row)) if row.key == call.key
                    && row.phase == call.phase
                    && row.generation == self.generation
                    && !row.late
            );
        }
        if let Some(change) = commit.state.as_ref().filter(|c| c.state.is_terminal()) {
            return matches!(
                self.engine.store.execution(self.id).await,
                Ok(row) if row.generation == self.generation && row.state == change.state
            );
        }
        false
    }

    /// Keeps a result this owner got after it lost the work, with `writes`: in the call log,
    /// marked late, publishing nothing; the new owner (waiting on exactly this call) is woken
    /// to use it.
    pub async fn save_late(&self, call: CallWrite, writes: TxWrites) -> Result<(), StoreError> {
        self.engine
            .store
            .save_late_result(self.id, self.generation, call, writes)
            .await?;
        self.engine.hub.announce(Wake::Work);
        Ok(())
    }
}

impl std::fmt::Debug for SavedCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SavedCalls")
            .field("id", &self.id)
            .field("generation", &self.generation)
            .finish()
    }
}
