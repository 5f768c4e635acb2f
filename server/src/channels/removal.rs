//! A Channel's removal (F10): its DELETE closes admission in the transaction that submits
//! this execution (status `removing`), and the execution marks the Channel `removed` only
//! once every linked delivery version has ended: each input's delivery (pending sends sent
//! or rejected, unknown results recorded) and every Turn of the Channel's Chats. Deliveries
//! wake it as they end; a durable timer rechecks in case a wake was lost.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_schema::ExecutionState;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::delivery::channels_service;
use super::store::ChannelStore;
use crate::engine::{EngineEnd, Next, PhaseContext, PhaseError, RunScope, Submission, Workflow};
use crate::store::Commit;

/// The execution kind of Channel removals.
pub const CHANNEL_REMOVAL: &str = "channel_removal";
/// How often a removal looks again without a wake.
const RECHECK_MS: i64 = 2_000;

/// The saved input of a removal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovalInput {
    /// The Channel.
    pub channel_id: Uuid,
}

/// The submission of a Channel's removal: one per Channel.
pub fn removal_submission(
    organization: Uuid,
    input: &RemovalInput,
) -> Submission<'_, RemovalInput> {
    Submission::new(
        CHANNEL_REMOVAL,
        channels_service(organization).scope(),
        input,
    )
    .with_key(format!("channel-removal:{}", input.channel_id))
}

/// Runs removals.
pub struct RemovalWorkflow {
    channels: Arc<dyn ChannelStore>,
}

impl RemovalWorkflow {
    /// A workflow over this store.
    pub fn new(channels: Arc<dyn ChannelStore>) -> Self {
        Self { channels }
    }

    async fn input(&self, cx: &PhaseContext) -> Result<RemovalInput, PhaseError> {
        cx.input().await.map_err(PhaseError::from)
    }

    /// Whether something linked to the Channel has not ended.
    async fn busy(&self, cx: &PhaseContext, channel_id: Uuid) -> Result<bool, PhaseError> {
        if self.channels.open_messages(channel_id).await? > 0 {
            return Ok(true);
        }
        for chat in self.channels.channel_chats(channel_id).await? {
            let executions = cx.engine.store.chat_executions(chat.as_uuid()).await?;
            if executions.iter().any(|e| !e.state.is_terminal()) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[async_trait]
impl Workflow for RemovalWorkflow {
    fn kind(&self) -> &'static str {
        CHANNEL_REMOVAL
    }

    async fn next(&self, cx: &PhaseContext) -> Result<Next, PhaseError> {
        if cx.execution.state.is_terminal() {
            return Ok(Next::Done);
        }
        let input = self.input(cx).await?;
        if self.busy(cx, input.channel_id).await? {
            return Ok(Next::Wait {
                until: Some(cx.engine.clock.now_ms() + RECHECK_MS),
            });
        }
        Ok(Next::Run("finish".into()))
    }

    async fn run(
        &self,
        cx: &PhaseContext,
        _phase: &str,
        _scope: &RunScope,
    ) -> Result<(), PhaseError> {
        let input = self.input(cx).await?;
        self.channels.finish_removal(input.channel_id).await?;
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
        // A cancelled removal leaves the Channel `removing`: admission stays closed.
        cx.commit_plain_end(end).await
    }
}
