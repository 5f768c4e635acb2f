//! The Chat use cases: create, send, steer, stop, delete and read history, with the same access
//! rules for every entry point.

use std::sync::Arc;
use std::time::Duration;

use chrono::DateTime;
use openbot_schema::{
    BotId, Chat, ChatEntry, ChatId, EventKind, ExecutionId, Message, SendDisposition, SendInput,
    SendReceipt,
};

use super::store::{ChatRow, ChatStore};
use crate::bots::{BotRow, BotStore};
use crate::engine::{Engine, EngineError, Submission};
use crate::identity::{Caller, ExecutionIdentity};
use crate::store::{ExecutionRow, StoreError};
use crate::tools::ToolStore;
use crate::turns::{SavedTool, TURN, ToolRoute, TurnInput};

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
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
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
    engine: Arc<Engine>,
    chats: Arc<dyn ChatStore>,
    bots: Arc<dyn BotStore>,
    tools: Arc<dyn ToolStore>,
}

fn time(ms: i64) -> chrono::DateTime<chrono::Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

fn chat_view(row: &ChatRow) -> Chat {
    Chat {
        id: row.id,
        bot_id: row.bot_id,
        created_at: time(row.created_at),
    }
}

fn check_input(input: &SendInput) -> Result<(), ChatError> {
    if input.content.is_empty() {
        return Err(ChatError::Invalid(
            "input needs at least one content part".into(),
        ));
    }
    if input
        .command_key
        .as_ref()
        .is_some_and(|k| k.is_empty() || k.len() > 200)
    {
        return Err(ChatError::Invalid(
            "a command key must have 1-200 characters".into(),
        ));
    }
    Ok(())
}

fn advancing(executions: &[ExecutionRow]) -> Option<&ExecutionRow> {
    executions.iter().find(|e| !e.state.is_terminal())
}

impl Chats {
    /// The use cases on these stores.
    pub fn new(
        engine: Arc<Engine>,
        chats: Arc<dyn ChatStore>,
        bots: Arc<dyn BotStore>,
        tools: Arc<dyn ToolStore>,
    ) -> Self {
        Self {
            engine,
            chats,
            bots,
            tools,
        }
    }

    /// The Bot's tools as the Turn saves them: a registered HTTP tool of the organization
    /// calls its endpoint (with the registry's definition); any other is a host tool.
    async fn saved_tools(
        &self,
        caller: &Caller,
        bot: &BotRow,
    ) -> Result<Vec<SavedTool>, ChatError> {
        if bot.spec.tools.is_empty() {
            return Ok(Vec::new());
        }
        let registered = self.tools.tools(caller.member.organization_id).await?;
        Ok(bot
            .spec
            .tools
            .iter()
            .map(|definition| {
                match registered
                    .iter()
                    .find(|t| t.definition.name == definition.name)
                {
                    Some(http) => SavedTool {
                        definition: http.definition.clone(),
                        route: ToolRoute::Http {
                            url: http.url.clone(),
                            retry_safe: http.retry_safe,
                        },
                    },
                    None => SavedTool {
                        definition: definition.clone(),
                        route: ToolRoute::Host,
                    },
                }
            })
            .collect())
    }

    async fn chat(&self, caller: &Caller, id: ChatId) -> Result<ChatRow, ChatError> {
        self.chats
            .chat_of(caller.member.member_id, id)
            .await?
            .ok_or(ChatError::NotFound("chat"))
    }

    async fn bot(&self, caller: &Caller, id: BotId) -> Result<BotRow, ChatError> {
        self.bots
            .visible_bot(caller, id)
            .await?
            .ok_or(ChatError::NotFound("bot"))
    }

    /// Creates a Chat of the caller with a Bot it may use.
    pub async fn create(&self, caller: &Caller, bot_id: BotId) -> Result<Chat, ChatError> {
        self.bot(caller, bot_id).await?;
        let row = self
            .chats
            .create_chat(caller.member.member_id, bot_id, ChatId::new())
            .await?;
        Ok(chat_view(&row))
    }

    /// One of the caller's Chats.
    pub async fn get(&self, caller: &Caller, id: ChatId) -> Result<Chat, ChatError> {
        Ok(chat_view(&self.chat(caller, id).await?))
    }

    /// The caller's Chats.
    pub async fn list(&self, caller: &Caller) -> Result<Vec<Chat>, ChatError> {
        Ok(self
            .chats
            .chats_of(caller.member.member_id)
            .await?
            .iter()
            .map(chat_view)
            .collect())
    }

