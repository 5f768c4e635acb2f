//! The ordered event log of an execution.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ErrorCategory;
use crate::execution::TurnOutcome;
use crate::ids::{ErrorId, ExecutionId};
use crate::message::ContentPart;
use crate::tool::{ToolCall, ToolResult};
use crate::usage::Usage;

/// One event of an execution. Sequences start at 1 and have no gaps, so a reader that saw
/// sequence `n` resumes with `observe(execution, n)` and misses nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Event {
    /// The execution this event belongs to.
    pub execution_id: ExecutionId,
    /// The position of this event in its execution's log, from 1.
    pub sequence: u64,
    /// When the event was recorded.
    pub at: DateTime<Utc>,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What happened, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// A Turn started with this input.
    TurnStarted {
        /// The input that started it.
        input: Vec<ContentPart>,
    },
    /// More input reached the running Turn; the model sees it at its next step.
    InputSteered {
        /// The input.
        input: Vec<ContentPart>,
    },
    /// A model request started. A repeated request has the same step and a higher attempt;
    /// its text starts afresh and is never joined to an earlier attempt's text.
    ModelStepStarted {
        /// The step, from 1.
        step: u32,
        /// The attempt within the step, from 1.
        attempt: u32,
    },
    /// Text streamed by the model in a step's attempt.
    TextDelta {
        /// The step.
        step: u32,
        /// The attempt.
        attempt: u32,
        /// The new text.
        text: String,
    },
    /// The model asked for a tool call.
    ToolCall {
        /// The step.
        step: u32,
        /// The call.
        call: ToolCall,
    },
    /// A tool call's result was saved and given to the model.
    ToolResult {
        /// The step.
        step: u32,
        /// The result.
        result: ToolResult,
    },
    /// A call was maybe sent and its result was lost; it is not repeated. The execution waits
    /// in `outcome_unknown` for a saved result or a decision.
    CallOutcomeUnknown {
        /// The step.
        step: u32,
        /// The call, as `<step>/<slot>/<attempt>`.
        call: String,
    },
    /// A tool call started child work: a background tool, an approved call, or a delegated
    /// Turn. The child has its own events (observe `execution_id`); its result comes back to
    /// the source Chat as a notice.
    ChildStarted {
        /// The call that started it.
        call_id: String,
        /// The child execution (`execution_id` names the parent, as in every event).
        child_id: ExecutionId,
        /// What it is: `tool_job` or `turn`.
        kind: String,
    },
    /// A tool call waits for a person's decision; the Turn goes on meanwhile.
    ApprovalRequested {
        /// The request to decide.
        #[schema(value_type = String, format = Uuid)]
        request_id: uuid::Uuid,
        /// The call.
        call: ToolCall,
        /// When the request expires unless decided.
        expires_at: DateTime<Utc>,
    },
    /// A job ended: a tool job, or a service's job (e.g. deleting a Chat). This is the last
    /// event of its execution.
    JobEnded {
        /// Its end state: `completed` or `cancelled`.
        state: crate::execution::ExecutionState,
    },
    /// The Turn ended. This is the last event of its execution.
    TurnEnded {
        /// Why it ended.
        outcome: TurnOutcome,
        /// What the whole Turn used.
        usage: Usage,
    },
    /// The execution failed. This is the last event of its execution. Only a safe category
    /// and an error ID are public; the full cause is sealed.
    Failed {
        /// The kind of failure.
        category: ErrorCategory,
        /// The ID of the sealed failure record.
        error_id: ErrorId,
    },
}

/// A page of events, the answer to a long poll.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct EventPage {
    /// The events after the cursor, in order.
    pub events: Vec<Event>,
    /// The cursor to ask with next: the last sequence seen.
    pub next_after: u64,
    /// Whether the execution has ended and this page holds its last event (or nothing follows).
    pub ended: bool,
}

impl EventKind {
    /// Whether this is the last event of its execution.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            EventKind::TurnEnded { .. } | EventKind::JobEnded { .. } | EventKind::Failed { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_serializes_flat_with_its_type() {
        let event = Event {
            execution_id: ExecutionId::new(),
            sequence: 3,
            at: Utc::now(),
            kind: EventKind::TextDelta {
                step: 1,
                attempt: 2,
                text: "hi".into(),
            },
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["type"], "text_delta");
        assert_eq!(json["attempt"], 2);
        assert_eq!(json["sequence"], 3);
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);
    }
}
