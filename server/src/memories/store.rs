//! The memory store: rows with their content sealed, and the reads and writes on them. Every
//! read filters on the reader's rights in its one SQL statement before anything is opened.

use async_trait::async_trait;
use openbot_schema::BotId;
use uuid::Uuid;

use crate::store::{Millis, StoreError};

/// Who reads or changes memories: a member of an organization, on one Bot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reader {
    /// The organization.
    pub organization_id: Uuid,
    /// The Bot whose memories are read.
    pub bot_id: BotId,
    /// The member: sees the shared memories and its own private ones, each only when it may
    /// read the memory's evidence (its Chat).
    pub member_id: Uuid,
    /// Whether it may change and delete shared memories (the Bot's owner or an admin).
    pub may_change_shared: bool,
}

/// A stored memory; its content and embedding still sealed.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryRow {
    /// Its ID.
    pub id: Uuid,
    /// Its Bot.
    pub bot_id: BotId,
    /// The member whose private memory it is; `None`: shared.
    pub owner_member_id: Option<Uuid>,
    /// `active` or `retired`.
    pub status: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its evidence: Chat, execution, message.
    pub evidence_chat_id: Option<Uuid>,
    /// The execution that wrote it.
    pub evidence_execution_id: Option<Uuid>,
    /// The message's position in the Chat's history.
    pub evidence_message: Option<i64>,
    /// The content's key and sealed bytes.
    pub content: crate::sealed::SealedValue,
    /// The content's sealed digest, which ranking opens instead of the content; `None` for a
    /// memory written before digests were kept (its content is opened to rank it).
    pub digest: Option<crate::sealed::SealedValue>,
    /// The embedding's key and sealed bytes, and its model.
    pub embedding: Option<(crate::sealed::SealedValue, String)>,
    /// When it was written.
    pub created_at: Millis,
    /// When it last changed.
    pub updated_at: Millis,
}

/// A memory's content sealed with its digest.
#[derive(Debug, Clone, PartialEq)]
pub struct SealedContent {
    /// The content.
    pub content: crate::sealed::SealedValue,
    /// What ranking reads of it (`openbot_core::memories::TermDigest`).
    pub digest: crate::sealed::SealedValue,
}

/// One change to memories, applied in order in one transaction that holds the Bot's memory
/// lock alone (see [`MemoryStore::apply`]).
#[derive(Debug, Clone, PartialEq)]
pub enum MemoryOp {
    /// Moves a Chat's learning cursor from `from` to `to` (compare-and-set). When the cursor
    /// is not at `from` (other learning got further) nothing after it in the list is applied.
    Cursor {
        /// The Chat.
        chat_id: Uuid,
        /// Where the learner read it.
        from: i64,
        /// Where it ends now.
        to: i64,
    },
    /// Writes a new memory; a memory with its ID already there stays (a retried write). Only
    /// the reader's own private memory, or a shared one when it may change shared memories;
    /// any other is not written (0 rows).
    Insert(Box<MemoryRow>),
    /// Changes a memory the reader may change; tags and status changes leave the sealed
    /// content as it is.
    Update {
        /// The memory.
        id: Uuid,
        /// New sealed content with its new embedding (or none).
        content: Option<(SealedContent, Option<(crate::sealed::SealedValue, String)>)>,
        /// New tags.
        tags: Option<Vec<String>>,
        /// A new status.
        status: Option<String>,
    },
    /// Deletes a memory the reader may change.
    Delete {
        /// The memory.
        id: Uuid,
    },
}

/// A Bot as memory work sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotMemory {
    /// Whether memory is on.
    pub on: bool,
    /// Its model spec.
    pub model: String,
    /// The member who owns it (who may change its shared memories, besides admins).
    pub owner_member_id: Uuid,
}

/// What to read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryQuery {
    /// Only this status.
    pub status: Option<String>,
    /// Only memories with every one of these tags.
    pub tags: Vec<String>,
    /// Only the reader's own private memories.
    pub own_only: bool,
    /// After this ID (oldest first), or, with `newest_first`, before it.
    pub after: Option<Uuid>,
    /// Newest first (recall) instead of oldest first (lists).
    pub newest_first: bool,
    /// The most rows.
    pub limit: i64,
}

/// Memories on SQL.
#[async_trait]
pub trait MemoryStore: Send + Sync + 'static {
    /// The memories the reader may read that match the query. Rights, owner, tags and status
    /// are conditions of the one statement; nothing else is read.
    async fn memories(
        &self,
        reader: &Reader,
        query: &MemoryQuery,
    ) -> Result<Vec<MemoryRow>, StoreError>;

    /// One memory the reader may read.
    async fn memory(&self, reader: &Reader, id: Uuid) -> Result<Option<MemoryRow>, StoreError>;

    /// Applies `ops` as `reader` in one transaction that first takes the Bot's memory lock
    /// alone; returns the rows each op changed (0: not there, not the reader's to change, or
    /// skipped after a cursor that moved on).
    async fn apply(&self, reader: &Reader, ops: &[MemoryOp]) -> Result<Vec<u64>, StoreError>;

    /// Whether a Bot that is not deleted has memory on now, its model spec and owner.
    async fn bot_memory(&self, bot: BotId) -> Result<Option<BotMemory>, StoreError>;

    /// A Chat's learning cursor: how many history entries learning has taken.
    async fn cursor(&self, chat_id: Uuid) -> Result<i64, StoreError>;

    /// The memory lock's generation of a Bot (0 before any change).
    async fn lock_generation(&self, bot: BotId) -> Result<i64, StoreError>;

    /// An organization's memory settings: its embeddings and helper models.
    async fn settings(
        &self,
        organization: Uuid,
    ) -> Result<(Option<String>, Option<String>), StoreError>;

    /// Sets an organization's memory settings.
    async fn put_settings(
        &self,
        organization: Uuid,
        embeddings_model: Option<&str>,
        helper_model: Option<&str>,
    ) -> Result<(), StoreError>;
}
