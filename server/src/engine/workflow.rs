//! Workflows: what a feature gives the engine. The engine runs every workflow through the one
//! Program loop and has no feature branches of its own.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use openbot_core::turn::CallKey;
use openbot_schema::{ErrorCategory, ErrorId, EventKind, ExecutionId, ExecutionState};
use tokio::sync::Notify;

use super::scope::RunScope;
use super::{EngineContext, EngineError};
use crate::store::{Commit, ExecutionRow, Millis, StateChange, StoreError, TxWrites};

/// What one owner of an execution knows while it runs a phase.
#[derive(Clone)]
pub struct PhaseContext {
    /// The node's engine parts.
    pub engine: Arc<EngineContext>,
    /// The execution as read before the phase.
    pub execution: ExecutionRow,
    /// This owner's generation.
    pub generation: i64,
    /// Notified when the execution gets a signal.
    pub signals: Arc<Notify>,
    /// How often in a row a phase may fail on storage before the execution is interrupted.
    pub retry_budget: u32,
    /// Whether `execution` had unhandled signals when it was read (the claim's answer); the
    /// first pass of the program reads the signals only then.
    pub signals_pending: bool,
    /// The execution's sealed input, when the claim brought it (see [`Self::input`]).
    pub input: Option<crate::store::SealedBlob>,
}

/// A failed end, ready to commit: the full cause sealed under a new error record, the public
/// `failed` event and the `failed` state that releases the execution.
#[derive(Debug, Clone)]
pub struct FailedEnd {
    /// The sealed error record's ID, the only public trace of the cause.
    pub error_id: ErrorId,
    /// The `failed` event.
    pub event: EventKind,
    /// The `failed` state with the sealed cause.
    pub change: StateChange,
}

impl PhaseContext {
    /// The execution's input, read as JSON: from the claim when it brought the sealed record
    /// (its submission claimed it), else from the store.
    pub async fn input<T: serde::de::DeserializeOwned>(&self) -> Result<T, EngineError> {
        match &self.input {
            Some(blob) if blob.id == self.execution.input_record => {
                self.engine.open_blob_json(blob)
            }
            _ => self.engine.open_json(self.execution.input_record).await,
        }
    }

    /// The commit of a failed end: its `failed` event and state (see [`Self::failed_end`]),
    /// nothing else.
    pub fn failed_commit(
        &self,
        category: ErrorCategory,
        cause: &str,
    ) -> Result<Commit, PhaseError> {
        let failed = self.failed_end(category, cause)?;
        Ok(Commit {
            events: vec![failed.event],
            state: Some(failed.change),
            ..Commit::default()
        })
    }

    /// Commits an end the engine asked for with nothing of the workflow's own: a cancel as
    /// `job_ended` with the signals it handles, a failure as [`Self::failed_commit`].
    pub async fn commit_plain_end(&self, end: EngineEnd) -> Result<(), PhaseError> {
        let commit = match end {
            EngineEnd::Cancelled { signals } => {
                Commit::job_ended(ExecutionState::Cancelled, signals)
            }
            EngineEnd::Failed { category, cause } => self.failed_commit(category, &cause)?,
        };
        self.engine
            .commit(self.execution.id, self.generation, commit)
            .await?;
        Ok(())
    }

    /// Seals `cause` and builds the failed end of this execution; logs only its category and
    /// error ID.
    pub fn failed_end(
        &self,
        category: ErrorCategory,
        cause: &str,
    ) -> Result<FailedEnd, PhaseError> {
        let blob = self
            .engine
            .keys
            .seal(uuid::Uuid::now_v7(), cause.as_bytes())
            .map_err(|e| PhaseError::Storage(StoreError::Invalid(e.to_string())))?;
        let error_id = ErrorId::from(blob.id);
        tracing::warn!(?category, %error_id, "execution failed");
        Ok(FailedEnd {
            error_id,
            event: EventKind::Failed { category, error_id },
            change: StateChange {
                state: ExecutionState::Failed,
                outcome: None,
                failure: Some((category, blob)),
                wake_at: None,
                unknown_call: None,
                output: None,
                release: true,
                reason: None,
            },
        })
    }
}

/// What comes after the saved state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Run this phase.
    Run(String),
    /// Wait, without an owner, until a time or a signal.
    Wait {
        /// When to wake, if at a time.
        until: Option<Millis>,
    },
    /// Nothing: the execution has ended.
    Done,
}

