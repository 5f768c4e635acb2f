//! One Tokio runtime per process, and the two ways Python waits for it.
//!
//! - [`block_on`] (the sync API) runs a future on the runtime and waits with the GIL released,
//!   waking every 100 ms to let Python deliver signals (Ctrl-C cancels the wait and the call).
//! - [`crate::bridge::Bridge`] (the asyncio API) hands answers to the caller's event loop.
//!
//! After `os.fork()` the parent's runtime threads do not exist in the child. The child gets a
//! runtime of its own on first use; objects made in the parent notice they belong to another
//! process ([`Owner`]) and fail fast instead of waiting on threads that are gone. Their Rust
//! state is leaked in the child, never dropped, since dropping it could wait on those threads.

use std::future::Future;
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use futures::FutureExt;
use openbot_core::Error;
use openbot_schema::ErrorCode;
use pyo3::prelude::*;
use tokio::runtime::{Builder, Handle, Runtime};

/// The runtime of this process, with the process ID it was built in. Runtimes are leaked on
/// purpose: one per process, and a parent's runtime must never be dropped in a forked child.
static RUNTIME: Mutex<Option<(u32, &'static Runtime)>> = Mutex::new(None);

/// The Tokio runtime of this process, built on first use (again in a forked child).
pub fn handle() -> Result<Handle, Error> {
    let pid = std::process::id();
    let mut slot = RUNTIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((owner, runtime)) = *slot
        && owner == pid
    {
        return Ok(runtime.handle().clone());
    }
    let runtime = Builder::new_multi_thread()
        .enable_all()
        .thread_name("openbot")
        .build()
        .map_err(|e| {
            Error::new(
                ErrorCode::Unavailable,
                format!("cannot start the runtime: {e}"),
            )
        })?;
    let runtime: &'static Runtime = Box::leak(Box::new(runtime));
    *slot = Some((pid, runtime));
    Ok(runtime.handle().clone())
}

/// Marks a value as belonging to the process that made it.
#[derive(Debug)]
pub struct Owner<T> {
    pid: u32,
    value: Option<T>,
}

impl<T> Owner<T> {
    /// Owns `value` in this process.
    pub fn new(value: T) -> Self {
        Self {
            pid: std::process::id(),
            value: Some(value),
        }
    }

    /// The value, or a `closed` error in a process forked from its owner.
    pub fn get(&self) -> Result<&T, Error> {
        let pid = std::process::id();
        match &self.value {
            Some(value) if pid == self.pid => Ok(value),
            _ => Err(Error::new(
                ErrorCode::Closed,
                format!(
                    "this object was made in process {} and cannot be used in process {pid}, \
                     forked from it: connect again in this process",
                    self.pid
                ),
            )),
        }
    }
}

impl<T> Drop for Owner<T> {
    fn drop(&mut self) {
        // In a forked child the value is leaked: dropping it could wait on threads that exist
        // only in the parent.
        if std::process::id() != self.pid {
            std::mem::forget(self.value.take());
        }
    }
}

/// Runs `future` on the runtime and waits for it with the GIL released (a future that is ready
/// at its first poll answers at once, on this thread). Every 100 ms the wait
/// lets Python run its signal handlers; an exception there (KeyboardInterrupt) aborts the
/// future and is raised.
pub fn block_on<F, T>(py: Python<'_>, future: F) -> PyResult<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handle = handle().map_err(crate::errors::to_py)?;
    // Most calls of the in-memory mode are ready at once: answer them on this thread, with no
    // hop to the runtime and back. Polled detached, inside the runtime's context.
    let mut future = Box::pin(future);
    let ready = py.detach(|| {
        let _runtime = handle.enter();
        future.as_mut().now_or_never()
    });
    if let Some(value) = ready {
        return Ok(value);
    }
    let (tx, rx) = mpsc::sync_channel(1);
    let task = handle.spawn(async move {
        let _ = tx.send(future.await);
    });
    let mut rx = rx;
    loop {
        // The receiver is Send but not Sync: it goes into the detached closure and comes back.
        let (received, back) = py.detach(move || {
            let received = rx.recv_timeout(Duration::from_millis(100));
            (received, rx)
        });
        rx = back;
        match received {
            Ok(value) => return Ok(value),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(err) = py.check_signals() {
                    task.abort();
                    return Err(err);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(crate::errors::to_py(Error::new(
                    ErrorCode::Closed,
                    "the call ended without an answer (its runtime stopped)",
                )));
            }
        }
    }
}
