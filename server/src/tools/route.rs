//! The registered HTTP tools and delegate tools a Bot names, routed when input is submitted.

use std::sync::Arc;

use async_trait::async_trait;

use super::ToolStore;
use crate::bots::BotStore;
use crate::chats::{ChatError, RouteRequest, Slot, ToolSource};
use crate::turns::{DelegateRoute, SavedTool, ToolRoute};

/// Claims each Bot tool registered as an HTTP tool of the organization: it calls its endpoint,
/// offered with the registry's definition.
pub struct HttpTools(pub Arc<dyn ToolStore>);

#[async_trait]
impl ToolSource for HttpTools {
    async fn route(&self, request: &RouteRequest<'_>, slots: &mut [Slot]) -> Result<(), ChatError> {
        let registered = self.0.tools(request.caller.member.organization_id).await?;
        for slot in slots.iter_mut() {
            let Slot::Open(definition) = slot else {
                continue;
            };
            if let Some(tool) = registered
                .iter()
                .find(|t| t.definition.name == definition.name)
            {
                *slot = Slot::Routed(SavedTool {
                    definition: tool.definition.clone(),
                    route: ToolRoute::Http {
                        url: tool.url.clone(),
                        retry_safe: tool.retry_safe,
                        background: tool.background,
                        template: tool.template.clone(),
                    },
                });
            }
        }
        Ok(())
    }
}

/// Claims each Bot tool registered as a delegate tool of the organization: it starts a Turn of
/// its Bot, saved here with that Bot's own tools (to
/// [`openbot_core::delegation::MAX_DELEGATION_DEPTH`] levels, the rule of both modes; deeper,
/// the tool is left out). A delegate naming a Bot the caller cannot use stops the send.
pub struct DelegateTools {
    tools: Arc<dyn ToolStore>,
    bots: Arc<dyn BotStore>,
}

impl DelegateTools {
    /// Delegates from `tools`, to Bots read from `bots`.
    pub fn new(tools: Arc<dyn ToolStore>, bots: Arc<dyn BotStore>) -> Self {
        Self { tools, bots }
    }
}

#[async_trait]
impl ToolSource for DelegateTools {
    async fn route(&self, request: &RouteRequest<'_>, slots: &mut [Slot]) -> Result<(), ChatError> {
        let caller = request.caller;
        let delegates = self.tools.delegates(caller.member.organization_id).await?;
        for slot in slots.iter_mut() {
            let Slot::Open(definition) = slot else {
                continue;
            };
            let Some(delegate) = delegates.iter().find(|d| d.name == definition.name) else {
                continue;
            };
            if !openbot_core::delegation::offers_delegates(request.depth) {
                // Deeper delegation is not offered: the chain ends here.
                *slot = Slot::Left;
                continue;
            }
            let target = self
                .bots
                .visible_bot(caller, delegate.bot_id)
                .await?
                .ok_or_else(|| {
                    ChatError::Invalid(format!(
                        "the delegate tool `{}` names a Bot this caller cannot use",
                        delegate.name
                    ))
                })?;
            let tools = Box::pin(
                request
                    .routing
                    .bot_tools(caller, &target, request.depth + 1),
            )
            .await?;
            *slot = Slot::Routed(SavedTool {
                definition: openbot_core::delegation::delegate_definition(
                    &delegate.name,
                    &delegate.description,
                    &target.spec.name,
                ),
                route: ToolRoute::Delegate(Box::new(DelegateRoute {
                    bot_id: target.id,
                    name: target.spec.name.clone(),
                    instructions: target.spec.instructions.clone(),
                    model: target.spec.model.clone(),
                    tools,
                    limits: openbot_core::delegation::route_limits(
                        target.spec.limits,
                        delegate.limits,
                    ),
                })),
            });
        }
        Ok(())
    }
}
