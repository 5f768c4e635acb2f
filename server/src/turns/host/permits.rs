//! Shared permits for a Turn's model requests: before a model request is marked `sending`,
//! its Turn takes room in the limits of its scopes (the organization, the provider kind, its
//! Bot), waiting while one is full; the room is given back when the answer is saved (with the
//! answer's confirmed tokens taken from the token buckets) or when the phase closes (a pause,
//! a cancel, a failure, a lost lease). A Turn that ended holds nothing: a permit counts only
//! while its generation owns the execution with a live lease.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use openbot_core::turn::{CallKey, CallResult, CallSlot};
use openbot_schema::ErrorCategory;

use super::DurableHost;
use super::guards::{Passed, Refusal, SendGuard};
use crate::engine::RunScope;
use crate::limits::{AcquireError, Holder, Limits, Permit};
use crate::store::StoreError;

/// The slot a Turn's model requests hold their permits in (one request at a time).
const MODEL_SLOT: &str = "model";

/// What a Turn needs to take shared permits for its model requests.
pub(crate) struct ModelPermits {
    limits: Limits,
    holder: Holder,
    scopes: Vec<String>,
    scope: RunScope,
    /// The room the current model request holds.
    held: Mutex<Option<Permit>>,
    /// Whether this phase ever held room in a limit (its close gives back what is left).
    took: Arc<AtomicBool>,
}

impl ModelPermits {
    /// Permits for the model requests of this owner of an execution, in `scopes`; everything
    /// it holds is given back when the phase's `scope` closes.
    pub(crate) async fn new(
        limits: Limits,
        organization: uuid::Uuid,
        execution: openbot_schema::ExecutionId,
        generation: i64,
        scopes: Vec<String>,
        scope: RunScope,
    ) -> Arc<Self> {
        let closing = limits.clone();
        let took = Arc::new(AtomicBool::new(false));
        let took_any = Arc::clone(&took);
        scope
            .on_close(Box::pin(async move {
                // A phase that never held room in a limit has nothing to give back.
                if !took_any.load(Ordering::SeqCst) {
                    return;
                }
                if let Err(err) = closing.release_execution(execution, generation).await {
                    // Not lost: the permits pass on when this owner's lease lapses.
                    tracing::warn!(%execution, error_kind = crate::engine::store_error_kind(&err), "giving permits back failed");
                }
            }))
            .await;
        Arc::new(Self {
            limits,
            holder: Holder {
                organization,
                execution,
                generation,
                slot: MODEL_SLOT.into(),
            },
            scopes,
            scope,
            held: Mutex::new(None),
            took,
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Option<Permit>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The tokens a model answer used, as its provider confirmed them (none when it did not say).
pub(super) fn model_tokens(result: &CallResult) -> u64 {
    match result {
        CallResult::Model {
            usage: Some(usage), ..
        } => usage.input_tokens + usage.output_tokens,
        _ => 0,
    }
}

/// The guard: room in the Turn's limits before a model request is sent.
pub(super) struct PermitCheck(pub(super) Arc<ModelPermits>);

#[async_trait]
impl SendGuard for PermitCheck {
    async fn check(&self, key: CallKey) -> Result<Passed, Refusal> {
        if key.slot != CallSlot::Model {
            return Ok(Passed::Looked);
        }
        let permits = &self.0;
        let gate = permits.scope.clone();
        let open = move || gate.gate_open();
        match permits
            .limits
            .acquire(
                &permits.holder,
                &permits.scopes,
                &permits.scope.cancellation(),
                &open,
            )
            .await
        {
            Ok(permit) => {
                // No limit applies: nothing was taken or waited for.
                let passed = if permit.scopes().is_empty() {
                    Passed::Looked
                } else {
                    permits.took.store(true, Ordering::SeqCst);
                    Passed::Took
                };
                *permits.held() = Some(permit);
                Ok(passed)
            }
            Err(AcquireError::Cancelled) => Err(Refusal::Closed),
            Err(AcquireError::NotOwner(id)) => Err(Refusal::Storage(StoreError::Fenced(id))),
            Err(err @ AcquireError::Deadline { .. }) => Err(Refusal::Failed {
                category: ErrorCategory::Timeout,
                cause: err.to_string(),
            }),
            Err(AcquireError::Store(err)) => Err(Refusal::Storage(err)),
        }
    }
}

impl DurableHost {
    /// Gives back the room a model request held once its answer is saved, taking the answer's
    /// confirmed tokens from the token buckets. A failure is logged, not raised: the answer is
    /// saved, and the room passes on when the phase closes or the lease lapses.
    pub(super) async fn release_model_permit(&self, key: CallKey, used_tokens: u64) {
        if key.slot != CallSlot::Model {
            return;
        }
        let Some(permits) = &self.permits else {
            return;
        };
        let Some(permit) = permits.held().take() else {
            return;
        };
        if let Err(err) = permits.limits.release(&permit, used_tokens).await {
            tracing::warn!(
                error_kind = crate::engine::store_error_kind(&err),
                "giving a permit back failed"
            );
        }
    }
}
