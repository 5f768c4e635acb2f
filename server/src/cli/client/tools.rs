//! `openbot tools`: the organization's HTTP tools and delegate tools.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use openbot_core::Operations;
use openbot_schema::{
    DelegateTool, DelegateToolPage, HttpTool, HttpToolPage, PutDelegateTool, PutHttpTool,
};

use super::ServerArgs;
use super::paging::{PageArgs, list};

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
        /// A header sent with each call, `NAME=VALUE` (repeatable). A value may hold Vault
        /// references, `{{vault.<item-id>.<field>}}`, opened only as each call is sent.
        #[arg(long = "header", value_name = "NAME=VALUE")]
        headers: Vec<String>,
        /// A file with a JSON object whose fields are added to each call's body (strings may
        /// hold Vault references).
        #[arg(long)]
        body: Option<std::path::PathBuf>,
    },
    /// Lists the HTTP tools.
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Registers a delegate tool: Bot tools of this name hand a task to another Bot, which
    /// works on it as a child Turn with its own history.
    Delegate {
        /// The tool's name.
        name: String,
        /// The Bot that does the task.
        #[arg(long)]
        bot: openbot_schema::BotId,
        /// What the delegate does, for the model.
        #[arg(long, default_value = "")]
        description: String,
        /// The most model steps of each child Turn.
        #[arg(long)]
        max_steps: Option<u32>,
        /// The most wall time of each child Turn, in seconds.
        #[arg(long)]
        max_seconds: Option<u64>,
        /// The most each child Turn may cost, in US dollars.
        #[arg(long)]
        max_usd: Option<f64>,
    },
    /// Lists the delegate tools.
    Delegates {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Removes a delegate tool.
    DeleteDelegate {
        /// The tool's name.
        name: String,
    },
    /// Removes an HTTP tool.
    Delete {
        /// The tool's name.
        name: String,
    },
}

fn line(tool: &HttpTool) -> String {
    let background = if tool.background {
        "  (background)"
    } else {
        ""
    };
    format!("{}  {}{background}", tool.name, tool.url)
}

fn delegate_line(tool: &DelegateTool) -> String {
    format!("{}  -> bot {}", tool.name, tool.bot_id)
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
            headers,
            body,
        } => {
            let headers = headers
                .iter()
                .map(|header| {
                    header
                        .split_once('=')
                        .map(|(name, value)| (name.trim().to_string(), value.to_string()))
                        .with_context(|| format!("--header `{header}` is not NAME=VALUE"))
                })
                .collect::<anyhow::Result<_>>()?;
            let body = match body {
                Some(path) => Some(
                    serde_json::from_slice(
                        &std::fs::read(&path)
                            .with_context(|| format!("cannot read {}", path.display()))?,
                    )
                    .with_context(|| format!("{} is not JSON", path.display()))?,
                ),
                None => None,
            };
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
                headers,
                body,
            };
            output.print(&client.put_tool(&name, &tool).await?, line)?;
        }
        ToolsCommand::List { page } => {
            list::<HttpToolPage>(&client, "/v1/tools", &page, output, line, "").await?;
        }
        ToolsCommand::Delegate {
            name,
            bot,
            description,
            max_steps,
            max_seconds,
            max_usd,
        } => {
            if let Some(usd) = max_usd {
                anyhow::ensure!(usd.is_finite() && usd >= 0.0, "--max-usd must be 0 or more");
            }
            let tool = PutDelegateTool {
                description,
                bot_id: bot,
                limits: openbot_schema::Limits {
                    max_steps,
                    max_wall_time_ms: max_seconds.map(|s| s.saturating_mul(1000)),
                    max_cost_micros: max_usd.map(|usd| (usd * 1e6).round() as u64),
                    max_repeated_calls: None,
                },
            };
            output.print(&client.put_delegate(&name, &tool).await?, delegate_line)?;
        }
        ToolsCommand::Delegates { page } => {
            list::<DelegateToolPage>(&client, "/v1/delegates", &page, output, delegate_line, "")
                .await?;
        }
        ToolsCommand::DeleteDelegate { name } => {
            client.delete_delegate(&name).await?;
            output.print(&serde_json::json!({"deleted": name}), |_| {
                format!("deleted the delegate tool {name}")
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
