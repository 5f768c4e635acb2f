//! The PostgreSQL store: several nodes share one database; rows locked with `FOR UPDATE`
//! order writes to one execution, and `SKIP LOCKED` lets nodes claim work side by side.

use openbot_schema::{EventKind, ExecutionId};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Postgres, Row, Transaction};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

use super::StoreError;
use super::migrate::{self, Backend, SCHEMA_VERSION};
use super::records::*;
use super::sealing::{CLEARED, RowSeal};
use super::statements::{bind_commit_update, call_upsert, commit_update};
use super::tips::{Tip, Tips};
use crate::sealed::KeyRing;

/// A commit's rows in one statement (`PostgresStore::commit_at_once`): the update of
/// `commit_update!` (`$1`-`$19`) where the last sequence is still `$20`, then, from its row,
/// the sealed records (`$21`-`$24`), the calls (`$25`-`$35`) and the events (`$36`-`$40`).
/// Without the row, nothing is inserted and no row comes back.
const COMMIT_AT_ONCE: &str = concat!(
    "WITH u AS (",
    commit_update!(),
    " AND last_sequence = $20 RETURNING last_sequence), \
     s AS (INSERT INTO sealed_records (id, execution_id, key_id, nonce, ciphertext, created_at) \
         SELECT r.id, $1, r.key_id, r.nonce, r.ciphertext, $15 \
         FROM u, UNNEST($21::uuid[], $22::text[], $23::bytea[], $24::bytea[]) AS r(id, key_id, nonce, ciphertext)), \
     c AS (INSERT INTO calls (execution_id, step, slot, attempt, status, idempotency_key, result_record, \
             has_usage, input_tokens, output_tokens, cached_tokens, cost_micros, generation, late, created_at, updated_at) \
         SELECT $1, k.step, k.slot, k.attempt, k.status, k.idempotency_key, k.result_record, k.has_usage, \
             k.input_tokens, k.output_tokens, k.cached_tokens, k.cost_micros, $2, FALSE, $15, $15 \
         FROM u, UNNEST($25::integer[], $26::text[], $27::integer[], $28::text[], $29::text[], $30::uuid[], \
             $31::boolean[], $32::bigint[], $33::bigint[], $34::bigint[], $35::bigint[]) \
             AS k(step, slot, attempt, status, idempotency_key, result_record, has_usage, \
                 input_tokens, output_tokens, cached_tokens, cost_micros)",
    call_upsert!(),
    "), \
     e AS (INSERT INTO events (execution_id, sequence, kind, payload, key_id, sealed, at) \
         SELECT $1, v.sequence, v.kind, $36, v.key_id, v.sealed, $15 \
         FROM u, UNNEST($37::bigint[], $38::text[], $39::text[], $40::bytea[]) AS v(sequence, kind, key_id, sealed)) \
     SELECT last_sequence FROM u"
);

/// A store on PostgreSQL.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pub(crate) pool: PgPool,
    /// Seals and opens the payloads of events, Turn input, notices and requests.
    pub(crate) seal: RowSeal,
    /// What this store last wrote of the executions its node runs (`commit_at_once`).
    pub(crate) tips: Arc<Tips>,
}

impl PostgresStore {
    /// Connects to a database at this build's schema version; fails with
    /// [`StoreError::SchemaVersion`] otherwise. `keys` seal the payloads the store writes and
    /// open those it reads (see [`crate::store::sealing`]); every node of a deployment has
    /// the same ring, and a node passes the ring its engine uses.
    pub async fn connect(
        url: &str,
        max_connections: u32,
        keys: KeyRing,
    ) -> Result<Self, StoreError> {
        // A frozen or dead client must not hold row locks for long: its transaction is ended
        // by the server, so takeover is never blocked by a lock of a lost owner.
        let options = PgConnectOptions::from_str(url)?
            .application_name("openbot")
            .options([
                ("idle_in_transaction_session_timeout", "5000"),
                ("statement_timeout", "60000"),
            ]);
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        let store = Self {
            pool,
            seal: RowSeal::new(keys),
            tips: Arc::default(),
        };
        let found = store.schema_version().await?;
        if found != SCHEMA_VERSION {
            return Err(StoreError::SchemaVersion {
                found,
                expected: SCHEMA_VERSION,
            });
        }
        Ok(store)
    }

