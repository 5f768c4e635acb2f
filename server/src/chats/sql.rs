//! The Chat store on SQL, written once for SQLite and PostgreSQL.

use async_trait::async_trait;
use const_format::concatcp;
use openbot_schema::{BotId, ChatId};
use sqlx::Row as _;
use uuid::Uuid;

use super::store::{ChatRow, ChatStore};
use crate::paging::FIRST_ID;
use crate::store::{StoreError, bot_limit_json, both_backends, now_ms};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const CREATE_CHAT_INSERT_CHATS: &str = "INSERT INTO chats (id, bot_id, member_id, created_at) VALUES ($1, $2, $3, $4) \
             RETURNING id, bot_id, member_id, title, revision, created_at, plan_mode";
    const CREATE_CHAT_INSERT_ADMISSION_GATES: &str = "INSERT INTO admission_gates (id) VALUES ($1)";
    const CHAT_OF: &str = concat!(
        "SELECT id, bot_id, member_id, title, revision, created_at, plan_mode FROM chats \
             WHERE id = $1 AND member_id = $2 AND deleted_at IS NULL AND ",
        in_bot_limit!("bot_id", "$3")
    );
    const CHATS_OF: &str = concatcp!(
        "SELECT id, bot_id, member_id, title, revision, created_at, plan_mode FROM chats \
             WHERE member_id = $1 AND deleted_at IS NULL AND ",
        in_bot_limit!("bot_id", "$2"),
        " AND (",
        "$3",
        Store::UUID_CAST,
        " IS NULL OR bot_id = $3) AND id > $4 ORDER BY id LIMIT $5"
    );
    const RENAME_CHAT: &str = "UPDATE chats SET title = $3, revision = revision + 1 WHERE id = $1 AND revision = $2 AND deleted_at IS NULL \
             RETURNING id, bot_id, member_id, title, revision, created_at, plan_mode";
    const DELETE_CHAT_UPDATE_ADMISSION_GATES: &str =
        "UPDATE admission_gates SET closed_at = COALESCE(closed_at, $2) WHERE id = $1";
    const DELETE_CHAT_UPDATE_CHATS: &str =
        "UPDATE chats SET deleted_at = COALESCE(deleted_at, $2) WHERE id = $1";
    const SET_PLAN_MODE: &str = "UPDATE chats SET plan_mode = $2 WHERE id = $1 AND deleted_at IS NULL \
             RETURNING id, bot_id, member_id, title, revision, created_at, plan_mode";
    const PLAN_MODE_ON: &str = "SELECT plan_mode FROM chats WHERE id = $1 AND deleted_at IS NULL";

    fn chat_row(row: &Row) -> Result<ChatRow, StoreError> {
        Ok(ChatRow {
            id: ChatId::from(row.try_get::<Uuid, _>("id")?),
            bot_id: BotId::from(row.try_get::<Uuid, _>("bot_id")?),
            member_id: row.try_get("member_id")?,
            title: row.try_get("title")?,
            revision: row.try_get("revision")?,
            created_at: row.try_get("created_at")?,
            plan_mode: row.try_get("plan_mode")?,
        })
    }

    #[async_trait]
    impl ChatStore for Store {
        async fn create_chat(
            &self,
            member_id: Uuid,
            bot_id: BotId,
            id: ChatId,
        ) -> Result<ChatRow, StoreError> {
            let mut tx = self.writer().begin().await?;
            let row = sqlx::query(CREATE_CHAT_INSERT_CHATS)
                .bind(id.as_uuid())
                .bind(bot_id.as_uuid())
                .bind(member_id)
                .bind(now_ms())
                .fetch_one(&mut *tx)
                .await?;
            sqlx::query(CREATE_CHAT_INSERT_ADMISSION_GATES)
                .bind(id.as_uuid())
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            chat_row(&row)
        }

        async fn chat_of(
            &self,
            member_id: Uuid,
            id: ChatId,
            bot_ids: Option<&[BotId]>,
        ) -> Result<Option<ChatRow>, StoreError> {
            let row = sqlx::query(CHAT_OF)
                .bind(id.as_uuid())
                .bind(member_id)
                .bind(bot_limit_json(bot_ids)?)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(chat_row).transpose()
        }

        async fn chats_of(
            &self,
            member_id: Uuid,
            bot_ids: Option<&[BotId]>,
            bot: Option<BotId>,
            after: Option<ChatId>,
            limit: i64,
        ) -> Result<Vec<ChatRow>, StoreError> {
            let rows = sqlx::query(CHATS_OF)
                .bind(member_id)
                .bind(bot_limit_json(bot_ids)?)
                .bind(bot.map(|id| id.as_uuid()))
                .bind(after.map_or(FIRST_ID, |id| id.as_uuid()))
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(chat_row).collect()
        }

        async fn rename_chat(
            &self,
            id: ChatId,
            revision: i64,
            title: &str,
        ) -> Result<Option<ChatRow>, StoreError> {
            let row = sqlx::query(RENAME_CHAT)
                .bind(id.as_uuid())
                .bind(revision)
                .bind(title)
                .fetch_optional(self.writer())
                .await?;
            row.as_ref().map(chat_row).transpose()
        }

        async fn delete_chat(&self, id: ChatId) -> Result<(), StoreError> {
            let mut tx = self.writer().begin().await?;
            let now = now_ms();
            sqlx::query(DELETE_CHAT_UPDATE_ADMISSION_GATES)
                .bind(id.as_uuid())
                .bind(now)
                .execute(&mut *tx)
                .await?;
            sqlx::query(DELETE_CHAT_UPDATE_CHATS)
                .bind(id.as_uuid())
                .bind(now)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(())
        }

        async fn set_plan_mode(&self, id: ChatId, on: bool) -> Result<Option<ChatRow>, StoreError> {
            let row = sqlx::query(SET_PLAN_MODE)
                .bind(id.as_uuid())
                .bind(on)
                .fetch_optional(self.writer())
                .await?;
            row.as_ref().map(chat_row).transpose()
        }

        async fn plan_mode_on(&self, id: ChatId) -> Result<bool, StoreError> {
            let on: Option<bool> = sqlx::query_scalar(PLAN_MODE_ON)
                .bind(id.as_uuid())
                .fetch_optional(self.reader())
                .await?;
            Ok(on.unwrap_or(false))
        }
    }
}
