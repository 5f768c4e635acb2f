//! Calls: each model call and tool call of a Turn, named by a stable key and recorded in a call
//! log as intent, then sending, then result (or unknown).

use std::fmt;

use openbot_schema::{ExecutionId, Message, ToolResult, Usage};
use serde::{Deserialize, Serialize};

/// Which call of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", content = "index", rename_all = "snake_case")]
pub enum CallSlot {
    /// The step's model call.
    Model,
    /// The step's tool call at this position (from 0) in the model's answer.
    Tool(u32),
    /// Tool call number `call` (from 0) made by the program of the Code Mode call at
    /// position `tool` of the step: the code call's key plus the index, so a replay of the
    /// program finds each saved result in order.
    Code {
        /// The code call's position in the model's answer.
        tool: u32,
        /// The call's index in the program's run.
        call: u32,
    },
}

/// The stable identity of one call: its step, its slot in the step, and its attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CallKey {
    /// The model step, from 1.
    pub step: u32,
    /// Which call of the step.
    pub slot: CallSlot,
    /// The attempt, from 1.
    pub attempt: u32,
}

impl CallKey {
    /// A key that names this call within its execution, for outside services that
    /// deduplicate requests. The same call always gets the same key, even after a takeover.
    pub fn idempotency_key(&self, execution: ExecutionId) -> String {
        format!("{execution}:{self}")
    }
}

impl fmt::Display for CallKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.slot {
            CallSlot::Model => write!(f, "{}:model:{}", self.step, self.attempt),
            CallSlot::Tool(index) => write!(f, "{}:tool{}:{}", self.step, index, self.attempt),
            CallSlot::Code { tool, call } => {
                write!(f, "{}:tool{}.{}:{}", self.step, tool, call, self.attempt)
            }
        }
    }
}

/// The saved result of a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CallResult {
    /// A model's answer.
    Model {
        /// The assistant message: text and tool calls.
        message: Message,
        /// The usage, when the provider reported it.
        usage: Option<Usage>,
    },
    /// A tool's result as given to the model.
    Tool {
        /// The result.
        result: ToolResult,
    },
}

/// Where a call is in its life.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CallStatus {
    /// It is about to be sent.
    Intent,
    /// It was (maybe) sent; no result is known.
    Sending,
    /// Its result is saved.
    Done {
        /// The result.
        result: CallResult,
    },
    /// Its result was lost and it cannot be repeated safely.
    Unknown,
}

/// The latest record of one call slot.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// The call, with its latest attempt.
    pub key: CallKey,
    /// Where it is.
    pub status: CallStatus,
}
