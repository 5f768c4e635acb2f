//! App tools in a Turn: the route a Turn saves for each, and the handler of a saved call.
//!
//! A saved call finds only its selected kind (an App) and name in the Turn's saved tools,
//! checks the full saved declaration (the model's definition is built from it and the
//! arguments were checked against its schema) and the Connection's revision, then opens a
//! session, sends the call without listing tools again, and closes the session before the
//! call returns: the session is a resource of the phase that opened it and never outlives it.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_core::mcp::{McpCaller, McpEndpoint, McpError, McpSession, OpenOptions};
use openbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use openbot_schema::{
    APP_TOOL_SEPARATOR, AppConnectionStatus, AppToolDeclaration, AppTransport, ContentPart,
    ToolDefinition,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use std::collections::BTreeMap;

use openbot_core::tool::redacted;

use super::ConnectorReach;
use super::connector::ConnectorSession;
use super::service::{Apps, app_scopes};
use super::store::ConnectionRow;
use super::vault_headers::{header_references, render_headers};
use crate::limits::{AcquireError, Holder};
use crate::tools::ToolVault;
use crate::vaults::Through;

/// An App tool as a Turn saves it: which Connection at which revision, and the tool's full
/// declaration as discovery last read it. A later discovery never changes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppRoute {
    /// The organization.
    pub organization_id: Uuid,
    /// The App.
    pub app_id: Uuid,
    /// Its name, for messages.
    pub app_name: String,
    /// The Connection calls go through.
    pub connection_id: Uuid,
    /// The Connection's revision when the Turn was submitted.
    pub revision: u64,
    /// The tool as its server declared it.
    pub declaration: AppToolDeclaration,
}

impl AppRoute {
    /// The name Bots and models use: `<app>__<tool>`.
    pub fn tool_name(&self) -> String {
        format!(
            "{}{APP_TOOL_SEPARATOR}{}",
            self.app_name, self.declaration.name
        )
    }

    /// The definition the model sees, built from the saved declaration.
    pub fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.tool_name(),
            description: self.declaration.description.clone(),
            input_schema: self.declaration.input_schema.clone(),
        }
    }

    /// Whether a call whose result was lost may be sent again with the same request ID: the
    /// tool declared itself read-only or idempotent.
    pub fn retry_safe(&self) -> bool {
        self.declaration.annotations.retry_safe()
    }

    /// Why a Connection as it is now cannot take this saved call, if it cannot.
    pub fn refusal(&self, current: Option<&ConnectionRow>) -> Option<String> {
        let name = &self.app_name;
        let Some(current) = current else {
            return Some(format!("the App `{name}` has no such connection any more"));
        };
        match current.status {
            AppConnectionStatus::Removed => {
                return Some(format!(
                    "the connection to the App `{name}` was removed; the call was not sent"
                ));
            }
            AppConnectionStatus::NeedsSignIn => {
                return Some(format!(
                    "the connection to the App `{name}` needs a person to sign in again; the call was not sent"
                ));
            }
            AppConnectionStatus::Ready => {}
        }
        (current.revision != self.revision).then(|| {
            format!(
                "the connection to the App `{name}` changed since this call was planned (revision {} then, {} now); the call was not sent",
                self.revision, current.revision
            )
        })
    }
}

/// The handler of one saved App tool.
pub struct AppTool {
    definition: ToolDefinition,
    route: AppRoute,
    apps: Arc<Apps>,
    vault: Option<ToolVault>,
}

impl AppTool {
    /// A handler for `route`, reaching the App through `apps`; Vault references in a manual
    /// Connection's headers open with `vault` (the Turn's member and Bot) at each send.
    pub fn new(route: AppRoute, apps: Arc<Apps>, vault: Option<ToolVault>) -> Self {
        Self {
            definition: route.definition(),
            route,
            apps,
            vault,
        }
    }

    /// The headers with their Vault references opened for this send (item, field and both
    /// rules read again now), and the opened values to keep out of the answer.
    async fn open_headers(
        &self,
        headers: &BTreeMap<String, String>,
        connection: Uuid,
    ) -> Result<(BTreeMap<String, String>, Vec<String>), ToolError> {
        let refs = header_references(headers).map_err(|e| ToolError::new(e.to_string()))?;
        if refs.is_empty() {
            return Ok((headers.clone(), Vec::new()));
        }
        let vault = self.vault.as_ref().ok_or_else(|| {
            ToolError::new(
                "this connection's Vault references cannot be opened here: the work has no member",
            )
        })?;
        let through = Through::AppConnection {
            id: connection,
            app: self.route.app_name.clone(),
        };
        let values = vault.open(&refs, through, false).await?;
        let rendered =
            render_headers(headers, &values).map_err(|e| ToolError::new(e.to_string()))?;
        Ok((rendered, values.into_values().collect()))
    }
}

/// How often a retry-safe call is sent in one phase when its session breaks.
const MAX_TRIES: u32 = 3;

