//! `openbot memories`: a Bot's memories (list, add, get, edit, delete, search) and the
//! organization's memory settings, through the generated operations of the remote Client.

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use openbot_core::Operations;
use openbot_schema::{
    BotId, CreateMemory, Memory, MemoryPage, MemorySearch, MemorySettings, MemoryStatus,
    MemoryUpdate,
};
use uuid::Uuid;

use super::ServerArgs;
use super::paging::{PageArgs, list};

/// Arguments of `openbot memories`.
#[derive(Debug, Args)]
pub struct MemoriesArgs {
    #[command(subcommand)]
    command: MemoriesCommand,
    #[command(flatten)]
    server: ServerArgs,
}

/// A memory's status on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Status {
    Active,
    Retired,
}

impl From<Status> for MemoryStatus {
    fn from(status: Status) -> Self {
        match status {
            Status::Active => MemoryStatus::Active,
            Status::Retired => MemoryStatus::Retired,
        }
    }
}

#[derive(Debug, Subcommand)]
enum MemoriesCommand {
    /// Lists a Bot's memories you may read, oldest first.
    List {
        /// The Bot's ID.
        bot: BotId,
        /// Only memories with this tag.
        #[arg(long)]
        tag: Option<String>,
        /// Only memories with this status.
        #[arg(long)]
        status: Option<Status>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Writes a memory (your private one unless --shared).
    Add {
        /// The Bot's ID.
        bot: BotId,
        /// What it says.
        content: String,
        /// A tag (repeat for more).
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// Share it with every member of the Bot (the Bot's owner or an admin).
        #[arg(long)]
        shared: bool,
    },
    /// Shows a memory with its evidence.
    Get {
        /// The Bot's ID.
        bot: BotId,
        /// The memory's ID.
        id: Uuid,
    },
    /// Changes a memory's content, tags or status.
    Edit {
        /// The Bot's ID.
        bot: BotId,
        /// The memory's ID.
        id: Uuid,
        /// New content.
        #[arg(long)]
        content: Option<String>,
        /// New tags, replacing the old ones (repeat for more).
        #[arg(long = "tag")]
        tags: Option<Vec<String>>,
        /// A new status.
        #[arg(long)]
        status: Option<Status>,
    },
    /// Deletes a memory with its evidence.
    Delete {
        /// The Bot's ID.
        bot: BotId,
        /// The memory's ID.
        id: Uuid,
    },
    /// Searches a Bot's active memories, best first.
    Search {
        /// The Bot's ID.
        bot: BotId,
        /// What to look for.
        query: String,
        /// Only memories with this tag (repeat: with all of them).
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// The most memories (1-50).
        #[arg(long)]
        limit: Option<u32>,
        /// The most tokens the memories may hold together.
        #[arg(long)]
        max_tokens: Option<u32>,
    },
    /// Shows the organization's memory settings, or sets them with an option.
    Settings {
        /// The embeddings model (`openai:<model>` or `compatible:<base url>:<model>`).
        #[arg(long)]
        embeddings_model: Option<String>,
        /// The helper model that learns after Turns.
        #[arg(long)]
        helper_model: Option<String>,
    },
}

fn line(memory: &Memory) -> String {
    let owner = if memory.owner_member_id.is_some() {
        "private"
    } else {
        "shared"
    };
    let tags = if memory.tags.is_empty() {
        String::new()
    } else {
        format!("  [{}]", memory.tags.join(", "))
    };
    format!(
        "{}  {}  {owner}  {}{tags}",
        memory.id,
        memory.status.as_str(),
        memory.content
    )
}

fn settings_line(settings: &MemorySettings) -> String {
    format!(
        "embeddings model: {}\nhelper model: {}",
        settings
            .embeddings_model
            .as_deref()
            .unwrap_or("(none: keyword ranking)"),
        settings
            .helper_model
            .as_deref()
            .unwrap_or("(the Bot's model)")
    )
}

/// Runs the command.
pub async fn run(args: MemoriesArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        MemoriesCommand::List {
            bot,
            tag,
            status,
            page,
        } => {
            let mut filters = Vec::new();
            if let Some(tag) = &tag {
                filters.push(format!("tag={}", urlencode(tag)));
            }
            if let Some(status) = status {
                filters.push(format!("status={}", MemoryStatus::from(status).as_str()));
            }
            let mut path = format!("/v1/bots/{bot}/memories");
            if !filters.is_empty() {
                path = format!("{path}?{}", filters.join("&"));
            }
            list::<MemoryPage>(&client, &path, &page, output, line, "no memories").await?;
        }
        MemoriesCommand::Add {
            bot,
            content,
            tags,
            shared,
        } => {
            let memory = client
                .create_memory(
                    &bot,
                    &CreateMemory {
                        content,
                        tags,
                        private: !shared,
                    },
                )
                .await?;
            output.print(&memory, line)?;
        }
        MemoriesCommand::Get { bot, id } => {
            let memory = client.get_memory(&bot, &id).await?;
            output.print(&memory, |m| {
                let evidence = &m.evidence;
                format!(
                    "{}\nchat: {}\nexecution: {}\nmessage: {}",
                    line(m),
                    evidence
                        .chat_id
                        .map(|c| c.to_string())
                        .unwrap_or("-".into()),
                    evidence
                        .execution_id
                        .map(|e| e.to_string())
                        .unwrap_or("-".into()),
                    evidence
                        .message
                        .map(|n| n.to_string())
                        .unwrap_or("-".into())
                )
            })?;
        }
        MemoriesCommand::Edit {
            bot,
            id,
            content,
            tags,
            status,
        } => {
            let memory = client
                .update_memory(
                    &bot,
                    &id,
                    &MemoryUpdate {
                        content,
                        tags,
                        status: status.map(MemoryStatus::from),
                    },
                )
                .await?;
            output.print(&memory, line)?;
        }
        MemoriesCommand::Delete { bot, id } => {
            client.delete_memory(&bot, &id).await?;
            output.print(&serde_json::json!({"deleted": id}), |_| {
                format!("deleted memory {id}")
            })?;
        }
        MemoriesCommand::Search {
            bot,
            query,
            tags,
            limit,
            max_tokens,
        } => {
            let found = client
                .search_memories(
                    &bot,
                    &MemorySearch {
                        query,
                        tags,
                        limit,
                        max_tokens,
                    },
                )
                .await?;
            output.print(&found, |found| {
                if found.items.is_empty() {
                    return "no memories".into();
                }
                found
                    .items
                    .iter()
                    .map(|hit| format!("{:.3}  {}", hit.score, line(&hit.memory)))
                    .collect::<Vec<_>>()
                    .join("\n")
            })?;
        }
        MemoriesCommand::Settings {
            embeddings_model,
            helper_model,
        } => {
            let settings = if embeddings_model.is_none() && helper_model.is_none() {
                client.get_memory_settings().await?
            } else {
                client
                    .put_memory_settings(&MemorySettings {
                        embeddings_model,
                        helper_model,
                    })
                    .await?
            };
            output.print(&settings, settings_line)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Percent-encodes a query value.
fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
