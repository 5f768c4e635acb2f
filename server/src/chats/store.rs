//! The Chat store.

use async_trait::async_trait;
use openbot_schema::{BotId, ChatId};
use uuid::Uuid;

use crate::store::{Millis, StoreError};

/// A stored Chat.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRow {
    /// Its ID (also the ID of its admission gate).
    pub id: ChatId,
    /// Its Bot.
    pub bot_id: BotId,
    /// The member it belongs to.
    pub member_id: Uuid,
    /// Its title.
    pub title: String,
    /// Grows by one with each change.
    pub revision: i64,
    /// When it was created.
    pub created_at: Millis,
    /// Whether its Bot may only propose a plan (until a person approves one).
    pub plan_mode: bool,
}

/// Chats, each visible to its member only.
#[async_trait]
pub trait ChatStore: Send + Sync + 'static {
    /// Creates a Chat and opens its admission gate, together.
    async fn create_chat(
        &self,
        member_id: Uuid,
        bot_id: BotId,
        id: ChatId,
    ) -> Result<ChatRow, StoreError>;

    /// One of the member's Chats, unless deleted; with `bot_ids` (a token limited to some
    /// Bots) only a Chat with one of those Bots.
    async fn chat_of(
        &self,
        member_id: Uuid,
        id: ChatId,
        bot_ids: Option<&[BotId]>,
    ) -> Result<Option<ChatRow>, StoreError>;

    /// The member's Chats, oldest first (by ID, which is time-ordered): up to `limit` after
    /// the Chat `after`, only those with `bot` when given; with `bot_ids` only those with one
    /// of those Bots (the Bot limit is part of the query).
    async fn chats_of(
        &self,
        member_id: Uuid,
        bot_ids: Option<&[BotId]>,
        bot: Option<BotId>,
        after: Option<ChatId>,
        limit: i64,
    ) -> Result<Vec<ChatRow>, StoreError>;

    /// Renames a Chat if it is still at `revision`; `None` when the revision moved on.
    async fn rename_chat(
        &self,
        id: ChatId,
        revision: i64,
        title: &str,
    ) -> Result<Option<ChatRow>, StoreError>;

    /// Closes the Chat's admission gate and marks it deleted, together.
    async fn delete_chat(&self, id: ChatId) -> Result<(), StoreError>;

    /// Turns plan mode on or off for a Chat that is not deleted; `None` when there is none.
    async fn set_plan_mode(&self, id: ChatId, on: bool) -> Result<Option<ChatRow>, StoreError>;

    /// Whether a Chat is in plan mode now (false for a Chat that is not there).
    async fn plan_mode_on(&self, id: ChatId) -> Result<bool, StoreError>;
}
