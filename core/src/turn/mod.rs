//! The Turn: one run of the model-and-tool loop, written once and run by any [`Host`].
//!
//! A Turn is a deterministic state machine over its call log. Each step sends one model
//! request; if the answer asks for tools, their calls run in parallel and their results go
//! into the next request. Every call has a stable [`CallKey`] and is recorded as intent, then
//! sending, then result; a host that replays the log gets the saved results back, so a known
//! result is never asked for again.

mod call;
mod code;
mod context;
mod host;
mod limits;
mod run;
mod tools;

pub use call::{CallKey, CallRecord, CallResult, CallSlot, CallStatus};
pub use code::{
    CODE_CLOCK_CALL, CODE_TOOL, ProgramCallCheck, code_call_id, code_tool_definition, program_clock,
};
pub use context::{
    ContextOverflow, ContextSizer, DEFAULT_OUTPUT_RESERVE, estimate_message, estimate_text,
};
pub use host::{Host, HostError, RequestEstimate, TurnEnd, TurnFailure};
pub use run::{MODEL_ATTEMPTS, TurnSpec, run_turn};
pub use tools::ToolSet;
