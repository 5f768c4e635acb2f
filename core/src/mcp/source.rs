//! MCP servers as tool sources for a standalone agent (`memory://`, [`crate::Agent`]).

use std::sync::Arc;

use async_trait::async_trait;
use openbot_schema::{APP_TOOL_SEPARATOR, AppToolDeclaration, ToolDefinition};
use serde_json::Value;

use super::{McpEndpoint, McpError, McpSession, OpenOptions};
use crate::tool::{SharedTool, Tool, ToolContext, ToolError, ToolOutput};

/// One open MCP server whose tools a standalone agent may call, named
/// `<name>__<tool>` as a server's Bot names an App's tools. The session stays open while a
/// tool of it is alive (a standalone process has no phases to scope it to).
pub struct McpToolSource {
    name: String,
    session: Arc<McpSession>,
    tools: Vec<AppToolDeclaration>,
}

impl McpToolSource {
    /// Opens a session to the server at `endpoint` and lists its tools once.
    pub async fn open(
        name: &str,
        endpoint: &McpEndpoint,
        options: &OpenOptions,
    ) -> Result<Self, McpError> {
        let session = McpSession::open(endpoint, options).await?;
        let tools = session.list_tools().await?;
        Ok(Self {
            name: name.to_string(),
            session: Arc::new(session),
            tools,
        })
    }

    /// The tools the server declared.
    pub fn declarations(&self) -> &[AppToolDeclaration] {
        &self.tools
    }

    /// The tool handlers, each named `<name>__<tool>`, for [`crate::ConnectOptions::tools`]
    /// or an [`crate::Agent`]'s tools.
    pub fn tools(&self) -> Vec<SharedTool> {
        self.tools
            .iter()
            .map(|declaration| {
                Arc::new(McpTool {
                    definition: ToolDefinition {
                        name: format!("{}{APP_TOOL_SEPARATOR}{}", self.name, declaration.name),
                        description: declaration.description.clone(),
                        input_schema: declaration.input_schema.clone(),
                    },
                    tool: declaration.name.clone(),
                    session: Arc::clone(&self.session),
                }) as SharedTool
            })
            .collect()
    }
}

/// One tool of an MCP server, called over a shared session.
pub struct McpTool {
    definition: ToolDefinition,
    tool: String,
    session: Arc<McpSession>,
}

#[async_trait]
impl Tool for McpTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let result = self
            .session
            .call_tool(
                &self.tool,
                arguments,
                &context.idempotency_key,
                &context.cancel,
            )
            .await
            .map_err(|e| ToolError::new(e.to_string()))?;
        if result.is_error {
            let text = result
                .content
                .iter()
                .filter_map(|p| p.as_text())
                .collect::<Vec<_>>()
                .join("\n");
            return Err(ToolError::new(text));
        }
        Ok(ToolOutput {
            content: result.content,
        })
    }
}
