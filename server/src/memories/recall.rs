//! What a Turn of a Bot with memory gets before its model requests: the memories it recalls
//! within the token budget (appended to its system instructions) and the tools `remember`,
//! `recall` and `forget`, acting as the Turn's Chat member.

use openbot_core::memories::{DEFAULT_RECALL_TOKENS, memory_tool_set, recall_instructions};
use openbot_core::tool::SharedTool;
use openbot_schema::{ChatId, ContentPart, ExecutionId};

use super::service::{Memories, MemoryError};
use super::work_reader::work_reader;
use crate::identity::{ExecutionIdentity, IdentityCheckError, IdentityStore};

/// A Turn's memory: its instructions with what it recalled, and its memory tools.
pub struct TurnMemory {
    /// The system instructions with the recalled memories.
    pub instructions: String,
    /// The memory tools (each retry-safe: `remember` writes one memory per call key).
    pub tools: Vec<SharedTool>,
    /// How many memories were recalled.
    pub recalled: usize,
}

/// The memory of a Turn of `identity`'s Bot when the Bot has memory on (else `None`): recall
/// for `input` (the Turn's input text) within [`DEFAULT_RECALL_TOKENS`], as the Chat's member
/// (whose tools write shared memories only with the rights `rights` says it has now).
pub async fn turn_memory(
    memories: &Memories,
    identity: &ExecutionIdentity,
    rights: Option<&dyn IdentityStore>,
    execution: ExecutionId,
    chat: Option<ChatId>,
    instructions: &str,
    input: &[ContentPart],
) -> Result<Option<TurnMemory>, MemoryError> {
    let bot = match memories.store().bot_memory(identity.bot_id).await? {
        Some(bot) if bot.on => bot,
        _ => return Ok(None),
    };
    let reader = work_reader(identity, rights, bot.owner_member_id)
        .await
        .map_err(|err| match err {
            IdentityCheckError::Denied(cause) => MemoryError::Forbidden(cause),
            IdentityCheckError::Store(err) => MemoryError::Store(err),
        })?;
    let query: String = input
        .iter()
        .filter_map(|part| match part {
            ContentPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ");
    let found = memories
        .ranked(&reader, &query, &[], DEFAULT_RECALL_TOKENS, 20)
        .await?;
    let selected: Vec<(uuid::Uuid, String)> = found
        .items
        .into_iter()
        .map(|hit| (hit.memory.id, hit.memory.content))
        .collect();
    Ok(Some(TurnMemory {
        instructions: recall_instructions(instructions, &selected),
        recalled: selected.len(),
        tools: memory_tool_set(memories.tools(reader, execution, chat)),
    }))
}
