//! Small pieces of request and answer mapping that all providers share.

use openbot_schema::{ContentPart, FileRef, Usage};
use serde_json::Value;

use super::{MAX_MESSAGE_CHARS, cut};
use crate::model::sse::SseEvent;
use crate::model::{ModelError, Pricing};

/// The error for a provider's in-stream error report with the given `code` (e.g.
/// `rate_limit_exceeded`, `overloaded_error`, `invalid_request_error`). Unknown codes are
/// server errors, so the request may be tried again.
pub(crate) fn error_from_code(code: Option<&str>, message: &str) -> ModelError {
    let message = cut(message, MAX_MESSAGE_CHARS);
    let code = code.unwrap_or_default();
    let invalid = |status| ModelError::InvalidRequest {
        status,
        message: message.clone(),
    };
    match code {
        c if c.contains("rate_limit") => ModelError::RateLimited {
            retry_after: None,
            message,
        },
        c if c.contains("overloaded") => ModelError::Server {
            status: 529,
            message,
        },
        c if c.contains("authentication") || c.contains("api_key") => ModelError::Unauthorized {
            status: 401,
            message,
        },
        c if c.contains("permission") => ModelError::Unauthorized {
            status: 403,
            message,
        },
        c if c.contains("not_found") => invalid(404),
        c if c.contains("too_large") => invalid(413),
        c if c.starts_with("invalid")
            || c.contains("image")
            || c.contains("unsupported")
            || c.contains("context_length")
            || c.contains("content_policy")
            || c.starts_with("empty") =>
        {
            invalid(400)
        }
        _ => ModelError::Server {
            status: 500,
            message,
        },
    }
}

/// `usage` with its cost when a price is known.
pub(crate) fn priced(pricing: Option<Pricing>, usage: Usage) -> Usage {
    match pricing {
        Some(pricing) => pricing.priced(usage),
        None => usage,
    }
}

/// A `Malformed` error for event data that could not be decoded.
pub(crate) fn malformed(event: &SseEvent, error: &serde_json::Error) -> ModelError {
    ModelError::Malformed(format!(
        "cannot read the `{}` event: {error}",
        cut(event.name(), 64)
    ))
}

/// A tool call's arguments from the text the model streamed: `{}` when empty, the parsed JSON
/// when valid, otherwise `{"_raw": text}` so the Turn can tell the model its input was invalid.
pub(crate) fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(text).unwrap_or_else(|_| serde_json::json!({ "_raw": text }))
}

/// The text that stands for a file a provider cannot be sent: `[file: name (media/type)]`.
pub(crate) fn file_placeholder(file: &FileRef) -> String {
    let name = file.name.clone().unwrap_or_else(|| file.id.to_string());
    format!("[file: {name} ({})]", file.media_type)
}

/// The text that stands for a media part: `[file: name (media/type)]`.
pub(crate) fn media_placeholder(media_type: &str, name: Option<&str>) -> String {
    format!("[file: {} ({media_type})]", name.unwrap_or("media"))
}

/// Content parts as one text: texts joined by newlines, files and media as placeholders.
pub(crate) fn parts_text(parts: &[ContentPart]) -> String {
    let texts: Vec<String> = parts
        .iter()
        .map(|part| match part {
            ContentPart::Text { text } => text.clone(),
            ContentPart::File { file } => file_placeholder(file),
            ContentPart::Media {
                media_type, name, ..
            } => media_placeholder(media_type, name.as_deref()),
        })
        .collect();
    texts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_arguments_are_kept_raw() {
        assert_eq!(parse_arguments(""), serde_json::json!({}));
        assert_eq!(parse_arguments(r#"{"a":1}"#), serde_json::json!({"a": 1}));
        assert_eq!(
            parse_arguments(r#"{"a":"#),
            serde_json::json!({"_raw": "{\"a\":"})
        );
    }

    #[test]
    fn in_stream_error_codes_map_to_error_kinds() {
        assert!(matches!(
            error_from_code(Some("rate_limit_exceeded"), "m"),
            ModelError::RateLimited { .. }
        ));
        assert!(matches!(
            error_from_code(Some("invalid_prompt"), "m"),
            ModelError::InvalidRequest { status: 400, .. }
        ));
        assert!(matches!(
            error_from_code(Some("overloaded_error"), "m"),
            ModelError::Server { status: 529, .. }
        ));
        assert!(matches!(
            error_from_code(None, "m"),
            ModelError::Server { status: 500, .. }
        ));
    }
}
