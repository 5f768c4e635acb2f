//! `connect` and the one `Client` object of both modes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use openbot_core::tool::SharedTool;
use openbot_core::{ApiAnswer, ApiBody, ApiRequest, ConnectOptions};
use openbot_schema::{self as schema, ExecutionId};

use crate::error::{OpenBotError, from_core};
use crate::events::EventStream;
use crate::runtime::{run, runtime};
use crate::tools::{ForeignTool, HostTool};

type Inner = Arc<dyn openbot_core::Client>;

/// Connects to OpenBot. `memory://` runs Bots and Chats in this process (nothing survives the
/// process); `http://host:port` (or `https://`) talks to a server with the API `token`.
/// `tools` run in this process when a Bot calls a tool of the same name, in both modes; a Bot
/// tool with no entry here waits for `deliverToolResult`.
/// `outbound` is the allow list of internal addresses the Bots' HTTP tools may reach in
/// memory mode (as `OPENBOT_OUTBOUND_ALLOW`: `loopback, 10.1.0.0/16`); a server keeps its own.
/// `computer_folders` attaches this machine as a Computer in memory mode (the Computer tools on
/// these folders; terminal sessions unless `computer_terminal` is false; docs/computers.md).
#[uniffi::export(default(
    token = None,
    tools = [],
    outbound = None,
    computer_folders = None,
    computer_terminal = true
))]
pub async fn connect(
    uri: String,
    token: Option<String>,
    tools: Vec<Arc<dyn HostTool>>,
    outbound: Option<String>,
    computer_folders: Option<Vec<String>>,
    computer_terminal: bool,
) -> Result<Arc<Client>, OpenBotError> {
    let tools = tools
        .into_iter()
        .map(|host| Ok(Arc::new(ForeignTool::new(host)?) as SharedTool))
        .collect::<Result<Vec<_>, OpenBotError>>()?;
    let options = ConnectOptions {
        token,
        tools,
        ..ConnectOptions::default()
    }
    .with_outbound_allow(outbound.as_deref())
    .and_then(|o| o.with_computer(computer_folders, computer_terminal))
    .map_err(from_core)?;
    let inner = run(async move {
        openbot_core::connect(&uri, options)
            .await
            .map_err(from_core)
    })
    .await?;
    Ok(Arc::new(Client {
        inner,
        closed: AtomicBool::new(false),
    }))
}

/// Bots, Chats and executions, in process (`memory://`) or on a server: the same calls in
/// both. Every method is `suspend` in Kotlin and `async` in Swift. A cancelled coroutine stops
/// waiting but cancels no work: use `stop`, `cancelExecution` or `close` for that.
#[derive(uniffi::Object)]
pub struct Client {
    inner: Inner,
    closed: AtomicBool,
}

impl Client {
    /// Runs `f` with the inner client on the runtime.
    async fn with<T, F, Fut>(&self, f: F) -> Result<T, OpenBotError>
    where
        F: FnOnce(Inner) -> Fut,
        Fut: Future<Output = Result<T, openbot_core::Error>> + Send + 'static,
        T: Send + 'static,
    {
        let work = f(Arc::clone(&self.inner));
        run(async move { work.await.map_err(from_core) }).await
    }
}

impl Client {
    /// Sends one operation through the core's one generic call path, on the runtime.
    pub(crate) async fn call_operation(
        &self,
        operation: &'static str,
        request: ApiRequest,
    ) -> Result<ApiAnswer, OpenBotError> {
        self.with(|c| async move { c.call(operation, request).await })
            .await
    }
}

/// Bytes an operation answered (a file's content), with their media type.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ApiBytes {
    /// The bytes.
    pub data: Vec<u8>,
    /// Their media type, e.g. `text/plain`.
    pub content_type: String,
}

impl From<openbot_core::ApiBytes> for ApiBytes {
    fn from(bytes: openbot_core::ApiBytes) -> Self {
        let openbot_core::ApiBytes { data, content_type } = bytes;
        Self { data, content_type }
    }
}

/// The calls no generated method gives: the event stream, the Bot spec as JSON text, plan mode
/// as a plain flag, any operation by its ID, and closing. Every other operation is a generated
/// method (`operations.rs`).
#[uniffi::export]
impl Client {
    /// Creates a Bot from its spec as JSON text (the HTTP API's body), given as is.
    pub async fn create_bot_json(&self, spec_json: String) -> Result<schema::Bot, OpenBotError> {
        let spec: schema::BotSpec = serde_json::from_str(&spec_json)
            .map_err(|e| OpenBotError::invalid_input(format!("the Bot spec is not valid: {e}")))?;
        self.create_bot(spec).await
    }

