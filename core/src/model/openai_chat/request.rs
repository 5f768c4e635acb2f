//! The Chat Completions request body.

use openbot_schema::{ContentPart, Message, ToolDefinition};
use serde_json::{Value, json};

use crate::model::ModelRequest;
use crate::model::files::{Attachment, attachment};
use crate::model::transport::{file_placeholder, parts_text, tool_result_text};

/// The JSON body for `request`: the instructions as a `system` message, then the conversation,
/// the tools as functions, and streaming with usage.
pub(super) fn body(model: &str, is_openai: bool, request: &ModelRequest) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.instructions.is_empty() {
        messages.push(json!({"role": "system", "content": request.instructions}));
    }
    messages.extend(request.messages.iter().map(|m| message(m)));
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(tool).collect();
    }
    if let Some(max) = request.max_output_tokens {
        let field = if is_openai {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body[field] = json!(max);
    }
    body
}

fn message(message: &Message) -> Value {
    match message {
        Message::User { content } => json!({"role": "user", "content": user_content(content)}),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let text = parts_text(content);
            let mut value = json!({"role": "assistant", "content": text});
            if !tool_calls.is_empty() {
                if text.is_empty() {
                    value["content"] = Value::Null;
                }
                value["tool_calls"] = tool_calls
                    .iter()
                    .map(|call| {
                        let arguments = call.arguments.to_string();
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": arguments},
                        })
                    })
                    .collect();
            }
            value
        }
        Message::Tool { result } => json!({
            "role": "tool",
            "tool_call_id": result.call_id,
            "content": tool_result_text(result, true),
        }),
    }
}

/// One text part is sent as a plain string, which every compatible server reads; anything else
/// as a list of `text`, `image_url` and (PDF documents) `file` parts.
fn user_content(content: &[ContentPart]) -> Value {
    match content {
        [] => return json!(""),
        [ContentPart::Text { text }] => return json!(text),
        _ => {}
    }
    let parts: Vec<Value> = content
        .iter()
        .map(|part| match part {
            ContentPart::Text { text } => json!({"type": "text", "text": text}),
            ContentPart::File { file } => match attachment(file) {
                Attachment::Image(url) => json!({"type": "image_url", "image_url": {"url": url}}),
                Attachment::PdfData(_) => json!({"type": "file", "file": {
                    "filename": file_name(file),
                    "file_data": file.url,
                }}),
                Attachment::PdfUrl(_) | Attachment::Placeholder => {
                    json!({"type": "text", "text": file_placeholder(file)})
                }
            },
        })
        .collect();
    Value::Array(parts)
}

fn file_name(file: &openbot_schema::FileRef) -> String {
    file.name
        .clone()
        .unwrap_or_else(|| format!("{}.pdf", file.id))
}

fn tool(tool: &ToolDefinition) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        },
    })
}
