//! Channels: a Bot connected to Slack or Telegram. Each platform conversation is a Chat of the
//! Bot; each outside user is a Speaker kept with their input; every reply is a saved send.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::{BotId, ChatId, ExecutionId};

/// The platform a Channel connects to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum ChannelKind {
    /// A Slack app: Events API in, `chat.postMessage` out.
    Slack,
    /// A Telegram bot: a webhook with its secret token in, `sendMessage` out.
    Telegram,
}

/// Where a Channel is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum ChannelStatus {
    /// It takes input and sends replies.
    Active,
    /// Deleted: it refuses input; pending sends and running Turns of its Chats finish.
    Removing,
    /// Every delivery it had has ended.
    Removed,
}

/// A Channel to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct CreateChannel {
    /// Slack or Telegram.
    pub kind: ChannelKind,
    /// The Bot that answers: one the caller may use.
    pub bot_id: BotId,
    /// The platform's bot token (Slack `xoxb-...`, Telegram `123456:ABC...`). Stored sealed,
    /// never shown again.
    pub bot_token: String,
    /// Slack: the app's signing secret. Stored sealed, never shown again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub signing_secret: Option<String>,
    /// Telegram: the `secret_token` given to `setWebhook` (1-256 of `A-Z a-z 0-9 _ -`).
    /// Stored sealed, never shown again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub secret_token: Option<String>,
    /// The platform's API base URL; `https://slack.com/api` or `https://api.telegram.org`
    /// when absent. Reached only as the server's outbound policy allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub api_base_url: Option<String>,
}

/// A Channel. Its secrets are never shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Channel {
    /// Its ID.
    pub id: Uuid,
    /// Slack or Telegram.
    pub kind: ChannelKind,
    /// The Bot that answers.
    pub bot_id: BotId,
    /// Active, removing or removed.
    pub status: ChannelStatus,
    /// The platform's API base URL.
    pub api_base_url: String,
    /// The path the platform posts to on this server: `/v1/channels/{id}/slack/events` or
    /// `/v1/channels/{id}/telegram`.
    pub webhook_path: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// An outside user whose input reached a Chat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Speaker {
    /// Slack or Telegram.
    pub platform: ChannelKind,
    /// The platform's user ID (Slack `U...`, Telegram's numeric user ID as text).
    pub user_id: String,
    /// The name the platform gave with the input, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub display_name: Option<String>,
    /// The member of the organization this user was linked to when the input arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub member_id: Option<Uuid>,
}

/// A platform user to link to a member of the Channel's organization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct LinkSpeaker {
    /// The member.
    pub member_id: Uuid,
}

/// What became of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum SendState {
    /// The input waits for its Turn, or the reply waits to be sent (or to be sent again after
    /// a rate limit).
    Pending,
    /// The platform took the reply: `platform_message_id` names it.
    Sent,
    /// The platform refused the reply for good: `error` says why.
    Rejected,
    /// The answer to the request was lost: the reply may or may not have arrived. Never sent
    /// again by the server (the platforms have no idempotency key).
    Unknown,
    /// The Channel's creator may no longer send to the Chat: no Turn ran.
    Refused,
}

/// One input that reached a Channel and the reply sent for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ChannelSend {
    /// Its ID.
    pub id: Uuid,
    /// The Channel.
    pub channel_id: Uuid,
    /// The platform's ID of the input (Slack `event_id`, Telegram `update_id`): taken once.
    pub event_id: String,
    /// The platform conversation (Slack channel, with `:thread_ts` in a thread; Telegram
    /// chat ID).
    pub conversation: String,
    /// Who wrote the input.
    pub speaker: Speaker,
    /// The Chat of the conversation, once the input reached it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub chat_id: Option<ChatId>,
    /// The Turn that answers, once it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub turn_id: Option<ExecutionId>,
    /// Pending, sent, rejected, unknown or refused.
    pub state: SendState,
    /// The platform's ID of the sent reply (Slack `ts`, Telegram `message_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub platform_message_id: Option<String>,
    /// The platform's error of a rejection or of the last rate limit, or why the outcome is
    /// unknown or refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub error: Option<String>,
    /// How many requests were made to send the reply.
    pub attempts: u32,
    /// When the input arrived.
    pub created_at: DateTime<Utc>,
}

/// The answer to a platform's request: taken, repeated, ignored, or Slack's challenge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ChannelAck {
    /// Always true: the request was valid.
    pub ok: bool,
    /// True when the event was taken before (a platform's retry): nothing new was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub repeated: Option<bool>,
    /// True when the request held no input (another event type, a bot's own message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub ignored: Option<bool>,
    /// Slack's `url_verification` challenge, answered back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub challenge: Option<String>,
}
