//! The Channel store on SQL, written once for SQLite and PostgreSQL, and the input's rows in
//! the transaction that starts its delivery.

use async_trait::async_trait;
use openbot_schema::{BotId, ChannelKind, ChannelStatus, ChatId, ExecutionId, SendState};
use sqlx::Row as _;
use uuid::Uuid;

use super::store::{ChannelRow, ChannelStore, MessageRow, NewMessage, Stage};
use crate::store::{Millis, SealedBlob, StoreError, both_backends, now_ms, tx_write};

macro_rules! channel_columns {
    () => {
        "id, organization_id, member_id, credential, bot_id, kind, status, api_base_url, \
         secret_record, removal_execution_id, created_at"
    };
}

macro_rules! message_columns {
    () => {
        "id, channel_id, event_id, conversation, reply_to, reply_thread, speaker_user_id, \
         speaker_name, speaker_member_id, text_record, chat_id, turn_id, stage, send_state, reply_record, \
         platform_message_id, error, attempts, retry_at, created_at"
    };
}

/// The refusal of an input to a Channel that is not active.
pub(crate) const CLOSED: &str = "channel admission is closed";

pub(crate) fn kind_text(kind: ChannelKind) -> &'static str {
    match kind {
        ChannelKind::Slack => "slack",
        ChannelKind::Telegram => "telegram",
    }
}

fn kind_of(text: &str) -> Result<ChannelKind, StoreError> {
    match text {
        "slack" => Ok(ChannelKind::Slack),
        "telegram" => Ok(ChannelKind::Telegram),
        other => Err(StoreError::Invalid(format!("channel kind `{other}`"))),
    }
}

pub(crate) fn status_text(status: ChannelStatus) -> &'static str {
    match status {
        ChannelStatus::Active => "active",
        ChannelStatus::Removing => "removing",
        ChannelStatus::Removed => "removed",
    }
}

fn status_of(text: &str) -> Result<ChannelStatus, StoreError> {
    match text {
        "active" => Ok(ChannelStatus::Active),
        "removing" => Ok(ChannelStatus::Removing),
        "removed" => Ok(ChannelStatus::Removed),
        other => Err(StoreError::Invalid(format!("channel status `{other}`"))),
    }
}

fn stage_of(text: &str) -> Result<Stage, StoreError> {
    match text {
        "received" => Ok(Stage::Received),
        "answering" => Ok(Stage::Answering),
        "sending" => Ok(Stage::Sending),
        "writing" => Ok(Stage::Writing),
        "ended" => Ok(Stage::Ended),
        other => Err(StoreError::Invalid(format!(
            "channel message stage `{other}`"
        ))),
    }
}

fn send_text(state: SendState) -> &'static str {
    match state {
        SendState::Pending => "pending",
        SendState::Sent => "sent",
        SendState::Rejected => "rejected",
        SendState::Unknown => "unknown",
        SendState::Refused => "refused",
    }
}

fn send_of(text: &str) -> Result<SendState, StoreError> {
    match text {
        "pending" => Ok(SendState::Pending),
        "sent" => Ok(SendState::Sent),
        "rejected" => Ok(SendState::Rejected),
        "unknown" => Ok(SendState::Unknown),
        "refused" => Ok(SendState::Refused),
        other => Err(StoreError::Invalid(format!("channel send state `{other}`"))),
    }
}

/// The status of a removal that began: written in the transaction that submits the removal's
/// execution, so admission closes exactly when the removal exists. Refuses (rolling both
/// back) when the Channel is not active.
#[derive(Debug)]
pub struct MarkRemoving {
    /// The Channel.
    pub channel_id: Uuid,
}

tx_write!(MarkRemoving, |this, tx| {
    let done = sqlx::query(
        "UPDATE channels SET status = 'removing', updated_at = $2 WHERE id = $1 AND status = 'active'",
    )
    .bind(this.channel_id)
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::Refused(CLOSED.into()));
    }
    Ok(())
});

/// Moves a reply from `sending` to `writing` and counts the attempt, in the commit that saves
/// its call as `sending`; refused when it was not in `sending` (another owner took it first),
/// so nothing is sent.
#[derive(Debug)]
pub struct BeginWrite {
    /// The input's row.
    pub message_id: Uuid,
}

