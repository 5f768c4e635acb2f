//! The native client: every API operation through the one generic call path
//! ([`Client::call`], by `operationId`), the event stream of `observe`, and `close`, each in a
//! sync form (waits with the GIL released) and an async form (an awaitable of the running event
//! loop).
//!
//! Values cross as plain Python data (`dict`, `list`, `str`, ...) converted with serde; the
//! core decodes them as the schema types, so the Python layer (generated from the same schema)
//! and the server cannot disagree on a field.

use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use openbot_core::{ApiAnswer, ApiBody, ApiRequest, Client, ConnectOptions, Error, ObserveStream};
use openbot_schema::{Event, ExecutionId};
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use pyo3_async_runtimes::TaskLocals;
use serde::Serialize;
use serde_json::Value;

use crate::bridge::{Bridge, Deliver, Started};
use crate::errors::{invalid, to_py};
use crate::runtime::{Owner, block_on};
use crate::tool::PyTool;

/// The most events one read hands to Python at once.
const BATCH: usize = 256;

/// What an operation answered, as Python data: `None`, the JSON document as `dict`/`list`/...,
/// or `(bytes, media type)`.
struct Answer(ApiAnswer);

fn python<'py, T: Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    Ok(pythonize::pythonize(py, value)?)
}

impl<'py> IntoPyObject<'py> for Answer {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        match self.0 {
            ApiAnswer::Empty => Ok(py.None().into_bound(py)),
            ApiAnswer::Json(value) => python(py, &value),
            ApiAnswer::Bytes(bytes) => {
                let data = PyBytes::new(py, &bytes.data);
                (data, bytes.content_type).into_bound_py_any(py)
            }
        }
    }
}

/// An answer to hand to the event loop.
fn deliver<T>(value: T) -> Deliver
where
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    Box::new(move |py| value.into_py_any(py))
}

/// The request of one operation read from Python: `params` a `dict` of path and query
/// parameters by name (`None` values left out), `body` the JSON body as Python data, or with
/// `content_type` the body's bytes.
fn request(
    params: Option<&Bound<'_, PyDict>>,
    body: Option<&Bound<'_, PyAny>>,
    content_type: Option<String>,
) -> PyResult<ApiRequest> {
    let mut request = ApiRequest::default();
    if let Some(params) = params {
        for (name, value) in params.iter() {
            let name: String = name
                .extract()
                .map_err(|_| invalid("parameter", "a parameter name must be a str"))?;
            if value.is_none() {
                continue;
            }
            let value: Value =
                pythonize::depythonize(&value).map_err(|e| invalid(&format!("`{name}`"), e))?;
            request.params.insert(name, value);
        }
    }
    match (body.filter(|b| !b.is_none()), content_type) {
        (None, _) => {}
        (Some(body), Some(content_type)) => {
            let data: Vec<u8> = body
                .extract()
                .map_err(|_| invalid("body", "bytes were expected"))?;
            request.bytes(data, &content_type);
        }
        (Some(body), None) => {
            let value: Value = pythonize::depythonize(body).map_err(|e| invalid("body", e))?;
            request.body = Some(ApiBody::Json(value));
        }
    }
    Ok(request)
}

/// A connected client (either mode). Made by `connect_sync` or `connect_async`.
#[pyclass(frozen, module = "openbot_platform._native")]
pub struct NativeClient {
    client: Owner<Arc<dyn Client>>,
}

impl NativeClient {
    fn client(&self) -> PyResult<Arc<dyn Client>> {
        self.client.get().map(Arc::clone).map_err(to_py)
    }
}

#[pymethods]
impl NativeClient {
    /// Runs the API operation `op` (its `operationId`) through the one generic call path and
    /// waits for its answer with the GIL released.
    #[pyo3(signature = (op, params=None, body=None, content_type=None))]
    fn call_sync(
        &self,
        py: Python<'_>,
        op: &str,
        params: Option<&Bound<'_, PyDict>>,
        body: Option<&Bound<'_, PyAny>>,
        content_type: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let client = self.client()?;
        let request = request(params, body, content_type)?;
        let op = op.to_string();
        let answer =
            block_on(py, async move { client.call(&op, request).await })?.map_err(to_py)?;
        Ok(Answer(answer).into_pyobject(py)?.unbind())
    }

