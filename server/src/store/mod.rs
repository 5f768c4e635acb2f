//! Storage: one [`Store`] interface with two implementations on sqlx. SQLite is the embedded
//! default (one node); PostgreSQL is the multi-node engine. One conformance suite checks both.
//!
//! Every write that changes an execution's state checks its generation in the same
//! transaction, so an old owner can never advance the state of work a newer owner holds.

#[macro_use]
mod dialect;
mod error;
mod group_commit;
mod migrate;
mod pg_commits;
mod postgres;
pub mod records;
mod rows;
pub(crate) mod sealing;
mod sql;
mod sqlite;
mod statements;
mod tips;
#[macro_use]
mod tx_write;

use async_trait::async_trait;
use openbot_core::turn::{CallKey, CallSlot};
use openbot_schema::{BotId, Event, ExecutionId};
use uuid::Uuid;

mod backend;
pub(crate) use backend::SqlBackend;
pub(crate) use dialect::sql_store;
pub use error::StoreError;
pub use migrate::{Backend, SCHEMA_VERSION};
/// Marks an inline module whose items are a store body written once: expanded for SQLite and
/// PostgreSQL (`sql_store!` in `dialect.rs` says what each sees).
pub(crate) use openbot_server_macros::both_backends;
pub use postgres::PostgresStore;
pub use records::*;
pub(crate) use tx_write::tx_write;
pub use tx_write::{TxWrite, TxWrites};

/// How often an outbox message is tried before it waits for a person.
pub const OUTBOX_ATTEMPTS: i32 = 20;
pub use sqlite::SqliteStore;

/// The operations the engine needs from a database: one trait per role, so a part of the
/// engine (or a test double) names the role it uses, and `Store` is all of them.
pub trait Store:
    ExecutionStore
    + CallStore
    + EventStore
    + ChatQueueStore
    + SignalStore
    + OutboxStore
    + RequestStore
    + RecordStore
    + Send
    + Sync
    + 'static
{
    /// Which database this is.
    fn backend(&self) -> Backend;

    /// A pool for wake-ups between nodes (LISTEN/NOTIFY), when the database has them.
    fn notification_pool(&self) -> Option<sqlx::PgPool> {
        None
    }
}

/// Executions: submitting, claiming, leasing, committing, reading, pausing and cancelling them, and the trees of work they form.
#[async_trait]
pub trait ExecutionStore: Send + Sync {
    /// Stores a new execution with its sealed input and first events, or, when the command
    /// key was seen with the same input digest, returns the earlier execution. The same key
    /// with another digest fails with [`StoreError::CommandKeyConflict`].
    async fn submit(&self, new: NewExecution) -> Result<Submitted, StoreError>;

    /// [`ExecutionStore::submit`], with capability `writes` in the same transaction: the execution is
    /// stored only with them, and a write that fails (or refuses) stores neither. When the
    /// command key names an earlier execution, the writes are not run.
    async fn submit_writing(
        &self,
        new: NewExecution,
        writes: TxWrites,
    ) -> Result<Submitted, StoreError>;

    /// [`ExecutionStore::submit_writing`] that, with `claim`, also claims the new execution for that
    /// node in the same transaction when it may start now (a Chat's Turn only when no earlier
    /// Turn of the Chat is still open, as [`ExecutionStore::claim`] orders them): generation 1, the
    /// lease from now, `running`. The claim is returned only for a new execution it took; an
    /// earlier execution of the command key, or one that must wait, is left to the claims.
    async fn submit_claiming(
        &self,
        new: NewExecution,
        writes: TxWrites,
        claim: Option<&ClaimFor>,
    ) -> Result<(Submitted, Option<Claim>), StoreError>;

    /// Claims up to `limit` executions that need an owner: queued, or owned by a lease that
    /// lapsed, or waiting with a wake time that passed, of the `kinds` this node runs. A Chat's
    /// Turns are claimed one at a time, in order. Each claim adds one to the generation.
    async fn claim(
        &self,
        node: &str,
        kinds: &[&str],
        lease_ms: i64,
        limit: i64,
    ) -> Result<Vec<Claim>, StoreError> {
        Ok(self
            .claim_due(node, kinds, lease_ms, limit, now_ms())
            .await?
            .claims)
    }

