//! The Channel store: Channels, the Chat of each platform conversation, and each input with
//! the saved send of its reply.

use async_trait::async_trait;
use openbot_schema::{BotId, ChannelKind, ChannelStatus, ChatId, ExecutionId, SendState};
use uuid::Uuid;

use crate::identity::Credential;
use crate::store::{Millis, SealedBlob, StoreError};

/// A stored Channel.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelRow {
    /// Its ID.
    pub id: Uuid,
    /// The organization of its creator.
    pub organization_id: Uuid,
    /// The member who created it: input reaches their Chats, sent as them.
    pub member_id: Uuid,
    /// The credential it was created with; its current rights are checked at each input.
    pub credential: Credential,
    /// The Bot that answers.
    pub bot_id: BotId,
    /// Slack or Telegram.
    pub kind: ChannelKind,
    /// Active, removing or removed.
    pub status: ChannelStatus,
    /// The platform's API base URL, without a trailing `/`.
    pub api_base_url: String,
    /// The sealed [`super::ChannelSecrets`].
    pub secret_record: Uuid,
    /// The execution that finishes its removal, once deleted.
    pub removal_execution_id: Option<ExecutionId>,
    /// When it was created.
    pub created_at: Millis,
}

/// Where an input's delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Taken; its Turn has not started.
    Received,
    /// Its Turn runs.
    Answering,
    /// A reply waits to be sent (at `retry_at`, when set).
    Sending,
    /// A request with the reply is on its way. Found so by a new owner, its outcome is
    /// unknown: it is never sent again.
    Writing,
    /// Nothing more happens.
    Ended,
}

/// A stored input and its reply's send.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageRow {
    /// Its ID.
    pub id: Uuid,
    /// The Channel.
    pub channel_id: Uuid,
    /// The platform's ID of the input.
    pub event_id: String,
    /// The platform conversation (the key of its Chat).
    pub conversation: String,
    /// Where the reply goes: the Slack channel (Telegram chat ID).
    pub reply_to: String,
    /// The Slack thread the reply goes to.
    pub reply_thread: Option<String>,
    /// The speaker's platform user ID.
    pub speaker_user_id: String,
    /// The speaker's name as the platform gave it.
    pub speaker_name: Option<String>,
    /// The member the speaker was linked to when the input arrived.
    pub speaker_member_id: Option<Uuid>,
    /// The sealed input text.
    pub text_record: Uuid,
    /// The conversation's Chat, once resolved.
    pub chat_id: Option<ChatId>,
    /// The Turn that answers.
    pub turn_id: Option<ExecutionId>,
    /// Where its delivery stands.
    pub stage: Stage,
    /// The public state of its reply.
    pub send_state: SendState,
    /// The sealed reply text, once the Turn ended.
    pub reply_record: Option<Uuid>,
    /// The platform's ID of the sent reply.
    pub platform_message_id: Option<String>,
    /// The platform's error, or why the outcome is unknown.
    pub error: Option<String>,
    /// Requests made to send the reply.
    pub attempts: i64,
    /// When a reply after a rate limit (or a request that never left) is sent again.
    pub retry_at: Option<Millis>,
    /// When it arrived.
    pub created_at: Millis,
}

/// An input to take: its row (stage `received`) and its sealed text.
#[derive(Debug, Clone)]
pub struct NewMessage {
    /// The row.
    pub row: MessageRow,
    /// The sealed text (its ID is `row.text_record`).
    pub text: SealedBlob,
}

/// Channels, their Chats and their inputs.
#[async_trait]
pub trait ChannelStore: Send + Sync + 'static {
    /// Stores a Channel and its sealed secrets in one transaction.
    async fn create_channel(
        &self,
        row: ChannelRow,
        secrets: SealedBlob,
    ) -> Result<ChannelRow, StoreError>;

    /// A Channel (also a removed one).
    async fn channel(&self, id: Uuid) -> Result<Option<ChannelRow>, StoreError>;

    /// The member's Channels, oldest first, after `after`; with `bot_ids`, only those of
    /// one of those Bots (in the query).
    async fn channels_of(
        &self,
        member_id: Uuid,
        bot_ids: Option<&[openbot_schema::BotId]>,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<ChannelRow>, StoreError>;

    /// Saves the execution that finishes a Channel's removal.
    async fn set_removal_execution(
        &self,
        id: Uuid,
        execution: ExecutionId,
    ) -> Result<(), StoreError>;

    /// Marks a removing Channel removed.
    async fn finish_removal(&self, id: Uuid) -> Result<(), StoreError>;

    /// The Chat of a conversation, if it has one.
    async fn conversation_chat(
        &self,
        channel_id: Uuid,
        conversation: &str,
    ) -> Result<Option<ChatId>, StoreError>;

    /// Maps a conversation to `chat` unless it has a Chat already; answers its Chat.
    async fn map_conversation(
        &self,
        channel_id: Uuid,
        conversation: &str,
        chat: ChatId,
    ) -> Result<ChatId, StoreError>;

    /// The Chats of a Channel's conversations.
    async fn channel_chats(&self, channel_id: Uuid) -> Result<Vec<ChatId>, StoreError>;

    /// An input by its platform event ID.
    async fn message(
        &self,
        channel_id: Uuid,
        event_id: &str,
    ) -> Result<Option<MessageRow>, StoreError>;

    /// A Channel's inputs, newest first, before `before`.
    async fn messages(
        &self,
        channel_id: Uuid,
        before: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<MessageRow>, StoreError>;

    /// How many of a Channel's inputs have not ended.
    async fn open_messages(&self, channel_id: Uuid) -> Result<i64, StoreError>;

    /// Links a platform user to a member (replacing an earlier link).
    async fn link_speaker(
        &self,
        channel_id: Uuid,
        user_id: &str,
        member_id: Uuid,
    ) -> Result<(), StoreError>;

    /// Removes a platform user's link; false when there was none.
    async fn unlink_speaker(&self, channel_id: Uuid, user_id: &str) -> Result<bool, StoreError>;

    /// The member a platform user is linked to.
    async fn speaker_member(
        &self,
        channel_id: Uuid,
        user_id: &str,
    ) -> Result<Option<Uuid>, StoreError>;

    /// An input's Turn started: stage `answering`.
    async fn set_answering(
        &self,
        id: Uuid,
        chat: ChatId,
        turn: ExecutionId,
    ) -> Result<(), StoreError>;

    /// The Turn ended with this reply (sealed): stage `sending`.
    async fn set_reply(&self, id: Uuid, reply: SealedBlob) -> Result<(), StoreError>;
}
