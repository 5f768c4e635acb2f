//! The Computer link: what a paired machine's agent (`openbot computer run`) and the node that
//! holds its connection say to each other, one JSON message per WebSocket text frame.
//!
//! The node sends a [`LinkCall`]: one Computer tool call, as a Bot made it. The agent answers
//! each with a [`LinkReply`] carrying the same `id`, in any order. The agent runs the call with
//! the same tools as this machine in `memory://` ([`super::computer_tools`]), so the
//! allowed-folders rule is checked on the machine itself and a node can never widen it.
//!
//! A call is sent once. When the connection breaks before its reply, the node cannot know
//! whether it ran: for a write that is `outcome_unknown`, never a resend.

use std::collections::HashMap;
use std::sync::Arc;

use openbot_schema::{ContentPart, ExecutionId};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Computer;
use super::connector::{CONNECTOR_TOOL, ConnectorHost};
use crate::tool::{SharedTool, ToolContext};

/// The link's protocol version, sent by the agent in [`PROTOCOL_HEADER`] when it connects.
pub const PROTOCOL: u32 = 1;

/// The header an agent names its protocol version in.
pub const PROTOCOL_HEADER: &str = "openbot-computer-protocol";

/// The header an agent says whether its terminal is on in (`on` or `off`).
pub const TERMINAL_HEADER: &str = "openbot-computer-terminal";

/// The largest message either side takes, in bytes (a file of [`super::MAX_FILE_BYTES`] as
/// JSON, with room to spare).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// One tool call from the node to the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkCall {
    /// The call's number on this connection; the reply carries it back.
    pub id: u64,
    /// The Computer tool's name (one of [`super::TOOL_NAMES`]).
    pub tool: String,
    /// Its arguments, as the model gave them.
    pub arguments: Value,
    /// The execution that made the call.
    pub execution_id: ExecutionId,
    /// The provider's ID of the call.
    pub call_id: String,
}

/// The agent's answer to one [`LinkCall`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkReply {
    /// The call's number.
    pub id: u64,
    /// What came of it.
    #[serde(flatten)]
    pub result: LinkResult,
}

/// What came of one call on the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum LinkResult {
    /// The tool answered.
    Output {
        /// Its answer, for the model.
        content: Vec<ContentPart>,
    },
    /// The tool failed; the message is for the model and holds no secret.
    Error {
        /// What went wrong.
        message: String,
        /// Whether the call may have taken effect with its answer lost.
        #[serde(default)]
        outcome_unknown: bool,
    },
}

/// The agent's side of the link: answers each call with this machine's Computer tools.
#[derive(Clone)]
pub struct LinkServer {
    tools: Arc<HashMap<String, SharedTool>>,
    connectors: Option<Arc<ConnectorHost>>,
}

impl std::fmt::Debug for LinkServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<_> = self.tools.keys().collect();
        names.sort();
        f.debug_struct("LinkServer").field("tools", &names).finish()
    }
}

impl LinkServer {
    /// Answers calls with the tools of `computer` (the terminal's with `terminal`).
    pub fn new(computer: Arc<dyn Computer>, terminal: bool) -> Self {
        let tools = super::computer_tools(computer, terminal)
            .into_iter()
            .map(|tool| (tool.definition().name.clone(), tool))
            .collect();
        Self {
            tools: Arc::new(tools),
            connectors: None,
        }
    }

    /// The same server, answering [`CONNECTOR_TOOL`] calls with `connectors`.
    pub fn with_connectors(mut self, connectors: Arc<ConnectorHost>) -> Self {
        self.connectors = Some(connectors);
        self
    }

    /// Ends what the link held: every Connector session it opened is closed (no node can
    /// close them once the link is gone). Call it when a link ends.
    pub async fn link_ended(&self) {
        if let Some(connectors) = &self.connectors {
            connectors.close_all().await;
        }
    }

    /// Runs `call` and answers it; `cancel` stops a waiting read early (the connection ended).
    pub async fn answer(&self, call: LinkCall, cancel: CancellationToken) -> LinkReply {
        if call.tool == CONNECTOR_TOOL {
            let result = match &self.connectors {
                Some(connectors) => connectors.answer(call.arguments, cancel).await,
                None => LinkResult::Error {
                    message: "this Computer offers no Connectors".into(),
                    outcome_unknown: false,
                },
            };
            return LinkReply {
                id: call.id,
                result,
            };
        }
        let result = match self.tools.get(&call.tool) {
            None => LinkResult::Error {
                message: format!("this Computer offers no tool `{}`", call.tool),
                outcome_unknown: false,
            },
            Some(tool) => {
                let context = ToolContext {
                    execution_id: call.execution_id,
                    step: 0,
                    idempotency_key: format!("{}:{}", call.execution_id, call.call_id),
                    call_id: call.call_id,
                    cancel,
                    from_code: false,
                };
                match tool.call(call.arguments, context).await {
                    Ok(output) => LinkResult::Output {
                        content: output.content,
                    },
                    Err(err) => LinkResult::Error {
                        message: err.message,
                        outcome_unknown: err.outcome_unknown,
                    },
                }
            }
        };
        LinkReply {
            id: call.id,
            result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_reads_back_as_written() {
        let reply = LinkReply {
            id: 7,
            result: LinkResult::Error {
                message: "no".into(),
                outcome_unknown: true,
            },
        };
        let text = serde_json::to_string(&reply).unwrap();
        assert_eq!(
            text,
            r#"{"id":7,"result":"error","message":"no","outcome_unknown":true}"#
        );
        assert_eq!(serde_json::from_str::<LinkReply>(&text).unwrap(), reply);
    }
}
