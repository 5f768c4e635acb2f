//! What can go wrong talking to an MCP server. Messages never hold header values.

/// An MCP failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// The endpoint cannot be used (bad URL, a refused address, stdio not allowed).
    #[error("{0}")]
    Refused(String),
    /// The server could not be reached or the session could not be opened.
    #[error("the MCP server could not be reached: {0}")]
    Unreachable(String),
    /// The server asks for authorization (HTTP 401/403).
    #[error("the MCP server asks for authorization: sign in to the connection again")]
    Unauthorized,
    /// The server answered with an MCP error.
    #[error("the MCP server refused the request: {0}")]
    Protocol(String),
    /// The session ended before the answer came: the result is lost.
    #[error("the MCP session ended before the answer came")]
    Lost,
    /// The caller cancelled the request; the server was sent `notifications/cancelled`.
    #[error("the call was cancelled")]
    Cancelled,
    /// The server has no tool of that name.
    #[error("the MCP server has no tool `{0}`")]
    UnknownTool(String),
}
