//! Program: the one loop for recovery, owner checks, cancellation and phase failures. Every
//! workflow runs through it; features give `next` and `end`.

use std::sync::Arc;
use std::time::Duration;

use openbot_schema::{ErrorCategory, EventKind, ExecutionId, ExecutionState};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::EngineContext;
use super::retry::Backoff;
use super::scope::RunScope;
use super::workflow::{EngineEnd, Next, PhaseContext, PhaseError, Workflow};
use crate::store::{
    Commit, GIVE_UP, GiveUpPayload, StateChange, StoreError, TxWrites, call_key_name,
};

/// The signal that pauses an execution (see `Engine::pause`).
pub const PAUSE: &str = "pause";

/// The signal that makes a waiting execution look at its state again (see `Engine::wake`).
/// A wait saved while a cancel or a wake signal is pending wakes at once, so neither is lost
/// to a wait its owner was saving when it arrived.
pub const WAKE: &str = "wake";

/// How long a phase whose lease is lost may still run to save results of calls in flight.
pub const LATE_RESULT_GRACE: Duration = Duration::from_secs(10);

/// How often in a row a phase may fail on storage before its owner gives the execution up
/// (another node, or this one later, takes it again from the saved log).
pub const STORAGE_RETRY_BUDGET: u32 = 30;

