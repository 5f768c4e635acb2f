//! The Computer tools of a Bot granted a Computer: routed when input is submitted (the
//! Computer and whether a call asks first are saved with the Turn), and sent through the
//! machine's link when called, after the grant is checked again.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_core::computer::link::LinkResult;
use openbot_core::computer::{TOOL_NAMES, reads_only, tool_definition};
use openbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use openbot_schema::ToolDefinition;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::link::{CALL_DEADLINE, LinkError, Links, Request};
use super::store::ComputerStore;
use crate::chats::{ChatError, RouteRequest, Slot, ToolSource};
use crate::turns::{SavedTool, ToolRoute};

/// A Computer tool's route, as a Turn saves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputerRoute {
    /// The Computer.
    pub computer_id: Uuid,
    /// The Bot whose grant reaches it: checked again at each call.
    pub bot_id: Uuid,
    /// Whether a call waits for a person's approval first (the grant's `ask`, for a tool that
    /// changes the machine).
    pub ask: bool,
}

impl ComputerRoute {
    /// Whether a call whose answer was lost may be sent again: only a read.
    pub fn retry_safe(tool: &str) -> bool {
        reads_only(tool)
    }
}

/// Routes the Computer tools a Bot granted a Computer names (`computer_terminal_start`, ...) to
/// that Computer, with the Computer's own definitions. A member's own Computer is routed only
/// in the Turns that member submits; a shared one in any Turn of the Bot. A Bot that names no
/// Computer tool costs no read here.
pub struct ComputerTools(pub Arc<dyn ComputerStore>);

#[async_trait]
impl ToolSource for ComputerTools {
    async fn route(&self, request: &RouteRequest<'_>, slots: &mut [Slot]) -> Result<(), ChatError> {
        let named =
            |slot: &Slot| matches!(slot, Slot::Open(d) if TOOL_NAMES.contains(&d.name.as_str()));
        if !slots.iter().any(named) {
            return Ok(());
        }
        let Some((grant, computer)) = self.0.grant_of_bot(request.bot.id.as_uuid()).await? else {
            return Ok(());
        };
        let member = &request.caller.member;
        if computer.organization_id != member.organization_id
            || computer
                .owner_member_id
                .is_some_and(|owner| owner != member.member_id)
        {
            return Ok(());
        }
        for slot in slots.iter_mut().filter(|slot| named(slot)) {
            let Slot::Open(asked) = slot else {
                continue;
            };
            let Some(definition) = tool_definition(&asked.name) else {
                continue;
            };
            let ask = grant.ask && !reads_only(&definition.name);
            *slot = Slot::Routed(SavedTool {
                definition,
                route: ToolRoute::Computer(ComputerRoute {
                    computer_id: computer.id,
                    bot_id: grant.bot_id,
                    ask,
                }),
            });
        }
        Ok(())
    }
}

/// A Computer tool in a running phase: checks the grant, then calls through the link.
pub struct LinkedTool {
    definition: ToolDefinition,
    route: ComputerRoute,
    links: Arc<Links>,
    store: Arc<dyn ComputerStore>,
}

impl LinkedTool {
    /// The tool `definition` on `route`, reaching the machine through `links`.
    pub fn new(
        definition: ToolDefinition,
        route: ComputerRoute,
        links: Arc<Links>,
        store: Arc<dyn ComputerStore>,
    ) -> Self {
        Self {
            definition,
            route,
            links,
            store,
        }
    }
}

#[async_trait]
impl Tool for LinkedTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        // Current rights, not those of the submission: a grant taken back, or a Computer
        // removed, since stops the call before it is sent.
        let granted = self
            .store
            .grant_of_bot(self.route.bot_id)
            .await
            .map_err(|_| {
                ToolError::new("the Computer's grant could not be read; nothing was sent")
            })?;
        if granted.is_none_or(|(grant, _)| grant.computer_id != self.route.computer_id) {
            return Err(ToolError::new(
                "this Bot's access to the Computer was taken back (or the Computer was removed); nothing was sent",
            ));
        }
        let request = Request {
            tool: self.definition.name.clone(),
            arguments,
            execution_id: context.execution_id,
            call_id: context.call_id.clone(),
        };
        let answer = tokio::select! {
            answer = self.links.call(self.route.computer_id, request, CALL_DEADLINE) => answer,
            () = context.cancel.cancelled() => return Err(ToolError::outcome_unknown(
                "the Turn was cancelled while the Computer ran the call; it may have run",
            )),
        };
        match answer {
            Ok(LinkResult::Output { content }) => Ok(ToolOutput { content }),
            Ok(LinkResult::Error {
                message,
                outcome_unknown,
            }) => Err(if outcome_unknown {
                ToolError::outcome_unknown(message)
            } else {
                ToolError::new(message)
            }),
            Err(err) if err.may_have_run() => Err(ToolError::outcome_unknown(err.to_string())),
            Err(err @ LinkError::Directory(_)) => {
                tracing::warn!(error = %err, "a Computer call found no route");
                Err(ToolError::new(
                    "the Computer's connection could not be found; nothing was sent",
                ))
            }
            Err(err) => Err(ToolError::new(err.to_string())),
        }
    }
}
