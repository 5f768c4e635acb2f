//! Unknown outcomes: outside writes without a safe retry rule whose result was lost. Such a
//! call is never sent again on its own; its execution waits in `outcome_unknown` until a
//! person who checked the outside system decides what happened.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::execution::ExecutionKind;
use crate::ids::{ChatId, ExecutionId, TokenId};
use crate::tool::ToolCall;

/// A call whose outcome is unknown, and the execution that waits for a decision on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct UnknownOutcome {
    /// The execution that waits (state `outcome_unknown`).
    pub execution_id: ExecutionId,
    /// What kind of work it is.
    pub kind: ExecutionKind,
    /// The Chat it belongs to, for a Turn of a Chat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub chat_id: Option<ChatId>,
    /// The call's key, `<step>/<slot>/<attempt>` (e.g. `1/tool:0/1`), as in the
    /// `call_outcome_unknown` event. A decision names it.
    pub call: String,
    /// The model step of the call.
    pub step: u32,
    /// The attempt of the call, from 1.
    pub attempt: u32,
    /// The tool call as the model asked for it: its ID, the tool's name and the arguments the
    /// call was sent with, to look it up in the outside system.
    pub tool_call: ToolCall,
    /// The idempotency key the call was sent with (the `Idempotency-Key` header of an HTTP
    /// tool), which the outside system may have recorded.
    pub idempotency_key: String,
    /// Since when the execution waits.
    pub waiting_since: DateTime<Utc>,
}

/// What a person found out about a call whose outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum OutcomeDecision {
    /// It was applied, with the given result: that result becomes the call's saved result and
    /// the work goes on with it. The call is not sent again.
    Applied,
    /// It was not applied: the call is sent again, as a new attempt with a new idempotency
    /// key.
    NotApplied,
    /// Give up: the execution ends `failed` (category `tool`) and sends nothing more.
    GiveUp,
}

impl OutcomeDecision {
    /// The decision's wire name, e.g. `not_applied`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::NotApplied => "not_applied",
            Self::GiveUp => "give_up",
        }
    }

    /// Reads a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "applied" => Self::Applied,
            "not_applied" => Self::NotApplied,
            "give_up" => Self::GiveUp,
            _ => return None,
        })
    }
}

/// A decision on the call an execution in `outcome_unknown` waits for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct DecideOutcome {
    /// The call decided, as listed (e.g. `1/tool:0/1`). A decision for another call than the
    /// one the execution waits for is refused with 409.
    #[schema(min_length = 1, max_length = 100)]
    pub call: String,
    /// What happened.
    pub decision: OutcomeDecision,
    /// With `applied` (and only then): the call's result as text, given to the model as the
    /// tool's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    #[schema(max_length = 100000)]
    pub result: Option<String>,
    /// Why, for the audit log; with `give_up`, the reason the execution ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    #[schema(max_length = 1000)]
    pub reason: Option<String>,
}

/// A recorded decision: its audit entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct OutcomeDecisionRecord {
    /// Its ID.
    pub id: Uuid,
    /// The execution that waited.
    pub execution_id: ExecutionId,
    /// The call decided.
    pub call: String,
    /// The decision.
    pub decision: OutcomeDecision,
    /// The reason given, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub reason: Option<String>,
    /// The member who decided.
    pub decided_by: Uuid,
    /// The API token the member decided with (absent for a browser session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub token_id: Option<TokenId>,
    /// When.
    pub decided_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_reads_its_wire_name_back() {
        for decision in [
            OutcomeDecision::Applied,
            OutcomeDecision::NotApplied,
            OutcomeDecision::GiveUp,
        ] {
            let wire = serde_json::to_value(decision).unwrap();
            assert_eq!(wire, decision.as_str());
            assert_eq!(OutcomeDecision::parse(decision.as_str()), Some(decision));
        }
    }
}
