//! The durable execution engine.
//!
//! - [`Engine`]: submit work, observe its events, signal it; one per process.
//! - `runner`: claims work and keeps leases; takeover adds one to the generation.
//! - `program`: the one loop for recovery, owner checks, cancellation and phase failures.
//! - `scope`: [`RunScope`], a phase's resources and its gate.
//! - `workflow`: the [`Workflow`] trait features implement, and the [`Registry`].
//! - `signals` / `pg_wake`: wake-ups inside a node and between nodes.
//! - `observe`: reading an execution's events from a cursor.
//! - `clock`: the [`Clock`] durable timers are read against (a [`TestClock`] in tests).

mod clock;
mod intake;
mod observe;
mod outbox;
mod pg_wake;
mod program;
mod retry;
mod runner;
mod saved_call;
mod scope;
mod signals;
mod workflow;

use std::sync::Arc;

use futures::stream::BoxStream;
use openbot_schema::{Event, EventKind, ExecutionId};
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;
use uuid::Uuid;

pub use clock::{Clock, SystemClock, TestClock};
pub use observe::{FALLBACK_POLL, OBSERVE_PAGE};
pub use outbox::{OutboxHandler, OutboxHandlers, SIGNAL, SignalMessage};
pub(crate) use program::err_kind as store_error_kind;
pub use program::{LATE_RESULT_GRACE, STORAGE_RETRY_BUDGET, WAKE};
pub use retry::Backoff;
pub use runner::{Runner, RunnerConfig};
pub use saved_call::SavedCalls;
pub use scope::RunScope;
pub use signals::{Hub, Wake};
pub use workflow::{EngineEnd, FailedEnd, Next, PhaseContext, PhaseError, Registry, Workflow};

use crate::sealed::{KeyRing, SealError};
use crate::store::{ExecutionRow, NewExecution, Scope, Store, StoreError, Submitted};

/// An engine failure.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Sealing or opening a record failed.
    #[error(transparent)]
    Seal(#[from] SealError),
    /// The input could not be encoded.
    #[error("invalid input: {0}")]
    Input(String),
}

/// The parts of a node every workflow and the engine share.
pub struct EngineContext {
    /// The database.
    pub store: Arc<dyn Store>,
    /// The key ring for sealed records.
    pub keys: KeyRing,
    /// Wake-ups.
    pub hub: Arc<Hub>,
    /// This node's name; unique among running nodes.
    pub node: String,
    /// The time durable timers are read against.
    pub clock: Arc<dyn Clock>,
    /// This node's runner, for work a submission claims itself.
    pub(crate) intake: intake::Intake,
}

