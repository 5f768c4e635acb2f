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
    // The executions with their outputs and the notices: two reads side by side.
    let (executions, notices) = tokio::try_join!(
        cx.store.chat_outputs(chat, before),
        cx.store.chat_notices(chat)
    )?;
    let mut history = Vec::new();
    for execution in executions {
        if let Some(record) = execution.output_record {
            let blob = execution
                .output
                .ok_or_else(|| StoreError::Invalid(format!("sealed record {record} is missing")))?;
            let messages: Vec<Message> = cx.open_blob_json(&blob)?;
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

/// Where an entry stands in a Chat's history: the execution it belongs to (the Turn that
/// added it, or the one its notice follows) and its place among that execution's entries.
pub type HistoryPosition = (ExecutionId, u32);

/// How many executions one read of a history page takes at a time.
const EXECUTION_BATCH: i64 = 64;

/// The entries of `execution`, its saved messages first and then the notices that followed
/// it, each with its position.
async fn entries_of(
    cx: &EngineContext,
    execution: &crate::store::ExecutionRow,
    notices: &[crate::store::ChatNoticeRow],
    into: &mut Vec<(HistoryPosition, HistoryEntry)>,
) -> Result<(), EngineError> {
    let mut index = 0u32;
    if let Some(output) = execution.output_record {
        let messages: Vec<Message> = cx.open_json(output).await?;
        for message in messages {
            into.push((
                (execution.id, index),
                HistoryEntry {
                    message,
                    execution_id: execution.id,
                    at: execution.updated_at,
                },
            ));
            index += 1;
        }
    }
    for notice in notices
        .iter()
        .filter(|n| n.after_execution == Some(execution.id))
    {
        let content: Vec<ContentPart> = serde_json::from_str(&notice.content)
            .map_err(|e| StoreError::Invalid(format!("notice: {e}")))?;
        into.push((
            (execution.id, index),
            HistoryEntry {
                message: Message::User { content },
                execution_id: notice.source_id,
                at: notice.created_at,
            },
        ));
        index += 1;
    }
    Ok(())
}

/// Up to `want` entries of `chat`'s history after the position `after` (from the start with
/// `None`), oldest first, each with its position: the same entries, in the same order, as
/// [`chat_history`]. Executions are read from the store in batches from the position's
/// execution on, so a page reads only the executions it shows (and one batch more at most).
pub async fn chat_history_after(
    cx: &EngineContext,
    chat: uuid::Uuid,
    after: Option<HistoryPosition>,
    want: usize,
) -> Result<Vec<(HistoryPosition, HistoryEntry)>, EngineError> {
    let mut entries = Vec::new();
    let mut from = after.map(|(id, _)| id);
    // The execution already read whose row a batch that starts at it holds again.
    let mut seen: Option<ExecutionId> = None;
    loop {
        let batch = cx
            .store
            .chat_executions_from(chat, from, EXECUTION_BATCH)
            .await?;
        let full = batch.len() as i64 == EXECUTION_BATCH;
        let batch: Vec<_> = batch
            .into_iter()
            .filter(|row| Some(row.id) != seen)
            .collect();
        let (Some(first), Some(last)) = (batch.first(), batch.last()) else {
            break;
        };
        let notices = cx
            .store
            .chat_notices_between(chat, first.id, last.id)
            .await?;
        for execution in &batch {
            let start = entries.len();
            entries_of(cx, execution, &notices, &mut entries).await?;
            // The page after `after` starts behind its entry in its execution.
            if let Some((id, index)) = after
                && execution.id == id
            {
                let mut kept = entries.split_off(start);
                kept.retain(|((_, i), _)| *i > index);
                entries.extend(kept);
            }
            if entries.len() >= want {
                entries.truncate(want);
                return Ok(entries);
            }
        }
        if !full {
            break;
        }
        from = Some(last.id);
        seen = Some(last.id);
    }
    Ok(entries)
}
