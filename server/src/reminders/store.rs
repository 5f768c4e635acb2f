//! The reminder store.

use async_trait::async_trait;
use openbot_schema::{ChatId, ExecutionId, ReminderState};
use uuid::Uuid;

use crate::store::{Millis, StoreError};

/// A stored reminder.
#[derive(Debug, Clone, PartialEq)]
pub struct ReminderRow {
    /// Its ID.
    pub id: Uuid,
    /// The organization.
    pub organization_id: Uuid,
    /// The Chat.
    pub chat_id: ChatId,
    /// Its timer execution.
    pub execution_id: ExecutionId,
    /// The Turn that set it.
    pub source_execution_id: ExecutionId,
    /// When it is due.
    pub due_at: Millis,
    /// The sealed record of its text.
    pub text_record: Uuid,
    /// Where it is.
    pub state: ReminderState,
    /// The Turn its text went to.
    pub delivered_execution_id: Option<ExecutionId>,
    /// When it was set.
    pub created_at: Millis,
}

/// Reminders; each is written with the tool call that set it (see [`super::NewReminder`]).
#[async_trait]
pub trait ReminderStore: Send + Sync + 'static {
    /// A reminder.
    async fn reminder(&self, id: Uuid) -> Result<Option<ReminderRow>, StoreError>;

    /// The reminder of a timer execution.
    async fn reminder_of_execution(
        &self,
        execution_id: ExecutionId,
    ) -> Result<Option<ReminderRow>, StoreError>;

    /// A Chat's reminders by due time, after `(due_at, id)`.
    async fn reminders_of_chat(
        &self,
        chat_id: ChatId,
        after: Option<(Millis, Uuid)>,
        limit: i64,
    ) -> Result<Vec<ReminderRow>, StoreError>;

    /// Moves a pending reminder to `state`; false when it was no longer pending.
    async fn finish_reminder(
        &self,
        id: Uuid,
        state: ReminderState,
        delivered: Option<ExecutionId>,
    ) -> Result<bool, StoreError>;
}
