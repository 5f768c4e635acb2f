//! The Channel use cases: create, list, show and delete a member's Channels, list their
//! inputs and sends, and take a platform's request.
//!
//! A Channel belongs to the member who created it; its input reaches their Chats with the
//! Bot, sent as them through the credential they created it with (its current rights are
//! checked at each input, as a trigger's are). Creating one needs the right triggers need to
//! create inbound work: `chats:write`.

use std::sync::Arc;

use openbot_schema::{
    Action, Channel, ChannelKind, ChannelPage, ChannelSend, ChannelSendPage, ChannelStatus,
    CreateChannel, LinkSpeaker, Resource, Speaker,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::delivery::{DeliveryInput, delivery_submission};
use super::inbound::{Inbound, InboundError, InboundMessage};
use super::removal::{RemovalInput, removal_submission};
use super::sends::check_base;
use super::sql::{CLOSED, MarkRemoving};
use super::store::{ChannelRow, ChannelStore, MessageRow, NewMessage, Stage};
use super::{slack, telegram};
use crate::bots::BotStore;
use crate::engine::{Engine, EngineContext, EngineError};
use crate::identity::{AccessError, Caller, IdentityStore};
use crate::paging::Paging;
use crate::platform::Platform;
use crate::store::{StoreError, Submitted, TxWrites, stored_time};

/// The most bytes of a bot token or secret.
const MAX_SECRET: usize = 512;

/// Why a Channel use case failed.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// Not there, or not the caller's.
    #[error("{0} was not found")]
    NotFound(&'static str),
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
    /// The caller's token lacks a right.
    #[error(transparent)]
    Access(#[from] AccessError),
    /// The Channel is removing or removed: it takes no input.
    #[error("the channel is being removed and takes no input")]
    Closed,
    /// A platform request whose proof was refused.
    #[error(transparent)]
    Inbound(#[from] InboundError),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<EngineError> for ChannelError {
    fn from(err: EngineError) -> Self {
        match err {
            EngineError::Store(StoreError::Refused(why)) if why == CLOSED => ChannelError::Closed,
            EngineError::Store(err) => ChannelError::Store(err),
            other => ChannelError::Store(StoreError::Invalid(other.to_string())),
        }
    }
}

/// A Channel's secrets, sealed as one record. Never in a view, a log or an error.
#[derive(Clone, Serialize, Deserialize)]
pub struct ChannelSecrets {
    /// The platform's bot token.
    pub bot_token: String,
    /// Slack's signing secret.
    #[serde(default)]
    pub signing_secret: Option<String>,
    /// Telegram's webhook secret token.
    #[serde(default)]
    pub secret_token: Option<String>,
}

impl std::fmt::Debug for ChannelSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChannelSecrets(..)")
    }
}

/// Opens a Channel's sealed secrets.
pub(crate) async fn open_secrets(
    cx: &EngineContext,
    record: Uuid,
) -> Result<ChannelSecrets, StoreError> {
    cx.open_json(record).await.map_err(|e| match e {
        EngineError::Store(err) => err,
        other => StoreError::Invalid(other.to_string()),
    })
}

/// What a platform's request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// Slack's URL verification: answer this challenge.
    Challenge(String),
    /// An input was taken; `repeated` when it was taken before (a platform's retry).
    Taken {
        /// True for a repeated event ID: nothing new was sent.
        repeated: bool,
    },
    /// Nothing to take (another event, a bot's message).
    Ignored,
}

/// A platform request as it arrived.
#[derive(Debug, Clone, Copy)]
pub struct PlatformRequest<'a> {
    /// Slack: `X-Slack-Request-Timestamp`.
    pub timestamp: Option<&'a str>,
    /// Slack: `X-Slack-Signature`; Telegram: `X-Telegram-Bot-Api-Secret-Token`.
    pub signature: Option<&'a str>,
    /// The body, exactly as received.
    pub body: &'a [u8],
}

/// The path a platform posts a Channel's requests to.
pub fn webhook_path(kind: ChannelKind, id: Uuid) -> String {
    match kind {
        ChannelKind::Slack => format!("/v1/channels/{id}/slack/events"),
        ChannelKind::Telegram => format!("/v1/channels/{id}/telegram"),
    }
}

