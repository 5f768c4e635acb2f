//! Files in a Turn: the model reads the files a Turn's messages attach, as the Turn's member.

use async_trait::async_trait;

use super::FileReader;
use crate::engine::{PhaseContext, PhaseError};
use crate::turns::{TurnFeature, TurnPhase};

/// Sends the files a Turn's messages attach to its model, read at each request as the Turn's
/// member (only that member's files). Work without a saved identity reads none.
pub struct FilesFeature(pub FileReader);

#[async_trait]
impl TurnFeature for FilesFeature {
    async fn prepare(&self, _cx: &PhaseContext, phase: &mut TurnPhase) -> Result<(), PhaseError> {
        if let Some(identity) = &phase.input.identity {
            phase.model = openbot_core::model::WithFiles::wrap(
                &phase.input.model,
                std::sync::Arc::clone(&phase.model),
                self.0.source_for(identity.owner_member_id),
            );
        }
        Ok(())
    }
}
