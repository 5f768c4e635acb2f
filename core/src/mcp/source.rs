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
                    definition: app_tool_definition(&self.name, declaration),
                    tool: declaration.name.clone(),
                    session: Session::Shared(Arc::clone(&self.session)),
                }) as SharedTool
            })
            .collect()
    }
}

/// The definition a model sees for the tool `declaration` of the App `app`: named
/// `<app>__<tool>`, with the declared description and input schema.
pub fn app_tool_definition(app: &str, declaration: &AppToolDeclaration) -> ToolDefinition {
    ToolDefinition {
        name: format!("{app}{APP_TOOL_SEPARATOR}{}", declaration.name),
        description: declaration.description.clone(),
        input_schema: declaration.input_schema.clone(),
    }
}

enum Session {
    /// One session for every call, open while the tool lives.
    Shared(Arc<McpSession>),
    /// A session of its own for each call, closed before the call returns.
    PerCall(Box<(McpEndpoint, OpenOptions)>),
}

/// One tool of an MCP server.
pub struct McpTool {
    definition: ToolDefinition,
    tool: String,
    session: Session,
}

impl McpTool {
    /// The tool `declaration` of the App `app` at `endpoint`: each call opens a session of
    /// its own and closes it before it returns.
    pub fn per_call(
        app: &str,
        declaration: &AppToolDeclaration,
        endpoint: McpEndpoint,
        options: OpenOptions,
    ) -> Self {
        Self {
            definition: app_tool_definition(app, declaration),
            tool: declaration.name.clone(),
            session: Session::PerCall(Box::new((endpoint, options))),
        }
    }
}

#[async_trait]
impl Tool for McpTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let result = match &self.session {
            Session::Shared(session) => {
                session
                    .call_tool(
                        &self.tool,
                        arguments,
                        &context.idempotency_key,
                        &context.cancel,
                    )
                    .await
            }
            Session::PerCall(reach) => {
                let (endpoint, options) = &**reach;
                let session = McpSession::open(endpoint, options)
                    .await
                    .map_err(|e| ToolError::new(e.to_string()))?;
                let result = session
                    .call_tool(
                        &self.tool,
                        arguments,
                        &context.idempotency_key,
                        &context.cancel,
                    )
                    .await;
                // A discovery keeps no session: a failed close changes nothing it read.
                let _ = session.close().await;
                result
            }
        }
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
