//! Executions: stored work with a stable ID, a state and an event log.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ids::{ChatId, ExecutionId};
use crate::usage::Usage;

/// The state of an execution. The last four are end states: nothing changes after them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum ExecutionState {
    /// Accepted, not started.
    Queued,
    /// An owner is working on it.
    Running,
    /// Waiting for something outside: a timer, a tool result, a decision.
    Waiting,
    /// A cancel was asked for; it has not yet proved that its work stopped.
    Cancelling,
    /// An outside write's result was lost and it cannot be repeated safely: waits for a saved
    /// result or a person's decision.
    OutcomeUnknown,
    /// Ended normally.
    Completed,
    /// Ended with a failure.
    Failed,
    /// Ended by cancellation.
    Cancelled,
    /// Ended because it could not be continued (for example by a process that kept no log).
    Interrupted,
}

impl ExecutionState {
    /// Whether this is an end state.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Cancelled | Self::Interrupted
        )
    }

    /// The state's name as it appears on the wire, e.g. `outcome_unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Waiting => "waiting",
            Self::Cancelling => "cancelling",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
        }
    }
}

/// Why a Turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum TurnOutcome {
    /// The model gave its answer.
    Completed,
    /// The step limit was reached.
    MaxSteps,
    /// The wall-time limit was reached.
    MaxTime,
    /// The cost limit was reached: the Turn's own limit, or a budget above it would be
    /// overspent by the next model request's reservation.
    MaxCost,
    /// The organization's credits would not cover the next model request's reservation.
    CreditsExhausted,
    /// The model asked for the same tool call with the same arguments more often than the
    /// loop breaker allows (`max_repeated_calls`).
    RepeatedToolCall,
    /// The Turn was cancelled.
    Cancelled,
}

/// What kind of work an execution is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExecutionKind {
    /// A Turn of a Chat, or a delegated Turn of another Bot (with its own private history).
    Turn,
    /// One tool call run in its own execution: a background tool, or a call that waited for
    /// approval. It reports its result to its source Chat as a notice.
    ToolJob,
    /// A Code Mode program run against a Bot's tools with no model (`POST
    /// /v1/bots/{id}/code-runs`).
    CodeRun,
}

/// What an execution view written before `usage_known` existed means: nothing was known
/// to be missing.
fn usage_known_default() -> bool {
    true
}

/// The public view of an execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Execution {
    /// Its ID.
    pub id: ExecutionId,
    /// What kind of work it is.
    pub kind: ExecutionKind,
    /// Its current state.
    pub state: ExecutionState,
    /// The Chat it belongs to, for a Turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub chat_id: Option<ChatId>,
    /// How a Turn ended, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub outcome: Option<TurnOutcome>,
    /// What it used so far: the sum of what its model replies reported.
    pub usage: Usage,
    /// Whether every model reply so far reported its usage. `false`: at least one did not
    /// (its usage is unknown, not zero), so `usage` is a lower bound, not the whole.
    #[serde(default = "usage_known_default")]
    #[cfg_attr(feature = "uniffi", uniffi(default = true))]
    pub usage_known: bool,
    /// The sequence of its last event; 0 before the first.
    pub last_sequence: u64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When its state last changed.
    pub updated_at: DateTime<Utc>,
    /// Why it was interrupted, when its state is `interrupted`: work that could not be rebuilt
    /// (a retired workflow kind, a saved record that no longer decodes, storage that kept
    /// failing past its retry budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_four_states_are_terminal() {
        use ExecutionState::*;
        let all = [
            Queued,
            Running,
            Waiting,
            Cancelling,
            OutcomeUnknown,
            Completed,
            Failed,
            Cancelled,
            Interrupted,
        ];
        let ends: Vec<_> = all.into_iter().filter(|s| s.is_terminal()).collect();
        assert_eq!(ends, vec![Completed, Failed, Cancelled, Interrupted]);
        for state in all {
            let wire = serde_json::to_value(state).unwrap();
            assert_eq!(wire, state.as_str());
        }
    }
}
