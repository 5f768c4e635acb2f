//! `openbot tools`: the organization's HTTP tools.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use openbot_schema::{HttpTool, PutHttpTool};

use super::ServerArgs;

/// Arguments of `openbot tools`.
#[derive(Debug, Args)]
pub struct ToolsArgs {
    #[command(subcommand)]
    command: ToolsCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum ToolsCommand {
    /// Registers an HTTP tool: Bot tools of this name call the endpoint.
    Put {
        /// The tool's name.
        name: String,
        /// The endpoint that receives each call's arguments (POST, JSON).
        #[arg(long)]
        url: String,
        /// What the tool does, for the model.
        #[arg(long, default_value = "")]
        description: String,
        /// A file with the JSON Schema of its arguments (default: any object).
        #[arg(long)]
        schema: Option<std::path::PathBuf>,
        /// The endpoint deduplicates by `Idempotency-Key`, so a lost answer may be asked again.
        #[arg(long)]
        retry_safe: bool,
        /// Each call runs detached in its own execution; its result reaches the Chat as a
        /// notice.
        #[arg(long)]
        background: bool,
    },
    /// Lists the HTTP tools.
    List,
    /// Removes an HTTP tool.
    Delete {
        /// The tool's name.
        name: String,
    },
}

fn line(tool: &HttpTool) -> String {
    format!("{}  {}", tool.name, tool.url)
}

/// Runs the command.
pub async fn run(args: ToolsArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        ToolsCommand::Put {
            name,
            url,
            description,
            schema,
            retry_safe,
            background,
        } => {
            let input_schema = match schema {
                Some(path) => serde_json::from_slice(
                    &std::fs::read(&path)
                        .with_context(|| format!("cannot read {}", path.display()))?,
                )
                .with_context(|| format!("{} is not JSON", path.display()))?,
                None => serde_json::json!({"type": "object"}),
            };
            let tool = PutHttpTool {
                description,
                input_schema,
                url,
                retry_safe,
                background,
            };
            output.print(&client.put_tool(&name, &tool).await?, line)?;
        }
        ToolsCommand::List => {
            let tools = client.list_tools().await?;
            output.print(&tools, |tools| {
                tools.iter().map(line).collect::<Vec<_>>().join("\n")
            })?;
        }
        ToolsCommand::Delete { name } => {
            client.delete_tool(&name).await?;
            output.print(&serde_json::json!({"deleted": name}), |_| {
                format!("deleted the tool {name}")
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
