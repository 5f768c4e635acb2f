//! The Responses API request body.

use openbot_schema::{ContentPart, Message, ToolDefinition, ToolResult};
use serde_json::{Value, json};

use crate::model::ModelRequest;
use crate::model::files::{FileFormat, Outgoing, outgoing, result_text};
use crate::model::transport::parts_text;

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
            "output": tool_output(result),
        })),
    }
}

fn user_content(content: &[ContentPart]) -> Value {
    if content.is_empty() {
        return json!([{"type": "input_text", "text": ""}]);
    }
    content.iter().map(input_part).collect()
}

/// One content part as an `input_text`, `input_image` or `input_file` part.
fn input_part(part: &ContentPart) -> Value {
    match outgoing(part, FileFormat::OpenAiResponses) {
        None => json!({"type": "input_text", "text": part.as_text().unwrap_or_default()}),
        Some(Outgoing::Image(url)) => json!({"type": "input_image", "image_url": url}),
        Some(Outgoing::Pdf { url, filename }) => json!({
            "type": "input_file",
            "filename": filename,
            "file_data": url,
        }),
        Some(Outgoing::PdfUrl(url)) => json!({"type": "input_file", "file_url": url}),
        Some(Outgoing::Text(text)) => json!({"type": "input_text", "text": text}),
    }
}

/// A `function_call_output`'s `output`: a string when the result is text only, else a list of
/// `input_text`, `input_image` and `input_file` parts (a failed result starts with `Error:`).
fn tool_output(result: &ToolResult) -> Value {
    let has_file = result
        .output
        .iter()
        .any(|part| outgoing(part, FileFormat::OpenAiResponses).is_some_and(|file| file.is_file()));
    if !has_file {
        return json!(result_text(result, FileFormat::OpenAiResponses, true));
    }
    let mut parts = Vec::with_capacity(result.output.len() + 1);
    if result.is_error {
        parts.push(json!({"type": "input_text", "text": "Error:"}));
    }
    parts.extend(result.output.iter().map(input_part));
    Value::Array(parts)
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