/// Runs one claimed execution until it ends, waits, or is lost. `lost` fires when the lease
/// is gone or the node stops: then the phase is dropped and nothing more is written.
/// `cx.execution` is the row as the claim wrote it: the first pass checks it instead of
/// reading it again; every later pass reads it anew.
#[allow(clippy::too_many_lines)] // split with the saved-call primitive (issue 33)
pub async fn run_program(
    workflow: Arc<dyn Workflow>,
    mut cx: PhaseContext,
    lost: CancellationToken,
) {
    let id = cx.execution.id;
    let store = Arc::clone(&cx.engine.store);
    let mut backoff = Backoff::new();
    let mut failures = 0u32;
    let mut claimed_row = true;
    loop {
        if lost.is_cancelled() {
            return;
        }
        let first_pass = std::mem::take(&mut claimed_row);
        if !first_pass {
            cx.execution = match store.execution(id).await {
                Ok(row) => row,
                Err(err) if err.is_transient() && failures < cx.retry_budget => {
                    failures += 1;
                    tokio::time::sleep(backoff.next_delay()).await;
                    continue;
                }
                Err(err) if err.is_transient() => {
                    tracing::warn!(
                        error_kind = err_kind(&err),
                        "giving the execution up after storage failures"
                    );
                    return;
                }
                // Damage, not an outage: ended here, not retried.
                Err(err) => {
                    match storage_failed(workflow.as_ref(), &cx, err, &mut failures, &mut backoff)
                        .await
                    {
                        Flow::Continue => continue,
                        Flow::Stop => return,
                    }
                }
            };
        }
        if cx.execution.generation != cx.generation || cx.execution.state.is_terminal() {
            return;
        }
        // The claim said whether signals waited; every later pass reads them.
        let signals = if first_pass && !cx.signals_pending {
            Ok(Vec::new())
        } else {
            store.pending_signals(id).await
        };
        let signals = match signals {
            Ok(signals) => signals,
            Err(err) => {
                match storage_failed(workflow.as_ref(), &cx, err, &mut failures, &mut backoff).await
                {
                    Flow::Continue => continue,
                    Flow::Stop => return,
                }
            }
        };
        let cancels: Vec<i64> = signals
            .iter()
            .filter(|s| s.kind == "cancel")
            .map(|s| s.number)
            .collect();
        if !cancels.is_empty() || cx.execution.state == ExecutionState::Cancelling {
            finish(
                workflow.as_ref(),
                &cx,
                EngineEnd::Cancelled { signals: cancels },
            )
            .await;
            return;
        }
        if let Some(given_up) = signals.iter().find(|s| s.kind == GIVE_UP) {
            // A person gave up on a call whose outcome is unknown: the execution ends here and
            // sends nothing more. The signal stays with the ended execution, as its record.
            let cause = give_up_cause(&given_up.payload);
            finish(
                workflow.as_ref(),
                &cx,
                EngineEnd::Failed {
                    category: ErrorCategory::Tool,
                    cause,
                },
            )
            .await;
            return;
        }
        let pauses: Vec<i64> = signals
            .iter()
            .filter(|s| s.kind == PAUSE)
            .map(|s| s.number)
            .collect();
        if !pauses.is_empty() {
            // The phase is over (or never started): wait, with no owner, for a resume.
            match store.pause(id, cx.generation, pauses).await {
                Ok(true) => return,
                // Resumed before the pause took hold: go on.
                Ok(false) => continue,
                Err(err) => {
                    match storage_failed(workflow.as_ref(), &cx, err, &mut failures, &mut backoff)
                        .await
                    {
                        Flow::Continue => continue,
                        Flow::Stop => return,
                    }
                }
            }
        }
        let next = match workflow.next(&cx).await {
            Ok(next) => next,
            Err(err) => {
                match handle(workflow.as_ref(), &cx, err, &mut failures, &mut backoff).await {
                    Flow::Continue => continue,
                    Flow::Stop => return,
                }
            }
        };
        let phase = match next {
            Next::Done => return,
            Next::Wait { until } => {
                // The wake-ups seen before `next` are answered by this look at the state.
                let wakes: Vec<i64> = signals
                    .iter()
                    .filter(|s| s.kind == WAKE)
                    .map(|s| s.number)
                    .collect();
                let change = StateChange {
                    state: ExecutionState::Waiting,
                    outcome: None,
                    failure: None,
                    wake_at: until,
                    unknown_call: None,
                    output: None,
                    release: true,
                    reason: None,
                };
                let commit = Commit {
                    state: Some(change),
                    handled_signals: wakes,
                    ..Commit::default()
                };
                match cx.engine.commit(id, cx.generation, commit).await {
                    Ok(_) => return,
                    Err(err) => match storage_failed(
                        workflow.as_ref(),
                        &cx,
                        err,
                        &mut failures,
                        &mut backoff,
                    )
                    .await
                    {
                        Flow::Continue => continue,
                        Flow::Stop => return,
                    },
                }
            }
            Next::Run(phase) => phase,
        };
        let scope = RunScope::new();
        let watcher = watch_signals(&cx, &scope, &lost);
        let started = std::time::Instant::now();
        let span = crate::telemetry::spans::phase(&phase);
        let run = workflow.run(&cx, &phase, &scope).instrument(span.clone());
        tokio::pin!(run);
        let result = tokio::select! {
            result = &mut run => result,
            _ = lost.cancelled() => {
                // No new call may start; calls in flight get a while to save their results
                // (as late results, if a newer owner took over), then the phase is dropped.
                scope.close_gate();
                tokio::time::timeout(LATE_RESULT_GRACE, &mut run).await.unwrap_or(Err(PhaseError::Fenced))
            }
        };
        crate::telemetry::spans::end(&span);
        scope.close().await;
        watcher.abort();
        crate::telemetry::metrics::phase_ended(workflow.kind(), started.elapsed());
        match result {
            Ok(()) => {
                failures = 0;
                backoff = Backoff::new();
                if let Err(err) = workflow.after(&cx, &phase).await
                    && let Flow::Stop =
                        handle(workflow.as_ref(), &cx, err, &mut failures, &mut backoff).await
                {
                    return;
                }
            }
            Err(err) => {
                if let Flow::Stop =
                    handle(workflow.as_ref(), &cx, err, &mut failures, &mut backoff).await
                {
                    return;
                }
            }
        }
    }
}

enum Flow {
    Continue,
    Stop,
}

/// A storage failure of the program loop itself (reading signals, pausing, saving a wait):
/// the same rules as a phase's, so the retry budget bounds every path and damage interrupts.
async fn storage_failed(
    workflow: &dyn Workflow,
    cx: &PhaseContext,
    err: StoreError,
    failures: &mut u32,
    backoff: &mut Backoff,
) -> Flow {
    handle(workflow, cx, PhaseError::Storage(err), failures, backoff).await
}

