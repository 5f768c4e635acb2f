//! The budget store.

use async_trait::async_trait;
use openbot_schema::{BotId, BudgetScope, ChatId};
use uuid::Uuid;

use crate::store::{Millis, StoreError};

/// A budget with what its scope spent.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetRow {
    /// What it caps.
    pub scope: BudgetScope,
    /// The organization, Bot or Chat.
    pub target_id: Uuid,
    /// The cap in millionths of a US dollar.
    pub max_cost_micros: i64,
    /// The known cost of every Turn in the scope so far.
    pub spent_micros: i64,
    /// When it was last set.
    pub updated_at: Millis,
}

/// The first budget above a Turn that is used up.
#[derive(Debug, Clone, PartialEq)]
pub struct Exhausted {
    /// Its scope.
    pub scope: BudgetScope,
    /// Its cap.
    pub max_cost_micros: i64,
    /// What was spent.
    pub spent_micros: i64,
}

/// Budgets per organization.
#[async_trait]
pub trait BudgetStore: Send + Sync + 'static {
    /// Sets a budget, replacing an earlier one for the same target; `None` when the target is
    /// not the organization itself, nor one of its Bots or live Chats.
    async fn put_budget(
        &self,
        organization: Uuid,
        scope: BudgetScope,
        target: Uuid,
        max_cost_micros: i64,
    ) -> Result<Option<BudgetRow>, StoreError>;

    /// The organization's budgets with their spending, by scope and target.
    async fn budgets(&self, organization: Uuid) -> Result<Vec<BudgetRow>, StoreError>;

    /// Up to `limit` of the organization's budgets by scope and target, after the budget at
    /// `after` (its scope's name and target) when given; with `bot_ids`, the organization's
    /// budget and those of these Bots and their Chats only.
    async fn budgets_page(
        &self,
        organization: Uuid,
        bot_ids: Option<&[openbot_schema::BotId]>,
        after: Option<(String, Uuid)>,
        limit: i64,
    ) -> Result<Vec<BudgetRow>, StoreError>;

    /// Removes a budget; returns whether it existed.
    async fn delete_budget(
        &self,
        organization: Uuid,
        scope: BudgetScope,
        target: Uuid,
    ) -> Result<bool, StoreError>;

    /// The first budget of the organization, the Bot or the Chat that is used up, if any.
    async fn exhausted(
        &self,
        organization: Uuid,
        bot: BotId,
        chat: ChatId,
    ) -> Result<Option<Exhausted>, StoreError>;
}

/// The stored form of a scope.
pub(crate) fn parse_scope(text: &str) -> Result<BudgetScope, StoreError> {
    BudgetScope::parse(text).ok_or_else(|| StoreError::Invalid(format!("budget scope `{text}`")))
}
