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
    /// When it was last set.
    pub updated_at: Millis,
}

/// HTTP tools per organization.
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

    /// Removes a tool; returns whether it existed.
    async fn delete_tool(&self, organization: Uuid, name: &str) -> Result<bool, StoreError>;
}
