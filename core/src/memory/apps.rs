//! Apps in memory: the server's App operations (`register_app`, `open_app_connection`,
//! `discover_app_tools`, ...) with the same IDs and bodies, so a standalone agent uses MCP
//! servers as tool sources without a server. Nothing is sealed or kept after the process;
//! the person running it chose the servers, so stdio and every address are allowed.

use std::collections::BTreeMap;

use chrono::Utc;
use openbot_schema::{
    App, AppAuthKind, AppConnection, AppConnectionStatus, AppDiscovery, AppToolDeclaration,
    AppTransport, NewApp, NewAppConnection,
};
use uuid::Uuid;

use crate::client::{ApiAnswer, ApiRequest};
use crate::error::Error;
use crate::mcp::{McpEndpoint, McpTool, OpenOptions, split_name};
use crate::tool::SharedTool;

struct Connection {
    view: AppConnection,
    headers: BTreeMap<String, String>,
    tools: Option<Vec<AppToolDeclaration>>,
}

/// The Apps of one in-memory runtime.
#[derive(Default)]
pub(crate) struct MemoryApps {
    apps: Vec<App>,
    connections: Vec<Connection>,
    /// Grows with every change, so tool sets built before it are built again.
    pub(crate) generation: u64,
}

/// The App operations memory mode answers (no typed Client method declares them; the
/// generic call path and the generated operations reach them).
pub const OPERATIONS: &[&str] = &[
    "register_app",
    "list_apps",
    "get_app",
    "remove_app",
    "open_app_connection",
    "list_app_connections",
    "get_app_connection",
    "remove_app_connection",
    "discover_app_tools",
];

fn uuid_param(request: &ApiRequest, op: &str, name: &str, what: &str) -> Result<Uuid, Error> {
    let text = request.text(op, name)?;
    text.parse()
        .map_err(|_| Error::not_found(what, text.chars().take(64).collect::<String>()))
}

/// What a discovery needs, read under the lock and used after it.
pub(crate) struct DiscoveryPlan {
    connection: Uuid,
    revision: u64,
    pub(crate) endpoint: McpEndpoint,
}

impl MemoryApps {
    fn app(&self, id: Uuid) -> Result<&App, Error> {
        self.apps
            .iter()
            .find(|a| a.id == id)
            .ok_or_else(|| Error::not_found("app", id))
    }

    fn connection(&self, app: Uuid, id: Uuid) -> Result<&Connection, Error> {
        self.connections
            .iter()
            .find(|c| c.view.id == id && c.view.app_id == app)
            .ok_or_else(|| Error::not_found("connection", id))
    }

