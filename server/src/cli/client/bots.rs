//! `openbot bots`: create, list, show, update and delete Bots.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use openbot_schema::{Bot, BotId, BotPage, BotSpec, BotUpdate, Limits, ToolDefinition};

use super::ServerArgs;
use super::paging::{PageArgs, list};

/// Arguments of `openbot bots`.
#[derive(Debug, Args)]
pub struct BotsArgs {
    #[command(subcommand)]
    command: BotsCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum BotsCommand {
    /// Creates a Bot and prints it.
    Create {
        /// Its name.
        #[arg(long)]
        name: String,
        /// Its model, e.g. openai:gpt-4o-mini or scripted:<file.json> (read by the server).
        #[arg(long)]
        model: String,
        /// Its system instructions.
        #[arg(long, default_value = "")]
        instructions: String,
        /// A JSON file with a list of tool definitions ({name, description, input_schema}).
        #[arg(long)]
        tools: Option<std::path::PathBuf>,
        /// The most model steps of each Turn.
        #[arg(long)]
        max_steps: Option<u32>,
        /// Every member may chat with it.
        #[arg(long)]
        shared: bool,
        /// It recalls and learns memories (`openbot memories`).
        #[arg(long)]
        memory: bool,
        /// Offer it the `remind` tool (reminders that reach the Chat later).
        #[arg(long)]
        reminders: bool,
        /// Code Mode: the model calls the tools from one JavaScript program (docs/code-mode.md).
        #[arg(long)]
        code_mode: bool,
    },
    /// Lists the Bots, oldest first.
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Shows a Bot.
    Get {
        /// The Bot's ID.
        id: BotId,
    },
    /// Changes a Bot: only what is given changes.
    Update {
        /// The Bot's ID.
        id: BotId,
        /// Only if the Bot is still at this revision (else `conflict`).
        #[arg(long)]
        revision: Option<u64>,
        /// Its new name.
        #[arg(long)]
        name: Option<String>,
        /// Its new model.
        #[arg(long)]
        model: Option<String>,
        /// Its new system instructions.
        #[arg(long)]
        instructions: Option<String>,
        /// A JSON file with its new list of tool definitions.
        #[arg(long)]
        tools: Option<std::path::PathBuf>,
        /// Whether every member may chat with it.
        #[arg(long)]
        shared: Option<bool>,
    },
    /// Deletes a Bot that has no Chats.
    Delete {
        /// The Bot's ID.
        id: BotId,
    },
}

fn line(bot: &Bot) -> String {
    format!("{}  {}  {}", bot.id, bot.spec.name, bot.spec.model)
}

/// Runs the command.
pub async fn run(args: BotsArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.connect().await?;
    let output = args.server.output();
    match args.command {
        BotsCommand::Create {
            name,
            model,
            instructions,
            tools,
            max_steps,
            shared,
            memory,
            reminders,
            code_mode,
        } => {
            let tools: Vec<ToolDefinition> = match tools {
                Some(path) => serde_json::from_slice(
                    &std::fs::read(&path)
                        .with_context(|| format!("cannot read {}", path.display()))?,
                )
                .with_context(|| format!("{} is not a list of tool definitions", path.display()))?,
                None => Vec::new(),
            };
            let spec = BotSpec {
                name,
                instructions,
                model,
                tools,
                limits: Limits {
                    max_steps,
                    ..Limits::default()
                },
                shared,
                memory,
                reminders,
                code_mode,
            };
            let bot = client.create_bot(spec).await?;
            output.print(&bot, |bot| bot.id.to_string())?;
        }
        BotsCommand::List { page } => {
            let remote = args.server.remote()?;
            list::<BotPage>(&remote, "/v1/bots", &page, output, line, "no Bots").await?;
        }
        BotsCommand::Get { id } => {
            let bot = client.get_bot(id).await?;
            output.print(&bot, line)?;
        }
        BotsCommand::Update {
            id,
            revision,
            name,
            model,
            instructions,
            tools,
            shared,
        } => {
            let tools: Option<Vec<ToolDefinition>> = match tools {
                Some(path) => Some(
                    serde_json::from_slice(
                        &std::fs::read(&path)
                            .with_context(|| format!("cannot read {}", path.display()))?,
                    )
                    .with_context(|| {
                        format!("{} is not a list of tool definitions", path.display())
                    })?,
                ),
                None => None,
            };
            let update = BotUpdate {
                revision,
                name,
                instructions,
                model,
                tools,
                shared,
                ..BotUpdate::default()
            };
            let bot = client.update_bot(id, update).await?;
            output.print(&bot, line)?;
        }
        BotsCommand::Delete { id } => {
            client.delete_bot(id).await?;
            output.print(&serde_json::json!({"deleted": id}), |_| {
                format!("deleted {id}")
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
