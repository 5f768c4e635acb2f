//! Apps: MCP servers an organization offers to its Bots as tool sources, the Connections it
//! opens to them, and the tool declarations discovery reads.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

/// How an App's MCP server is reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum AppTransport {
    /// MCP's streamable HTTP transport at `url` (for example `https://mcp.example.com/mcp`).
    Http {
        /// The endpoint, `http://` or `https://`.
        #[schema(pattern = "^https?://.+")]
        url: String,
    },
    /// A child process speaking MCP on its standard input and output. Only on a deployment
    /// whose operator enabled stdio Apps (`openbot serve --stdio-apps`).
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        #[serde(default)]
        #[cfg_attr(feature = "uniffi", uniffi(default))]
        args: Vec<String>,
    },
    /// A Connector: a local MCP server a paired Computer publishes (its agent started with
    /// `--connector NAME=...`), reached over the Computer's link. Registered by an admin
    /// who may use the Computer (a shared Computer, or the admin's own).
    Connector {
        /// The Computer.
        computer_id: Uuid,
        /// The Connector's name on it.
        connector: String,
    },
}

/// An App to register.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct NewApp {
    /// Its name, unique in the organization: 1-40 of `a-z 0-9 -`, starting with a letter.
    /// A Bot names its tools as `<app name>__<tool name>`.
    #[schema(pattern = "^[a-z][a-z0-9-]{0,39}$")]
    pub name: String,
    /// Where its MCP server is.
    pub transport: AppTransport,
}

/// A registered App.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct App {
    /// Its ID.
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// Where its MCP server is.
    pub transport: AppTransport,
    /// When it was registered.
    pub created_at: DateTime<Utc>,
}

/// How a Connection authenticates to its App.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum AppAuthKind {
    /// No credentials.
    None,
    /// Header values given by a person, sealed at rest and sent only to the App.
    Manual,
    /// OAuth 2.1 tokens from the App's authorization server.
    Oauth,
}

/// Whether a Connection can be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum AppConnectionStatus {
    /// Calls may use it.
    Ready,
    /// It needs a person to sign in (again) before calls may use it.
    NeedsSignIn,
    /// It was removed; saved calls that name it fail with a clear result.
    Removed,
}

/// A Connection to open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct NewAppConnection {
    /// How it authenticates.
    pub auth: AppAuthKind,
    /// For `manual`: the HTTP headers to send to the App (for example `Authorization`), at
    /// most 20. Sealed at rest; never shown again.
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub headers: HashMap<String, String>,
}

/// A Connection: one organization's link to an App.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct AppConnection {
    /// Its ID.
    pub id: Uuid,
    /// The App.
    pub app_id: Uuid,
    /// How it authenticates.
    pub auth: AppAuthKind,
    /// Whether calls may use it.
    pub status: AppConnectionStatus,
    /// Grows by one with each change of its credentials or status; a saved call names the
    /// revision it was planned with and fails when the Connection changed since.
    pub revision: u64,
    /// The names of the headers it sends (never their values).
    pub header_names: Vec<String>,
    /// How many tools the last discovery found, if it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub tool_count: Option<u32>,
    /// When the last discovery ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub discovered_at: Option<DateTime<Utc>>,
    /// When it was opened.
    pub created_at: DateTime<Utc>,
}

/// What an MCP server says about a tool's behaviour. Hints, not guarantees: OpenBot sends a
/// call whose result was lost again only when the tool says it is read-only or idempotent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(rename_all = "camelCase")]
pub struct AppToolAnnotations {
    /// A title for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub title: Option<String>,
    /// The tool does not change its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub read_only_hint: Option<bool>,
    /// The tool may destroy or overwrite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub destructive_hint: Option<bool>,
    /// Calling it again with the same arguments has no further effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub idempotent_hint: Option<bool>,
    /// The tool reaches beyond the server (the open world).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub open_world_hint: Option<bool>,
}

impl AppToolAnnotations {
    /// Whether a call whose result was lost may be sent again: read-only or idempotent.
    pub fn retry_safe(&self) -> bool {
        self.read_only_hint == Some(true) || self.idempotent_hint == Some(true)
    }
}

/// One tool of an App as its MCP server declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct AppToolDeclaration {
    /// The tool's name on the server.
    pub name: String,
    /// A title for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub title: Option<String>,
    /// What it does.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub description: String,
    /// The JSON Schema of its arguments.
    #[schema(value_type = Object)]
    pub input_schema: Value,
    /// The JSON Schema of its structured result, if declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    #[schema(value_type = Option<Object>)]
    pub output_schema: Option<Value>,
    /// Its behaviour hints.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub annotations: AppToolAnnotations,
}

/// What a discovery found: every tool of the Connection's App, with schemas and annotations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct AppDiscovery {
    /// The Connection.
    pub connection_id: Uuid,
    /// The Connection's revision it ran with.
    pub revision: u64,
    /// The tools.
    pub tools: Vec<AppToolDeclaration>,
    /// When it ran.
    pub discovered_at: DateTime<Utc>,
}

/// The separator of a Bot tool name that names an App tool: `<app>__<tool>`.
pub const APP_TOOL_SEPARATOR: &str = "__";

/// The App and tool a Bot tool name names (`<app>__<tool>`), if it has that form.
pub fn split_app_tool_name(name: &str) -> Option<(&str, &str)> {
    let (app, tool) = name.split_once(APP_TOOL_SEPARATOR)?;
    (!app.is_empty() && !tool.is_empty()).then_some((app, tool))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bot_tool_name_splits_at_the_first_separator() {
        assert_eq!(
            split_app_tool_name("time__get_time"),
            Some(("time", "get_time"))
        );
        assert_eq!(split_app_tool_name("a__b__c"), Some(("a", "b__c")));
        assert_eq!(split_app_tool_name("plain"), None);
        assert_eq!(split_app_tool_name("__x"), None);
    }

    #[test]
    fn only_read_only_or_idempotent_tools_are_retry_safe() {
        let mut hints = AppToolAnnotations::default();
        assert!(!hints.retry_safe());
        hints.destructive_hint = Some(false);
        assert!(!hints.retry_safe());
        hints.idempotent_hint = Some(true);
        assert!(hints.retry_safe());
        let read = AppToolAnnotations {
            read_only_hint: Some(true),
            ..Default::default()
        };
        assert!(read.retry_safe());
    }
}
