//! The checks before an outside send, as one chain: a call is sent, and marked `sending`, only
//! when every guard passed, in order. (A retry-safe tool's call is saved as `sending` with the
//! answer that asked for it, before its guards: sending it again repeats nothing, so a refused
//! one is only a call that may be sent later.) A new per-call rule (permits, an App
//! connection's revision) is one more guard, not another branch of the host. Vault fields are
//! the exception: they are checked and opened inside the HTTP tool's send
//! (`vaults/opener.rs`), because a refused guard ends the Turn while a missing secret is a
//! result the model sees, and because there the check and the opening are one read.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_core::turn::{CallKey, HostError};
use openbot_schema::{BotId, ChatId};

use super::DurableHost;
use crate::budgets::BudgetStore;
use crate::engine::RunScope;
use crate::identity::{ExecutionIdentity, IdentityCheckError, IdentityStore};
use crate::store::StoreError;

/// Why a guard refused a send.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The phase is closing (paused or cancelled): nothing new is sent.
    Closed,
    /// The work lost the right to send this call; the Turn ends with the category `access`.
    Denied(String),
    /// The send may not happen, for good: the work fails with this category (a shared
    /// limit stayed full past its deadline).
    Failed {
        /// The failure's public category.
        category: openbot_schema::ErrorCategory,
        /// The full cause, for the sealed record.
        cause: String,
    },
    /// The guard could not read what it checks; the send waits for storage, never goes ahead
    /// on old facts.
    Storage(StoreError),
}

/// One check before an outside send.
#[async_trait]
pub(crate) trait SendGuard: Send + Sync {
    /// Passes, or says why `key` may not be sent now.
    async fn check(&self, key: CallKey) -> Result<(), Refusal>;
}

/// The phase's gate: a pause or a cancel closes it before anything else.
pub(super) struct OpenGate(pub(super) RunScope);

#[async_trait]
impl SendGuard for OpenGate {
    async fn check(&self, _key: CallKey) -> Result<(), Refusal> {
        if self.0.gate_open() {
            Ok(())
        } else {
            Err(Refusal::Closed)
        }
    }
}

/// A Turn's saved identity and where its current rights are read.
pub(crate) struct AccessGuard {
    pub(crate) identity: ExecutionIdentity,
    pub(crate) store: Arc<dyn IdentityStore>,
    /// The budgets the Turn spends: those of the Chat its tree works for and that Chat's Bot.
    pub(crate) budgets: Option<(Arc<dyn BudgetStore>, ChatId, BotId)>,
    /// What its model calls bill; with it, each model request reserves its estimate against
    /// the budgets and credits in its `sending` commit instead of the read-then-send check.
    pub(crate) billing: Option<super::BillingContext>,
}

/// The saved identity still has its rights (a revoked or expired token, a removed member or a
/// narrowed right stops the send).
pub(super) struct CurrentRights {
    pub(super) identity: ExecutionIdentity,
    pub(super) store: Arc<dyn IdentityStore>,
}

#[async_trait]
impl SendGuard for CurrentRights {
    async fn check(&self, _key: CallKey) -> Result<(), Refusal> {
        match self.identity.check_current(self.store.as_ref()).await {
            Ok(()) => Ok(()),
            Err(IdentityCheckError::Denied(why)) => Err(Refusal::Denied(why)),
            Err(IdentityCheckError::Store(err)) => Err(Refusal::Storage(err)),
        }
    }
}

impl DurableHost {
    /// Runs the guard chain for `key`, in order; the first refusal stops it.
    pub(super) async fn check_guards(&self, key: CallKey) -> Result<(), HostError> {
        for guard in &self.guards {
            match guard.check(key).await {
                Ok(()) => {}
                Err(Refusal::Closed) => return Err(HostError::Closed),
                Err(Refusal::Denied(why)) => return Err(HostError::Denied(why)),
                Err(Refusal::Failed { category, cause }) => {
                    return Err(HostError::Refused { category, cause });
                }
                Err(Refusal::Storage(err)) => return Err(self.fail(err)),
            }
        }
        Ok(())
    }

    /// Whether a budget of the Turn's organization, Bot or Chat is used up.
    pub(super) async fn budget_spent(&self) -> Result<bool, HostError> {
        // A billed Turn's reservation decides, in the database, as the request is marked sent.
        if self.billing.is_some() {
            return Ok(false);
        }
        let Some((budgets, chat, bot, organization)) = &self.budgets else {
            return Ok(false);
        };
        match budgets.exhausted(*organization, *bot, *chat).await {
            Ok(None) => Ok(false),
            Ok(Some(exhausted)) => {
                tracing::info!(execution = %self.id, scope = exhausted.scope.as_str(), "a budget is used up; the Turn ends");
                Ok(true)
            }
            Err(err) => Err(self.fail(err)),
        }
    }
}
