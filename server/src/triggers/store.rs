//! The trigger store: triggers and their firings.

use async_trait::async_trait;
use openbot_schema::{ChatId, ExecutionId, FiringOutcome, TriggerKind, TriggerState};
use uuid::Uuid;

use crate::identity::Credential;
use crate::store::{Millis, SealedBlob, StoreError};

/// A stored trigger.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerRow {
    /// Its ID.
    pub id: Uuid,
    /// The organization of its creator.
    pub organization_id: Uuid,
    /// The Chat it sends to.
    pub chat_id: ChatId,
    /// The member who created it; it sends as them.
    pub member_id: Uuid,
    /// The credential it was created with; its current rights are checked at each firing.
    pub credential: Credential,
    /// Schedule or webhook.
    pub kind: TriggerKind,
    /// Active or paused.
    pub state: TriggerState,
    /// A schedule's cron expression.
    pub cron: Option<String>,
    /// A schedule's time zone.
    pub time_zone: Option<String>,
    /// The text of each firing.
    pub text: Option<String>,
    /// A webhook's sealed signing secret.
    pub secret_record: Option<Uuid>,
    /// A schedule's timer execution.
    pub execution_id: Option<ExecutionId>,
    /// The slot a schedule waits for.
    pub next_fire_at: Option<Millis>,
    /// Why the server paused it.
    pub paused_reason: Option<String>,
    /// When it was created.
    pub created_at: Millis,
}

/// A trigger to store.
#[derive(Debug, Clone)]
pub struct NewTrigger {
    /// The row (its state `active`).
    pub row: TriggerRow,
    /// A webhook's sealed signing secret, stored with it.
    pub secret: Option<SealedBlob>,
}

/// A stored firing.
#[derive(Debug, Clone, PartialEq)]
pub struct FiringRow {
    /// Its ID.
    pub id: Uuid,
    /// The trigger.
    pub trigger_id: Uuid,
    /// When it fired.
    pub fired_at: Millis,
    /// A schedule's slot.
    pub scheduled_for: Option<Millis>,
    /// Whether it caught up slots missed while no node ran.
    pub catch_up: bool,
    /// A webhook delivery's ID.
    pub delivery_id: Option<String>,
    /// Sent or refused.
    pub outcome: FiringOutcome,
    /// Why it was refused.
    pub reason: Option<String>,
    /// The Turn it sent to.
    pub execution_id: Option<ExecutionId>,
}

/// Triggers and their firings.
#[async_trait]
pub trait TriggerStore: Send + Sync + 'static {
    /// Stores a trigger (and a webhook's sealed secret) in one transaction.
    async fn create_trigger(&self, new: NewTrigger) -> Result<TriggerRow, StoreError>;

    /// A trigger that is not deleted.
    async fn trigger(&self, id: Uuid) -> Result<Option<TriggerRow>, StoreError>;

    /// The member's triggers that are not deleted, oldest first, after `after`; with
    /// `bot_ids`, only those whose Chat's Bot is one of them (in the query).
    async fn triggers_of(
        &self,
        member_id: Uuid,
        bot_ids: Option<&[openbot_schema::BotId]>,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<TriggerRow>, StoreError>;

    /// Sets a schedule's timer execution.
    async fn set_trigger_execution(
        &self,
        id: Uuid,
        execution_id: ExecutionId,
    ) -> Result<(), StoreError>;

    /// Sets the state (with the server's reason for a pause) of a trigger not deleted;
    /// `None` when there is none.
    async fn set_trigger_state(
        &self,
        id: Uuid,
        state: TriggerState,
        reason: Option<&str>,
    ) -> Result<Option<TriggerRow>, StoreError>;

    /// Sets the slot a schedule waits for.
    async fn set_next_fire(&self, id: Uuid, at: Option<Millis>) -> Result<(), StoreError>;

    /// Marks a trigger deleted; false when there was none.
    async fn delete_trigger(&self, id: Uuid) -> Result<bool, StoreError>;

    /// Records a firing once: a second firing of the same schedule slot or webhook delivery
    /// writes nothing and returns the first.
    async fn record_firing(&self, firing: FiringRow) -> Result<FiringRow, StoreError>;

    /// A webhook delivery's firing, if it was taken.
    async fn delivery_firing(
        &self,
        trigger_id: Uuid,
        delivery_id: &str,
    ) -> Result<Option<FiringRow>, StoreError>;

    /// A trigger's firings, newest first, before `before`.
    async fn firings(
        &self,
        trigger_id: Uuid,
        before: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<FiringRow>, StoreError>;
}
