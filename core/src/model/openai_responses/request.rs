//! The Responses API request body.

use openbot_schema::{ContentPart, Message, ToolDefinition};
use serde_json::{Value, json};

use crate::model::ModelRequest;
use crate::model::files::{Attachment, attachment};
use crate::model::transport::{file_placeholder, parts_text, tool_result_text};

/// The JSON body for `request`: `instructions`, the conversation as `input` items, the tools
/// as functions, streaming, and `store: false`.
pub(super) fn body(model: &str, request: &ModelRequest) -> Value {
    let mut input = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        push_items(message.as_ref(), &mut input);
    }
    let mut body = json!({
        "model": model,
        "input": input,
        "stream": true,
        "store": false,
    });
    if !request.instructions.is_empty() {
        body["instructions"] = json!(request.instructions);
    }
    if !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(tool).collect();
    }
    if let Some(max) = request.max_output_tokens {
        body["max_output_tokens"] = json!(max);
    }
    body
}

fn push_items(message: &Message, input: &mut Vec<Value>) {
    match message {
        Message::User { content } => {
            input
                .push(json!({"type": "message", "role": "user", "content": user_content(content)}));
        }
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let text = parts_text(content);
            if !text.is_empty() || tool_calls.is_empty() {
                input.push(json!({"type": "message", "role": "assistant", "content": text}));
            }
            input.extend(tool_calls.iter().map(|call| {
                json!({
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments.to_string(),
                })
            }));
        }
        Message::Tool { result } => input.push(json!({
            "type": "function_call_output",
            "call_id": result.call_id,
            "output": tool_result_text(result, true),
        })),
    }
}

fn user_content(content: &[ContentPart]) -> Value {
    if content.is_empty() {
        return json!([{"type": "input_text", "text": ""}]);
    }
    content
        .iter()
        .map(|part| match part {
            ContentPart::Text { text } => json!({"type": "input_text", "text": text}),
            ContentPart::File { file } => match attachment(file) {
                Attachment::Image(url) => json!({"type": "input_image", "image_url": url}),
                Attachment::PdfData(_) => json!({
                    "type": "input_file",
                    "filename": file.name.clone().unwrap_or_else(|| format!("{}.pdf", file.id)),
                    "file_data": file.url,
                }),
                Attachment::PdfUrl(url) => json!({"type": "input_file", "file_url": url}),
                Attachment::Placeholder => {
                    json!({"type": "input_text", "text": file_placeholder(file)})
                }
            },
        })
        .collect()
}

fn tool(tool: &ToolDefinition) -> Value {
    json!({
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.input_schema,
        "strict": false,
    })
}
