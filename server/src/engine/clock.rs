//! The node's clock for durable timers.
//!
//! A waiting execution's wake time (`Next::Wait { until }`) is read against this clock: the
//! runner claims the executions whose time came ([`crate::store::ExecutionStore::claim_due`]) and
//! sleeps until the next one. Leases stay on the system's time, so a test clock moved ahead
//! fires timers without making any owner's lease look lapsed.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use crate::store::{Millis, now_ms};

/// Where the time of durable timers comes from.
pub trait Clock: Send + Sync + 'static {
    /// Now, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> Millis;

    /// Notified when the time jumped (a test clock moved); the system clock never is.
    fn jumped(&self) -> Option<Arc<Notify>> {
        None
    }
}

/// The system's time.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        now_ms()
    }
}

/// A clock a test moves: the system's time plus an offset that only grows. Moving it wakes
/// the runners that use it, so a timer fires without the test waiting for it.
#[derive(Debug, Default)]
pub struct TestClock {
    offset: AtomicI64,
    jumped: Arc<Notify>,
}

impl TestClock {
    /// A clock at the system's time.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Moves the clock ahead by `by` and wakes the runners.
    pub fn advance(&self, by: Duration) {
        self.offset.fetch_add(
            by.as_millis().min(i64::MAX as u128) as i64,
            Ordering::SeqCst,
        );
        self.jumped.notify_waiters();
    }
}

impl Clock for TestClock {
    fn now_ms(&self) -> Millis {
        now_ms().saturating_add(self.offset.load(Ordering::SeqCst))
    }

    fn jumped(&self) -> Option<Arc<Notify>> {
        Some(Arc::clone(&self.jumped))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_clock_moves_only_when_advanced() {
        let clock = TestClock::new();
        let before = clock.now_ms();
        clock.advance(Duration::from_secs(3600));
        let after = clock.now_ms();
        assert!(after - before >= 3_600_000, "moved {}", after - before);
        assert!(after - now_ms() >= 3_599_000);
    }
}
