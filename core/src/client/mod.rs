//! The Client: one interface for Bots, Chats and executions, in two modes.
//!
//! `connect("memory://", ..)` runs everything in this process; `connect("http://host:port", ..)`
//! talks to an OpenBot server. Both implement [`Client`], so code does not change between them.

pub mod api;
pub(crate) mod dispatch;
mod operations;
mod remote;

pub use api::{ApiAnswer, ApiBody, ApiBytes, ApiRequest, Operation};
pub use operations::{OPERATIONS, Operations};
pub use remote::RemoteClient;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use openbot_schema::{
    ApprovalRequest, ApprovalState, Bot, BotId, BotSpec, BotUpdate, Chat, ChatEntry, ChatId,
    DecideApproval, DecideOutcome, Event, Execution, ExecutionId, OutcomeDecisionRecord, PlanMode,
    SendInput, SendReceipt, ToolResult, UnknownOutcomePage,
};

use uuid::Uuid;

use crate::error::Error;
use crate::memory::MemoryClient;
use crate::model::Model;
use crate::tool::SharedTool;

/// Events of an execution after a cursor, ending after its last event. An item is an error
/// only when the events can no longer be read (the client closed, access was lost).
pub type ObserveStream = BoxStream<'static, Result<Event, Error>>;

/// Everything both modes share: Bots, Chats, input, history and executions.
#[async_trait]
pub trait Client: Send + Sync {
    /// Creates a Bot.
    async fn create_bot(&self, spec: BotSpec) -> Result<Bot, Error>;
    /// Reads a Bot.
    async fn get_bot(&self, id: BotId) -> Result<Bot, Error>;
    /// Lists the Bots, oldest first.
    async fn list_bots(&self) -> Result<Vec<Bot>, Error>;
    /// Changes a Bot; with `revision` set, fails with a conflict if the Bot changed since.
    async fn update_bot(&self, id: BotId, update: BotUpdate) -> Result<Bot, Error>;
    /// Deletes a Bot that has no Chats left.
    async fn delete_bot(&self, id: BotId) -> Result<(), Error>;

    /// Creates a Chat with a Bot.
    async fn create_chat(&self, bot: BotId) -> Result<Chat, Error>;
    /// Reads a Chat.
    async fn get_chat(&self, id: ChatId) -> Result<Chat, Error>;
    /// Sends input. It starts a Turn, or waits in order for its own Turn while one runs.
    /// A retry with the same command key and input returns the same receipt.
    async fn send(&self, chat: ChatId, input: SendInput) -> Result<SendReceipt, Error>;
    /// Sends input that joins the running Turn; with no Turn running it starts one.
    async fn steer(&self, chat: ChatId, input: SendInput) -> Result<SendReceipt, Error>;
    /// Stops the running Turn. Queued input stays queued and runs next.
    async fn stop(&self, chat: ChatId) -> Result<(), Error>;
    /// Deletes a Chat: closes it to input, cancels its Turns and returns once they ended.
    async fn delete_chat(&self, chat: ChatId) -> Result<(), Error>;
    /// The Chat's messages, oldest first.
    async fn history(&self, chat: ChatId) -> Result<Vec<ChatEntry>, Error>;

    /// Reads an execution.
    async fn get_execution(&self, id: ExecutionId) -> Result<Execution, Error>;
    /// The execution's events after sequence `after`, ending after its last event. Closing
    /// the stream stops observing only; it cancels nothing.
    async fn observe(&self, id: ExecutionId, after: u64) -> Result<ObserveStream, Error>;
    /// Asks an execution to stop and returns its state (`cancelling`, or an end state).
    async fn cancel_execution(&self, id: ExecutionId) -> Result<Execution, Error>;
    /// Delivers the result of a host-tool call the execution waits for.
    async fn deliver_tool_result(&self, id: ExecutionId, result: ToolResult) -> Result<(), Error>;

    /// The approval requests the caller may decide, newest first, optionally only in one
    /// state. Only a server has approval rules: in memory nothing asks, so the list is empty.
    async fn list_approvals(
        &self,
        state: Option<ApprovalState>,
    ) -> Result<Vec<ApprovalRequest>, Error>;
    /// Decides a pending approval request: approve (the call runs once, in its own execution,
    /// and its result reaches the Chat as a notice) or deny (it never runs; the model is told).
    async fn decide_approval(
        &self,
        id: Uuid,
        decision: DecideApproval,
    ) -> Result<ApprovalRequest, Error>;