    /// Sends input: it waits in order for a Turn of its own, which starts at once when no Turn
    /// runs. A retry with the same command key and input answers the same execution.
    pub async fn send(
        &self,
        caller: &Caller,
        id: ChatId,
        input: SendInput,
    ) -> Result<SendReceipt, ChatError> {
        check_input(&input)?;
        let chat = self.chat(caller, id).await?;
        // Rights are checked now, not when the Chat was created.
        let bot = self.bot(caller, chat.bot_id).await?;
        let turn = TurnInput {
            instructions: bot.spec.instructions.clone(),
            model: bot.spec.model.clone(),
            tools: self.saved_tools(caller, &bot).await?,
            limits: bot.spec.limits,
            history: Vec::new(),
            input: input.content.clone(),
            max_output_tokens: None,
            organization_id: Some(caller.member.organization_id),
            identity: Some(ExecutionIdentity::for_turn(caller, chat.member_id, bot.id)),
        };
        let submission = Submission {
            kind: TURN,
            scope: caller.scope(),
            command_key: input.command_key.clone(),
            input: &turn,
            events: vec![EventKind::TurnStarted {
                input: input.content,
            }],
            parent_id: None,
            chat_id: Some(id.as_uuid()),
            admission_gate: Some(id.as_uuid()),
        };
        let execution_id = self.engine.submit(submission).await?.execution_id();
        let executions = self
            .engine
            .context()
            .store
            .chat_executions(id.as_uuid())
            .await?;
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
    pub async fn steer(
        &self,
        caller: &Caller,
        id: ChatId,
        input: SendInput,
    ) -> Result<SendReceipt, ChatError> {
        check_input(&input)?;
        self.chat(caller, id).await?;
        let executions = self
            .engine
            .context()
            .store
            .chat_executions(id.as_uuid())
            .await?;
        if let Some(running) = advancing(&executions) {
            let content = serde_json::to_string(&input.content)
                .map_err(|e| ChatError::Invalid(e.to_string()))?;
            if self
                .engine
                .context()
                .store
                .add_input(running.id, content)
                .await?
                .is_some()
            {
                return Ok(SendReceipt {
                    chat_id: id,
                    execution_id: running.id,
                    disposition: SendDisposition::Steered,
                });
            }
        }
        self.send(caller, id, input).await
    }

    /// Stops the advancing Turn; queued input then runs.
    pub async fn stop(
        &self,
        caller: &Caller,
        id: ChatId,
    ) -> Result<Option<ExecutionId>, ChatError> {
        self.chat(caller, id).await?;
        let executions = self
            .engine
            .context()
            .store
            .chat_executions(id.as_uuid())
            .await?;
        let Some(running) = advancing(&executions) else {
            return Ok(None);
        };
        match self.engine.cancel(running.id).await {
            Ok(_) | Err(StoreError::Ended(_)) => Ok(Some(running.id)),
            Err(err) => Err(err.into()),
        }
    }

    /// Deletes a Chat: closes it to input, cancels its Turns, and waits up to [`DELETE_WAIT`]
    /// for them to end. Returns whether they all ended in that time.
    pub async fn delete(&self, caller: &Caller, id: ChatId) -> Result<bool, ChatError> {
        self.chat(caller, id).await?;
        self.chats.delete_chat(id).await?;
        let store = &self.engine.context().store;
        for execution in store.chat_executions(id.as_uuid()).await? {
            if !execution.state.is_terminal() {
                match self.engine.cancel(execution.id).await {
                    Ok(_) | Err(StoreError::Ended(_)) => {}
                    Err(err) => return Err(err.into()),
                }
            }
        }
        let deadline = tokio::time::Instant::now() + DELETE_WAIT;
        loop {
            let executions = store.chat_executions(id.as_uuid()).await?;
            if executions.iter().all(|e| e.state.is_terminal()) {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The Chat's messages: the saved messages of each ended Turn, in order.
    pub async fn history(&self, caller: &Caller, id: ChatId) -> Result<Vec<ChatEntry>, ChatError> {
        self.chat(caller, id).await?;
        let mut entries = Vec::new();
        for execution in self
            .engine
            .context()
            .store
            .chat_executions(id.as_uuid())
            .await?
        {
            let Some(output) = execution.output_record else {
                continue;
            };
            let messages: Vec<Message> = self.engine.context().open_json(output).await?;
            entries.extend(messages.into_iter().map(|message| ChatEntry {
                message,
                execution_id: execution.id,
                at: time(execution.updated_at),
            }));
        }
        Ok(entries)
    }
}
