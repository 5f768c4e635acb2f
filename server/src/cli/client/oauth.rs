//! `openbot oauth`: OAuth sign-in of App connections on a server (see docs/apps-oauth.md).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use openbot_core::Operations;
use openbot_schema::{BeginOAuth, CompleteOAuth, OAuthCleanup, OAuthConnection};

use super::ServerArgs;

/// Arguments of `openbot oauth`.
#[derive(Debug, Args)]
pub struct OAuthArgs {
    #[command(subcommand)]
    command: OAuthCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum OAuthCommand {
    /// Shows a connection's sign-in: ready, needs_sign_in (with why) or removed.
    Status {
        /// The App connection.
        connection: String,
    },
    /// Begins a sign-in and prints the URL to open in a browser.
    Authorize {
        /// The App connection.
        connection: String,
        /// The MCP server's URL; optional: the server takes it from the Connection's App
        /// (given, it must match).
        #[arg(long)]
        server_url: Option<String>,
        /// Where the browser comes back with `code` and `state`.
        #[arg(long)]
        redirect_uri: String,
        /// A client registered there beforehand (without it OpenBot registers one).
        #[arg(long)]
        client_id: Option<String>,
        /// That client's secret, read from this environment variable (never an argument).
        #[arg(long, value_name = "VARIABLE")]
        client_secret_env: Option<String>,
        /// The scopes to ask for (space-separated).
        #[arg(long)]
        scope: Option<String>,
    },
    /// Completes a sign-in with the redirect's `code` and `state`.
    Complete {
        /// The App connection.
        connection: String,
        /// The redirect's `state` (it may start with `-`).
        #[arg(long, allow_hyphen_values = true)]
        state: String,
        /// The redirect's `code` (it may start with `-`).
        #[arg(long, allow_hyphen_values = true)]
        code: String,
    },
    /// Removes a sign-in; its grant is revoked by the organization's cleanup service.
    Remove {
        /// The App connection.
        connection: String,
    },
    /// Shows a cleanup and its result (revoked, local_only, failed).
    Cleanup {
        /// The App connection.
        connection: String,
        /// The cleanup.
        cleanup: String,
    },
}

fn status_line(status: &OAuthConnection) -> String {
    let mut line = format!(
        "{}  {}  issuer {}  client {}",
        status.connection_id, status.status, status.issuer, status.client_id
    );
    if let Some(at) = status.expires_at {
        line.push_str(&format!("  token until {at}"));
    }
    if let Some(reason) = &status.reason {
        line.push_str(&format!("  ({reason})"));
    }
    line
}

fn cleanup_line(cleanup: &OAuthCleanup) -> String {
    match &cleanup.result {
        Some(result) => format!("cleanup {}  {}  {result}", cleanup.id, cleanup.state),
        None => format!("cleanup {}  {}", cleanup.id, cleanup.state),
    }
}

/// Runs the command.
pub async fn run(args: OAuthArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        OAuthCommand::Status { connection } => {
            let status = client.get_oauth(&connection).await?;
            output.print(&status, status_line)?;
        }
        OAuthCommand::Authorize {
            connection,
            server_url,
            redirect_uri,
            client_id,
            client_secret_env,
            scope,
        } => {
            let client_secret =
                match client_secret_env {
                    Some(name) => Some(std::env::var(&name).map_err(|_| {
                        anyhow::anyhow!("the environment variable {name} is not set")
                    })?),
                    None => None,
                };
            let request = BeginOAuth {
                server_url,
                redirect_uri,
                client_id,
                client_secret,
                scope,
            };
            let step = client.authorize_oauth(&connection, &request).await?;
            output.print(&step, |step| {
                format!(
                    "open {}\nstate {} (until {})",
                    step.authorization_url, step.state, step.expires_at
                )
            })?;
        }
        OAuthCommand::Complete {
            connection,
            state,
            code,
        } => {
            let status = client
                .complete_oauth(&connection, &CompleteOAuth { state, code })
                .await?;
            output.print(&status, status_line)?;
        }
        OAuthCommand::Remove { connection } => {
            let removal = client.delete_oauth(&connection).await?;
            output.print(&removal, |removal| match &removal.cleanup {
                Some(cleanup) => format!("removed; {}", cleanup_line(cleanup)),
                None => "removed; there was no grant to clean up".to_string(),
            })?;
        }
        OAuthCommand::Cleanup {
            connection,
            cleanup,
        } => {
            let found = client.get_oauth_cleanup(&connection, &cleanup).await?;
            output.print(&found, cleanup_line)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
