//! Memory in a Turn: a Bot with memory gets its recalled memories in the instructions and the
//! memory tools, and a completed Turn starts its learning in its end commit.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_schema::{ChatId, ErrorCategory};

use super::{Embedder, LearningInput, Memories, MemoryError, MemoryStore};
use crate::engine::{PhaseContext, PhaseError};
use crate::identity::IdentityStore;
use crate::platform::Platform;
use crate::turns::{TurnFeature, TurnPhase};

/// Recall, the memory tools and learning for Turns of Bots with memory on.
pub struct MemoryFeature {
    store: Arc<dyn MemoryStore>,
    platform: Platform,
    registry: Arc<dyn crate::models::ModelRegistryStore>,
    identity: Arc<dyn IdentityStore>,
}

impl MemoryFeature {
    /// Memory on `store`, embedding through the organization's providers in `registry`, as
    /// the Chat's member with its current rights read from `identity`.
    pub fn new(
        store: Arc<dyn MemoryStore>,
        platform: Platform,
        registry: Arc<dyn crate::models::ModelRegistryStore>,
        identity: Arc<dyn IdentityStore>,
    ) -> Self {
        Self {
            store,
            platform,
            registry,
            identity,
        }
    }
}

impl From<MemoryError> for PhaseError {
    fn from(err: MemoryError) -> Self {
        match err {
            MemoryError::Store(err) => PhaseError::Storage(err),
            MemoryError::Forbidden(cause) => PhaseError::failed(ErrorCategory::Access, cause),
            other => PhaseError::failed(ErrorCategory::Internal, other.to_string()),
        }
    }
}

#[async_trait]
impl TurnFeature for MemoryFeature {
    async fn prepare(&self, cx: &PhaseContext, phase: &mut TurnPhase) -> Result<(), PhaseError> {
        let input = Arc::clone(&phase.input);
        let (true, Some(identity)) = (input.memory, &input.identity) else {
            return Ok(());
        };
        let memories = Memories::for_learning(
            Arc::clone(&self.store),
            cx.engine.keys.clone(),
            Embedder::new(
                self.platform.clone(),
                Arc::clone(&self.registry),
                Arc::clone(&cx.engine),
            ),
        );
        let Some(memory) = super::turn_memory(
            &memories,
            identity,
            Some(self.identity.as_ref()),
            cx.execution.id,
            cx.execution.chat_id.map(ChatId::from),
            &phase.instructions,
            &input.input,
        )
        .await?
        else {
            return Ok(());
        };
        phase.instructions = memory.instructions;
        for tool in memory.tools {
            // `remember` writes one memory per call key; `recall` reads; `forget` retires.
            phase.add_tool(tool, true)?;
        }
        if let Some(chat_id) = cx.execution.chat_id {
            phase.start_at_end(super::learning_child(
                &cx.engine.keys,
                cx.execution.scope.clone(),
                &LearningInput {
                    identity: identity.clone(),
                    chat_id,
                    turn: cx.execution.id,
                },
            )?);
        }
        Ok(())
    }
}
