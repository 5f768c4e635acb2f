//! `openbot channels`: your Bots' Slack and Telegram Channels (see docs/channels.md), their
//! inputs and the sends of their replies.

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use openbot_core::Operations;
use openbot_schema::{
    BotId, Channel, ChannelKind, ChannelPage, ChannelSend, ChannelSendPage, CreateChannel,
    LinkSpeaker,
};
use uuid::Uuid;

use super::ServerArgs;
use super::paging::{PageArgs, list};

/// Arguments of `openbot channels`.
#[derive(Debug, Args)]
pub struct ChannelsArgs {
    #[command(subcommand)]
    command: ChannelsCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Kind {
    Slack,
    Telegram,
}

#[derive(Debug, Subcommand)]
enum ChannelsCommand {
    /// Connects a Bot to Slack or Telegram. The secrets are read from the environment
    /// variables named here (never from the command line) and are not shown again.
    Create {
        /// slack or telegram.
        #[arg(long, value_enum)]
        kind: Kind,
        /// The Bot that answers.
        #[arg(long)]
        bot: Uuid,
        /// The variable that holds the platform's bot token.
        #[arg(long, default_value = "OPENBOT_CHANNEL_BOT_TOKEN")]
        token_env: String,
        /// The variable that holds Slack's signing secret or Telegram's secret token.
        #[arg(long, default_value = "OPENBOT_CHANNEL_SECRET")]
        secret_env: String,
        /// The platform's API base URL (default https://slack.com/api or
        /// https://api.telegram.org).
        #[arg(long)]
        api_base_url: Option<String>,
    },
    /// Lists your Channels, oldest first.
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Shows a Channel and its status.
    Show {
        /// The Channel.
        id: Uuid,
    },
    /// Removes a Channel: it refuses input at once and is `removed` once its deliveries end.
    Delete {
        /// The Channel.
        id: Uuid,
    },
    /// Links a platform user (Slack `U...`, Telegram's numeric ID) to a member: inputs taken
    /// from then on keep the member with their Speaker.
    LinkSpeaker {
        /// The Channel.
        id: Uuid,
        /// The platform's user ID.
        user: String,
        /// The member of the Channel's organization.
        #[arg(long)]
        member: Uuid,
    },
    /// Removes a platform user's link to a member.
    UnlinkSpeaker {
        /// The Channel.
        id: Uuid,
        /// The platform's user ID.
        user: String,
    },
    /// Lists a Channel's inputs and their replies' sends, newest first.
    Sends {
        /// The Channel.
        id: Uuid,
        #[command(flatten)]
        page: PageArgs,
    },
}

fn word<T: serde::Serialize>(value: T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn channel_line(c: &Channel) -> String {
    format!(
        "{}  {}  bot {}  {}  {}  {}",
        c.id,
        word(c.kind),
        c.bot_id,
        word(c.status),
        c.webhook_path,
        c.api_base_url
    )
}

fn send_line(s: &ChannelSend) -> String {
    let mut parts = vec![
        s.created_at.to_rfc3339(),
        format!("event {}", s.event_id),
        format!(
            "from {}{}",
            s.speaker.user_id,
            s.speaker
                .display_name
                .as_ref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        ),
        word(s.state),
        format!("attempts {}", s.attempts),
    ];
    if let Some(id) = &s.platform_message_id {
        parts.push(format!("message {id}"));
    }
    if let Some(error) = &s.error {
        parts.push(error.clone());
    }
    parts.join("  ")
}

fn secret(name: &str) -> anyhow::Result<String> {
    std::env::var(name).map_err(|_| anyhow::anyhow!("set {name} to the secret first"))
}

/// Runs `openbot channels`, through the generated operations.
pub async fn run(args: ChannelsArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        ChannelsCommand::Create {
            kind,
            bot,
            token_env,
            secret_env,
            api_base_url,
        } => {
            let bot_token = secret(&token_env)?;
            let shared = secret(&secret_env)?;
            let (kind, signing_secret, secret_token) = match kind {
                Kind::Slack => (ChannelKind::Slack, Some(shared), None),
                Kind::Telegram => (ChannelKind::Telegram, None, Some(shared)),
            };
            let request = CreateChannel {
                kind,
                bot_id: BotId::from(bot),
                bot_token,
                signing_secret,
                secret_token,
                api_base_url,
            };
            let channel = client.create_channel(&request).await?;
            output.print(&channel, channel_line)?;
        }
        ChannelsCommand::List { page } => {
            list::<ChannelPage>(
                &client,
                "/v1/channels",
                &page,
                output,
                channel_line,
                "no channels",
            )
            .await?;
        }
        ChannelsCommand::Show { id } => {
            let channel = client.get_channel(&id).await?;
            output.print(&channel, channel_line)?;
        }
        ChannelsCommand::Delete { id } => {
            let channel = client.delete_channel(&id).await?;
            output.print(&channel, channel_line)?;
        }
        ChannelsCommand::LinkSpeaker { id, user, member } => {
            let speaker = client
                .link_speaker(&id, &user, &LinkSpeaker { member_id: member })
                .await?;
            output.print(&speaker, |s| {
                format!("{} linked to member {}", s.user_id, member)
            })?;
        }
        ChannelsCommand::UnlinkSpeaker { id, user } => {
            client.unlink_speaker(&id, &user).await?;
            output.print(&serde_json::json!({"unlinked": user}), |_| {
                format!("{user} unlinked")
            })?;
        }
        ChannelsCommand::Sends { id, page } => {
            list::<ChannelSendPage>(
                &client,
                &format!("/v1/channels/{id}/sends"),
                &page,
                output,
                send_line,
                "no inputs",
            )
            .await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
