//! The Chat use cases: create, send, steer, stop, delete and read history, with the same access
//! rules for every entry point.

use std::sync::Arc;
use std::time::Duration;

use openbot_schema::{
    Action, BotId, Chat, ChatEntry, ChatEntryPage, ChatId, ChatPage, EventKind, ExecutionId,
    Resource, SendDisposition, SendInput, SendReceipt,
};
use sha2::{Digest, Sha256};

use super::HistoryPosition;
use super::ToolRouting;
use super::store::{ChatRow, ChatStore};
use crate::bots::{BotRow, BotStore};
use crate::engine::{Engine, EngineContext, EngineError, Submission};
use crate::identity::{Caller, ExecutionIdentity};
use crate::paging::Paging;
use crate::store::{ExecutionRow, KeyWrite, StoreError, stored_time};
use crate::turns::{SavedTool, TURN, TurnInput};

/// How long deleting a Chat waits for its Turns to release their work.
pub const DELETE_WAIT: Duration = Duration::from_secs(30);

/// Why a Chat use case failed.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// Not there, or not visible to the caller.
    #[error("{0} was not found")]
    NotFound(&'static str),
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
    /// A conflict with the current state.
    #[error("{0}")]
    Conflict(String),
    /// The caller may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::identity::AccessError> for ChatError {
    fn from(err: crate::identity::AccessError) -> Self {
        Self::Forbidden(err.to_string())
    }
}

impl From<EngineError> for ChatError {
    fn from(err: EngineError) -> Self {
        match err {
            EngineError::Store(StoreError::CommandKeyConflict(key)) => {
                ChatError::Conflict(format!("command key `{key}` was used for other input"))
            }
            EngineError::Store(StoreError::AdmissionClosed) => ChatError::NotFound("chat"),
            EngineError::Store(err) => ChatError::Store(err),
            other => ChatError::Store(StoreError::Invalid(other.to_string())),
        }
    }
}

/// The Chat use cases.
#[derive(Clone)]
pub struct Chats {
    engine: Arc<EngineContext>,
    chats: Arc<dyn ChatStore>,
    bots: Arc<dyn BotStore>,
    routing: ToolRouting,
    files: Option<crate::files::Files>,
}

fn chat_view(row: &ChatRow) -> Result<Chat, StoreError> {
    Ok(Chat {
        id: row.id,
        bot_id: row.bot_id,
        created_at: stored_time(row.created_at)?,
    })
}

fn check_input(input: &SendInput) -> Result<(), ChatError> {
    openbot_core::rules::check_send_input(input).map_err(ChatError::Invalid)
}

fn attaches_files(input: &SendInput) -> bool {
    input
        .content
        .iter()
        .any(|part| matches!(part, openbot_schema::ContentPart::File { .. }))
}

fn key_conflict(key: &str) -> ChatError {
    ChatError::Conflict(format!("command key `{key}` was used for other input"))
}

/// A steer's command key and the two requests it may stand for: the steer joined a running
/// Turn, or it was sent as its own input. Both cover "steer", the Chat and the content, so
/// the key never matches a send or a steer of other input or to another Chat.
struct SteerKey {
    key: String,
    joined: Vec<u8>,
    sent: Vec<u8>,
}

impl SteerKey {
    fn new(key: &str, chat: ChatId, content: &str) -> Self {
        let digest = |how: &[u8]| {
            let mut digest = Sha256::new();
            digest.update(b"steer\0");
            digest.update(how);
            digest.update([0]);
            digest.update(chat.as_uuid().as_bytes());
            digest.update(content.as_bytes());
            digest.finalize().to_vec()
        };
        Self {
            key: key.to_string(),
            joined: digest(b"joined"),
            sent: digest(b"sent"),
        }
    }
}