impl std::fmt::Debug for EngineContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineContext")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl EngineContext {
    /// Seals a value as JSON under a new record ID.
    pub fn seal_json<T: Serialize>(
        &self,
        value: &T,
    ) -> Result<crate::store::SealedBlob, EngineError> {
        let bytes = serde_json::to_vec(value).map_err(|e| EngineError::Input(e.to_string()))?;
        Ok(self.keys.seal(Uuid::now_v7(), &bytes)?)
    }

    /// Commits one step of execution `id` as owner `generation` and, once it is committed,
    /// wakes whoever waits for its events and outbox messages, and the runners for its
    /// children.
    pub async fn commit(
        &self,
        id: ExecutionId,
        generation: i64,
        commit: crate::store::Commit,
    ) -> Result<i64, StoreError> {
        let events = !commit.events.is_empty();
        let outbox = !commit.outbox.is_empty();
        let children = !commit.children.is_empty();
        // The outside calls this commit ends, counted once it landed.
        let ended = crate::telemetry::metrics::CallsEnded::of(&commit.calls);
        let span = crate::telemetry::spans::commit(commit.state.as_ref().map(|s| s.state.as_str()));
        let started = std::time::Instant::now();
        let last = self
            .store
            .commit(id, generation, commit)
            .instrument(span.clone())
            .await;
        crate::telemetry::spans::end(&span);
        let last = last?;
        crate::telemetry::metrics::commit_ended(started.elapsed());
        ended.count();
        if children {
            self.hub.announce(Wake::Work);
        }
        if events {
            self.hub.announce(Wake::Events(id));
        }
        if outbox {
            self.hub.announce(Wake::Outbox);
        }
        Ok(last)
    }

    /// Asks an execution and every descendant that has not ended to stop; returns the cancel
    /// signal's number.
    pub async fn cancel(&self, id: ExecutionId) -> Result<i64, StoreError> {
        let tree = self.store.cancel_tree(id, true).await?;
        self.wake_cancelled(&tree.cancelling);
        tree.root.ok_or(StoreError::Ended(id))
    }

    /// Asks every descendant of `id` that has not ended to stop, also when `id` itself ended.
    pub async fn cancel_descendants(&self, id: ExecutionId) -> Result<(), StoreError> {
        let tree = self.store.cancel_tree(id, false).await?;
        self.wake_cancelled(&tree.cancelling);
        Ok(())
    }

    /// Cancels `id` (when it has not ended) and every open descendant, each tree in one
    /// transaction; returns how many of them have not ended yet.
    pub async fn cancel_tree(&self, id: ExecutionId) -> Result<usize, StoreError> {
        let tree = match self.store.cancel_tree(id, true).await {
            Err(StoreError::Ended(_)) => self.store.cancel_tree(id, false).await?,
            other => other?,
        };
        self.wake_cancelled(&tree.cancelling);
        Ok(tree.cancelling.len())
    }

    /// Wakes the owners of executions a cancel reached, and the claims of the unowned ones.
    fn wake_cancelled(&self, cancelling: &[ExecutionId]) {
        for id in cancelling {
            self.hub.announce(Wake::Signal(*id));
        }
        if !cancelling.is_empty() {
            self.hub.announce(Wake::Work);
        }
    }

    /// Stores new work, or returns the earlier execution of the same command key and input.
    ///
    /// The key's input covers its target as well as its input: the kind, the Chat, the parent
    /// and the admission gate. The same key and input for another target is a
    /// [`StoreError::CommandKeyConflict`], never the other target's execution.
    pub async fn submit<T: Serialize>(
        &self,
        submission: Submission<'_, T>,
    ) -> Result<Submitted, EngineError> {
        self.submit_with(submission, None, |_| crate::store::TxWrites::default())
            .await
    }

    /// Stores new work with capability `writes` in the same transaction (a row marked for the
    /// work to finish): both are stored or neither. A retry under the same command key finds
    /// the earlier execution and runs no write.
    pub async fn submit_writing<T: Serialize>(
        &self,
        submission: Submission<'_, T>,
        writes: crate::store::TxWrites,
    ) -> Result<Submitted, EngineError> {
        self.submit_with(submission, None, |_| writes).await
    }

    /// Stores new work under a command key that names another request than the submission
    /// itself, with that request's digest: a retry of the request finds this execution only
    /// with the same digest (a steer sent as its own input, whose retry may find a Turn
    /// running and must not join it).
    pub async fn submit_as<T: Serialize>(
        &self,
        submission: Submission<'_, T>,
        request_digest: Vec<u8>,
    ) -> Result<Submitted, EngineError> {
        self.submit_with(submission, Some(request_digest), |_| {
            crate::store::TxWrites::default()
        })
        .await
    }

    /// Stores new work as [`EngineContext::submit_writing`] does, with writes made for the
    /// new execution's ID (a row that names its work, such as a schedule's trigger): both are
    /// stored or neither. A retry under the same command key finds the earlier execution and
    /// runs no write.
    pub async fn submit_writing_for<T: Serialize>(
        &self,
        submission: Submission<'_, T>,
        writes: impl FnOnce(ExecutionId) -> crate::store::TxWrites,
    ) -> Result<Submitted, EngineError> {
        self.submit_with(submission, None, writes).await
    }

    async fn submit_with<T: Serialize>(
        &self,
        submission: Submission<'_, T>,
        request_digest: Option<Vec<u8>>,
        writes: impl FnOnce(ExecutionId) -> crate::store::TxWrites,
    ) -> Result<Submitted, EngineError> {
        let json =
            serde_json::to_vec(submission.input).map_err(|e| EngineError::Input(e.to_string()))?;
        let input_digest = match request_digest {
            Some(digest) => digest,
            None => submission_digest(&submission, &json),
        };
        let input = self.keys.seal(Uuid::now_v7(), &json)?;
        let id = ExecutionId::new();
        let writes = writes(id);
        let new = NewExecution {
            id,
            kind: submission.kind.to_string(),
            scope: submission.scope,
            command_key: submission.command_key,
            input_digest,
            input,
            parent_id: submission.parent_id,
            chat_id: submission.chat_id,
            admission_gate: submission.admission_gate,
            events: submission.events,
        };
        // With room on this node's runner the submission claims its own work (`intake.rs`).
        let room = self.intake.reserve(submission.kind);
        let claim_for = room.as_ref().map(intake::Room::claim_for);
        let span = crate::telemetry::spans::submit(submission.kind);
        let submitted = self
            .store
            .submit_claiming(new, writes, claim_for.as_ref())
            .instrument(span.clone())
            .await;
        if let Ok((Submitted::Created(id), _)) = &submitted {
            span.record("execution", tracing::field::display(id));
        }
        // The submit ends with its transaction, before the handoff.
        crate::telemetry::spans::end(&span);
        let (submitted, claim) = submitted?;
        if let Submitted::Created(id) = submitted {
            self.hub.announce(Wake::Events(id));
            match (room, claim) {
                (Some(room), Some(claim)) => room.start(claim),
                _ => self.hub.announce(Wake::Work),
            }
        }
        Ok(submitted)
    }

    /// Asks a waiting execution to look at its state again now (its workflow's `next` runs,
    /// and may wait anew): what a feature does when a row its wait depends on changed.
    pub async fn wake(&self, id: ExecutionId) -> Result<i64, StoreError> {
        let number = self.store.signal(id, program::WAKE, "{}").await?;
        self.hub.announce(Wake::Signal(id));
        self.hub.announce(Wake::Work);
        Ok(number)
    }

    /// Opens a sealed record and reads it as JSON.
    pub async fn open_json<T: serde::de::DeserializeOwned>(
        &self,
        id: Uuid,
    ) -> Result<T, EngineError> {
        let blob = self
            .store
            .sealed(id)
            .await?
            .ok_or_else(|| StoreError::Invalid(format!("sealed record {id} is missing")))?;
        self.open_blob_json(&blob)
    }

    /// Opens a sealed record already read and reads it as JSON.
    pub fn open_blob_json<T: serde::de::DeserializeOwned>(
        &self,
        blob: &crate::store::SealedBlob,
    ) -> Result<T, EngineError> {
        let bytes = self.keys.open(blob)?;
        serde_json::from_slice(&bytes).map_err(|e| {
            EngineError::Store(StoreError::Invalid(format!(
                "sealed record {}: {e}",
                blob.id
            )))
        })
    }
}

