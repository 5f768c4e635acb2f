//! Connectors over the machines' links: how a Connector App reaches the local MCP server a
//! paired Computer publishes (`openbot computer run --connector NAME=...`). Each request is a
//! link call of the tool [`CONNECTOR_TOOL`], routed to the node holding the link like any
//! Computer call; the machine's agent runs it with its own MCP client.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_core::computer::connector::{CONNECTOR_TOOL, ConnectorAnswer, ConnectorRequest};
use openbot_core::computer::link::LinkResult;
use openbot_core::mcp::{McpError, McpToolResult};
use openbot_schema::{AppToolDeclaration, ExecutionId};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::link::{CALL_DEADLINE, LinkError, Links, Request};
use super::store::ComputerStore;
use crate::apps::{AppError, ConnectorReach};

/// Connector Apps' reach: the node's links and the Computers' store.
pub struct LinkedConnectors {
    links: Arc<Links>,
    store: Arc<dyn ComputerStore>,
}

impl LinkedConnectors {
    /// Reaches Connectors through `links`, checking Computers in `store`.
    pub fn new(links: Arc<Links>, store: Arc<dyn ComputerStore>) -> Self {
        Self { links, store }
    }

    /// Sends `request` to the Computer: its answer as the link gave it.
    async fn raw(
        &self,
        computer: Uuid,
        request: ConnectorRequest,
        cancel: Option<&CancellationToken>,
    ) -> Result<Result<LinkResult, LinkError>, McpError> {
        let arguments = serde_json::to_value(&request)
            .map_err(|_| McpError::Refused("the Connector request could not be written".into()))?;
        let request = Request {
            tool: CONNECTOR_TOOL.into(),
            arguments,
            // A Connector request is no Turn's tool call as the link logs it: its own ID.
            execution_id: ExecutionId::new(),
            call_id: Uuid::now_v7().to_string(),
        };
        let sent = self.links.call(computer, request, CALL_DEADLINE);
        Ok(match cancel {
            Some(cancel) => tokio::select! {
                answer = sent => answer,
                () = cancel.cancelled() => return Err(McpError::Cancelled),
            },
            None => sent.await,
        })
    }

    /// Sends `request` to the Computer and reads its answer.
    async fn send(
        &self,
        computer: Uuid,
        request: ConnectorRequest,
        cancel: Option<&CancellationToken>,
    ) -> Result<ConnectorAnswer, McpError> {
        read(self.raw(computer, request, cancel).await?)
    }
}

/// A Connector's answer as the link carried it.
fn read(answer: Result<LinkResult, LinkError>) -> Result<ConnectorAnswer, McpError> {
    match answer {
        Ok(LinkResult::Output { content }) => content
            .first()
            .and_then(|part| part.as_text())
            .and_then(|text| serde_json::from_str(text).ok())
            .ok_or_else(|| McpError::Protocol("the Computer's answer is not readable".into())),
        Ok(LinkResult::Error {
            message,
            outcome_unknown,
        }) => Err(if outcome_unknown {
            McpError::Lost
        } else {
            McpError::Protocol(message)
        }),
        Err(err) if err.may_have_run() => Err(McpError::Lost),
        Err(err @ LinkError::NotConnected) => Err(McpError::Unreachable(err.to_string())),
        Err(err) => {
            tracing::warn!(error = %err, "a Connector request found no route");
            Err(McpError::Unreachable(
                "the Computer's connection could not be found".into(),
            ))
        }
    }
}

fn unexpected() -> McpError {
    McpError::Protocol("the Computer answered something else than was asked".into())
}

#[async_trait]
impl ConnectorReach for LinkedConnectors {
    async fn check_publish(
        &self,
        organization: Uuid,
        member: Uuid,
        computer: Uuid,
    ) -> Result<(), AppError> {
        // The member's own or the organization's: another member's reads as not there.
        match self.store.computer(organization, member, computer).await? {
            Some(_) => Ok(()),
            None => Err(AppError::NotFound("computer")),
        }
    }

    async fn tools(
        &self,
        computer: Uuid,
        connector: &str,
    ) -> Result<Vec<AppToolDeclaration>, McpError> {
        let request = ConnectorRequest::Tools {
            connector: connector.into(),
        };
        match self.send(computer, request, None).await? {
            ConnectorAnswer::Tools { tools } => Ok(tools),
            _ => Err(unexpected()),
        }
    }

    async fn open(&self, computer: Uuid, connector: &str, session: &str) -> Result<(), McpError> {
        let request = ConnectorRequest::Open {
            connector: connector.into(),
            session: session.into(),
        };
        match self.send(computer, request, None).await? {
            ConnectorAnswer::Done { .. } => Ok(()),
            _ => Err(unexpected()),
        }
    }

    async fn call(
        &self,
        computer: Uuid,
        session: &str,
        tool: &str,
        arguments: Value,
        request_id: &str,
        cancel: &CancellationToken,
    ) -> Result<McpToolResult, McpError> {
        let request = ConnectorRequest::Call {
            session: session.into(),
            tool: tool.into(),
            arguments,
            request_id: request_id.into(),
        };
        match self.send(computer, request, Some(cancel)).await? {
            ConnectorAnswer::Called { content, is_error } => {
                Ok(McpToolResult { content, is_error })
            }
            _ => Err(unexpected()),
        }
    }

    async fn close(&self, computer: Uuid, session: &str) -> Result<(), McpError> {
        let request = ConnectorRequest::Close {
            session: session.into(),
        };
        match self.raw(computer, request, None).await? {
            // No node holds a link: the machine closes every session of a link when the
            // link ends, so nothing of it is open.
            Err(LinkError::NotConnected) => Ok(()),
            answer => match read(answer)? {
                ConnectorAnswer::Done { .. } => Ok(()),
                _ => Err(unexpected()),
            },
        }
    }
}