    /// The caller's executions that wait in `outcome_unknown` for a decision (a write without
    /// a safe retry rule lost its answer), oldest first, each with its call: key, tool and the
    /// arguments it was sent with. A page holds up to `limit` (default 50, at most 200),
    /// starting after `cursor` (the `next_cursor` of the page before). Only a server loses a
    /// call's answer: in memory the page is empty.
    async fn list_unknown_outcomes(
        &self,
        limit: Option<u32>,
        cursor: Option<String>,
    ) -> Result<UnknownOutcomePage, Error>;
    /// Decides the call an execution in `outcome_unknown` waits for, naming it: `applied`
    /// (with the result, which becomes the call's saved result; the call is not sent again),
    /// `not_applied` (the call is sent again, as a new attempt) or `give_up` (the execution
    /// ends `failed`, sending nothing). Returns the decision's audit entry. A decision for
    /// another call, or a second one, is `conflict`. In memory this is `invalid_input`: only
    /// a server has unknown outcomes.
    async fn decide_outcome(
        &self,
        id: ExecutionId,
        decision: DecideOutcome,
    ) -> Result<OutcomeDecisionRecord, Error>;

    /// Pauses an execution and its descendants: they stop sending, let calls in flight save
    /// their results, and wait until resumed; paused time does not count against a time
    /// limit. Only a server pauses work: in memory this is `invalid_input`.
    async fn pause_execution(&self, id: ExecutionId) -> Result<Execution, Error>;
    /// Resumes a paused execution and its paused descendants; `conflict` while a parent of it
    /// is paused. Only a server pauses work: in memory this is `invalid_input`.
    async fn resume_execution(&self, id: ExecutionId) -> Result<Execution, Error>;

    /// Whether a Chat is in plan mode (its Bot may only propose a plan). Always off in memory.
    async fn plan_mode(&self, chat: ChatId) -> Result<PlanMode, Error>;
    /// Turns a Chat's plan mode on or off; an approved plan also switches it off. Only a server
    /// has plan mode: in memory turning it on is `invalid_input`.
    async fn set_plan_mode(&self, chat: ChatId, enabled: bool) -> Result<PlanMode, Error>;

    /// Runs any operation of the HTTP API by its `operationId` (schema/openapi.json), with its
    /// path and query parameters by name and its body: the one call path every SDK's generated
    /// methods use. An operation the trait declares by hand does exactly what its method does;
    /// in memory, an operation only a server has fails with `invalid_input` that says so, and
    /// a name the API lacks is `invalid_input` in both modes.
    async fn call(&self, operation: &str, request: ApiRequest) -> Result<ApiAnswer, Error>;

    /// Closes the client. Later calls fail with the code `closed`; running Turns are cancelled
    /// in the in-memory mode.
    async fn close(&self);
}

/// Options of [`connect`].
#[derive(Default, Clone)]
pub struct ConnectOptions {
    /// An API token, for a server. Unused in memory mode.
    pub token: Option<String>,
    /// Tool handlers in this process, by name. A Bot tool with a handler here runs it (in
    /// remote mode: when the server publishes the call of an execution this client started or
    /// observes, and the result is delivered to the server); a tool without one waits for
    /// [`Client::deliver_tool_result`].
    pub tools: Vec<SharedTool>,
    /// Models by spec, used before the `provider:model` specs are resolved; lets a program
    /// give its own model (a scripted one, a custom provider) under a name. In memory mode
    /// only: a server runs its own models.
    pub models: HashMap<String, Arc<dyn Model>>,
    /// Which addresses the registered HTTP tools (`put_tool`) may reach, in memory mode. Unset:
    /// the allow list of `OPENBOT_OUTBOUND_ALLOW` when set, else the server's default rule:
    /// internal addresses (loopback, private networks, the cloud metadata endpoints) denied,
    /// so a tool on `127.0.0.1` needs `OutboundPolicy::parse("loopback")` here (or
    /// `OPENBOT_OUTBOUND_ALLOW=loopback`). A server keeps its operator's policy.
    pub outbound: Option<crate::outbound::OutboundPolicy>,
    /// This machine as a Computer, in memory mode: a Bot that lists a Computer tool
    /// (`computer_terminal_start`, `computer_file_read`, ...; [`crate::computer::TOOL_NAMES`])
    /// gets it, with its definition, on these folders. Unset: no Computer. With a server,
    /// it is `invalid_input`: a server's Computers are machines paired with it.
    pub computer: Option<crate::computer::ComputerOptions>,
}