async fn handle(
    workflow: &dyn Workflow,
    cx: &PhaseContext,
    err: PhaseError,
    failures: &mut u32,
    backoff: &mut Backoff,
) -> Flow {
    match err {
        PhaseError::Fenced => Flow::Stop,
        PhaseError::Cancelled => Flow::Continue,
        PhaseError::Storage(StoreError::Fenced(_)) => Flow::Stop,
        PhaseError::Storage(err) if err.is_transient() => {
            *failures += 1;
            if *failures > cx.retry_budget {
                // The budget is spent: the work stops where a person sees it, with the reason.
                let reason = format!(
                    "storage kept failing: {} tries in a row did not save its progress",
                    cx.retry_budget
                );
                interrupt(
                    &cx.engine,
                    cx.execution.id,
                    cx.generation,
                    ErrorCategory::Storage,
                    &reason,
                    &format!("{reason}: {err}"),
                    workflow.ending_writes(cx.execution.id),
                )
                .await;
                return Flow::Stop;
            }
            tokio::time::sleep(backoff.next_delay()).await;
            Flow::Continue
        }
        PhaseError::Storage(err) => {
            // Invalid stored data is damage, not an outage: this work cannot be rebuilt, and
            // its end is the engine's (the workflow's own end may need the broken record).
            interrupt(
                &cx.engine,
                cx.execution.id,
                cx.generation,
                ErrorCategory::Storage,
                "a saved record of this execution can no longer be read",
                &format!("invalid stored data: {err}"),
                workflow.ending_writes(cx.execution.id),
            )
            .await;
            Flow::Stop
        }
        PhaseError::OutcomeUnknown(key) => {
            let event = EventKind::CallOutcomeUnknown {
                step: key.step,
                call: call_key_name(&key),
            };
            let change = StateChange {
                state: ExecutionState::OutcomeUnknown,
                outcome: None,
                failure: None,
                wake_at: None,
                unknown_call: Some(key),
                output: None,
                release: true,
                reason: None,
            };
            let commit = Commit {
                events: vec![event],
                state: Some(change),
                ..Commit::default()
            };
            match cx
                .engine
                .commit(cx.execution.id, cx.generation, commit)
                .await
            {
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!(
                        error_kind = err_kind(&err),
                        "could not save an unknown outcome"
                    )
                }
            }
            Flow::Stop
        }
        PhaseError::Failed { category, cause } => {
            finish(workflow, cx, EngineEnd::Failed { category, cause }).await;
            Flow::Stop
        }
    }
}

/// The sealed cause of an execution a person gave up on: which call, and their reason.
fn give_up_cause(payload: &str) -> String {
    match serde_json::from_str::<GiveUpPayload>(payload) {
        Ok(given_up) => format!(
            "a person gave up on call {}, whose outcome is unknown: {}",
            given_up.call, given_up.reason
        ),
        Err(_) => "a person gave up on a call whose outcome is unknown".into(),
    }
}

/// Saves an end the engine decided, retrying storage within the budget. An end that cannot be
/// saved because a record it needs is damaged interrupts the execution instead.
async fn finish(workflow: &dyn Workflow, cx: &PhaseContext, end: EngineEnd) {
    let mut backoff = Backoff::new();
    for _ in 0..STORAGE_RETRY_BUDGET {
        match workflow.end(cx, end.clone()).await {
            Ok(()) => return,
            Err(PhaseError::Storage(err)) if err.is_transient() => {
                tokio::time::sleep(backoff.next_delay()).await
            }
            Err(PhaseError::Storage(err @ StoreError::Invalid(_))) => {
                interrupt(
                    &cx.engine,
                    cx.execution.id,
                    cx.generation,
                    ErrorCategory::Storage,
                    "a saved record of this execution can no longer be read",
                    &format!("invalid stored data: {err}"),
                    workflow.ending_writes(cx.execution.id),
                )
                .await;
                return;
            }
            Err(_) => return,
        }
    }
}

