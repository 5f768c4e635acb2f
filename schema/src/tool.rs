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

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn a_result_saved_before_media_parts_still_reads() {
        let saved = r#"{"call_id":"c1","name":"lookup","output":[{"type":"text","text":"{\"a\":1}"},{"type":"file","file":{"id":"0190b1a2-0000-7000-8000-000000000001","media_type":"image/png"}}]}"#;
        let result: ToolResult = serde_json::from_str(saved).unwrap();
        assert_eq!(result.output[0], ContentPart::text("{\"a\":1}"));
        assert!(
            matches!(&result.output[1], ContentPart::File { file } if file.media_type == "image/png")
        );
        assert!(!result.is_error);
    }

    #[test]
    fn a_media_part_round_trips_with_its_type_and_bytes() {
        let result = ToolResult {
            call_id: "c1".into(),
            name: "shot".into(),
            output: vec![
                ContentPart::text("see"),
                ContentPart::media("image/png", "iVBORw0KGgo="),
            ],
            is_error: false,
        };
        let saved = serde_json::to_value(&result).unwrap();
        assert_eq!(
            saved["output"][1],
            serde_json::json!({"type": "media", "media_type": "image/png", "data": "iVBORw0KGgo="})
        );
        assert_eq!(serde_json::from_value::<ToolResult>(saved).unwrap(), result);
    }
}
