//! The MCP protocol client: opens a session to an MCP server (streamable HTTP or a stdio child
//! process), lists its tools with their schemas and annotations, and calls one tool. It runs
//! on its own (a standalone agent uses it through [`McpToolSource`]) and under the server,
//! which adds the durable call log, rights and saved declarations around it.
//!
//! It lives in core rather than in a crate of its own because `memory://` (core) answers the
//! App operations with it and it keeps to core's outbound policy: a separate crate would need
//! core for the policy while core needed it for `memory://`. The bindings get it with core and
//! build no extra crate.
//!
//! Built on the `rmcp` crate. Outbound HTTP goes through the [`OutboundPolicy`]: the client
//! follows no redirect, uses no proxy from the environment, and reaches internal addresses only
//! where the policy allows them. A stdio server is started only when the caller says stdio is
//! allowed.
//!
//! [`OutboundPolicy`]: crate::outbound::OutboundPolicy

mod error;
mod session;
mod source;

pub use error::McpError;
pub use session::{McpCaller, McpEndpoint, McpSession, McpToolResult, OpenOptions};
pub use source::{McpTool, McpToolSource, app_tool_definition};

/// The `_meta` key of a `tools/call` that carries OpenBot's request ID for the call: it stays
/// the same for every try of one call, so a server that deduplicates can tell a retry.
pub const REQUEST_ID_META: &str = "openbot/requestId";

/// The App and tool a Bot tool name names (`<app>__<tool>`), if it has that form.
pub fn split_name(name: &str) -> Option<(&str, &str)> {
    openbot_schema::split_app_tool_name(name)
}