/// What a send's command key stands for: "send", the Chat and the content the caller sent.
/// Only the caller's request: nothing the server adds (the Bot's settings, the credential
/// that carried it), so a retry after the Bot changed is still the same request.
fn send_digest(chat: ChatId, content: &str) -> Vec<u8> {
    let mut digest = Sha256::new();
    digest.update(b"send\0");
    digest.update(chat.as_uuid().as_bytes());
    digest.update(content.as_bytes());
    digest.finalize().to_vec()
}

fn advancing(executions: &[ExecutionRow]) -> Option<&ExecutionRow> {
    executions.iter().find(|e| !e.state.is_terminal())
}

impl Chats {
    /// The use cases on these stores, with a Turn's tools routed by `routing` (the same for
    /// every way input arrives: the API, a trigger, a reminder, a Channel).
    pub fn new(
        engine: Arc<Engine>,
        chats: Arc<dyn ChatStore>,
        bots: Arc<dyn BotStore>,
        routing: ToolRouting,
    ) -> Self {
        Self::on_context(Arc::clone(engine.context()), chats, bots, routing)
    }

    /// The use cases on an engine's shared parts: what a workflow has (its phase's
    /// [`crate::engine::PhaseContext::engine`]) when it sends input to a Chat.
    pub fn on_context(
        engine: Arc<EngineContext>,
        chats: Arc<dyn ChatStore>,
        bots: Arc<dyn BotStore>,
        routing: ToolRouting,
    ) -> Self {
        Self {
            engine,
            chats,
            bots,
            routing,
            files: None,
        }
    }

    /// Checks the files each message attaches against `files` as it is sent: the caller's
    /// right to each, and that the Bot's provider takes its type and size.
    pub fn with_files(mut self, files: crate::files::Files) -> Self {
        self.files = Some(files);
        self
    }

    /// Checks the files `input` attaches for a message to `chat` (see [`Chats::with_files`]).
    async fn check_files(
        &self,
        caller: &Caller,
        chat: &ChatRow,
        input: &mut SendInput,
    ) -> Result<(), ChatError> {
        if !attaches_files(input) {
            return Ok(());
        }
        let Some(files) = &self.files else {
            return Err(ChatError::Invalid(
                "this server cannot attach files to messages".into(),
            ));
        };
        let bot = self.bot(caller, chat.bot_id).await?;
        files
            .check_attached(caller, &bot.spec.model, &mut input.content)
            .await
            .map_err(|err| match err {
                crate::files::FileError::NotFound => ChatError::NotFound("file"),
                crate::files::FileError::Invalid(message) => ChatError::Invalid(message),
                crate::files::FileError::Store(err) => ChatError::Store(err),
                other => ChatError::Store(StoreError::Invalid(other.to_string())),
            })
    }

    /// One of the caller's Chats, within its token's Bot limit (in the query).
    async fn chat(&self, caller: &Caller, id: ChatId) -> Result<ChatRow, ChatError> {
        self.chats
            .chat_of(caller.member.member_id, id, caller.bot_ids.as_deref())
            .await?
            .ok_or(ChatError::NotFound("chat"))
    }

    /// A Bot the caller may use, with its tools as a Turn would save them (for Code Mode's
    /// model-free run).
    pub(crate) async fn bot_tools(
        &self,
        caller: &Caller,
        id: BotId,
    ) -> Result<(BotRow, Vec<SavedTool>), ChatError> {
        let bot = self.bot(caller, id).await?;
        let tools = self.routing.bot_tools(caller, &bot, 0).await?;
        Ok((bot, tools))
    }

    async fn bot(&self, caller: &Caller, id: BotId) -> Result<BotRow, ChatError> {
        self.bots
            .visible_bot(caller, id)
            .await?
            .ok_or(ChatError::NotFound("bot"))
    }

    /// Creates a Chat of the caller with a Bot it may use.
    pub async fn create(&self, caller: &Caller, bot_id: BotId) -> Result<Chat, ChatError> {
        caller.require(Resource::Chats, Action::Write)?;
        self.bot(caller, bot_id).await?;
        let row = self
            .chats
            .create_chat(caller.member.member_id, bot_id, ChatId::new())
            .await?;
        Ok(chat_view(&row)?)
    }

