//! Reading the Messages API event stream.

use std::collections::BTreeMap;

use openbot_schema::{ToolCall, Usage};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::model::sse::SseEvent;
use crate::model::transport::{Decoder, error_from_code, malformed, parse_arguments, priced};
use crate::model::{ModelError, ModelEvent, Pricing, StopReason};

/// Turns Messages events into model events until `message_stop`. Content blocks other than
/// text and tool use (e.g. thinking) and unknown events are skipped, as the API asks.
pub(super) struct MessagesDecoder {
    pricing: Option<Pricing>,
    /// Tool-use blocks being streamed, by block index.
    tool_uses: BTreeMap<u64, ToolUse>,
    had_calls: bool,
    usage: MessageUsage,
    stop_reason: Option<String>,
}

struct ToolUse {
    id: String,
    name: String,
    /// The `input` of `content_block_start`; used when no input JSON was streamed.
    input: Value,
    json: String,
}

/// The usage of a message, as `message_start`, `message_delta` and a whole message carry it.
#[derive(Default, Deserialize)]
pub(super) struct MessageUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

impl MessageUsage {
    /// Takes every count `newer` has.
    fn update(&mut self, newer: MessageUsage) {
        self.input_tokens = newer.input_tokens.or(self.input_tokens);
        self.output_tokens = newer.output_tokens.or(self.output_tokens);
        self.cache_read_input_tokens = newer
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
        self.cache_creation_input_tokens = newer
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
    }
}

#[derive(Deserialize)]
struct MessageStart {
    message: StartedMessage,
}

#[derive(Deserialize)]
struct StartedMessage {
    #[serde(default)]
    usage: Option<MessageUsage>,
}

#[derive(Deserialize)]
struct BlockStart {
    index: u64,
    content_block: Value,
}

/// A `tool_use` content block.
#[derive(Deserialize)]
pub(super) struct ToolUseBlock {
    id: String,
    name: String,
    #[serde(default)]
    input: Value,
}

#[derive(Deserialize)]
struct BlockDelta {
    index: u64,
    delta: Value,
}

#[derive(Deserialize)]
struct BlockStop {
    index: u64,
}

#[derive(Deserialize)]
struct MessageDelta {
    #[serde(default)]
    delta: Option<StopDelta>,
    #[serde(default)]
    usage: Option<MessageUsage>,
}

#[derive(Deserialize)]
struct StopDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Default, Deserialize)]
struct ErrorEvent {
    #[serde(default)]
    error: Option<ErrorDetail>,
}

#[derive(Deserialize)]
struct ErrorDetail {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl MessagesDecoder {
    pub(super) fn new(pricing: Option<Pricing>) -> Self {
        Self {
            pricing,
            tool_uses: BTreeMap::new(),
            had_calls: false,
            usage: MessageUsage::default(),
            stop_reason: None,
        }
    }

    fn start_block(
        &mut self,
        event: &SseEvent,
        start: BlockStart,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ModelError> {
        match start.content_block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = start
                    .content_block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if !text.is_empty() {
                    out.push(ModelEvent::TextDelta(text.to_string()));
                }
            }
            Some("tool_use") => {
                let block: ToolUseBlock = parse(event, start.content_block)?;
                self.open_tool_use(start.index, block);
            }
            _ => {}
        }
        Ok(())
    }

    /// Starts the tool-use block at `index`; it is emitted when it stops or the message ends.
    pub(super) fn open_tool_use(&mut self, index: u64, block: ToolUseBlock) {
        let tool_use = ToolUse {
            id: block.id,
            name: block.name,
            input: block.input,
            json: String::new(),
        };
        self.tool_uses.insert(index, tool_use);
    }

    /// Keeps the stop reason, if there is one, and the counts `usage` has.
    pub(super) fn update(&mut self, stop_reason: Option<String>, usage: Option<MessageUsage>) {
        if stop_reason.is_some() {
            self.stop_reason = stop_reason;
        }
        self.usage.update(usage.unwrap_or_default());
    }

