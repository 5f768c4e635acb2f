//! The tool registry: an organization's HTTP tools, each a declared endpoint.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// An HTTP tool to register under a name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutHttpTool {
    /// What the tool does, for the model.
    #[serde(default)]
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
    pub retry_safe: bool,
}

/// A registered HTTP tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
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
    /// When it was last set.
    pub updated_at: DateTime<Utc>,
}