fn tool_error(err: McpError) -> ToolError {
    ToolError::new(err.to_string())
}

#[async_trait]
impl Tool for AppTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(
        &self,
        arguments: serde_json::Value,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(permits) = self.apps.permits() else {
            return self.send(arguments, &context).await;
        };
        // Room in the shared limits first, held by this owner's generation: a takeover
        // neither loses nor doubles it, and the phase's end gives back what a crash kept.
        let holder = Holder {
            organization: self.route.organization_id,
            execution: context.execution_id,
            generation: permits.generation,
            slot: format!("app:{}", context.call_id),
        };
        let permit = permits
            .limits
            .acquire(
                &holder,
                &app_scopes(&self.route.app_name),
                &context.cancel,
                &|| true,
            )
            .await
            .map_err(|err| match err {
                AcquireError::Store(_) => {
                    ToolError::new("the shared limits could not be read; the call was not sent")
                }
                other => ToolError::new(format!("{other}; the call was not sent")),
            })?;
        let answer = self.send(arguments, &context).await;
        if let Err(err) = permits.limits.release(&permit, 0).await {
            // The phase's end gives it back.
            tracing::warn!(
                error_kind = crate::engine::store_error_kind(&err),
                "an App call's room could not be given back yet"
            );
        }
        answer
    }
}

impl AppTool {
    /// Sends the call on a session of the phase and closes it before answering.
    async fn send(
        &self,
        arguments: serde_json::Value,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let route = &self.route;
        let store = self.apps.store();
        let unavailable = |_| ToolError::new("the App's records could not be read; try again");
        let current = store
            .connection(route.organization_id, route.connection_id)
            .await
            .map_err(unavailable)?;
        if let Some(refusal) = route.refusal(current.as_ref()) {
            return Err(ToolError::new(refusal));
        }
        let Some(connection) = current else {
            return Err(ToolError::new("the connection is gone"));
        };
        let app = match store.app(route.organization_id, route.app_id).await {
            Ok(Some(app)) if app.removed_at.is_none() => app,
            Ok(_) => {
                return Err(ToolError::new(format!(
                    "the App `{}` was removed; the call was not sent",
                    route.app_name
                )));
            }
            Err(err) => return Err(unavailable(err)),
        };
        let mut endpoint = self
            .apps
            .endpoint(&app, &connection)
            .await
            .map_err(|e| ToolError::new(e.to_string()))?;
        // Only headers a member wrote hold references: a token an authorization server
        // issued is sent as it is, whatever text it holds.
        let mut opened = Vec::new();
        if connection.auth == openbot_schema::AppAuthKind::Manual {
            let (headers, values) = self.open_headers(&endpoint.headers, connection.id).await?;
            endpoint.headers = headers;
            opened = values;
        }
        // A server that echoes what it received does not hand an opened value to the model.
        let clean = |text: String| redacted(text, &opened);
        let options = self.apps.mcp_options();
        let mut tries = 0;
        let result = loop {
            tries += 1;
            // Registered before it connects: a node that dies while it is open leaves a row
            // that reads unknown, never released.
            let registered = match self.apps.resources() {
                Some(resources) => Some((
                    resources,
                    resources
                        .register(
                            session_kind(&app.transport),
                            &super::connection_scope(connection.id),
                        )
                        .await
                        .map_err(|err| registration_refused(&err, &route.app_name))?,
                )),
                None => None,
            };
            let session = match Opened::open(&self.apps, &app.transport, &endpoint, &options).await
            {
                Ok(session) => session,
                Err(err) => {
                    if let Some((resources, id)) = registered {
                        // It never started: the directory saves it closed.
                        let _ = resources.abandon(id).await;
                    }
                    return Err(tool_error(err));
                }
            };
            // Held by the directory from the start of the call, so that a removal of the
            // Connection (or a lost lease) closes it even mid-call.
            let caller = session.caller();
            let held = match registered {
                Some((resources, id)) => {
                    resources.attach(id, session.physical());
                    None
                }
                None => Some(session),
            };
            let result = caller
                .call_tool(
                    &route.declaration.name,
                    arguments.clone(),
                    &context.idempotency_key,
                    &context.cancel,
                )
                .await;
            // Closed before the call returns, so before the phase ends or waits; with a
            // directory, by it, which saves the close's result.
            match (registered, held) {
                (Some((resources, id)), _) => match resources.close(id).await {
                    Ok(crate::cluster::directory::ResourceStatus::Failed { error_id }) => {
                        tracing::warn!(resource = %id, %error_id, "closing an App's MCP session failed");
                    }
                    Ok(_) => {}
                    Err(err) => {
                        tracing::warn!(resource = %id, error_kind = err.kind(), "the close of an App's MCP session was not saved");
                    }
                },
                (None, Some(session)) => {
                    let _ = session.physical().close().await;
                }
                (None, None) => {}
            }
            match result {
                // The session broke after the request went out: maybe applied. A read-only or
                // idempotent tool is asked again with the same request ID; any other waits
                // for a person's decision.
                Err(McpError::Lost) if route.retry_safe() && tries < MAX_TRIES => continue,
                Err(McpError::Lost) if !route.retry_safe() => {
                    return Err(ToolError::outcome_unknown(format!(
                        "the session to the App `{}` broke after the call was sent",
                        route.app_name
                    )));
                }
                other => break other.map_err(tool_error)?,
            }
        };
        if result.is_error {
            let text: Vec<&str> = result.content.iter().filter_map(|p| p.as_text()).collect();
            return Err(ToolError::new(if text.is_empty() {
                "the tool reported an error".to_string()
            } else {
                clean(text.join("\n"))
            }));
        }
        let content = result
            .content
            .into_iter()
            .map(|part| match part {
                ContentPart::Text { text } => ContentPart::Text { text: clean(text) },
                other => other,
            })
            .collect();
        Ok(ToolOutput { content })
    }
}

