//! The Bot store.

use async_trait::async_trait;
use openbot_schema::{BotId, BotSpec};
use uuid::Uuid;

use crate::identity::Caller;
use crate::store::{Millis, StoreError, stored_time};

/// A stored Bot.
#[derive(Debug, Clone, PartialEq)]
pub struct BotRow {
    /// Its ID.
    pub id: BotId,
    /// Its organization.
    pub organization_id: Uuid,
    /// The member who owns it.
    pub owner_member_id: Uuid,
    /// Its definition (with `shared`).
    pub spec: BotSpec,
    /// Grows by one with each change.
    pub revision: i64,
    /// When it was created.
    pub created_at: Millis,
}

/// Bots, read through the caller's access: a caller sees the Bots of its organization that
/// are shared or its own, and only those its token may use.
#[async_trait]
pub trait BotStore: Send + Sync + 'static {
    /// Stores a new Bot owned by the caller's member.
    async fn create_bot(
        &self,
        caller: &Caller,
        id: BotId,
        spec: &BotSpec,
    ) -> Result<BotRow, StoreError>;

    /// A Bot the caller may see.
    async fn visible_bot(&self, caller: &Caller, id: BotId) -> Result<Option<BotRow>, StoreError>;

    /// The Bots the caller may see, oldest first (by ID, which is time-ordered): up to
    /// `limit` after the Bot `after`. The Bot limit is part of the query.
    async fn visible_bots(
        &self,
        caller: &Caller,
        after: Option<BotId>,
        limit: i64,
    ) -> Result<Vec<BotRow>, StoreError>;

    /// Replaces a Bot's definition if it is still at `revision`; returns the new row, or
    /// `None` when the revision moved on (a conflict).
    async fn update_bot(
        &self,
        id: BotId,
        revision: i64,
        spec: &BotSpec,
    ) -> Result<Option<BotRow>, StoreError>;

    /// The Chats of a Bot that are not deleted, every member's.
    async fn live_chats(&self, id: BotId) -> Result<Vec<openbot_schema::ChatId>, StoreError>;
}

/// The public view of a stored Bot.
pub fn bot_view(row: BotRow) -> Result<openbot_schema::Bot, StoreError> {
    Ok(openbot_schema::Bot {
        id: row.id,
        spec: row.spec,
        revision: row.revision.max(0) as u64,
        created_at: stored_time(row.created_at)?,
    })
}

/// Checks a Bot definition for the server: the shared rule of both modes, where a model is
/// always named by its spec (a server has no models registered by name).
pub fn check_spec(spec: &BotSpec) -> Result<(), String> {
    openbot_core::rules::check_bot_spec(spec, |_| false)
}

/// The Bot limit of a caller's token as stored JSON, for queries.
pub(crate) fn bot_limit(caller: &Caller) -> Option<String> {
    caller
        .bot_ids
        .as_ref()
        .map(|ids| serde_json::to_string(ids).unwrap_or_default())
}

/// A Bot definition as stored.
pub(crate) fn spec_json(spec: &BotSpec) -> Result<String, StoreError> {
    serde_json::to_string(spec).map_err(|e| StoreError::Invalid(e.to_string()))
}

/// Reads a stored Bot definition.
pub(crate) fn parse_spec(text: &str) -> Result<BotSpec, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Invalid(format!("bot spec: {e}")))
}