/// The public view of a Channel.
pub fn channel_view(row: &ChannelRow) -> Result<Channel, StoreError> {
    Ok(Channel {
        id: row.id,
        kind: row.kind,
        bot_id: row.bot_id,
        status: row.status,
        api_base_url: row.api_base_url.clone(),
        webhook_path: webhook_path(row.kind, row.id),
        created_at: stored_time(row.created_at)?,
    })
}

/// The public view of an input and its reply's send.
pub fn send_view(kind: ChannelKind, row: MessageRow) -> Result<ChannelSend, StoreError> {
    Ok(ChannelSend {
        id: row.id,
        channel_id: row.channel_id,
        event_id: row.event_id,
        conversation: row.conversation,
        speaker: Speaker {
            platform: kind,
            user_id: row.speaker_user_id,
            display_name: row.speaker_name,
            member_id: row.speaker_member_id,
        },
        chat_id: row.chat_id,
        turn_id: row.turn_id,
        state: row.send_state,
        platform_message_id: row.platform_message_id.filter(|id| !id.is_empty()),
        error: row.error,
        attempts: row.attempts.max(0) as u32,
        created_at: stored_time(row.created_at)?,
    })
}

fn check_user(user_id: &str) -> Result<(), ChannelError> {
    if user_id.is_empty()
        || user_id.len() > 64
        || !user_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(ChannelError::Invalid(
            "a platform user ID has 1-64 letters, digits, `-` or `_`".into(),
        ));
    }
    Ok(())
}

fn check_secret(what: &str, value: &str) -> Result<(), ChannelError> {
    if value.is_empty()
        || value.len() > MAX_SECRET
        || value.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(ChannelError::Invalid(format!(
            "{what} must be 1-{MAX_SECRET} characters without spaces"
        )));
    }
    Ok(())
}

/// The Channel use cases.
#[derive(Clone)]
pub struct Channels {
    engine: Arc<Engine>,
    channels: Arc<dyn ChannelStore>,
    bots: Arc<dyn BotStore>,
    identity: Arc<dyn IdentityStore>,
    platform: Platform,
}

impl Channels {
    /// The use cases on these stores; API base URLs are checked against `platform`.
    pub fn new(
        engine: Arc<Engine>,
        channels: Arc<dyn ChannelStore>,
        bots: Arc<dyn BotStore>,
        identity: Arc<dyn IdentityStore>,
        platform: Platform,
    ) -> Self {
        Self {
            engine,
            channels,
            bots,
            identity,
            platform,
        }
    }

    /// Creates a Channel for a Bot the caller may use. Its secrets are stored sealed and are
    /// never shown again.
    pub async fn create(
        &self,
        caller: &Caller,
        new: CreateChannel,
    ) -> Result<Channel, ChannelError> {
        caller.require(Resource::Chats, Action::Write)?;
        caller
            .credential
            .for_long_lived_work("a Channel")
            .map_err(ChannelError::Invalid)?;
        self.bots
            .visible_bot(caller, new.bot_id)
            .await?
            .ok_or(ChannelError::NotFound("bot"))?;
        check_secret("bot_token", &new.bot_token)?;
        let (default_base, secrets) = match new.kind {
            ChannelKind::Slack => {
                let secret = new.signing_secret.as_deref().ok_or_else(|| {
                    ChannelError::Invalid("a Slack channel needs its signing_secret".into())
                })?;
                check_secret("signing_secret", secret)?;
                if new.secret_token.is_some() {
                    return Err(ChannelError::Invalid(
                        "a Slack channel takes no secret_token".into(),
                    ));
                }
                (
                    slack::DEFAULT_BASE,
                    ChannelSecrets {
                        bot_token: new.bot_token,
                        signing_secret: Some(secret.to_string()),
                        secret_token: None,
                    },
                )
            }
            ChannelKind::Telegram => {
                let secret = new.secret_token.as_deref().ok_or_else(|| {
                    ChannelError::Invalid("a Telegram channel needs its secret_token".into())
                })?;
                if !telegram::valid_secret(secret) {
                    return Err(ChannelError::Invalid(
                        "secret_token must be 1-256 characters of A-Z, a-z, 0-9, _ and -".into(),
                    ));
                }
                if new.signing_secret.is_some() {
                    return Err(ChannelError::Invalid(
                        "a Telegram channel takes no signing_secret".into(),
                    ));
                }
                if new.bot_token.contains('/') {
                    return Err(ChannelError::Invalid(
                        "bot_token must not contain `/`".into(),
                    ));
                }
                (
                    telegram::DEFAULT_BASE,
                    ChannelSecrets {
                        bot_token: new.bot_token,
                        signing_secret: None,
                        secret_token: Some(secret.to_string()),
                    },
                )
            }
        };
        let base = new.api_base_url.as_deref().unwrap_or(default_base);
        let base = check_base(self.platform.outbound(), base).map_err(ChannelError::Invalid)?;
        let cx = self.engine.context();
        let sealed = cx
            .seal_json(&secrets)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        let row = ChannelRow {
            id: Uuid::now_v7(),
            organization_id: caller.member.organization_id,
            member_id: caller.member.member_id,
            credential: caller.credential,
            bot_id: new.bot_id,
            kind: new.kind,
            status: ChannelStatus::Active,
            api_base_url: base,
            secret_record: sealed.id,
            removal_execution_id: None,
            created_at: cx.clock.now_ms(),
        };
        let stored = self.channels.create_channel(row, sealed).await?;
        Ok(channel_view(&stored)?)
    }

