//! `connect` and the one `Client` object of both modes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use openbot_core::ConnectOptions;
use openbot_core::tool::SharedTool;
use openbot_schema::{self as schema, BotId, ChatId, ExecutionId};

use crate::error::OpenBotError;
use crate::events::EventStream;
use crate::runtime::{run, runtime};
use crate::tools::{ForeignTool, HostTool};
use crate::types::{
    ApprovalRequest, ApprovalState, Bot, BotSpec, BotUpdate, Chat, ChatEntry, Decision, Execution,
    OutcomeDecision, OutcomeDecisionRecord, SendInput, SendReceipt, ToolResult, UnknownOutcomePage,
    parse_id, parse_uuid,
};

type Inner = Arc<dyn openbot_core::Client>;

/// Connects to OpenBot. `memory://` runs Bots and Chats in this process (nothing survives the
/// process); `http://host:port` (or `https://`) talks to a server with the API `token`.
/// `tools` run in this process when a Bot calls a tool of the same name, in both modes; a Bot
/// tool with no entry here waits for `deliverToolResult`.
#[uniffi::export(default(token = None, tools = []))]
pub async fn connect(
    uri: String,
    token: Option<String>,
    tools: Vec<Arc<dyn HostTool>>,
) -> Result<Arc<Client>, OpenBotError> {
    let tools = tools
        .into_iter()
        .map(|host| Ok(Arc::new(ForeignTool::new(host)?) as SharedTool))
        .collect::<Result<Vec<_>, OpenBotError>>()?;
    let options = ConnectOptions {
        token,
        tools,
        ..ConnectOptions::default()
    };
    let inner = run(async move {
        openbot_core::connect(&uri, options)
            .await
            .map_err(OpenBotError::from)
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
        run(async move { work.await.map_err(OpenBotError::from) }).await
    }
}

#[uniffi::export]
impl Client {
    /// Creates a Bot.
    pub async fn create_bot(&self, spec: BotSpec) -> Result<Bot, OpenBotError> {
        let spec = spec.into_schema()?;
        let bot = self
            .with(|c| async move { c.create_bot(spec).await })
            .await?;
        Ok(bot.into())
    }

    /// Creates a Bot from its spec as JSON text (the HTTP API's body), given as is.
    pub async fn create_bot_json(&self, spec_json: String) -> Result<Bot, OpenBotError> {
        let spec = serde_json::from_str(&spec_json)
            .map_err(|e| OpenBotError::invalid_input(format!("the Bot spec is not valid: {e}")))?;
        let bot = self
            .with(|c| async move { c.create_bot(spec).await })
            .await?;
        Ok(bot.into())
    }

    /// Reads a Bot.
    pub async fn get_bot(&self, id: String) -> Result<Bot, OpenBotError> {
        let id: BotId = parse_id(&id)?;
        let bot = self.with(|c| async move { c.get_bot(id).await }).await?;
        Ok(bot.into())
    }

    /// Lists the Bots, oldest first.
    pub async fn list_bots(&self) -> Result<Vec<Bot>, OpenBotError> {
        let bots = self.with(|c| async move { c.list_bots().await }).await?;
        Ok(bots.into_iter().map(Into::into).collect())
    }

    /// Changes a Bot; with `revision` set, fails with `conflict` if the Bot changed since.
    pub async fn update_bot(&self, id: String, update: BotUpdate) -> Result<Bot, OpenBotError> {
        let id: BotId = parse_id(&id)?;
        let update = update.into_schema()?;
        let bot = self
            .with(|c| async move { c.update_bot(id, update).await })
            .await?;
        Ok(bot.into())
    }

    /// Deletes a Bot that has no Chats left.
    pub async fn delete_bot(&self, id: String) -> Result<(), OpenBotError> {
        let id: BotId = parse_id(&id)?;
        self.with(|c| async move { c.delete_bot(id).await }).await
    }

    /// Creates a Chat with a Bot.
    pub async fn create_chat(&self, bot_id: String) -> Result<Chat, OpenBotError> {
        let bot_id: BotId = parse_id(&bot_id)?;
        let chat = self
            .with(|c| async move { c.create_chat(bot_id).await })
            .await?;
        Ok(chat.into())
    }

    /// Reads a Chat.
    pub async fn get_chat(&self, id: String) -> Result<Chat, OpenBotError> {
        let id: ChatId = parse_id(&id)?;
        let chat = self.with(|c| async move { c.get_chat(id).await }).await?;
        Ok(chat.into())
    }

    /// Sends input. It starts a Turn, or waits in order for its own Turn while one runs. A
    /// retry with the same command key and input returns the same receipt.
    pub async fn send(
        &self,
        chat_id: String,
        input: SendInput,
    ) -> Result<SendReceipt, OpenBotError> {
        let chat_id: ChatId = parse_id(&chat_id)?;
        let input = input.into_schema()?;
        let receipt = self
            .with(|c| async move { c.send(chat_id, input).await })
            .await?;
        Ok(receipt.into())
    }

    /// Sends input that joins the running Turn; with no Turn running it starts one.
    pub async fn steer(
        &self,
        chat_id: String,
        input: SendInput,
    ) -> Result<SendReceipt, OpenBotError> {
        let chat_id: ChatId = parse_id(&chat_id)?;
        let input = input.into_schema()?;
        let receipt = self
            .with(|c| async move { c.steer(chat_id, input).await })
            .await?;
        Ok(receipt.into())
    }

    /// Stops the running Turn. Queued input stays queued and runs next.
    pub async fn stop(&self, chat_id: String) -> Result<(), OpenBotError> {
        let chat_id: ChatId = parse_id(&chat_id)?;
        self.with(|c| async move { c.stop(chat_id).await }).await
    }

    /// Deletes a Chat: closes it to input, cancels its Turns and returns once they ended.
    pub async fn delete_chat(&self, chat_id: String) -> Result<(), OpenBotError> {
        let chat_id: ChatId = parse_id(&chat_id)?;
        self.with(|c| async move { c.delete_chat(chat_id).await })
            .await
    }

    /// The Chat's messages, oldest first.
    pub async fn history(&self, chat_id: String) -> Result<Vec<ChatEntry>, OpenBotError> {
        let chat_id: ChatId = parse_id(&chat_id)?;
        let entries = self
            .with(|c| async move { c.history(chat_id).await })
            .await?;
        Ok(entries.into_iter().map(Into::into).collect())
    }

    /// Reads an execution.
    pub async fn get_execution(&self, id: String) -> Result<Execution, OpenBotError> {
        let id: ExecutionId = parse_id(&id)?;
        let execution = self
            .with(|c| async move { c.get_execution(id).await })
            .await?;
        Ok(execution.into())
    }

    /// The execution's events after sequence `after` (0: from the first), ending after its last
    /// event. Closing the stream stops observing only; it cancels nothing.
    #[uniffi::method(default(after = 0))]
    pub async fn observe(
        &self,
        execution_id: String,
        after: u64,
    ) -> Result<Arc<EventStream>, OpenBotError> {
        let id: ExecutionId = parse_id(&execution_id)?;
        let stream = self
            .with(|c| async move { c.observe(id, after).await })
            .await?;
        Ok(Arc::new(EventStream::start(stream)?))
    }

    /// Asks an execution to stop and returns its state (`CANCELLING`, or an end state).
    pub async fn cancel_execution(&self, execution_id: String) -> Result<Execution, OpenBotError> {
        let id: ExecutionId = parse_id(&execution_id)?;
        let execution = self
            .with(|c| async move { c.cancel_execution(id).await })
            .await?;
        Ok(execution.into())
    }

    /// Pauses an execution: it sends nothing new until resumed (its state is `WAITING`);
    /// returns its state. Only a server pauses: in memory this fails with `invalid_input`.
    pub async fn pause_execution(&self, execution_id: String) -> Result<Execution, OpenBotError> {
        let id: ExecutionId = parse_id(&execution_id)?;
        let execution = self
            .with(|c| async move { c.pause_execution(id).await })
            .await?;
        Ok(execution.into())
    }

    /// Resumes a paused execution and returns its state; in memory `invalid_input`.
    pub async fn resume_execution(&self, execution_id: String) -> Result<Execution, OpenBotError> {
        let id: ExecutionId = parse_id(&execution_id)?;
        let execution = self
            .with(|c| async move { c.resume_execution(id).await })
            .await?;
        Ok(execution.into())
    }

    /// Whether a Chat is in plan mode (always `false` in memory).
    pub async fn plan_mode(&self, chat_id: String) -> Result<bool, OpenBotError> {
        let id: ChatId = parse_id(&chat_id)?;
        let mode = self.with(|c| async move { c.plan_mode(id).await }).await?;
        Ok(mode.enabled)
    }

    /// Turns a Chat's plan mode on or off and returns the mode now in force. In plan mode the
    /// Bot may only call the built-in `propose_plan` tool; approving its plan turns plan mode
    /// off. Only a server has plan mode: turning it on in memory fails with `invalid_input`.
    pub async fn set_plan_mode(
        &self,
        chat_id: String,
        enabled: bool,
    ) -> Result<bool, OpenBotError> {
        let id: ChatId = parse_id(&chat_id)?;
        let mode = self
            .with(|c| async move { c.set_plan_mode(id, enabled).await })
            .await?;
        Ok(mode.enabled)
    }

    /// Delivers the result of a host-tool call the execution waits for; `conflict` if no such
    /// call is open.
    pub async fn deliver_tool_result(
        &self,
        execution_id: String,
        result: ToolResult,
    ) -> Result<(), OpenBotError> {
        let id: ExecutionId = parse_id(&execution_id)?;
        let result = result.into_schema()?;
        self.with(|c| async move { c.deliver_tool_result(id, result).await })
            .await
    }

    /// The approval requests the caller may decide, newest first; with `state`, only those in
    /// it. Only a server has approval rules: in memory nothing asks, so the list is empty.
    #[uniffi::method(default(state = None))]
    pub async fn list_approvals(
        &self,
        state: Option<ApprovalState>,
    ) -> Result<Vec<ApprovalRequest>, OpenBotError> {
        let state = state.map(Into::into);
        let requests = self
            .with(|c| async move { c.list_approvals(state).await })
            .await?;
        Ok(requests.into_iter().map(Into::into).collect())
    }

    /// Decides a pending approval request and returns it as decided. `APPROVE` runs the call
    /// once, in the request's child execution, whose result reaches the Chat as a notice;
    /// `DENY` never runs it, and the model is told (with `reason`). A request that is no longer
    /// pending fails with `conflict`; an unknown one (always, in memory) with `not_found`.
    #[uniffi::method(default(reason = None))]
    pub async fn decide_approval(
        &self,
        id: String,
        decision: Decision,
        reason: Option<String>,
    ) -> Result<ApprovalRequest, OpenBotError> {
        let id = parse_uuid("approval request ID", &id)?;
        let decision = schema::DecideApproval {
            decision: decision.into(),
            reason,
        };
        let request = self
            .with(|c| async move { c.decide_approval(id, decision).await })
            .await?;
        Ok(request.into())
    }

    /// The caller's executions that wait in `OUTCOME_UNKNOWN` for a decision (a write without
    /// a safe retry rule lost its answer), oldest first: a page of up to `limit` (1-200, the
    /// server's default 50) after `cursor` (the `nextCursor` of the page before), each with
    /// its call's key, tool and the arguments it was sent with. Only a server loses a call's
    /// answer: in memory the page is empty.
    #[uniffi::method(default(limit = None, cursor = None))]
    pub async fn list_unknown_outcomes(
        &self,
        limit: Option<u32>,
        cursor: Option<String>,
    ) -> Result<UnknownOutcomePage, OpenBotError> {
        let page = self
            .with(|c| async move { c.list_unknown_outcomes(limit, cursor).await })
            .await?;
        Ok(page.into())
    }

    /// Decides `call`, the call execution `execution_id` waits for, and returns the decision's
    /// audit entry. `APPLIED` (with `result`): the result becomes the call's and the work goes
    /// on with it, the call is not sent again; `NOT_APPLIED`: the call is sent again, as a new
    /// attempt; `GIVE_UP`: the execution ends `FAILED`, sending nothing. A decision for another
    /// call, or a second one, fails with `conflict`; in memory with `invalid_input` (only a
    /// server has unknown outcomes).
    #[uniffi::method(default(result = None, reason = None))]
    pub async fn decide_outcome(
        &self,
        execution_id: String,
        call: String,
        decision: OutcomeDecision,
        result: Option<String>,
        reason: Option<String>,
    ) -> Result<OutcomeDecisionRecord, OpenBotError> {
        let id: ExecutionId = parse_id(&execution_id)?;
        let decision = schema::DecideOutcome {
            call,
            decision: decision.into(),
            result,
            reason,
        };
        let record = self
            .with(|c| async move { c.decide_outcome(id, decision).await })
            .await?;
        Ok(record.into())
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
