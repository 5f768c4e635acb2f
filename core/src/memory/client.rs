//! The in-memory Client: Bots, Chats and Turns in this process, and what else makes sense in
//! one process: the HTTP and delegate tool registry (`registry`), files (`files`), and the
//! generic call path over them (`operations`), and the model-free code run (`code_run`).

mod code_run;
mod delegate;
mod files;
mod learning;
mod operations;
mod registry;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use chrono::Utc;
use futures::StreamExt;
use openbot_schema::{ApprovalRequest, ApprovalState, DecideApproval, PlanMode};
use openbot_schema::{
    Bot, BotId, BotSpec, BotUpdate, Chat, ChatEntry, ChatId, ContentPart, ErrorCategory, Execution,
    ExecutionId, SendDisposition, SendInput, SendReceipt, ToolResult,
};
use openbot_schema::{DecideOutcome, OutcomeDecisionRecord, UnknownOutcomePage};
use openbot_schema::{DelegateTool as DelegateToolView, HttpTool as HttpToolView, StoredFile};
use tracing::Instrument as _;
use uuid::Uuid;

use super::host::MemoryHost;
use super::sealed::SealedErrors;
use crate::client::{Client, ConnectOptions, ObserveStream};
use crate::error::Error;
use crate::model::{Model, model_from_spec};
use crate::outbound::OutboundPolicy;
use crate::tool::SharedTool;

use crate::turn::{ToolSet, TurnEnd, TurnFailure, TurnSpec, run_turn};

/// The Client of the in-memory mode. Turns run on the Tokio runtime of the caller; nothing
/// survives the process.
#[derive(Clone)]
pub struct MemoryClient {
    inner: Arc<Inner>,
}

struct Inner {
    handlers: HashMap<String, SharedTool>,
    /// The tools of this machine as a Computer (`ConnectOptions::computer`), by name.
    computer_tools: HashMap<String, SharedTool>,
    /// The rule every registered HTTP tool's request keeps.
    outbound: Arc<OutboundPolicy>,
    /// The client of registered HTTP tools, built from `outbound`.
    tool_client: reqwest::Client,
    /// The Bots' memories, in this process only.
    memories: crate::memories::MemoryBook,
    errors: SealedErrors,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    closed: bool,
    bots: BTreeMap<BotId, Bot>,
    chats: HashMap<ChatId, ChatState>,
    executions: HashMap<ExecutionId, Arc<MemoryHost>>,
    /// Models by spec; one instance per spec, so a scripted model's script runs on across Turns.
    models: HashMap<String, Arc<dyn Model>>,
    /// Tool sets by Bot, revision and Apps generation.
    tool_sets: HashMap<(BotId, u64, u64), Arc<ToolSet>>,
    /// Apps (MCP servers) as tool sources.
    apps: super::apps::MemoryApps,
    /// Command key -> (the request it named, its receipt).
    command_keys: HashMap<String, (String, SendReceipt)>,
    /// The registered HTTP tools, by name.
    http_tools: BTreeMap<String, HttpToolView>,
    /// The registered delegate tools, by name.
    delegates: BTreeMap<String, DelegateToolView>,
    /// Stored files by the order they were stored, with their bytes.
    files: BTreeMap<u64, (StoredFile, bytes::Bytes)>,
    /// The order number of the next stored file.
    next_file: u64,
    /// The helper model that learns after Turns (`put_memory_settings`); none: no learning.
    helper_model: Option<String>,
}

struct ChatState {
    chat: Chat,
    history: Vec<ChatEntry>,
    running: Option<Arc<MemoryHost>>,
    queue: VecDeque<(Arc<MemoryHost>, Vec<ContentPart>)>,
    deleted: bool,
}

