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
    /// Bytes given inline, as a tool's result carries them to the model (an MCP tool's image,
    /// audio or binary resource): saved with the result and sent to the model in its
    /// provider's format, which takes PNG, JPEG, GIF and WebP images and PDF documents (any
    /// other type reaches it as a placeholder text).
    Media {
        /// The media type, e.g. `image/png`.
        media_type: String,
        /// The bytes, base64 (standard alphabet, padded).
        data: String,
        /// A name for it (an MCP resource's URI), when it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(feature = "uniffi", uniffi(default))]
        name: Option<String>,
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
            ContentPart::File { .. } | ContentPart::Media { .. } => None,
        }
    }

    /// A part holding `data` (base64) of `media_type`.
    pub fn media(media_type: impl Into<String>, data: impl Into<String>) -> Self {
        ContentPart::Media {
            media_type: media_type.into(),
            data: data.into(),
            name: None,
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