    /// One of the caller's Channels, within its token's Bot limit: every read and change of
    /// one goes through here.
    async fn own(&self, caller: &Caller, id: Uuid) -> Result<ChannelRow, ChannelError> {
        match self.channels.channel(id).await? {
            Some(row)
                if caller.owns(row.organization_id, row.member_id)
                    && caller.may_use(row.bot_id) =>
            {
                Ok(row)
            }
            _ => Err(ChannelError::NotFound("channel")),
        }
    }

    /// One page of the caller's Channels, oldest first (removed ones too, with their status).
    pub async fn list(
        &self,
        caller: &Caller,
        paging: &Paging<Uuid>,
    ) -> Result<ChannelPage, ChannelError> {
        caller.require(Resource::Chats, Action::Read)?;
        let rows = self
            .channels
            .channels_of(
                caller.member.member_id,
                caller.bot_ids.as_deref(),
                paging.after,
                paging.fetch(),
            )
            .await?;
        Ok(paging.try_page(rows, |row| row.id, |row| channel_view(&row))?)
    }

    /// One of the caller's Channels.
    pub async fn get(&self, caller: &Caller, id: Uuid) -> Result<Channel, ChannelError> {
        caller.require(Resource::Chats, Action::Read)?;
        Ok(channel_view(&self.own(caller, id).await?)?)
    }

