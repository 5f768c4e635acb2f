//! The Bot store on SQL, written once for SQLite and PostgreSQL.

use async_trait::async_trait;
use openbot_schema::{BotId, BotSpec, ChatId};
use sqlx::Row as _;
use uuid::Uuid;

use super::store::{BotRow, BotStore, bot_limit, parse_spec, spec_json};
use crate::identity::Caller;
use crate::paging::FIRST_ID;
use crate::store::{StoreError, both_backends, now_ms};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    fn bot_row(row: &Row) -> Result<BotRow, StoreError> {
        Ok(BotRow {
            id: BotId::from(row.try_get::<Uuid, _>("id")?),
            organization_id: row.try_get("organization_id")?,
            owner_member_id: row.try_get("owner_member_id")?,
            spec: parse_spec(&row.try_get::<String, _>("spec")?)?,
            revision: row.try_get("revision")?,
            created_at: row.try_get("created_at")?,
        })
    }

    /// Visible to the caller: its organization, shared or its own, within its token's Bot limit.
    macro_rules! visible {
        () => {
            concat!(
                crate::bots::bot_usable_by!("bots", "$1", "$2"),
                " AND ",
                in_bot_limit!("id", "$3")
            )
        };
    }

    // The statements of this store, by the use that sends them.
    const CREATE_BOT: &str = "INSERT INTO bots (id, organization_id, owner_member_id, shared, spec, revision, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, 1, $6, $6) RETURNING id, organization_id, owner_member_id, spec, revision, created_at";
    const VISIBLE_BOT: &str = concat!(
        "SELECT id, organization_id, owner_member_id, spec, revision, created_at FROM bots WHERE ",
        visible!(),
        " AND id = $4"
    );
    const VISIBLE_BOTS: &str = concat!(
        "SELECT id, organization_id, owner_member_id, spec, revision, created_at FROM bots WHERE ",
        visible!(),
        " AND id > $4 ORDER BY id LIMIT $5"
    );
    const UPDATE_BOT: &str = "UPDATE bots SET spec = $3, shared = $4, revision = revision + 1, updated_at = $5 \
             WHERE id = $1 AND revision = $2 AND deleted_at IS NULL \
             RETURNING id, organization_id, owner_member_id, spec, revision, created_at";
    const LIVE_CHATS: &str =
        "SELECT id FROM chats WHERE bot_id = $1 AND deleted_at IS NULL ORDER BY id";
    const MARK_DELETED: &str =
        "UPDATE bots SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL";

    #[async_trait]
    impl BotStore for Store {
        async fn create_bot(
            &self,
            caller: &Caller,
            id: BotId,
            spec: &BotSpec,
        ) -> Result<BotRow, StoreError> {
            let now = now_ms();
            let row = sqlx::query(CREATE_BOT)
                .bind(id.as_uuid())
                .bind(caller.member.organization_id)
                .bind(caller.member.member_id)
                .bind(spec.shared)
                .bind(spec_json(spec)?)
                .bind(now)
                .fetch_one(self.writer())
                .await?;
            bot_row(&row)
        }

        async fn visible_bot(
            &self,
            caller: &Caller,
            id: BotId,
        ) -> Result<Option<BotRow>, StoreError> {
            let row = sqlx::query(VISIBLE_BOT)
                .bind(caller.member.organization_id)
                .bind(caller.member.member_id)
                .bind(bot_limit(caller))
                .bind(id.as_uuid())
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(bot_row).transpose()
        }

        async fn visible_bots(
            &self,
            caller: &Caller,
            after: Option<BotId>,
            limit: i64,
        ) -> Result<Vec<BotRow>, StoreError> {
            let rows = sqlx::query(VISIBLE_BOTS)
                .bind(caller.member.organization_id)
                .bind(caller.member.member_id)
                .bind(bot_limit(caller))
                .bind(after.map_or(FIRST_ID, |id| id.as_uuid()))
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(bot_row).collect()
        }

        async fn update_bot(
            &self,
            id: BotId,
            revision: i64,
            spec: &BotSpec,
        ) -> Result<Option<BotRow>, StoreError> {
            let row = sqlx::query(UPDATE_BOT)
                .bind(id.as_uuid())
                .bind(revision)
                .bind(spec_json(spec)?)
                .bind(spec.shared)
                .bind(now_ms())
                .fetch_optional(self.writer())
                .await?;
            row.as_ref().map(bot_row).transpose()
        }

        async fn live_chats(&self, id: BotId) -> Result<Vec<ChatId>, StoreError> {
            let ids: Vec<Uuid> = sqlx::query_scalar(LIVE_CHATS)
                .bind(id.as_uuid())
                .fetch_all(self.reader())
                .await?;
            Ok(ids.into_iter().map(ChatId::from).collect())
        }
    }

    /// Marks a Bot deleted, with its memories, in `tx` (see [`MarkBotDeleted`]).
    pub(super) async fn mark_deleted(
        tx: &mut sqlx::Transaction<'_, Db>,
        id: BotId,
    ) -> Result<(), StoreError> {
        sqlx::query(MARK_DELETED)
            .bind(id.as_uuid())
            .bind(now_ms())
            .execute(&mut **tx)
            .await?;
        // A deleted Bot's memories go with it, in the same transaction.
        for sql in [
            "DELETE FROM memory_tags WHERE memory_id IN (SELECT id FROM memories WHERE bot_id = $1)",
            "DELETE FROM memories WHERE bot_id = $1",
            "DELETE FROM memory_cursors WHERE bot_id = $1",
        ] {
            sqlx::query(sql)
                .bind(id.as_uuid())
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }
}

impl crate::store::TxWrite for super::MarkBotDeleted {
    fn on_sqlite<'a, 'c>(
        &'a self,
        tx: &'a mut sqlx::Transaction<'c, sqlx::Sqlite>,
    ) -> futures::future::BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(on_sqlite::mark_deleted(tx, self.bot))
    }

    fn on_postgres<'a, 'c>(
        &'a self,
        tx: &'a mut sqlx::Transaction<'c, sqlx::Postgres>,
    ) -> futures::future::BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(on_postgres::mark_deleted(tx, self.bot))
    }
}