/// A request to start work.
#[derive(Debug, Clone)]
pub struct Submission<'a, T: Serialize> {
    /// The workflow kind.
    pub kind: &'a str,
    /// Whose work it is.
    pub scope: Scope,
    /// The caller's name for the request.
    pub command_key: Option<String>,
    /// The input, sealed at rest.
    pub input: &'a T,
    /// Events published with the submission.
    pub events: Vec<EventKind>,
    /// The execution that started this one.
    pub parent_id: Option<ExecutionId>,
    /// The Chat of a Turn.
    pub chat_id: Option<Uuid>,
    /// An admission gate that must be open.
    pub admission_gate: Option<Uuid>,
}

impl<'a, T: Serialize> Submission<'a, T> {
    /// Work of `kind` for `scope` with `input`: no command key, no first events, no parent, no
    /// Chat.
    pub fn new(kind: &'a str, scope: Scope, input: &'a T) -> Self {
        Self {
            kind,
            scope,
            command_key: None,
            input,
            events: Vec::new(),
            parent_id: None,
            chat_id: None,
            admission_gate: None,
        }
    }

    /// Deduplicated under `key`: a retry with the same key and input answers the same
    /// execution; the same key for other input is a conflict.
    pub fn with_key(self, key: impl Into<String>) -> Self {
        self.with_optional_key(Some(key.into()))
    }

    /// Deduplicated under `key` when the caller gave one (see [`Submission::with_key`]).
    pub fn with_optional_key(mut self, key: Option<String>) -> Self {
        self.command_key = key;
        self
    }

    /// Published with `events` as the execution's first.
    pub fn with_events(mut self, events: Vec<EventKind>) -> Self {
        self.events = events;
        self
    }

    /// A Turn of `chat`: it waits behind the Chat's earlier Turns and is admitted only while
    /// the Chat's gate is open.
    pub fn turn_of(mut self, chat: Uuid) -> Self {
        self.chat_id = Some(chat);
        self.admission_gate = Some(chat);
        self
    }
}

/// What a submission's command key stands for: its kind, its target (Chat, parent, admission
/// gate) and its input. Each target takes a fixed 17 bytes (a marker, then the ID or zeros)
/// ahead of the input, so no two requests share a digest by shifting bytes between parts.
fn submission_digest<T: Serialize>(submission: &Submission<'_, T>, json: &[u8]) -> Vec<u8> {
    let mut digest = Sha256::new();
    digest.update(submission.kind.as_bytes());
    digest.update([0]);
    let parent = submission.parent_id.map(|p| p.as_uuid());
    for target in [submission.chat_id, parent, submission.admission_gate] {
        match target {
            Some(id) => {
                digest.update([1]);
                digest.update(id.as_bytes());
            }
            None => digest.update([0; 17]),
        }
    }
    digest.update(json);
    digest.finalize().to_vec()
}

