//! Deleting a Chat, as durable work of the organization's `chat-deletion` service.
//!
//! The deletion closes the Chat's admission gate (nothing new starts in its tree), cancels its
//! Turns and every child they started, and ends only once all of them closed. It runs on the
//! engine under a [`ServiceIdentity`], so a crash or a takeover in the middle finishes it
//! instead of leaving work running in a deleted Chat; a member's request only starts it (once
//! per Chat, by its command key) and waits for it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use openbot_schema::{ChatId, ExecutionState};
use serde::{Deserialize, Serialize};

use super::store::ChatStore;
use crate::engine::{EngineEnd, Next, PhaseContext, PhaseError, RunScope, Submission, Workflow};
use crate::identity::{ServiceIdentity, ServiceOwner};
use crate::store::{Commit, now_ms};

/// The execution kind of Chat deletions.
pub const CHAT_DELETION: &str = "chat_deletion";

/// How soon a deletion looks again at work that has not closed yet; each look waits twice
/// as long as the one before, up to [`RECHECK_MAX`].
const RECHECK: Duration = Duration::from_millis(100);

/// The longest wait between two looks.
const RECHECK_MAX: Duration = Duration::from_secs(2);

/// The saved input of a deletion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletionInput {
    /// The Chat.
    pub chat_id: ChatId,
}

/// The service that deletes an organization's Chats.
pub fn deletion_service(organization: uuid::Uuid) -> ServiceIdentity {
    // The name is a constant that follows the naming rule.
    ServiceIdentity {
        owner: ServiceOwner::Organization(organization),
        name: "chat-deletion".into(),
    }
}

/// The submission of a Chat's deletion: one per Chat, however often it is asked for.
pub fn deletion_submission(
    organization: uuid::Uuid,
    input: &DeletionInput,
) -> Submission<'_, DeletionInput> {
    Submission::new(CHAT_DELETION, deletion_service(organization).scope(), input)
        .with_key(format!("chat-deletion:{}", input.chat_id))
}

/// Runs Chat deletions.
pub struct ChatDeletionWorkflow {
    chats: Arc<dyn ChatStore>,
}

impl ChatDeletionWorkflow {
    /// A workflow that closes Chats in `chats`.
    pub fn new(chats: Arc<dyn ChatStore>) -> Self {
        Self { chats }
    }
}

#[async_trait]
impl Workflow for ChatDeletionWorkflow {
    fn kind(&self) -> &'static str {
        CHAT_DELETION
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
        let input: DeletionInput = cx.input().await.map_err(PhaseError::from)?;
        // Closing the gate first: from here on nothing new starts in the Chat's tree.
        self.chats.delete_chat(input.chat_id).await?;
        let cancelled = scope.cancellation();
        let mut wait = RECHECK;
        loop {
            let executions = cx
                .engine
                .store
                .chat_executions(input.chat_id.as_uuid())
                .await?;
            let mut open = 0;
            for execution in &executions {
                // Each tree in one transaction; a cancel that waits already is not sent again,
                // so a look writes only for work that started since the last one.
                open += cx.engine.cancel_tree(execution.id).await?;
            }
            if open == 0 {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = cancelled.cancelled() => return Err(PhaseError::Cancelled),
            }
            wait = (wait * 2).min(RECHECK_MAX);
        }
        tracing::info!(chat = %input.chat_id, at = now_ms(), "chat deleted; its work closed");
        cx.engine
            .commit(
                cx.execution.id,
                cx.generation,
                Commit::job_ended(ExecutionState::Completed, Vec::new()),
            )
            .await?;
        Ok(())
    }

    async fn end(&self, cx: &PhaseContext, end: EngineEnd) -> Result<(), PhaseError> {
        cx.commit_plain_end(end).await
    }
}
