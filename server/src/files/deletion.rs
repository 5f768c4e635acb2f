//! Deleting a file, as durable work of the organization's `file-deletion` service: the
//! cross-store deletion of a row (the database) and an object (the object store).
//!
//! Order and guarantees: the row is marked deleting (hidden at once) in the transaction that
//! submits the work, so a file is never hidden without work that finishes deleting it. The
//! work deletes the object, trying again with backoff until the store says it is gone (a
//! `not found` is gone), and only then removes the row, in the commit that ends the work. A
//! node that dies between the two writes leaves the work unfinished: another node takes it
//! over, finds the object gone and removes the row. No object is ever left without a row
//! that names it, and repeating any step is safe.

use std::sync::Arc;

use async_trait::async_trait;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use openbot_schema::{ExecutionId, ExecutionState};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::store::FileRow;
use super::writes::{MarkDeleting, RemoveFileRow};
use crate::engine::{
    Backoff, EngineContext, EngineEnd, EngineError, Next, PhaseContext, PhaseError, RunScope,
    Submission, Workflow,
};
use crate::identity::{ServiceIdentity, ServiceOwner};
use crate::store::{Commit, Submitted, TxWrites};
use crate::turns::faults::{FaultPoint, fault};

/// The execution kind of file deletions.
pub const FILE_DELETION: &str = "file_deletion";

/// The saved input of a file deletion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDeletionInput {
    /// The file.
    pub file_id: Uuid,
    /// Where its bytes are.
    pub object_key: String,
}

/// The service that deletes an organization's files.
pub fn file_deletion_service(organization: Uuid) -> ServiceIdentity {
    ServiceIdentity {
        owner: ServiceOwner::Organization(organization),
        name: "file-deletion".into(),
    }
}

/// What starting a file's deletion did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started {
    /// The file was marked deleting with its new work, this execution.
    Started(ExecutionId),
    /// Its deletion was started before (one per file, by its command key): this execution.
    Already(ExecutionId),
    /// The mark found no such file: gone, or not the caller's.
    Missing,
}

/// Starts the deletion of `file`: its work submitted (once per file) with `mark` (the row's
/// `deleting` mark; `None` to submit the work of a row marked already), in one transaction.
pub async fn start_deletion(
    engine: &EngineContext,
    file: &FileRow,
    mark: Option<MarkDeleting>,
) -> Result<Started, EngineError> {
    start_deletion_keyed(engine, file, mark, format!("file-deletion:{}", file.id)).await
}

/// [`start_deletion`] under another command key (a new attempt after one that ended without
/// deleting).
pub(super) async fn start_deletion_keyed(
    engine: &EngineContext,
    file: &FileRow,
    mark: Option<MarkDeleting>,
    command_key: String,
) -> Result<Started, EngineError> {
    let input = FileDeletionInput {
        file_id: file.id,
        object_key: file.object_key.clone(),
    };
    let submission = Submission::new(
        FILE_DELETION,
        file_deletion_service(file.organization_id).scope(),
        &input,
    )
    .with_key(command_key);
    let mark = mark.map(Arc::new);
    let writes = match &mark {
        Some(mark) => TxWrites(vec![Arc::clone(mark) as Arc<dyn crate::store::TxWrite>]),
        None => TxWrites::default(),
    };
    match engine.submit_writing(submission, writes).await {
        Ok(Submitted::Created(id)) => Ok(Started::Started(id)),
        Ok(Submitted::Existing(id)) => Ok(Started::Already(id)),
        Err(_) if mark.as_ref().is_some_and(|m| m.missing()) => Ok(Started::Missing),
        Err(err) => Err(err),
    }
}

/// Runs file deletions against the object store.
pub struct FileDeletionWorkflow {
    objects: Arc<dyn ObjectStore>,
}

impl FileDeletionWorkflow {
    /// A workflow that deletes objects from `objects`.
    pub fn new(objects: Arc<dyn ObjectStore>) -> Self {
        Self { objects }
    }
}

fn ended(state: ExecutionState, signals: Vec<i64>, writes: TxWrites) -> Commit {
    Commit {
        writes,
        ..Commit::job_ended(state, signals)
    }
}

#[async_trait]
impl Workflow for FileDeletionWorkflow {
    fn kind(&self) -> &'static str {
        FILE_DELETION
    }

    async fn next(&self, cx: &PhaseContext) -> Result<Next, PhaseError> {
        Ok(if cx.execution.state.is_terminal() {
            Next::Done
        } else {
            Next::Run("delete".into())
        })
    }

    async fn run(
        &self,
        cx: &PhaseContext,
        _phase: &str,
        scope: &RunScope,
    ) -> Result<(), PhaseError> {
        let input: FileDeletionInput = cx.input().await.map_err(PhaseError::from)?;
        let path = ObjectPath::from(input.object_key.as_str());
        let cancelled = scope.cancellation();
        let mut backoff = Backoff::new();
        // The object first, until the store says it is gone.
        loop {
            match self.objects.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => break,
                Err(_) => {
                    // The cause may name the bucket and its endpoint: it stays out of the log.
                    tracing::warn!(file = %input.file_id, "a file's object could not be deleted; trying again");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff.next_delay()) => {}
                        _ = cancelled.cancelled() => return Err(PhaseError::Cancelled),
                    }
                }
            }
        }
        fault(FaultPoint::AfterObjectDeleted);
        // Then the row, with the work's end.
        cx.engine
            .commit(
                cx.execution.id,
                cx.generation,
                ended(
                    ExecutionState::Completed,
                    Vec::new(),
                    TxWrites::one(RemoveFileRow { id: input.file_id }),
                ),
            )
            .await?;
        Ok(())
    }

    async fn end(&self, cx: &PhaseContext, end: EngineEnd) -> Result<(), PhaseError> {
        // A cancelled or failed deletion keeps the row marked deleting: the retention sweep
        // finds such rows and starts their deletion again.
        let commit = match end {
            EngineEnd::Cancelled { signals } => {
                ended(ExecutionState::Cancelled, signals, TxWrites::default())
            }
            EngineEnd::Failed { category, cause } => cx.failed_commit(category, &cause)?,
        };
        cx.engine
            .commit(cx.execution.id, cx.generation, commit)
            .await?;
        Ok(())
    }
}
