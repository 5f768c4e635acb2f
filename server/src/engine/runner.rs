//! Runner: claims work, keeps leases, and hands each claimed execution to the Program loop.
//! Takeover is a claim of work whose lease lapsed: it adds one to the generation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use openbot_schema::{ErrorCategory, ExecutionId};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::EngineContext;
use super::intake::Reserved;
use super::program::{err_kind, interrupt, run_program};
use super::signals::Wake;
use super::workflow::{PhaseContext, Registry};
use crate::store::{Claim, ClaimFor, Claimed, DamagedClaim, TxWrites, now_ms};

/// How a node runs work.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// How long a lease lasts without renewal; a dead owner's work is taken over after it.
    pub lease: Duration,
    /// How many executions this node runs at once.
    pub capacity: usize,
    /// How often in a row a phase may fail on storage before its execution ends `interrupted`
    /// (see [`super::STORAGE_RETRY_BUDGET`], the default).
    pub storage_retry_budget: u32,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        Self {
            lease: Duration::from_millis(2000),
            capacity: 256,
            storage_retry_budget: super::STORAGE_RETRY_BUDGET,
        }
    }
}

struct Owned {
    generation: i64,
    lost: CancellationToken,
}

/// The running part of a node.
pub struct Runner {
    cx: Arc<EngineContext>,
    registry: Registry,
    config: RunnerConfig,
    owned: Mutex<HashMap<ExecutionId, Owned>>,
    /// Places submissions hold for work they claim themselves (`intake.rs`).
    reserved: Reserved,
    stop: CancellationToken,
}

impl Runner {
    /// Starts claiming and running work; returns the tasks to wait for at shutdown.
    pub fn start(
        cx: Arc<EngineContext>,
        registry: Registry,
        config: RunnerConfig,
        stop: CancellationToken,
    ) -> (Arc<Self>, Vec<JoinHandle<()>>) {
        let runner = Arc::new(Self {
            cx,
            registry,
            config,
            owned: Mutex::new(HashMap::new()),
            reserved: Reserved::default(),
            stop,
        });
        runner.cx.intake.open(&runner);
        let claims = crate::telemetry::spawn(Arc::clone(&runner).claim_loop());
        let renewals = crate::telemetry::spawn(Arc::clone(&runner).renew_loop());
        (runner, vec![claims, renewals])
    }

    fn owned(&self) -> std::sync::MutexGuard<'_, HashMap<ExecutionId, Owned>> {
        self.owned.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many executions this node runs now.
    pub fn running(&self) -> usize {
        self.owned().len()
    }

    /// Takes a place for a submission of `kind` that claims its own execution: only for a
    /// kind this node runs, while it runs and has room.
    pub(crate) fn reserve(&self, kind: &str) -> bool {
        !self.stop.is_cancelled()
            && self.registry.get(kind).is_some()
            && self.registry.retired(kind).is_none()
            && self.reserved.take(self.running(), self.config.capacity)
    }

    /// Gives back a place a submission held.
    pub(crate) fn unreserve(&self) {
        self.reserved.give_back();
    }

    /// How many programs it runs at most at once.
    pub(crate) fn capacity(&self) -> usize {
        self.config.capacity
    }

    /// What a submission writes to claim its execution for this node.
    pub(crate) fn claim_for(&self) -> ClaimFor {
        ClaimFor {
            node: self.cx.node.clone(),
            lease_ms: self.config.lease.as_millis() as i64,
        }
    }