    /// The execution's events after sequence `after` (0: from the first), ending after its last
    /// event. Closing the stream stops observing only; it cancels nothing. (Operation `events`.)
    #[uniffi::method(default(after = 0))]
    pub async fn observe(
        &self,
        execution_id: String,
        after: u64,
    ) -> Result<Arc<EventStream>, OpenBotError> {
        let id: ExecutionId = execution_id
            .parse()
            .map_err(|e: schema::IdParseError| OpenBotError::invalid_input(e.to_string()))?;
        let stream = self
            .with(|c| async move { c.observe(id, after).await })
            .await?;
        Ok(Arc::new(EventStream::start(stream)?))
    }

    /// Whether a Chat is in plan mode (always `false` in memory): `getPlanMode` as a flag.
    pub async fn plan_mode(&self, chat_id: String) -> Result<bool, OpenBotError> {
        Ok(self.get_plan_mode(chat_id).await?.enabled)
    }

    /// Turns a Chat's plan mode on or off and returns the mode now in force: `putPlanMode` with
    /// a flag. In plan mode the Bot may only call the built-in `propose_plan` tool; approving
    /// its plan turns plan mode off. Only a server has plan mode: turning it on in memory fails
    /// with `invalid_input`.
    pub async fn set_plan_mode(
        &self,
        chat_id: String,
        enabled: bool,
    ) -> Result<bool, OpenBotError> {
        let mode = self
            .put_plan_mode(chat_id, schema::PlanMode { enabled })
            .await?;
        Ok(mode.enabled)
    }

    /// Any operation of the API by its `operationId`, with its path and query parameters as a
    /// JSON object and its JSON body as text; answers the JSON answer as text (none for an
    /// empty answer). The typed methods are the same calls; this one reaches an operation
    /// this version of the SDK has no method for yet. An unknown ID is `invalid_input`.
    #[uniffi::method(default(params_json = None, body_json = None))]
    pub async fn call(
        &self,
        operation_id: String,
        params_json: Option<String>,
        body_json: Option<String>,
    ) -> Result<Option<String>, OpenBotError> {
        let op = openbot_core::client::api::operation(&operation_id).ok_or_else(|| {
            from_core(openbot_core::client::api::unknown_operation(&operation_id))
        })?;
        let json = |what: &str, text: &str| {
            serde_json::from_str::<serde_json::Value>(text).map_err(|e| {
                OpenBotError::invalid_input(format!("{what} of {} is not JSON: {e}", op.id))
            })
        };
        let mut request = ApiRequest::default();
        if let Some(text) = params_json {
            match json("the parameters", &text)? {
                serde_json::Value::Object(params) => request.params = params,
                serde_json::Value::Null => {}
                _ => {
                    return Err(OpenBotError::invalid_input(format!(
                        "the parameters of {} must be a JSON object",
                        op.id
                    )));
                }
            }
        }
        if let Some(text) = body_json {
            request.body = Some(ApiBody::Json(json("the body", &text)?));
        }
        match self.call_operation(op.id, request).await? {
            ApiAnswer::Empty => Ok(None),
            ApiAnswer::Json(value) => Ok(Some(value.to_string())),
            ApiAnswer::Bytes(_) => Err(OpenBotError::invalid_input(format!(
                "{} answers bytes: call its typed method",
                op.id
            ))),
        }
    }

    /// Closes the client. Later calls fail with `closed`; in the in-memory mode running Turns
    /// are cancelled. (Kotlin: `shutdown()`, since `close()` there frees the handle.)
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let inner = Arc::clone(&self.inner);
        // Nothing to report: a close that could not be run leaves nothing open to close.
        let _ = run(async move {
            inner.close().await;
            Ok(())
        })
        .await;
    }
}

/// The last handle gone (Kotlin's `close()`, Swift's deinit) closes a client nobody closed.
impl Drop for Client {
    fn drop(&mut self) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        if let Ok(runtime) = runtime() {
            let inner = Arc::clone(&self.inner);
            runtime.spawn(async move { inner.close().await });
        }
    }
}

/// The tools a Bot gets on a Computer (the four terminal tools, then the two file tools): name
/// them in a Bot's tools; their definitions come from the Computer (docs/computers.md).
#[uniffi::export]
pub fn computer_tools() -> Vec<String> {
    openbot_core::computer::TOOL_NAMES
        .iter()
        .map(|name| name.to_string())
        .collect()
}