    fn delta(&mut self, delta: BlockDelta, out: &mut Vec<ModelEvent>) {
        let text = |field| {
            delta
                .delta
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        match delta.delta.get("type").and_then(Value::as_str) {
            Some("text_delta") if !text("text").is_empty() => {
                out.push(ModelEvent::TextDelta(text("text").to_string()));
            }
            Some("input_json_delta") => {
                if let Some(tool_use) = self.tool_uses.get_mut(&delta.index) {
                    tool_use.json.push_str(text("partial_json"));
                }
            }
            _ => {}
        }
    }

    fn stop_block(&mut self, index: u64, out: &mut Vec<ModelEvent>) {
        if let Some(tool_use) = self.tool_uses.remove(&index) {
            let arguments = if tool_use.json.trim().is_empty() && tool_use.input.is_object() {
                tool_use.input
            } else {
                parse_arguments(&tool_use.json)
            };
            self.had_calls = true;
            out.push(ModelEvent::ToolCall(ToolCall {
                id: tool_use.id,
                name: tool_use.name,
                arguments,
            }));
        }
    }

    /// Emits the open tool calls, the usage and the stop reason.
    pub(super) fn finish(&mut self, out: &mut Vec<ModelEvent>) {
        for index in self.tool_uses.keys().copied().collect::<Vec<_>>() {
            self.stop_block(index, out);
        }
        let usage = &self.usage;
        let cached = usage.cache_read_input_tokens.unwrap_or(0);
        let input = usage.input_tokens.unwrap_or(0)
            + cached
            + usage.cache_creation_input_tokens.unwrap_or(0);
        let usage = Usage {
            input_tokens: input,
            output_tokens: usage.output_tokens.unwrap_or(0),
            cached_input_tokens: cached,
            cost_micros: None,
        };
        out.push(ModelEvent::Usage(priced(self.pricing, usage)));
        let stop = match self.stop_reason.as_deref() {
            Some("end_turn" | "stop_sequence") => StopReason::EndTurn,
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens") => StopReason::MaxTokens,
            Some(_) => StopReason::Other,
            None if self.had_calls => StopReason::ToolUse,
            None => StopReason::EndTurn,
        };
        out.push(ModelEvent::Done(stop));
    }
}

fn parse<T: DeserializeOwned>(event: &SseEvent, value: Value) -> Result<T, ModelError> {
    serde_json::from_value(value).map_err(|e| malformed(event, &e))
}

impl Decoder for MessagesDecoder {
    fn decode(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        let value: Value = serde_json::from_str(&event.data).map_err(|e| malformed(&event, &e))?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match kind.as_str() {
            "message_start" => {
                let start: MessageStart = parse(&event, value)?;
                self.usage.update(start.message.usage.unwrap_or_default());
            }
            "content_block_start" => {
                let start: BlockStart = parse(&event, value)?;
                self.start_block(&event, start, out)?;
            }
            "content_block_delta" => self.delta(parse(&event, value)?, out),
            "content_block_stop" => {
                let stop: BlockStop = parse(&event, value)?;
                self.stop_block(stop.index, out);
            }
            "message_delta" => {
                let delta: MessageDelta = parse(&event, value)?;
                self.update(delta.delta.and_then(|d| d.stop_reason), delta.usage);
            }
            "message_stop" => {
                self.finish(out);
                return Ok(true);
            }
            "error" => {
                let error: ErrorEvent = parse(&event, value)?;
                let (kind, message) = match error.error {
                    Some(detail) => (detail.kind, detail.message),
                    None => (None, None),
                };
                let message = message.unwrap_or_else(|| "the provider reported an error".into());
                return Err(error_from_code(kind.as_deref(), &message));
            }
            "" => {
                return Err(ModelError::Malformed(format!(
                    "a `{}` event has no type",
                    event.name()
                )));
            }
            _ => {}
        }
        Ok(false)
    }

    fn plain_answer(self, answer: Value) -> Result<Vec<ModelEvent>, ModelError> {
        super::plain::answer(self, answer)
    }
}