    /// Answers every App operation but discovery, which does I/O: that one returns its plan.
    pub(crate) fn run(
        &mut self,
        op: &str,
        request: &ApiRequest,
    ) -> Result<Result<ApiAnswer, DiscoveryPlan>, Error> {
        let answer = match op {
            "register_app" => {
                let body: NewApp = request.body_as(op)?;
                check_name(&body.name)?;
                match &body.transport {
                    AppTransport::Http { url } => crate::outbound::OutboundPolicy::allow_all()
                        .check_url(url)
                        .map_err(|e| Error::invalid_input(e.to_string()))?,
                    AppTransport::Stdio { .. } => {}
                    // In one process the machine is attached directly: its MCP servers are
                    // stdio or HTTP Apps.
                    AppTransport::Connector { .. } => {
                        return Err(Error::invalid_input(
                            "a Connector App reaches a Computer paired with a server; in memory:// register the local MCP server itself (stdio or http)",
                        ));
                    }
                }
                if self.apps.iter().any(|a| a.name == body.name) {
                    return Err(Error::conflict("there is an App of that name"));
                }
                let app = App {
                    id: Uuid::now_v7(),
                    name: body.name,
                    transport: body.transport,
                    created_at: Utc::now(),
                };
                self.apps.push(app.clone());
                self.generation += 1;
                ApiAnswer::of(&app)?
            }
            "list_apps" => crate::client::dispatch::page_of(self.apps.clone(), request, op)?,
            "get_app" => ApiAnswer::of(self.app(uuid_param(request, op, "id", "app")?)?)?,
            "remove_app" => {
                let id = uuid_param(request, op, "id", "app")?;
                self.app(id)?;
                self.apps.retain(|a| a.id != id);
                self.connections.retain(|c| c.view.app_id != id);
                self.generation += 1;
                ApiAnswer::Empty
            }
            "open_app_connection" => {
                let app = uuid_param(request, op, "id", "app")?;
                self.app(app)?;
                let body: NewAppConnection = request.body_as(op)?;
                let status = match body.auth {
                    AppAuthKind::Oauth => {
                        return Err(Error::invalid_input(
                            "OAuth connections need a server (connect to http://...)",
                        ));
                    }
                    AppAuthKind::None if !body.headers.is_empty() => {
                        return Err(Error::invalid_input(
                            "headers are only for manual connections",
                        ));
                    }
                    AppAuthKind::Manual if body.headers.is_empty() => {
                        return Err(Error::invalid_input(
                            "a manual connection sends at least one header",
                        ));
                    }
                    _ => AppConnectionStatus::Ready,
                };
                let view = AppConnection {
                    id: Uuid::now_v7(),
                    app_id: app,
                    auth: body.auth,
                    status,
                    revision: 1,
                    header_names: {
                        let mut names: Vec<String> = body.headers.keys().cloned().collect();
                        names.sort();
                        names
                    },
                    tool_count: None,
                    discovered_at: None,
                    created_at: Utc::now(),
                };
                self.connections.push(Connection {
                    view: view.clone(),
                    headers: body.headers.into_iter().collect(),
                    tools: None,
                });
                self.generation += 1;
                ApiAnswer::of(&view)?
            }
            "list_app_connections" => {
                let app = uuid_param(request, op, "id", "app")?;
                self.app(app)?;
                let views: Vec<AppConnection> = self
                    .connections
                    .iter()
                    .filter(|c| c.view.app_id == app)
                    .map(|c| c.view.clone())
                    .collect();
                crate::client::dispatch::page_of(views, request, op)?
            }
            "get_app_connection" => {
                let app = uuid_param(request, op, "id", "app")?;
                let id = uuid_param(request, op, "connection", "connection")?;
                ApiAnswer::of(&self.connection(app, id)?.view)?
            }
            "remove_app_connection" => {
                let app = uuid_param(request, op, "id", "app")?;
                let id = uuid_param(request, op, "connection", "connection")?;
                self.connection(app, id)?;
                self.connections.retain(|c| c.view.id != id);
                self.generation += 1;
                ApiAnswer::Empty
            }
            "discover_app_tools" => {
                let app = uuid_param(request, op, "id", "app")?;
                let id = uuid_param(request, op, "connection", "connection")?;
                let transport = self.app(app)?.transport.clone();
                let connection = self.connection(app, id)?;
                return Ok(Err(DiscoveryPlan {
                    connection: id,
                    revision: connection.view.revision,
                    endpoint: McpEndpoint {
                        transport,
                        headers: connection.headers.clone(),
                    },
                }));
            }
            other => return Err(crate::client::api::server_only(other)),
        };
        Ok(Ok(answer))
    }

    /// Saves what a discovery found.
    pub(crate) fn discovered(
        &mut self,
        plan: &DiscoveryPlan,
        tools: Vec<AppToolDeclaration>,
    ) -> Result<AppDiscovery, Error> {
        let now = Utc::now();
        let connection = self
            .connections
            .iter_mut()
            .find(|c| c.view.id == plan.connection && c.view.revision == plan.revision)
            .ok_or_else(|| Error::conflict("the connection changed during discovery"))?;
        connection.view.tool_count = Some(u32::try_from(tools.len()).unwrap_or(u32::MAX));
        connection.view.discovered_at = Some(now);
        connection.tools = Some(tools.clone());
        self.generation += 1;
        Ok(AppDiscovery {
            connection_id: plan.connection,
            revision: plan.revision,
            tools,
            discovered_at: now,
        })
    }

    /// The handler of a Bot tool named `<app>__<tool>`: the App's newest ready Connection's
    /// discovered declaration, called over a session of its own per call. `None` when the
    /// name names no App tool.
    pub(crate) fn tool(&self, name: &str) -> Option<SharedTool> {
        let (app_name, tool) = split_name(name)?;
        let app = self.apps.iter().find(|a| a.name == app_name)?;
        let connection = self
            .connections
            .iter()
            .rev()
            .find(|c| c.view.app_id == app.id && c.view.status == AppConnectionStatus::Ready)?;
        let declaration = connection.tools.as_ref()?.iter().find(|t| t.name == tool)?;
        Some(std::sync::Arc::new(McpTool::per_call(
            &app.name,
            declaration,
            McpEndpoint {
                transport: app.transport.clone(),
                headers: connection.headers.clone(),
            },
            OpenOptions::standalone(),
        )))
    }
}

fn check_name(name: &str) -> Result<(), Error> {
    let ok = (1..=40).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid_input(
            "an App name is 1-40 of a-z 0-9 -, starting with a letter",
        ))
    }
}
