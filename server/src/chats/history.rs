//! A Chat's history: the saved messages of its ended Turns, in order, with the notices that
//! arrived while no Turn took input placed after the Turn they followed.

use openbot_schema::{ContentPart, ExecutionId, Message};

use crate::engine::{EngineContext, EngineError};
use crate::store::{Millis, StoreError};

/// One message of a Chat's history and where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    /// The message.
    pub message: Message,
    /// The Turn that added it, or the child whose notice it is.
    pub execution_id: ExecutionId,
    /// When it was saved.
    pub at: Millis,
}

/// The history of `chat` before the execution `before` (all of it with `None`). Only ended
/// Turns and notices that arrived after them count, so a replay reads the same history.
pub async fn chat_history(
    cx: &EngineContext,
    chat: uuid::Uuid,
    before: Option<ExecutionId>,
) -> Result<Vec<HistoryEntry>, EngineError> {
    let executions = cx.store.chat_executions(chat).await?;
    let notices = cx.store.chat_notices(chat).await?;
    let mut history = Vec::new();
    for execution in executions {
        if before.is_some_and(|before| execution.id >= before) {
            break;
        }
        if let Some(output) = execution.output_record {
            let messages: Vec<Message> = cx.open_json(output).await?;
            history.extend(messages.into_iter().map(|message| HistoryEntry {
                message,
                execution_id: execution.id,
                at: execution.updated_at,
            }));
        }
        for notice in notices
            .iter()
            .filter(|n| n.after_execution == Some(execution.id))
        {
            let content: Vec<ContentPart> = serde_json::from_str(&notice.content)
                .map_err(|e| StoreError::Invalid(format!("notice: {e}")))?;
            history.push(HistoryEntry {
                message: Message::User { content },
                execution_id: notice.source_id,
                at: notice.created_at,
            });
        }
    }
    Ok(history)
}