    /// Claims as [`ExecutionStore::claim`] does, with the waiting executions whose wake time is at or
    /// before `timers_due` (the node's [`crate::engine::Clock`]); leases are read against the
    /// system's time. A claimed row that cannot be read fails only itself: it comes back in
    /// [`Claimed::damaged`], owned by this claim, and the others are claimed as usual.
    async fn claim_due(
        &self,
        node: &str,
        kinds: &[&str],
        lease_ms: i64,
        limit: i64,
        timers_due: Millis,
    ) -> Result<Claimed, StoreError>;

    /// Extends the leases of `owned`; returns those this node still owns.
    async fn renew(
        &self,
        node: &str,
        lease_ms: i64,
        owned: &[(ExecutionId, i64)],
    ) -> Result<Vec<ExecutionId>, StoreError>;

    /// Gives up an execution without changing its state, so another node may take it at once.
    async fn release(&self, id: ExecutionId, generation: i64) -> Result<(), StoreError>;

    /// Commits one step: call log writes, events, a state change, usage, handled signals and
    /// outbox messages, in one transaction, if `generation` still owns the execution.
    /// Returns the sequence of the last event (or the current last sequence).
    async fn commit(
        &self,
        id: ExecutionId,
        generation: i64,
        commit: Commit,
    ) -> Result<i64, StoreError>;

    /// Saves a result that an owner got after it lost the execution. The result is kept in
    /// the call log (marked late) but publishes nothing and changes no state, except that an
    /// execution waiting in `outcome_unknown` for exactly this call is queued again to use it.
    /// `writes` commit with it (a late model result's usage settlement).
    async fn save_late_result(
        &self,
        id: ExecutionId,
        generation: i64,
        call: CallWrite,
        writes: TxWrites,
    ) -> Result<(), StoreError>;

    /// Reads an execution.
    async fn execution(&self, id: ExecutionId) -> Result<ExecutionRow, StoreError>;

    /// Reads an execution only if a reader of `scope` limited to `bot_ids` may see it: it is
    /// of `scope`, and with a Bot limit the root of its tree (the execution itself, else the
    /// ancestor with no parent) is a Turn of a Chat of one of those Bots. A child (tool job,
    /// delegated Turn) is the work of the Bot of the Chat its tree works for, not of the Bot
    /// it runs. `None` when it is missing or not visible, so both look the same.
    async fn visible_execution(
        &self,
        id: ExecutionId,
        scope: &Scope,
        bot_ids: Option<&[BotId]>,
    ) -> Result<Option<ExecutionRow>, StoreError>;

    /// When this node next has something to do: the earliest lapsing lease of another node's
    /// work or wake time of waiting work, or `None` when nothing is scheduled.
    async fn next_wake(&self, node: &str) -> Result<Option<Millis>, StoreError>;

    /// How many executions there are of each (kind, state), across the cluster: what the
    /// `openbot_executions` metric shows.
    async fn execution_counts(&self) -> Result<Vec<(String, String, i64)>, StoreError>;