    /// Applies the migrations the database lacks and returns its version. Safe to run from
    /// several processes at once: they take turns under an advisory lock.
    pub async fn migrate(url: &str) -> Result<i64, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(PgConnectOptions::from_str(url)?)
            .await?;
        let mut tx = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(7215500001)")
            .execute(&mut *tx)
            .await?;
        let current = Self::apply_migrations(&mut tx, migrate::POSTGRES).await?;
        tx.commit().await?;
        pool.close().await;
        Ok(current.max(SCHEMA_VERSION))
    }

    async fn schema_version(&self) -> Result<i64, StoreError> {
        let exists: bool = sqlx::query_scalar("SELECT to_regclass('openbot_schema') IS NOT NULL")
            .fetch_one(&self.pool)
            .await?;
        if !exists {
            return Ok(0);
        }
        Ok(
            sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM openbot_schema")
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// The connection pool, for LISTEN/NOTIFY and benchmarks.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Which database this is.
    pub(crate) const BACKEND: Backend = Backend::Postgres;

    /// The pool wake-ups between nodes use (LISTEN/NOTIFY), when the database has one.
    pub(crate) fn notifications(&self) -> Option<sqlx::PgPool> {
        Some(self.pool.clone())
    }

    /// Writes `commit` in one statement when this store wrote the execution last (its tip):
    /// the row's update, checked against the generation and the tip's last sequence, and, only
    /// when it matched, the sealed results and output, the calls and the events, sealed for
    /// the sequences the tip gives. A commit with more to write (`commit_rest`) runs that after
    /// the statement, in one transaction. `None`, with nothing written, when there is no tip,
    /// the commit writes one call twice (one upsert cannot change a row twice) or the row did
    /// not match: the caller then writes the commit the usual way, which finds out why.
    pub(crate) async fn commit_at_once(
        &self,
        id: ExecutionId,
        generation: i64,
        commit: &Commit,
    ) -> Result<Option<i64>, StoreError> {
        let Some(tip) = self.tips.get(id, generation) else {
            return Ok(None);
        };
        let calls = &commit.calls;
        if calls
            .iter()
            .enumerate()
            .any(|(i, call)| calls[..i].iter().any(|earlier| earlier.key == call.key))
        {
            return Ok(None);
        }
        let written = self.one_statement(id, generation, commit, tip).await;
        match written {
            Ok(Some(last)) => {
                self.after_commit(id, generation, commit, last, tip.has_parent);
                Ok(Some(last))
            }
            Ok(None) => {
                self.tips.forget(id);
                Ok(None)
            }
            Err(err) => {
                self.tips.forget(id);
                Err(err)
            }
        }
    }

    async fn one_statement(
        &self,
        id: ExecutionId,
        generation: i64,
        commit: &Commit,
        tip: Tip,
    ) -> Result<Option<i64>, StoreError> {
        let mut sequences = Vec::with_capacity(commit.events.len());
        let mut kinds = Vec::with_capacity(commit.events.len());
        let mut event_keys = Vec::with_capacity(commit.events.len());
        let mut event_bytes = Vec::with_capacity(commit.events.len());
        for (i, event) in commit.events.iter().enumerate() {
            let sequence = tip.last_sequence + 1 + i as i64;
            let value = self.seal.seal_event(id, sequence, event)?;
            sequences.push(sequence);
            kinds.push(event_type(event));
            event_keys.push(value.key_id);
            event_bytes.push(value.bytes);
        }
        let output = commit.state.as_ref().and_then(|s| s.output.as_ref());
        let blobs: Vec<&SealedBlob> = commit
            .calls
            .iter()
            .filter_map(|call| call.result.as_ref())
            .chain(output)
            .collect();
        let calls = &commit.calls;
        let usage = |call: &CallWrite| call.usage.unwrap_or_default();
        let now = now_ms();
        let query = bind_commit_update!(sqlx::query(COMMIT_AT_ONCE), id, generation, commit, now)
            .bind(tip.last_sequence)
            .bind(blobs.iter().map(|b| b.id).collect::<Vec<_>>())
            .bind(blobs.iter().map(|b| b.key_id.as_str()).collect::<Vec<_>>())
            .bind(blobs.iter().map(|b| b.nonce.as_slice()).collect::<Vec<_>>())
            .bind(
                blobs
                    .iter()
                    .map(|b| b.ciphertext.as_slice())
                    .collect::<Vec<_>>(),
            )
            .bind(calls.iter().map(|c| c.key.step as i32).collect::<Vec<_>>())
            .bind(
                calls
                    .iter()
                    .map(|c| slot_name(c.key.slot))
                    .collect::<Vec<_>>(),
            )
            .bind(
                calls
                    .iter()
                    .map(|c| c.key.attempt as i32)
                    .collect::<Vec<_>>(),
            )
            .bind(calls.iter().map(|c| c.phase.as_str()).collect::<Vec<_>>())
            .bind(
                calls
                    .iter()
                    .map(|c| c.idempotency_key.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(
                calls
                    .iter()
                    .map(|c| c.result.as_ref().map(|b| b.id))
                    .collect::<Vec<_>>(),
            )
            .bind(calls.iter().map(|c| c.usage.is_some()).collect::<Vec<_>>())
            .bind(
                calls
                    .iter()
                    .map(|c| usage(c).input_tokens as i64)
                    .collect::<Vec<_>>(),
            )
            .bind(
                calls
                    .iter()
                    .map(|c| usage(c).output_tokens as i64)
                    .collect::<Vec<_>>(),
            )
            .bind(
                calls
                    .iter()
                    .map(|c| usage(c).cached_input_tokens as i64)
                    .collect::<Vec<_>>(),
            )
            .bind(
                calls
                    .iter()
                    .map(|c| usage(c).cost_micros.map(|m| m as i64))
                    .collect::<Vec<_>>(),
            )
            .bind(CLEARED)
            .bind(sequences)
            .bind(kinds)
            .bind(event_keys)
            .bind(event_bytes);
        let row = if Self::rest_is_empty(commit, tip.has_parent) {
            // One statement is one transaction: nothing else to wait for.
            query.fetch_optional(&self.pool).await?
        } else {
            let mut tx = self.pool.begin().await?;
            let Some(row) = query.fetch_optional(&mut *tx).await? else {
                tx.rollback().await?;
                return Ok(None);
            };
            if let Err(err) =
                Self::commit_rest(&mut tx, &self.seal, id, commit, tip.has_parent, now).await
            {
                tx.rollback().await?;
                return Err(err);
            }
            tx.commit().await?;
            Some(row)
        };
        row.map(|row| row.try_get::<i64, _>("last_sequence"))
            .transpose()
            .map_err(StoreError::from)
    }

    /// Writes `commit` the usual way, in a transaction of its own (`write_commit`), and keeps
    /// what it left as the execution's tip.
    pub(crate) async fn commit_in_transaction(
        &self,
        id: ExecutionId,
        generation: i64,
        commit: Commit,
    ) -> Result<i64, StoreError> {
        let mut tx = self.pool.begin().await?;
        match Self::write_commit(&mut tx, &self.seal, id, generation, &commit).await {
            Ok((last, has_parent)) => match tx.commit().await {
                Ok(()) => {
                    self.after_commit(id, generation, &commit, last, has_parent);
                    Ok(last)
                }
                Err(err) => {
                    self.tips.forget(id);
                    Err(err.into())
                }
            },
            Err(err) => {
                self.tips.forget(id);
                tx.rollback().await?;
                Err(err)
            }
        }
    }

    /// Keeps what `commit`, written at `last`, left of execution `id` for the next commit's
    /// one statement, or forgets it when its owner let it go.
    pub(crate) fn after_commit(
        &self,
        id: ExecutionId,
        generation: i64,
        commit: &Commit,
        last: i64,
        has_parent: bool,
    ) {
        if commit
            .state
            .as_ref()
            .is_some_and(|s| s.release || s.state.is_terminal())
        {
            self.tips.forget(id);
        } else {
            self.tips.set(
                id,
                Tip {
                    generation,
                    last_sequence: last,
                    has_parent,
                },
            );
        }
    }

    /// Keeps `tip` of execution `id` for its next commit.
    pub(crate) fn remember_tip(&self, id: ExecutionId, tip: Tip) {
        self.tips.set(id, tip);
    }

    /// Forgets the tip of execution `id`.
    pub(crate) fn forget_tip(&self, id: ExecutionId) {
        self.tips.forget(id);
    }

    /// Publishes `events` as sequences `first`, `first + 1`, ...; each payload sealed for its
    /// row, the kind in the clear.
    pub(crate) async fn insert_events(
        tx: &mut Transaction<'_, Postgres>,
        seal: &RowSeal,
        id: ExecutionId,
        first: i64,
        events: &[EventKind],
    ) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut sequences = Vec::with_capacity(events.len());
        let mut kinds = Vec::with_capacity(events.len());
        let mut key_ids = Vec::with_capacity(events.len());
        let mut sealed = Vec::with_capacity(events.len());
        for (i, event) in events.iter().enumerate() {
            let sequence = first + i as i64;
            let value = seal.seal_event(id, sequence, event)?;
            sequences.push(sequence);
            kinds.push(event_type(event));
            key_ids.push(value.key_id);
            sealed.push(value.bytes);
        }
        sqlx::query(
            "INSERT INTO events (execution_id, sequence, kind, payload, key_id, sealed, at) \
             SELECT $1, s, k, $4, i, b, $7 FROM UNNEST($2::bigint[], $3::text[], $5::text[], $6::bytea[]) AS t(s, k, i, b)",
        )
        .bind(id.as_uuid())
        .bind(&sequences)
        .bind(&kinds)
        .bind(CLEARED)
        .bind(&key_ids)
        .bind(&sealed)
        .bind(now_ms())
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Renews this node's leases (see `Store::renew`).
    pub(crate) async fn renew_leases(
        &self,
        node: &str,
        lease_ms: i64,
        owned: &[(ExecutionId, i64)],
    ) -> Result<Vec<ExecutionId>, StoreError> {
        if owned.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Uuid> = owned.iter().map(|(id, _)| id.as_uuid()).collect();
        let generations: Vec<i64> = owned.iter().map(|(_, g)| *g).collect();
        let rows = sqlx::query(
            "UPDATE executions e SET lease_expires_at = $1 \
             FROM UNNEST($2::uuid[], $3::bigint[]) AS o(id, generation) \
             WHERE e.id = o.id AND e.generation = o.generation AND e.owner_node = $4 \
             RETURNING e.id",
        )
        .bind(now_ms() + lease_ms)
        .bind(&ids)
        .bind(&generations)
        .bind(node)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok(row.try_get::<Uuid, _>("id")?.into()))
            .collect()
    }

    /// Marks the signals a step handled, in one statement.
    pub(crate) async fn mark_handled(
        tx: &mut Transaction<'_, Postgres>,
        id: ExecutionId,
        numbers: &[i64],
        now: Millis,
    ) -> Result<(), StoreError> {
        if numbers.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "UPDATE signals SET handled_at = $3 WHERE execution_id = $1 AND number = ANY($2)",
        )
        .bind(id.as_uuid())
        .bind(numbers)
        .bind(now)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }
}