    async fn claim_loop(self: Arc<Self>) {
        let lease_ms = self.config.lease.as_millis() as i64;
        loop {
            if self.stop.is_cancelled() {
                return;
            }
            // Made before the claim, so a jump of a test's clock during it still wakes the loop.
            let jumped = self.cx.clock.jumped();
            let jump = jumped.as_ref().map(|notify| notify.notified());
            let free =
                self.config
                    .capacity
                    .saturating_sub(self.running() + self.reserved.held()) as i64;
            let mut claimed_all = false;
            if free > 0 {
                let span = crate::telemetry::spans::claim();
                let claimed = self
                    .cx
                    .store
                    .claim_due(
                        &self.cx.node,
                        &self.registry.kinds(),
                        lease_ms,
                        free.min(100),
                        self.cx.clock.now_ms(),
                    )
                    .instrument(span.clone())
                    .await;
                if let Ok(claimed) = &claimed {
                    span.record("claimed", claimed.claims.len());
                }
                crate::telemetry::spans::end(&span);
                match claimed {
                    Ok(Claimed { claims, damaged }) => {
                        claimed_all = (claims.len() + damaged.len()) as i64 == free.min(100);
                        span.in_scope(|| {
                            for claim in claims {
                                self.spawn_program(claim);
                            }
                        });
                        for damaged in damaged {
                            self.set_aside(damaged);
                        }
                    }
                    Err(err) => tracing::warn!(error_kind = err_kind(&err), "claiming work failed"),
                }
            }
            if claimed_all {
                // A full page: there may be more right away.
                continue;
            }
            let wake_at = self
                .cx
                .store
                .next_wake(&self.cx.node)
                .await
                .unwrap_or_else(|err| {
                    tracing::warn!(
                        error_kind = err_kind(&err),
                        "reading the next wake time failed"
                    );
                    Some(now_ms() + 1000)
                });
            let sleep = match wake_at {
                Some(at) => Duration::from_millis((at - now_ms()).clamp(0, 60_000) as u64 + 1),
                None => Duration::from_secs(3600),
            };
            // A clock that jumps (a test's) wakes the loop to claim the timers it made due.
            let jump = async move {
                match jump {
                    Some(notified) => notified.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(sleep) => {}
                _ = self.cx.hub.work() => {}
                _ = jump => {}
                _ = self.stop.cancelled() => return,
            }
        }
    }

    /// Ends a claimed execution whose row cannot be read: `interrupted`, with the cause sealed.
    /// Its own Chat's next Turn, and every other execution, go on.
    fn set_aside(self: &Arc<Self>, damaged: DamagedClaim) {
        let cx = Arc::clone(&self.cx);
        let writes = damaged
            .kind
            .as_deref()
            .and_then(|kind| self.registry.get(kind))
            .map(|workflow| workflow.ending_writes(damaged.id))
            .unwrap_or_default();
        crate::telemetry::spawn(async move {
            interrupt(
                &cx,
                damaged.id,
                damaged.generation,
                ErrorCategory::Storage,
                "a saved record of this execution can no longer be read",
                &format!("invalid stored data: {}", damaged.cause),
                writes,
            )
            .await;
            cx.hub.announce(Wake::Work);
        });
    }

    /// Runs a claimed execution: the claim loop's, or one its submission claimed (`intake.rs`).
    pub(super) fn spawn_program(self: &Arc<Self>, claim: Claim) {
        if let Some(why) = self.registry.retired(&claim.kind) {
            let cx = Arc::clone(&self.cx);
            crate::telemetry::spawn(async move {
                let reason = format!("its workflow kind `{}` is no longer run: {why}", claim.kind);
                interrupt(
                    &cx,
                    claim.id,
                    claim.generation,
                    ErrorCategory::Configuration,
                    &reason,
                    &reason,
                    TxWrites::default(),
                )
                .await;
                cx.hub.announce(Wake::Work);
            });
            return;
        }
        let Some(workflow) = self.registry.get(&claim.kind) else {
            tracing::error!(execution = %claim.id, kind = %claim.kind, "no workflow for this kind; releasing it");
            let store = Arc::clone(&self.cx.store);
            crate::telemetry::spawn(async move {
                let _ = store.release(claim.id, claim.generation).await;
            });
            return;
        };
        let lost = self.stop.child_token();
        self.owned().insert(
            claim.id,
            Owned {
                generation: claim.generation,
                lost: lost.clone(),
            },
        );
        let runner = Arc::clone(self);
        // Every line and span of the program runs inside its execution's span.
        let span = crate::telemetry::spans::execution(&claim, &self.cx.node, now_ms());
        let program = async move {
            let id = claim.id;
            let signals = runner.cx.hub.signal_notify(id);
            // The row as the claim wrote it: the program starts without reading it again.
            let cx = PhaseContext {
                engine: Arc::clone(&runner.cx),
                execution: claim.execution,
                generation: claim.generation,
                signals,
                retry_budget: runner.config.storage_retry_budget,
                signals_pending: claim.signals_pending,
                input: claim.input,
            };
            tracing::debug!("program started");
            run_program(workflow, cx, lost.clone()).await;
            tracing::debug!(lost = lost.is_cancelled(), "program stopped");
            // A newer claim of the same execution by this node (after this owner lost its
            // lease) keeps its entry and its signals.
            let newer_claim = {
                let mut owned = runner.owned();
                match owned.get(&id) {
                    Some(entry) if entry.generation != claim.generation => true,
                    _ => {
                        owned.remove(&id);
                        false
                    }
                }
            };
            if !newer_claim {
                runner.cx.hub.forget_signals(id);
            }
            if lost.is_cancelled() {
                // Stopping: let another owner take it at once.
                let _ = runner.cx.store.release(id, claim.generation).await;
            }
            runner.cx.hub.announce(Wake::Work);
        };
        tokio::spawn(program.instrument(span));
    }

    async fn renew_loop(self: Arc<Self>) {
        let lease_ms = self.config.lease.as_millis() as i64;
        let every = self.config.lease / 4;
        let mut last_renewed = now_ms();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = self.stop.cancelled() => return,
            }
            let owned: Vec<(ExecutionId, i64)> = self
                .owned()
                .iter()
                .map(|(id, o)| (*id, o.generation))
                .collect();
            if owned.is_empty() {
                last_renewed = now_ms();
                continue;
            }
            match self.cx.store.renew(&self.cx.node, lease_ms, &owned).await {
                Ok(kept) => {
                    last_renewed = now_ms();
                    let mut table = self.owned();
                    for (id, _) in &owned {
                        if !kept.contains(id)
                            && let Some(entry) = table.remove(id)
                        {
                            tracing::info!(execution = %id, "lease lost to a newer owner");
                            entry.lost.cancel();
                        }
                    }
                }
                Err(err) => {
                    tracing::warn!(error_kind = err_kind(&err), "renewing leases failed");
                    // An owner that cannot check its lease stops before it may have lapsed.
                    if now_ms() - last_renewed > lease_ms * 3 / 4 {
                        for (_, entry) in self.owned().drain() {
                            entry.lost.cancel();
                        }
                    }
                }
            }
        }
    }

    /// Stops every phase and gives its execution up, so other nodes take over at once.
    pub async fn release_all(&self) {
        let owned: Vec<(ExecutionId, i64, CancellationToken)> = self
            .owned()
            .iter()
            .map(|(id, o)| (*id, o.generation, o.lost.clone()))
            .collect();
        for (id, generation, lost) in owned {
            lost.cancel();
            let _ = self.cx.store.release(id, generation).await;
        }
    }
}
