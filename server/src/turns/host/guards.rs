//! The checks before an outside send, as one chain: a call is sent, and marked `sending`, only
//! when every guard passed, in order. (A retry-safe tool's call is saved as `sending` with the
//! answer that asked for it, before its guards: sending it again repeats nothing, so a refused
//! one is only a call that may be sent later.) A new per-call rule (permits, an App
//! connection's revision) is one more guard, not another branch of the host. Vault fields are
//! the exception: they are checked and opened inside the HTTP tool's send
//! (`vaults/opener.rs`), because a refused guard ends the Turn while a missing secret is a
//! result the model sees, and because there the check and the opening are one read.
//!
//! A guard that only reads (current rights) runs beside the one before it; its answer counts
//! unless that one took room in a limit, after which it reads again: the rights a send uses
//! are always read after any wait for a limit.

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

/// What a guard that passed did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Passed {
    /// It only looked: a read-only guard after it may have read its facts beside it.
    Looked,
    /// It took something (room in a limit), maybe after a wait: the guards after it read
    /// their facts after it.
    Took,
}

/// One check before an outside send.
#[async_trait]
pub(crate) trait SendGuard: Send + Sync {
    /// Passes, or says why `key` may not be sent now.
    async fn check(&self, key: CallKey) -> Result<Passed, Refusal>;

    /// Whether the check only reads: then it runs beside the guard before it, and its answer
    /// counts when that one only looked (it is checked again after one that took).
    fn reads_only(&self) -> bool {
        false
    }
}

/// The phase's gate: a pause or a cancel closes it before anything else.
pub(super) struct OpenGate(pub(super) RunScope);

