//! The native client: every [`Client`] call, each in a sync form (waits with the GIL released)
//! and an async form (an awaitable of the running event loop).
//!
//! Values cross as plain Python data (`dict`, `list`, `str`, ...) converted with serde to and
//! from the schema types, so the Python layer and the schema cannot disagree on a field.

use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use openbot_core::{Client, ConnectOptions, Error, ObserveStream};
use openbot_schema::{
    ApprovalRequest, ApprovalState, Bot, BotId, BotSpec, BotUpdate, Chat, ChatEntry, ChatId,
    DecideApproval, DecideOutcome, Event, Execution, ExecutionId, OutcomeDecisionRecord, PlanMode,
    SendInput, SendReceipt, ToolResult, UnknownOutcomePage,
};
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3_async_runtimes::TaskLocals;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bridge::{Bridge, Deliver, Started};
use crate::errors::{invalid, to_py};
use crate::runtime::{Owner, block_on};
use crate::tool::PyTool;

/// The most events one read hands to Python at once.
const BATCH: usize = 256;

/// One call of the [`Client`] trait with its arguments already read from Python.
enum Request {
    CreateBot(BotSpec),
    GetBot(BotId),
    ListBots,
    UpdateBot(BotId, BotUpdate),
    DeleteBot(BotId),
    CreateChat(BotId),
    GetChat(ChatId),
    Send(ChatId, SendInput),
    Steer(ChatId, SendInput),
    Stop(ChatId),
    DeleteChat(ChatId),
    History(ChatId),
    GetExecution(ExecutionId),
    CancelExecution(ExecutionId),
    DeliverToolResult(ExecutionId, ToolResult),
    ListApprovals(Option<ApprovalState>),
    /// The request's ID as given (read as a UUID when the call runs) and the decision.
    DecideApproval(String, DecideApproval),
    PauseExecution(ExecutionId),
    ResumeExecution(ExecutionId),
    PlanMode(ChatId),
    SetPlanMode(ChatId, bool),
    /// A page size and the cursor to start after.
    ListUnknownOutcomes(Option<u32>, Option<String>),
    DecideOutcome(ExecutionId, DecideOutcome),
}

/// The answer of a [`Request`].
enum Response {
    Bot(Bot),
    Bots(Vec<Bot>),
    Chat(Chat),
    Receipt(SendReceipt),
    History(Vec<ChatEntry>),
    Execution(Execution),
    Approvals(Vec<ApprovalRequest>),
    Approval(ApprovalRequest),
    PlanMode(PlanMode),
    UnknownOutcomes(UnknownOutcomePage),
    OutcomeDecision(OutcomeDecisionRecord),
    Nothing,
}

/// An answer to hand to the event loop.
fn deliver<T>(value: T) -> Deliver
where
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    Box::new(move |py| value.into_py_any(py))
}

fn python<'py, T: Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    Ok(pythonize::pythonize(py, value)?)
}

impl<'py> IntoPyObject<'py> for Response {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        match self {
            Response::Bot(v) => python(py, &v),
            Response::Bots(v) => python(py, &v),
            Response::Chat(v) => python(py, &v),
            Response::Receipt(v) => python(py, &v),
            Response::History(v) => python(py, &v),
            Response::Execution(v) => python(py, &v),
            Response::Approvals(v) => python(py, &v),
            Response::Approval(v) => python(py, &v),
            Response::PlanMode(v) => python(py, &v),
            Response::UnknownOutcomes(v) => python(py, &v),
            Response::OutcomeDecision(v) => python(py, &v),
            Response::Nothing => Ok(py.None().into_bound(py)),
        }
    }
}

fn required<'a, 'py>(
    value: Option<&'a Bound<'py, PyAny>>,
    what: &str,
) -> PyResult<&'a Bound<'py, PyAny>> {
    value.ok_or_else(|| invalid(what, "missing"))
}

fn id<T>(value: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<T>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    let text: String = required(value, what)?
        .extract()
        .map_err(|_| invalid(what, "expected a str"))?;
    text.parse::<T>().map_err(|e| invalid(what, e))
}

