//! Reading a whole `message` object, sent by a server (e.g. a proxy) that ignores
//! `stream: true`.

use serde::Deserialize;
use serde_json::Value;

use super::stream::{MessageUsage, MessagesDecoder, ToolUseBlock};
use crate::model::transport::parse_answer;
use crate::model::{ModelError, ModelEvent};

#[derive(Deserialize)]
struct Message {
    #[serde(rename = "type")]
    kind: String,
    content: Vec<Value>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<MessageUsage>,
}

/// The events of a message: the text of its `text` blocks, its `tool_use` blocks in order, the
/// usage and the stop reason. Other blocks (e.g. thinking) are skipped.
pub(super) fn answer(
    mut decoder: MessagesDecoder,
    answer: Value,
) -> Result<Vec<ModelEvent>, ModelError> {
    let message: Message = parse_answer(answer, "a message")?;
    if message.kind != "message" {
        return Err(ModelError::Malformed(format!(
            "the JSON answer is a `{}`, not a message",
            message.kind.chars().take(64).collect::<String>()
        )));
    }
    let mut text = String::new();
    for (index, block) in (0u64..).zip(message.content) {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => {
                let tool_use: ToolUseBlock = parse_answer(block, "a tool_use block")?;
                decoder.open_tool_use(index, tool_use);
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if !text.is_empty() {
        out.push(ModelEvent::TextDelta(text));
    }
    decoder.update(message.stop_reason, message.usage);
    decoder.finish(&mut out);
    Ok(out)
}
