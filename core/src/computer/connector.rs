//! Connectors: local MCP servers a paired machine publishes to its organization, reached over
//! the machine's link (docs/computers.md#connectors).
//!
//! The machine's owner names each Connector when starting the agent (`openbot computer run
//! --connector notes='python3 notes.py'`): a stdio server the agent starts, or a streamable
//! HTTP endpoint on the machine (`--connector wiki=http://127.0.0.1:8080/mcp`). A node cannot
//! add one or change what it runs: it only names a Connector the machine offers.
//!
//! The node speaks to a Connector in [`ConnectorRequest`]s carried as link calls of the tool
//! [`CONNECTOR_TOOL`]: list its tools, open a session (named by the node, so that a close can
//! reach it even when the open's answer was lost), call a tool on it, close it. Every session
//! of a link is closed when the link ends, so a session never outlives the connection that
//! could close it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use openbot_schema::{AppToolDeclaration, AppTransport, ContentPart};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use super::link::LinkResult;
use crate::mcp::{McpEndpoint, McpError, McpSession, OpenOptions};

/// The link tool name a node sends Connector requests under.
pub const CONNECTOR_TOOL: &str = "connector";

/// The most Connector sessions a machine keeps open at once.
pub const MAX_SESSIONS: usize = 16;

/// One request from a node to a Connector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ConnectorRequest {
    /// Lists the Connector's tools (a session opened and closed for it).
    Tools {
        /// The Connector's name.
        connector: String,
    },
    /// Opens a session named `session` on the Connector.
    Open {
        /// The Connector's name.
        connector: String,
        /// The session's name, chosen by the node.
        session: String,
    },
    /// Calls one tool on an open session.
    Call {
        /// The session.
        session: String,
        /// The tool.
        tool: String,
        /// Its arguments.
        arguments: Value,
        /// The call's request ID, the same for every try of one call.
        request_id: String,
    },
    /// Closes a session; closing one the machine does not have (any more) is a success.
    Close {
        /// The session.
        session: String,
    },
}

/// What a Connector answered, as the link's output text carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ConnectorAnswer {
    /// The tools ([`ConnectorRequest::Tools`]).
    Tools {
        /// Each tool with its schemas and annotations.
        tools: Vec<AppToolDeclaration>,
    },
    /// A tool's answer ([`ConnectorRequest::Call`]).
    Called {
        /// What the tool answered.
        content: Vec<ContentPart>,
        /// Whether the tool reported an error.
        is_error: bool,
    },
    /// A session opened or closed.
    Done {
        /// The session.
        session: String,
    },
}

/// A Connector as the machine's owner named it: `NAME=URL` for a streamable HTTP endpoint,
/// or `NAME=COMMAND ARG...` for a stdio server (arguments split on white space).
#[derive(Debug, Clone)]
pub struct ConnectorSpec {
    /// Its name, as an App of the organization names it.
    pub name: String,
    /// Where it is.
    pub endpoint: McpEndpoint,
}

impl std::str::FromStr for ConnectorSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (name, target) = text
            .split_once('=')
            .ok_or_else(|| format!("`{text}` is not NAME=URL or NAME=COMMAND"))?;
        let name = name.trim();
        let valid = (1..=40).contains(&name.len())
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !valid {
            return Err(format!(
                "the Connector name `{name}` must be 1-40 of a-z 0-9 -, starting with a letter"
            ));
        }
        let target = target.trim();
        let transport = if target.starts_with("http://") || target.starts_with("https://") {
            AppTransport::Http {
                url: target.to_string(),
            }
        } else {
            let mut words = target.split_whitespace().map(str::to_string);
            let command = words
                .next()
                .ok_or_else(|| format!("the Connector `{name}` names no command or URL"))?;
            AppTransport::Stdio {
                command,
                args: words.collect(),
            }
        };
        Ok(Self {
            name: name.to_string(),
            endpoint: McpEndpoint {
                transport,
                headers: BTreeMap::new(),
            },
        })
    }
}

/// The machine's side of its Connectors: answers [`ConnectorRequest`]s with MCP sessions to
/// the local servers its owner named.
pub struct ConnectorHost {
    connectors: BTreeMap<String, McpEndpoint>,
    options: OpenOptions,
    sessions: Mutex<HashMap<String, McpSession>>,
}