/// One node's engine: submit, observe and signal work, and (with a runner) run it.
pub struct Engine {
    cx: Arc<EngineContext>,
    stop: CancellationToken,
    runner: Mutex<Option<Arc<Runner>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("node", &self.cx.node)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Opens the engine on a store. On PostgreSQL it starts one shared listener and one
    /// notifier for wake-ups between nodes.
    pub fn open(store: Arc<dyn Store>, keys: KeyRing, node: String) -> Self {
        Self::open_with_clock(store, keys, node, Arc::new(SystemClock))
    }

    /// Opens the engine as [`Engine::open`] does, reading durable timers against `clock`.
    pub fn open_with_clock(
        store: Arc<dyn Store>,
        keys: KeyRing,
        node: String,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let stop = CancellationToken::new();
        let mut tasks = Vec::new();
        let hub = match store.notification_pool() {
            Some(pool) => {
                let outgoing = Arc::new(signals::Outgoing::default());
                let hub = Hub::shared(Arc::clone(&outgoing));
                tasks.push(pg_wake::spawn_notifier(
                    pool.clone(),
                    outgoing,
                    stop.clone(),
                ));
                tasks.push(pg_wake::spawn_listener(
                    pool,
                    Arc::clone(&hub),
                    stop.clone(),
                ));
                hub
            }
            None => Hub::local(),
        };
        let cx = Arc::new(EngineContext {
            store,
            keys,
            hub,
            node,
            clock,
            intake: intake::Intake::default(),
        });
        Self {
            cx,
            stop,
            runner: Mutex::new(None),
            tasks: Mutex::new(tasks),
        }
    }

    /// The shared parts, for workflows.
    pub fn context(&self) -> &Arc<EngineContext> {
        &self.cx
    }

    /// Starts running work of the registered kinds on this node, and delivering outbox
    /// messages with the built-in handlers.
    pub async fn start_runner(&self, registry: Registry, config: RunnerConfig) {
        self.start_runner_with(registry, OutboxHandlers::default(), config)
            .await;
    }

    /// Starts running work and delivering outbox messages with these handlers.
    pub async fn start_runner_with(
        &self,
        registry: Registry,
        handlers: OutboxHandlers,
        config: RunnerConfig,
    ) {
        let (runner, mut tasks) = Runner::start(
            Arc::clone(&self.cx),
            registry,
            config,
            self.stop.child_token(),
        );
        tasks.push(crate::telemetry::spawn(outbox::dispatch(
            Arc::clone(&self.cx),
            handlers,
            self.stop.child_token(),
        )));
        *self.runner.lock().await = Some(runner);
        self.tasks.lock().await.extend(tasks);
        self.cx.hub.announce(Wake::Work);
        self.cx.hub.announce(Wake::Outbox);
    }

    /// How many executions this node's runner runs now (none without a runner).
    pub async fn running(&self) -> usize {
        self.runner.lock().await.as_ref().map_or(0, |r| r.running())
    }

    /// How many executions this node's runner runs at most at once (none without a runner).
    pub async fn capacity(&self) -> usize {
        self.runner
            .lock()
            .await
            .as_ref()
            .map_or(0, |r| r.capacity())
    }

    /// Stores new work, or returns the earlier execution of the same command key and input
    /// (see [`EngineContext::submit`]).
    pub async fn submit<T: Serialize>(
        &self,
        submission: Submission<'_, T>,
    ) -> Result<Submitted, EngineError> {
        self.cx.submit(submission).await
    }

    /// Stores new work with capability `writes` in the same transaction (a row marked for the
    /// work to finish): both are stored or neither. A retry under the same command key finds
    /// the earlier execution and runs no write.
    pub async fn submit_writing<T: Serialize>(
        &self,
        submission: Submission<'_, T>,
        writes: crate::store::TxWrites,
    ) -> Result<Submitted, EngineError> {
        self.cx.submit_writing(submission, writes).await
    }

    /// Stores new work with writes made for its new ID (see
    /// [`EngineContext::submit_writing_for`]).
    pub async fn submit_writing_for<T: Serialize>(
        &self,
        submission: Submission<'_, T>,
        writes: impl FnOnce(ExecutionId) -> crate::store::TxWrites,
    ) -> Result<Submitted, EngineError> {
        self.cx.submit_writing_for(submission, writes).await
    }

