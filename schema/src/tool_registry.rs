//! The tool registry: an organization's HTTP tools, each a declared endpoint.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// An HTTP tool to register under a name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct PutHttpTool {
    /// What the tool does, for the model.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub description: String,
    /// The JSON Schema its arguments must match.
    #[schema(value_type = Object)]
    pub input_schema: Value,
    /// The endpoint: each call's arguments are POSTed here as JSON, with an
    /// `Idempotency-Key` header that stays the same for every try of one call.
    #[schema(pattern = "^https?://.+")]
    pub url: String,
    /// Whether the endpoint deduplicates by `Idempotency-Key`, so a call whose answer was lost
    /// may be sent again. Without it such a call is never repeated.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub retry_safe: bool,
    /// Whether each call runs detached in its own execution: the Turn goes on at once, the
    /// call may outlive it, and its result reaches the Chat as a notice.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub background: bool,
    /// Headers sent with each call, name to value. A value may hold Vault references,
    /// `{{vault.<item-id>.<field>}}`, replaced by the field's value only as the call is sent
    /// (docs/vaults.md); put secrets there, never in a plain value.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub headers: HashMap<String, String>,
    /// Fields added to each call's JSON body next to its arguments (a field here wins over an
    /// argument of the same name). Strings in it may hold Vault references too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub body: Option<Value>,
}

/// A registered HTTP tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct HttpTool {
    /// The name Bots use for it.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The JSON Schema of its arguments.
    #[schema(value_type = Object)]
    pub input_schema: Value,
    /// The endpoint.
    pub url: String,
    /// Whether the endpoint deduplicates by `Idempotency-Key`.
    pub retry_safe: bool,
    /// Whether each call runs detached, in its own execution.
    pub background: bool,
    /// The headers sent with each call (Vault references as written, never their values).
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub headers: HashMap<String, String>,
    /// The fields added to each call's body (Vault references as written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub body: Option<Value>,
    /// When it was last set.
    pub updated_at: DateTime<Utc>,
}

/// A delegate tool to register under a name: calling it starts a Turn of another Bot as a
/// child execution, with a private history of its own, whose final answer comes back to the
/// calling Chat as a notice. Its arguments are `{"task": "..."}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct PutDelegateTool {
    /// What the delegate does, for the model.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub description: String,
    /// The Bot that does the task. The caller of each Turn must be allowed to use it.
    pub bot_id: crate::ids::BotId,
    /// Limits added to the child's: a child keeps every limit of its source and of its Bot,
    /// and these may only narrow them.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub limits: crate::bot::Limits,
}

/// A registered delegate tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct DelegateTool {
    /// The name Bots use for it.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The Bot that does the task.
    pub bot_id: crate::ids::BotId,
    /// Limits added to each child.
    pub limits: crate::bot::Limits,
    /// When it was last set.
    pub updated_at: DateTime<Utc>,
}