/// How the engine ends an execution that its phase did not end itself.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineEnd {
    /// Cancel signals (by number) were received.
    Cancelled {
        /// The signals this end handles.
        signals: Vec<i64>,
    },
    /// A failure the phase could not save.
    Failed {
        /// Its public category.
        category: ErrorCategory,
        /// The full cause; sealed, never logged.
        cause: String,
    },
}

/// Why a phase stopped without finishing.
#[derive(Debug, thiserror::Error)]
pub enum PhaseError {
    /// A newer owner took the execution: stop, write nothing.
    #[error("a newer owner holds the execution")]
    Fenced,
    /// Storage failed; the phase runs again from its last saved point.
    #[error("storage: {0}")]
    Storage(#[from] StoreError),
    /// A call's result was lost and it may not be repeated.
    #[error("the result of call {0} is unknown")]
    OutcomeUnknown(CallKey),
    /// The phase's gate closed (a cancel): the engine ends the execution.
    #[error("the phase was cancelled")]
    Cancelled,
    /// The phase failed for good.
    #[error("the phase failed")]
    Failed {
        /// Its public category.
        category: ErrorCategory,
        /// The full cause; sealed, never logged.
        cause: String,
    },
}

impl PhaseError {
    /// A failure for good, of `category`, with its full cause (sealed, never logged).
    pub fn failed(category: ErrorCategory, cause: impl Into<String>) -> Self {
        Self::Failed {
            category,
            cause: cause.into(),
        }
    }
}

impl From<super::EngineError> for PhaseError {
    /// A storage failure keeps its kind (so the engine retries what may pass); a record that
    /// cannot be opened or encoded is invalid stored data.
    fn from(err: super::EngineError) -> Self {
        match err {
            super::EngineError::Store(err) => PhaseError::Storage(err),
            other => PhaseError::Storage(StoreError::Invalid(other.to_string())),
        }
    }
}

/// A feature's workflow.
#[async_trait]
pub trait Workflow: Send + Sync + 'static {
    /// The execution kind it runs, e.g. `turn`.
    fn kind(&self) -> &'static str;

    /// Chooses the next phase from the saved state.
    async fn next(&self, cx: &PhaseContext) -> Result<Next, PhaseError>;

    /// Runs one phase. It must save its progress through generation-checked commits, open
    /// outside calls only while `scope`'s gate is open, and register what it holds with `scope`.
    async fn run(&self, cx: &PhaseContext, phase: &str, scope: &RunScope)
    -> Result<(), PhaseError>;

    /// Saves the end state of an execution the engine ends.
    async fn end(&self, cx: &PhaseContext, end: EngineEnd) -> Result<(), PhaseError>;

    /// What every end of an execution of this kind writes besides its state, without reading
    /// anything (say, releasing what it reserved): the engine adds it to an interruption,
    /// which ends work without asking the workflow, since what broke may be a record its
    /// `end` would read. Each write must be safe to run on any end, once or again.
    fn ending_writes(&self, _id: ExecutionId) -> TxWrites {
        TxWrites::default()
    }

    /// Work that may run only once the phase's resources closed.
    async fn after(&self, _cx: &PhaseContext, _phase: &str) -> Result<(), PhaseError> {
        Ok(())
    }
}

/// The workflows of a node, by kind, and the kinds this build retired.
#[derive(Default, Clone)]
pub struct Registry {
    workflows: HashMap<&'static str, Arc<dyn Workflow>>,
    retired: HashMap<&'static str, &'static str>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a workflow under its kind.
    pub fn register(&mut self, workflow: Arc<dyn Workflow>) {
        self.workflows.insert(workflow.kind(), workflow);
    }

    /// Declares a kind that no node of this build runs any more, with why: its executions are
    /// claimed and end `interrupted` with that reason instead of waiting forever.
    pub fn retire(&mut self, kind: &'static str, reason: &'static str) {
        self.retired.insert(kind, reason);
    }

    /// The kinds this node claims: those registered and those retired.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.workflows
            .keys()
            .chain(self.retired.keys())
            .copied()
            .collect()
    }

    /// Why a kind was retired, if it was.
    pub fn retired(&self, kind: &str) -> Option<&'static str> {
        self.retired.get(kind).copied()
    }

    /// The workflow of a kind.
    pub fn get(&self, kind: &str) -> Option<Arc<dyn Workflow>> {
        self.workflows.get(kind).cloned()
    }
}
