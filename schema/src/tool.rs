//! Tool definitions, the calls a model makes, and their results.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::message::ContentPart;

/// A tool a model may call: its name, what it does, and the JSON Schema of its input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct ToolDefinition {
    /// The name the model calls it by: 1-64 of `a-z A-Z 0-9 _ -`.
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub description: String,
    /// The JSON Schema its arguments must match.
    #[schema(value_type = Object)]
    pub input_schema: Value,
}

impl ToolDefinition {
    /// Whether `name` is a tool name every provider accepts.
    pub fn is_valid_name(name: &str) -> bool {
        (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }
}

/// One tool call asked for by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ToolCall {
    /// The provider's ID of this call; the result names it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model gave them. Not yet checked against the schema.
    #[schema(value_type = Object)]
    pub arguments: Value,
}

/// The result of one tool call, as given back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ToolResult {
    /// The ID of the call this answers.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// What the model sees: text and files.
    pub output: Vec<ContentPart>,
    /// Whether the tool failed; the output then says why, for the model.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub is_error: bool,
}

impl ToolResult {
    /// A successful result with one text part.
    pub fn text(call: &ToolCall, text: impl Into<String>) -> Self {
        Self {
            call_id: call.id.clone(),
            name: call.name.clone(),
            output: vec![ContentPart::text(text)],
            is_error: false,
        }
    }

    /// A failed result that tells the model why.
    pub fn error(call: &ToolCall, message: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::text(call, message)
        }
    }
}
