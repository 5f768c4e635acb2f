//! Child work, written once for SQLite and PostgreSQL: children started by a step, notices,
//! usage of a tree, and requests with their decisions.

use const_format::concatcp;
use openbot_schema::{ExecutionId, Usage};
use sqlx::{Row as _, Transaction};
use uuid::Uuid;

use crate::store::StoreError;
use crate::store::both_backends;
use crate::store::records::*;
use crate::store::sealing::{CLEARED, Place, RowSeal, stored_from_row};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const INSERT_CHILDREN_SELECT_ADMISSION_GATES: &str = concatcp!(
        "SELECT closed_at FROM admission_gates WHERE id = $1",
        Store::FOR_SHARE
    );
    const INSERT_CHILDREN_INSERT_EXECUTIONS: &str = "INSERT INTO executions (id, kind, state, scope, parent_id, chat_id, input_record, last_sequence, attached, created_at, updated_at, wake_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11)";
    const INSERT_CHILDREN_INSERT_REQUESTS: &str = "INSERT INTO requests (id, kind, execution_id, source_execution_id, organization_id, owner_member_id, \
                         chat_id, bot_id, payload, key_id, sealed, state, created_at, expires_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $12, $13, 'pending', $10, $11)";
    const WRITE_NOTICE_OPEN_TURN_OF_CHAT: &str = "SELECT id FROM executions WHERE chat_id = $1 AND NOT input_closed \
                     AND state IN ('queued', 'running', 'waiting', 'outcome_unknown') ORDER BY id LIMIT 1";
    const WRITE_NOTICE_OPEN_TURN: &str = "SELECT id FROM executions WHERE id = $1 AND NOT input_closed \
                     AND state IN ('queued', 'running', 'waiting', 'outcome_unknown')";
    const WRITE_NOTICE_INSERT_CHAT_NOTICES: &str = "INSERT INTO chat_notices (chat_id, after_execution, source_id, content, key_id, sealed, created_at) \
                 SELECT $1, (SELECT id FROM executions WHERE chat_id = $1 ORDER BY id DESC LIMIT 1), $2, $3, $4, $5, $6";
    const ROLL_UP_USAGE: &str = "WITH RECURSIVE ancestors(id) AS ( \
                 SELECT parent_id FROM executions WHERE id = $1 AND parent_id IS NOT NULL \
                 UNION ALL SELECT e.parent_id FROM executions e JOIN ancestors a ON e.id = a.id WHERE e.parent_id IS NOT NULL) \
             UPDATE executions SET input_tokens = input_tokens + $2, output_tokens = output_tokens + $3, \
                 cached_tokens = cached_tokens + $4, \
                 cost_micros = CASE WHEN CAST($5 AS BIGINT) IS NULL THEN cost_micros ELSE COALESCE(cost_micros, 0) + $5 END \
             WHERE id IN (SELECT id FROM ancestors)";
    const OPEN_CHILDREN_OF: &str = "SELECT id FROM executions WHERE parent_id = $1 AND state NOT IN ('completed', 'failed', 'cancelled', 'interrupted') AND (NOT $2 OR attached) ORDER BY id";
    const OPEN_DESCENDANTS_OF: &str = "WITH RECURSIVE tree(id) AS (SELECT id FROM executions WHERE parent_id = $1 \
                 UNION ALL SELECT e.id FROM executions e JOIN tree t ON e.parent_id = t.id) \
             SELECT id FROM executions WHERE id IN (SELECT id FROM tree) AND state NOT IN ('completed', 'failed', 'cancelled', 'interrupted') ORDER BY id";
    const REQUEST_BY_ID: &str = "SELECT * FROM requests WHERE id = $1";
    const REQUESTS_OF: &str = concatcp!(
        "SELECT * FROM requests r WHERE r.organization_id = $1 AND (",
        "$2",
        Store::UUID_CAST,
        " IS NULL OR r.owner_member_id = $2) AND (",
        "$3",
        Store::TEXT_CAST,
        " IS NULL OR r.state = $3) AND (",
        "$4",
        Store::UUID_CAST,
        " IS NULL OR r.id = $4) AND (",
        "$5",
        Store::TEXT_CAST,
        " IS NULL OR EXISTS (SELECT 1 FROM chats c WHERE c.id = r.chat_id AND ",
        bot_in!("c.bot_id", "$5"),
        ")) AND (r.created_at < $6 OR (r.created_at = $6 AND r.id < $7)) \
                 ORDER BY r.created_at DESC, r.id DESC LIMIT $8"
    );
    const DECIDE_SELECT_REQUESTS: &str = concatcp!(
        "SELECT state, expires_at, execution_id FROM requests WHERE id = $1",
        Store::FOR_UPDATE
    );
    const DECIDE_UPDATE_REQUESTS: &str = "UPDATE requests SET state = $2, decided_at = $3, decided_by = $4, reason = $5 WHERE id = $1";
    const DECIDE_INSERT_REQUEST_AUDIT: &str = "INSERT INTO request_audit (request_id, member_id, decision, reason, at) VALUES ($1, $2, $3, $4, $5)";
    const DECIDE_UPDATE_EXECUTIONS: &str = "UPDATE executions SET wake_at = $2, updated_at = $2 WHERE id = $1 AND state = 'waiting' AND paused_at IS NULL";
    const NOTICES_OF: &str = "SELECT after_execution, source_id, content, key_id, sealed, created_at FROM chat_notices \
             WHERE chat_id = $1 AND ($4 OR (after_execution >= $2 AND after_execution <= $3)) ORDER BY id";
    const PAUSE_OWNED_UPDATE_SIGNALS: &str = "UPDATE signals SET handled_at = $3 WHERE execution_id = $1 AND number = $2 AND handled_at IS NULL";
    const PAUSE_OWNED_UPDATE_EXECUTIONS: &str = "UPDATE executions SET state = 'waiting', wake_at = NULL, owner_node = NULL, lease_expires_at = NULL, \
                 paused_at = COALESCE(paused_at, $3), updated_at = $3 \
             WHERE id = $1 AND generation = $2 AND state NOT IN ('completed', 'failed', 'cancelled', 'interrupted')";
    const RESUME_PAUSED_UPDATE_SIGNALS: &str = "UPDATE signals SET handled_at = $2 WHERE execution_id = $1 AND kind = 'pause' AND handled_at IS NULL";
    const RESUME_PAUSED_UPDATE_EXECUTIONS: &str = "UPDATE executions SET paused_ms = paused_ms + ($2 - paused_at), paused_at = NULL, \
                 wake_at = CASE WHEN state = 'waiting' AND owner_node IS NULL THEN $2 ELSE wake_at END, updated_at = $2 \
             WHERE id = $1 AND paused_at IS NOT NULL";
    const HAS_PAUSED_ANCESTOR: &str = "WITH RECURSIVE ancestors(id) AS ( \
                 SELECT parent_id FROM executions WHERE id = $1 AND parent_id IS NOT NULL \
                 UNION ALL SELECT e.parent_id FROM executions e JOIN ancestors a ON e.id = a.id WHERE e.parent_id IS NOT NULL) \
             SELECT CAST(1 AS BIGINT) FROM executions e WHERE e.id IN (SELECT id FROM ancestors) AND (e.paused_at IS NOT NULL \
                 OR EXISTS (SELECT 1 FROM signals s WHERE s.execution_id = e.id AND s.kind = 'pause' AND s.handled_at IS NULL)) \
             LIMIT 1";

    fn request_from_row(seal: &RowSeal, row: &Row) -> Result<RequestRow, StoreError> {
        let id: Uuid = row.try_get("id")?;
        let execution: Uuid = row.try_get("execution_id")?;
        let source: Uuid = row.try_get("source_execution_id")?;
        let payload = seal.open(Place::Request { id }, stored_from_row!(row, "payload")?)?;
        Ok(RequestRow {
            id,
            kind: row.try_get("kind")?,
            execution_id: execution.into(),
            source_execution_id: source.into(),
            organization_id: row.try_get("organization_id")?,
            owner_member_id: row.try_get("owner_member_id")?,
            chat_id: row.try_get("chat_id")?,
            bot_id: row.try_get("bot_id")?,
            payload,
            state: row.try_get("state")?,
            created_at: row.try_get("created_at")?,
            expires_at: row.try_get("expires_at")?,
            decided_at: row.try_get("decided_at")?,
            decided_by: row.try_get("decided_by")?,
            reason: row.try_get("reason")?,
        })
    }

    impl Store {
        /// Starts the children of a step of `parent` inside its transaction. A closed admission
        /// gate refuses the whole step.
        pub(crate) async fn insert_children(
            tx: &mut Transaction<'_, Db>,
            seal: &RowSeal,
            parent: ExecutionId,
            children: &[NewChild],
            now: Millis,
        ) -> Result<(), StoreError> {
            for child in children {
                let new = &child.execution;
                if let Some(gate) = new.admission_gate {
                    let closed: Option<Option<i64>> =
                        sqlx::query_scalar(INSERT_CHILDREN_SELECT_ADMISSION_GATES)
                            .bind(gate)
                            .fetch_optional(&mut **tx)
                            .await?;
                    if !matches!(closed, Some(None)) {
                        return Err(StoreError::AdmissionClosed);
                    }
                }
                Self::insert_sealed(tx, Some(new.id), &new.input).await?;
                let state = match child.start {
                    ChildStart::Queued => "queued",
                    ChildStart::Waiting => "waiting",
                };
                sqlx::query(INSERT_CHILDREN_INSERT_EXECUTIONS)
                    .bind(new.id.as_uuid())
                    .bind(&new.kind)
                    .bind(state)
                    .bind(new.scope.to_stored())
                    .bind(parent.as_uuid())
                    .bind(new.chat_id)
                    .bind(new.input.id)
                    .bind(new.events.len() as i64)
                    .bind(child.attached)
                    .bind(now)
                    // A waiting child wakes by itself when its request expires.
                    .bind(child.request.as_ref().map(|r| r.expires_at))
                    .execute(&mut **tx)
                    .await?;
                Self::insert_events(tx, seal, new.id, 1, &new.events).await?;
                if let Some(request) = &child.request {
                    let payload = seal.seal(
                        Place::Request { id: request.id },
                        request.payload.as_bytes(),
                    )?;
                    sqlx::query(INSERT_CHILDREN_INSERT_REQUESTS)
                        .bind(request.id)
                        .bind(&request.kind)
                        .bind(new.id.as_uuid())
                        .bind(parent.as_uuid())
                        .bind(request.organization_id)
                        .bind(request.owner_member_id)
                        .bind(request.chat_id)
                        .bind(request.bot_id)
                        .bind(CLEARED)
                        .bind(now)
                        .bind(request.expires_at)
                        .bind(&payload.key_id)
                        .bind(&payload.bytes)
                        .execute(&mut **tx)
                        .await?;
                }
            }
            Ok(())
        }

        /// Delivers a notice from `source` inside its transaction: as input of the work that still
        /// takes input, else (for a Chat) as history.
        pub(crate) async fn write_notice(
            tx: &mut Transaction<'_, Db>,
            seal: &RowSeal,
            source: ExecutionId,
            notice: &NoticeWrite,
            now: Millis,
        ) -> Result<(), StoreError> {
            let taker: Option<Uuid> = match notice.target {
                NoticeTarget::Chat(chat) => {
                    sqlx::query_scalar(WRITE_NOTICE_OPEN_TURN_OF_CHAT)
                        .bind(chat)
                        .fetch_optional(&mut **tx)
                        .await?
                }
                NoticeTarget::Execution(id) => {
                    sqlx::query_scalar(WRITE_NOTICE_OPEN_TURN)
                        .bind(id.as_uuid())
                        .fetch_optional(&mut **tx)
                        .await?
                }
            };
            if let Some(taker) = taker {
                Self::insert_input(tx, seal, taker, &notice.content, now).await?;
                return Ok(());
            }
            if let NoticeTarget::Chat(chat) = notice.target {
                let content = seal.seal(
                    Place::ChatNotice { chat, source },
                    notice.content.as_bytes(),
                )?;
                sqlx::query(WRITE_NOTICE_INSERT_CHAT_NOTICES)
                    .bind(chat)
                    .bind(source.as_uuid())
                    .bind(CLEARED)
                    .bind(&content.key_id)
                    .bind(&content.bytes)
                    .bind(now)
                    .execute(&mut **tx)
                    .await?;
            }
            Ok(())
        }

        /// Adds `usage` to every ancestor of `id`: a Turn's usage includes its children's.
        pub(crate) async fn roll_up_usage(
            tx: &mut Transaction<'_, Db>,
            id: ExecutionId,
            usage: &Usage,
        ) -> Result<(), StoreError> {
            sqlx::query(ROLL_UP_USAGE)
                .bind(id.as_uuid())
                .bind(usage.input_tokens as i64)
                .bind(usage.output_tokens as i64)
                .bind(usage.cached_input_tokens as i64)
                .bind(usage.cost_micros.map(|c| c as i64))
                .execute(&mut **tx)
                .await?;
            Ok(())
        }

        pub(crate) async fn open_children_of(
            &self,
            id: ExecutionId,
            attached_only: bool,
        ) -> Result<Vec<ExecutionId>, StoreError> {
            let ids: Vec<Uuid> = sqlx::query_scalar(OPEN_CHILDREN_OF)
                .bind(id.as_uuid())
                .bind(attached_only)
                .fetch_all(self.reader())
                .await?;
            Ok(ids.into_iter().map(ExecutionId::from).collect())
        }

        pub(crate) async fn open_descendants_of(
            &self,
            id: ExecutionId,
        ) -> Result<Vec<ExecutionId>, StoreError> {
            let ids: Vec<Uuid> = sqlx::query_scalar(OPEN_DESCENDANTS_OF)
                .bind(id.as_uuid())
                .fetch_all(self.reader())
                .await?;
            Ok(ids.into_iter().map(ExecutionId::from).collect())
        }

        pub(crate) async fn request_by_id(
            &self,
            id: Uuid,
        ) -> Result<Option<RequestRow>, StoreError> {
            let row = sqlx::query(REQUEST_BY_ID)
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref()
                .map(|row| request_from_row(&self.seal, row))
                .transpose()
        }

        /// The requests `access` may see, only `id` or only in `state` when given, newest first:
        /// up to `limit` after `before` (a position of the newest-first order). The Bot limit is
        /// part of the query: a request names the Chat its tree works for, and so its Bot.
        pub(crate) async fn requests_of(
            &self,
            access: &RequestAccess,
            id: Option<Uuid>,
            state: Option<&str>,
            before: Option<crate::paging::CreatedPosition>,
            limit: i64,
        ) -> Result<Vec<RequestRow>, StoreError> {
            let (before_at, before_id) = before.unwrap_or((i64::MAX, crate::paging::LAST_ID));
            let rows = sqlx::query(REQUESTS_OF)
                .bind(access.organization_id)
                .bind(access.member)
                .bind(state)
                .bind(id)
                .bind(bot_limit_json(access.bot_ids.as_deref())?)
                .bind(before_at)
                .bind(before_id)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter()
                .map(|row| request_from_row(&self.seal, row))
                .collect()
        }

        pub(crate) async fn decide(
            &self,
            id: Uuid,
            decision: RequestDecision,
        ) -> Result<RequestRow, StoreError> {
            let mut tx = self.writer().begin().await?;
            // The expiry is checked with the time taken once the lock is held: a request that
            // expires while a decision waits for its lock grants nothing.
            let row = sqlx::query(DECIDE_SELECT_REQUESTS)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(StoreError::RequestNotFound(id))?;
            let now = now_ms();
            let state: String = row.try_get("state")?;
            let expires_at: i64 = row.try_get("expires_at")?;
            let execution: Uuid = row.try_get("execution_id")?;
            if state != "pending" {
                tx.rollback().await?;
                return Err(StoreError::RequestClosed(id));
            }
            let expired = now >= expires_at;
            let closed_as = if expired {
                "expired"
            } else {
                decision.state.as_str()
            };
            sqlx::query(DECIDE_UPDATE_REQUESTS)
                .bind(id)
                .bind(closed_as)
                .bind(now)
                .bind((!expired).then_some(decision.member_id))
                .bind(if expired {
                    None
                } else {
                    decision.reason.clone()
                })
                .execute(&mut *tx)
                .await?;
            if !expired {
                sqlx::query(DECIDE_INSERT_REQUEST_AUDIT)
                    .bind(id)
                    .bind(decision.member_id)
                    .bind(closed_as)
                    .bind(&decision.reason)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                if let Some(notice) = &decision.notice {
                    Self::write_notice(&mut tx, &self.seal, execution.into(), notice, now).await?;
                }
                Self::run_writes(&decision.writes, &mut tx).await?;
            }
            // A paused job stays paused: a decision answers the request, not a pause.
            sqlx::query(DECIDE_UPDATE_EXECUTIONS)
                .bind(execution)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            self.request_by_id(id)
                .await?
                .ok_or(StoreError::RequestNotFound(id))
        }

        /// The Chat's notices, only those after an execution in `between` (both ends included)
        /// when given.
        pub(crate) async fn notices_of(
            &self,
            chat_id: Uuid,
            between: Option<(ExecutionId, ExecutionId)>,
        ) -> Result<Vec<ChatNoticeRow>, StoreError> {
            let (first, last) = between.map_or(
                (crate::paging::FIRST_ID, crate::paging::LAST_ID),
                |(a, b)| (a.as_uuid(), b.as_uuid()),
            );
            // Without a range every notice counts, also one that follows no execution.
            let rows = sqlx::query(NOTICES_OF)
                .bind(chat_id)
                .bind(first)
                .bind(last)
                .bind(between.is_none())
                .fetch_all(self.reader())
                .await?;
            rows.iter()
                .map(|row| {
                    let after: Option<Uuid> = row.try_get("after_execution")?;
                    let source: ExecutionId = row.try_get::<Uuid, _>("source_id")?.into();
                    let stored = stored_from_row!(row, "content")?;
                    let content = self.seal.open(
                        Place::ChatNotice {
                            chat: chat_id,
                            source,
                        },
                        stored,
                    )?;
                    Ok(ChatNoticeRow {
                        after_execution: after.map(ExecutionId::from),
                        source_id: source,
                        content,
                        created_at: row.try_get("created_at")?,
                    })
                })
                .collect()
        }

        pub(crate) async fn pause_owned(
            &self,
            id: ExecutionId,
            generation: i64,
            handled: Vec<i64>,
        ) -> Result<bool, StoreError> {
            let mut tx = self.writer().begin().await?;
            let now = now_ms();
            // A resume that came meanwhile dropped these signals: then there is nothing to pause.
            let mut taken = 0;
            for number in handled {
                taken += sqlx::query(PAUSE_OWNED_UPDATE_SIGNALS)
                    .bind(id.as_uuid())
                    .bind(number)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            }
            if taken == 0 {
                tx.rollback().await?;
                return Ok(false);
            }
            let paused = sqlx::query(PAUSE_OWNED_UPDATE_EXECUTIONS)
                .bind(id.as_uuid())
                .bind(generation)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if paused == 0 {
                let refusal = Self::refusal(&mut tx, id, generation).await;
                tx.rollback().await?;
                return Err(refusal);
            }
            tx.commit().await?;
            Ok(true)
        }

        pub(crate) async fn resume_paused(&self, id: ExecutionId) -> Result<bool, StoreError> {
            let mut tx = self.writer().begin().await?;
            let now = now_ms();
            let dropped = sqlx::query(RESUME_PAUSED_UPDATE_SIGNALS)
                .bind(id.as_uuid())
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            let resumed = sqlx::query(RESUME_PAUSED_UPDATE_EXECUTIONS)
                .bind(id.as_uuid())
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            Ok(dropped + resumed > 0)
        }

        pub(crate) async fn has_paused_ancestor(
            &self,
            id: ExecutionId,
        ) -> Result<bool, StoreError> {
            let paused: Option<i64> = sqlx::query_scalar(HAS_PAUSED_ANCESTOR)
                .bind(id.as_uuid())
                .fetch_optional(self.reader())
                .await?;
            Ok(paused.is_some())
        }
    }
}
