//! The Chat Completions request body.

use openbot_schema::{ContentPart, Message, ToolDefinition, ToolResult};
use serde_json::{Value, json};

use crate::model::ModelRequest;
use crate::model::files::{FileFormat, Outgoing, outgoing, result_text};
use crate::model::transport::parts_text;

/// The JSON body for `request`: the instructions as a `system` message, then the conversation,
/// the tools as functions, and streaming with usage.
pub(super) fn body(model: &str, is_openai: bool, request: &ModelRequest) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.instructions.is_empty() {
        messages.push(json!({"role": "system", "content": request.instructions}));
    }
    // A tool message carries text only: the files of a run of tool results follow the run in
    // one user message (tool messages must directly follow their assistant message).
    let mut files: Vec<Value> = Vec::new();
    for m in &request.messages {
        if let Message::Tool { result } = m.as_ref() {
            files.extend(result_files(result));
        } else if !files.is_empty() {
            messages.push(json!({"role": "user", "content": std::mem::take(&mut files)}));
        }
        messages.push(message(m));
    }
    if !files.is_empty() {
        messages.push(json!({"role": "user", "content": files}));
    }
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
            "content": result_text(result, FileFormat::OpenAiChat, true),
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
        .map(|part| match outgoing(part, FileFormat::OpenAiChat) {
            None => json!({"type": "text", "text": part.as_text().unwrap_or_default()}),
            Some(file) => file_part(file, part),
        })
        .collect();
    Value::Array(parts)
}

fn file_part(file: Outgoing<'_>, part: &ContentPart) -> Value {
    match file {
        Outgoing::Image(url) => json!({"type": "image_url", "image_url": {"url": url}}),
        Outgoing::Pdf { url, filename } => json!({"type": "file", "file": {
            "filename": filename,
            "file_data": url,
        }}),
        Outgoing::PdfUrl(_) => {
            json!({"type": "text", "text": parts_text(std::slice::from_ref(part))})
        }
        Outgoing::Text(text) => json!({"type": "text", "text": text}),
    }
}

/// The user-message parts that carry a tool result's files: a line naming the call, then each
/// file this API reads (`image_url`, `file`); none when the result has none.
fn result_files(result: &ToolResult) -> Vec<Value> {
    let files: Vec<Value> = result
        .output
        .iter()
        .filter_map(|part| {
            let file = outgoing(part, FileFormat::OpenAiChat)?;
            (file.is_file() && !matches!(file, Outgoing::PdfUrl(_))).then(|| file_part(file, part))
        })
        .collect();
    if files.is_empty() {
        return files;
    }
    let mut parts = vec![json!({"type": "text", "text": format!(
        "The files of the result of tool call `{}` ({}):",
        result.call_id, result.name
    )})];
    parts.extend(files);
    parts
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