/// What the model reads when a session could not be registered: a phase blocked by a failed
/// close names its error ID; any other cause stays in the log.
fn registration_refused(err: &crate::cluster::directory::DirectoryError, app: &str) -> ToolError {
    match err {
        crate::cluster::directory::DirectoryError::Blocked(error_id) => ToolError::new(format!(
            "the App `{app}` was not called: closing an earlier App session of this run failed (error ID {error_id}), so it sends nothing new"
        )),
        other => {
            tracing::warn!(
                error_kind = other.kind(),
                "an App session could not be registered"
            );
            ToolError::new(format!(
                "the App `{app}` was not called: its session could not be registered"
            ))
        }
    }
}

/// The directory's kind of an MCP session over `transport`.
fn session_kind(transport: &AppTransport) -> &'static str {
    match transport {
        AppTransport::Http { .. } => "mcp.http",
        AppTransport::Stdio { .. } => "mcp.stdio",
        AppTransport::Connector { .. } => "mcp.connector",
    }
}

/// The session one call opened: an MCP session of this node, or a session on the machine
/// that publishes a Connector.
enum Opened {
    Mcp(McpSession),
    Connector(ConnectorSession),
}

/// Calls tools on an [`Opened`] session while the directory holds it.
enum Caller {
    Mcp(McpCaller),
    Connector {
        reach: Arc<dyn ConnectorReach>,
        computer: Uuid,
        session: String,
    },
}

impl Opened {
    /// Opens a session to the App at `endpoint` over `transport`.
    async fn open(
        apps: &Apps,
        transport: &AppTransport,
        endpoint: &McpEndpoint,
        options: &OpenOptions,
    ) -> Result<Self, McpError> {
        let AppTransport::Connector {
            computer_id,
            connector,
        } = transport
        else {
            return Ok(Self::Mcp(McpSession::open(endpoint, options).await?));
        };
        let reach = apps
            .connectors()
            .map_err(|err| McpError::Refused(err.to_string()))?;
        // Named here, so that a close reaches it even when the open's answer was lost.
        let session = Uuid::now_v7().to_string();
        match reach.open(*computer_id, connector, &session).await {
            Ok(()) => Ok(Self::Connector(ConnectorSession {
                reach: Arc::clone(reach),
                computer: *computer_id,
                session,
            })),
            Err(err) => {
                if err == McpError::Lost {
                    // It may have opened: the machine also closes it when its link ends.
                    let _ = reach.close(*computer_id, &session).await;
                }
                Err(err)
            }
        }
    }

    fn caller(&self) -> Caller {
        match self {
            Self::Mcp(session) => Caller::Mcp(session.caller()),
            Self::Connector(held) => Caller::Connector {
                reach: Arc::clone(&held.reach),
                computer: held.computer,
                session: held.session.clone(),
            },
        }
    }

    /// The session as the directory holds it: closing it ends the session.
    fn physical(self) -> Box<dyn crate::cluster::directory::Physical> {
        match self {
            Self::Mcp(session) => Box::new(Session(session)),
            Self::Connector(held) => Box::new(held),
        }
    }
}

impl Caller {
    async fn call_tool(
        &self,
        name: &str,
        arguments: serde_json::Value,
        request_id: &str,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<openbot_core::mcp::McpToolResult, McpError> {
        match self {
            Self::Mcp(caller) => caller.call_tool(name, arguments, request_id, cancel).await,
            Self::Connector {
                reach,
                computer,
                session,
            } => {
                reach
                    .call(*computer, session, name, arguments, request_id, cancel)
                    .await
            }
        }
    }
}

/// An open MCP session as the directory holds it: closing it stops the stdio server or
/// deletes the HTTP session.
struct Session(McpSession);

#[async_trait::async_trait]
impl crate::cluster::directory::Physical for Session {
    async fn close(self: Box<Self>) -> Result<(), String> {
        self.0.close().await.map_err(|err| err.to_string())
    }
}