    /// Deletes a Channel: admission closes at once (status `removing`, in the transaction
    /// that stores its removal), and it becomes `removed` once every delivery has ended.
    /// Deleting a Channel that is removing or removed answers it as it is.
    pub async fn delete(&self, caller: &Caller, id: Uuid) -> Result<Channel, ChannelError> {
        caller.require(Resource::Chats, Action::Write)?;
        let row = self.own(caller, id).await?;
        if row.status == ChannelStatus::Active {
            let input = RemovalInput { channel_id: id };
            let submitted = self
                .engine
                .submit_writing(
                    removal_submission(row.organization_id, &input),
                    TxWrites::one(MarkRemoving { channel_id: id }),
                )
                .await;
            match submitted {
                Ok(Submitted::Created(execution)) | Ok(Submitted::Existing(execution)) => {
                    self.channels.set_removal_execution(id, execution).await?;
                }
                // A concurrent delete closed it first.
                Err(EngineError::Store(StoreError::Refused(why))) if why == CLOSED => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(channel_view(&self.own(caller, id).await?)?)
    }

    /// Links a platform user of one of the caller's Channels to a member of its organization:
    /// inputs taken from then on keep the member with their Speaker.
    pub async fn link_speaker(
        &self,
        caller: &Caller,
        id: Uuid,
        user_id: &str,
        link: LinkSpeaker,
    ) -> Result<Speaker, ChannelError> {
        caller.require(Resource::Chats, Action::Write)?;
        let channel = self.own(caller, id).await?;
        check_user(user_id)?;
        let members = self.identity.members_of(channel.organization_id).await?;
        if !members.iter().any(|m| m.member.member_id == link.member_id) {
            return Err(ChannelError::NotFound("member"));
        }
        self.channels
            .link_speaker(id, user_id, link.member_id)
            .await?;
        Ok(Speaker {
            platform: channel.kind,
            user_id: user_id.to_string(),
            display_name: None,
            member_id: Some(link.member_id),
        })
    }

    /// Removes a platform user's link; inputs taken before keep theirs.
    pub async fn unlink_speaker(
        &self,
        caller: &Caller,
        id: Uuid,
        user_id: &str,
    ) -> Result<(), ChannelError> {
        caller.require(Resource::Chats, Action::Write)?;
        self.own(caller, id).await?;
        if self.channels.unlink_speaker(id, user_id).await? {
            Ok(())
        } else {
            Err(ChannelError::NotFound("speaker"))
        }
    }

    /// One page of a Channel's inputs with their replies' sends, newest first.
    pub async fn sends(
        &self,
        caller: &Caller,
        id: Uuid,
        paging: &Paging<Uuid>,
    ) -> Result<ChannelSendPage, ChannelError> {
        caller.require(Resource::Chats, Action::Read)?;
        let channel = self.own(caller, id).await?;
        let rows = self
            .channels
            .messages(id, paging.after, paging.fetch())
            .await?;
        Ok(paging.try_page(rows, |row| row.id, |row| send_view(channel.kind, row))?)
    }

    /// Takes a platform's request to Channel `id` of `kind`: checks its proof (Slack's
    /// signature and timestamp, Telegram's secret token), refuses it when the Channel is not
    /// active, and takes an input once per platform event ID, starting its delivery.
    pub async fn receive(
        &self,
        id: Uuid,
        kind: ChannelKind,
        request: PlatformRequest<'_>,
    ) -> Result<Received, ChannelError> {
        let channel = match self.channels.channel(id).await? {
            Some(row) if row.kind == kind => row,
            _ => return Err(ChannelError::NotFound("channel")),
        };
        let cx = self.engine.context();
        let secrets = open_secrets(cx, channel.secret_record).await?;
        let inbound = match kind {
            ChannelKind::Slack => {
                let secret = secrets.signing_secret.as_deref().unwrap_or_default();
                slack::verify(
                    secret,
                    request.timestamp,
                    request.signature,
                    request.body,
                    cx.clock.now_ms(),
                )?;
                slack::parse(request.body)?
            }
            ChannelKind::Telegram => {
                let secret = secrets.secret_token.as_deref().unwrap_or_default();
                telegram::verify(secret, request.signature)?;
                telegram::parse(request.body)?
            }
        };
        if channel.status != ChannelStatus::Active {
            return Err(ChannelError::Closed);
        }
        match inbound {
            Inbound::Challenge(challenge) => Ok(Received::Challenge(challenge)),
            Inbound::Ignored(_) => Ok(Received::Ignored),
            Inbound::Message(message) => self.take(&channel, message).await,
        }
    }

    async fn take(
        &self,
        channel: &ChannelRow,
        message: InboundMessage,
    ) -> Result<Received, ChannelError> {
        if self
            .channels
            .message(channel.id, &message.event_id)
            .await?
            .is_some()
        {
            return Ok(Received::Taken { repeated: true });
        }
        let speaker_member_id = self
            .channels
            .speaker_member(channel.id, &message.user_id)
            .await?;
        let cx = self.engine.context();
        let text = cx
            .keys
            .seal(Uuid::now_v7(), message.text.as_bytes())
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        let row = MessageRow {
            id: Uuid::now_v7(),
            channel_id: channel.id,
            event_id: message.event_id.clone(),
            conversation: message.conversation,
            reply_to: message.reply_to,
            reply_thread: message.reply_thread,
            speaker_user_id: message.user_id,
            speaker_name: message.display_name,
            speaker_member_id,
            text_record: text.id,
            chat_id: None,
            turn_id: None,
            stage: Stage::Received,
            send_state: openbot_schema::SendState::Pending,
            reply_record: None,
            platform_message_id: None,
            error: None,
            attempts: 0,
            retry_at: None,
            created_at: cx.clock.now_ms(),
        };
        let input = DeliveryInput {
            channel_id: channel.id,
            event_id: message.event_id,
        };
        let submitted = self
            .engine
            .submit_writing(
                delivery_submission(channel.organization_id, &input),
                TxWrites::one(NewMessage { row, text }),
            )
            .await?;
        Ok(Received::Taken {
            repeated: matches!(submitted, Submitted::Existing(_)),
        })
    }
}