impl std::fmt::Debug for ConnectorHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectorHost")
            .field("connectors", &self.connectors.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

fn error(message: impl Into<String>) -> LinkResult {
    LinkResult::Error {
        message: message.into(),
        outcome_unknown: false,
    }
}

fn answer(answer: &ConnectorAnswer) -> LinkResult {
    match serde_json::to_string(answer) {
        Ok(text) => LinkResult::Output {
            content: vec![ContentPart::text(text)],
        },
        Err(_) => error("the Connector's answer could not be written"),
    }
}

impl ConnectorHost {
    /// A host of `connectors` (names unique), opening their sessions with `options`.
    pub fn new(connectors: Vec<ConnectorSpec>, options: OpenOptions) -> Result<Self, String> {
        let mut named = BTreeMap::new();
        for spec in connectors {
            if named.insert(spec.name.clone(), spec.endpoint).is_some() {
                return Err(format!("the Connector `{}` is named twice", spec.name));
            }
        }
        Ok(Self {
            connectors: named,
            options,
            sessions: Mutex::new(HashMap::new()),
        })
    }

    /// The Connectors' names.
    pub fn names(&self) -> Vec<String> {
        self.connectors.keys().cloned().collect()
    }

    fn endpoint(&self, connector: &str) -> Result<&McpEndpoint, LinkResult> {
        self.connectors.get(connector).ok_or_else(|| {
            error(format!(
                "this Computer offers no Connector `{connector}` (its agent was started without it)"
            ))
        })
    }

    /// Runs one request; `cancel` (the link ended) abandons a running tool call.
    pub async fn answer(&self, arguments: Value, cancel: CancellationToken) -> LinkResult {
        let request: ConnectorRequest = match serde_json::from_value(arguments) {
            Ok(request) => request,
            Err(_) => return error("not a Connector request"),
        };
        match request {
            ConnectorRequest::Tools { connector } => {
                let endpoint = match self.endpoint(&connector) {
                    Ok(endpoint) => endpoint,
                    Err(refused) => return refused,
                };
                let session = match McpSession::open(endpoint, &self.options).await {
                    Ok(session) => session,
                    Err(err) => return error(err.to_string()),
                };
                let listed = session.list_tools().await;
                // A listing keeps no session: a failed close changes nothing it read.
                let _ = session.close().await;
                match listed {
                    Ok(tools) => answer(&ConnectorAnswer::Tools { tools }),
                    Err(err) => error(err.to_string()),
                }
            }
            ConnectorRequest::Open { connector, session } => {
                let endpoint = match self.endpoint(&connector) {
                    Ok(endpoint) => endpoint.clone(),
                    Err(refused) => return refused,
                };
                {
                    let sessions = self.sessions.lock().await;
                    if sessions.contains_key(&session) {
                        return error(format!("the session `{session}` is open already"));
                    }
                    if sessions.len() >= MAX_SESSIONS {
                        return error(format!(
                            "this Computer has {MAX_SESSIONS} Connector sessions open; try again when one closes"
                        ));
                    }
                }
                let opened = match McpSession::open(&endpoint, &self.options).await {
                    Ok(opened) => opened,
                    Err(err) => return error(err.to_string()),
                };
                self.sessions.lock().await.insert(session.clone(), opened);
                answer(&ConnectorAnswer::Done { session })
            }
            ConnectorRequest::Call {
                session,
                tool,
                arguments,
                request_id,
            } => {
                let caller = match self.sessions.lock().await.get(&session) {
                    Some(open) => open.caller(),
                    None => return error(format!("no Connector session `{session}` is open")),
                };
                match caller
                    .call_tool(&tool, arguments, &request_id, &cancel)
                    .await
                {
                    Ok(result) => answer(&ConnectorAnswer::Called {
                        content: result.content,
                        is_error: result.is_error,
                    }),
                    // Sent, and no answer: it may have run.
                    Err(err @ (McpError::Lost | McpError::Cancelled)) => LinkResult::Error {
                        message: format!("the Connector's session ended before its answer: {err}"),
                        outcome_unknown: true,
                    },
                    Err(err) => error(err.to_string()),
                }
            }
            ConnectorRequest::Close { session } => {
                let open = self.sessions.lock().await.remove(&session);
                match open {
                    // Never opened, or closed already (the link that opened it ended).
                    None => answer(&ConnectorAnswer::Done { session }),
                    Some(open) => match open.close().await {
                        Ok(()) => answer(&ConnectorAnswer::Done { session }),
                        Err(err) => error(format!("the Connector's session did not close: {err}")),
                    },
                }
            }
        }
    }

    /// Closes every open session: the link that could close them ended.
    pub async fn close_all(&self) {
        let sessions: Vec<McpSession> =
            self.sessions.lock().await.drain().map(|(_, s)| s).collect();
        for session in sessions {
            let _ = session.close().await;
        }
    }
}

/// A shared host, as a link server holds it.
pub type SharedConnectors = Arc<ConnectorHost>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connector_is_a_url_or_a_command_with_its_arguments() {
        let http: ConnectorSpec = "wiki=http://127.0.0.1:8080/mcp".parse().unwrap();
        assert_eq!(http.name, "wiki");
        assert_eq!(
            http.endpoint.transport,
            AppTransport::Http {
                url: "http://127.0.0.1:8080/mcp".into()
            }
        );
        let stdio: ConnectorSpec = "notes=python3 notes.py --quiet".parse().unwrap();
        assert_eq!(
            stdio.endpoint.transport,
            AppTransport::Stdio {
                command: "python3".into(),
                args: vec!["notes.py".into(), "--quiet".into()]
            }
        );
    }

    #[test]
    fn a_connector_without_a_valid_name_or_target_is_refused() {
        for bad in ["notes", "Notes=x", "=x", "notes=", "9a=x", "a_b=x"] {
            assert!(bad.parse::<ConnectorSpec>().is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_request_for_a_connector_the_machine_does_not_offer_is_refused() {
        let host = ConnectorHost::new(Vec::new(), OpenOptions::standalone()).unwrap();
        let request = serde_json::to_value(ConnectorRequest::Tools {
            connector: "notes".into(),
        })
        .unwrap();
        let LinkResult::Error {
            message,
            outcome_unknown,
        } = host.answer(request, CancellationToken::new()).await
        else {
            panic!("an unknown Connector answered");
        };
        assert!(message.contains("no Connector `notes`"), "{message}");
        assert!(!outcome_unknown);
    }

    #[tokio::test]
    async fn closing_a_session_the_machine_does_not_have_is_a_success() {
        let host = ConnectorHost::new(Vec::new(), OpenOptions::standalone()).unwrap();
        let request = serde_json::to_value(ConnectorRequest::Close {
            session: "s1".into(),
        })
        .unwrap();
        let LinkResult::Output { content } = host.answer(request, CancellationToken::new()).await
        else {
            panic!("the close failed");
        };
        let text = content[0].as_text().unwrap();
        assert_eq!(
            serde_json::from_str::<ConnectorAnswer>(text).unwrap(),
            ConnectorAnswer::Done {
                session: "s1".into()
            }
        );
    }
}
