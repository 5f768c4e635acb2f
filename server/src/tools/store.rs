//! The tool registry store.

use async_trait::async_trait;
use openbot_schema::ToolDefinition;
use uuid::Uuid;

use crate::store::{Millis, StoreError};

/// A registered HTTP tool.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpToolRow {
    /// What the model sees.
    pub definition: ToolDefinition,
    /// The endpoint.
    pub url: String,
    /// Whether the endpoint deduplicates by `Idempotency-Key`.
    pub retry_safe: bool,
    /// Whether each call runs detached, in its own execution.
    pub background: bool,
    /// The headers and added body fields of each call, Vault references as written.
    pub template: super::CallTemplate,
    /// When it was last set.
    pub updated_at: Millis,
}

/// A registered delegate tool: its calls start a Turn of another Bot.
#[derive(Debug, Clone, PartialEq)]
pub struct DelegateToolRow {
    /// The name Bots use.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The Bot that does the task.
    pub bot_id: openbot_schema::BotId,
    /// Limits added to each child.
    pub limits: openbot_schema::Limits,
    /// When it was last set.
    pub updated_at: Millis,
}

/// HTTP and delegate tools per organization.
#[async_trait]
pub trait ToolStore: Send + Sync + 'static {
    /// Registers a tool under its definition's name, replacing an earlier one.
    async fn put_tool(
        &self,
        organization: Uuid,
        tool: HttpToolRow,
    ) -> Result<HttpToolRow, StoreError>;

    /// The organization's tools, by name.
    async fn tools(&self, organization: Uuid) -> Result<Vec<HttpToolRow>, StoreError>;

    /// Up to `limit` of the organization's tools by name, after the name `after` when given.
    async fn tools_page(
        &self,
        organization: Uuid,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<HttpToolRow>, StoreError>;

    /// Removes a tool; returns whether it existed.
    async fn delete_tool(&self, organization: Uuid, name: &str) -> Result<bool, StoreError>;

    /// Registers a delegate tool under its name, replacing an earlier one.
    async fn put_delegate(
        &self,
        organization: Uuid,
        tool: DelegateToolRow,
    ) -> Result<DelegateToolRow, StoreError>;

    /// The organization's delegate tools, by name.
    async fn delegates(&self, organization: Uuid) -> Result<Vec<DelegateToolRow>, StoreError>;

    /// Up to `limit` of the organization's delegate tools by name, after the name `after`
    /// when given.
    async fn delegates_page(
        &self,
        organization: Uuid,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<DelegateToolRow>, StoreError>;

    /// Removes a delegate tool; returns whether it existed.
    async fn delete_delegate(&self, organization: Uuid, name: &str) -> Result<bool, StoreError>;
}
