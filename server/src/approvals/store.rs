//! The approval rules store.

use async_trait::async_trait;
use uuid::Uuid;

use super::rules::RuleRow;
use crate::store::StoreError;

/// Approval rules per organization.
#[async_trait]
pub trait RuleStore: Send + Sync + 'static {
    /// Adds a rule.
    async fn add_rule(&self, organization: Uuid, rule: RuleRow) -> Result<RuleRow, StoreError>;

    /// The organization's rules, oldest first.
    async fn rules(&self, organization: Uuid) -> Result<Vec<RuleRow>, StoreError>;

    /// Up to `limit` of the organization's rules, oldest first, after the rule at `after`
    /// (its creation time and ID) when given; with `bot_ids`, only the rules for every Bot and
    /// those for one of `bot_ids`.
    async fn rules_page(
        &self,
        organization: Uuid,
        bot_ids: Option<&[openbot_schema::BotId]>,
        after: Option<crate::paging::CreatedPosition>,
        limit: i64,
    ) -> Result<Vec<RuleRow>, StoreError>;

    /// A rule of the organization.
    async fn rule(&self, organization: Uuid, id: Uuid) -> Result<Option<RuleRow>, StoreError>;

    /// Removes a rule; returns whether it existed.
    async fn delete_rule(&self, organization: Uuid, id: Uuid) -> Result<bool, StoreError>;
}

/// Reads a stored action name.
pub(super) fn parse_action(text: &str) -> Result<openbot_schema::RuleAction, StoreError> {
    serde_json::from_value(serde_json::Value::String(text.to_string()))
        .map_err(|_| StoreError::Invalid(format!("unknown rule action `{text}`")))
}

/// An action's stored name.
pub(super) fn action_name(action: openbot_schema::RuleAction) -> &'static str {
    match action {
        openbot_schema::RuleAction::Allow => "allow",
        openbot_schema::RuleAction::Ask => "ask",
        openbot_schema::RuleAction::Deny => "deny",
    }
}
