//! The Host: where a Turn keeps its call log and events. The Turn loop is written once; the
//! in-memory host keeps everything in memory, the server's durable host keeps it in SQL.

use std::time::SystemTime;

use async_trait::async_trait;
use openbot_schema::{
    ContentPart, ErrorCategory, EventKind, ExecutionId, Message, ToolCall, ToolResult, TurnOutcome,
    Usage,
};
use tokio_util::sync::CancellationToken;

use super::call::{CallKey, CallRecord, CallResult, CallSlot};

/// A host failure that stops the loop at once, without ending the Turn: storage is gone or
/// another owner took over. The host's runner decides what happens next.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HostError {
    /// A newer owner holds the execution; this one must stop writing.
    #[error("the execution has a newer owner")]
    Fenced,
    /// The host was closed.
    #[error("the host is closed")]
    Closed,
    /// Storage failed after its retries.
    #[error("storage failed: {0}")]
    Storage(String),
    /// The work may not go on: its owner or credential lost the right (checked before each
    /// outside send). The message says which, for the sealed failure record.
    #[error("access denied: {0}")]
    Denied(String),
    /// A check before a send refused it for good (a shared limit stayed full past its
    /// deadline): the work fails with this safe category; the cause is for its sealed record.
    #[error("the send was refused: {cause}")]
    Refused {
        /// The failure's public category.
        category: ErrorCategory,
        /// The full cause.
        cause: String,
    },
    /// The Turn's end found input that arrived after its last input check (`take_steering`
    /// with `last`) and saved nothing: the loop replays the Turn from its saved calls, and
    /// that check takes the input. `run_turn` handles it; it never leaves the loop.
    #[error("input arrived as the Turn ended")]
    InputArrived,
    /// A host tool's result will not come (the execution is being deleted).
    #[error("the tool result was abandoned")]
    Abandoned,
    /// The host declined to send a model request and nothing was recorded for it: the Turn
    /// ends with this outcome (`max_cost` when a budget, `credits_exhausted` when the
    /// organization's credits would not cover the request's reservation).
    #[error("the model request was declined ({0:?})")]
    Declined(TurnOutcome),
    /// A call was maybe sent, its result is lost, and it may not be repeated: the execution
    /// waits in `outcome_unknown` for a saved result or a decision.
    #[error("the result of call {key} is unknown")]
    OutcomeUnknown {
        /// The call.
        key: CallKey,
    },
}

/// How a Turn ended, as the loop hands it to its host.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    /// The outcome, or a failure with its safe category and full private cause.
    pub outcome: Result<TurnOutcome, TurnFailure>,
    /// The messages the Turn added to the conversation, in order: the input, steering input,
    /// assistant answers and tool results.
    pub messages: Vec<Message>,
    /// What the Turn used.
    pub usage: Usage,
}

/// What a model request may use, estimated before it is sent: the input tokens of the request
/// as the loop estimates them (`context`) and the most output tokens it asks for. Estimates are
/// for reservations only; they are not proven upper bounds of what a provider charges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestEstimate {
    /// The estimated input tokens.
    pub input_tokens: u64,
    /// The most output tokens (`max_output_tokens`, or the default reserve).
    pub output_tokens: u64,
}

/// Why a Turn failed.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnFailure {
    /// The safe, public category.
    pub category: ErrorCategory,
    /// The full cause. Private: the host seals it and publishes only an error ID.
    pub cause: String,
}

/// Storage and signals of one execution's Turn.
///
/// A host must keep these promises for the loop to be exact:
/// - `saved_call` returns what `record_*` stored, also after a takeover (durable hosts), and
///   a result the host holds for its next write as soon as `record_result` returned.
/// - `record_result` saves the result and publishes its events together, or neither. A host
///   may hold the result that ends a step (the step's last tool result, an answer with no tool
///   call to run) and save it with its next write, as long as only reads come between: a crash
///   there is a crash before the result came back, which the call log already handles.
/// - `take_steering(step, ..)` returns the same input for the same step on replay.
#[async_trait]
pub trait Host: Send + Sync {
    /// The execution this host serves.
    fn execution_id(&self) -> ExecutionId;

    /// Cancelled when the execution is asked to stop.
    fn cancellation(&self) -> CancellationToken;

    /// When the Turn first started. Time limits count from here, so a takeover never resets them.
    fn started_at(&self) -> SystemTime;

