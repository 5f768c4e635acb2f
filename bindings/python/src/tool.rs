//! Python functions as core [`Tool`]s.
//!
//! The package wraps each user function so that it takes the call's arguments as one `dict`
//! and returns the text for the model (`str`). A sync function runs on a blocking thread of
//! the runtime, attached to Python only while it runs. An async function runs on the event
//! loop the async client was made in; its coroutine is created on the blocking thread and
//! awaited without holding the GIL. A raised exception becomes an error result whose text is
//! the exception's message.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use openbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use openbot_schema::ToolDefinition;
use pyo3::prelude::*;
use pyo3_async_runtimes::TaskLocals;
use serde_json::Value;

/// Set at interpreter exit: tools then no longer attach to Python.
static EXITING: AtomicBool = AtomicBool::new(false);
/// Tool calls attached to Python (or about to attach) right now.
static ATTACHED: AtomicUsize = AtomicUsize::new(0);

/// Runs `f` attached to Python, unless the interpreter is exiting: a thread that attaches
/// while Python finalizes crashes the process.
fn with_python<T>(f: impl FnOnce(Python<'_>) -> Result<T, ToolError>) -> Result<T, ToolError> {
    struct Attached;
    impl Drop for Attached {
        fn drop(&mut self) {
            ATTACHED.fetch_sub(1, Ordering::SeqCst);
        }
    }
    ATTACHED.fetch_add(1, Ordering::SeqCst);
    let _attached = Attached;
    if EXITING.load(Ordering::SeqCst) {
        return Err(ToolError::new("the Python interpreter is exiting"));
    }
    Python::attach(f)
}

/// Called at interpreter exit (`atexit`): from now on tool calls fail instead of running
/// Python, and this waits (GIL released) up to `timeout` seconds for the calls that are in
/// Python to return. Returns how many are still running.
#[pyfunction]
#[pyo3(signature = (timeout=5.0))]
pub fn shutdown(py: Python<'_>, timeout: f64) -> usize {
    EXITING.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs_f64(timeout.clamp(0.0, 3600.0));
    py.detach(|| {
        while ATTACHED.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        ATTACHED.load(Ordering::SeqCst)
    })
}

/// A Python function offered to the model.
pub struct PyTool {
    definition: ToolDefinition,
    function: Arc<Py<PyAny>>,
    /// Set for an async function: the loop its coroutines run on.
    event_loop: Option<TaskLocals>,
}

impl PyTool {
    /// A tool named `name` calling `function` (sync unless `event_loop` is given).
    pub fn new(name: String, function: Py<PyAny>, event_loop: Option<TaskLocals>) -> Self {
        Self {
            definition: ToolDefinition {
                name,
                description: String::new(),
                input_schema: serde_json::json!({"type": "object"}),
            },
            function: Arc::new(function),
            event_loop,
        }
    }
}

/// The message of a Python exception, for the model: `str(exc)`, or the class name if empty.
fn message(py: Python<'_>, err: &PyErr) -> String {
    let text = err
        .value(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_default();
    if text.is_empty() {
        err.get_type(py)
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "the tool raised an exception".into())
    } else {
        text
    }
}

fn output(py: Python<'_>, value: &Bound<'_, PyAny>) -> Result<ToolOutput, ToolError> {
    value
        .extract::<String>()
        .map(ToolOutput::text)
        .map_err(|e| ToolError::new(message(py, &e)))
}

#[async_trait]
impl Tool for PyTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        // Never wait for the GIL on a runtime worker: everything Python runs on a blocking
        // thread.
        let function = Arc::clone(&self.function);
        let event_loop = self.event_loop.clone();
        let run = async move {
            match event_loop {
                None => tokio::task::spawn_blocking(move || {
                    with_python(|py| {
                        let args = pythonize::pythonize(py, &arguments)
                            .map_err(|e| ToolError::new(e.to_string()))?;
                        match function.bind(py).call1((args,)) {
                            Ok(value) => output(py, &value),
                            Err(err) => Err(ToolError::new(message(py, &err))),
                        }
                    })
                })
                .await
                .map_err(|e| ToolError::new(format!("the tool stopped: {e}")))?,
                Some(locals) => {
                    let awaited = tokio::task::spawn_blocking(move || {
                        with_python(|py| {
                            let args = pythonize::pythonize(py, &arguments)
                                .map_err(|e| ToolError::new(e.to_string()))?;
                            let coroutine = function
                                .bind(py)
                                .call1((args,))
                                .map_err(|err| ToolError::new(message(py, &err)))?;
                            pyo3_async_runtimes::into_future_with_locals(&locals, coroutine.clone())
                                .map_err(|err| {
                                    // Not scheduled (the loop is closed): close the coroutine
                                    // so it is not reported as never awaited.
                                    let _ = coroutine.call_method0("close");
                                    ToolError::new(message(py, &err))
                                })
                        })
                    })
                    .await
                    .map_err(|e| ToolError::new(format!("the tool stopped: {e}")))??;
                    let value = awaited.await;
                    tokio::task::spawn_blocking(move || {
                        with_python(|py| match value {
                            Ok(value) => output(py, value.bind(py)),
                            Err(err) => Err(ToolError::new(message(py, &err))),
                        })
                    })
                    .await
                    .map_err(|e| ToolError::new(format!("the tool stopped: {e}")))?
                }
            }
        };
        tokio::select! {
            result = run => result,
            () = context.cancel.cancelled() => Err(ToolError::new("the Turn was cancelled")),
        }
    }
}