    /// This node's database pools now: (pool, open connections, idle connections). On SQLite
    /// the reader and the writer may be one pool, shown twice.
    fn pool_use(&self) -> Vec<(&'static str, u32, u32)>;

    /// Cancels a tree in one transaction: every execution of it that has not ended (`id`
    /// itself with `with_root`, and all its descendants) gets a cancel signal, unless one
    /// waits for it already (signals deduplicate), and moves to `cancelling` as
    /// [`SignalStore::signal`] does. A crash cannot leave part of the tree uncancelled. With
    /// `with_root`, an `id` that ended is [`StoreError::Ended`] and nothing is written.
    async fn cancel_tree(
        &self,
        id: ExecutionId,
        with_root: bool,
    ) -> Result<CancelledTree, StoreError>;

    /// Pauses an execution its owner `generation` holds: it waits with no owner and no wake
    /// time until it is resumed, and `handled` pause signals are marked handled. Returns
    /// `false`, changing nothing, when a resume dropped those signals meanwhile.
    async fn pause(
        &self,
        id: ExecutionId,
        generation: i64,
        handled: Vec<i64>,
    ) -> Result<bool, StoreError>;

    /// Resumes an execution: a paused one is claimable again at once and its paused time is
    /// added up; a pause not yet handled is dropped. Returns whether anything changed.
    async fn resume(&self, id: ExecutionId) -> Result<bool, StoreError>;

    /// Whether an ancestor of the execution is paused (or asked to pause).
    async fn ancestor_paused(&self, id: ExecutionId) -> Result<bool, StoreError>;

    /// The children of an execution that have not ended; with `attached_only`, only those it
    /// waits for.
    async fn open_children(
        &self,
        id: ExecutionId,
        attached_only: bool,
    ) -> Result<Vec<ExecutionId>, StoreError>;

    /// Every descendant of an execution that has not ended (children, their children, ...).
    async fn open_descendants(&self, id: ExecutionId) -> Result<Vec<ExecutionId>, StoreError>;
}

/// The call log: every outside call of an execution, and the calls whose outcome is unknown.
#[async_trait]
pub trait CallStore: Send + Sync {
    /// The latest attempt of a call slot; a saved result of any attempt wins over a later
    /// attempt without one.
    async fn latest_call(
        &self,
        id: ExecutionId,
        step: u32,
        slot: CallSlot,
    ) -> Result<Option<CallRow>, StoreError>;

    /// The whole call log of an execution, for audit, in key order.
    async fn calls(&self, id: ExecutionId) -> Result<Vec<CallRow>, StoreError>;

    /// Resolves a call in `outcome_unknown` with a result (or a decision recorded as one) and
    /// queues the execution again. Fails with [`StoreError::Ended`] unless the execution waits
    /// for exactly this call.
    async fn resolve_unknown(
        &self,
        id: ExecutionId,
        key: CallKey,
        result: SealedBlob,
    ) -> Result<(), StoreError>;

    /// Up to `limit` executions that have not ended and whose kind is none of `kinds`, in ID
    /// order: each with its generation and kind.
    async fn other_kinds(
        &self,
        kinds: &[&str],
        limit: i64,
    ) -> Result<Vec<(ExecutionId, i64, String)>, StoreError>;

    /// Up to `limit` executions of `scope` that wait in `outcome_unknown` for a decision, in ID
    /// order, after the execution `after` when given (the cursor of the previous page); with
    /// `bot_ids`, only the work of those Bots (the Bot of the Chat at the root of its tree).
    async fn unknown_outcomes(
        &self,
        scope: &Scope,
        bot_ids: Option<&[BotId]>,
        after: Option<ExecutionId>,
        limit: i64,
    ) -> Result<Vec<ExecutionRow>, StoreError>;

    /// Records a person's decision on the call an execution in `outcome_unknown` waits for, in
    /// one transaction: the resolution's call log write (a saved result, or the next attempt's
    /// intent) or its give-up signal, its events, the audit entry, and queueing the execution
    /// again. A failing audit write rolls everything back. Fails with
    /// [`StoreError::NotWaiting`], writing nothing, unless the execution waits for exactly
    /// `decision.key` (so a second decision for the same call fails), and with
    /// [`StoreError::NotFound`] when there is no such execution.
    async fn decide_unknown(
        &self,
        id: ExecutionId,
        decision: UnknownDecision,
    ) -> Result<OutcomeDecisionRow, StoreError>;
}

/// The ordered events of an execution, read from a cursor.
#[async_trait]
pub trait EventStore: Send + Sync {
    /// Up to `limit` events after sequence `after`, in order.
    async fn events(
        &self,
        id: ExecutionId,
        after: i64,
        limit: i64,
    ) -> Result<Vec<Event>, StoreError>;