    /// Whether a spending budget above the Turn (its Chat, Bot or organization) is used up.
    /// Asked before each model request that is sent (never for a saved answer); the Turn then
    /// ends with `max_cost`. A host that cannot read the spending fails rather than guess.
    async fn budget_exhausted(&self) -> Result<bool, HostError> {
        Ok(false)
    }

    /// Decides how a new tool call goes, before anything is recorded for it: `None` runs it
    /// here; a result answers it at once (a refusal, or a note that the call waits for approval
    /// or runs detached). The loop saves that result as the call's result, so a host that
    /// starts work for the call must commit it with that result (see `record_result`), and a
    /// replay never asks again. Checked arguments only.
    async fn admit_tool(
        &self,
        _key: CallKey,
        _call: &ToolCall,
    ) -> Result<Option<ToolResult>, HostError> {
        Ok(None)
    }

    /// Whether the tool `name` may be sent again under the same key after its answer was lost
    /// (its endpoint deduplicates by the idempotency key). The Code Mode bridge asks this for a
    /// program's call found `Sending` on replay: that call is not in the model's answer, so
    /// the host cannot tell by the slot as it does for a direct call. Default: no.
    fn tool_retry_safe(&self, _name: &str) -> bool {
        false
    }

    /// The latest record of a call slot, if any.
    async fn saved_call(&self, step: u32, slot: CallSlot) -> Result<Option<CallRecord>, HostError>;

    /// Records that a call is about to be sent. A host that saved the intent already (with the
    /// answer that asked for the call, see `record_answer`) writes nothing.
    async fn record_intent(&self, key: CallKey) -> Result<(), HostError>;

    /// Records that a call is being sent (from here on its result may be lost) and publishes
    /// `events` with it, so that an attempt's start event exists exactly when it was sent.
    /// The host's checks before a send run here. A tool call that may be sent again under the
    /// same key (its tool deduplicates) may have been saved as sending with its answer; then
    /// this writes nothing.
    async fn record_sending(&self, key: CallKey, events: Vec<EventKind>) -> Result<(), HostError>;

    /// Records that a model request is being sent, as [`Host::record_sending`] does, with what
    /// it is estimated to use. A host that reserves spending refuses here, recording nothing,
    /// with [`HostError::Declined`] when the reservation would overspend. The default records
    /// the sending and ignores the estimate.
    async fn record_model_sending(
        &self,
        key: CallKey,
        events: Vec<EventKind>,
        estimate: RequestEstimate,
    ) -> Result<(), HostError> {
        let _ = estimate;
        self.record_sending(key, events).await
    }

    /// Saves a call's result and publishes `events` with it.
    async fn record_result(
        &self,
        key: CallKey,
        result: CallResult,
        events: Vec<EventKind>,
    ) -> Result<(), HostError>;

    /// Saves a model answer as `record_result` does, and may save with it the intents of the
    /// tool calls it asked for that will run (`intents`, each call's first attempt), so that
    /// the answer and those intents are one write; a call whose tool may be sent again under
    /// the same key may be saved as sending at once. The loop still calls `record_intent` and
    /// `record_sending` for each call before it is sent; a host that saved them here answers
    /// those from its log. An answer with no intents ends its step: a host may hold it for its
    /// next write (the Turn's end), as `record_result` says. The default saves the answer alone.
    async fn record_answer(
        &self,
        key: CallKey,
        result: CallResult,
        events: Vec<EventKind>,
        intents: Vec<CallKey>,
    ) -> Result<(), HostError> {
        let _ = intents;
        self.record_result(key, result, events).await
    }

    /// Publishes an event that belongs to no saved result (a step start, a text delta).
    async fn publish(&self, event: EventKind) -> Result<(), HostError>;

    /// Input that joined the running Turn, for the model request of `step`. With `last`,
    /// the Turn is about to end: if nothing is waiting the host closes steering, so that later
    /// input starts its own Turn instead of being lost.
    async fn take_steering(
        &self,
        step: u32,
        last: bool,
    ) -> Result<Vec<Vec<ContentPart>>, HostError>;

    /// Waits for the caller to deliver the result of a host tool (a tool with no handler here).
    async fn wait_for_delivery(
        &self,
        key: CallKey,
        call: &ToolCall,
    ) -> Result<ToolResult, HostError>;

    /// Ends the Turn: saves its end, with anything it held, and publishes the last event. A
    /// host that closes steering only here (its `take_steering` with `last` wrote nothing)
    /// refuses with [`HostError::InputArrived`] when input arrived meanwhile, saves nothing of
    /// the end, and still holds what it held.
    async fn finish(&self, end: TurnEnd) -> Result<(), HostError>;
}