impl MemoryClient {
    /// A new, empty in-memory runtime.
    pub fn new(options: ConnectOptions) -> Result<Self, Error> {
        let mut handlers = HashMap::new();
        for tool in options.tools {
            let name = tool.definition().name.clone();
            if handlers.insert(name.clone(), tool).is_some() {
                return Err(Error::invalid_input(format!(
                    "two tool handlers are named `{name}`"
                )));
            }
        }
        let mut computer_tools = HashMap::new();
        if let Some(computer) = options.computer {
            let terminal = computer.terminal;
            let computer = crate::computer::LocalComputer::new(computer)?;
            for tool in crate::computer::computer_tools(Arc::new(computer), terminal) {
                computer_tools.insert(tool.definition().name.clone(), tool);
            }
        }
        let state = State {
            models: options.models,
            ..State::default()
        };
        let outbound = match options.outbound {
            Some(policy) => policy,
            None => OutboundPolicy::from_env(&|name| std::env::var(name).ok()).map_err(|e| {
                Error::invalid_input(format!("{}: {e}", crate::outbound::ALLOW_VARIABLE))
            })?,
        };
        let outbound = Arc::new(outbound);
        let tool_client = outbound
            .client(
                std::time::Duration::from_secs(10),
                std::time::Duration::from_secs(300),
            )
            .map_err(|e| Error::invalid_input(e.to_string()))?;
        Ok(Self {
            inner: Arc::new(Inner {
                handlers,
                computer_tools,
                outbound,
                tool_client,
                memories: crate::memories::MemoryBook::new(),
                errors: SealedErrors::default(),
                state: Mutex::new(state),
            }),
        })
    }

    /// Where the full causes of failed Turns are kept.
    pub fn sealed_errors(&self) -> &SealedErrors {
        &self.inner.errors
    }

    fn state(&self) -> Result<MutexGuard<'_, State>, Error> {
        let guard = self
            .inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if guard.closed {
            Err(Error::closed())
        } else {
            Ok(guard)
        }
    }
}

fn check_bot_spec(spec: &BotSpec, models: &HashMap<String, Arc<dyn Model>>) -> Result<(), Error> {
    crate::rules::check_bot_spec(spec, |name| models.contains_key(name))
        .map_err(Error::invalid_input)
}

fn check_input(input: &SendInput) -> Result<(), Error> {
    crate::rules::check_send_input(input).map_err(Error::invalid_input)
}

impl State {
    fn chat(&mut self, id: ChatId) -> Result<&mut ChatState, Error> {
        match self.chats.get_mut(&id) {
            Some(chat) if !chat.deleted => Ok(chat),
            _ => Err(Error::not_found("chat", id)),
        }
    }

