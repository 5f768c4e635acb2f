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

/// Gives a Bot granted a Computer the Computer tools on it: the ones it names, and the others
/// added. A member's own Computer is offered only in the Turns that member submits; a shared
/// one in any Turn of the Bot.
pub struct ComputerTools(pub Arc<dyn ComputerStore>);

#[async_trait]
impl ToolSource for ComputerTools {
    async fn route(
        &self,
        request: &RouteRequest<'_>,
        slots: &mut Vec<Slot>,
    ) -> Result<(), ChatError> {
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
        for name in TOOL_NAMES {
            let Some(definition) = tool_definition(name) else {
                continue;
            };
            let routed = Slot::Routed(SavedTool {
                definition,
                route: ToolRoute::Computer(ComputerRoute {
                    computer_id: computer.id,
                    bot_id: grant.bot_id,
                    ask: grant.ask && !reads_only(name),
                }),
            });
            // The Bot's own slot of that name, if open; a name another source claimed first
            // stays as it is; a name the Bot does not have is added.
            match slots.iter().position(|slot| slot_name(slot) == Some(name)) {
                Some(at) if matches!(slots[at], Slot::Open(_)) => slots[at] = routed,
                Some(_) => {}
                None => slots.push(routed),
            }
        }
        Ok(())
    }

    fn adds(&self) -> bool {
        true
    }
}

fn slot_name(slot: &Slot) -> Option<&str> {
    match slot {
        Slot::Open(definition) => Some(&definition.name),
        Slot::Routed(tool) => Some(&tool.definition.name),
        Slot::Left => None,
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
