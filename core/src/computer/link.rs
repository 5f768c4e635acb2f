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

use std::collections::HashSet;
use std::time::Duration;

use openbot_schema::{ContentPart, ExecutionId, OutputChunk, TerminalSession};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{Notify, mpsc};
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

/// Output of one terminal session that the agent sends its node unasked, so that the server
/// keeps it: the session, the chunks after the last batch, and whether it ended. The first
/// batch of a session, on every link, carries no chunks: it says the session exists. After
/// a new link, a session's kept output is sent again from its start; the node keeps each
/// chunk once (by its `seq`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputBatch {
    /// The session.
    pub session: TerminalSession,
    /// The chunks, in order.
    pub chunks: Vec<OutputChunk>,
    /// Whether its program ended (or the session was closed); nothing follows.
    pub exited: bool,
    /// Its exit code, once it ended with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// What an agent sends its node: an answer to a call, or terminal output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AgentMessage {
    /// Terminal output to keep.
    Output {
        /// The batch.
        output: OutputBatch,
    },
    /// The answer to a call.
    Reply(LinkReply),
}

/// How often the agent looks for sessions it does not forward yet (a new session is also
/// seen at once when a call started it).
const WATCH: Duration = Duration::from_millis(500);

/// The agent's side of the link: answers each call with this machine's Computer tools.
#[derive(Clone)]
pub struct LinkServer {
    tools: Arc<HashMap<String, SharedTool>>,
    connectors: Option<Arc<ConnectorHost>>,
    computer: Arc<dyn Computer>,
    started: Arc<Notify>,
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
        let tools = super::computer_tools(Arc::clone(&computer), terminal)
            .into_iter()
            .map(|tool| (tool.definition().name.clone(), tool))
            .collect();
        Self {
            tools: Arc::new(tools),
            connectors: None,
            computer,
            started: Arc::new(Notify::new()),
        }
    }

    /// Sends the output of every terminal session to `out` until `ended` (the link ended):
    /// each session's kept output from its start, then each new chunk as it comes, and its
    /// end. Run it once per link.
    pub async fn forward_output(&self, out: mpsc::Sender<OutputBatch>, ended: CancellationToken) {
        let mut watching = HashSet::new();
        loop {
            if let Ok(sessions) = self.computer.terminals().await {
                for session in sessions {
                    if watching.insert(session.id.clone()) {
                        let computer = Arc::clone(&self.computer);
                        let (out, ended) = (out.clone(), ended.clone());
                        tokio::spawn(async move {
                            forward_session(computer, session, out, ended).await;
                        });
                    }
                }
            }
            tokio::select! {
                () = ended.cancelled() => return,
                () = self.started.notified() => {}
                () = tokio::time::sleep(WATCH) => {}
            }
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
                let started = call.tool == "computer_terminal_start";
                match tool.call(call.arguments, context).await {
                    Ok(output) => {
                        if started {
                            // Its output is forwarded from now, not from the next look.
                            self.started.notify_one();
                        }
                        LinkResult::Output {
                            content: output.content,
                        }
                    }
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

/// Forwards one session's output until it ends, is closed, or the link ends.
async fn forward_session(
    computer: Arc<dyn Computer>,
    session: TerminalSession,
    out: mpsc::Sender<OutputBatch>,
    ended: CancellationToken,
) {
    let batch = |chunks: Vec<OutputChunk>, exited: bool, exit_code: Option<i32>| OutputBatch {
        session: session.clone(),
        chunks,
        exited,
        exit_code,
    };
    // First: the session exists, before any output.
    if out.send(batch(Vec::new(), false, None)).await.is_err() {
        return;
    }
    let mut cursor = 0;
    loop {
        let read = computer
            .read_terminal(&session.id, cursor, super::MAX_READ_WAIT, ended.clone())
            .await;
        if ended.is_cancelled() {
            return;
        }
        let next = match read {
            Ok(output) => {
                cursor = output.next_cursor;
                if output.chunks.is_empty() && !output.exited {
                    continue;
                }
                batch(output.chunks, output.exited, output.exit_code)
            }
            // Closed: its program was stopped.
            Err(_) => batch(Vec::new(), true, None),
        };
        let last = next.exited;
        if out.send(next).await.is_err() || last {
            return;
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