    fn host(&self, id: ExecutionId) -> Result<Arc<MemoryHost>, Error> {
        self.executions
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::not_found("execution", id))
    }

    fn model(&mut self, spec: &str) -> Result<Arc<dyn Model>, Error> {
        if let Some(model) = self.models.get(spec) {
            return Ok(Arc::clone(model));
        }
        let model = model_from_spec(spec, &|name| std::env::var(name).ok())
            .map_err(|e| Error::invalid_input(e.to_string()))?;
        self.models.insert(spec.to_string(), Arc::clone(&model));
        Ok(model)
    }

    /// The tools of a Turn of `bot`, as the registry is now (cached until the registry or a
    /// Bot changes).
    fn tool_set(&mut self, bot: &Bot, inner: &Arc<Inner>) -> Result<Arc<ToolSet>, Error> {
        let key = (bot.id, bot.revision, self.apps.generation);
        if let Some(set) = self.tool_sets.get(&key) {
            return Ok(Arc::clone(set));
        }
        let mut set = self.resolve_tools(bot, 0, bot.spec.limits, inner)?;
        if bot.spec.code_mode {
            set.enable_code_mode(openbot_codemode::Limits::default());
        }
        let set = Arc::new(set);
        self.tool_sets.insert(key, Arc::clone(&set));
        Ok(set)
    }

    /// How the `invoke_agent` span of a Turn in `chat` names its Bot and Chat.
    fn agent_label(&self, chat: ChatId) -> crate::telemetry::AgentLabel {
        let bot = self.chats.get(&chat).map(|state| state.chat.bot_id);
        crate::telemetry::AgentLabel {
            id: bot.map(|bot| bot.to_string()),
            name: bot
                .and_then(|bot| self.bots.get(&bot))
                .map(|bot| bot.spec.name.clone()),
            conversation: Some(chat.to_string()),
        }
    }

    /// Everything a Turn of `chat` needs, from the Chat's Bot as it is now.
    fn turn_spec(
        &mut self,
        chat: ChatId,
        input: Vec<ContentPart>,
        inner: &Arc<Inner>,
        execution: ExecutionId,
    ) -> Result<TurnSpec, Error> {
        let chat_state = self.chat(chat)?;
        let bot_id = chat_state.chat.bot_id;
        let history = chat_state
            .history
            .iter()
            .map(|e| e.message.clone())
            .collect();
        let bot = self
            .bots
            .get(&bot_id)
            .cloned()
            .ok_or_else(|| Error::not_found("bot", bot_id))?;
        // A Bot with memory recalls before its model requests and has the memory tools, as
        // on a server (no learning here: that is a server's durable work).
        let (instructions, tools) = if bot.spec.memory {
            let book = &inner.memories;
            let query: String = input
                .iter()
                .filter_map(|p| match p {
                    ContentPart::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(" ");
            let recalled = book.recall(bot_id, &query, crate::memories::DEFAULT_RECALL_TOKENS);
            // The Bot's own tools routed as always, then the memory tools of this Turn.
            let mut set = self.resolve_tools(&bot, 0, bot.spec.limits, inner)?;
            for tool in crate::memories::memory_tool_set(book.tools(bot_id, execution)) {
                set.add(tool)
                    .map_err(|e| Error::invalid_input(e.to_string()))?;
            }
            if bot.spec.code_mode {
                set.enable_code_mode(openbot_codemode::Limits::default());
            }
            (
                crate::memories::recall_instructions(&bot.spec.instructions, &recalled),
                Arc::new(set),
            )
        } else {
            (bot.spec.instructions.clone(), self.tool_set(&bot, inner)?)
        };
        // The model reads the files its messages attach from this process's files.
        let model = crate::model::WithFiles::wrap(
            &bot.spec.model,
            self.model(&bot.spec.model)?,
            files::MemoryFiles::of(inner),
        );
        Ok(TurnSpec {
            instructions,
            model,
            tools,
            limits: bot.spec.limits,
            history,
            input,
            max_output_tokens: None,
        })
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts `host`'s Turn of `chat` in the background with the spec built for it (or ends it
    /// with the error that kept the spec from being built). The caller holds the state lock and
    /// has made `host` the Chat's running Turn.
    fn launch(
        self: &Arc<Self>,
        chat: ChatId,
        host: Arc<MemoryHost>,
        input: Vec<ContentPart>,
        spec: Result<TurnSpec, Error>,
        agent: crate::telemetry::AgentLabel,
    ) {
        let inner = Arc::clone(self);
        let execution = host.log().execution_id();
        host.set_finisher(Box::new(move |end| inner.turn_ended(chat, execution, end)));
        host.start(input);
        match spec {
            Ok(spec) => {
                let span = crate::telemetry::invoke_agent(&agent);
                tokio::spawn(
                    async move {
                        if let Err(err) = run_turn(spec, host.as_ref()).await {
                            tracing::warn!(%execution, error = %err, "turn stopped without an end");
                        }
                    }
                    .instrument(span),
                );
            }
            // The Bot changed since the input was queued (a model that no longer resolves).
            Err(err) => {
                let end = TurnEnd {
                    outcome: Err(TurnFailure {
                        category: ErrorCategory::Configuration,
                        cause: err.message,
                    }),
                    messages: Vec::new(),
                    usage: Default::default(),
                };
                let host = Arc::clone(&host);
                tokio::spawn(async move {
                    use crate::turn::Host;
                    let _ = host.finish(end).await;
                });
            }
        }
    }

    /// Saves a Turn's messages in its Chat and admits the next queued input, in one step, just
    /// before the Turn's last event is published.
    fn turn_ended(self: &Arc<Self>, chat: ChatId, execution: ExecutionId, end: &TurnEnd) {
        let mut state = self.lock();
        let Some(chat_state) = state.chats.get_mut(&chat) else {
            return;
        };
        let at = Utc::now();
        chat_state
            .history
            .extend(end.messages.iter().map(|message| ChatEntry {
                message: message.clone(),
                execution_id: execution,
                at,
            }));
        if chat_state
            .running
            .as_ref()
            .is_some_and(|h| h.log().execution_id() == execution)
        {
            chat_state.running = None;
        }
        // A completed Turn of a Bot with memory learns (when a helper model is set).
        if matches!(end.outcome, Ok(openbot_schema::TurnOutcome::Completed)) {
            self.start_learning(&mut state, chat, execution);
        }
        let Some(chat_state) = state.chats.get_mut(&chat) else {
            return;
        };
        if chat_state.deleted || chat_state.running.is_some() {
            return;
        }
        if let Some((next, input)) = chat_state.queue.pop_front() {
            chat_state.running = Some(Arc::clone(&next));
            let spec = state.turn_spec(chat, input.clone(), self, next.log().execution_id());
            let agent = state.agent_label(chat);
            self.launch(chat, next, input, spec, agent);
        }
    }
}

#[async_trait]
impl Client for MemoryClient {
    async fn create_bot(&self, spec: BotSpec) -> Result<Bot, Error> {
        let mut state = self.state()?;
        check_bot_spec(&spec, &state.models)?;
        let bot = Bot {
            id: BotId::new(),
            spec,
            revision: 1,
            created_at: Utc::now(),
        };
        state.bots.insert(bot.id, bot.clone());
        Ok(bot)
    }

    async fn get_bot(&self, id: BotId) -> Result<Bot, Error> {
        self.state()?
            .bots
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::not_found("bot", id))
    }

    async fn list_bots(&self) -> Result<Vec<Bot>, Error> {
        Ok(self.state()?.bots.values().cloned().collect())
    }

    async fn update_bot(&self, id: BotId, update: BotUpdate) -> Result<Bot, Error> {
        let mut state = self.state()?;
        let current = state
            .bots
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::not_found("bot", id))?;
        if update.revision.is_some_and(|r| r != current.revision) {
            return Err(Error::conflict(format!(
                "bot {id} is at revision {}, not {}",
                current.revision,
                update.revision.unwrap_or_default()
            )));
        }
        let mut spec = current.spec.clone();
        update.apply_to(&mut spec);
        check_bot_spec(&spec, &state.models)?;
        let bot = Bot {
            spec,
            revision: current.revision + 1,
            ..current
        };
        state.bots.insert(id, bot.clone());
        // A delegate tool of another Bot may hand tasks to this one.
        state.tool_sets.clear();
        Ok(bot)
    }

    /// Deletes the Bot at once (nobody starts a Chat with it any more), then closes its
    /// Chats as `delete_chat` does: their Turns are cancelled and have ended on return.
    async fn delete_bot(&self, id: BotId) -> Result<(), Error> {
        let chats: Vec<ChatId> = {
            let mut state = self.state()?;
            if state.bots.remove(&id).is_none() {
                return Err(Error::not_found("bot", id));
            }
            state.tool_sets.retain(|(bot, _, _), _| *bot != id);
            state
                .chats
                .values()
                .filter(|c| c.chat.bot_id == id && !c.deleted)
                .map(|c| c.chat.id)
                .collect()
        };
        for chat in chats {
            match self.delete_chat(chat).await {
                Ok(()) => {}
                // Deleted meanwhile by its own request.
                Err(err) if err.code == openbot_schema::ErrorCode::NotFound => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    async fn create_chat(&self, bot: BotId) -> Result<Chat, Error> {
        let mut state = self.state()?;
        if !state.bots.contains_key(&bot) {
            return Err(Error::not_found("bot", bot));
        }
        let chat = Chat {
            id: ChatId::new(),
            bot_id: bot,
            created_at: Utc::now(),
        };
        state.chats.insert(
            chat.id,
            ChatState {
                chat: chat.clone(),
                history: Vec::new(),
                running: None,
                queue: VecDeque::new(),
                deleted: false,
            },
        );
        Ok(chat)
    }

    async fn get_chat(&self, id: ChatId) -> Result<Chat, Error> {
        Ok(self.state()?.chat(id)?.chat.clone())
    }

    async fn send(&self, chat: ChatId, input: SendInput) -> Result<SendReceipt, Error> {
        self.admit(chat, input, false)
    }

    async fn steer(&self, chat: ChatId, input: SendInput) -> Result<SendReceipt, Error> {
        self.admit(chat, input, true)
    }

    async fn stop(&self, chat: ChatId) -> Result<(), Error> {
        let mut state = self.state()?;
        if let Some(running) = &state.chat(chat)?.running {
            running.cancel();
        }
        Ok(())
    }

    async fn delete_chat(&self, chat: ChatId) -> Result<(), Error> {
        let running = {
            let mut state = self.state()?;
            let chat_state = state.chat(chat)?;
            chat_state.deleted = true;
            for (queued, _) in chat_state.queue.drain(..) {
                queued.cancel_unstarted();
            }
            chat_state.running.clone()
        };
        if let Some(running) = running {
            running.cancel();
            // Returns once the Turn released everything and published its end.
            running
                .log()
                .observe(running.log().last_sequence())
                .count()
                .await;
        }
        self.inner.lock().chats.remove(&chat);
        Ok(())
    }

    async fn history(&self, chat: ChatId) -> Result<Vec<ChatEntry>, Error> {
        Ok(self.state()?.chat(chat)?.history.clone())
    }

    async fn get_execution(&self, id: ExecutionId) -> Result<Execution, Error> {
        Ok(self.state()?.host(id)?.execution())
    }

    async fn observe(&self, id: ExecutionId, after: u64) -> Result<ObserveStream, Error> {
        let host = self.state()?.host(id)?;
        Ok(host.log().observe(after).map(Ok).boxed())
    }

    async fn cancel_execution(&self, id: ExecutionId) -> Result<Execution, Error> {
        let mut state = self.state()?;
        let host = state.host(id)?;
        let chat = host.execution().chat_id;
        let queued = chat
            .and_then(|chat| state.chats.get_mut(&chat))
            .and_then(|chat_state| {
                let position = chat_state
                    .queue
                    .iter()
                    .position(|(h, _)| Arc::ptr_eq(h, &host))?;
                chat_state.queue.remove(position)
            });
        match queued {
            Some((queued, _)) => queued.cancel_unstarted(),
            None => host.cancel(),
        }
        Ok(host.execution())
    }

    async fn deliver_tool_result(&self, id: ExecutionId, result: ToolResult) -> Result<(), Error> {
        let host = self.state()?.host(id)?;
        if host.execution().state.is_terminal() {
            return Err(Error::conflict(format!("execution {id} has ended")));
        }
        host.deliver(result)
    }

    async fn list_approvals(
        &self,
        _state: Option<ApprovalState>,
    ) -> Result<Vec<ApprovalRequest>, Error> {
        // In memory no rule ever asks: there are no requests.
        drop(self.state()?);
        Ok(Vec::new())
    }

    async fn decide_approval(
        &self,
        id: Uuid,
        _decision: DecideApproval,
    ) -> Result<ApprovalRequest, Error> {
        drop(self.state()?);
        Err(Error::not_found("approval request", id))
    }

    async fn list_unknown_outcomes(
        &self,
        _limit: Option<u32>,
        _cursor: Option<String>,
    ) -> Result<UnknownOutcomePage, Error> {
        // In memory a call's answer is never lost: nothing waits for a decision.
        drop(self.state()?);
        Ok(UnknownOutcomePage {
            items: Vec::new(),
            next_cursor: None,
        })
    }

    async fn decide_outcome(
        &self,
        id: ExecutionId,
        _decision: DecideOutcome,
    ) -> Result<OutcomeDecisionRecord, Error> {
        drop(self.state()?);
        Err(Error::invalid_input(format!(
            "execution {id}: only a server has unknown outcomes to decide (connect to http://...)"
        )))
    }

    async fn pause_execution(&self, id: ExecutionId) -> Result<Execution, Error> {
        drop(self.state()?);
        Err(Error::invalid_input(format!(
            "execution {id}: pausing work needs a server (connect to http://...)"
        )))
    }

    async fn resume_execution(&self, id: ExecutionId) -> Result<Execution, Error> {
        drop(self.state()?);
        Err(Error::invalid_input(format!(
            "execution {id}: pausing work needs a server (connect to http://...)"
        )))
    }

    async fn plan_mode(&self, chat: ChatId) -> Result<PlanMode, Error> {
        self.get_chat(chat).await?;
        Ok(PlanMode { enabled: false })
    }

    async fn set_plan_mode(&self, chat: ChatId, enabled: bool) -> Result<PlanMode, Error> {
        self.get_chat(chat).await?;
        if enabled {
            return Err(Error::invalid_input(
                "plan mode needs a server (connect to http://...)",
            ));
        }
        Ok(PlanMode { enabled: false })
    }

    async fn call(
        &self,
        operation: &str,
        request: crate::client::ApiRequest,
    ) -> Result<crate::client::ApiAnswer, Error> {
        let op = crate::client::api::operation(operation)
            .ok_or_else(|| crate::client::api::unknown_operation(operation))?;
        if super::apps::OPERATIONS.contains(&op.id) {
            return self.app_operation(op.id, &request).await;
        }
        if op.id == "run_code" {
            crate::client::api::fill_path(op, &request)?;
            return self.run_code_operation(&request).await;
        }
        if let Some(answer) = crate::client::dispatch::client_operation(self, op, &request).await {
            return answer;
        }
        match op.id {
            "get_memory_settings" => return crate::client::ApiAnswer::of(&self.memory_settings()?),
            "put_memory_settings" => {
                let settings = request.body_as(op.id)?;
                return crate::client::ApiAnswer::of(&self.put_memory_settings(settings)?);
            }
            _ => {}
        }
        let bot_known = |bot: BotId| self.state().is_ok_and(|s| s.bots.contains_key(&bot));
        if let Some(answer) =
            crate::memories::answer(&self.inner.memories, &bot_known, op.id, &request)
        {
            return answer;
        }
        match self.memory_operation(op, &request) {
            Some(answer) => answer,
            None => Err(crate::client::api::server_only(op.id)),
        }
    }

    async fn close(&self) {
        let mut state = self.inner.lock();
        state.closed = true;
        for host in state.executions.values() {
            if !host.execution().state.is_terminal() {
                host.cancel();
            }
        }
    }
}

impl MemoryClient {
    /// An App operation; discovery opens its session outside the lock.
    async fn app_operation(
        &self,
        op: &str,
        request: &crate::client::ApiRequest,
    ) -> Result<crate::client::ApiAnswer, Error> {
        let plan = match self.state()?.apps.run(op, request)? {
            Ok(answer) => return Ok(answer),
            Err(plan) => plan,
        };
        let options = crate::mcp::OpenOptions::standalone();
        let unavailable = |e: crate::mcp::McpError| {
            Error::new(openbot_schema::ErrorCode::Unavailable, e.to_string())
        };
        let session = crate::mcp::McpSession::open(&plan.endpoint, &options)
            .await
            .map_err(unavailable)?;
        let listed = session.list_tools().await;
        // A discovery keeps no session: a failed close changes nothing it read.
        let _ = session.close().await;
        let tools = listed.map_err(unavailable)?;
        let discovery = self.state()?.apps.discovered(&plan, tools)?;
        crate::client::ApiAnswer::of(&discovery)
    }

    fn admit(&self, chat: ChatId, input: SendInput, steer: bool) -> Result<SendReceipt, Error> {
        check_input(&input)?;
        let mut state = self.state()?;
        state.chat(chat)?;
        let request = match &input.command_key {
            Some(key) => {
                let request =
                    serde_json::json!({"chat": chat, "steer": steer, "content": input.content})
                        .to_string();
                if let Some((saved, receipt)) = state.command_keys.get(key) {
                    return if *saved == request {
                        Ok(receipt.clone())
                    } else {
                        Err(Error::conflict(format!(
                            "command key `{key}` was used for other input"
                        )))
                    };
                }
                Some((key.clone(), request))
            }
            None => None,
        };
        let mut content = input.content;
        if content
            .iter()
            .any(|part| matches!(part, ContentPart::File { .. }))
        {
            let bot_id = state.chat(chat)?.chat.bot_id;
            let spec = state
                .bots
                .get(&bot_id)
                .map(|bot| bot.spec.model.clone())
                .ok_or_else(|| Error::not_found("bot", bot_id))?;
            state.check_attached(&spec, &mut content)?;
        }
        let chat_state = state.chat(chat)?;
        let receipt = match chat_state.running.clone() {
            Some(running) if steer => match running.steer(content) {
                Ok(()) => SendReceipt {
                    chat_id: chat,
                    execution_id: running.log().execution_id(),
                    disposition: SendDisposition::Steered,
                },
                Err(back) => {
                    content = back;
                    self.enqueue(&mut state, chat, content)
                }
            },
            Some(_) => self.enqueue(&mut state, chat, content),
            None => {
                let host = Arc::new(MemoryHost::new(
                    MemoryHost::new_execution(Some(chat)),
                    self.inner.errors.clone(),
                ));
                // A model that cannot be built is the caller's error, reported now.
                let spec = state.turn_spec(
                    chat,
                    content.clone(),
                    &self.inner,
                    host.log().execution_id(),
                )?;
                state
                    .executions
                    .insert(host.log().execution_id(), Arc::clone(&host));
                state.chat(chat)?.running = Some(Arc::clone(&host));
                let execution_id = host.log().execution_id();
                let agent = state.agent_label(chat);
                self.inner.launch(chat, host, content, Ok(spec), agent);
                SendReceipt {
                    chat_id: chat,
                    execution_id,
                    disposition: SendDisposition::Started,
                }
            }
        };
        if let Some((key, request)) = request {
            state.command_keys.insert(key, (request, receipt.clone()));
        }
        Ok(receipt)
    }

    fn enqueue(&self, state: &mut State, chat: ChatId, content: Vec<ContentPart>) -> SendReceipt {
        let host = Arc::new(MemoryHost::new(
            MemoryHost::new_execution(Some(chat)),
            self.inner.errors.clone(),
        ));
        let execution_id = host.log().execution_id();
        state.executions.insert(execution_id, Arc::clone(&host));
        if let Some(chat_state) = state.chats.get_mut(&chat) {
            chat_state.queue.push_back((host, content));
        }
        SendReceipt {
            chat_id: chat,
            execution_id,
            disposition: SendDisposition::Queued,
        }
    }
}
