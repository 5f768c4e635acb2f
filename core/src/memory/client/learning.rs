//! Learning in `memory://` (in process, not durable): when the organization's helper model is
//! set here (`put_memory_settings` with a `helper_model`), a completed Turn of a Bot with memory
//! asks it what to add, change or retire, with the server's instructions and the server's
//! strict plan ([`crate::memories::parse_plan`]), and applies the plan to the process's memory
//! book under its lock, moving the Chat's learning cursor by compare-and-set. Nothing of it
//! survives the process; without a helper model nothing is learned (a Turn's own model is not
//! asked, so a scripted model's script is not spent on learning).

use std::sync::Arc;

use futures::StreamExt as _;
use openbot_schema::{ChatId, ContentPart, ExecutionId, MemoryEvidence, MemorySettings, Message};

use super::{Inner, MemoryClient, State};
use crate::error::Error;
use crate::memories::{LEARNING_INSTRUCTIONS, PlanRights, learning_input, parse_plan};
use crate::model::{Model, ModelEvent, ModelRequest, ModelSpec};

/// The most memories the helper model is shown, as on a server.
const SHOWN: usize = 50;

impl MemoryClient {
    /// The memory settings of this process: its helper model; embeddings need a server.
    pub(super) fn memory_settings(&self) -> Result<MemorySettings, Error> {
        Ok(MemorySettings {
            embeddings_model: None,
            helper_model: self.state()?.helper_model.clone(),
        })
    }

    /// Sets the helper model that learns after Turns (a model spec or a name of the process's
    /// models); an embeddings model is refused (embeddings are a server's).
    pub(super) fn put_memory_settings(
        &self,
        settings: MemorySettings,
    ) -> Result<MemorySettings, Error> {
        if settings.embeddings_model.is_some() {
            return Err(Error::invalid_input(
                "an embeddings model needs a server (memory:// ranks by keyword)",
            ));
        }
        let mut state = self.state()?;
        if let Some(spec) = &settings.helper_model
            && !state.models.contains_key(spec)
        {
            ModelSpec::parse(spec).map_err(|e| Error::invalid_input(e.to_string()))?;
        }
        state.helper_model = settings.helper_model;
        drop(state);
        self.memory_settings()
    }
}

impl Inner {
    /// Starts the learning of a completed Turn of `chat` when its Bot has memory and a helper
    /// model is set; the helper runs outside every lock.
    pub(super) fn start_learning(
        self: &Arc<Self>,
        state: &mut State,
        chat: ChatId,
        execution: ExecutionId,
    ) {
        let Some(spec) = state.helper_model.clone() else {
            return;
        };
        let Some(chat_state) = state.chats.get(&chat).filter(|c| !c.deleted) else {
            return;
        };
        let bot = chat_state.chat.bot_id;
        let history: Vec<Message> = chat_state
            .history
            .iter()
            .map(|e| e.message.clone())
            .collect();
        if !state.bots.get(&bot).is_some_and(|b| b.spec.memory) {
            return;
        }
        let from = self.memories.cursor(chat);
        let to = history.len();
        if to <= from {
            return;
        }
        let model = match state.model(&spec) {
            Ok(model) => model,
            Err(err) => {
                tracing::warn!(error = %err.message, "learning skipped: the helper model cannot be built");
                return;
            }
        };
        let book = self.memories.clone();
        tokio::spawn(async move {
            let shown = book.active(bot, SHOWN);
            let rights = PlanRights {
                changeable: shown.iter().map(|(id, _)| *id).collect(),
                // One member in a process: its memories are all its own.
                may_share: true,
            };
            let input = learning_input(&shown, &history[from..]);
            let answer = match ask(model.as_ref(), input).await {
                Ok(answer) => answer,
                Err(err) => {
                    tracing::warn!(%execution, error = %err, "learning failed: the helper call");
                    return;
                }
            };
            match parse_plan(&answer, &rights) {
                Ok(plan) => {
                    let evidence = MemoryEvidence {
                        chat_id: Some(chat),
                        execution_id: Some(execution),
                        message: u32::try_from(to - 1).ok(),
                    };
                    book.apply_plan(bot, chat, (from, to), &plan, evidence);
                }
                // Nothing applied and the cursor stays: the next Turn's learning reads them again.
                Err(err) => tracing::warn!(%execution, error = %err, "learning failed"),
            }
        });
    }
}

/// The helper's whole text answer.
async fn ask(model: &dyn Model, input: String) -> Result<String, crate::model::ModelError> {
    let request = ModelRequest {
        instructions: LEARNING_INSTRUCTIONS.into(),
        messages: vec![Arc::new(Message::User {
            content: vec![ContentPart::text(input)],
        })],
        tools: Arc::from(Vec::new()),
        max_output_tokens: Some(2000),
    };
    let mut stream = model.stream(request).await?;
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        if let ModelEvent::TextDelta(delta) = event? {
            text.push_str(&delta);
        }
    }
    Ok(text)
}
