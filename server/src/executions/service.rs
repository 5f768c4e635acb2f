//! The execution use cases. Every public method takes the caller and checks its right first.

use std::sync::Arc;

use openbot_schema::{Action, Execution, ExecutionId, ExecutionKind, Resource, ToolResult};

use crate::engine::Engine;
use crate::identity::{AccessError, Caller};
use crate::store::{ExecutionRow, StoreError, stored_time};
use crate::turns::DeliveryError;

/// Why an execution use case refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecutionError {
    /// No such execution for this caller.
    #[error("execution not found")]
    NotFound,
    /// The caller may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// The execution is not in a state that takes this (it has no such open call).
    #[error("{0}")]
    Conflict(String),
    /// A failure of this server, with its full cause (sealed at the boundary).
    #[error("{0}")]
    Internal(String),
    /// Storage failed, or the execution refused the command (ended, a parent paused).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<AccessError> for ExecutionError {
    fn from(err: AccessError) -> Self {
        Self::Forbidden(err.to_string())
    }
}

/// A command on an execution and its descendants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Stop: it moves to `cancelling` and ends `cancelled` once its work stopped.
    Cancel,
    /// Pause it and its descendants until resumed.
    Pause,
    /// Resume it and its paused descendants (not while a parent is paused).
    Resume,
}

/// The execution use cases. Cheap to clone.
#[derive(Clone)]
pub struct Executions {
    engine: Arc<Engine>,
}

impl Executions {
    /// The use cases on `engine`.
    pub fn new(engine: Arc<Engine>) -> Self {
        Self { engine }
    }

    /// The execution's row, if the caller may see it (no right checked: the callers check
    /// theirs first).
    pub async fn visible(
        &self,
        caller: &Caller,
        id: ExecutionId,
    ) -> Result<ExecutionRow, ExecutionError> {
        self.engine
            .context()
            .store
            .visible_execution(id, &caller.scope(), caller.bot_ids.as_deref())
            .await?
            .ok_or(ExecutionError::NotFound)
    }

    /// The public view of `row`.
    async fn view(&self, row: ExecutionRow) -> Result<Execution, ExecutionError> {
        let kind = match row.kind.as_str() {
            crate::turns::TURN => ExecutionKind::Turn,
            crate::work::TOOL_JOB => ExecutionKind::ToolJob,
            crate::codemode::CODE_RUN => ExecutionKind::CodeRun,
            other => {
                return Err(ExecutionError::Internal(format!(
                    "execution {} has kind `{other}`, which has no public view",
                    row.id
                )));
            }
        };
        // A model reply saved without usage leaves its tokens unknown, which is not zero.
        let calls = self.engine.context().store.calls(row.id).await?;
        let usage_known = !calls.iter().any(|call| {
            call.key.slot == openbot_core::turn::CallSlot::Model
                && call.phase == crate::store::CallPhase::Done
                && call.usage.is_none()
        });
        Ok(Execution {
            id: row.id,
            kind,
            state: row.state,
            chat_id: row.chat_id.map(Into::into),
            outcome: row.outcome,
            usage: row.usage,
            usage_known,
            last_sequence: row.last_sequence.max(0) as u64,
            created_at: stored_time(row.created_at)?,
            updated_at: stored_time(row.updated_at)?,
            reason: row.reason,
        })
    }

    /// An execution the caller may see (the `executions` read right).
    pub async fn get(&self, caller: &Caller, id: ExecutionId) -> Result<Execution, ExecutionError> {
        caller.require(Resource::Executions, Action::Read)?;
        let row = self.visible(caller, id).await?;
        self.view(row).await
    }

    /// The row of an execution whose events the caller may read (the `executions` read
    /// right).
    pub async fn readable(
        &self,
        caller: &Caller,
        id: ExecutionId,
    ) -> Result<ExecutionRow, ExecutionError> {
        caller.require(Resource::Executions, Action::Read)?;
        self.visible(caller, id).await
    }

    /// Runs `command` on an execution the caller may see (the `executions` write right) and
    /// answers the execution as it is then.
    pub async fn command(
        &self,
        caller: &Caller,
        id: ExecutionId,
        command: Command,
    ) -> Result<Execution, ExecutionError> {
        caller.require(Resource::Executions, Action::Write)?;
        self.visible(caller, id).await?;
        match command {
            Command::Cancel => self.engine.cancel(id).await.map(|_| ())?,
            Command::Pause => self.engine.pause(id).await?,
            Command::Resume => self.engine.resume(id).await?,
        }
        let row = self.visible(caller, id).await?;
        self.view(row).await
    }

    /// Delivers the result of a host-tool call the execution waits for; the first result
    /// delivered for a call is used.
    pub async fn deliver(
        &self,
        caller: &Caller,
        id: ExecutionId,
        result: &ToolResult,
    ) -> Result<(), ExecutionError> {
        caller.require(Resource::Executions, Action::Write)?;
        self.visible(caller, id).await?;
        crate::turns::deliver_tool_result(self.engine.context(), id, result)
            .await
            .map_err(|err| match err {
                DeliveryError::NotOpen { .. } => ExecutionError::Conflict(format!(
                    "execution {id} has no open tool call `{}`",
                    result.call_id
                )),
                DeliveryError::Store(err) => ExecutionError::Store(err),
                DeliveryError::Engine(err) => ExecutionError::Internal(err.to_string()),
            })
    }
}
