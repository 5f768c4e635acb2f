//! The Turn's feature interface: what a capability adds to each phase of a Turn. A capability
//! implements [`TurnFeature`] in its own folder and is registered once (`node::registry`); the
//! Turn runs the registered features in order and never names one.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use openbot_core::model::Model;
use openbot_core::tool::SharedTool;
use openbot_core::turn::ToolSet;
use openbot_schema::ErrorCategory;

use super::TurnInput;
use crate::engine::{PhaseContext, PhaseError, RunScope};
use crate::store::NewChild;

/// A capability's part in a Turn's phase. Runs at every phase start (also on restore and on a
/// new owner), before the loop's first model request: what it prepares must come from saved
/// state, so a replay prepares the same.
#[async_trait]
pub trait TurnFeature: Send + Sync + 'static {
    /// Shapes `phase` for this Turn: its instructions, model, tools, guards and the children
    /// its end starts. A feature with nothing to add for this Turn leaves `phase` unchanged.
    async fn prepare(&self, cx: &PhaseContext, phase: &mut TurnPhase) -> Result<(), PhaseError>;
}

/// A Turn's phase while its features shape it.
pub struct TurnPhase {
    /// The Turn's saved input (read-only: what the Bot and the caller asked for).
    pub input: Arc<TurnInput>,
    /// The phase's scope (its gate and its cancellation).
    pub scope: RunScope,
    /// The system instructions the model is sent.
    pub instructions: String,
    /// The model the loop calls.
    pub model: Arc<dyn Model>,
    tools: ToolSet,
    retry_safe: HashMap<String, bool>,
    end_children: Vec<NewChild>,
    guards: Vec<Box<dyn std::any::Any + Send + Sync>>,
}

impl TurnPhase {
    /// A phase of `input` with its saved tools in `tools`.
    pub(crate) fn new(
        input: Arc<TurnInput>,
        scope: RunScope,
        model: Arc<dyn Model>,
        tools: ToolSet,
        retry_safe: HashMap<String, bool>,
    ) -> Self {
        Self {
            instructions: input.instructions.clone(),
            input,
            scope,
            model,
            tools,
            retry_safe,
            end_children: Vec::new(),
            guards: Vec::new(),
        }
    }

    /// Adds `tool`; `retry_safe` says whether a call may be sent again after a lost answer.
    pub fn add_tool(&mut self, tool: SharedTool, retry_safe: bool) -> Result<(), PhaseError> {
        let name = tool.definition().name.clone();
        self.tools
            .add(tool)
            .map_err(|e| PhaseError::failed(ErrorCategory::Configuration, e.to_string()))?;
        self.retry_safe.insert(name, retry_safe);
        Ok(())
    }

    /// The tool set, to change in place (say, to switch Code Mode on over every tool).
    pub fn tools_mut(&mut self) -> &mut ToolSet {
        &mut self.tools
    }

    /// Starts `child` in the commit that completes the Turn.
    pub fn start_at_end(&mut self, child: NewChild) {
        self.end_children.push(child);
    }

    /// Hands the loop's host a guard of the feature's own type, read back by that type
    /// (the Turn takes the guard types its host enforces); a second guard of the same type
    /// replaces the first.
    pub fn set_guard<T: Send + Sync + 'static>(&mut self, guard: T) {
        self.guards.retain(|g| !g.is::<T>());
        self.guards.push(Box::new(guard));
    }

    /// The guard of type `T` a feature set, if any.
    pub(crate) fn take_guard<T: Send + Sync + 'static>(&mut self) -> Option<T> {
        let at = self.guards.iter().position(|g| g.is::<T>())?;
        self.guards.swap_remove(at).downcast::<T>().ok().map(|g| *g)
    }

    /// What the features made of the phase: instructions, model, tools with their retry
    /// rules, and the children to start at the end.
    pub(crate) fn finish(self) -> PreparedPhase {
        PreparedPhase {
            instructions: self.instructions,
            model: self.model,
            tools: Arc::new(self.tools),
            retry_safe: self.retry_safe,
            end_children: self.end_children,
        }
    }
}

/// A phase ready for its loop.
pub(crate) struct PreparedPhase {
    pub(crate) instructions: String,
    pub(crate) model: Arc<dyn Model>,
    pub(crate) tools: Arc<ToolSet>,
    pub(crate) retry_safe: HashMap<String, bool>,
    pub(crate) end_children: Vec<NewChild>,
}
