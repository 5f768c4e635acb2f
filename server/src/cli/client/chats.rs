//! `openbot chats`: create Chats, send input and stream the reply, read history, stop and
//! delete.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use openbot_schema::{BotId, Chat, ChatEntry, ChatEntryPage, ChatId, ChatPage, SendInput};

use super::ServerArgs;
use super::executions::follow;
use super::paging::{PageArgs, list};

/// Arguments of `openbot chats`.
#[derive(Debug, Args)]
pub struct ChatsArgs {
    #[command(subcommand)]
    command: ChatsCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum ChatsCommand {
    /// Shows a Chat.
    Get {
        /// The Chat.
        chat: ChatId,
    },
    /// Creates a Chat with a Bot and prints its ID.
    Create {
        /// The Bot.
        #[arg(long)]
        bot: BotId,
    },
    /// Sends input and streams the reply until its Turn ends.
    Send {
        /// The Chat.
        chat: ChatId,
        /// The text to send.
        text: String,
        /// Join the running Turn instead of waiting for one's own.
        #[arg(long)]
        steer: bool,
        /// A name for this request: sending it again returns the same Turn.
        #[arg(long)]
        command_key: Option<String>,
        /// Print the receipt and return at once instead of streaming the reply.
        #[arg(long)]
        no_wait: bool,
    },
    /// Lists your Chats, oldest first.
    List {
        /// Only the Chats with this Bot.
        #[arg(long)]
        bot: Option<BotId>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Prints the Chat's messages, oldest first.
    History {
        /// The Chat.
        chat: ChatId,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Stops the running Turn.
    Stop {
        /// The Chat.
        chat: ChatId,
    },
    /// Shows plan mode, or turns it on or off: in plan mode the Bot may only propose a plan
    /// (`openbot approvals approve` on the plan switches it off).
    PlanMode {
        /// The Chat.
        chat: ChatId,
        /// `on` or `off`; absent: show it.
        #[arg(value_parser = ["on", "off"])]
        set: Option<String>,
    },
    /// Deletes the Chat once its Turns ended.
    Delete {
        /// The Chat.
        chat: ChatId,
    },
}

fn chat_line(chat: &Chat) -> String {
    format!(
        "{}  bot {}  {}",
        chat.id,
        chat.bot_id,
        chat.created_at.to_rfc3339()
    )
}

fn entry_line(entry: &ChatEntry) -> String {
    let value = serde_json::to_value(&entry.message).unwrap_or_default();
    let role = value["role"].as_str().unwrap_or("?").to_string();
    let text: String = value["content"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|part| part["text"].as_str())
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default();
    format!("{role}: {text}")
}

/// Runs the command.
pub async fn run(args: ChatsArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.connect().await?;
    let output = args.server.output();
    match args.command {
        ChatsCommand::Get { chat } => {
            let chat = client.get_chat(chat).await?;
            output.print(&chat, |chat: &Chat| {
                format!("{}  bot {}", chat.id, chat.bot_id)
            })?;
        }
        ChatsCommand::Create { bot } => {
            let chat = client.create_chat(bot).await?;
            output.print(&chat, |chat: &Chat| chat.id.to_string())?;
        }
        ChatsCommand::Send {
            chat,
            text,
            steer,
            command_key,
            no_wait,
        } => {
            let mut input = SendInput::text(text);
            input.command_key = command_key;
            let receipt = if steer {
                client.steer(chat, input).await?
            } else {
                client.send(chat, input).await?
            };
            if no_wait {
                output.print(&receipt, |r| r.execution_id.to_string())?;
            } else {
                return follow(client.as_ref(), receipt.execution_id, 0, output.json).await;
            }
        }
        ChatsCommand::List { bot, page } => {
            let path = match bot {
                Some(bot) => format!("/v1/chats?bot={bot}"),
                None => "/v1/chats".to_string(),
            };
            let remote = args.server.remote()?;
            list::<ChatPage>(&remote, &path, &page, output, chat_line, "no Chats").await?;
        }
        ChatsCommand::History { chat, page } => {
            let remote = args.server.remote()?;
            let path = format!("/v1/chats/{chat}/messages");
            list::<ChatEntryPage>(&remote, &path, &page, output, entry_line, "").await?;
        }
        ChatsCommand::PlanMode { chat, set } => {
            let mode = match set.as_deref() {
                Some(value) => client.set_plan_mode(chat, value == "on").await?,
                None => client.plan_mode(chat).await?,
            };
            output.print(&mode, |mode| {
                format!("plan mode {}", if mode.enabled { "on" } else { "off" })
            })?;
        }
        ChatsCommand::Stop { chat } => {
            client.stop(chat).await?;
            output.print(&serde_json::json!({"stopped": chat}), |_| {
                format!("stopped {chat}")
            })?;
        }
        ChatsCommand::Delete { chat } => {
            client.delete_chat(chat).await?;
            output.print(&serde_json::json!({"deleted": chat}), |_| {
                format!("deleted {chat}")
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
