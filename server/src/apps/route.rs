//! The App tools a Bot names (`<app>__<tool>`), routed when input is submitted.

use std::sync::Arc;

use async_trait::async_trait;

use super::AppStore;
use super::tool::AppRoute;
use crate::chats::{ChatError, RouteRequest, Slot, ToolSource};
use crate::turns::{SavedTool, ToolRoute};

/// Claims each Bot tool named for an App of the organization (registered first: an App's
/// name wins over a registered tool of the same name).
pub struct AppTools(pub Arc<dyn AppStore>);

#[async_trait]
impl ToolSource for AppTools {
    async fn route(&self, request: &RouteRequest<'_>, slots: &mut [Slot]) -> Result<(), ChatError> {
        let organization = request.caller.member.organization_id;
        for slot in slots.iter_mut() {
            let Slot::Open(definition) = slot else {
                continue;
            };
            if let Some(route) = self.app_route(organization, &definition.name).await? {
                *slot = Slot::Routed(SavedTool {
                    definition: route.definition(),
                    route: ToolRoute::App(Box::new(route)),
                });
            }
        }
        Ok(())
    }
}

impl AppTools {
    /// The saved route of a Bot tool named `<app>__<tool>`: the App's newest ready
    /// Connection, at its current revision, with the tool's declaration from its last
    /// discovery. `None` when the name names no App of the organization (a host tool).
    async fn app_route(
        &self,
        organization: uuid::Uuid,
        name: &str,
    ) -> Result<Option<AppRoute>, ChatError> {
        let apps = &self.0;
        let Some((app_name, tool)) = openbot_schema::split_app_tool_name(name) else {
            return Ok(None);
        };
        let Some(app) = apps.app_named(organization, app_name).await? else {
            return Ok(None);
        };
        let connection = apps
            .ready_connection(organization, app.id)
            .await?
            .ok_or_else(|| {
                ChatError::Invalid(format!(
                    "the Bot's tool `{name}` is of the App `{app_name}`, which has no ready connection"
                ))
            })?;
        let declaration = connection
            .tools
            .as_ref()
            .and_then(|tools| tools.iter().find(|t| t.name == tool))
            .cloned()
            .ok_or_else(|| {
                ChatError::Invalid(format!(
                    "the App `{app_name}` has no tool `{tool}` in its last discovery: run discovery on its connection"
                ))
            })?;
        let route = AppRoute {
            organization_id: organization,
            app_id: app.id,
            app_name: app.name,
            connection_id: connection.id,
            revision: connection.revision,
            declaration,
        };
        // A declaration a model cannot take (its schema, its name) stops the send, not the Turn.
        openbot_core::tool::CheckedSchema::new(route.definition()).map_err(|e| {
            ChatError::Invalid(format!("the App tool `{name}` cannot be offered: {e}"))
        })?;
        Ok(Some(route))
    }
}
