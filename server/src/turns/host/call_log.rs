//! This owner's copy of the call log: read once per phase, then kept current by its own
//! writes (no one else writes this execution's calls while it owns it), and the reads of saved
//! results through it.

use std::collections::HashMap;
use std::sync::PoisonError;

use openbot_core::turn::{CallKey, CallResult, CallSlot, HostError};
use openbot_schema::Message;

use super::DurableHost;
use crate::store::{CallPhase, CallRow, CallWrite, StoreError};

/// The latest row of each call slot.
pub(super) type CallMap = HashMap<(u32, CallSlot), CallRow>;

/// The host's part for its call log: this owner's copy of it, the signals that delivered
/// each waiting call's result, and how many tool calls each step's answer asked for.
#[derive(Default)]
pub(super) struct CallLog {
    /// This owner's copy of the call log, read once per phase.
    pub(super) calls: std::sync::Mutex<Option<CallMap>>,
    /// The signals that delivered each waiting call's result; handled when it is saved.
    pub(super) delivered: std::sync::Mutex<HashMap<CallKey, Vec<i64>>>,
    /// How many tool calls each step's answer, saved by this host, asked for.
    pub(super) step_tools: std::sync::Mutex<HashMap<u32, u32>>,
}

impl DurableHost {
    /// The latest row of a call slot, as `CallStore::latest_call` answers it, from this owner's
    /// copy of the call log.
    pub(super) async fn saved_row(
        &self,
        step: u32,
        slot: CallSlot,
    ) -> Result<Option<CallRow>, HostError> {
        self.load_calls().await?;
        let calls = self
            .log
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(calls
            .as_ref()
            .and_then(|map| map.get(&(step, slot)).cloned()))
    }

    /// Whether any latest row of a call slot in this owner's copy of the call log matches.
    pub(super) async fn any_call(
        &self,
        matches: impl Fn(&CallRow) -> bool,
    ) -> Result<bool, HostError> {
        self.load_calls().await?;
        let calls = self
            .log
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(calls.as_ref().is_some_and(|map| map.values().any(matches)))
    }

    /// Whether the call log, as this phase read it, holds a model request marked `sending`
    /// (any attempt, also one a later attempt's row hides) whose result was never saved.
    pub(super) async fn earlier_request_open(&self) -> Result<bool, HostError> {
        self.load_calls().await?;
        Ok(self
            .billing
            .earlier_request_open
            .load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Starts from `rows`, the call log the phase read at its start beside its other reads.
    pub(crate) fn with_calls(self, rows: Vec<CallRow>) -> Self {
        self.keep_calls(rows);
        self
    }

    /// Keeps `rows` as this owner's copy of the call log, unless it has one.
    fn keep_calls(&self, rows: Vec<CallRow>) {
        let done: std::collections::HashSet<CallKey> = rows
            .iter()
            .filter(|row| row.phase == CallPhase::Done)
            .map(|row| row.key)
            .collect();
        let open = rows.iter().any(|row| {
            row.key.slot == CallSlot::Model
                && row.phase != CallPhase::Done
                && !done.contains(&row.key)
        });
        let mut map = HashMap::new();
        for row in rows {
            keep_latest(&mut map, row);
        }
        let mut calls = self
            .log
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if calls.is_none() {
            *calls = Some(map);
            self.billing
                .earlier_request_open
                .store(open, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Reads the call log once per phase.
    async fn load_calls(&self) -> Result<(), HostError> {
        let loaded = self
            .log
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        if !loaded {
            let rows = self
                .cx
                .store
                .calls(self.id)
                .await
                .map_err(|e| self.fail(e))?;
            self.keep_calls(rows);
        }
        Ok(())
    }

    /// Notes a call this owner committed.
    pub(super) fn remember(&self, call: &CallWrite) {
        if let Some(map) = self
            .log
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            let row = CallRow {
                key: call.key,
                phase: call.phase,
                idempotency_key: call.idempotency_key.clone(),
                result_record: call.result.as_ref().map(|blob| blob.id),
                usage: call.usage,
                generation: self.generation,
                late: false,
            };
            keep_latest(map, row);
        }
    }

    pub(super) async fn open_result(&self, row: &CallRow) -> Result<CallResult, HostError> {
        let record = row.result_record.ok_or_else(|| {
            self.fail(StoreError::Invalid(format!(
                "call {} is done without a result",
                row.key
            )))
        })?;
        self.open_sealed(record).await
    }

    /// Opens a sealed JSON record of this execution; a failure is this host's failure.
    pub(super) async fn open_sealed<T: serde::de::DeserializeOwned>(
        &self,
        record: uuid::Uuid,
    ) -> Result<T, HostError> {
        self.cx.open_json(record).await.map_err(|e| match e {
            crate::engine::EngineError::Store(err) => self.fail(err),
            other => self.fail(StoreError::Invalid(other.to_string())),
        })
    }

    /// Whether the tool called in `slot` of `step` may be sent again with the same key.
    pub(super) async fn tool_is_retry_safe(
        &self,
        step: u32,
        index: u32,
    ) -> Result<bool, HostError> {
        if let Some((known_step, known_index, name)) = &self.known_call
            && (*known_step, *known_index) == (step, index)
        {
            return Ok(self.retry_safe.get(name).copied().unwrap_or(false));
        }
        let Some(model) = self.saved_row(step, CallSlot::Model).await? else {
            return Ok(false);
        };
        let CallResult::Model {
            message: Message::Assistant { tool_calls, .. },
            ..
        } = self.open_result(&model).await?
        else {
            return Ok(false);
        };
        Ok(tool_calls
            .get(index as usize)
            .and_then(|call| self.retry_safe.get(&call.name))
            .copied()
            .unwrap_or(false))
    }
}

/// Keeps, per call slot, the row `CallStore::latest_call` would answer: a saved result wins, then the
/// highest attempt.
fn keep_latest(map: &mut CallMap, row: CallRow) {
    let slot = (row.key.step, row.key.slot);
    let replace = match map.get(&slot) {
        None => true,
        Some(current) => {
            let done = |r: &CallRow| r.phase == CallPhase::Done;
            match (done(current), done(&row)) {
                (false, true) => true,
                (true, false) => false,
                _ => {
                    row.key.attempt >= current.key.attempt
                        && !(done(current) && current.key.attempt == row.key.attempt)
                }
            }
        }
    };
    if replace {
        map.insert(slot, row);
    }
}