    /// Turns plan mode on or off for one of the caller's Chats. In plan mode the Bot may only
    /// propose a plan (`propose_plan`); an approved plan switches plan mode off, and so does
    /// the Chat's member here. Turns already running keep the mode they started in until the
    /// Chat leaves plan mode.
    pub async fn set_plan_mode(
        &self,
        caller: &Caller,
        id: ChatId,
        on: bool,
    ) -> Result<bool, ChatError> {
        caller.require(Resource::Chats, Action::Write)?;
        self.chat(caller, id).await?;
        let row = self
            .chats
            .set_plan_mode(id, on)
            .await?
            .ok_or(ChatError::NotFound("chat"))?;
        Ok(row.plan_mode)
    }

    /// Whether one of the caller's Chats is in plan mode.
    pub async fn plan_mode(&self, caller: &Caller, id: ChatId) -> Result<bool, ChatError> {
        caller.require(Resource::Chats, Action::Read)?;
        Ok(self.chat(caller, id).await?.plan_mode)
    }

    /// One of the caller's Chats.
    pub async fn get(&self, caller: &Caller, id: ChatId) -> Result<Chat, ChatError> {
        caller.require(Resource::Chats, Action::Read)?;
        Ok(chat_view(&self.chat(caller, id).await?)?)
    }

    /// One page of the caller's Chats, oldest first, only those with `bot` when given (with a
    /// token limited to some Bots, only those with one of them).
    pub async fn list(
        &self,
        caller: &Caller,
        bot: Option<BotId>,
        paging: &Paging<ChatId>,
    ) -> Result<ChatPage, ChatError> {
        caller.require(Resource::Chats, Action::Read)?;
        let rows = self
            .chats
            .chats_of(
                caller.member.member_id,
                caller.bot_ids.as_deref(),
                bot,
                paging.after,
                paging.fetch(),
            )
            .await?;
        Ok(paging.try_page(rows, |row| row.id, |row| chat_view(&row))?)
    }

    /// Sends input: it waits in order for a Turn of its own, which starts at once when no Turn
    /// runs. A retry with the same command key and input answers the same execution; the same
    /// key for other input or another Chat is a conflict.
    pub async fn send(
        &self,
        caller: &Caller,
        id: ChatId,
        mut input: SendInput,
    ) -> Result<SendReceipt, ChatError> {
        caller.require(Resource::Chats, Action::Write)?;
        check_input(&input)?;
        let chat = self.chat(caller, id).await?;
        let content =
            serde_json::to_string(&input.content).map_err(|e| ChatError::Invalid(e.to_string()))?;
        let digest = send_digest(id, &content);
        // A retry of a recorded send answers what it answered, before any other check can
        // refuse it (a closed gate, a Bot since changed).
        if let Some(key) = input.command_key.as_deref()
            && let Some(row) = self.engine.store.command_key(&caller.scope(), key).await?
        {
            if row.input_digest != digest {
                return Err(key_conflict(key));
            }
            return self.own_receipt(id, row.execution_id).await;
        }
        if attaches_files(&input) {
            self.check_files(caller, &chat, &mut input).await?;
        }
        self.submit_input(caller, chat, input, Some(digest)).await
    }

