//! The saved input of a Turn: everything a node needs to run it, also after a takeover.

use openbot_schema::{ContentPart, Limits, Message, ToolDefinition};
use serde::{Deserialize, Serialize};

/// How a saved tool's calls reach their handler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolRoute {
    /// The caller delivers each result.
    Host,
    /// An HTTP endpoint: the arguments are POSTed as JSON with an `Idempotency-Key` header.
    Http {
        /// The endpoint.
        url: String,
        /// Whether the endpoint deduplicates by `Idempotency-Key`, so a call whose result was
        /// lost may be sent again with the same key. Without it such a call is never repeated.
        #[serde(default)]
        retry_safe: bool,
    },
}

/// A tool as saved with the Turn: a later change of the tool list never changes a saved call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedTool {
    /// What the model sees.
    pub definition: ToolDefinition,
    /// Where calls go.
    pub route: ToolRoute,
}

/// The input of a Turn execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnInput {
    /// The system instructions.
    pub instructions: String,
    /// The model spec, e.g. `openai:gpt-4o-mini`.
    pub model: String,
    /// The tools offered.
    pub tools: Vec<SavedTool>,
    /// The limits of the Turn.
    pub limits: Limits,
    /// The conversation before the Turn.
    pub history: Vec<Message>,
    /// The input that starts it.
    pub input: Vec<ContentPart>,
    /// The most tokens of each answer.
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    /// The organization whose model provider settings build the model (keys are looked up
    /// when the Turn runs, never copied into its input).
    #[serde(default)]
    pub organization_id: Option<uuid::Uuid>,
    /// Who the Turn is for and by whom; its current rights are checked when the Turn is
    /// restored and before each outside send. Absent for work with no member (tests, tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<crate::identity::ExecutionIdentity>,
}