tx_write!(BeginWrite, |this, tx| {
    let done = sqlx::query(
        "UPDATE channel_messages SET stage = 'writing', attempts = attempts + 1, retry_at = NULL, updated_at = $2 \
         WHERE id = $1 AND stage = 'sending'",
    )
    .bind(this.message_id)
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::Refused(
            "the reply is not waiting to be sent".into(),
        ));
    }
    Ok(())
});

/// The request never reached the platform, or was refused for now: back to `sending`, to be
/// sent again at `at`.
#[derive(Debug)]
pub struct RetryLater {
    /// The input's row.
    pub message_id: Uuid,
    /// When to send again.
    pub at: Millis,
    /// Why, for the input's status.
    pub error: String,
}

tx_write!(RetryLater, |this, tx| {
    sqlx::query(
        "UPDATE channel_messages SET stage = 'sending', retry_at = $2, error = $3, updated_at = $4 \
         WHERE id = $1 AND stage = 'writing'",
    )
    .bind(this.message_id)
    .bind(this.at)
    .bind(&this.error)
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    Ok(())
});

/// Ends an input's delivery with this state (an ended one stays as it ended).
#[derive(Debug)]
pub struct EndMessage {
    /// The input's row.
    pub message_id: Uuid,
    /// How it ended.
    pub state: SendState,
    /// The platform's ID of the reply, when sent.
    pub platform_message_id: Option<String>,
    /// Why, when not sent.
    pub error: Option<String>,
}

impl EndMessage {
    /// Ends the input's delivery unsent, for `why`.
    pub fn unsent(message_id: Uuid, state: SendState, why: &str) -> Self {
        Self {
            message_id,
            state,
            platform_message_id: None,
            error: Some(why.to_string()),
        }
    }
}

tx_write!(EndMessage, |this, tx| {
    sqlx::query(
        "UPDATE channel_messages SET stage = 'ended', send_state = $2, platform_message_id = $3, \
         error = $4, retry_at = NULL, updated_at = $5 WHERE id = $1 AND stage <> 'ended'",
    )
    .bind(this.message_id)
    .bind(send_text(this.state))
    .bind(this.platform_message_id.as_deref())
    .bind(this.error.as_deref())
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    Ok(())
});