    /// [`EventStore::events`] and, from the same read, whether the execution has ended: an end it
    /// reports comes with every event before it. [`StoreError::NotFound`] when there is no
    /// such execution.
    async fn events_to_end(
        &self,
        id: ExecutionId,
        after: i64,
        limit: i64,
    ) -> Result<TailPage, StoreError>;
}

/// A Chat's input: its queue of Turns, input added to a running Turn, command keys, its admission gate and its notices.
#[async_trait]
pub trait ChatQueueStore: Send + Sync {
    /// Adds input to a running Turn; `None` when it has ended or no longer takes input. With a
    /// `key`, the key is recorded for this execution in the same transaction; a key that is
    /// already recorded adds nothing and fails with [`StoreError::CommandKeyConflict`] (read
    /// it with [`ChatQueueStore::command_key`] to tell a retry from other input).
    async fn add_input(
        &self,
        id: ExecutionId,
        content: String,
        key: Option<KeyWrite>,
    ) -> Result<Option<i64>, StoreError>;

    /// A recorded command key of `scope`.
    async fn command_key(
        &self,
        scope: &Scope,
        key: &str,
    ) -> Result<Option<CommandKeyRow>, StoreError>;

    /// Takes the input that joined the Turn for `step`: input not yet taken is assigned to
    /// `step`; input already assigned to `step` is returned again (replay). With `last` and
    /// nothing to take, the Turn stops taking input, so later input gets a Turn of its own.
    /// Publishes `input_steered` for newly taken input in the same transaction.
    /// Generation-checked. Without `last`, a step that finds nothing to take and took nothing
    /// before writes nothing (one read): the step's model request marks it in its `sending`
    /// commit (`Commit::input_step`), and from that mark on, later input goes to a later step.
    async fn take_inputs(
        &self,
        id: ExecutionId,
        generation: i64,
        step: u32,
        last: bool,
    ) -> Result<Vec<String>, StoreError>;

    /// Whether `take_inputs(id, generation, step, false)` would find input: input not yet
    /// taken, or input `step` took before. One read. Also `true` when `generation` no longer
    /// owns the execution, so that `take_inputs` answers with its refusal.
    async fn inputs_waiting(
        &self,
        id: ExecutionId,
        generation: i64,
        step: u32,
    ) -> Result<bool, StoreError>;

    /// Opens an admission gate (see [`NewExecution::admission_gate`]).
    async fn open_gate(&self, id: Uuid) -> Result<(), StoreError>;

    /// A Chat's executions, in the order they were submitted.
    async fn chat_executions(&self, chat_id: Uuid) -> Result<Vec<ExecutionRow>, StoreError>;

    /// A Chat's executions submitted before `before` (all of them when `None`), in order,
    /// each with its sealed output record when it has one: its history, in one read.
    async fn chat_outputs(
        &self,
        chat_id: Uuid,
        before: Option<ExecutionId>,
    ) -> Result<Vec<ChatOutput>, StoreError>;

    /// Up to `limit` of a Chat's executions in the order they were submitted, from the
    /// execution `from` on (itself included), for paging its history.
    async fn chat_executions_from(
        &self,
        chat_id: Uuid,
        from: Option<ExecutionId>,
        limit: i64,
    ) -> Result<Vec<ExecutionRow>, StoreError>;

    /// The notices kept as a Chat's history, in order.
    async fn chat_notices(&self, chat_id: Uuid) -> Result<Vec<ChatNoticeRow>, StoreError>;

    /// The notices kept as a Chat's history that follow one of the executions `first` to
    /// `last` (both included), in order.
    async fn chat_notices_between(
        &self,
        chat_id: Uuid,
        first: ExecutionId,
        last: ExecutionId,
    ) -> Result<Vec<ChatNoticeRow>, StoreError>;
}

/// Signals to executions.
#[async_trait]
pub trait SignalStore: Send + Sync {
    /// Stores a numbered signal and wakes a waiting execution. A `cancel` also moves a
    /// running execution to `cancelling`.
    async fn signal(&self, id: ExecutionId, kind: &str, payload: &str) -> Result<i64, StoreError>;

