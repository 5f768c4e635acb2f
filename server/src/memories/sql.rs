//! Memories on SQL, written once for SQLite and PostgreSQL.
//!
//! Reads are one statement each: the rights filter (owner, the evidence's Chat) and the tag and
//! status filters are its conditions, so what a reader sees and the content it opens come from
//! one consistent read (a statement's snapshot on PostgreSQL, a read transaction on SQLite) and
//! need no lock of their own. Writes take the Bot's memory lock alone first (an upsert of its
//! `memory_locks` row: a row lock held to the commit on PostgreSQL; SQLite has one writer).

use async_trait::async_trait;
use const_format::concatcp;
use openbot_schema::BotId;
use sqlx::Row as _;
use uuid::Uuid;

use super::store::{
    BotMemory, MemoryOp, MemoryQuery, MemoryRow, MemoryStore, Reader, SealedContent,
};
use crate::sealed::SealedValue;
use crate::store::{StoreError, both_backends, now_ms};

/// The memories a reader may read, as conditions on `memories m`: `$1` the organization, `$2`
/// the Bot, `$3` the member. A memory is shared or the member's own, and its evidence Chat (if
/// any) is one of the member's Chats that is not deleted.
macro_rules! visible {
    () => {
        "m.organization_id = $1 AND m.bot_id = $2 \
         AND (m.owner_member_id IS NULL OR m.owner_member_id = $3) \
         AND (m.evidence_chat_id IS NULL OR EXISTS (SELECT 1 FROM chats c \
             WHERE c.id = m.evidence_chat_id AND c.member_id = $3 AND c.deleted_at IS NULL))"
    };
}

/// The memory `$1` if the reader (`$2` organization, `$3` Bot, `$4` member, `$5` may change
/// shared memories) may change it: its own private memory, or a shared one with `$5`, and its
/// evidence readable by the member.
macro_rules! changeable {
    () => {
        "id = $1 AND organization_id = $2 AND bot_id = $3 \
         AND (owner_member_id = $4 OR (owner_member_id IS NULL AND $5)) \
         AND (evidence_chat_id IS NULL OR EXISTS (SELECT 1 FROM chats c \
             WHERE c.id = memories.evidence_chat_id AND c.member_id = $4 AND c.deleted_at IS NULL))"
    };
}

macro_rules! columns {
    () => {
        "m.id, m.bot_id, m.owner_member_id, m.status, m.tags, m.evidence_chat_id, \
         m.evidence_execution_id, m.evidence_message, m.key_id, m.sealed, m.embedding_key_id, \
         m.embedding, m.embedding_model, m.digest_key_id, m.digest, m.created_at, m.updated_at"
    };
}