impl ConnectOptions {
    /// Sets [`Self::outbound`] from an allow list written as `OPENBOT_OUTBOUND_ALLOW` is
    /// (`loopback, 10.1.0.0/16, api.internal`; `none` allows nothing internal); `None` keeps
    /// the default. The bindings' `outbound` option comes here, so every language reads the
    /// list the same way. A list that does not parse is `invalid_input`.
    pub fn with_outbound_allow(mut self, list: Option<&str>) -> Result<Self, Error> {
        if let Some(list) = list {
            let policy = crate::outbound::OutboundPolicy::parse(list)
                .map_err(|e| Error::invalid_input(format!("outbound: {e}")))?;
            self.outbound = Some(policy);
        }
        Ok(self)
    }
}

impl ConnectOptions {
    /// Sets [`Self::computer`] from the bindings' `computer` option: the allowed folders, and
    /// whether terminal sessions are offered; `None` attaches no Computer. An empty folder
    /// list is `invalid_input`; folders that do not exist are refused by `connect`.
    pub fn with_computer(
        mut self,
        folders: Option<Vec<String>>,
        terminal: bool,
    ) -> Result<Self, Error> {
        if let Some(folders) = folders {
            if folders.is_empty() {
                return Err(Error::invalid_input(
                    "computer: name at least one allowed folder",
                ));
            }
            let mut options = crate::computer::ComputerOptions::new(folders);
            options.terminal = terminal;
            self.computer = Some(options);
        }
        Ok(self)
    }
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field(
                "tools",
                &self
                    .tools
                    .iter()
                    .map(|t| t.definition().name.clone())
                    .collect::<Vec<_>>(),
            )
            .field("models", &self.models.keys().collect::<Vec<_>>())
            .field("outbound", &self.outbound)
            .field("computer", &self.computer)
            .finish()
    }
}

/// Connects to OpenBot. `memory://` runs everything in this process (nothing survives the
/// process); `http://` and `https://` name a server, or several nodes of one deployment
/// separated by commas (`http://a:8080,http://b:8080`), which the client fails over between
/// (see [`RemoteClient::new`]).
pub async fn connect(uri: &str, options: ConnectOptions) -> Result<Arc<dyn Client>, Error> {
    let (scheme, _) = uri.split_once("://").ok_or_else(|| {
        Error::invalid_input(format!(
            "`{uri}` is not a URI: use memory:// or http://host:port"
        ))
    })?;
    match scheme {
        "memory" => Ok(Arc::new(MemoryClient::new(options)?)),
        "http" | "https" => Ok(Arc::new(RemoteClient::new(uri, options)?)),
        other => Err(Error::invalid_input(format!(
            "unknown scheme `{other}`: use memory:// or http://host:port"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openbot_schema::ErrorCode;

    #[test]
    fn an_outbound_allow_list_sets_the_policy_and_none_keeps_the_default() {
        let options = ConnectOptions::default();
        assert!(
            options
                .with_outbound_allow(None)
                .unwrap()
                .outbound
                .is_none()
        );
        let options = ConnectOptions::default()
            .with_outbound_allow(Some("loopback"))
            .unwrap();
        let policy = options.outbound.unwrap();
        assert!(policy.check_url("http://127.0.0.1:9/x").is_ok());
        assert!(policy.check_url("http://10.0.0.1/x").is_err());
    }

    #[test]
    fn an_outbound_allow_list_that_does_not_parse_is_invalid_input() {
        let err = ConnectOptions::default()
            .with_outbound_allow(Some("10.0.0.0/99"))
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidInput);
        assert!(err.to_string().contains("outbound"), "{err}");
    }
}