    /// Stores new work under a command key that names another request (see
    /// [`EngineContext::submit_as`]).
    pub async fn submit_as<T: Serialize>(
        &self,
        submission: Submission<'_, T>,
        request_digest: Vec<u8>,
    ) -> Result<Submitted, EngineError> {
        self.cx.submit_as(submission, request_digest).await
    }

    /// The events of an execution after sequence `after`, ending after its last event.
    pub fn observe(
        &self,
        id: ExecutionId,
        after: u64,
    ) -> BoxStream<'static, Result<Event, StoreError>> {
        observe::observe(
            Arc::clone(&self.cx.store),
            Arc::clone(&self.cx.hub),
            id,
            after,
        )
    }

    /// Reads an execution.
    pub async fn execution(&self, id: ExecutionId) -> Result<ExecutionRow, StoreError> {
        self.cx.store.execution(id).await
    }

    /// Asks an execution and every descendant that has not ended to stop. Returns the
    /// signal's number; each moves to `cancelling` and ends `cancelled` once its owner stopped
    /// its work.
    pub async fn cancel(&self, id: ExecutionId) -> Result<i64, StoreError> {
        self.cx.cancel(id).await
    }

    /// Asks every descendant of `id` that has not ended to stop, also when `id` itself ended
    /// (a detached child may outlive its parent).
    pub async fn cancel_descendants(&self, id: ExecutionId) -> Result<(), StoreError> {
        self.cx.cancel_descendants(id).await
    }

    /// Pauses an execution and every descendant that has not ended: each stops sending, lets
    /// its calls in flight save their results, gives up its resources and waits until it is
    /// resumed. Time spent paused does not count against a time limit.
    pub async fn pause(&self, id: ExecutionId) -> Result<(), StoreError> {
        self.cx.store.signal(id, program::PAUSE, "{}").await?;
        self.cx.hub.announce(Wake::Signal(id));
        for child in self.cx.store.open_descendants(id).await? {
            match self.cx.store.signal(child, program::PAUSE, "{}").await {
                Ok(_) | Err(StoreError::Ended(_)) => self.cx.hub.announce(Wake::Signal(child)),
                Err(err) => return Err(err),
            }
        }
        // Waiting work is claimed to take its pause.
        self.cx.hub.announce(Wake::Work);
        Ok(())
    }

    /// Resumes a paused execution and its paused descendants. Fails with
    /// [`StoreError::ParentPaused`] while an ancestor is paused: a child's own resume never
    /// bypasses its parent's pause.
    pub async fn resume(&self, id: ExecutionId) -> Result<(), StoreError> {
        let row = self.cx.store.execution(id).await?;
        if row.state.is_terminal() {
            return Err(StoreError::Ended(id));
        }
        if self.cx.store.ancestor_paused(id).await? {
            return Err(StoreError::ParentPaused(id));
        }
        self.cx.store.resume(id).await?;
        for child in self.cx.store.open_descendants(id).await? {
            self.cx.store.resume(child).await?;
        }
        self.cx.hub.announce(Wake::Work);
        Ok(())
    }

    /// Ends, `interrupted` with a reason, the work whose kind is none of `kinds` (the kinds of
    /// this node's registry). Only for a deployment that has one node (SQLite): there, no other
    /// node can run such work, so it would otherwise wait forever. Returns how many it ended.
    pub async fn interrupt_other_kinds(&self, kinds: &[&str]) -> Result<usize, StoreError> {
        let mut ended = 0;
        loop {
            let page = self.cx.store.other_kinds(kinds, 100).await?;
            if page.is_empty() {
                return Ok(ended);
            }
            for (id, generation, kind) in page {
                let reason =
                    format!("its workflow kind `{kind}` is run by no node of this deployment");
                program::interrupt(
                    &self.cx,
                    id,
                    generation,
                    openbot_schema::ErrorCategory::Configuration,
                    &reason,
                    &reason,
                    crate::store::TxWrites::default(),
                )
                .await;
                // An execution that could not be ended is not read again in this pass.
                if !self.cx.store.execution(id).await?.state.is_terminal() {
                    return Ok(ended);
                }
                ended += 1;
            }
        }
    }

    /// Stops claiming work, stops every phase and gives each execution up so that another
    /// node takes it over at once, then stops the wake-up tasks.
    pub async fn shutdown(&self) {
        if let Some(runner) = self.runner.lock().await.take() {
            runner.release_all().await;
        }
        self.stop.cancel();
        for task in self.tasks.lock().await.drain(..) {
            let _ = task.await;
        }
    }
}
