//! The PostgreSQL store: several nodes share one database; rows locked with `FOR UPDATE`
//! order writes to one execution, and `SKIP LOCKED` lets nodes claim work side by side.

use openbot_schema::{EventKind, ExecutionId};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Postgres, Row, Transaction};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

use super::backend::SqlBackend;
use super::group_commit::Group;
use super::migrate::{self, Backend, SCHEMA_VERSION};
use super::pg_commits::{GROUP_WRITERS, RowsJob, Written};
use super::records::*;
use super::sealing::{CLEARED, RowSeal};
use super::tips::{Tip, Tips};
use super::{StoreError, TxWrites};
use crate::sealed::KeyRing;

/// A store on PostgreSQL.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pub(crate) pool: PgPool,
    /// Seals and opens the payloads of events, Turn input, notices and requests.
    pub(crate) seal: RowSeal,
    /// What this store last wrote of the executions its node runs (`commit_at_once`).
    pub(crate) tips: Arc<Tips>,
    /// The commits waiting to be written together (`pg_commits.rs`).
    pub(crate) group: Arc<Group<RowsJob, Written>>,
}

impl PostgresStore {
    /// Connects to a database at this build's schema version; fails with
    /// [`StoreError::SchemaVersion`] otherwise. `keys` seal the payloads the store writes and
    /// open those it reads (see `crate::store::sealing`); every node of a deployment has
    /// the same ring, and a node passes the ring its engine uses.
    pub async fn connect(
        url: &str,
        max_connections: u32,
        keys: KeyRing,
    ) -> Result<Self, StoreError> {
        // A frozen or dead client must not hold row locks for long: its transaction is ended
        // by the server, so takeover is never blocked by a lock of a lost owner.
        let options = PgConnectOptions::from_str(url)?;
        // The URL's `application_name` (an operator naming a node's connections) is kept.
        let named = options.get_application_name().is_some();
        let options = if named {
            options
        } else {
            options.application_name("openbot")
        };
        let options = options.options([
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
            group: Arc::new(Group::new(GROUP_WRITERS)),
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

    /// The connection pool, for LISTEN/NOTIFY and benchmarks.
    pub fn pool(&self) -> &PgPool {
        &self.pool
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
}

impl SqlBackend for PostgresStore {
    type Db = sqlx::Postgres;

    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const FOR_SHARE: &'static str = " FOR SHARE";
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const BYTEWISE: &'static str = " COLLATE \"C\"";
    const UUID_CAST: &'static str = "::uuid";
    const TEXT_CAST: &'static str = "::text";

    fn writer(&self) -> &sqlx::Pool<sqlx::Postgres> {
        &self.pool
    }

    /// The one pool.
    fn reader(&self) -> &sqlx::PgPool {
        &self.pool
    }

    async fn commit_at_once(
        &self,
        id: ExecutionId,
        generation: i64,
        commit: Commit,
    ) -> Result<Result<i64, Commit>, StoreError> {
        self.commit_at_once_rows(id, generation, commit).await
    }

    /// Which database this is.
    const KIND: Backend = Backend::Postgres;
    /// The pool wake-ups between nodes use (LISTEN/NOTIFY), when the database has one.
    fn notifications(&self) -> Option<sqlx::PgPool> {
        Some(self.pool.clone())
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
    /// Writes `commit` the usual way, in a transaction of its own (`write_together`), and keeps
    /// what it left as the execution's tip.
    async fn commit_in_transaction(
        &self,
        id: ExecutionId,
        generation: i64,
        commit: Commit,
    ) -> Result<i64, StoreError> {
        let written = self.write_together(&[(id, generation, &commit)]).await;
        match written.map_err(StoreError::from).and_then(|mut results| {
            results
                .pop()
                .unwrap_or_else(|| Err(super::group_commit::lost()))
        }) {
            Ok((last, has_parent)) => {
                self.after_commit(id, generation, &commit, last, has_parent);
                Ok(last)
            }
            Err(err) => {
                self.tips.forget(id);
                Err(err)
            }
        }
    }
    /// Keeps `tip` of execution `id` for its next commit.
    fn remember_tip(&self, id: ExecutionId, tip: Tip) {
        self.tips.set(id, tip);
    }
    /// Forgets the tip of execution `id`.
    fn forget_tip(&self, id: ExecutionId) {
        self.tips.forget(id);
    }
    /// Publishes `events` as sequences `first`, `first + 1`, ...; each payload sealed for its
    /// row, the kind in the clear.
    async fn insert_events(
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
    /// Renews this node's leases (see `ExecutionStore::renew`).
    async fn renew_leases(
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
            // The rows locked in the order of their IDs first, as group commits lock them
            // (`pg_commits.rs`), so the two never wait for each other in a circle.
            "WITH l AS (SELECT x.id FROM executions x WHERE x.id = ANY($2) ORDER BY x.id FOR NO KEY UPDATE) \
             UPDATE executions e SET lease_expires_at = $1 \
             FROM UNNEST($2::uuid[], $3::bigint[]) AS o(id, generation) \
             WHERE e.id = o.id AND e.generation = o.generation AND e.owner_node = $4 \
                 AND (SELECT count(*) FROM l) >= 0 \
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
    async fn mark_handled(
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

    async fn run_writes(
        writes: &TxWrites,
        tx: &mut Transaction<'_, Postgres>,
    ) -> Result<(), StoreError> {
        writes.on_postgres(tx).await
    }
}
