//! Unknown outcomes, written once for SQLite and PostgreSQL: what waits for a decision, and
//! the decisions with their audit.

use const_format::concatcp;
use openbot_core::turn::CallKey;
use openbot_schema::{BotId, ExecutionId};
use sqlx::Row as _;

use crate::store::StoreError;
use crate::store::both_backends;
use crate::store::records::*;
use crate::store::rows::{execution_columns, execution_from_row};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const UNKNOWN_OF: &str = concatcp!(
        "SELECT ",
        execution_columns!(),
        " FROM executions x WHERE scope = $1 AND state = 'outcome_unknown' AND (",
        "$2",
        Store::UUID_CAST,
        " IS NULL OR id > $2) AND (",
        "$4",
        Store::TEXT_CAST,
        " IS NULL OR EXISTS ( \
                 WITH RECURSIVE tree(id, parent_id, chat_id) AS ( \
                     SELECT e.id, e.parent_id, e.chat_id FROM executions e WHERE e.id = x.id \
                     UNION ALL SELECT e.id, e.parent_id, e.chat_id FROM executions e JOIN tree t ON e.id = t.parent_id) \
                 SELECT 1 FROM tree t JOIN chats c ON c.id = t.chat_id WHERE t.parent_id IS NULL AND ",
        bot_in!("c.bot_id", "$4"),
        ")) ORDER BY id LIMIT $3"
    );
    const DECIDE_UNKNOWN_CALL_UPDATE_EXECUTIONS: &str = "UPDATE executions SET state = 'queued', unknown_call = NULL, owner_node = NULL, lease_expires_at = NULL, \
                 wake_at = NULL, last_sequence = last_sequence + $4, updated_at = $3 \
             WHERE id = $1 AND state = 'outcome_unknown' AND unknown_call = $2 \
             RETURNING generation, last_sequence";
    const DECIDE_UNKNOWN_CALL_SELECT_EXECUTIONS: &str = "SELECT 1 FROM executions WHERE id = $1";
    const DECIDE_UNKNOWN_CALL_INSERT_SIGNALS: &str = "INSERT INTO signals (execution_id, number, kind, payload, created_at) \
                     SELECT $1, COALESCE(MAX(number), 0) + 1, $2, $3, $4 FROM signals WHERE execution_id = $1";
    const DECIDE_UNKNOWN_CALL_INSERT_OUTCOME_DECISIONS: &str = "INSERT INTO outcome_decisions (id, execution_id, call_key, decision, member_id, token_id, session_id, reason, result_record, decided_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";

    impl Store {
        pub(crate) async fn unknown_of(
            &self,
            scope: &Scope,
            bot_ids: Option<&[BotId]>,
            after: Option<ExecutionId>,
            limit: i64,
        ) -> Result<Vec<ExecutionRow>, StoreError> {
            // The Bot limit is part of the query, as for one execution: the Bot of the Chat at
            // the root of each listed execution's tree.
            let rows = sqlx::query(UNKNOWN_OF)
                .bind(scope.to_stored())
                .bind(after.map(|id| id.as_uuid()))
                .bind(limit)
                .bind(crate::store::bot_limit_json(bot_ids)?)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(|row| execution_from_row!(row)).collect()
        }

        pub(crate) async fn decide_unknown_call(
            &self,
            id: ExecutionId,
            decision: UnknownDecision,
        ) -> Result<OutcomeDecisionRow, StoreError> {
            // The update below takes the execution's row lock on PostgreSQL (on SQLite the one
            // writer connection orders this transaction after every other write): a concurrent
            // decision waits for it and then finds the execution no longer waiting for this call.
            let mut tx = self.writer().begin().await?;
            let now = now_ms();
            let key = decision.key;
            let events: &[openbot_schema::EventKind] = match &decision.resolution {
                Resolution::Applied { events, .. } => events,
                _ => &[],
            };
            let queued = sqlx::query(DECIDE_UNKNOWN_CALL_UPDATE_EXECUTIONS)
                .bind(id.as_uuid())
                .bind(call_key_name(&key))
                .bind(now)
                .bind(events.len() as i64)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(queued) = queued else {
                let exists = sqlx::query(DECIDE_UNKNOWN_CALL_SELECT_EXECUTIONS)
                    .bind(id.as_uuid())
                    .fetch_optional(&mut *tx)
                    .await?
                    .is_some();
                tx.rollback().await?;
                return Err(if exists {
                    StoreError::NotWaiting(id)
                } else {
                    StoreError::NotFound(id)
                });
            };
            let generation: i64 = queued.try_get("generation")?;
            let last: i64 = queued.try_get("last_sequence")?;
            let mut result_record = None;
            match &decision.resolution {
                Resolution::Applied { result, events } => {
                    result_record = Some(result.id);
                    let call = CallWrite {
                        key,
                        phase: CallPhase::Done,
                        idempotency_key: key.idempotency_key(id),
                        result: Some(result.clone()),
                        usage: None,
                    };
                    Self::write_call(&mut tx, id, generation, &call, false).await?;
                    Self::insert_events(
                        &mut tx,
                        &self.seal,
                        id,
                        last - events.len() as i64 + 1,
                        events,
                    )
                    .await?;
                }
                Resolution::NotApplied => {
                    let next = CallKey {
                        attempt: key.attempt + 1,
                        ..key
                    };
                    let call = CallWrite {
                        key: next,
                        phase: CallPhase::Intent,
                        idempotency_key: next.idempotency_key(id),
                        result: None,
                        usage: None,
                    };
                    Self::write_call(&mut tx, id, generation, &call, false).await?;
                }
                Resolution::GiveUp { payload } => {
                    sqlx::query(DECIDE_UNKNOWN_CALL_INSERT_SIGNALS)
                        .bind(id.as_uuid())
                        .bind(GIVE_UP)
                        .bind(payload)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                }
            }
            let row = OutcomeDecisionRow {
                id: decision.id,
                execution_id: id,
                key,
                decision: decision.resolution.name().to_string(),
                member_id: decision.member_id,
                token_id: decision.token_id,
                session_id: decision.session_id,
                reason: decision.reason,
                result_record,
                decided_at: now,
            };
            sqlx::query(DECIDE_UNKNOWN_CALL_INSERT_OUTCOME_DECISIONS)
                .bind(row.id)
                .bind(id.as_uuid())
                .bind(call_key_name(&key))
                .bind(&row.decision)
                .bind(row.member_id)
                .bind(row.token_id)
                .bind(row.session_id)
                .bind(&row.reason)
                .bind(row.result_record)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(row)
        }
    }
}