fn tags_json(tags: &[String]) -> Result<String, StoreError> {
    serde_json::to_string(tags).map_err(|e| StoreError::Invalid(e.to_string()))
}

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const PUT_TAGS_DELETE_MEMORY_TAGS: &str = "DELETE FROM memory_tags WHERE memory_id = $1";
    const PUT_TAGS_INSERT_MEMORY_TAGS: &str =
        "INSERT INTO memory_tags (memory_id, tag) VALUES ($1, $2) ON CONFLICT DO NOTHING";
    const RUN_OPS_INSERT_MEMORY_LOCKS: &str = "INSERT INTO memory_locks (bot_id, generation) VALUES ($1, 1) \
         ON CONFLICT (bot_id) DO UPDATE SET generation = memory_locks.generation + 1";
    const RUN_OPS_INSERT_MEMORY_CURSORS: &str = "INSERT INTO memory_cursors (chat_id, bot_id, learned_through, updated_at) \
                     VALUES ($1, $2, 0, $3) ON CONFLICT (chat_id) DO NOTHING";
    const RUN_OPS_UPDATE_MEMORY_CURSORS: &str = "UPDATE memory_cursors SET learned_through = $2, updated_at = $4 \
                     WHERE chat_id = $1 AND learned_through = $3 AND $2 > $3";
    const RUN_OPS_INSERT_MEMORIES: &str = "INSERT INTO memories (id, organization_id, bot_id, owner_member_id, status, tags, \
                     evidence_chat_id, evidence_execution_id, evidence_message, key_id, sealed, \
                     embedding_key_id, embedding, embedding_model, digest_key_id, digest, \
                     created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $16, $17, $15, $15) \
                     ON CONFLICT (id) DO NOTHING";
    const RUN_OPS_TOUCH: &str =
        concat!("UPDATE memories SET updated_at = $6 WHERE ", changeable!());
    const RUN_OPS_SET_STATUS: &str = "UPDATE memories SET status = $2 WHERE id = $1";
    const RUN_OPS_SET_TAGS: &str = "UPDATE memories SET tags = $2 WHERE id = $1";
    const RUN_OPS_SET_CONTENT: &str = "UPDATE memories SET key_id = $2, sealed = $3, embedding_key_id = $4, \
                             embedding = $5, embedding_model = $6, digest_key_id = $7, digest = $8 \
                             WHERE id = $1";
    const RUN_OPS_DELETE_MEMORIES: &str = concat!("DELETE FROM memories WHERE ", changeable!());
    const RUN_OPS_DELETE_MEMORY_TAGS: &str = "DELETE FROM memory_tags WHERE memory_id = $1";
    const MEMORY: &str = concat!(
        "SELECT ",
        columns!(),
        " FROM memories m WHERE ",
        visible!(),
        " AND m.id = $4"
    );
    const BOT_MEMORY: &str =
        "SELECT spec, owner_member_id FROM bots WHERE id = $1 AND deleted_at IS NULL";
    const CURSOR: &str = "SELECT learned_through FROM memory_cursors WHERE chat_id = $1";
    const LOCK_GENERATION: &str = "SELECT generation FROM memory_locks WHERE bot_id = $1";
    const SETTINGS: &str =
        "SELECT embeddings_model, helper_model FROM memory_settings WHERE organization_id = $1";
    const PUT_SETTINGS: &str = "INSERT INTO memory_settings (organization_id, embeddings_model, helper_model, updated_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (organization_id) DO UPDATE SET \
             embeddings_model = EXCLUDED.embeddings_model, helper_model = EXCLUDED.helper_model, \
             updated_at = EXCLUDED.updated_at";

    fn memory_row(row: &Row) -> Result<MemoryRow, StoreError> {
        let tags: String = row.try_get("tags")?;
        let embedding_key: Option<String> = row.try_get("embedding_key_id")?;
        let embedding: Option<Vec<u8>> = row.try_get("embedding")?;
        let embedding_model: Option<String> = row.try_get("embedding_model")?;
        let digest_key: Option<String> = row.try_get("digest_key_id")?;
        let digest: Option<Vec<u8>> = row.try_get("digest")?;
        let bot: Uuid = row.try_get("bot_id")?;
        Ok(MemoryRow {
            id: row.try_get("id")?,
            bot_id: BotId::from(bot),
            owner_member_id: row.try_get("owner_member_id")?,
            status: row.try_get("status")?,
            tags: serde_json::from_str(&tags)
                .map_err(|e| StoreError::Invalid(format!("memory tags: {e}")))?,
            evidence_chat_id: row.try_get("evidence_chat_id")?,
            evidence_execution_id: row.try_get("evidence_execution_id")?,
            evidence_message: row.try_get("evidence_message")?,
            content: SealedValue {
                key_id: row.try_get("key_id")?,
                bytes: row.try_get("sealed")?,
            },
            embedding: match (embedding_key, embedding, embedding_model) {
                (Some(key_id), Some(bytes), Some(model)) => {
                    Some((SealedValue { key_id, bytes }, model))
                }
                _ => None,
            },
            digest: match (digest_key, digest) {
                (Some(key_id), Some(bytes)) => Some(SealedValue { key_id, bytes }),
                _ => None,
            },
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
        })
    }

    async fn put_tags(
        tx: &mut sqlx::Transaction<'_, Db>,
        id: Uuid,
        tags: &[String],
    ) -> Result<(), StoreError> {
        sqlx::query(PUT_TAGS_DELETE_MEMORY_TAGS)
            .bind(id)
            .execute(&mut **tx)
            .await?;
        for tag in tags {
            sqlx::query(PUT_TAGS_INSERT_MEMORY_TAGS)
                .bind(id)
                .bind(tag)
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    /// Applies memory changes in a transaction of this database, the Bot's memory lock first.
    #[allow(clippy::too_many_lines)] // one arm per operation; split with the backend contract (issue 33)
    pub(crate) async fn run_ops(
        tx: &mut sqlx::Transaction<'_, Db>,
        reader: &Reader,
        ops: &[MemoryOp],
    ) -> Result<Vec<u64>, StoreError> {
        // The Bot's memory lock, alone: every change of this Bot's memories waits here.
        sqlx::query(RUN_OPS_INSERT_MEMORY_LOCKS)
            .bind(reader.bot_id.as_uuid())
            .execute(&mut **tx)
            .await?;
        let now = now_ms();
        let mut out = Vec::with_capacity(ops.len());
        let mut stale = false;
        for op in ops {
            if stale {
                out.push(0);
                continue;
            }
            let changed = match op {
                MemoryOp::Cursor { chat_id, from, to } => {
                    sqlx::query(RUN_OPS_INSERT_MEMORY_CURSORS)
                        .bind(chat_id)
                        .bind(reader.bot_id.as_uuid())
                        .bind(now)
                        .execute(&mut **tx)
                        .await?;
                    // Compare-and-set: only from where the learner read it, only forward.
                    let moved = sqlx::query(RUN_OPS_UPDATE_MEMORY_CURSORS)
                        .bind(chat_id)
                        .bind(to)
                        .bind(from)
                        .bind(now)
                        .execute(&mut **tx)
                        .await?
                        .rows_affected();
                    stale = moved == 0;
                    moved
                }
                // Another member's private memory, or a shared one without the right, is never
                // written, whichever path built the row.
                MemoryOp::Insert(row)
                    if row
                        .owner_member_id
                        .map_or(!reader.may_change_shared, |owner| owner != reader.member_id) =>
                {
                    0
                }
                MemoryOp::Insert(row) => {
                    let (embedding_key, embedding, model) = match &row.embedding {
                        Some((value, model)) => (
                            Some(value.key_id.clone()),
                            Some(value.bytes.clone()),
                            Some(model.clone()),
                        ),
                        None => (None, None, None),
                    };
                    let inserted = sqlx::query(RUN_OPS_INSERT_MEMORIES)
                        .bind(row.id)
                        .bind(reader.organization_id)
                        .bind(reader.bot_id.as_uuid())
                        .bind(row.owner_member_id)
                        .bind(&row.status)
                        .bind(tags_json(&row.tags)?)
                        .bind(row.evidence_chat_id)
                        .bind(row.evidence_execution_id)
                        .bind(row.evidence_message)
                        .bind(&row.content.key_id)
                        .bind(&row.content.bytes)
                        .bind(embedding_key)
                        .bind(embedding)
                        .bind(model)
                        .bind(now)
                        .bind(row.digest.as_ref().map(|d| &d.key_id))
                        .bind(row.digest.as_ref().map(|d| &d.bytes))
                        .execute(&mut **tx)
                        .await?
                        .rows_affected();
                    if inserted == 1 {
                        put_tags(tx, row.id, &row.tags).await?;
                    }
                    inserted
                }
                MemoryOp::Update {
                    id,
                    content,
                    tags,
                    status,
                } => {
                    let allowed = sqlx::query(RUN_OPS_TOUCH)
                        .bind(id)
                        .bind(reader.organization_id)
                        .bind(reader.bot_id.as_uuid())
                        .bind(reader.member_id)
                        .bind(reader.may_change_shared)
                        .bind(now)
                        .execute(&mut **tx)
                        .await?
                        .rows_affected();
                    if allowed == 1 {
                        if let Some(status) = status {
                            sqlx::query(RUN_OPS_SET_STATUS)
                                .bind(id)
                                .bind(status)
                                .execute(&mut **tx)
                                .await?;
                        }
                        if let Some(tags) = tags {
                            sqlx::query(RUN_OPS_SET_TAGS)
                                .bind(id)
                                .bind(tags_json(tags)?)
                                .execute(&mut **tx)
                                .await?;
                            put_tags(tx, *id, tags).await?;
                        }
                        // Only a content change writes the content's columns.
                        if let Some((sealed, embedding)) = content {
                            let SealedContent {
                                content: sealed,
                                digest,
                            } = sealed;
                            let (embedding_key, embedding, model) = match embedding {
                                Some((value, model)) => (
                                    Some(value.key_id.clone()),
                                    Some(value.bytes.clone()),
                                    Some(model.clone()),
                                ),
                                None => (None, None, None),
                            };
                            sqlx::query(RUN_OPS_SET_CONTENT)
                                .bind(id)
                                .bind(&sealed.key_id)
                                .bind(&sealed.bytes)
                                .bind(embedding_key)
                                .bind(embedding)
                                .bind(model)
                                .bind(&digest.key_id)
                                .bind(&digest.bytes)
                                .execute(&mut **tx)
                                .await?;
                        }
                    }
                    allowed
                }
                MemoryOp::Delete { id } => {
                    let deleted = sqlx::query(RUN_OPS_DELETE_MEMORIES)
                        .bind(id)
                        .bind(reader.organization_id)
                        .bind(reader.bot_id.as_uuid())
                        .bind(reader.member_id)
                        .bind(reader.may_change_shared)
                        .execute(&mut **tx)
                        .await?
                        .rows_affected();
                    if deleted == 1 {
                        sqlx::query(RUN_OPS_DELETE_MEMORY_TAGS)
                            .bind(id)
                            .execute(&mut **tx)
                            .await?;
                    }
                    deleted
                }
            };
            out.push(changed);
        }
        Ok(out)
    }

    #[async_trait]
    impl MemoryStore for Store {
        async fn memories(
            &self,
            reader: &Reader,
            query: &MemoryQuery,
        ) -> Result<Vec<MemoryRow>, StoreError> {
            macro_rules! filtered {
                () => {
                    concatcp!(
                        "SELECT ",
                        columns!(),
                        " FROM memories m WHERE ",
                        visible!(),
                        " AND (",
                        "$4",
                        Store::TEXT_CAST,
                        " IS NULL OR m.status = $4)",
                        " AND (SELECT COUNT(*) FROM memory_tags t WHERE t.memory_id = m.id AND ",
                        text_in!("t.tag", "$5"),
                        ") = $6",
                        " AND (NOT $7 OR m.owner_member_id = $3)"
                    )
                };
            }
            let sql = if query.newest_first {
                concatcp!(
                    filtered!(),
                    " AND (",
                    "$8",
                    Store::UUID_CAST,
                    " IS NULL OR m.id < $8) ORDER BY m.id DESC LIMIT $9"
                )
            } else {
                concatcp!(
                    filtered!(),
                    " AND (",
                    "$8",
                    Store::UUID_CAST,
                    " IS NULL OR m.id > $8) ORDER BY m.id LIMIT $9"
                )
            };
            let rows = sqlx::query(sql)
                .bind(reader.organization_id)
                .bind(reader.bot_id.as_uuid())
                .bind(reader.member_id)
                .bind(query.status.as_deref())
                .bind(tags_json(&query.tags)?)
                .bind(query.tags.len() as i64)
                .bind(query.own_only)
                .bind(query.after)
                .bind(query.limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(memory_row).collect()
        }

        async fn memory(&self, reader: &Reader, id: Uuid) -> Result<Option<MemoryRow>, StoreError> {
            let row = sqlx::query(MEMORY)
                .bind(reader.organization_id)
                .bind(reader.bot_id.as_uuid())
                .bind(reader.member_id)
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(memory_row).transpose()
        }

        async fn apply(&self, reader: &Reader, ops: &[MemoryOp]) -> Result<Vec<u64>, StoreError> {
            let mut tx = self.writer().begin().await?;
            let changed = run_ops(&mut tx, reader, ops).await?;
            tx.commit().await?;
            Ok(changed)
        }

        async fn bot_memory(&self, bot: BotId) -> Result<Option<BotMemory>, StoreError> {
            let row = sqlx::query(BOT_MEMORY)
                .bind(bot.as_uuid())
                .fetch_optional(self.reader())
                .await?;
            match row {
                Some(row) => {
                    let text: String = row.try_get("spec")?;
                    let spec = crate::bots::parse_spec(&text)?;
                    Ok(Some(BotMemory {
                        on: spec.memory,
                        model: spec.model,
                        owner_member_id: row.try_get("owner_member_id")?,
                    }))
                }
                None => Ok(None),
            }
        }

        async fn cursor(&self, chat_id: Uuid) -> Result<i64, StoreError> {
            let at: Option<i64> = sqlx::query_scalar(CURSOR)
                .bind(chat_id)
                .fetch_optional(self.reader())
                .await?;
            Ok(at.unwrap_or(0))
        }

        async fn lock_generation(&self, bot: BotId) -> Result<i64, StoreError> {
            let at: Option<i64> = sqlx::query_scalar(LOCK_GENERATION)
                .bind(bot.as_uuid())
                .fetch_optional(self.reader())
                .await?;
            Ok(at.unwrap_or(0))
        }

        async fn settings(
            &self,
            organization: Uuid,
        ) -> Result<(Option<String>, Option<String>), StoreError> {
            let row = sqlx::query(SETTINGS)
                .bind(organization)
                .fetch_optional(self.reader())
                .await?;
            match row {
                Some(row) => Ok((
                    row.try_get("embeddings_model")?,
                    row.try_get("helper_model")?,
                )),
                None => Ok((None, None)),
            }
        }

        async fn put_settings(
            &self,
            organization: Uuid,
            embeddings_model: Option<&str>,
            helper_model: Option<&str>,
        ) -> Result<(), StoreError> {
            sqlx::query(PUT_SETTINGS)
                .bind(organization)
                .bind(embeddings_model)
                .bind(helper_model)
                .bind(now_ms())
                .execute(self.writer())
                .await?;
            Ok(())
        }
    }
}

/// Memory changes written in an engine transaction (the learning workflow's end): the same
/// statements as [`MemoryStore::apply`], in the commit that ends the learning execution.
#[derive(Debug)]
pub(crate) struct MemoryWrite {
    pub(crate) reader: Reader,
    pub(crate) ops: Vec<MemoryOp>,
}

impl crate::store::TxWrite for MemoryWrite {
    fn on_sqlite<'a, 'c>(
        &'a self,
        tx: &'a mut sqlx::Transaction<'c, sqlx::Sqlite>,
    ) -> futures::future::BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            on_sqlite::run_ops(tx, &self.reader, &self.ops)
                .await
                .map(|_| ())
        })
    }

    fn on_postgres<'a, 'c>(
        &'a self,
        tx: &'a mut sqlx::Transaction<'c, sqlx::Postgres>,
    ) -> futures::future::BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            on_postgres::run_ops(tx, &self.reader, &self.ops)
                .await
                .map(|_| ())
        })
    }
}
