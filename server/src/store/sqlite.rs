//! The SQLite store, the embedded default: one node, one file in WAL mode. One writer
//! connection orders every write; readers use their own connections and never block it.

use openbot_schema::{EventKind, ExecutionId};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Sqlite, Transaction};
use std::sync::Arc;
use std::time::Duration;

use super::backend::SqlBackend;
use super::group_commit::{Group, Pending};
use super::migrate::{self, Backend, SCHEMA_VERSION};
use super::records::*;
use super::sealing::{CLEARED, RowSeal};
use super::tips::Tip;
use super::{StoreError, TxWrites};
use crate::sealed::KeyRing;

/// A commit waiting for the writer: the execution, its owner's generation, the commit.
type Job = (ExecutionId, i64, Commit);

/// A store on SQLite.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    /// The one writer connection.
    pub(crate) pool: SqlitePool,
    /// Connections for reads.
    pub(crate) reader: SqlitePool,
    /// Seals and opens the payloads of events, Turn input, notices and requests.
    pub(crate) seal: RowSeal,
    /// The commits waiting for the writer (`group_commit.rs`): one group at a time.
    pub(crate) group: Arc<Group<Job, i64>>,
}

impl SqliteStore {
    /// Opens the database file at this build's schema version; fails with
    /// [`StoreError::SchemaVersion`] otherwise. `keys` seal the payloads the store writes and
    /// open those it reads (see `crate::store::sealing`); a node passes the ring its engine
    /// uses.
    pub async fn open(path: &std::path::Path, keys: KeyRing) -> Result<Self, StoreError> {
        let (pool, reader) = Self::pools(path, false).await?;
        let store = Self {
            pool,
            reader,
            seal: RowSeal::new(keys),
            group: Arc::new(Group::new(1)),
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

    async fn pools(
        path: &std::path::Path,
        create: bool,
    ) -> Result<(SqlitePool, SqlitePool), StoreError> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(create)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options.read_only(true))
            .await?;
        Ok((pool, reader))
    }

    /// Creates the database file if needed, applies the migrations it lacks, and returns its
    /// version.
    pub async fn migrate(path: &std::path::Path) -> Result<i64, StoreError> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        let mut tx = pool.begin().await?;
        let current = Self::apply_migrations(&mut tx, migrate::SQLITE).await?;
        tx.commit().await?;
        pool.close().await;
        Ok(current.max(SCHEMA_VERSION))
    }

    /// The writer connection pool, for benchmarks.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Writes `group` in one transaction (`write_together`) and answers each commit after the
    /// `COMMIT`; if the transaction fails, every commit hears a passing failure.
    async fn write_group(&self, group: Vec<Pending<Job, i64>>) {
        let commits: Vec<_> = group.iter().map(|p| (p.job.0, p.job.1, &p.job.2)).collect();
        match self.write_together(&commits).await {
            Ok(results) => {
                for (pending, result) in group.into_iter().zip(results) {
                    let _ = pending.answer.send(result.map(|(last, _)| last));
                }
            }
            Err(err) => {
                // Nothing of the group is known to have landed; each commit's owner checks.
                let message = err.to_string();
                for pending in group {
                    let failure = sqlx::Error::Protocol(format!("group commit: {message}"));
                    let _ = pending.answer.send(Err(StoreError::Unavailable(failure)));
                }
            }
        }
    }
}

impl SqlBackend for SqliteStore {
    type Db = sqlx::Sqlite;

    const FOR_UPDATE: &'static str = "";
    const FOR_SHARE: &'static str = "";
    const SKIP_LOCKED: &'static str = "";
    const BYTEWISE: &'static str = "";
    const UUID_CAST: &'static str = "";
    const TEXT_CAST: &'static str = "";

    fn writer(&self) -> &sqlx::Pool<sqlx::Sqlite> {
        &self.pool
    }

    /// The pool of read-only connections.
    fn reader(&self) -> &SqlitePool {
        &self.reader
    }
    /// Which database this is.
    const KIND: Backend = Backend::Sqlite;
    /// The pool wake-ups between nodes use (LISTEN/NOTIFY), when the database has one.
    fn notifications(&self) -> Option<sqlx::PgPool> {
        None
    }
    async fn schema_version(&self) -> Result<i64, StoreError> {
        let exists: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'openbot_schema'",
        )
        .fetch_one(&self.reader)
        .await?;
        if exists == 0 {
            return Ok(0);
        }
        Ok(
            sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM openbot_schema")
                .fetch_one(&self.reader)
                .await?,
        )
    }
    /// SQLite has no one-statement commit (no data-modifying CTEs; its statements run in this
    /// process): every commit is written the usual way, grouped (`commit_in_transaction`).
    async fn commit_at_once(
        &self,
        _id: ExecutionId,
        _generation: i64,
        commit: Commit,
    ) -> Result<Result<i64, Commit>, StoreError> {
        Ok(Err(commit))
    }
    /// Writes `commit` with the commits of other executions waiting for the writer at the
    /// same time, in one transaction (`group_commit.rs`).
    async fn commit_in_transaction(
        &self,
        id: ExecutionId,
        generation: i64,
        commit: Commit,
    ) -> Result<i64, StoreError> {
        self.group
            .submit((id, generation, commit), |group| self.write_group(group))
            .await
    }
    /// Keeps no tips (see `commit_at_once`).
    fn remember_tip(&self, _id: ExecutionId, _tip: Tip) {}
    /// Keeps no tips (see `commit_at_once`).
    fn forget_tip(&self, _id: ExecutionId) {}
    /// Publishes `events` as sequences `first`, `first + 1`, ...; each payload sealed for its
    /// row, the kind in the clear.
    async fn insert_events(
        tx: &mut Transaction<'_, Sqlite>,
        seal: &RowSeal,
        id: ExecutionId,
        first: i64,
        events: &[EventKind],
    ) -> Result<(), StoreError> {
        let at = now_ms();
        for (i, event) in events.iter().enumerate() {
            let sequence = first + i as i64;
            let sealed = seal.seal_event(id, sequence, event)?;
            sqlx::query("INSERT INTO events (execution_id, sequence, kind, payload, key_id, sealed, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
                .bind(id.as_uuid())
                .bind(sequence)
                .bind(event_type(event))
                .bind(CLEARED)
                .bind(&sealed.key_id)
                .bind(&sealed.bytes)
                .bind(at)
                .execute(&mut **tx)
                .await?;
        }
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
        let expires = now_ms() + lease_ms;
        let mut tx = self.pool.begin().await?;
        let mut kept = Vec::with_capacity(owned.len());
        for (id, generation) in owned {
            let updated = sqlx::query(
                "UPDATE executions SET lease_expires_at = ?1 WHERE id = ?2 AND generation = ?3 AND owner_node = ?4",
            )
            .bind(expires)
            .bind(id.as_uuid())
            .bind(generation)
            .bind(node)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if updated == 1 {
                kept.push(*id);
            }
        }
        tx.commit().await?;
        Ok(kept)
    }
    /// Marks the signals a step handled.
    async fn mark_handled(
        tx: &mut Transaction<'_, Sqlite>,
        id: ExecutionId,
        numbers: &[i64],
        now: Millis,
    ) -> Result<(), StoreError> {
        for number in numbers {
            sqlx::query(
                "UPDATE signals SET handled_at = $3 WHERE execution_id = $1 AND number = $2",
            )
            .bind(id.as_uuid())
            .bind(number)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }

    async fn run_writes(
        writes: &TxWrites,
        tx: &mut Transaction<'_, Sqlite>,
    ) -> Result<(), StoreError> {
        writes.on_sqlite(tx).await
    }
}
