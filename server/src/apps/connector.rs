//! Apps whose MCP server is a Connector: a local server a paired Computer publishes, reached
//! over the Computer's link. The App use cases stay the same (registration, Connections,
//! discovery, saved declarations and calls); only how a session is opened differs, and that
//! is the Computers capability's to say ([`ConnectorReach`], registered with the features).

use std::sync::Arc;

use async_trait::async_trait;
use openbot_core::mcp::{McpError, McpToolResult};
use openbot_schema::AppToolDeclaration;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::AppError;

/// How Connector Apps reach their Computers. Every method names the Computer; the machine's
/// agent decides what the Connector runs.
#[async_trait]
pub trait ConnectorReach: Send + Sync {
    /// Whether `member` of `organization` may publish a Connector of `computer` to the
    /// organization: the Computer is the organization's (shared) or the member's own. Any
    /// other reads as not found.
    async fn check_publish(
        &self,
        organization: Uuid,
        member: Uuid,
        computer: Uuid,
    ) -> Result<(), AppError>;

    /// Lists the Connector's tools.
    async fn tools(
        &self,
        computer: Uuid,
        connector: &str,
    ) -> Result<Vec<AppToolDeclaration>, McpError>;

    /// Opens a session named `session` on the Connector.
    async fn open(&self, computer: Uuid, connector: &str, session: &str) -> Result<(), McpError>;

    /// Calls `tool` on an open session. A lost answer is [`McpError::Lost`]: it may have run.
    async fn call(
        &self,
        computer: Uuid,
        session: &str,
        tool: &str,
        arguments: Value,
        request_id: &str,
        cancel: &CancellationToken,
    ) -> Result<McpToolResult, McpError>;

    /// Closes a session (a session the machine no longer has counts as closed).
    async fn close(&self, computer: Uuid, session: &str) -> Result<(), McpError>;
}

/// Registers how Connector Apps reach their Computers.
pub fn register(
    features: crate::features::Features,
    reach: Arc<dyn ConnectorReach>,
) -> crate::features::Features {
    features.with(reach)
}

/// How Connector Apps reach their Computers, as [`register`] left it.
pub fn reach(features: &crate::features::Features) -> Option<&Arc<dyn ConnectorReach>> {
    features.get::<Arc<dyn ConnectorReach>>()
}

/// A Connector session held by the resource directory: closing it closes the session on the
/// machine, through whichever node holds the machine's link.
pub(crate) struct ConnectorSession {
    pub reach: Arc<dyn ConnectorReach>,
    pub computer: Uuid,
    pub session: String,
}

#[async_trait]
impl crate::cluster::directory::Physical for ConnectorSession {
    async fn close(self: Box<Self>) -> Result<(), String> {
        self.reach
            .close(self.computer, &self.session)
            .await
            .map_err(|err| err.to_string())
    }
}
