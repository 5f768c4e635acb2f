//! Messages of a conversation and their content parts.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ids::FileId;
use crate::tool::{ToolCall, ToolResult};

/// One piece of message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ContentPart {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// A reference to a stored file; the bytes are not inlined.
    File {
        /// The file.
        file: FileRef,
    },
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        ContentPart::Text { text: text.into() }
    }

    /// The text of this part, if it is text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentPart::Text { text } => Some(text),
            ContentPart::File { .. } => None,
        }
    }
}

/// A reference to a file by ID, with what a model needs to know about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct FileRef {
    /// The stored file.
    pub id: FileId,
    /// Its media type, e.g. `image/png`.
    pub media_type: String,
    /// Its display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub name: Option<String>,
    /// A URL a model provider can read it from (`https:` or `data:`), when one exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub url: Option<String>,
}

/// One message of a conversation, in the order the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Input from a person or a service.
    User {
        /// The content.
        content: Vec<ContentPart>,
    },
    /// The model's answer: text and the tool calls it asked for.
    Assistant {
        /// The text content.
        #[serde(default)]
        content: Vec<ContentPart>,
        /// The tool calls, in the order the model gave them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, given back to the model.
    Tool {
        /// The result.
        result: ToolResult,
    },
}

impl Message {
    /// A user message holding one text part.
    pub fn user(text: impl Into<String>) -> Self {
        Message::User {
            content: vec![ContentPart::text(text)],
        }
    }

    /// An assistant message holding one text part and no tool calls.
    pub fn assistant(text: impl Into<String>) -> Self {
        Message::Assistant {
            content: vec![ContentPart::text(text)],
            tool_calls: Vec::new(),
        }
    }

    /// All text parts of this message, joined.
    pub fn text(&self) -> String {
        let parts: &[ContentPart] = match self {
            Message::User { content } | Message::Assistant { content, .. } => content,
            Message::Tool { result } => &result.output,
        };
        parts.iter().filter_map(ContentPart::as_text).collect()
    }
}
