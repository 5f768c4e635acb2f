//! Chats and the input sent to them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ids::{BotId, ChatId, ExecutionId};
use crate::message::{ContentPart, Message};

/// A conversation with a Bot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Chat {
    /// Its ID.
    pub id: ChatId,
    /// The Bot that answers in it.
    pub bot_id: BotId,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// A request to create a Chat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct CreateChat {
    /// The Bot to chat with.
    pub bot_id: BotId,
}

/// Input for a Chat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct SendInput {
    /// The content: at least one part.
    #[schema(min_items = 1)]
    pub content: Vec<ContentPart>,
    /// The caller's name for this request, 1-200 characters. A retry with the same key and the same input gets
    /// the same receipt; the same key with other input is a conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    #[schema(min_length = 1, max_length = 200)]
    pub command_key: Option<String>,
}

impl SendInput {
    /// Input of one text part with no command key.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentPart::text(text)],
            command_key: None,
        }
    }

    /// The same input, named by a command key.
    pub fn with_command_key(mut self, key: impl Into<String>) -> Self {
        self.command_key = Some(key.into());
        self
    }
}

/// What happened to a sent input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum SendDisposition {
    /// It started a new Turn.
    Started,
    /// A Turn is running; the input waits in order for its own Turn.
    Queued,
    /// It joined the running Turn.
    Steered,
}

/// The answer to a sent input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct SendReceipt {
    /// The Chat.
    pub chat_id: ChatId,
    /// The execution of the Turn that takes this input.
    pub execution_id: ExecutionId,
    /// What happened to the input.
    pub disposition: SendDisposition,
}

/// One entry of a Chat's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ChatEntry {
    /// The message.
    pub message: Message,
    /// The Turn that produced or took it.
    pub execution_id: ExecutionId,
    /// When it was saved.
    pub at: DateTime<Utc>,
}

/// Whether a Chat is in plan mode: its Bot may only propose a plan (`propose_plan`) until a
/// person approves one, which switches plan mode off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct PlanMode {
    /// Whether plan mode is on.
    pub enabled: bool,
}
