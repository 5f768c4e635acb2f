//! Code Mode in a Turn: a Bot with Code Mode gets the program tool over every other tool.

use async_trait::async_trait;

use crate::engine::{PhaseContext, PhaseError};
use crate::turns::{TurnFeature, TurnPhase};

/// Switches Code Mode on for Turns that asked for it, over every tool the features before it
/// added (register it last).
pub struct CodeModeFeature(pub openbot_core::codemode::Limits);

#[async_trait]
impl TurnFeature for CodeModeFeature {
    async fn prepare(&self, _cx: &PhaseContext, phase: &mut TurnPhase) -> Result<(), PhaseError> {
        if phase.input.code_mode {
            phase.tools_mut().enable_code_mode(self.0);
        }
        Ok(())
    }
}