    /// Starts `op` like `call_sync`; its answer comes through `bridge` under `ticket`.
    #[pyo3(signature = (bridge, ticket, op, params=None, body=None, content_type=None))]
    #[allow(clippy::too_many_arguments)]
    fn call_async(
        &self,
        py: Python<'_>,
        bridge: &Bridge,
        ticket: u64,
        op: &str,
        params: Option<&Bound<'_, PyDict>>,
        body: Option<&Bound<'_, PyAny>>,
        content_type: Option<String>,
    ) -> PyResult<Started> {
        let client = self.client()?;
        let request = request(params, body, content_type)?;
        let op = op.to_string();
        bridge.start(py, ticket, async move {
            client.call(&op, request).await.map(|a| deliver(Answer(a)))
        })
    }

    /// The events of execution `id` after sequence `after`, read with `next_sync`.
    fn observe_sync(&self, py: Python<'_>, id: &str, after: u64) -> PyResult<NativeEvents> {
        let client = self.client()?;
        let id: ExecutionId = id.parse().map_err(|e| invalid("execution ID", e))?;
        let stream = block_on(py, async move { client.observe(id, after).await })?;
        Ok(NativeEvents::new(stream.map_err(to_py)?))
    }

    /// Opens the events of execution `id` after sequence `after` (read with `next_async`);
    /// the stream comes through `bridge` under `ticket`.
    fn observe_async(
        &self,
        py: Python<'_>,
        bridge: &Bridge,
        ticket: u64,
        id: &str,
        after: u64,
    ) -> PyResult<Started> {
        let client = self.client()?;
        let id: ExecutionId = id.parse().map_err(|e| invalid("execution ID", e))?;
        bridge.start(py, ticket, async move {
            let stream = client.observe(id, after).await?;
            Ok(deliver(NativeEvents::new(stream)))
        })
    }

    /// Closes the client and waits for it with the GIL released.
    fn close_sync(&self, py: Python<'_>) -> PyResult<()> {
        let client = self.client()?;
        block_on(py, async move { client.close().await })
    }

    /// Closes the client; the answer (`None`) comes through `bridge` under `ticket`.
    fn close_async(&self, py: Python<'_>, bridge: &Bridge, ticket: u64) -> PyResult<Started> {
        let client = self.client()?;
        bridge.start(py, ticket, async move {
            client.close().await;
            Ok(deliver(()))
        })
    }
}

/// What a read of events holds between calls.
struct EventState {
    stream: Option<ObserveStream>,
    /// An error met after some events were read; raised by the next read.
    pending: Option<Error>,
}

/// An open stream of events.
#[pyclass(frozen, module = "openbot_platform._native")]
pub struct NativeEvents {
    state: Owner<Arc<tokio::sync::Mutex<EventState>>>,
}

impl NativeEvents {
    fn new(stream: ObserveStream) -> Self {
        Self {
            state: Owner::new(Arc::new(tokio::sync::Mutex::new(EventState {
                stream: Some(stream),
                pending: None,
            }))),
        }
    }

    fn state(&self) -> PyResult<Arc<tokio::sync::Mutex<EventState>>> {
        self.state.get().map(Arc::clone).map_err(to_py)
    }
}

/// The next events: waits for one, then takes those already there. `None` at the end.
async fn next_batch(
    state: Arc<tokio::sync::Mutex<EventState>>,
) -> Result<Option<Vec<Event>>, Error> {
    let mut state = state.lock().await;
    if let Some(err) = state.pending.take() {
        return Err(err);
    }
    let Some(stream) = state.stream.as_mut() else {
        return Ok(None);
    };
    let first = match stream.next().await {
        Some(event) => event?,
        None => {
            state.stream = None;
            return Ok(None);
        }
    };
    let mut batch = vec![first];
    while batch.len() < BATCH {
        match stream.next().now_or_never() {
            Some(Some(Ok(event))) => batch.push(event),
            Some(Some(Err(err))) => {
                state.pending = Some(err);
                break;
            }
            Some(None) => {
                state.stream = None;
                break;
            }
            None => break,
        }
    }
    Ok(Some(batch))
}

/// Events as Python data, or `None` at the end.
struct Batch(Option<Vec<Event>>);

