//! The in-memory tool registry: the HTTP tools and delegate tools of `PUT /v1/tools/{name}`
//! and `PUT /v1/delegates/{name}`, checked by the same rules as on a server, and the tool set a
//! Turn of a Bot gets from them: a Bot tool with a registered HTTP tool's name calls its
//! endpoint through the outbound policy, one with a delegate tool's name runs a child Turn of
//! the delegate's Bot here, and any other is a host tool.

use std::sync::Arc;

use chrono::Utc;
use openbot_schema::{
    Bot, DelegateTool as DelegateToolView, HttpTool as HttpToolView, Limits, PutDelegateTool,
    PutHttpTool,
};

use super::delegate::{ChildTurn, DelegateTool};
use super::{Inner, MemoryClient, State};
use crate::delegation::{
    check_delegate, child_limits, delegate_definition, offers_delegates, route_limits,
};
use crate::error::Error;
use crate::tool::{HttpTool, SharedTool, check_http_tool};
use crate::turn::ToolSet;

impl MemoryClient {
    /// Registers an HTTP tool under `name`, replacing an earlier one; Turns started from now
    /// on call it.
    pub(super) fn put_tool(&self, name: &str, request: PutHttpTool) -> Result<HttpToolView, Error> {
        let definition =
            check_http_tool(name, &request, &self.inner.outbound).map_err(Error::invalid_input)?;
        // Headers and body fields are where a server opens Vault references; in one process
        // there is no Vault, so a tool that needs them is refused rather than sent without.
        if !request.headers.is_empty() || request.body.as_ref().is_some_and(|b| !b.is_null()) {
            return Err(Error::invalid_input(
                "an HTTP tool's headers and body fields need an OpenBot server (they carry Vault references); memory:// sends the call's arguments only",
            ));
        }
        let tool = HttpToolView {
            name: definition.name,
            description: definition.description,
            input_schema: definition.input_schema,
            url: request.url,
            retry_safe: request.retry_safe,
            background: request.background,
            headers: Default::default(),
            body: None,
            updated_at: Utc::now(),
        };
        let mut state = self.state()?;
        state.http_tools.insert(tool.name.clone(), tool.clone());
        state.tool_sets.clear();
        Ok(tool)
    }

    /// The registered HTTP tools, by name.
    pub(super) fn tools(&self) -> Result<Vec<HttpToolView>, Error> {
        Ok(self.state()?.http_tools.values().cloned().collect())
    }

    /// Removes an HTTP tool; Bot tools of that name are host tools for later Turns.
    pub(super) fn delete_tool(&self, name: &str) -> Result<(), Error> {
        let mut state = self.state()?;
        if state.http_tools.remove(name).is_none() {
            return Err(Error::not_found("tool", name));
        }
        state.tool_sets.clear();
        Ok(())
    }

    /// Registers a delegate tool under `name` that hands tasks to an existing Bot.
    pub(super) fn put_delegate(
        &self,
        name: &str,
        request: PutDelegateTool,
    ) -> Result<DelegateToolView, Error> {
        check_delegate(name, &request).map_err(Error::invalid_input)?;
        let mut state = self.state()?;
        if !state.bots.contains_key(&request.bot_id) {
            return Err(Error::not_found("bot", request.bot_id));
        }
        let tool = DelegateToolView {
            name: name.to_string(),
            description: request.description,
            bot_id: request.bot_id,
            limits: request.limits,
            updated_at: Utc::now(),
        };
        state.delegates.insert(tool.name.clone(), tool.clone());
        state.tool_sets.clear();
        Ok(tool)
    }

    /// The registered delegate tools, by name.
    pub(super) fn delegates(&self) -> Result<Vec<DelegateToolView>, Error> {
        Ok(self.state()?.delegates.values().cloned().collect())
    }

    /// Removes a delegate tool.
    pub(super) fn delete_delegate(&self, name: &str) -> Result<(), Error> {
        let mut state = self.state()?;
        if state.delegates.remove(name).is_none() {
            return Err(Error::not_found("delegate", name));
        }
        state.tool_sets.clear();
        Ok(())
    }
}

impl State {
    /// The tools of a Turn of `bot` that is `depth` delegations below its Chat's Turn and has
    /// `limits`: the same routing as a server's (registry first; delegates to
    /// [`crate::delegation::MAX_DELEGATION_DEPTH`] levels, deeper ones not offered).
    pub(super) fn resolve_tools(
        &mut self,
        bot: &Bot,
        depth: usize,
        limits: Limits,
        inner: &Arc<Inner>,
    ) -> Result<ToolSet, Error> {
        let mut set = ToolSet::new();
        for definition in &bot.spec.tools {
            if let Some(tool) = self.http_tools.get(&definition.name) {
                let registered = openbot_schema::ToolDefinition {
                    name: tool.name.clone(),
                    description: tool.description.clone(),
                    input_schema: tool.input_schema.clone(),
                };
                let handler = HttpTool::new(
                    registered.clone(),
                    tool.url.clone(),
                    inner.tool_client.clone(),
                    Arc::clone(&inner.outbound),
                )
                // Nothing here outlives a lost answer: the tool resends only when retry-safe.
                .resend_lost_answers(tool.retry_safe);
                set.insert(registered, Some(Arc::new(handler)))
                    .map_err(|e| Error::invalid_input(e.to_string()))?;
                continue;
            }
            let Some(delegate) = self.delegates.get(&definition.name).cloned() else {
                // A handler of this process first; else a tool of this machine as a Computer
                // or of a discovered App, with its own definition; else a host tool.
                // Computer tool names are the attached Computer's: one it does not offer (no
                // Computer, or no terminal) is not offered to the model.
                if crate::computer::TOOL_NAMES.contains(&definition.name.as_str())
                    && !inner.computer_tools.contains_key(&definition.name)
                {
                    continue;
                }
                let own = |tool: &SharedTool| (tool.definition().clone(), Some(Arc::clone(tool)));
                let (definition, handler) = match inner.handlers.get(&definition.name) {
                    Some(handler) => (definition.clone(), Some(Arc::clone(handler))),
                    None => match inner.computer_tools.get(&definition.name) {
                        Some(tool) => own(tool),
                        None => match self.apps.tool(&definition.name) {
                            Some(tool) => own(&tool),
                            None => (definition.clone(), None),
                        },
                    },
                };
                set.insert(definition, handler)
                    .map_err(|e| Error::invalid_input(e.to_string()))?;
                continue;
            };
            if !offers_delegates(depth) {
                // Deeper delegation is not offered: the chain ends here.
                continue;
            }
            let target = self.bots.get(&delegate.bot_id).cloned().ok_or_else(|| {
                Error::invalid_input(format!(
                    "the delegate tool `{}` names a Bot that no longer exists",
                    delegate.name
                ))
            })?;
            let limits = child_limits(route_limits(target.spec.limits, delegate.limits), limits);
            let tools = Arc::new(self.resolve_tools(&target, depth + 1, limits, inner)?);
            let tool = DelegateTool::new(
                delegate_definition(&delegate.name, &delegate.description, &target.spec.name),
                ChildTurn {
                    bot_name: target.spec.name.clone(),
                    instructions: target.spec.instructions.clone(),
                    model: self.model(&target.spec.model)?,
                    tools,
                    limits,
                },
                Arc::downgrade(inner),
            );
            let definition = crate::tool::Tool::definition(&tool).clone();
            set.insert(definition, Some(Arc::new(tool)))
                .map_err(|e| Error::invalid_input(e.to_string()))?;
        }
        Ok(set)
    }
}