    /// Submits input as its own Turn in `chat` (the caller's, read by the request already);
    /// with `request_digest` its command key stands for that request instead of the Turn's
    /// submission.
    async fn submit_input(
        &self,
        caller: &Caller,
        chat: ChatRow,
        input: SendInput,
        request_digest: Option<Vec<u8>>,
    ) -> Result<SendReceipt, ChatError> {
        let id = chat.id;
        // Rights are checked now, not when the Chat was created.
        let bot = self.bot(caller, chat.bot_id).await?;
        let tools = self.routing.turn_tools(caller, &bot, &chat).await?;
        let turn = TurnInput {
            instructions: bot.spec.instructions.clone(),
            model: bot.spec.model.clone(),
            tools,
            limits: bot.spec.limits,
            history: Vec::new(),
            input: input.content.clone(),
            max_output_tokens: None,
            organization_id: Some(caller.member.organization_id),
            identity: Some(ExecutionIdentity::for_turn(caller, chat.member_id, bot.id)),
            source: None,
            plan_mode: chat.plan_mode,
            memory: bot.spec.memory,
            // Plan mode asks for `propose_plan` itself; Code Mode waits until it ends.
            code_mode: bot.spec.code_mode && !chat.plan_mode,
        };
        let submission = Submission::new(TURN, caller.scope(), &turn)
            .with_optional_key(input.command_key.clone())
            .with_events(vec![EventKind::TurnStarted {
                input: input.content,
            }])
            .turn_of(id.as_uuid());
        let submitted = match request_digest {
            Some(digest) => self.engine.submit_as(submission, digest).await?,
            None => self.engine.submit(submission).await?,
        };
        self.own_receipt(id, submitted.execution_id()).await
    }

    /// The receipt of input that has a Turn of its own: `started` while it is the Chat's first
    /// advancing Turn (or ended), else `queued`.
    async fn own_receipt(
        &self,
        id: ChatId,
        execution_id: ExecutionId,
    ) -> Result<SendReceipt, ChatError> {
        let executions = self.engine.store.chat_executions(id.as_uuid()).await?;
        let disposition = match advancing(&executions) {
            Some(first) if first.id != execution_id => SendDisposition::Queued,
            _ => SendDisposition::Started,
        };
        Ok(SendReceipt {
            chat_id: id,
            execution_id,
            disposition,
        })
    }

    /// Adds input to the running Turn; with no Turn running (or one that is ending) it is sent
    /// as its own input instead.
    ///
    /// With a command key a retry is safe: the key is recorded with the added input (or with
    /// the Turn it was sent as), and a retry with the same key and input answers that same
    /// execution without adding the input again: `steered` when it joined a Turn, as a send
    /// answers when it got a Turn of its own. The same key for other input, another Chat or
    /// another kind of request is a conflict.
    pub async fn steer(
        &self,
        caller: &Caller,
        id: ChatId,
        mut input: SendInput,
    ) -> Result<SendReceipt, ChatError> {
        caller.require(Resource::Chats, Action::Write)?;
        check_input(&input)?;
        let chat = self.chat(caller, id).await?;
        self.check_files(caller, &chat, &mut input).await?;
        let content =
            serde_json::to_string(&input.content).map_err(|e| ChatError::Invalid(e.to_string()))?;
        let key = input
            .command_key
            .as_deref()
            .map(|key| SteerKey::new(key, id, &content));
        if let Some(key) = &key
            && let Some(receipt) = self.steer_answered(caller, id, key).await?
        {
            return Ok(receipt);
        }
        let store = &self.engine.store;
        let executions = store.chat_executions(id.as_uuid()).await?;
        if let Some(running) = advancing(&executions) {
            let write = key.as_ref().map(|key| KeyWrite {
                scope: caller.scope(),
                key: key.key.clone(),
                input_digest: key.joined.clone(),
            });
            match store.add_input(running.id, content, write).await {
                Ok(Some(_)) => {
                    return Ok(SendReceipt {
                        chat_id: id,
                        execution_id: running.id,
                        disposition: SendDisposition::Steered,
                    });
                }
                Ok(None) => {}
                // A request with the same key committed meanwhile.
                Err(StoreError::CommandKeyConflict(name)) => {
                    return self.answered_or_conflict(caller, id, key, name).await;
                }
                Err(err) => return Err(err.into()),
            }
        }
        let sent = key.as_ref().map(|key| key.sent.clone());
        match self.submit_input(caller, chat, input, sent).await {
            Err(ChatError::Conflict(message)) if key.is_some() => {
                self.answered_or_conflict(caller, id, key, message).await
            }
            other => other,
        }
    }

