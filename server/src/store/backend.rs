//! The backend contract: what each database brings to the store bodies written once
//! (`#[both_backends]`). `SqliteStore` and `PostgresStore` implement it, so the compiler checks
//! that both provide every word and every operation the shared bodies use.
//!
//! The dialect words are constants, spliced into SQL at compile time with
//! `const_format::concatcp!` (`concatcp!("SELECT .. FROM executions WHERE id = $1",
//! Store::FOR_UPDATE)`); the three fragments that take a column and a parameter
//! (`bot_in!`, `in_bot_limit!`, `text_in!`) stay templates in `dialect.rs`. What differs in
//! behaviour (batched inserts, lease renewals, how a commit is written) is a method here, with
//! each database's own body in `sqlite.rs` / `postgres.rs`.

use openbot_schema::{EventKind, ExecutionId};
use sqlx::{Pool, Transaction};

use super::migrate::Backend;
use super::records::Commit;
use super::sealing::RowSeal;
use super::tips::Tip;
use super::{StoreError, TxWrites};
use crate::store::records::Millis;

/// One database under the shared store bodies.
// `async fn` here is fine: the trait is the crate's own, and every caller names a concrete
// backend, so the futures' `Send` is known where they are awaited.
#[allow(async_fn_in_trait)]
pub(crate) trait SqlBackend: Send + Sync + Sized + 'static {
    /// The sqlx database.
    type Db: sqlx::Database;

    /// Which database this is.
    const KIND: Backend;
    /// After a read whose rows the transaction then writes: ` FOR UPDATE` on PostgreSQL;
    /// nothing on SQLite, where the one writer already holds the database.
    const FOR_UPDATE: &'static str;
    /// After a read that must see rows stay as they are until the commit: ` FOR SHARE`.
    const FOR_SHARE: &'static str;
    /// After a claim's read: ` FOR UPDATE SKIP LOCKED`, so nodes claim side by side.
    const SKIP_LOCKED: &'static str;
    /// After a text column that orders or compares like Rust's `str`: ` COLLATE "C"`
    /// (SQLite compares text by bytes already).
    const BYTEWISE: &'static str;
    /// After a parameter that holds a UUID or NULL: `::uuid` (a bare `$N IS NULL` has no type
    /// on PostgreSQL).
    const UUID_CAST: &'static str;
    /// After a parameter that holds text or NULL: `::text`.
    const TEXT_CAST: &'static str;

    /// The pool writes use.
    fn writer(&self) -> &Pool<Self::Db>;

    /// The pool reads use (SQLite's read-only connections; the one pool on PostgreSQL).
    fn reader(&self) -> &Pool<Self::Db>;

    /// The pool wake-ups between nodes use (LISTEN/NOTIFY), when the database has one.
    fn notifications(&self) -> Option<sqlx::PgPool>;

    /// The schema version the database is at (0 for an empty one).
    async fn schema_version(&self) -> Result<i64, StoreError>;

    /// Writes `commit` in one statement when this store can (PostgreSQL with a known tip);
    /// hands it back otherwise, to be written the usual way.
    async fn commit_at_once(
        &self,
        id: ExecutionId,
        generation: i64,
        commit: Commit,
    ) -> Result<Result<i64, Commit>, StoreError>;

    /// Writes `commit` the usual way (`write_together`), grouped with others where the
    /// database gains by it; answers the last event sequence.
    async fn commit_in_transaction(
        &self,
        id: ExecutionId,
        generation: i64,
        commit: Commit,
    ) -> Result<i64, StoreError>;

    /// Keeps `tip` of execution `id` for its next commit (a no-op where commits keep none).
    fn remember_tip(&self, id: ExecutionId, tip: Tip);

    /// Forgets the tip of execution `id`.
    fn forget_tip(&self, id: ExecutionId);

    /// Publishes `events` as sequences `first`, `first + 1`, ...; each payload sealed for its
    /// row, the kind in the clear.
    async fn insert_events(
        tx: &mut Transaction<'_, Self::Db>,
        seal: &RowSeal,
        id: ExecutionId,
        first: i64,
        events: &[EventKind],
    ) -> Result<(), StoreError>;

    /// Renews this node's leases of `owned` (execution, generation); answers those it kept.
    async fn renew_leases(
        &self,
        node: &str,
        lease_ms: i64,
        owned: &[(ExecutionId, i64)],
    ) -> Result<Vec<ExecutionId>, StoreError>;

    /// Marks the signals a step handled.
    async fn mark_handled(
        tx: &mut Transaction<'_, Self::Db>,
        id: ExecutionId,
        numbers: &[i64],
        now: Millis,
    ) -> Result<(), StoreError>;

    /// Runs capability writes in `tx`, after the store's own rows.
    async fn run_writes(
        writes: &TxWrites,
        tx: &mut Transaction<'_, Self::Db>,
    ) -> Result<(), StoreError>;
}
