//! Delivered tool results: a caller answers a host-tool call that a Turn waits for.
//!
//! A delivery is a numbered `tool_result` signal whose payload names a sealed record with the
//! result. The owner of the Turn takes it and saves it in its own call log, so no one but the
//! owner ever writes the Turn's calls, and a delivery made while no node owns the Turn (or
//! just before a takeover) is found by the next owner.

use openbot_schema::{EventKind, ExecutionId, ToolResult};
use serde::{Deserialize, Serialize};

use crate::engine::{EngineContext, EngineError, Wake};
use crate::store::{SignalRow, StoreError};

/// The kind of the signal that carries a delivered result.
pub(crate) const TOOL_RESULT_SIGNAL: &str = "tool_result";

/// A signal's payload: which call it answers and where its sealed result is.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct DeliveredResult {
    pub call_id: String,
    pub record: uuid::Uuid,
}

impl DeliveredResult {
    /// The delivered result in `signal`, if it is one.
    pub(crate) fn from_signal(signal: &SignalRow) -> Option<Self> {
        (signal.kind == TOOL_RESULT_SIGNAL)
            .then(|| serde_json::from_str(&signal.payload).ok())
            .flatten()
    }
}

/// Why a result could not be delivered.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    /// The execution has no open call with this ID: it never asked for it, or a result was
    /// already given, or the execution ended.
    #[error("execution {execution} has no open tool call `{call_id}`")]
    NotOpen {
        /// The execution.
        execution: ExecutionId,
        /// The call ID given.
        call_id: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The result could not be sealed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// The events read per page while looking for the open call.
const PAGE: i64 = 1_000;

/// Delivers `result` for the open host-tool call `result.call_id` of execution `id`. The first
/// result delivered for a call is the one the Turn uses.
pub async fn deliver_tool_result(
    cx: &EngineContext,
    id: ExecutionId,
    result: &ToolResult,
) -> Result<(), DeliveryError> {
    let execution = cx.store.execution(id).await?;
    let not_open = || DeliveryError::NotOpen {
        execution: id,
        call_id: result.call_id.clone(),
    };
    if execution.state.is_terminal() || !call_is_open(cx, id, &result.call_id).await? {
        return Err(not_open());
    }
    let sealed = cx.seal_json(result)?;
    let payload = DeliveredResult {
        call_id: result.call_id.clone(),
        record: sealed.id,
    };
    let payload = serde_json::to_string(&payload)
        .map_err(|e| StoreError::Invalid(format!("delivered result: {e}")))?;
    cx.store.put_sealed(Some(id), sealed).await?;
    cx.store.signal(id, TOOL_RESULT_SIGNAL, &payload).await?;
    cx.hub.announce(Wake::Signal(id));
    Ok(())
}

/// Whether the execution published a call `call_id` and no result for it yet.
async fn call_is_open(
    cx: &EngineContext,
    id: ExecutionId,
    call_id: &str,
) -> Result<bool, StoreError> {
    let mut after = 0;
    let mut open = false;
    loop {
        let page = cx.store.events(id, after, PAGE).await?;
        let Some(last) = page.last() else {
            return Ok(open);
        };
        after = last.sequence as i64;
        for event in &page {
            match &event.kind {
                EventKind::ToolCall { call, .. } if call.id == call_id => open = true,
                EventKind::ToolResult { result, .. } if result.call_id == call_id => open = false,
                _ => {}
            }
        }
    }
}