// An input's rows, written in the transaction that submits its delivery, only while its
// Channel is active: a Channel that is removing refuses it (and the delivery with it).
tx_write!(NewMessage, |this, tx| {
    let row = &this.row;
    // An update, not a read: it locks the row on PostgreSQL, so a removal that begins
    // concurrently either sees this input as open or this input sees the removal.
    let open = sqlx::query(
        "UPDATE channels SET updated_at = updated_at WHERE id = $1 AND status = 'active'",
    )
    .bind(row.channel_id)
    .execute(&mut **tx)
    .await?;
    if open.rows_affected() == 0 {
        return Err(StoreError::Refused(CLOSED.into()));
    }
    sqlx::query("INSERT INTO sealed_records (id, key_id, nonce, ciphertext, created_at) VALUES ($1, $2, $3, $4, $5)")
        .bind(this.text.id)
        .bind(&this.text.key_id)
        .bind(&this.text.nonce)
        .bind(&this.text.ciphertext)
        .bind(row.created_at)
        .execute(&mut **tx)
        .await?;
    sqlx::query(concat!("INSERT INTO channel_messages (", message_columns!(), ", updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULL, NULL, 'received', 'pending', NULL, NULL, NULL, 0, NULL, $11, $11)"))
    .bind(row.id)
    .bind(row.channel_id)
    .bind(&row.event_id)
    .bind(&row.conversation)
    .bind(&row.reply_to)
    .bind(&row.reply_thread)
    .bind(&row.speaker_user_id)
    .bind(&row.speaker_name)
    .bind(row.speaker_member_id)
    .bind(row.text_record)
    .bind(row.created_at)
    .execute(&mut **tx)
    .await?;
    Ok(())
});

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const CREATE_CHANNEL_INSERT_SEALED_RECORDS: &str = "INSERT INTO sealed_records (id, key_id, nonce, ciphertext, created_at) VALUES ($1, $2, $3, $4, $5)";
    const CREATE_CHANNEL_INSERT_CHANNELS: &str = concat!(
        "INSERT INTO channels (",
        channel_columns!(),
        ", updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL, $10, $10) RETURNING ",
        channel_columns!()
    );
    const CHANNEL: &str = concat!(
        "SELECT ",
        channel_columns!(),
        " FROM channels WHERE id = $1"
    );
    const CHANNELS_OF: &str = concat!(
        "SELECT ",
        channel_columns!(),
        " FROM channels WHERE member_id = $1 AND id > $2 AND ",
        in_bot_limit!("bot_id", "$4"),
        " ORDER BY id LIMIT $3"
    );
    const SET_REMOVAL_EXECUTION: &str =
        "UPDATE channels SET removal_execution_id = $2, updated_at = $3 WHERE id = $1";
    const FINISH_REMOVAL: &str = "UPDATE channels SET status = 'removed', updated_at = $2 WHERE id = $1 AND status = 'removing'";
    const CONVERSATION_CHAT: &str =
        "SELECT chat_id FROM channel_chats WHERE channel_id = $1 AND conversation = $2";
    const MAP_CONVERSATION_INSERT_CHANNEL_CHATS: &str = "INSERT INTO channel_chats (channel_id, conversation, chat_id, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING";
    const MAP_CONVERSATION_SELECT_CHANNEL_CHATS: &str =
        "SELECT chat_id FROM channel_chats WHERE channel_id = $1 AND conversation = $2";
    const CHANNEL_CHATS: &str = "SELECT chat_id FROM channel_chats WHERE channel_id = $1";
    const MESSAGE: &str = concat!(
        "SELECT ",
        message_columns!(),
        " FROM channel_messages WHERE channel_id = $1 AND event_id = $2"
    );
    const MESSAGES: &str = concat!(
        "SELECT ",
        message_columns!(),
        " FROM channel_messages WHERE channel_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3"
    );
    const OPEN_MESSAGES: &str =
        "SELECT COUNT(*) FROM channel_messages WHERE channel_id = $1 AND stage <> 'ended'";
    const LINK_SPEAKER: &str = "INSERT INTO channel_speakers (channel_id, user_id, member_id, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (channel_id, user_id) DO UPDATE SET member_id = excluded.member_id";
    const UNLINK_SPEAKER: &str =
        "DELETE FROM channel_speakers WHERE channel_id = $1 AND user_id = $2";
    const SPEAKER_MEMBER: &str =
        "SELECT member_id FROM channel_speakers WHERE channel_id = $1 AND user_id = $2";
    const SET_ANSWERING: &str = "UPDATE channel_messages SET chat_id = $2, turn_id = $3, stage = 'answering', updated_at = $4 WHERE id = $1 AND stage = 'received'";
    const SET_REPLY_INSERT_SEALED_RECORDS: &str = "INSERT INTO sealed_records (id, key_id, nonce, ciphertext, created_at) VALUES ($1, $2, $3, $4, $5)";
    const SET_REPLY_UPDATE_CHANNEL_MESSAGES: &str = "UPDATE channel_messages SET reply_record = $2, stage = 'sending', updated_at = $3 WHERE id = $1 AND stage = 'answering'";

    fn channel_row(row: &Row) -> Result<ChannelRow, StoreError> {
        let credential: String = row.try_get("credential")?;
        Ok(ChannelRow {
            id: row.try_get("id")?,
            organization_id: row.try_get("organization_id")?,
            member_id: row.try_get("member_id")?,
            credential: serde_json::from_str(&credential)
                .map_err(|e| StoreError::Invalid(format!("channel credential: {e}")))?,
            bot_id: BotId::from(row.try_get::<Uuid, _>("bot_id")?),
            kind: kind_of(&row.try_get::<String, _>("kind")?)?,
            status: status_of(&row.try_get::<String, _>("status")?)?,
            api_base_url: row.try_get("api_base_url")?,
            secret_record: row.try_get("secret_record")?,
            removal_execution_id: row
                .try_get::<Option<Uuid>, _>("removal_execution_id")?
                .map(ExecutionId::from),
            created_at: row.try_get("created_at")?,
        })
    }

    fn message_row(row: &Row) -> Result<MessageRow, StoreError> {
        Ok(MessageRow {
            id: row.try_get("id")?,
            channel_id: row.try_get("channel_id")?,
            event_id: row.try_get("event_id")?,
            conversation: row.try_get("conversation")?,
            reply_to: row.try_get("reply_to")?,
            reply_thread: row.try_get("reply_thread")?,
            speaker_user_id: row.try_get("speaker_user_id")?,
            speaker_name: row.try_get("speaker_name")?,
            speaker_member_id: row.try_get("speaker_member_id")?,
            text_record: row.try_get("text_record")?,
            chat_id: row.try_get::<Option<Uuid>, _>("chat_id")?.map(ChatId::from),
            turn_id: row
                .try_get::<Option<Uuid>, _>("turn_id")?
                .map(ExecutionId::from),
            stage: stage_of(&row.try_get::<String, _>("stage")?)?,
            send_state: send_of(&row.try_get::<String, _>("send_state")?)?,
            reply_record: row.try_get("reply_record")?,
            platform_message_id: row.try_get("platform_message_id")?,
            error: row.try_get("error")?,
            attempts: row.try_get("attempts")?,
            retry_at: row.try_get("retry_at")?,
            created_at: row.try_get("created_at")?,
        })
    }

    #[async_trait]
    impl ChannelStore for Store {
        async fn create_channel(
            &self,
            row: ChannelRow,
            secrets: SealedBlob,
        ) -> Result<ChannelRow, StoreError> {
            let mut tx = self.writer().begin().await?;
            sqlx::query(CREATE_CHANNEL_INSERT_SEALED_RECORDS)
                .bind(secrets.id)
                .bind(&secrets.key_id)
                .bind(&secrets.nonce)
                .bind(&secrets.ciphertext)
                .bind(row.created_at)
                .execute(&mut *tx)
                .await?;
            let credential = serde_json::to_string(&row.credential)
                .map_err(|e| StoreError::Invalid(e.to_string()))?;
            let stored = sqlx::query(CREATE_CHANNEL_INSERT_CHANNELS)
                .bind(row.id)
                .bind(row.organization_id)
                .bind(row.member_id)
                .bind(credential)
                .bind(row.bot_id.as_uuid())
                .bind(kind_text(row.kind))
                .bind(status_text(row.status))
                .bind(&row.api_base_url)
                .bind(secrets.id)
                .bind(row.created_at)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            channel_row(&stored)
        }

        async fn channel(&self, id: Uuid) -> Result<Option<ChannelRow>, StoreError> {
            let row = sqlx::query(CHANNEL)
                .bind(id)
                .fetch_optional(self.writer())
                .await?;
            row.as_ref().map(channel_row).transpose()
        }

        async fn channels_of(
            &self,
            member_id: Uuid,
            bot_ids: Option<&[openbot_schema::BotId]>,
            after: Option<Uuid>,
            limit: i64,
        ) -> Result<Vec<ChannelRow>, StoreError> {
            let rows = sqlx::query(CHANNELS_OF)
                .bind(member_id)
                .bind(after.unwrap_or(crate::paging::FIRST_ID))
                .bind(limit)
                .bind(crate::store::bot_limit_json(bot_ids)?)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(channel_row).collect()
        }

        async fn set_removal_execution(
            &self,
            id: Uuid,
            execution: ExecutionId,
        ) -> Result<(), StoreError> {
            sqlx::query(SET_REMOVAL_EXECUTION)
                .bind(id)
                .bind(execution.as_uuid())
                .bind(now_ms())
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn finish_removal(&self, id: Uuid) -> Result<(), StoreError> {
            sqlx::query(FINISH_REMOVAL)
                .bind(id)
                .bind(now_ms())
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn conversation_chat(
            &self,
            channel_id: Uuid,
            conversation: &str,
        ) -> Result<Option<ChatId>, StoreError> {
            let chat: Option<Uuid> = sqlx::query_scalar(CONVERSATION_CHAT)
                .bind(channel_id)
                .bind(conversation)
                .fetch_optional(self.writer())
                .await?;
            Ok(chat.map(ChatId::from))
        }

        async fn map_conversation(
            &self,
            channel_id: Uuid,
            conversation: &str,
            chat: ChatId,
        ) -> Result<ChatId, StoreError> {
            sqlx::query(MAP_CONVERSATION_INSERT_CHANNEL_CHATS)
                .bind(channel_id)
                .bind(conversation)
                .bind(chat.as_uuid())
                .bind(now_ms())
                .execute(self.writer())
                .await?;
            let chat: Uuid = sqlx::query_scalar(MAP_CONVERSATION_SELECT_CHANNEL_CHATS)
                .bind(channel_id)
                .bind(conversation)
                .fetch_one(self.writer())
                .await?;
            Ok(ChatId::from(chat))
        }

        async fn channel_chats(&self, channel_id: Uuid) -> Result<Vec<ChatId>, StoreError> {
            let chats: Vec<Uuid> = sqlx::query_scalar(CHANNEL_CHATS)
                .bind(channel_id)
                .fetch_all(self.writer())
                .await?;
            Ok(chats.into_iter().map(ChatId::from).collect())
        }

        async fn message(
            &self,
            channel_id: Uuid,
            event_id: &str,
        ) -> Result<Option<MessageRow>, StoreError> {
            let row = sqlx::query(MESSAGE)
                .bind(channel_id)
                .bind(event_id)
                .fetch_optional(self.writer())
                .await?;
            row.as_ref().map(message_row).transpose()
        }

        async fn messages(
            &self,
            channel_id: Uuid,
            before: Option<Uuid>,
            limit: i64,
        ) -> Result<Vec<MessageRow>, StoreError> {
            let rows = sqlx::query(MESSAGES)
                .bind(channel_id)
                .bind(before.unwrap_or(Uuid::max()))
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(message_row).collect()
        }

        async fn open_messages(&self, channel_id: Uuid) -> Result<i64, StoreError> {
            let open: i64 = sqlx::query_scalar(OPEN_MESSAGES)
                .bind(channel_id)
                .fetch_one(self.writer())
                .await?;
            Ok(open)
        }

        async fn link_speaker(
            &self,
            channel_id: Uuid,
            user_id: &str,
            member_id: Uuid,
        ) -> Result<(), StoreError> {
            sqlx::query(LINK_SPEAKER)
                .bind(channel_id)
                .bind(user_id)
                .bind(member_id)
                .bind(now_ms())
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn unlink_speaker(
            &self,
            channel_id: Uuid,
            user_id: &str,
        ) -> Result<bool, StoreError> {
            let done = sqlx::query(UNLINK_SPEAKER)
                .bind(channel_id)
                .bind(user_id)
                .execute(self.writer())
                .await?;
            Ok(done.rows_affected() > 0)
        }

        async fn speaker_member(
            &self,
            channel_id: Uuid,
            user_id: &str,
        ) -> Result<Option<Uuid>, StoreError> {
            Ok(sqlx::query_scalar(SPEAKER_MEMBER)
                .bind(channel_id)
                .bind(user_id)
                .fetch_optional(self.writer())
                .await?)
        }

        async fn set_answering(
            &self,
            id: Uuid,
            chat: ChatId,
            turn: ExecutionId,
        ) -> Result<(), StoreError> {
            sqlx::query(SET_ANSWERING)
                .bind(id)
                .bind(chat.as_uuid())
                .bind(turn.as_uuid())
                .bind(now_ms())
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn set_reply(&self, id: Uuid, reply: SealedBlob) -> Result<(), StoreError> {
            let mut tx = self.writer().begin().await?;
            let now = now_ms();
            sqlx::query(SET_REPLY_INSERT_SEALED_RECORDS)
                .bind(reply.id)
                .bind(&reply.key_id)
                .bind(&reply.nonce)
                .bind(&reply.ciphertext)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            sqlx::query(SET_REPLY_UPDATE_CHANNEL_MESSAGES)
                .bind(id)
                .bind(reply.id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(())
        }
    }
}
