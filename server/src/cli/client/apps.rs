//! `openbot apps`: the organization's Apps (MCP servers), their Connections and discovery.

use std::collections::HashMap;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use openbot_core::Operations;
use openbot_schema::{
    App, AppAuthKind, AppConnection, AppConnectionPage, AppDiscovery, AppPage, AppTransport,
    NewApp, NewAppConnection,
};
use uuid::Uuid;

use super::ServerArgs;
use super::paging::{PageArgs, list};

/// Arguments of `openbot apps`.
#[derive(Debug, Args)]
pub struct AppsArgs {
    #[command(subcommand)]
    command: AppsCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum AppsCommand {
    /// Registers an App: an MCP server at a streamable-HTTP URL, or (where the operator
    /// enabled stdio Apps) a command the server starts. Bots name its tools `<name>__<tool>`.
    Add {
        /// Its name: 1-40 of a-z 0-9 -, starting with a letter.
        name: String,
        /// The server's streamable-HTTP endpoint, e.g. https://mcp.example.com/mcp.
        #[arg(long, conflicts_with_all = ["command", "computer"], required_unless_present_any = ["command", "computer"])]
        url: Option<String>,
        /// The program of a stdio server; its arguments follow `--`.
        #[arg(long, conflicts_with = "computer")]
        command: Option<String>,
        /// A Connector: the paired Computer that publishes it (with --connector).
        #[arg(long, requires = "connector")]
        computer: Option<Uuid>,
        /// The Connector's name on that Computer (its agent's `--connector NAME=...`).
        #[arg(long, requires = "computer")]
        connector: Option<String>,
        /// The stdio program's arguments.
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Lists the Apps.
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Shows one App (by ID or name) with its Connections.
    Show {
        /// The App's ID or name.
        app: String,
    },
    /// Removes an App (by ID or name) and its Connections.
    Remove {
        /// The App's ID or name.
        app: String,
    },
    /// Opens a Connection to an App: no credentials, manual headers (sealed on the server,
    /// never shown again), or OAuth (it waits for a person to sign in).
    Connect {
        /// The App's ID or name.
        app: String,
        /// A header to send, `Name: value` (repeatable); makes it a manual Connection.
        #[arg(long = "header")]
        headers: Vec<String>,
        /// An OAuth Connection instead.
        #[arg(long, conflicts_with = "headers")]
        oauth: bool,
    },
    /// Lists an App's Connections.
    Connections {
        /// The App's ID or name.
        app: String,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Shows one Connection of an App.
    Connection {
        /// The App's ID or name.
        app: String,
        /// The Connection's ID.
        connection: String,
    },
    /// Removes a Connection.
    Disconnect {
        /// The App's ID or name.
        app: String,
        /// The Connection's ID.
        connection: String,
    },
    /// Runs discovery on a Connection (default: the App's newest ready one) and lists the
    /// tools with their annotations.
    Discover {
        /// The App's ID or name.
        app: String,
        /// The Connection's ID.
        connection: Option<String>,
    },
}

fn transport_text(transport: &AppTransport) -> String {
    match transport {
        AppTransport::Http { url } => url.clone(),
        AppTransport::Stdio { command, args } => {
            let mut text = format!("stdio: {command}");
            for arg in args {
                text.push(' ');
                text.push_str(arg);
            }
            text
        }
        AppTransport::Connector {
            computer_id,
            connector,
        } => format!("connector: {connector} on Computer {computer_id}"),
    }
}

fn app_line(app: &App) -> String {
    format!(
        "{}  {}  {}",
        app.id,
        app.name,
        transport_text(&app.transport)
    )
}

fn auth_word(auth: AppAuthKind) -> &'static str {
    match auth {
        AppAuthKind::None => "none",
        AppAuthKind::Manual => "manual",
        AppAuthKind::Oauth => "oauth",
    }
}

fn connection_line(connection: &AppConnection) -> String {
    let status = serde_json::to_value(connection.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let tools = match connection.tool_count {
        Some(count) => format!("{count} tools"),
        None => "not discovered".to_string(),
    };
    format!(
        "{}  {}  {status}  revision {}  {tools}",
        connection.id,
        auth_word(connection.auth),
        connection.revision
    )
}

fn discovery_text(discovery: &AppDiscovery) -> String {
    let mut lines = Vec::new();
    for tool in &discovery.tools {
        let mut hints = Vec::new();
        if tool.annotations.read_only_hint == Some(true) {
            hints.push("read-only");
        }
        if tool.annotations.idempotent_hint == Some(true) {
            hints.push("idempotent");
        }
        if tool.annotations.destructive_hint == Some(true) {
            hints.push("destructive");
        }
        let hints = if hints.is_empty() {
            String::new()
        } else {
            format!("  [{}]", hints.join(", "))
        };
        let description = tool.description.lines().next().unwrap_or_default();
        lines.push(format!("{}{hints}  {description}", tool.name));
    }
    if lines.is_empty() {
        lines.push("(no tools)".into());
    }
    lines.join("\n")
}

/// The ID of the App `app` names: an ID as it is, a name looked up among the Apps.
async fn app_id(client: &openbot_core::RemoteClient, app: &str) -> anyhow::Result<String> {
    if app.parse::<uuid::Uuid>().is_ok() {
        return Ok(app.to_string());
    }
    let apps = client.list_apps_all().await?;
    apps.iter()
        .find(|a| a.name == app)
        .map(|a| a.id.to_string())
        .ok_or_else(|| anyhow::anyhow!("there is no App named `{app}`"))
}

fn parse_headers(headers: &[String]) -> anyhow::Result<HashMap<String, String>> {
    let mut map = HashMap::new();
    for header in headers {
        let (name, value) = header
            .split_once(':')
            .ok_or_else(|| anyhow::anyhow!("--header takes `Name: value`"))?;
        map.insert(name.trim().to_string(), value.trim().to_string());
    }
    Ok(map)
}

/// Runs the command.
pub async fn run(args: AppsArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        AppsCommand::Add {
            name,
            url,
            command,
            computer,
            connector,
            args,
        } => {
            let transport = match (url, command, computer.zip(connector)) {
                (Some(url), _, _) => {
                    anyhow::ensure!(args.is_empty(), "arguments after `--` need --command");
                    AppTransport::Http { url }
                }
                (None, Some(command), _) => AppTransport::Stdio { command, args },
                (None, None, Some((computer_id, connector))) => {
                    anyhow::ensure!(args.is_empty(), "arguments after `--` need --command");
                    AppTransport::Connector {
                        computer_id,
                        connector,
                    }
                }
                (None, None, None) => {
                    anyhow::bail!("give --url, --command, or --computer with --connector")
                }
            };
            let app = client.register_app(&NewApp { name, transport }).await?;
            output.print(&app, app_line)?;
        }
        AppsCommand::List { page } => {
            list::<AppPage>(&client, "/v1/apps", &page, output, app_line, "(no apps)").await?;
        }
        AppsCommand::Show { app } => {
            let id = app_id(&client, &app).await?;
            let app = client.get_app(&id).await?;
            let connections = client.list_app_connections_all(&id).await?;
            let view = serde_json::json!({"app": app, "connections": connections});
            output.print(&view, |_| {
                let mut lines = vec![app_line(&app)];
                lines.extend(
                    connections
                        .iter()
                        .map(|c| format!("  {}", connection_line(c))),
                );
                lines.join("\n")
            })?;
        }
        AppsCommand::Remove { app } => {
            let id = app_id(&client, &app).await?;
            client.remove_app(&id).await?;
            output.print(&serde_json::json!({"removed": id}), |_| {
                format!("removed the App {app}")
            })?;
        }
        AppsCommand::Connect {
            app,
            headers,
            oauth,
        } => {
            let id = app_id(&client, &app).await?;
            let headers = parse_headers(&headers)?;
            let auth = if oauth {
                AppAuthKind::Oauth
            } else if headers.is_empty() {
                AppAuthKind::None
            } else {
                AppAuthKind::Manual
            };
            let connection = client
                .open_app_connection(&id, &NewAppConnection { auth, headers })
                .await?;
            output.print(&connection, connection_line)?;
        }
        AppsCommand::Connections { app, page } => {
            let id = app_id(&client, &app).await?;
            list::<AppConnectionPage>(
                &client,
                &format!("/v1/apps/{id}/connections"),
                &page,
                output,
                connection_line,
                "(no connections)",
            )
            .await?;
        }
        AppsCommand::Connection { app, connection } => {
            let id = app_id(&client, &app).await?;
            let connection = client.get_app_connection(&id, &connection).await?;
            output.print(&connection, connection_line)?;
        }
        AppsCommand::Disconnect { app, connection } => {
            let id = app_id(&client, &app).await?;
            client.remove_app_connection(&id, &connection).await?;
            output.print(&serde_json::json!({"removed": connection}), |_| {
                format!("removed the connection {connection}")
            })?;
        }
        AppsCommand::Discover { app, connection } => {
            let id = app_id(&client, &app).await?;
            let connection = match connection {
                Some(connection) => connection,
                None => {
                    let connections = client.list_app_connections_all(&id).await?;
                    connections
                        .iter()
                        .rev()
                        .find(|c| c.status == openbot_schema::AppConnectionStatus::Ready)
                        .map(|c| c.id.to_string())
                        .ok_or_else(|| {
                            anyhow::anyhow!(
                                "the App has no ready connection: run `openbot apps connect`"
                            )
                        })?
                }
            };
            let discovery = client.discover_app_tools(&id, &connection).await?;
            output.print(&discovery, discovery_text)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
