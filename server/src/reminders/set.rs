//! Setting a reminder from a `remind` call: its timer (a detached child of the Turn) and its
//! rows, both committed with the call's result, so a reminder exists exactly when the model
//! was told it does.

use openbot_schema::{ChatId, ExecutionId};
use uuid::Uuid;

use super::sql::NewReminder;
use super::store::ReminderRow;
use super::tool::RemindArgs;
use super::workflow::{REMINDER, ReminderInput};
use crate::engine::EngineContext;
use crate::identity::ExecutionIdentity;
use crate::store::{ChildStart, NewChild, NewExecution, Scope, StoreError};

/// A reminder ready to commit with its call's result.
#[derive(Debug)]
pub struct SetReminder {
    /// Its ID.
    pub id: Uuid,
    /// Its timer.
    pub child: NewChild,
    /// Its rows.
    pub write: NewReminder,
}

/// Builds the reminder `args` of the Turn `parent` (in `scope`, with `identity`) in `chat`.
pub fn set_reminder(
    cx: &EngineContext,
    parent: ExecutionId,
    scope: Scope,
    chat: ChatId,
    identity: &ExecutionIdentity,
    args: RemindArgs,
) -> Result<SetReminder, StoreError> {
    let id = Uuid::now_v7();
    let seal = |bytes: &[u8]| {
        cx.keys
            .seal(Uuid::now_v7(), bytes)
            .map_err(|e| StoreError::Invalid(e.to_string()))
    };
    let input = ReminderInput {
        reminder_id: id,
        identity: identity.clone(),
    };
    // A deleted Chat's gate is closed: no reminder starts in it.
    let execution = NewExecution::sealed(&cx.keys, REMINDER, scope, &input)?
        .child_of(parent)
        .behind_gate(Some(chat.as_uuid()));
    let text = seal(args.text.as_bytes())?;
    let row = ReminderRow {
        id,
        organization_id: identity.organization_id,
        chat_id: chat,
        execution_id: execution.id,
        source_execution_id: parent,
        due_at: args.due_at,
        text_record: text.id,
        state: openbot_schema::ReminderState::Pending,
        delivered_execution_id: None,
        created_at: crate::store::now_ms(),
    };
    Ok(SetReminder {
        id,
        child: NewChild {
            execution,
            start: ChildStart::Queued,
            attached: false,
            request: None,
        },
        write: NewReminder { row, text },
    })
}