/// An optional approval state: `None`, or its wire name (`pending`, `approved`, ...).
fn approval_state(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<ApprovalState>> {
    let Some(value) = value else {
        return Ok(None);
    };
    let text: String = value
        .extract()
        .map_err(|_| invalid("approval state", "expected a str"))?;
    ApprovalState::parse(&text).map(Some).ok_or_else(|| {
        invalid(
            "approval state",
            format!(
                "`{}` is not one: use pending, approved, denied, expired, revoked or cancelled",
                text.chars().take(64).collect::<String>()
            ),
        )
    })
}

/// An optional page size: `None`, or an int from 1 (the server says how many at most).
fn page_limit(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u32>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    match value.extract::<u32>() {
        Ok(limit) if limit >= 1 => Ok(Some(limit)),
        _ => Err(invalid("page limit", "expected an int from 1")),
    }
}

/// An optional cursor: `None`, or a str.
fn page_cursor(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    value
        .extract::<String>()
        .map(Some)
        .map_err(|_| invalid("cursor", "expected a str"))
}

fn data<T: DeserializeOwned>(value: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<T> {
    pythonize::depythonize(required(value, what)?).map_err(|e| invalid(what, e))
}

impl Request {
    fn read(
        op: &str,
        a: Option<&Bound<'_, PyAny>>,
        b: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Ok(match op {
            "create_bot" => Request::CreateBot(data(a, "Bot spec")?),
            "get_bot" => Request::GetBot(id(a, "Bot ID")?),
            "list_bots" => Request::ListBots,
            "update_bot" => Request::UpdateBot(id(a, "Bot ID")?, data(b, "Bot update")?),
            "delete_bot" => Request::DeleteBot(id(a, "Bot ID")?),
            "create_chat" => Request::CreateChat(id(a, "Bot ID")?),
            "get_chat" => Request::GetChat(id(a, "Chat ID")?),
            "send" => Request::Send(id(a, "Chat ID")?, data(b, "input")?),
            "steer" => Request::Steer(id(a, "Chat ID")?, data(b, "input")?),
            "stop" => Request::Stop(id(a, "Chat ID")?),
            "delete_chat" => Request::DeleteChat(id(a, "Chat ID")?),
            "history" => Request::History(id(a, "Chat ID")?),
            "get_execution" => Request::GetExecution(id(a, "execution ID")?),
            "cancel_execution" => Request::CancelExecution(id(a, "execution ID")?),
            "deliver_tool_result" => {
                Request::DeliverToolResult(id(a, "execution ID")?, data(b, "tool result")?)
            }
            "list_approvals" => Request::ListApprovals(approval_state(a)?),
            "decide_approval" => Request::DecideApproval(
                required(a, "approval request ID")?
                    .extract()
                    .map_err(|_| invalid("approval request ID", "expected a str"))?,
                data(b, "decision")?,
            ),
            "pause_execution" => Request::PauseExecution(id(a, "execution ID")?),
            "resume_execution" => Request::ResumeExecution(id(a, "execution ID")?),
            "plan_mode" => Request::PlanMode(id(a, "Chat ID")?),
            "set_plan_mode" => Request::SetPlanMode(
                id(a, "Chat ID")?,
                required(b, "plan mode")?
                    .extract()
                    .map_err(|_| invalid("plan mode", "expected a bool"))?,
            ),
            "list_unknown_outcomes" => {
                Request::ListUnknownOutcomes(page_limit(a)?, page_cursor(b)?)
            }
            "decide_outcome" => {
                Request::DecideOutcome(id(a, "execution ID")?, data(b, "outcome decision")?)
            }
            other => return Err(invalid("operation", format!("`{other}` is not one"))),
        })
    }

    async fn run(self, client: Arc<dyn Client>) -> Result<Response, Error> {
        Ok(match self {
            Request::CreateBot(spec) => Response::Bot(client.create_bot(spec).await?),
            Request::GetBot(id) => Response::Bot(client.get_bot(id).await?),
            Request::ListBots => Response::Bots(client.list_bots().await?),
            Request::UpdateBot(id, update) => Response::Bot(client.update_bot(id, update).await?),
            Request::DeleteBot(id) => {
                client.delete_bot(id).await?;
                Response::Nothing
            }
            Request::CreateChat(bot) => Response::Chat(client.create_chat(bot).await?),
            Request::GetChat(id) => Response::Chat(client.get_chat(id).await?),
            Request::Send(chat, input) => Response::Receipt(client.send(chat, input).await?),
            Request::Steer(chat, input) => Response::Receipt(client.steer(chat, input).await?),
            Request::Stop(chat) => {
                client.stop(chat).await?;
                Response::Nothing
            }
            Request::DeleteChat(chat) => {
                client.delete_chat(chat).await?;
                Response::Nothing
            }
            Request::History(chat) => Response::History(client.history(chat).await?),
            Request::GetExecution(id) => Response::Execution(client.get_execution(id).await?),
            Request::CancelExecution(id) => Response::Execution(client.cancel_execution(id).await?),
            Request::DeliverToolResult(id, result) => {
                client.deliver_tool_result(id, result).await?;
                Response::Nothing
            }
            Request::ListApprovals(state) => {
                Response::Approvals(client.list_approvals(state).await?)
            }
            Request::DecideApproval(text, decision) => {
                // Read as the UUID type `decide_approval` takes, before anything is sent.
                let id = text.parse().map_err(|_| {
                    Error::invalid_input(format!(
                        "invalid approval request ID: `{}` is not a UUID",
                        text.chars().take(64).collect::<String>()
                    ))
                })?;
                Response::Approval(client.decide_approval(id, decision).await?)
            }
            Request::PauseExecution(id) => Response::Execution(client.pause_execution(id).await?),
            Request::ResumeExecution(id) => Response::Execution(client.resume_execution(id).await?),
            Request::PlanMode(chat) => Response::PlanMode(client.plan_mode(chat).await?),
            Request::SetPlanMode(chat, enabled) => {
                Response::PlanMode(client.set_plan_mode(chat, enabled).await?)
            }
            Request::ListUnknownOutcomes(limit, cursor) => {
                Response::UnknownOutcomes(client.list_unknown_outcomes(limit, cursor).await?)
            }
            Request::DecideOutcome(id, decision) => {
                Response::OutcomeDecision(client.decide_outcome(id, decision).await?)
            }
        })
    }
}

/// A connected client (either mode). Made by `connect_sync` or `connect_async`.
#[pyclass(frozen, module = "openbot._native")]
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
    /// Runs `op` (a `Client` method name) with up to two arguments and waits for its answer
    /// with the GIL released.
    #[pyo3(signature = (op, a=None, b=None))]
    fn call_sync(
        &self,
        py: Python<'_>,
        op: &str,
        a: Option<&Bound<'_, PyAny>>,
        b: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let client = self.client()?;
        let request = Request::read(op, a, b)?;
        let response = block_on(py, request.run(client))?.map_err(to_py)?;
        Ok(response.into_pyobject(py)?.unbind())
    }

    /// Starts `op` like `call_sync`; its answer comes through `bridge` under `ticket`.
    #[pyo3(signature = (bridge, ticket, op, a=None, b=None))]
    fn call_async(
        &self,
        py: Python<'_>,
        bridge: &Bridge,
        ticket: u64,
        op: &str,
        a: Option<&Bound<'_, PyAny>>,
        b: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Started> {
        let client = self.client()?;
        let request = Request::read(op, a, b)?;
        bridge.start(
            py,
            ticket,
            async move { request.run(client).await.map(deliver) },
        )
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
#[pyclass(frozen, module = "openbot._native")]
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

fn options(
    token: Option<String>,
    tools: Vec<ToolArg>,
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
    Ok(ConnectOptions {
        token,
        tools: shared,
        ..ConnectOptions::default()
    })
}

/// Connects and waits with the GIL released. Tools must be sync functions.
#[pyfunction]
#[pyo3(signature = (uri, token=None, tools=Vec::new()))]
pub fn connect_sync(
    py: Python<'_>,
    uri: String,
    token: Option<String>,
    tools: Vec<ToolArg>,
) -> PyResult<NativeClient> {
    let options = options(token, tools, None)?;
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
#[pyo3(signature = (bridge, ticket, uri, token=None, tools=Vec::new()))]
pub fn connect_async(
    py: Python<'_>,
    bridge: &Bridge,
    ticket: u64,
    uri: String,
    token: Option<String>,
    tools: Vec<ToolArg>,
) -> PyResult<Started> {
    let locals = TaskLocals::with_running_loop(py)?.copy_context(py)?;
    let options = options(token, tools, Some(&locals))?;
    bridge.start(py, ticket, async move {
        let client = openbot_core::connect(&uri, options).await?;
        Ok(deliver(NativeClient {
            client: Owner::new(client),
        }))
    })
}
