//! Memories: what a Bot keeps past one conversation, each with its evidence (the Chat, Turn
//! and message it came from), its owner (shared, or one member's private memory), tags and a
//! status.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::ids::{BotId, ChatId, ExecutionId};

/// Whether a memory is recalled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum MemoryStatus {
    /// Recalled and offered to the model.
    #[default]
    Active,
    /// Kept with its evidence, never recalled.
    Retired,
}

impl MemoryStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryStatus::Active => "active",
            MemoryStatus::Retired => "retired",
        }
    }

    /// The status a stored name names.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "active" => Some(MemoryStatus::Active),
            "retired" => Some(MemoryStatus::Retired),
            _ => None,
        }
    }
}

/// Where a memory came from. A reader must be able to read each part to read the memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct MemoryEvidence {
    /// The Chat it was learned or remembered in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<uuid::Uuid>, nullable = false)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub chat_id: Option<ChatId>,
    /// The Turn (or learning execution) that wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<uuid::Uuid>, nullable = false)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub execution_id: Option<ExecutionId>,
    /// The position of the message in the Chat's history (0 is the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub message: Option<u32>,
}

/// A memory of a Bot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Memory {
    /// Its ID.
    pub id: uuid::Uuid,
    /// The Bot it belongs to.
    #[schema(value_type = uuid::Uuid)]
    pub bot_id: BotId,
    /// The member whose private memory it is; absent for a memory every member of the Bot shares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub owner_member_id: Option<uuid::Uuid>,
    /// What it says.
    pub content: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// Whether it is recalled.
    pub status: MemoryStatus,
    /// Where it came from.
    pub evidence: MemoryEvidence,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// A memory to write by hand (its evidence is the request: none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct CreateMemory {
    /// What it says: 1-4000 characters.
    #[schema(min_length = 1, max_length = 4000)]
    pub content: String,
    /// Its tags: up to 16, each 1-64 characters.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub tags: Vec<String>,
    /// Keep it as the caller's private memory instead of sharing it with every member of the Bot.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub private: bool,
}

/// A change to a memory; absent fields stay. Changing only tags or status keeps the content's
/// ciphertext as it is stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct MemoryUpdate {
    /// New content: 1-4000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub content: Option<String>,
    /// New tags (replacing the old ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub tags: Option<Vec<String>>,
    /// A new status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub status: Option<MemoryStatus>,
}

/// The filter of `GET /v1/bots/{id}/memories`, beside the page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MemoryFilter {
    /// Only memories with this tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(nullable = false)]
    pub tag: Option<String>,
    /// Only memories with this status (`active` or `retired`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(nullable = false)]
    pub status: Option<MemoryStatus>,
}

/// A search of a Bot's active memories, ranked by keyword and, where the organization
/// configured an embeddings model, by vector similarity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct MemorySearch {
    /// What to look for: 1-2000 characters.
    #[schema(min_length = 1, max_length = 2000)]
    pub query: String,
    /// Only memories with every one of these tags.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub tags: Vec<String>,
    /// The most memories to answer: 1-50, default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 50, nullable = false)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub limit: Option<u32>,
    /// The most tokens the answered memories may hold together (estimated), default 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100000, nullable = false)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub max_tokens: Option<u32>,
}

/// One memory a search found, with its rank's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct MemoryHit {
    /// The memory.
    pub memory: Memory,
    /// Its score: keyword overlap plus, with embeddings, cosine similarity.
    pub score: f64,
}

/// What a search found, best first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct MemorySearchResult {
    /// The memories, best first, within the search's token budget.
    pub items: Vec<MemoryHit>,
    /// Whether vector similarity ranked them too (the organization has an embeddings model).
    pub embeddings: bool,
}

/// An organization's memory settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct MemorySettings {
    /// The embeddings model, as `openai:<model>` or `compatible:<base url>:<model>` (OpenAI's
    /// `/v1/embeddings` wire format, keys from the model registry); absent: keyword ranking only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub embeddings_model: Option<String>,
    /// The helper model that learns memories after a Turn, as a Bot's model spec; absent: the
    /// Bot's own model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub helper_model: Option<String>,
}
