//! RunScope: what one phase owns. Cancelling closes the phase gate first, so no new outside
//! call can start, then signals the phase's task; closing waits for its resources.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// The resources and signals of one phase.
#[derive(Clone, Default)]
pub struct RunScope {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    closed_gate: AtomicBool,
    cancel: CancellationToken,
    closers: Mutex<Vec<BoxFuture<'static, ()>>>,
}

impl std::fmt::Debug for RunScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunScope")
            .field("gate_open", &self.gate_open())
            .field("cancelled", &self.inner.cancel.is_cancelled())
            .finish()
    }
}

impl RunScope {
    /// A new scope with its gate open.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether new outside calls may start.
    pub fn gate_open(&self) -> bool {
        !self.inner.closed_gate.load(Ordering::SeqCst)
    }

    /// Closes the gate without cancelling the task: calls already sent may finish and save
    /// their results, but no new call starts.
    pub fn close_gate(&self) {
        self.inner.closed_gate.store(true, Ordering::SeqCst);
    }

    /// Closes the gate, then cancels the phase's task. A send that checks the gate after this
    /// never starts.
    pub fn cancel(&self) {
        self.inner.closed_gate.store(true, Ordering::SeqCst);
        self.inner.cancel.cancel();
    }

    /// Cancelled when the phase must stop.
    pub fn cancellation(&self) -> CancellationToken {
        self.inner.cancel.clone()
    }

    /// Registers work that releases a resource; it runs when the scope closes.
    pub async fn on_close(&self, closer: BoxFuture<'static, ()>) {
        self.inner.closers.lock().await.push(closer);
    }

    /// Closes the gate and releases every resource, newest first. Returns once all are released.
    pub async fn close(&self) {
        self.inner.closed_gate.store(true, Ordering::SeqCst);
        let closers = std::mem::take(&mut *self.inner.closers.lock().await);
        for closer in closers.into_iter().rev() {
            closer.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn cancel_closes_the_gate_before_the_task_hears_of_it() {
        let scope = RunScope::new();
        let token = scope.cancellation();
        let seen = scope.clone();
        let task = tokio::spawn(async move {
            token.cancelled().await;
            seen.gate_open()
        });
        scope.cancel();
        assert!(
            !task.await.unwrap(),
            "the gate was closed when the task woke"
        );
    }

    #[tokio::test]
    async fn close_releases_resources_newest_first() {
        let scope = RunScope::new();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        for n in 1..=3 {
            let order = Arc::clone(&order);
            scope
                .on_close(Box::pin(async move { order.lock().unwrap().push(n) }))
                .await;
        }
        scope.close().await;
        assert_eq!(*order.lock().unwrap(), vec![3, 2, 1]);
        assert!(!scope.gate_open());
    }
}