#[async_trait]
impl SendGuard for OpenGate {
    async fn check(&self, _key: CallKey) -> Result<Passed, Refusal> {
        if self.0.gate_open() {
            Ok(Passed::Looked)
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
    async fn check(&self, _key: CallKey) -> Result<Passed, Refusal> {
        match self.identity.check_current(self.store.as_ref()).await {
            Ok(()) => Ok(Passed::Looked),
            Err(IdentityCheckError::Denied(why)) => Err(Refusal::Denied(why)),
            Err(IdentityCheckError::Store(err)) => Err(Refusal::Storage(err)),
        }
    }

    fn reads_only(&self) -> bool {
        true
    }
}

/// Runs `guards` for `key`, in order; the first refusal stops them. A read-only guard runs
/// beside the one before it, so a send without limits waits for one round of reads, not one
/// per guard; after a guard that took room, the next one reads again.
pub(super) async fn run_chain(guards: &[Box<dyn SendGuard>], key: CallKey) -> Result<(), Refusal> {
    let mut at = 0;
    while let Some(guard) = guards.get(at) {
        match guards.get(at + 1).filter(|next| next.reads_only()) {
            Some(next) => {
                let (passed, beside) = tokio::join!(guard.check(key), next.check(key));
                if passed? == Passed::Looked {
                    beside?;
                    at += 1;
                }
            }
            None => {
                guard.check(key).await?;
            }
        }
        at += 1;
    }
    Ok(())
}

impl DurableHost {
    /// Runs the guard chain for `key` (see [`run_chain`]).
    pub(super) async fn check_guards(&self, key: CallKey) -> Result<(), HostError> {
        match run_chain(&self.guards, key).await {
            Ok(()) => Ok(()),
            Err(Refusal::Closed) => Err(HostError::Closed),
            Err(Refusal::Denied(why)) => Err(HostError::Denied(why)),
            Err(Refusal::Failed { category, cause }) => Err(HostError::Refused { category, cause }),
            Err(Refusal::Storage(err)) => Err(self.fail(err)),
        }
    }

    /// Whether a budget of the Turn's organization, Bot or Chat is used up.
    pub(super) async fn budget_spent(&self) -> Result<bool, HostError> {
        // A billed Turn's reservation decides, in the database, as the request is marked sent.
        if self.billing.context.is_some() {
            return Ok(false);
        }
        let Some((budgets, chat, bot, organization)) = &self.budgets else {
            return Ok(false);
        };
        match budgets.exhausted(*organization, *bot, *chat).await {
            Ok(None) => Ok(false),
            Ok(Some(exhausted)) => {
                tracing::info!(
                    scope = exhausted.scope.as_str(),
                    "a budget is used up; the Turn ends"
                );
                Ok(true)
            }
            Err(err) => Err(self.fail(err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use openbot_core::turn::CallSlot;

    use super::*;

    /// A guard that logs when it starts and ends its check.
    struct Logged {
        name: &'static str,
        answer: fn() -> Result<Passed, Refusal>,
        reads_only: bool,
        log: Log,
    }

    #[async_trait]
    impl SendGuard for Logged {
        async fn check(&self, _key: CallKey) -> Result<Passed, Refusal> {
            self.log
                .lock()
                .unwrap()
                .push(format!("{} starts", self.name));
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.log.lock().unwrap().push(format!("{} ends", self.name));
            (self.answer)()
        }

        fn reads_only(&self) -> bool {
            self.reads_only
        }
    }

    type Log = Arc<Mutex<Vec<String>>>;

    fn chain(
        first: fn() -> Result<Passed, Refusal>,
        second: fn() -> Result<Passed, Refusal>,
    ) -> (Vec<Box<dyn SendGuard>>, Log) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let guards: Vec<Box<dyn SendGuard>> = vec![
            Box::new(Logged {
                name: "permits",
                answer: first,
                reads_only: false,
                log: Arc::clone(&log),
            }),
            Box::new(Logged {
                name: "rights",
                answer: second,
                reads_only: true,
                log: Arc::clone(&log),
            }),
        ];
        (guards, log)
    }

    const KEY: CallKey = CallKey {
        step: 1,
        slot: CallSlot::Model,
        attempt: 1,
    };

    fn entries(log: &Log) -> Vec<String> {
        log.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn a_read_only_guard_reads_once_beside_a_guard_that_only_looked() {
        let (guards, log) = chain(|| Ok(Passed::Looked), || Ok(Passed::Looked));
        run_chain(&guards, KEY).await.unwrap();
        let log = entries(&log);
        assert_eq!(log.len(), 4, "{log:?}");
        assert_eq!(&log[..2], ["permits starts", "rights starts"], "{log:?}");
    }

    #[tokio::test]
    async fn a_read_only_guard_reads_again_after_a_guard_that_took_room() {
        let (guards, log) = chain(|| Ok(Passed::Took), || Ok(Passed::Looked));
        run_chain(&guards, KEY).await.unwrap();
        let log = entries(&log);
        assert_eq!(log.len(), 6, "{log:?}");
        // The answer that counts is read after the take ended.
        let took = log.iter().position(|e| e == "permits ends").unwrap();
        assert_eq!(
            &log[took + 1..],
            ["rights starts", "rights ends"],
            "{log:?}"
        );
    }

    #[tokio::test]
    async fn the_first_guards_refusal_wins_over_the_one_beside_it() {
        let (guards, _) = chain(
            || Err(Refusal::Closed),
            || Err(Refusal::Denied("revoked".into())),
        );
        assert!(matches!(
            run_chain(&guards, KEY).await,
            Err(Refusal::Closed)
        ));
    }

    #[tokio::test]
    async fn a_read_only_guards_refusal_stops_the_send_after_a_guard_that_only_looked() {
        let (guards, _) = chain(
            || Ok(Passed::Looked),
            || Err(Refusal::Denied("revoked".into())),
        );
        assert!(matches!(
            run_chain(&guards, KEY).await,
            Err(Refusal::Denied(why)) if why == "revoked"
        ));
    }

    #[tokio::test]
    async fn a_read_only_guard_beside_a_take_refuses_only_from_its_read_after_it() {
        let (guards, log) = chain(
            || Ok(Passed::Took),
            || Err(Refusal::Denied("revoked".into())),
        );
        assert!(matches!(
            run_chain(&guards, KEY).await,
            Err(Refusal::Denied(_))
        ));
        assert_eq!(
            entries(&log)
                .iter()
                .filter(|e| *e == "rights starts")
                .count(),
            2
        );
    }
}