/// Ends work that cannot be rebuilt: state `interrupted` with `reason` (engine-made text a
/// person can read, shown on the execution), the full `cause` sealed in an error record, and a
/// `failed` event with its ID as the last event. The workflow is not asked: what broke may be
/// the very record its end would read. Other executions are untouched, so one damaged record
/// never stops other work (a Chat's next Turn is claimed once this one ended).
pub(crate) async fn interrupt(
    cx: &EngineContext,
    id: ExecutionId,
    generation: i64,
    category: ErrorCategory,
    reason: &str,
    cause: &str,
    writes: TxWrites,
) {
    let Ok(blob) = cx.keys.seal(uuid::Uuid::now_v7(), cause.as_bytes()) else {
        tracing::warn!(execution = %id, "could not seal the cause of an interruption");
        return;
    };
    let error_id = openbot_schema::ErrorId::from(blob.id);
    tracing::warn!(execution = %id, ?category, %error_id, "execution interrupted: {reason}");
    let commit = Commit {
        events: vec![EventKind::Failed { category, error_id }],
        state: Some(StateChange {
            state: ExecutionState::Interrupted,
            outcome: None,
            failure: Some((category, blob)),
            wake_at: None,
            unknown_call: None,
            output: None,
            release: true,
            reason: Some(reason.to_string()),
        }),
        // What the kind's every end writes (e.g. a Turn's billing holds released).
        writes,
        ..Commit::default()
    };
    let mut backoff = Backoff::new();
    for _ in 0..STORAGE_RETRY_BUDGET {
        match cx.commit(id, generation, commit.clone()).await {
            Ok(_) => break,
            Err(err) if err.is_transient() => tokio::time::sleep(backoff.next_delay()).await,
            Err(err) => {
                tracing::warn!(execution = %id, error_kind = err_kind(&err), "could not save an interruption");
                return;
            }
        }
    }
    // A parent waiting for its children sees this one closed.
    if let Ok(row) = cx.store.execution(id).await
        && let Some(parent) = row.parent_id
    {
        cx.hub.announce(super::Wake::Signal(parent));
    }
}

/// Cancels the phase's scope when a cancel signal arrives, closes its gate when a pause
/// arrives, and stops when the lease is lost.
fn watch_signals(
    cx: &PhaseContext,
    scope: &RunScope,
    lost: &CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let store = Arc::clone(&cx.engine.store);
    let notify = Arc::clone(&cx.signals);
    let scope = scope.clone();
    let lost = lost.clone();
    let id = cx.execution.id;
    crate::telemetry::spawn(async move {
        loop {
            tokio::select! {
                _ = notify.notified() => {}
                _ = lost.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
            if let Ok(signals) = store.pending_signals(id).await {
                if signals.iter().any(|s| s.kind == "cancel") {
                    scope.cancel();
                    return;
                }
                if signals.iter().any(|s| s.kind == PAUSE) {
                    // No new send; calls in flight finish and save their results.
                    scope.close_gate();
                    notify.notify_waiters();
                    return;
                }
            }
        }
    })
}

/// A short name of a storage error's kind, safe for logs.
pub(crate) fn err_kind(err: &StoreError) -> &'static str {
    match err {
        StoreError::Unavailable(_) => "unavailable",
        StoreError::Fenced(_) => "fenced",
        StoreError::CommandKeyConflict(_) => "command_key_conflict",
        StoreError::NotFound(_) => "not_found",
        StoreError::Ended(_) => "ended",
        StoreError::AdmissionClosed => "admission_closed",
        StoreError::Invalid(_) => "invalid",
        StoreError::Sealed { .. } => "sealed",
        StoreError::RequestNotFound(_) => "request_not_found",
        StoreError::RequestClosed(_) => "request_closed",
        StoreError::ParentPaused(_) => "parent_paused",
        StoreError::NotWaiting(_) => "not_waiting",
        StoreError::InputWaiting(_) => "input_waiting",
        StoreError::SchemaVersion { .. } => "schema_version",
        StoreError::Refused(_) => "refused",
    }
}
