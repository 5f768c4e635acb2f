//! Deleting a Bot, as durable work of the organization's `bot-deletion` service.
//!
//! The request marks the Bot deleted (with its memories) in the same transaction that submits
//! the deletion, so from then on nobody can see it, start a Chat with it or send to its Chats.
//! The deletion then closes every member's Chats with the Bot the way a Chat's deletion does
//! (one `chat_deletion` each: the gate closes, its Turns and their children are cancelled) and
//! ends once all of them ended. A crash or a takeover in the middle finishes it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use openbot_schema::BotId;
use serde::{Deserialize, Serialize};

use super::store::BotStore;
use crate::chats::{DeletionInput, chat_deletion_submission};
use crate::engine::{
    Engine, EngineEnd, EngineError, Next, PhaseContext, PhaseError, RunScope, Submission, Workflow,
};
use crate::identity::{ServiceIdentity, ServiceOwner};
use crate::store::{Commit, TxWrites};

/// The execution kind of Bot deletions.
pub const BOT_DELETION: &str = "bot_deletion";

/// How soon a deletion looks again at Chat deletions that have not ended; each look waits
/// twice as long as the one before, up to [`RECHECK_MAX`].
const RECHECK: Duration = Duration::from_millis(50);

/// The longest wait between two looks.
const RECHECK_MAX: Duration = Duration::from_secs(2);

/// The saved input of a Bot's deletion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BotDeletionInput {
    /// The Bot.
    pub bot_id: BotId,
    /// Its organization, whose `chat-deletion` service closes the Chats.
    pub organization_id: uuid::Uuid,
}

/// Marks a Bot deleted, with its memories: written with the submission of its deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkBotDeleted {
    /// The Bot.
    pub bot: BotId,
}

/// The service that deletes an organization's Bots.
pub fn bot_deletion_service(organization: uuid::Uuid) -> ServiceIdentity {
    ServiceIdentity {
        owner: ServiceOwner::Organization(organization),
        name: "bot-deletion".into(),
    }
}

/// Deletes a Bot the caller was allowed to delete: marks it deleted and submits the closing
/// of its Chats, in one transaction. Asking again for the same Bot adds nothing.
pub async fn delete_bot(
    engine: &Engine,
    organization: uuid::Uuid,
    bot: BotId,
) -> Result<(), EngineError> {
    let input = BotDeletionInput {
        bot_id: bot,
        organization_id: organization,
    };
    let submission = Submission::new(
        BOT_DELETION,
        bot_deletion_service(organization).scope(),
        &input,
    )
    .with_key(format!("bot-deletion:{bot}"));
    engine
        .submit_writing(submission, TxWrites::one(MarkBotDeleted { bot }))
        .await?;
    Ok(())
}

/// Runs Bot deletions.
pub struct BotDeletionWorkflow {
    bots: Arc<dyn BotStore>,
}

impl BotDeletionWorkflow {
    /// A workflow that closes the Chats of Bots in `bots`.
    pub fn new(bots: Arc<dyn BotStore>) -> Self {
        Self { bots }
    }
}

#[async_trait]
impl Workflow for BotDeletionWorkflow {
    fn kind(&self) -> &'static str {
        BOT_DELETION
    }

    async fn next(&self, cx: &PhaseContext) -> Result<Next, PhaseError> {
        Ok(if cx.execution.state.is_terminal() {
            Next::Done
        } else {
            Next::Run("close".into())
        })
    }

    async fn run(
        &self,
        cx: &PhaseContext,
        _phase: &str,
        scope: &RunScope,
    ) -> Result<(), PhaseError> {
        let input: BotDeletionInput = cx.input().await.map_err(PhaseError::from)?;
        let cancelled = scope.cancellation();
        let mut wait = RECHECK;
        loop {
            // Every member's Chats: the ones left, and any a member opened before the mark.
            let chats = self.bots.live_chats(input.bot_id).await?;
            if chats.is_empty() {
                break;
            }
            for chat_id in chats {
                // One deletion per Chat, however often it is asked for (its command key).
                let chat = DeletionInput { chat_id };
                cx.engine
                    .submit(chat_deletion_submission(input.organization_id, &chat))
                    .await?;
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = cancelled.cancelled() => return Err(PhaseError::Cancelled),
            }
            wait = (wait * 2).min(RECHECK_MAX);
        }
        tracing::info!(bot = %input.bot_id, "bot deleted; its chats closed");
        cx.engine
            .commit(
                cx.execution.id,
                cx.generation,
                Commit::job_ended(openbot_schema::ExecutionState::Completed, Vec::new()),
            )
            .await?;
        Ok(())
    }

    async fn end(&self, cx: &PhaseContext, end: EngineEnd) -> Result<(), PhaseError> {
        cx.commit_plain_end(end).await
    }
}
