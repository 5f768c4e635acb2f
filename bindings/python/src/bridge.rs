//! Answers of async calls, handed to an asyncio event loop without the GIL.
//!
//! Each event loop has a [`Bridge`]: a socket pair whose reading end the loop watches
//! (`loop.add_reader`). A call started on the runtime pushes its answer into the bridge and
//! writes one byte; the loop wakes, and on its own thread (holding the GIL, which nobody else
//! needs to take) `drain` turns the answers into Python values that the package sets on the
//! callers' futures. So an answer costs one wake-up of the loop's thread, and no runtime thread
//! ever waits for the GIL.

use std::future::Future;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt;
use openbot_core::Error;
use pyo3::prelude::*;

use crate::errors::to_py;
use crate::runtime::{Owner, handle};

/// Turns an answer into a Python value; runs on the loop's thread.
pub type Deliver = Box<dyn for<'py> FnOnce(Python<'py>) -> PyResult<Py<PyAny>> + Send>;

struct Shared {
    reader: UnixStream,
    writer: UnixStream,
    done: Mutex<Vec<(u64, Result<Deliver, Error>)>>,
}

/// The answers of one event loop's calls.
#[pyclass(frozen, module = "openbot_platform._native")]
pub struct Bridge {
    shared: Owner<Arc<Shared>>,
}

/// A started call; `cancel` drops it.
#[pyclass(frozen, module = "openbot_platform._native")]
pub struct Pending {
    task: tokio::task::AbortHandle,
}

#[pymethods]
impl Pending {
    /// Drops the call: its answer never comes.
    fn cancel(&self) {
        self.task.abort();
    }
}

impl Bridge {
    /// Starts `future`. A future that is ready at its first poll (polled here, detached, in
    /// the runtime's context) is answered at once: `(None, ok, value or exception)`. Otherwise
    /// it runs on the runtime and its answer comes back through `drain` under `ticket`:
    /// `(pending, True, None)`.
    pub fn start<F>(&self, py: Python<'_>, ticket: u64, future: F) -> PyResult<Started>
    where
        F: Future<Output = Result<Deliver, Error>> + Send + 'static,
    {
        let shared = self.shared.get().map(Arc::clone).map_err(to_py)?;
        let handle = handle().map_err(to_py)?;
        let mut future = Box::pin(future);
        let ready = py.detach(|| {
            let _runtime = handle.enter();
            future.as_mut().now_or_never()
        });
        if let Some(answer) = ready {
            let (ok, value) = answer_value(py, answer);
            return Ok((None, ok, value));
        }
        let task = handle.spawn(async move {
            let answer = future.await;
            shared
                .done
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((ticket, answer));
            // A full socket already has a wake-up pending; the answer is in `done` either way.
            let _ = (&shared.writer).write(&[1]);
        });
        let pending = Pending {
            task: task.abort_handle(),
        };
        Ok((Some(pending), true, py.None()))
    }
}

/// What `start` returns to Python: the pending call, or none and the answer.
pub type Started = (Option<Pending>, bool, Py<PyAny>);

/// An answer as `(ok, value or exception)`.
fn answer_value(py: Python<'_>, answer: Result<Deliver, Error>) -> (bool, Py<PyAny>) {
    let value = match answer {
        Ok(deliver) => deliver(py),
        Err(error) => Err(to_py(error)),
    };
    match value {
        Ok(value) => (true, value),
        Err(err) => (false, err.into_value(py).into_any()),
    }
}

#[pymethods]
impl Bridge {
    /// A bridge with a fresh socket pair.
    #[new]
    fn new() -> PyResult<Self> {
        let (reader, writer) = UnixStream::pair()?;
        reader.set_nonblocking(true)?;
        writer.set_nonblocking(true)?;
        Ok(Self {
            shared: Owner::new(Arc::new(Shared {
                reader,
                writer,
                done: Mutex::new(Vec::new()),
            })),
        })
    }

    /// The file descriptor the loop watches for readability.
    fn fileno(&self) -> PyResult<i32> {
        Ok(self.shared.get().map_err(to_py)?.reader.as_raw_fd())
    }

    /// The answers that arrived: `(ticket, ok, value or exception)` each.
    fn drain(&self, py: Python<'_>) -> PyResult<Vec<(u64, bool, Py<PyAny>)>> {
        let shared = self.shared.get().map(Arc::clone).map_err(to_py)?;
        let mut buffer = [0u8; 512];
        loop {
            match (&shared.reader).read(&mut buffer) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let done = std::mem::take(&mut *shared.done.lock().unwrap_or_else(PoisonError::into_inner));
        Ok(done
            .into_iter()
            .map(|(ticket, answer)| {
                let (ok, value) = answer_value(py, answer);
                (ticket, ok, value)
            })
            .collect())
    }
}
