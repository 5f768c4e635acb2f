//! Retention per organization: files older than the organization's retention (in days) are
//! deleted by a scheduled sweep, one durable work item of the platform's `file-retention`
//! service. The sweep runs at once when it is first submitted (each node submits it when it
//! starts; one exists per deployment, by its command key), then waits without an owner on a
//! durable timer, [`SWEEP_INTERVAL`] after its last run (saved in `file_sweeps` with the run's
//! commit), and runs again on whichever node claims it.
//!
//! Each run starts the deletion of every expired file the way a member's delete does (the row
//! marked deleting with its deletion work, in one transaction; see `deletion`), and starts
//! again the deletion of rows left deleting for an hour whose work ended without deleting
//! (cancelled, failed) or never existed (marked by an older version).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use openbot_schema::ExecutionState;
use serde::{Deserialize, Serialize};

use super::deletion::{Started, start_deletion, start_deletion_keyed};
use super::store::FileStore;
use super::writes::{MarkDeleting, SweepRan};
use crate::engine::{
    EngineContext, EngineEnd, EngineError, Next, PhaseContext, PhaseError, RunScope, Submission,
    Workflow,
};
use crate::identity::{ServiceIdentity, ServiceOwner};
use crate::store::{Commit, Millis, Submitted, TxWrites, now_ms};

/// The execution kind of the retention sweep.
pub const FILE_RETENTION_SWEEP: &str = "file_retention_sweep";

/// How long the sweep waits after a run.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(3600);

/// A row deleting for this long is checked for work that ended without deleting it.
pub const STRANDED_AFTER_MS: i64 = 3_600_000;

/// The sweep's name in `file_sweeps`.
const SWEEP_NAME: &str = "file-retention";

/// Files read per batch; a run reads batches until one is short (at most [`MAX_BATCHES`]).
const BATCH: i64 = 200;
const MAX_BATCHES: usize = 50;

/// The longest retention an organization may set: 100 years.
pub const MAX_RETENTION_DAYS: i64 = 36_500;

/// The saved input of the sweep (it has none).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepInput {}

/// The platform's service that deletes expired files.
pub fn retention_service() -> ServiceIdentity {
    ServiceIdentity {
        owner: ServiceOwner::Platform,
        name: "file-retention".into(),
    }
}

fn sweep_submission(input: &SweepInput, command_key: String) -> Submission<'_, SweepInput> {
    Submission::new(FILE_RETENTION_SWEEP, retention_service().scope(), input).with_key(command_key)
}

/// Submits the deployment's sweep unless it exists; a sweep that ended (cancelled, failed) is
/// replaced by a new one. Returns the running sweep.
pub async fn ensure_sweep(
    engine: &EngineContext,
) -> Result<openbot_schema::ExecutionId, EngineError> {
    let input = SweepInput::default();
    let mut key = "file-retention-sweep".to_string();
    loop {
        match engine.submit(sweep_submission(&input, key.clone())).await? {
            Submitted::Created(id) => return Ok(id),
            Submitted::Existing(id) => {
                if !engine.store.execution(id).await?.state.is_terminal() {
                    return Ok(id);
                }
                key = format!("file-retention-sweep:after:{id}");
            }
        }
    }
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Expired files whose deletion it started.
    pub expired: usize,
    /// Deleting rows whose deletion it started again.
    pub restarted: usize,
}

/// Sweeps once as of `now`: starts the deletion of every file older than its organization's
/// retention, and again that of rows left deleting whose work ended without deleting.
pub async fn sweep(
    engine: &EngineContext,
    files: &dyn FileStore,
    now: Millis,
) -> Result<SweepReport, EngineError> {
    let mut report = SweepReport::default();
    for _ in 0..MAX_BATCHES {
        let expired = files.expired_files(now, BATCH).await?;
        let mut started = 0;
        for file in &expired {
            if matches!(
                start_deletion(engine, file, Some(MarkDeleting::new(file.id, None))).await?,
                Started::Started(_)
            ) {
                started += 1;
            }
        }
        report.expired += started;
        // A short batch was the last; a batch that started nothing would repeat itself.
        if (expired.len() as i64) < BATCH || started == 0 {
            break;
        }
    }
    for file in files
        .stranded_deletions(now - STRANDED_AFTER_MS, BATCH)
        .await?
    {
        let started = match start_deletion(engine, &file, None).await? {
            Started::Already(id) => {
                let state = engine.store.execution(id).await?.state;
                if state.is_terminal() && state != ExecutionState::Completed {
                    let key = format!("file-deletion:{}:after:{id}", file.id);
                    start_deletion_keyed(engine, &file, None, key).await?
                } else {
                    Started::Already(id)
                }
            }
            other => other,
        };
        if matches!(started, Started::Started(_)) {
            report.restarted += 1;
        }
    }
    Ok(report)
}

/// Runs the retention sweep.
pub struct RetentionSweepWorkflow {
    files: Arc<dyn FileStore>,
    interval: Duration,
}

impl RetentionSweepWorkflow {
    /// A sweep over `files` every [`SWEEP_INTERVAL`].
    pub fn new(files: Arc<dyn FileStore>) -> Self {
        Self {
            files,
            interval: SWEEP_INTERVAL,
        }
    }
}

#[async_trait]
impl Workflow for RetentionSweepWorkflow {
    fn kind(&self) -> &'static str {
        FILE_RETENTION_SWEEP
    }

    async fn next(&self, cx: &PhaseContext) -> Result<Next, PhaseError> {
        if cx.execution.state.is_terminal() {
            return Ok(Next::Done);
        }
        let interval = i64::try_from(self.interval.as_millis()).unwrap_or(i64::MAX);
        Ok(match self.files.swept_at(SWEEP_NAME).await? {
            Some(at) if at.saturating_add(interval) > now_ms() => Next::Wait {
                until: Some(at.saturating_add(interval)),
            },
            _ => Next::Run("sweep".into()),
        })
    }

    async fn run(
        &self,
        cx: &PhaseContext,
        _phase: &str,
        _scope: &RunScope,
    ) -> Result<(), PhaseError> {
        let now = now_ms();
        let report = sweep(&cx.engine, self.files.as_ref(), now)
            .await
            .map_err(PhaseError::from)?;
        if report != SweepReport::default() {
            tracing::info!(
                expired = report.expired,
                restarted = report.restarted,
                "file retention sweep started deletions"
            );
        }
        // The run's time, with this owner's generation: the timer counts from it.
        cx.engine
            .commit(
                cx.execution.id,
                cx.generation,
                Commit {
                    writes: TxWrites::one(SweepRan {
                        name: SWEEP_NAME,
                        at: now,
                    }),
                    ..Commit::default()
                },
            )
            .await?;
        Ok(())
    }

    async fn end(&self, cx: &PhaseContext, end: EngineEnd) -> Result<(), PhaseError> {
        cx.commit_plain_end(end).await
    }
}