impl<'py> IntoPyObject<'py> for Batch {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        match self.0 {
            Some(events) => python(py, &events),
            None => Ok(py.None().into_bound(py)),
        }
    }
}

#[pymethods]
impl NativeEvents {
    /// The next events as a list of dicts (at least one), or `None` after the last; waits
    /// with the GIL released.
    fn next_sync(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let state = self.state()?;
        let batch = block_on(py, next_batch(state))?.map_err(to_py)?;
        Ok(Batch(batch).into_pyobject(py)?.unbind())
    }

    /// Like `next_sync`; the answer comes through `bridge` under `ticket`.
    fn next_async(&self, py: Python<'_>, bridge: &Bridge, ticket: u64) -> PyResult<Started> {
        let state = self.state()?;
        bridge.start(py, ticket, async move {
            next_batch(state).await.map(|batch| deliver(Batch(batch)))
        })
    }

    /// Stops reading: later reads end at once. Cancels nothing.
    fn close(&self) -> PyResult<()> {
        let state = self.state()?;
        if let Ok(mut state) = state.try_lock() {
            state.stream = None;
        }
        Ok(())
    }
}

/// One host tool given to `connect`: its name, the wrapped function (one `dict` in, `str`
/// out), and whether that function is async.
type ToolArg = (String, Py<PyAny>, bool);

/// This machine as a Computer (memory mode): its allowed folders and whether it offers
/// terminal sessions.
type ComputerArg = Option<(Vec<String>, bool)>;

fn options(
    token: Option<String>,
    tools: Vec<ToolArg>,
    outbound: Option<&str>,
    computer: ComputerArg,
    event_loop: Option<&TaskLocals>,
) -> PyResult<ConnectOptions> {
    let mut shared: Vec<openbot_core::tool::SharedTool> = Vec::with_capacity(tools.len());
    for (name, function, is_async) in tools {
        let event_loop = match (is_async, event_loop) {
            (false, _) => None,
            (true, Some(locals)) => Some(locals.clone()),
            (true, None) => {
                return Err(invalid(
                    "tool",
                    format!("`{name}` is async: the sync client takes sync functions"),
                ));
            }
        };
        shared.push(Arc::new(PyTool::new(name, function, event_loop)));
    }
    ConnectOptions {
        token,
        tools: shared,
        ..ConnectOptions::default()
    }
    .with_outbound_allow(outbound)
    .and_then(|o| match computer {
        Some((folders, terminal)) => o.with_computer(Some(folders), terminal),
        None => Ok(o),
    })
    .map_err(to_py)
}

/// Connects and waits with the GIL released. Tools must be sync functions.
#[pyfunction]
#[pyo3(signature = (uri, token=None, tools=Vec::new(), outbound=None, computer=None))]
pub fn connect_sync(
    py: Python<'_>,
    uri: String,
    token: Option<String>,
    tools: Vec<ToolArg>,
    outbound: Option<String>,
    computer: ComputerArg,
) -> PyResult<NativeClient> {
    let options = options(token, tools, outbound.as_deref(), computer, None)?;
    let client = block_on(
        py,
        async move { openbot_core::connect(&uri, options).await },
    )?
    .map_err(to_py)?;
    Ok(NativeClient {
        client: Owner::new(client),
    })
}

/// Connects; the client comes through `bridge` under `ticket`. Must be called in a running
/// event loop: async tools run on it.
#[pyfunction]
#[pyo3(signature = (bridge, ticket, uri, token=None, tools=Vec::new(), outbound=None, computer=None))]
#[allow(clippy::too_many_arguments)] // the Python signature, one argument per option
pub fn connect_async(
    py: Python<'_>,
    bridge: &Bridge,
    ticket: u64,
    uri: String,
    token: Option<String>,
    tools: Vec<ToolArg>,
    outbound: Option<String>,
    computer: ComputerArg,
) -> PyResult<Started> {
    let locals = TaskLocals::with_running_loop(py)?.copy_context(py)?;
    let options = options(token, tools, outbound.as_deref(), computer, Some(&locals))?;
    bridge.start(py, ticket, async move {
        let client = openbot_core::connect(&uri, options).await?;
        Ok(deliver(NativeClient {
            client: Owner::new(client),
        }))
    })
}
