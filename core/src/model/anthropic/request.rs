//! The Messages API request body.

use openbot_schema::{ContentPart, Message, ToolCall, ToolDefinition, ToolResult};
use serde_json::{Value, json};

use super::AnthropicMessages;
use crate::model::ModelRequest;
use crate::model::files::{FileFormat, Outgoing, data_parts, outgoing};
use crate::model::transport::parts_text;

/// The JSON body for `request`: `system`, the conversation as messages of content blocks (a run
/// of tool results in one user message; empty messages left out), the tools, `max_tokens` and
/// streaming.
pub(super) fn body(model: &str, request: &ModelRequest) -> Value {
    let mut messages: Vec<Value> = Vec::with_capacity(request.messages.len());
    let mut in_results = false;
    for message in &request.messages {
        match message.as_ref() {
            Message::Tool { result } => {
                let block = tool_result(result);
                match messages
                    .last_mut()
                    .and_then(|m| m["content"].as_array_mut())
                {
                    Some(blocks) if in_results => blocks.push(block),
                    _ => messages.push(json!({"role": "user", "content": [block]})),
                }
                in_results = true;
                continue;
            }
            Message::User { content } => push(&mut messages, "user", content_blocks(content)),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = content_blocks(content);
                blocks.extend(tool_calls.iter().map(tool_use));
                push(&mut messages, "assistant", blocks);
            }
        }
        in_results = false;
    }
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_output_tokens.unwrap_or(AnthropicMessages::DEFAULT_MAX_TOKENS),
        "messages": messages,
        "stream": true,
    });
    if !request.instructions.is_empty() {
        body["system"] = json!(request.instructions);
    }
    if !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(tool).collect();
    }
    body
}

fn push(messages: &mut Vec<Value>, role: &str, blocks: Vec<Value>) {
    if !blocks.is_empty() {
        messages.push(json!({"role": role, "content": blocks}));
    }
}

/// Text blocks (empty ones left out: the API rejects them), image and document blocks; other
/// files as a text saying what they are. A tool result's content takes the same blocks.
fn content_blocks(content: &[ContentPart]) -> Vec<Value> {
    content
        .iter()
        .filter_map(|part| match outgoing(part, FileFormat::Anthropic) {
            None => match part.as_text() {
                Some("") | None => None,
                Some(text) => Some(json!({"type": "text", "text": text})),
            },
            Some(file) => Some(file_block(file, part)),
        })
        .collect()
}

/// An image block from a `data:` URL (as base64) or any other URL, a PDF as a document block
/// (base64 or URL); a text otherwise.
fn file_block(file: Outgoing<'_>, part: &ContentPart) -> Value {
    let url = match file {
        Outgoing::Image(url) => url,
        Outgoing::Pdf { url, .. } => {
            return match data_parts(&url) {
                Some((_, data)) => json!({
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": data},
                }),
                None => json!({"type": "text", "text": parts_text(std::slice::from_ref(part))}),
            };
        }
        Outgoing::PdfUrl(url) => {
            return json!({"type": "document", "source": {"type": "url", "url": url}});
        }
        Outgoing::Text(text) => return json!({"type": "text", "text": text}),
    };
    match data_parts(&url) {
        Some((media_type, data)) => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }),
        None if url.starts_with("data:") => {
            json!({"type": "text", "text": parts_text(std::slice::from_ref(part))})
        }
        None => json!({"type": "image", "source": {"type": "url", "url": url}}),
    }
}

fn tool_use(call: &ToolCall) -> Value {
    let input = if call.arguments.is_object() {
        call.arguments.clone()
    } else {
        json!({"_raw": call.arguments})
    };
    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
}

fn tool_result(result: &ToolResult) -> Value {
    let mut block = json!({"type": "tool_result", "tool_use_id": result.call_id});
    let content = content_blocks(&result.output);
    if !content.is_empty() {
        block["content"] = Value::Array(content);
    }
    if result.is_error {
        block["is_error"] = json!(true);
    }
    block
}

fn tool(tool: &ToolDefinition) -> Value {
    json!({"name": tool.name, "description": tool.description, "input_schema": tool.input_schema})
}
