//! The engine's rows, written once for SQLite and PostgreSQL: executions, command keys, the
//! call log, events, Turn input, signals, the outbox, sealed and error records. What differs
//! between the databases is in `store/dialect.rs` (SQL words) and in each backend's own file
//! (batched writes, connection setup).

use async_trait::async_trait;
use const_format::concatcp;
use openbot_core::turn::{CallKey, CallSlot};
use openbot_schema::{BotId, Event, ExecutionId};
use sqlx::{Row as _, Transaction};
use uuid::Uuid;

use super::steered_events;
use crate::store::both_backends;
use crate::store::migrate::Backend;
use crate::store::records::*;
use crate::store::rows::{
    call_columns, call_from_row, event_from_row, execution_columns, execution_from_row,
};
use crate::store::sealing::{CLEARED, Place, RowSeal, SEAL_BATCH, stored_from_row};
use crate::store::statements::{bind_commit_update, call_upsert, commit_update};
use crate::store::tips::Tip;
use crate::store::{
    CallStore, ChatQueueStore, EventStore, ExecutionStore, OutboxStore, RecordStore, RequestStore,
    SignalStore, Store as StoreTrait, StoreError, TxWrites,
};

/// Marks an execution that got signal `$2` at `$3`. On owned work a cancel or wake also marks
/// `wake_at` (unused while owned, reset by the claim): a wait its owner saves at the same
/// moment sees the mark on the row it locks, where a PostgreSQL statement's snapshot may not
/// yet show the new signal row. A cancel moves it to `cancelling`.
const MARK_SIGNALLED: &str = "UPDATE executions SET \
     wake_at = CASE WHEN state IN ('waiting', 'outcome_unknown') AND owner_node IS NULL THEN $3 \
         WHEN owner_node IS NOT NULL AND $2 IN ('cancel', 'wake') THEN $3 ELSE wake_at END, \
     state = CASE WHEN $2 = 'cancel' THEN 'cancelling' ELSE state END, updated_at = $3 \
     WHERE id = $1";

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    /// Whether the Chat `$chat` has a Turn before `$id` that has not ended: a Chat's Turns run
    /// one at a time, in order.
    macro_rules! open_turn_before {
        ($chat:literal, $id:literal) => {
            concat!(
                "EXISTS (SELECT 1 FROM executions p WHERE p.chat_id = ",
                $chat,
                " AND p.id < ",
                $id,
                " AND p.state NOT IN ('completed', 'failed', 'cancelled', 'interrupted'))"
            )
        };
    }

    // The statements of this store, by the use that sends them.
    const CLAIM_ROWS: &str = concatcp!(
        "UPDATE executions SET owner_node = $3, generation = generation + 1, lease_expires_at = $1 + $4, \
                 state = CASE WHEN state IN ('queued', 'waiting') THEN 'running' ELSE state END, \
                 wake_at = NULL, updated_at = $1 \
             WHERE id IN ( \
                 SELECT id FROM executions \
                 WHERE state IN ('queued', 'running', 'waiting', 'cancelling') \
                   AND (owner_node IS NULL OR lease_expires_at < $1) \
                   AND (state <> 'waiting' OR (wake_at IS NOT NULL AND wake_at <= $6) OR owner_node IS NOT NULL) \
                   AND (state = 'cancelling' OR chat_id IS NULL OR NOT ",
        open_turn_before!("executions.chat_id", "executions.id"),
        ") \
                   AND ",
        text_in!("kind", "$5"),
        " \
                 ORDER BY created_at LIMIT $2",
        Store::SKIP_LOCKED,
        ") \
             RETURNING ",
        execution_columns!(),
        ", EXISTS (SELECT 1 FROM signals s WHERE s.execution_id = executions.id AND s.handled_at IS NULL) AS signals_pending"
    );
    const INSERT_SEALED: &str = "INSERT INTO sealed_records (id, execution_id, key_id, nonce, ciphertext, created_at) VALUES ($1, $2, $3, $4, $5, $6)";
    const INSERT_INPUT: &str = "INSERT INTO turn_inputs (execution_id, position, content, key_id, sealed, created_at) \
             SELECT $1, COALESCE(MAX(position), 0) + 1, $2, $3, $4, $5 FROM turn_inputs WHERE execution_id = $1 RETURNING CAST(position AS BIGINT) AS position";
    const WRITE_CALL: &str = concat!(
        "INSERT INTO calls (execution_id, step, slot, attempt, status, idempotency_key, result_record, \
                 has_usage, input_tokens, output_tokens, cached_tokens, cost_micros, generation, late, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15)",
        call_upsert!()
    );
    const SEAL_CLEAR_BATCH_SELECT_EVENTS: &str = concatcp!(
        "SELECT execution_id, sequence, payload FROM events WHERE key_id IS NULL LIMIT $1",
        Store::SKIP_LOCKED
    );
    const SEAL_CLEAR_BATCH_UPDATE_EVENTS: &str = "UPDATE events SET payload = $3, key_id = $4, sealed = $5 \
                 WHERE execution_id = $1 AND sequence = $2 AND key_id IS NULL";
    const SEAL_CLEAR_BATCH_SELECT_TURN_INPUTS: &str = concatcp!(
        "SELECT execution_id, CAST(position AS BIGINT) AS position, content FROM turn_inputs WHERE key_id IS NULL LIMIT $1",
        Store::SKIP_LOCKED
    );
    const SEAL_CLEAR_BATCH_UPDATE_TURN_INPUTS: &str = "UPDATE turn_inputs SET content = $3, key_id = $4, sealed = $5 \
                 WHERE execution_id = $1 AND position = $2 AND key_id IS NULL";
    const SEAL_CLEAR_BATCH_SELECT_CHAT_NOTICES: &str = concatcp!(
        "SELECT CAST(id AS BIGINT) AS id, chat_id, source_id, content FROM chat_notices WHERE key_id IS NULL LIMIT $1",
        Store::SKIP_LOCKED
    );
    const SEAL_CLEAR_BATCH_UPDATE_CHAT_NOTICES: &str = "UPDATE chat_notices SET content = $2, key_id = $3, sealed = $4 WHERE id = $1 AND key_id IS NULL";
    const SEAL_CLEAR_BATCH_SELECT_REQUESTS: &str = concatcp!(
        "SELECT id, payload FROM requests WHERE key_id IS NULL LIMIT $1",
        Store::SKIP_LOCKED
    );
    const SEAL_CLEAR_BATCH_UPDATE_REQUESTS: &str = "UPDATE requests SET payload = $2, key_id = $3, sealed = $4 WHERE id = $1 AND key_id IS NULL";
    const WRITE_COMMIT: &str = concat!(commit_update!(), " RETURNING last_sequence, parent_id");
    const COMMIT_REST_SELECT_TURN_INPUTS: &str =
        "SELECT EXISTS (SELECT 1 FROM turn_inputs WHERE execution_id = $1 AND taken_step IS NULL)";
    const COMMIT_REST_INSERT_ERROR_RECORDS: &str = "INSERT INTO error_records (id, execution_id, category, key_id, nonce, ciphertext, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)";
    const COMMIT_REST_INSERT_OUTBOX: &str =
        "INSERT INTO outbox (execution_id, kind, payload, created_at) VALUES ($1, $2, $3, $4)";
    const REFUSAL: &str = "SELECT generation, state FROM executions WHERE id = $1";
    const SUBMIT_CLAIMING_SELECT_ADMISSION_GATES: &str = concatcp!(
        "SELECT closed_at FROM admission_gates WHERE id = $1",
        Store::FOR_UPDATE
    );
    const SUBMIT_CLAIMING_INSERT_EXECUTIONS: &str = concatcp!(
        "INSERT INTO executions (id, kind, state, scope, parent_id, chat_id, input_record, last_sequence, created_at, updated_at, \
                 owner_node, generation, lease_expires_at) \
             SELECT $1, $2, CASE WHEN c.starts THEN 'running' ELSE 'queued' END, $3, $4, $5, $6, $7, $8, $8, \
                 CASE WHEN c.starts THEN ",
        "$9",
        Store::TEXT_CAST,
        " END, CASE WHEN c.starts THEN 1 ELSE 0 END, CASE WHEN c.starts THEN $8 + $10 END \
             FROM (SELECT (",
        "$9",
        Store::TEXT_CAST,
        " IS NOT NULL AND (",
        "$5",
        Store::UUID_CAST,
        " IS NULL OR NOT ",
        open_turn_before!("$5", "$1"),
        ")) AS starts) c \
             RETURNING ",
        execution_columns!()
    );
    const SUBMIT_CLAIMING_INSERT_COMMAND_KEYS: &str = "INSERT INTO command_keys (scope, key, input_digest, execution_id, created_at) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (scope, key) DO NOTHING";
    const SUBMIT_CLAIMING_SELECT_COMMAND_KEYS: &str =
        "SELECT input_digest, execution_id FROM command_keys WHERE scope = $1 AND key = $2";
    const RELEASE: &str = "UPDATE executions SET owner_node = NULL, lease_expires_at = NULL WHERE id = $1 AND generation = $2";
    const SAVE_LATE_RESULT: &str = "UPDATE executions SET state = 'queued', unknown_call = NULL, owner_node = NULL, lease_expires_at = NULL, updated_at = $3 \
             WHERE id = $1 AND state = 'outcome_unknown' AND unknown_call = $2";
    const EXECUTION: &str = concat!(
        "SELECT ",
        execution_columns!(),
        " FROM executions WHERE id = $1"
    );
    const VISIBLE_EXECUTION: &str = concat!(
        "WITH RECURSIVE tree(id, parent_id, chat_id) AS ( \
                 SELECT id, parent_id, chat_id FROM executions WHERE id = $1 \
                 UNION ALL SELECT e.id, e.parent_id, e.chat_id FROM executions e JOIN tree t ON e.id = t.parent_id) \
             SELECT ",
        execution_columns!(),
        " FROM executions WHERE id = $1 AND scope = $2 \
             AND ($3 IS NULL OR EXISTS (SELECT 1 FROM tree t JOIN chats c ON c.id = t.chat_id \
                 WHERE t.parent_id IS NULL AND ",
        bot_in!("c.bot_id", "$3"),
        "))"
    );
    const NEXT_WAKE: &str = "SELECT MIN(t) FROM ( \
                 SELECT MIN(lease_expires_at) AS t FROM executions \
                     WHERE state IN ('queued', 'running', 'waiting', 'cancelling') AND owner_node IS NOT NULL AND owner_node <> $1 \
                 UNION ALL SELECT MIN(wake_at) FROM executions WHERE state = 'waiting' AND owner_node IS NULL \
                 UNION ALL SELECT MIN(updated_at) FROM executions \
                     WHERE state IN ('queued', 'running', 'cancelling') AND owner_node IS NULL \
                     AND (state = 'cancelling' OR chat_id IS NULL OR NOT EXISTS (SELECT 1 FROM executions p WHERE p.chat_id = executions.chat_id AND p.id < executions.id AND p.state NOT IN ('completed', 'failed', 'cancelled', 'interrupted'))) ) AS due";
    const EXECUTION_COUNTS: &str =
        "SELECT kind, state, COUNT(*) FROM executions GROUP BY kind, state ORDER BY kind, state";
    const CANCEL_TREE_SELECT_EXECUTIONS: &str = "SELECT state FROM executions WHERE id = $1";
    const CANCEL_TREE_OPEN_MEMBERS: &str = concatcp!(
        "WITH RECURSIVE tree(id) AS (SELECT id FROM executions WHERE id = $1 \
                 UNION ALL SELECT e.id FROM executions e JOIN tree t ON e.parent_id = t.id) \
             SELECT id FROM executions WHERE id IN (SELECT id FROM tree) AND (id <> $1 OR $2) \
                 AND state NOT IN ('completed', 'failed', 'cancelled', 'interrupted') ORDER BY id",
        Store::FOR_UPDATE
    );
    const CANCEL_TREE_SELECT_SIGNALS: &str = "SELECT MIN(number) FROM signals WHERE execution_id = $1 AND kind = 'cancel' AND handled_at IS NULL";
    const CANCEL_TREE_INSERT_SIGNALS: &str = "INSERT INTO signals (execution_id, number, kind, payload, created_at) \
                         SELECT $1, COALESCE(MAX(number), 0) + 1, 'cancel', '{}', $2 FROM signals WHERE execution_id = $1 RETURNING number";
    const LATEST_CALL: &str = concat!(
        "SELECT ",
        call_columns!(),
        " FROM calls WHERE execution_id = $1 AND step = $2 AND slot = $3 \
             ORDER BY (status = 'done') DESC, attempt DESC LIMIT 1"
    );
    const CALLS: &str = concat!(
        "SELECT ",
        call_columns!(),
        " FROM calls WHERE execution_id = $1 ORDER BY step, slot, attempt"
    );
    const RESOLVE_UNKNOWN_UPDATE_EXECUTIONS: &str = "UPDATE executions SET state = 'queued', unknown_call = NULL, owner_node = NULL, lease_expires_at = NULL, updated_at = $3 \
             WHERE id = $1 AND state = 'outcome_unknown' AND unknown_call = $2";
    const RESOLVE_UNKNOWN_SELECT_EXECUTIONS: &str =
        "SELECT generation FROM executions WHERE id = $1";
    const OTHER_KINDS: &str = concat!(
        "SELECT id, generation, kind FROM executions \
             WHERE state NOT IN ('completed', 'failed', 'cancelled', 'interrupted') AND NOT ",
        text_in!("kind", "$1"),
        " ORDER BY id LIMIT $2"
    );
    const EVENTS: &str = "SELECT sequence, payload, key_id, sealed, at FROM events WHERE execution_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3";
    const EVENTS_TO_END: &str = "SELECT x.state, x.last_sequence, e.sequence, e.payload, e.key_id, e.sealed, e.at \
             FROM executions x LEFT JOIN events e ON e.execution_id = x.id AND e.sequence > $2 \
             WHERE x.id = $1 ORDER BY e.sequence LIMIT $3";
    const ADD_INPUT_SELECT_EXECUTIONS: &str = concatcp!(
        "SELECT NOT input_closed AND state IN ",
        "('queued', 'running', 'waiting', 'cancelling', 'outcome_unknown')",
        " FROM executions WHERE id = $1",
        Store::FOR_UPDATE
    );
    const ADD_INPUT_INSERT_COMMAND_KEYS: &str = "INSERT INTO command_keys (scope, key, input_digest, execution_id, created_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (scope, key) DO NOTHING";
    const COMMAND_KEY: &str =
        "SELECT input_digest, execution_id FROM command_keys WHERE scope = $1 AND key = $2";
    const TAKE_INPUTS_LOCK_OWNER: &str = concatcp!(
        "SELECT 1 FROM executions WHERE id = $1 AND generation = $2",
        Store::FOR_UPDATE
    );
    const TAKE_INPUTS_UPDATE_TURN_INPUTS: &str = "UPDATE turn_inputs SET taken_step = $2 WHERE execution_id = $1 AND taken_step IS NULL \
             AND (SELECT input_step FROM executions WHERE id = $1) < $2 RETURNING content, key_id, sealed";
    const TAKE_INPUTS_MARK_STEP: &str =
        "UPDATE executions SET input_step = $2 WHERE id = $1 AND input_step < $2";
    const TAKE_INPUTS_RESERVE_SEQUENCES: &str = "UPDATE executions SET last_sequence = last_sequence + $2 WHERE id = $1 RETURNING last_sequence";
    const TAKE_INPUTS_SELECT_TURN_INPUTS: &str = "SELECT content, key_id, sealed FROM turn_inputs WHERE execution_id = $1 AND taken_step = $2 ORDER BY position";
    const TAKE_INPUTS_CLOSE_INPUT: &str = "UPDATE executions SET input_closed = TRUE WHERE id = $1";
    const INPUTS_WAITING: &str = "SELECT EXISTS (SELECT 1 FROM turn_inputs WHERE execution_id = $1 \
             AND (taken_step IS NULL OR taken_step = $3)) AS waiting \
             FROM executions WHERE id = $1 AND generation = $2";
    const OPEN_GATE: &str =
        "INSERT INTO admission_gates (id) VALUES ($1) ON CONFLICT (id) DO NOTHING";
    const CHAT_EXECUTIONS: &str = concat!(
        "SELECT ",
        execution_columns!(),
        " FROM executions WHERE chat_id = $1 ORDER BY id"
    );
    const CHAT_OUTPUTS: &str = "SELECT e.id, e.updated_at, e.output_record, s.key_id, s.nonce, s.ciphertext \
             FROM executions e LEFT JOIN sealed_records s ON s.id = e.output_record \
             WHERE e.chat_id = $1 AND e.id < $2 ORDER BY e.id";
    const CHAT_EXECUTIONS_FROM: &str = concat!(
        "SELECT ",
        execution_columns!(),
        " FROM executions WHERE chat_id = $1 AND id >= $2 ORDER BY id LIMIT $3"
    );
    const SIGNAL_SELECT_EXECUTIONS: &str = concatcp!(
        "SELECT state FROM executions WHERE id = $1",
        Store::FOR_UPDATE
    );
    const SIGNAL_INSERT_SIGNALS: &str = "INSERT INTO signals (execution_id, number, kind, payload, created_at) \
             SELECT $1, COALESCE(MAX(number), 0) + 1, $2, $3, $4 FROM signals WHERE execution_id = $1 RETURNING number";
    const PENDING_SIGNALS: &str = "SELECT number, kind, payload FROM signals WHERE execution_id = $1 AND handled_at IS NULL ORDER BY number";
    const CLAIM_OUTBOX: &str = concatcp!(
        "UPDATE outbox SET claimed_until = $1 + $2 WHERE id IN ( \
                 SELECT id FROM outbox WHERE delivered_at IS NULL AND attempts < $4 \
                   AND (claimed_until IS NULL OR claimed_until < $1) \
                 ORDER BY id LIMIT $3",
        Store::SKIP_LOCKED,
        ") RETURNING id, execution_id, kind, payload, attempts"
    );
    const FINISH_OUTBOX: &str = "UPDATE outbox SET claimed_until = CASE WHEN CAST($2 AS TEXT) IS NULL THEN NULL ELSE $4 END, \
                 delivered_at = CASE WHEN CAST($2 AS TEXT) IS NULL THEN $3 ELSE NULL END, \
                 attempts = attempts + CASE WHEN CAST($2 AS TEXT) IS NULL THEN 0 ELSE 1 END, \
                 last_error = COALESCE($2, last_error) \
             WHERE id = $1";
    const OUTBOX_OF: &str = "SELECT id, kind, delivered_at IS NOT NULL AS delivered, attempts, last_error FROM outbox \
             WHERE execution_id = $1 ORDER BY id";
    const SEALED: &str = "SELECT id, key_id, nonce, ciphertext FROM sealed_records WHERE id = $1";
    const ERROR_RECORD: &str =
        "SELECT id, category, key_id, nonce, ciphertext FROM error_records WHERE id = $1";
    const PUT_ERROR_RECORD: &str = "INSERT INTO error_records (id, execution_id, category, key_id, nonce, ciphertext, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)";

    impl Store {
        /// Claims up to `limit` claimable executions of `kinds` for `node` (see `ExecutionStore::claim`);
        /// the rows hold each claimed execution's columns as written (`execution_columns!`) and
        /// whether it has unhandled signals (`signals_pending`).
        /// PostgreSQL locks the candidates with `SKIP LOCKED`, so nodes claim side by side; SQLite
        /// has one writer.
        pub(crate) async fn claim_rows(
            &self,
            node: &str,
            kinds: &[&str],
            lease_ms: i64,
            limit: i64,
            timers_due: Millis,
        ) -> Result<Vec<Row>, StoreError> {
            let kinds = serde_json::to_string(kinds).unwrap_or_default();
            let rows = sqlx::query(CLAIM_ROWS)
                .bind(now_ms())
                .bind(limit)
                .bind(node)
                .bind(lease_ms)
                .bind(kinds)
                .bind(timers_due)
                .fetch_all(&self.pool)
                .await?;
            Ok(rows)
        }

        /// The claim of an execution this store just claimed, its tip remembered for the
        /// owner's commits.
        fn claimed(
            &self,
            execution: ExecutionRow,
            signals_pending: bool,
            input: Option<SealedBlob>,
        ) -> Claim {
            self.remember_tip(
                execution.id,
                Tip {
                    generation: execution.generation,
                    last_sequence: execution.last_sequence,
                    has_parent: execution.parent_id.is_some(),
                },
            );
            Claim {
                id: execution.id,
                kind: execution.kind.clone(),
                generation: execution.generation,
                execution,
                signals_pending,
                input,
            }
        }

        pub(crate) async fn insert_sealed(
            tx: &mut Transaction<'_, Db>,
            execution: Option<ExecutionId>,
            blob: &SealedBlob,
        ) -> Result<(), StoreError> {
            sqlx::query(INSERT_SEALED)
                .bind(blob.id)
                .bind(execution.map(|e| e.as_uuid()))
                .bind(&blob.key_id)
                .bind(&blob.nonce)
                .bind(&blob.ciphertext)
                .bind(now_ms())
                .execute(&mut **tx)
                .await?;
            Ok(())
        }

        /// Adds input for Turn `taker` (steering input or a notice), sealed; returns its position.
        pub(crate) async fn insert_input(
            tx: &mut Transaction<'_, Db>,
            seal: &RowSeal,
            taker: Uuid,
            content: &str,
            now: Millis,
        ) -> Result<i64, StoreError> {
            let sealed = seal.seal(
                Place::TurnInput {
                    execution: taker.into(),
                },
                content.as_bytes(),
            )?;
            Ok(sqlx::query_scalar(INSERT_INPUT)
                .bind(taker)
                .bind(CLEARED)
                .bind(&sealed.key_id)
                .bind(&sealed.bytes)
                .bind(now)
                .fetch_one(&mut **tx)
                .await?)
        }

        /// Opens the content of Turn input rows of execution `id`.
        pub(crate) fn open_inputs(
            &self,
            id: ExecutionId,
            rows: &[Row],
        ) -> Result<Vec<String>, StoreError> {
            rows.iter()
                .map(|row| {
                    let stored = stored_from_row!(row, "content")?;
                    self.seal.open(Place::TurnInput { execution: id }, stored)
                })
                .collect()
        }

        pub(crate) async fn write_call(
            tx: &mut Transaction<'_, Db>,
            id: ExecutionId,
            generation: i64,
            call: &CallWrite,
            late: bool,
        ) -> Result<(), StoreError> {
            if let Some(blob) = &call.result {
                Self::insert_sealed(tx, Some(id), blob).await?;
            }
            let usage = call.usage.unwrap_or_default();
            let now = now_ms();
            sqlx::query(WRITE_CALL)
                .bind(id.as_uuid())
                .bind(call.key.step as i32)
                .bind(slot_name(call.key.slot))
                .bind(call.key.attempt as i32)
                .bind(call.phase.as_str())
                .bind(&call.idempotency_key)
                .bind(call.result.as_ref().map(|b| b.id))
                .bind(call.usage.is_some())
                .bind(usage.input_tokens as i64)
                .bind(usage.output_tokens as i64)
                .bind(usage.cached_input_tokens as i64)
                .bind(usage.cost_micros.map(|c| c as i64))
                .bind(generation)
                .bind(late)
                .bind(now)
                .execute(&mut **tx)
                .await?;
            Ok(())
        }

        /// Seals up to [`SEAL_BATCH`] clear-text rows of each table that holds sealed payloads;
        /// returns how many it sealed. Each update keeps `key_id IS NULL` in its condition, so a
        /// row sealed meanwhile is left alone.
        pub(crate) async fn seal_clear_batch(
            &self,
            tx: &mut Transaction<'_, Db>,
        ) -> Result<u64, StoreError> {
            let mut sealed = 0;
            let rows = sqlx::query(SEAL_CLEAR_BATCH_SELECT_EVENTS)
                .bind(SEAL_BATCH)
                .fetch_all(&mut **tx)
                .await?;
            for row in &rows {
                let execution: Uuid = row.try_get("execution_id")?;
                let sequence: i64 = row.try_get("sequence")?;
                let payload: String = row.try_get("payload")?;
                let place = Place::Event {
                    execution: execution.into(),
                    sequence,
                };
                let value = self.seal.seal(place, payload.as_bytes())?;
                sealed += sqlx::query(SEAL_CLEAR_BATCH_UPDATE_EVENTS)
                    .bind(execution)
                    .bind(sequence)
                    .bind(CLEARED)
                    .bind(&value.key_id)
                    .bind(&value.bytes)
                    .execute(&mut **tx)
                    .await?
                    .rows_affected();
            }
            let rows = sqlx::query(SEAL_CLEAR_BATCH_SELECT_TURN_INPUTS)
                .bind(SEAL_BATCH)
                .fetch_all(&mut **tx)
                .await?;
            for row in &rows {
                let execution: Uuid = row.try_get("execution_id")?;
                let position: i64 = row.try_get("position")?;
                let content: String = row.try_get("content")?;
                let place = Place::TurnInput {
                    execution: execution.into(),
                };
                let value = self.seal.seal(place, content.as_bytes())?;
                sealed += sqlx::query(SEAL_CLEAR_BATCH_UPDATE_TURN_INPUTS)
                    .bind(execution)
                    .bind(position)
                    .bind(CLEARED)
                    .bind(&value.key_id)
                    .bind(&value.bytes)
                    .execute(&mut **tx)
                    .await?
                    .rows_affected();
            }
            let rows = sqlx::query(SEAL_CLEAR_BATCH_SELECT_CHAT_NOTICES)
                .bind(SEAL_BATCH)
                .fetch_all(&mut **tx)
                .await?;
            for row in &rows {
                let id: i64 = row.try_get("id")?;
                let source: Uuid = row.try_get("source_id")?;
                let content: String = row.try_get("content")?;
                let place = Place::ChatNotice {
                    chat: row.try_get("chat_id")?,
                    source: source.into(),
                };
                let value = self.seal.seal(place, content.as_bytes())?;
                sealed += sqlx::query(SEAL_CLEAR_BATCH_UPDATE_CHAT_NOTICES)
                    .bind(id)
                    .bind(CLEARED)
                    .bind(&value.key_id)
                    .bind(&value.bytes)
                    .execute(&mut **tx)
                    .await?
                    .rows_affected();
            }
            let rows = sqlx::query(SEAL_CLEAR_BATCH_SELECT_REQUESTS)
                .bind(SEAL_BATCH)
                .fetch_all(&mut **tx)
                .await?;
            for row in &rows {
                let id: Uuid = row.try_get("id")?;
                let payload: String = row.try_get("payload")?;
                let value = self.seal.seal(Place::Request { id }, payload.as_bytes())?;
                sealed += sqlx::query(SEAL_CLEAR_BATCH_UPDATE_REQUESTS)
                    .bind(id)
                    .bind(CLEARED)
                    .bind(&value.key_id)
                    .bind(&value.bytes)
                    .execute(&mut **tx)
                    .await?
                    .rows_affected();
            }
            Ok(sealed)
        }

        /// Why a guarded update touched no row: the execution is missing, ended, or owned by a
        /// newer generation.
        /// Whether `commit` writes nothing beyond its execution's row, its calls, events and
        /// output: then `commit_rest` has nothing to do.
        /// Writes `commit` of execution `id` by its owner at `generation` in `tx`, the usual way:
        /// the row's update (refused when the generation or the state says so), the calls, the
        /// events, the output, then `commit_rest`. Returns the last sequence and whether the
        /// execution has a parent. On an error the caller rolls `tx` back.
        pub(crate) async fn write_commit(
            tx: &mut Transaction<'_, Db>,
            seal: &RowSeal,
            id: ExecutionId,
            generation: i64,
            commit: &Commit,
        ) -> Result<(i64, bool), StoreError> {
            let now = now_ms();
            let row = bind_commit_update!(sqlx::query(WRITE_COMMIT), id, generation, commit, now)
                .fetch_optional(&mut **tx)
                .await?;
            let Some(row) = row else {
                return Err(Self::refusal(tx, id, generation).await);
            };
            let last: i64 = row.try_get("last_sequence")?;
            let has_parent = row.try_get::<Option<Uuid>, _>("parent_id")?.is_some();
            for call in &commit.calls {
                Self::write_call(tx, id, generation, call, false).await?;
            }
            Self::insert_events(
                tx,
                seal,
                id,
                last - commit.events.len() as i64 + 1,
                &commit.events,
            )
            .await?;
            if let Some(output) = commit.state.as_ref().and_then(|s| s.output.as_ref()) {
                Self::insert_sealed(tx, Some(id), output).await?;
            }
            Self::commit_rest(tx, seal, id, commit, has_parent, now).await?;
            Ok((last, has_parent))
        }

        /// Writes `commits` the usual way (`write_commit`) in one transaction, each in a savepoint
        /// of its own when there are several (one alone needs none): a refused commit is rolled
        /// back alone, and the results hold for the database only once this returns `Ok` (after
        /// the `COMMIT`). An `Err` is the transaction's own failure: nothing is known to have
        /// landed.
        pub(crate) async fn write_together(
            &self,
            commits: &[(ExecutionId, i64, &Commit)],
        ) -> Result<Vec<Result<(i64, bool), StoreError>>, sqlx::Error> {
            let alone = commits.len() == 1;
            let mut results = Vec::with_capacity(commits.len());
            let mut tx = self.writer().begin().await?;
            for &(id, generation, commit) in commits {
                let result = if alone {
                    Self::write_commit(&mut tx, &self.seal, id, generation, commit).await
                } else {
                    let mut savepoint = sqlx::Acquire::begin(&mut tx).await?;
                    let result =
                        Self::write_commit(&mut savepoint, &self.seal, id, generation, commit)
                            .await;
                    match &result {
                        Ok(_) => savepoint.commit().await?,
                        Err(_) => savepoint.rollback().await?,
                    }
                    result
                };
                results.push(result);
            }
            if alone && results.iter().any(Result::is_err) {
                tx.rollback().await?;
            } else {
                tx.commit().await?;
            }
            Ok(results)
        }

        #[allow(dead_code)] // SQLite writes every commit the usual way
        pub(crate) fn rest_is_empty(commit: &Commit, has_parent: bool) -> bool {
            !commit.close_input
                && commit.state.as_ref().is_none_or(|s| s.failure.is_none())
                && commit.handled_signals.is_empty()
                && (commit.usage.is_none() || !has_parent)
                && commit.children.is_empty()
                && commit.notice.is_none()
                && commit.outbox.is_empty()
                && commit.writes.0.is_empty()
        }

        /// What `commit` writes besides its execution's row, calls, events and output, in `tx`
        /// after those: the check that closing input finds none waiting, the failure record, the
        /// handled signals, the usage roll-up, children, the notice, the outbox and the
        /// capabilities' rows. An error leaves `tx` to be rolled back.
        pub(crate) async fn commit_rest(
            tx: &mut Transaction<'_, Db>,
            seal: &RowSeal,
            id: ExecutionId,
            commit: &Commit,
            has_parent: bool,
            now: Millis,
        ) -> Result<(), StoreError> {
            if commit.close_input {
                // Input added before this commit is seen here; input added after it finds the input
                // closed (`add_input` reads the row under its lock).
                let waiting: bool = sqlx::query_scalar(COMMIT_REST_SELECT_TURN_INPUTS)
                    .bind(id.as_uuid())
                    .fetch_one(&mut **tx)
                    .await?;
                if waiting {
                    return Err(StoreError::InputWaiting(id));
                }
            }
            if let Some((category, blob)) = commit.state.as_ref().and_then(|s| s.failure.as_ref()) {
                sqlx::query(COMMIT_REST_INSERT_ERROR_RECORDS)
                    .bind(blob.id)
                    .bind(id.as_uuid())
                    .bind(category_name(*category))
                    .bind(&blob.key_id)
                    .bind(&blob.nonce)
                    .bind(&blob.ciphertext)
                    .bind(now)
                    .execute(&mut **tx)
                    .await?;
            }
            if !commit.handled_signals.is_empty() {
                Self::mark_handled(tx, id, &commit.handled_signals, now).await?;
            }
            // A root execution has no ancestor to add its usage to.
            if let Some(usage) = commit.usage.as_ref().filter(|_| has_parent) {
                Self::roll_up_usage(tx, id, usage).await?;
            }
            Self::insert_children(tx, seal, id, &commit.children, now).await?;
            if let Some(notice) = &commit.notice {
                Self::write_notice(tx, seal, id, notice, now).await?;
            }
            for (kind, payload) in &commit.outbox {
                sqlx::query(COMMIT_REST_INSERT_OUTBOX)
                    .bind(id.as_uuid())
                    .bind(kind)
                    .bind(payload)
                    .bind(now)
                    .execute(&mut **tx)
                    .await?;
            }
            Self::run_writes(&commit.writes, tx).await?;
            Ok(())
        }

        pub(crate) async fn refusal(
            tx: &mut Transaction<'_, Db>,
            id: ExecutionId,
            generation: i64,
        ) -> StoreError {
            let row = sqlx::query(REFUSAL)
                .bind(id.as_uuid())
                .fetch_optional(&mut **tx)
                .await;
            match row {
                Ok(None) => StoreError::NotFound(id),
                Ok(Some(row)) => {
                    let current: i64 = row.try_get("generation").unwrap_or(generation);
                    if current != generation {
                        StoreError::Fenced(id)
                    } else {
                        StoreError::Ended(id)
                    }
                }
                Err(err) => err.into(),
            }
        }
    }

    impl StoreTrait for Store {
        fn backend(&self) -> Backend {
            Self::KIND
        }

        fn notification_pool(&self) -> Option<sqlx::PgPool> {
            self.notifications()
        }
    }

    #[async_trait]
    impl ExecutionStore for Store {
        async fn submit(&self, new: NewExecution) -> Result<Submitted, StoreError> {
            self.submit_writing(new, TxWrites::default()).await
        }

        async fn submit_writing(
            &self,
            new: NewExecution,
            writes: TxWrites,
        ) -> Result<Submitted, StoreError> {
            Ok(self.submit_claiming(new, writes, None).await?.0)
        }

        async fn submit_claiming(
            &self,
            new: NewExecution,
            writes: TxWrites,
            claim: Option<&ClaimFor>,
        ) -> Result<(Submitted, Option<Claim>), StoreError> {
            let mut tx = self.writer().begin().await?;
            let now = now_ms();
            let last = new.events.len() as i64;
            if let Some(gate) = new.admission_gate {
                let closed: Option<Option<i64>> =
                    sqlx::query_scalar(SUBMIT_CLAIMING_SELECT_ADMISSION_GATES)
                        .bind(gate)
                        .fetch_optional(&mut *tx)
                        .await?;
                if !matches!(closed, Some(None)) {
                    tx.rollback().await?;
                    return Err(StoreError::AdmissionClosed);
                }
            }
            Self::insert_sealed(&mut tx, Some(new.id), &new.input).await?;
            // Claimed in the same statement when a node is named and the work may start now.
            let row = sqlx::query(SUBMIT_CLAIMING_INSERT_EXECUTIONS)
                .bind(new.id.as_uuid())
                .bind(&new.kind)
                .bind(new.scope.to_stored())
                .bind(new.parent_id.map(|p| p.as_uuid()))
                .bind(new.chat_id)
                .bind(new.input.id)
                .bind(last)
                .bind(now)
                .bind(claim.map(|c| c.node.as_str()))
                .bind(claim.map_or(0, |c| c.lease_ms))
                .fetch_one(&mut *tx)
                .await?;
            let execution: ExecutionRow = execution_from_row!(&row)?;
            if let Some(key) = &new.command_key {
                let inserted = sqlx::query(SUBMIT_CLAIMING_INSERT_COMMAND_KEYS)
                    .bind(new.scope.to_stored())
                    .bind(key)
                    .bind(&new.input_digest)
                    .bind(new.id.as_uuid())
                    .bind(now)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if inserted == 0 {
                    tx.rollback().await?;
                    let row = sqlx::query(SUBMIT_CLAIMING_SELECT_COMMAND_KEYS)
                        .bind(new.scope.to_stored())
                        .bind(key)
                        .fetch_one(self.writer())
                        .await?;
                    let digest: Vec<u8> = row.try_get("input_digest")?;
                    let existing: Uuid = row.try_get("execution_id")?;
                    return if digest == new.input_digest {
                        Ok((Submitted::Existing(existing.into()), None))
                    } else {
                        Err(StoreError::CommandKeyConflict(key.clone()))
                    };
                }
            }
            Self::insert_events(&mut tx, &self.seal, new.id, 1, &new.events).await?;
            Self::run_writes(&writes, &mut tx).await?;
            tx.commit().await?;
            // Nothing can signal work before it is stored.
            let claimed = match execution.owner_node {
                Some(_) => Some(self.claimed(execution, false, Some(new.input))),
                None => None,
            };
            Ok((Submitted::Created(new.id), claimed))
        }

        async fn claim_due(
            &self,
            node: &str,
            kinds: &[&str],
            lease_ms: i64,
            limit: i64,
            timers_due: Millis,
        ) -> Result<Claimed, StoreError> {
            let rows = self
                .claim_rows(node, kinds, lease_ms, limit, timers_due)
                .await?;
            let mut claimed = Claimed::default();
            for row in &rows {
                // A closure: the row macro's `?` returns from it, not from this function.
                let read = || -> Result<Claim, StoreError> {
                    let execution: ExecutionRow = execution_from_row!(row)?;
                    let signals_pending: bool = row.try_get("signals_pending")?;
                    Ok(self.claimed(execution, signals_pending, None))
                };
                let read = read();
                match read {
                    Ok(claim) => claimed.claims.push(claim),
                    // The claim owns the row now: it goes to the claimer to be ended, so one
                    // damaged row never holds back the rest of the batch, here or on other nodes.
                    Err(err) => {
                        let id: Uuid = row.try_get("id")?;
                        let generation: i64 = row.try_get("generation")?;
                        claimed.damaged.push(DamagedClaim {
                            id: id.into(),
                            generation,
                            kind: row.try_get("kind").ok(),
                            cause: err.to_string(),
                        });
                    }
                }
            }
            Ok(claimed)
        }

        async fn renew(
            &self,
            node: &str,
            lease_ms: i64,
            owned: &[(ExecutionId, i64)],
        ) -> Result<Vec<ExecutionId>, StoreError> {
            self.renew_leases(node, lease_ms, owned).await
        }

        async fn release(&self, id: ExecutionId, generation: i64) -> Result<(), StoreError> {
            self.forget_tip(id);
            sqlx::query(RELEASE)
                .bind(id.as_uuid())
                .bind(generation)
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn commit(
            &self,
            id: ExecutionId,
            generation: i64,
            commit: Commit,
        ) -> Result<i64, StoreError> {
            // Where the backend can, the commit's rows go in one statement (PostgreSQL, when this
            // store wrote the execution last); otherwise, or when that finds the tip stale, below.
            match self.commit_at_once(id, generation, commit).await? {
                Ok(last) => Ok(last),
                Err(commit) => self.commit_in_transaction(id, generation, commit).await,
            }
        }

        async fn save_late_result(
            &self,
            id: ExecutionId,
            generation: i64,
            call: CallWrite,
            writes: TxWrites,
        ) -> Result<(), StoreError> {
            let mut tx = self.writer().begin().await?;
            Self::write_call(&mut tx, id, generation, &call, true).await?;
            Self::run_writes(&writes, &mut tx).await?;
            sqlx::query(SAVE_LATE_RESULT)
                .bind(id.as_uuid())
                .bind(call_key_name(&call.key))
                .bind(now_ms())
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(())
        }

        async fn execution(&self, id: ExecutionId) -> Result<ExecutionRow, StoreError> {
            let row = sqlx::query(EXECUTION)
                .bind(id.as_uuid())
                .fetch_optional(self.reader())
                .await?
                .ok_or(StoreError::NotFound(id))?;
            execution_from_row!(&row)
        }

        async fn visible_execution(
            &self,
            id: ExecutionId,
            scope: &Scope,
            bot_ids: Option<&[BotId]>,
        ) -> Result<Option<ExecutionRow>, StoreError> {
            // The Bot limit is part of the query: the tree's root names the Chat, and so its Bot.
            let row = sqlx::query(VISIBLE_EXECUTION)
                .bind(id.as_uuid())
                .bind(scope.to_stored())
                .bind(bot_limit_json(bot_ids)?)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(|row| execution_from_row!(row)).transpose()
        }

        async fn next_wake(&self, node: &str) -> Result<Option<Millis>, StoreError> {
            Ok(sqlx::query_scalar(NEXT_WAKE)
                .bind(node)
                .fetch_one(self.reader())
                .await?)
        }

        async fn execution_counts(&self) -> Result<Vec<(String, String, i64)>, StoreError> {
            Ok(sqlx::query_as(EXECUTION_COUNTS)
                .fetch_all(self.reader())
                .await?)
        }

        fn pool_use(&self) -> Vec<(&'static str, u32, u32)> {
            let writer = self.writer();
            let reader = self.reader();
            vec![
                ("writer", writer.size(), writer.num_idle() as u32),
                ("reader", reader.size(), reader.num_idle() as u32),
            ]
        }

        async fn cancel_tree(
            &self,
            id: ExecutionId,
            with_root: bool,
        ) -> Result<CancelledTree, StoreError> {
            let mut tx = self.writer().begin().await?;
            let root_state: Option<String> = sqlx::query_scalar(CANCEL_TREE_SELECT_EXECUTIONS)
                .bind(id.as_uuid())
                .fetch_optional(&mut *tx)
                .await?;
            let root_state = root_state.ok_or(StoreError::NotFound(id))?;
            if with_root && parse_state(&root_state).is_none_or(|s| s.is_terminal()) {
                return Err(StoreError::Ended(id));
            }
            // The open part of the tree, locked in ID order (as commits lock rows), so no commit
            // of the tree lands between the reading and the signals.
            let open: Vec<Uuid> = sqlx::query_scalar(CANCEL_TREE_OPEN_MEMBERS)
                .bind(id.as_uuid())
                .bind(with_root)
                .fetch_all(&mut *tx)
                .await?;
            let now = now_ms();
            let mut cancelled = CancelledTree::default();
            for execution in open {
                let waiting: Option<i64> = sqlx::query_scalar(CANCEL_TREE_SELECT_SIGNALS)
                    .bind(execution)
                    .fetch_one(&mut *tx)
                    .await?;
                let number = match waiting {
                    Some(number) => number,
                    None => {
                        let number: i64 = sqlx::query_scalar(CANCEL_TREE_INSERT_SIGNALS)
                            .bind(execution)
                            .bind(now)
                            .fetch_one(&mut *tx)
                            .await?;
                        sqlx::query(MARK_SIGNALLED)
                            .bind(execution)
                            .bind("cancel")
                            .bind(now)
                            .execute(&mut *tx)
                            .await?;
                        number
                    }
                };
                if execution == id.as_uuid() {
                    cancelled.root = Some(number);
                }
                cancelled.cancelling.push(execution.into());
            }
            tx.commit().await?;
            Ok(cancelled)
        }

        async fn pause(
            &self,
            id: ExecutionId,
            generation: i64,
            handled: Vec<i64>,
        ) -> Result<bool, StoreError> {
            self.pause_owned(id, generation, handled).await
        }

        async fn resume(&self, id: ExecutionId) -> Result<bool, StoreError> {
            self.resume_paused(id).await
        }

        async fn ancestor_paused(&self, id: ExecutionId) -> Result<bool, StoreError> {
            self.has_paused_ancestor(id).await
        }

        async fn open_children(
            &self,
            id: ExecutionId,
            attached_only: bool,
        ) -> Result<Vec<ExecutionId>, StoreError> {
            self.open_children_of(id, attached_only).await
        }

        async fn open_descendants(&self, id: ExecutionId) -> Result<Vec<ExecutionId>, StoreError> {
            self.open_descendants_of(id).await
        }
    }

    #[async_trait]
    impl CallStore for Store {
        async fn latest_call(
            &self,
            id: ExecutionId,
            step: u32,
            slot: CallSlot,
        ) -> Result<Option<CallRow>, StoreError> {
            let row = sqlx::query(LATEST_CALL)
                .bind(id.as_uuid())
                .bind(step as i32)
                .bind(slot_name(slot))
                .fetch_optional(self.reader())
                .await?;
            row.map(|row| call_from_row!(&row)).transpose()
        }

        async fn calls(&self, id: ExecutionId) -> Result<Vec<CallRow>, StoreError> {
            let rows = sqlx::query(CALLS)
                .bind(id.as_uuid())
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(|row| call_from_row!(row)).collect()
        }

        async fn resolve_unknown(
            &self,
            id: ExecutionId,
            key: CallKey,
            result: SealedBlob,
        ) -> Result<(), StoreError> {
            let mut tx = self.writer().begin().await?;
            let waiting = sqlx::query(RESOLVE_UNKNOWN_UPDATE_EXECUTIONS)
                .bind(id.as_uuid())
                .bind(call_key_name(&key))
                .bind(now_ms())
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if waiting == 0 {
                tx.rollback().await?;
                return Err(StoreError::Ended(id));
            }
            let call = CallWrite {
                key,
                phase: CallPhase::Done,
                idempotency_key: String::new(),
                result: Some(result),
                usage: None,
            };
            let generation: i64 = sqlx::query_scalar(RESOLVE_UNKNOWN_SELECT_EXECUTIONS)
                .bind(id.as_uuid())
                .fetch_one(&mut *tx)
                .await?;
            Self::write_call(&mut tx, id, generation, &call, false).await?;
            tx.commit().await?;
            Ok(())
        }

        async fn other_kinds(
            &self,
            kinds: &[&str],
            limit: i64,
        ) -> Result<Vec<(ExecutionId, i64, String)>, StoreError> {
            let kinds =
                serde_json::to_string(kinds).map_err(|e| StoreError::Invalid(e.to_string()))?;
            let rows = sqlx::query(OTHER_KINDS)
                .bind(kinds)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter()
                .map(|row| {
                    Ok((
                        row.try_get::<Uuid, _>("id")?.into(),
                        row.try_get("generation")?,
                        row.try_get("kind")?,
                    ))
                })
                .collect()
        }

        async fn unknown_outcomes(
            &self,
            scope: &Scope,
            bot_ids: Option<&[BotId]>,
            after: Option<ExecutionId>,
            limit: i64,
        ) -> Result<Vec<ExecutionRow>, StoreError> {
            self.unknown_of(scope, bot_ids, after, limit).await
        }

        async fn decide_unknown(
            &self,
            id: ExecutionId,
            decision: UnknownDecision,
        ) -> Result<OutcomeDecisionRow, StoreError> {
            self.decide_unknown_call(id, decision).await
        }
    }

    #[async_trait]
    impl EventStore for Store {
        async fn events(
            &self,
            id: ExecutionId,
            after: i64,
            limit: i64,
        ) -> Result<Vec<Event>, StoreError> {
            let rows = sqlx::query(EVENTS)
                .bind(id.as_uuid())
                .bind(after)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            // Opened here, once per read: the readers at an execution's head share this read.
            rows.iter()
                .map(|row| event_from_row!(row, id, self.seal))
                .collect()
        }

        async fn events_to_end(
            &self,
            id: ExecutionId,
            after: i64,
            limit: i64,
        ) -> Result<TailPage, StoreError> {
            // One statement, one snapshot: an end it sees comes with all the events before it.
            let rows = sqlx::query(EVENTS_TO_END)
                .bind(id.as_uuid())
                .bind(after)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            let first = rows.first().ok_or(StoreError::NotFound(id))?;
            let state: String = first.try_get("state")?;
            let state = parse_state(&state)
                .ok_or_else(|| StoreError::Invalid(format!("execution row: bad state {state}")))?;
            let ended_at = state
                .is_terminal()
                .then(|| first.try_get::<i64, _>("last_sequence"))
                .transpose()?;
            let mut events = Vec::with_capacity(rows.len());
            for row in &rows {
                if row.try_get::<Option<i64>, _>("sequence")?.is_some() {
                    events.push(event_from_row!(row, id, self.seal)?);
                }
            }
            Ok(TailPage { events, ended_at })
        }
    }

    #[async_trait]
    impl ChatQueueStore for Store {
        async fn add_input(
            &self,
            id: ExecutionId,
            content: String,
            key: Option<KeyWrite>,
        ) -> Result<Option<i64>, StoreError> {
            let mut tx = self.writer().begin().await?;
            // Under the row's lock: a Turn's end that closes input (`Commit::close_input`) either
            // commits first, and this input is refused, or sees this input and does not end.
            let open: Option<bool> = sqlx::query_scalar(ADD_INPUT_SELECT_EXECUTIONS)
                .bind(id.as_uuid())
                .fetch_optional(&mut *tx)
                .await?;
            match open {
                None => return Err(StoreError::NotFound(id)),
                Some(false) => return Ok(None),
                Some(true) => {}
            }
            if let Some(key) = &key {
                // Recorded with the input, so a retry never adds it again.
                let inserted = sqlx::query(ADD_INPUT_INSERT_COMMAND_KEYS)
                    .bind(key.scope.to_stored())
                    .bind(&key.key)
                    .bind(&key.input_digest)
                    .bind(id.as_uuid())
                    .bind(now_ms())
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if inserted == 0 {
                    tx.rollback().await?;
                    return Err(StoreError::CommandKeyConflict(key.key.clone()));
                }
            }
            let position =
                Self::insert_input(&mut tx, &self.seal, id.as_uuid(), &content, now_ms()).await?;
            tx.commit().await?;
            Ok(Some(position))
        }

        async fn command_key(
            &self,
            scope: &Scope,
            key: &str,
        ) -> Result<Option<CommandKeyRow>, StoreError> {
            let row = sqlx::query(COMMAND_KEY)
                .bind(scope.to_stored())
                .bind(key)
                .fetch_optional(self.reader())
                .await?;
            row.map(|row| {
                Ok(CommandKeyRow {
                    input_digest: row.try_get("input_digest")?,
                    execution_id: row.try_get::<Uuid, _>("execution_id")?.into(),
                })
            })
            .transpose()
        }

        async fn take_inputs(
            &self,
            id: ExecutionId,
            generation: i64,
            step: u32,
            last: bool,
        ) -> Result<Vec<String>, StoreError> {
            // Most steps find nothing waiting: one read, no write transaction. The step's mark
            // (`input_step`) is then written by its model request's `sending` commit
            // (`Commit::input_step`), so input that arrives after this read is taken by a later
            // step, never by this one on replay. Only taking input (or, with `last`, closing) writes.
            // Nothing untaken and nothing this step took before: the answer is empty either way.
            if !last && !self.inputs_waiting(id, generation, step).await? {
                return Ok(Vec::new());
            }
            let mut tx = self.writer().begin().await?;
            let owned = sqlx::query(TAKE_INPUTS_LOCK_OWNER)
                .bind(id.as_uuid())
                .bind(generation)
                .fetch_optional(&mut *tx)
                .await?;
            if owned.is_none() {
                let refusal = Self::refusal(&mut tx, id, generation).await;
                tx.rollback().await?;
                return Err(refusal);
            }
            // A step takes input once; taking it again (a replay) returns what it took then.
            let fresh = sqlx::query(TAKE_INPUTS_UPDATE_TURN_INPUTS)
                .bind(id.as_uuid())
                .bind(step as i32)
                .fetch_all(&mut *tx)
                .await?;
            let fresh = self.open_inputs(id, &fresh)?;
            sqlx::query(TAKE_INPUTS_MARK_STEP)
                .bind(id.as_uuid())
                .bind(step as i32)
                .execute(&mut *tx)
                .await?;
            if !fresh.is_empty() {
                // Its events move the execution's last sequence past the tip.
                self.forget_tip(id);
                let events = steered_events(&fresh)?;
                let last: i64 = sqlx::query_scalar(TAKE_INPUTS_RESERVE_SEQUENCES)
                    .bind(id.as_uuid())
                    .bind(events.len() as i64)
                    .fetch_one(&mut *tx)
                    .await?;
                Self::insert_events(
                    &mut tx,
                    &self.seal,
                    id,
                    last - events.len() as i64 + 1,
                    &events,
                )
                .await?;
            }
            let taken = sqlx::query(TAKE_INPUTS_SELECT_TURN_INPUTS)
                .bind(id.as_uuid())
                .bind(step as i32)
                .fetch_all(&mut *tx)
                .await?;
            let taken = self.open_inputs(id, &taken)?;
            if last && taken.is_empty() {
                sqlx::query(TAKE_INPUTS_CLOSE_INPUT)
                    .bind(id.as_uuid())
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(taken)
        }

        async fn inputs_waiting(
            &self,
            id: ExecutionId,
            generation: i64,
            step: u32,
        ) -> Result<bool, StoreError> {
            let row = sqlx::query(INPUTS_WAITING)
                .bind(id.as_uuid())
                .bind(generation)
                .bind(step as i32)
                .fetch_optional(self.reader())
                .await?;
            match row {
                Some(row) => Ok(row.try_get::<bool, _>("waiting")?),
                None => Ok(true),
            }
        }

        async fn open_gate(&self, id: Uuid) -> Result<(), StoreError> {
            sqlx::query(OPEN_GATE)
                .bind(id)
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn chat_executions(&self, chat_id: Uuid) -> Result<Vec<ExecutionRow>, StoreError> {
            let rows = sqlx::query(CHAT_EXECUTIONS)
                .bind(chat_id)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(|row| execution_from_row!(row)).collect()
        }

        async fn chat_outputs(
            &self,
            chat_id: Uuid,
            before: Option<ExecutionId>,
        ) -> Result<Vec<ChatOutput>, StoreError> {
            let rows = sqlx::query(CHAT_OUTPUTS)
                .bind(chat_id)
                .bind(before.map_or(crate::paging::LAST_ID, |id| id.as_uuid()))
                .fetch_all(self.reader())
                .await?;
            rows.iter()
                .map(|row| {
                    let output_record: Option<Uuid> = row.try_get("output_record")?;
                    let key_id: Option<String> = row.try_get("key_id")?;
                    let output = match (output_record, key_id) {
                        (Some(id), Some(key_id)) => Some(SealedBlob {
                            id,
                            key_id,
                            nonce: row.try_get("nonce")?,
                            ciphertext: row.try_get("ciphertext")?,
                        }),
                        _ => None,
                    };
                    Ok(ChatOutput {
                        id: ExecutionId::from(row.try_get::<Uuid, _>("id")?),
                        updated_at: row.try_get("updated_at")?,
                        output_record,
                        output,
                    })
                })
                .collect()
        }

        async fn chat_executions_from(
            &self,
            chat_id: Uuid,
            from: Option<ExecutionId>,
            limit: i64,
        ) -> Result<Vec<ExecutionRow>, StoreError> {
            let rows = sqlx::query(CHAT_EXECUTIONS_FROM)
                .bind(chat_id)
                .bind(from.map_or(crate::paging::FIRST_ID, |id| id.as_uuid()))
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(|row| execution_from_row!(row)).collect()
        }

        async fn chat_notices(&self, chat_id: Uuid) -> Result<Vec<ChatNoticeRow>, StoreError> {
            self.notices_of(chat_id, None).await
        }

        async fn chat_notices_between(
            &self,
            chat_id: Uuid,
            first: ExecutionId,
            last: ExecutionId,
        ) -> Result<Vec<ChatNoticeRow>, StoreError> {
            self.notices_of(chat_id, Some((first, last))).await
        }
    }

    #[async_trait]
    impl SignalStore for Store {
        async fn signal(
            &self,
            id: ExecutionId,
            kind: &str,
            payload: &str,
        ) -> Result<i64, StoreError> {
            let mut tx = self.writer().begin().await?;
            let state: Option<String> = sqlx::query_scalar(SIGNAL_SELECT_EXECUTIONS)
                .bind(id.as_uuid())
                .fetch_optional(&mut *tx)
                .await?;
            let state = state.ok_or(StoreError::NotFound(id))?;
            if parse_state(&state).is_none_or(|s| s.is_terminal()) {
                return Err(StoreError::Ended(id));
            }
            let now = now_ms();
            let number: i64 = sqlx::query_scalar(SIGNAL_INSERT_SIGNALS)
                .bind(id.as_uuid())
                .bind(kind)
                .bind(payload)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
            sqlx::query(MARK_SIGNALLED)
                .bind(id.as_uuid())
                .bind(kind)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(number)
        }

        async fn pending_signals(&self, id: ExecutionId) -> Result<Vec<SignalRow>, StoreError> {
            let rows = sqlx::query(PENDING_SIGNALS)
                .bind(id.as_uuid())
                .fetch_all(self.reader())
                .await?;
            rows.iter()
                .map(|row| {
                    Ok(SignalRow {
                        number: row.try_get("number")?,
                        kind: row.try_get("kind")?,
                        payload: row.try_get("payload")?,
                    })
                })
                .collect()
        }
    }

    #[async_trait]
    impl OutboxStore for Store {
        async fn claim_outbox(
            &self,
            lease_ms: i64,
            limit: i64,
        ) -> Result<Vec<OutboxRow>, StoreError> {
            let now = now_ms();
            let rows = sqlx::query(CLAIM_OUTBOX)
                .bind(now)
                .bind(lease_ms)
                .bind(limit)
                .bind(crate::store::OUTBOX_ATTEMPTS)
                .fetch_all(self.writer())
                .await?;
            let mut messages: Vec<OutboxRow> = rows
                .iter()
                .map(|row| {
                    Ok(OutboxRow {
                        id: row.try_get("id")?,
                        execution_id: row.try_get::<Uuid, _>("execution_id")?.into(),
                        kind: row.try_get("kind")?,
                        payload: row.try_get("payload")?,
                        attempts: row.try_get("attempts")?,
                    })
                })
                .collect::<Result<_, StoreError>>()?;
            messages.sort_by_key(|m| m.id);
            Ok(messages)
        }

        async fn finish_outbox(
            &self,
            id: i64,
            failure: Option<&str>,
            retry_at: Millis,
        ) -> Result<(), StoreError> {
            sqlx::query(FINISH_OUTBOX)
                .bind(id)
                .bind(failure)
                .bind(now_ms())
                .bind(retry_at)
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn outbox_of(&self, id: ExecutionId) -> Result<Vec<OutboxStatus>, StoreError> {
            let rows = sqlx::query(OUTBOX_OF)
                .bind(id.as_uuid())
                .fetch_all(self.reader())
                .await?;
            rows.iter()
                .map(|row| {
                    Ok(OutboxStatus {
                        id: row.try_get("id")?,
                        kind: row.try_get("kind")?,
                        delivered: row.try_get("delivered")?,
                        attempts: row.try_get("attempts")?,
                        last_error: row.try_get("last_error")?,
                    })
                })
                .collect()
        }
    }

    #[async_trait]
    impl RequestStore for Store {
        async fn request(&self, id: Uuid) -> Result<Option<RequestRow>, StoreError> {
            self.request_by_id(id).await
        }

        async fn visible_request(
            &self,
            access: &RequestAccess,
            id: Uuid,
        ) -> Result<Option<RequestRow>, StoreError> {
            Ok(self
                .requests_of(access, Some(id), None, None, 1)
                .await?
                .pop())
        }

        async fn requests(
            &self,
            access: &RequestAccess,
            state: Option<&str>,
            before: Option<crate::paging::CreatedPosition>,
            limit: i64,
        ) -> Result<Vec<RequestRow>, StoreError> {
            self.requests_of(access, None, state, before, limit).await
        }

        async fn decide_request(
            &self,
            id: Uuid,
            decision: RequestDecision,
        ) -> Result<RequestRow, StoreError> {
            self.decide(id, decision).await
        }
    }

    #[async_trait]
    impl RecordStore for Store {
        async fn put_sealed(
            &self,
            execution: Option<ExecutionId>,
            blob: SealedBlob,
        ) -> Result<(), StoreError> {
            let mut tx = self.writer().begin().await?;
            Self::insert_sealed(&mut tx, execution, &blob).await?;
            tx.commit().await?;
            Ok(())
        }

        async fn sealed(&self, id: Uuid) -> Result<Option<SealedBlob>, StoreError> {
            let row = sqlx::query(SEALED)
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
            row.map(|row| {
                Ok(SealedBlob {
                    id: row.try_get("id")?,
                    key_id: row.try_get("key_id")?,
                    nonce: row.try_get("nonce")?,
                    ciphertext: row.try_get("ciphertext")?,
                })
            })
            .transpose()
        }

        async fn error_record(&self, id: Uuid) -> Result<Option<(String, SealedBlob)>, StoreError> {
            let row = sqlx::query(ERROR_RECORD)
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
            row.map(|row| {
                Ok((
                    row.try_get("category")?,
                    SealedBlob {
                        id: row.try_get("id")?,
                        key_id: row.try_get("key_id")?,
                        nonce: row.try_get("nonce")?,
                        ciphertext: row.try_get("ciphertext")?,
                    },
                ))
            })
            .transpose()
        }

        async fn put_error_record(
            &self,
            execution: Option<ExecutionId>,
            category: &str,
            blob: SealedBlob,
        ) -> Result<(), StoreError> {
            sqlx::query(PUT_ERROR_RECORD)
                .bind(blob.id)
                .bind(execution.map(|e| e.as_uuid()))
                .bind(category)
                .bind(&blob.key_id)
                .bind(&blob.nonce)
                .bind(&blob.ciphertext)
                .bind(now_ms())
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn seal_clear_rows(&self) -> Result<u64, StoreError> {
            let mut sealed = 0;
            loop {
                let mut tx = self.writer().begin().await?;
                let batch = self.seal_clear_batch(&mut tx).await?;
                tx.commit().await?;
                sealed += batch;
                if batch == 0 {
                    return Ok(sealed);
                }
            }
        }
    }
}
