//! The reminder use cases: list a Chat's reminders and cancel one, for the Chat's member.

use std::sync::Arc;

use openbot_schema::{Action, ChatId, Reminder, ReminderPage, ReminderState, Resource};
use uuid::Uuid;

use super::store::{ReminderRow, ReminderStore};
use crate::chats::ChatStore;
use crate::engine::Engine;
use crate::identity::{AccessError, Caller};
use crate::paging::Paging;
use crate::store::{Millis, StoreError, stored_time};

/// Why a reminder use case failed.
#[derive(Debug, thiserror::Error)]
pub enum ReminderError {
    /// Not there, or not the caller's.
    #[error("{0} was not found")]
    NotFound(&'static str),
    /// The caller's token lacks a right.
    #[error(transparent)]
    Access(#[from] AccessError),
    /// The reminder is no longer pending.
    #[error("{0}")]
    Conflict(String),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The reminder use cases.
#[derive(Clone)]
pub struct Reminders {
    engine: Arc<Engine>,
    reminders: Arc<dyn ReminderStore>,
    chats: Arc<dyn ChatStore>,
}

impl Reminders {
    /// The use cases on these stores.
    pub fn new(
        engine: Arc<Engine>,
        reminders: Arc<dyn ReminderStore>,
        chats: Arc<dyn ChatStore>,
    ) -> Self {
        Self {
            engine,
            reminders,
            chats,
        }
    }

    async fn chat(&self, caller: &Caller, chat: ChatId) -> Result<(), ReminderError> {
        self.chats
            .chat_of(caller.member.member_id, chat, caller.bot_ids.as_deref())
            .await?
            .ok_or(ReminderError::NotFound("chat"))?;
        Ok(())
    }

    async fn view(&self, row: ReminderRow) -> Result<Reminder, ReminderError> {
        let cx = self.engine.context();
        let blob = cx
            .store
            .sealed(row.text_record)
            .await?
            .ok_or_else(|| StoreError::Invalid("a reminder's text is missing".into()))?;
        let text = cx
            .keys
            .open(&blob)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        Ok(Reminder {
            id: row.id,
            chat_id: row.chat_id,
            due_at: stored_time(row.due_at)?,
            text: String::from_utf8_lossy(&text).into_owned(),
            state: row.state,
            source_execution_id: row.source_execution_id,
            delivered_execution_id: row.delivered_execution_id,
            created_at: stored_time(row.created_at)?,
        })
    }

    /// One page of a Chat's reminders (every state), by due time.
    pub async fn list(
        &self,
        caller: &Caller,
        chat: ChatId,
        paging: &Paging<(Millis, Uuid)>,
    ) -> Result<ReminderPage, ReminderError> {
        caller.require(Resource::Chats, Action::Read)?;
        self.chat(caller, chat).await?;
        let rows = self
            .reminders
            .reminders_of_chat(chat, paging.after, paging.fetch())
            .await?;
        let (rows, next_cursor) = paging.finish(rows, |row| (row.due_at, row.id));
        let mut items = Vec::with_capacity(rows.len());
        for row in rows {
            items.push(self.view(row).await?);
        }
        Ok(ReminderPage { items, next_cursor })
    }

    /// Cancels a pending reminder: its text never reaches the Chat.
    pub async fn cancel(
        &self,
        caller: &Caller,
        chat: ChatId,
        id: Uuid,
    ) -> Result<Reminder, ReminderError> {
        caller.require(Resource::Chats, Action::Write)?;
        self.chat(caller, chat).await?;
        let row = match self.reminders.reminder(id).await? {
            Some(row) if row.chat_id == chat => row,
            _ => return Err(ReminderError::NotFound("reminder")),
        };
        if !self
            .reminders
            .finish_reminder(id, ReminderState::Cancelled, None)
            .await?
        {
            return Err(ReminderError::Conflict(
                "the reminder is no longer pending".into(),
            ));
        }
        match self.engine.cancel(row.execution_id).await {
            Ok(_) | Err(StoreError::Ended(_)) => {}
            Err(err) => return Err(err.into()),
        }
        let row = self
            .reminders
            .reminder(id)
            .await?
            .ok_or(ReminderError::NotFound("reminder"))?;
        self.view(row).await
    }
}