    /// The signals not yet handled, in order.
    async fn pending_signals(&self, id: ExecutionId) -> Result<Vec<SignalRow>, StoreError>;
}

/// The outbox: messages a commit sends to other executions, delivered at least once.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Claims up to `limit` undelivered outbox messages for `lease_ms`, oldest first, skipping
    /// messages another dispatcher holds and messages that used up [`OUTBOX_ATTEMPTS`].
    async fn claim_outbox(&self, lease_ms: i64, limit: i64) -> Result<Vec<OutboxRow>, StoreError>;

    /// Records a delivery: delivered, or failed with a reason and tried again from `retry_at`
    /// (until [`OUTBOX_ATTEMPTS`] are used up; then it stays, visible with its reason).
    async fn finish_outbox(
        &self,
        id: i64,
        failure: Option<&str>,
        retry_at: Millis,
    ) -> Result<(), StoreError>;

    /// The outbox messages an execution produced, in order.
    async fn outbox_of(&self, id: ExecutionId) -> Result<Vec<OutboxStatus>, StoreError>;
}

/// Requests (approvals, plans, questions) and their decisions.
#[async_trait]
pub trait RequestStore: Send + Sync {
    /// A request.
    async fn request(&self, id: Uuid) -> Result<Option<RequestRow>, StoreError>;

    /// A request that a reader with `access` may see (see [`RequestStore::requests`]).
    async fn visible_request(
        &self,
        access: &RequestAccess,
        id: Uuid,
    ) -> Result<Option<RequestRow>, StoreError>;

    /// The requests a reader with `access` may see, newest first, only in `state` when given:
    /// of its organization, only its member's work when limited to one, and with a Bot limit
    /// only those for a Chat of one of those Bots. Up to `limit`, after the request at
    /// `before` (its creation time and ID) when given.
    async fn requests(
        &self,
        access: &RequestAccess,
        state: Option<&str>,
        before: Option<crate::paging::CreatedPosition>,
        limit: i64,
    ) -> Result<Vec<RequestRow>, StoreError>;

    /// Closes a pending request, in one transaction: the decision, its audit entry, its notice,
    /// and waking the execution that waits for it. Under the request's lock it checks the
    /// request is still pending and not expired: an expired request is closed `expired` and
    /// the decision grants nothing. Returns the request as it is now.
    async fn decide_request(
        &self,
        id: Uuid,
        decision: RequestDecision,
    ) -> Result<RequestRow, StoreError>;
}

/// Sealed records: inputs, outputs, results and error causes.
#[async_trait]
pub trait RecordStore: Send + Sync {
    /// Stores a sealed record.
    async fn put_sealed(
        &self,
        execution: Option<ExecutionId>,
        blob: SealedBlob,
    ) -> Result<(), StoreError>;

    /// Reads a sealed record.
    async fn sealed(&self, id: Uuid) -> Result<Option<SealedBlob>, StoreError>;

    /// Reads a sealed error record and its category.
    async fn error_record(&self, id: Uuid) -> Result<Option<(String, SealedBlob)>, StoreError>;

    /// Stores a sealed error record that belongs to no step (e.g. a request fault).
    async fn put_error_record(
        &self,
        execution: Option<ExecutionId>,
        category: &str,
        blob: SealedBlob,
    ) -> Result<(), StoreError>;

    /// Seals, with the current key, the payloads that an older build wrote in clear text
    /// (events, Turn input, Chat notices, requests), in batches of a few hundred rows per
    /// transaction; returns how many rows it sealed. `openbot migrate` runs it after the
    /// schema migrations (a migration file has no keys). Safe to run again and beside running
    /// nodes: a row is sealed only while it is still clear, and readers read both forms.
    async fn seal_clear_rows(&self) -> Result<u64, StoreError>;
}