    /// What an earlier steer with this key answered, if there was one; the key recorded for
    /// another request is a conflict.
    async fn steer_answered(
        &self,
        caller: &Caller,
        id: ChatId,
        key: &SteerKey,
    ) -> Result<Option<SendReceipt>, ChatError> {
        let store = &self.engine.store;
        let Some(row) = store.command_key(&caller.scope(), &key.key).await? else {
            return Ok(None);
        };
        if row.input_digest == key.joined {
            return Ok(Some(SendReceipt {
                chat_id: id,
                execution_id: row.execution_id,
                disposition: SendDisposition::Steered,
            }));
        }
        if row.input_digest == key.sent {
            return Ok(Some(self.own_receipt(id, row.execution_id).await?));
        }
        Err(key_conflict(&key.key))
    }

    /// After a write lost the race for its key: the winner's answer when it was this same
    /// steer, else a conflict.
    async fn answered_or_conflict(
        &self,
        caller: &Caller,
        id: ChatId,
        key: Option<SteerKey>,
        fallback: String,
    ) -> Result<SendReceipt, ChatError> {
        let Some(key) = key else {
            return Err(ChatError::Conflict(fallback));
        };
        self.steer_answered(caller, id, &key)
            .await?
            .ok_or_else(|| key_conflict(&key.key))
    }

    /// Stops the advancing Turn; queued input then runs.
    pub async fn stop(
        &self,
        caller: &Caller,
        id: ChatId,
    ) -> Result<Option<ExecutionId>, ChatError> {
        caller.require(Resource::Chats, Action::Write)?;
        self.chat(caller, id).await?;
        let executions = self.engine.store.chat_executions(id.as_uuid()).await?;
        let Some(running) = advancing(&executions) else {
            return Ok(None);
        };
        match self.engine.cancel(running.id).await {
            Ok(_) | Err(StoreError::Ended(_)) => Ok(Some(running.id)),
            Err(err) => Err(err.into()),
        }
    }

    /// Deletes a Chat: starts its deletion, durable work of the organization's
    /// `chat-deletion` service that closes the Chat to input (its Turns and their children
    /// admit nothing new), cancels its Turns and every child they started, and ends once all
    /// of them closed. Waits up to `DELETE_WAIT` for it; returns whether it ended in that
    /// time (it goes on either way, also across a restart).
    pub async fn delete(&self, caller: &Caller, id: ChatId) -> Result<bool, ChatError> {
        caller.require(Resource::Chats, Action::Write)?;
        self.chat(caller, id).await?;
        let input = super::DeletionInput { chat_id: id };
        let deletion = self
            .engine
            .submit(super::deletion::deletion_submission(
                caller.member.organization_id,
                &input,
            ))
            .await?
            .execution_id();
        let deadline = tokio::time::Instant::now() + DELETE_WAIT;
        loop {
            if self
                .engine
                .store
                .execution(deletion)
                .await?
                .state
                .is_terminal()
            {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The Chat's messages: the saved messages of each ended Turn, in order, with the notices
    /// that arrived while no Turn took input.
    pub async fn history(
        &self,
        caller: &Caller,
        id: ChatId,
        paging: &Paging<HistoryPosition>,
    ) -> Result<ChatEntryPage, ChatError> {
        caller.require(Resource::Chats, Action::Read)?;
        self.chat(caller, id).await?;
        let rows = super::chat_history_after(
            &self.engine,
            id.as_uuid(),
            paging.after,
            paging.fetch() as usize,
        )
        .await?;
        Ok(paging.try_page(
            rows,
            |(position, _)| *position,
            |(_, entry)| {
                Ok::<_, StoreError>(ChatEntry {
                    message: entry.message,
                    execution_id: entry.execution_id,
                    at: stored_time(entry.at)?,
                })
            },
        )?)
    }
}
