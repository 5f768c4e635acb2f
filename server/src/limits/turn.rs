//! Limits in a Turn: each model request takes the shared permits and rate limits of its
//! scopes first.

use async_trait::async_trait;

use super::{Limits, model_scopes};
use crate::engine::{PhaseContext, PhaseError};
use crate::turns::{ModelPermits, TurnFeature, TurnPhase};

/// Takes shared permits and rate limits before each model request of a Turn of an
/// organization (scopes: the organization, the provider kind, the Bot).
pub struct LimitsFeature(pub Limits);

#[async_trait]
impl TurnFeature for LimitsFeature {
    async fn prepare(&self, cx: &PhaseContext, phase: &mut TurnPhase) -> Result<(), PhaseError> {
        let Some(organization) = phase.input.organization_id else {
            return Ok(());
        };
        let bot = phase.input.identity.as_ref().map(|i| i.bot_id.as_uuid());
        let permits = ModelPermits::new(
            self.0.clone(),
            organization,
            cx.execution.id,
            cx.generation,
            model_scopes(&phase.input.model, bot),
            phase.scope.clone(),
        )
        .await;
        phase.set_guard(permits);
        Ok(())
    }
}
