//! Intake: work this node runs straight from its submission. When the node's runner runs the
//! kind and has room, the submission's transaction also claims the execution for this node, so
//! it starts without a claim of its own: one write transaction and one wake-up of the claim
//! loop fewer before its first step.
//!
//! A crash between that commit and the start is a crash after a claim: the lease lapses and
//! another node (or this one, restarted) takes the execution over with the next generation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::runner::Runner;
use crate::store::{Claim, ClaimFor};
use crate::turns::faults::{FaultPoint, fault};

/// Where a submission finds this node's runner, if one runs.
#[derive(Default)]
pub(crate) struct Intake {
    runner: Mutex<Weak<Runner>>,
}

impl Intake {
    /// Submissions from now on may start on `runner`.
    pub(crate) fn open(&self, runner: &Arc<Runner>) {
        *self.runner.lock().unwrap_or_else(PoisonError::into_inner) = Arc::downgrade(runner);
    }

    /// Room on this node's runner for a new execution of `kind`: none when no runner runs,
    /// it has stopped, it does not run the kind, or it runs as much as it may.
    pub(crate) fn reserve(&self, kind: &str) -> Option<Room> {
        let runner = self
            .runner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .upgrade()?;
        runner.reserve(kind).then(|| Room { runner })
    }
}

/// A place held on the runner for one submission; given back when dropped unless the
/// execution started in it.
pub(crate) struct Room {
    runner: Arc<Runner>,
}

impl Room {
    /// What the submission's transaction writes to claim its execution.
    pub(crate) fn claim_for(&self) -> ClaimFor {
        self.runner.claim_for()
    }

    /// Runs the execution the submission claimed.
    pub(crate) fn start(self, claim: Claim) {
        fault(FaultPoint::AfterSubmissionClaimed);
        self.runner.spawn_program(claim);
    }
}

impl Drop for Room {
    fn drop(&mut self) {
        self.runner.unreserve();
    }
}

/// How many places submissions hold on a runner.
#[derive(Debug, Default)]
pub(crate) struct Reserved(AtomicUsize);

impl Reserved {
    /// Takes a place when `running` plus those held stay under `capacity`.
    pub(crate) fn take(&self, running: usize, capacity: usize) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                (running + held < capacity).then_some(held + 1)
            })
            .is_ok()
    }

    /// Gives a place back.
    pub(crate) fn give_back(&self) {
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_sub(1)
            });
    }

    /// The places held now.
    pub(crate) fn held(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::Reserved;

    #[test]
    fn places_are_taken_only_under_the_capacity() {
        let reserved = Reserved::default();
        assert!(reserved.take(0, 2));
        assert!(reserved.take(0, 2));
        assert!(!reserved.take(0, 2));
        assert_eq!(reserved.held(), 2);
    }

    #[test]
    fn running_executions_count_against_the_capacity() {
        let reserved = Reserved::default();
        assert!(!reserved.take(2, 2));
        assert!(reserved.take(1, 2));
        assert!(!reserved.take(1, 2));
    }

    #[test]
    fn a_place_given_back_can_be_taken_again() {
        let reserved = Reserved::default();
        assert!(reserved.take(0, 1));
        reserved.give_back();
        assert_eq!(reserved.held(), 0);
        assert!(reserved.take(0, 1));
        reserved.give_back();
        reserved.give_back();
        assert_eq!(reserved.held(), 0);
    }
}
