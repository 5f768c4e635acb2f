//! Reading the Chat Completions event stream.

use std::collections::BTreeMap;

use openbot_schema::{ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;

use crate::model::sse::SseEvent;
use crate::model::transport::{Decoder, error_from_code, malformed, parse_arguments, priced};
use crate::model::{ModelError, ModelEvent, Pricing, StopReason};

/// Assembles text, tool-call fragments, usage and the finish reason from `chat.completion.chunk`
/// events until `[DONE]`.
pub(super) struct ChatDecoder {
    pricing: Option<Pricing>,
    /// Tool calls being streamed, by their `index`.
    calls: BTreeMap<u32, PartialCall>,
    /// Whether the answer had tool calls (they may have been emitted already).
    had_calls: bool,
    finish_reason: Option<String>,
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<ChunkUsage>,
    #[serde(default)]
    error: Option<StreamError>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

/// A streamed delta, and also the `message` of a whole completion.
#[derive(Deserialize)]
pub(super) struct Delta {
    #[serde(default)]
    pub(super) content: Option<String>,
    #[serde(default)]
    pub(super) tool_calls: Option<Vec<ToolCallDelta>>,
}

/// A streamed tool-call fragment, and also a whole completion's tool call.
#[derive(Deserialize)]
pub(super) struct ToolCallDelta {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// The usage of a chunk or of a whole completion.
#[derive(Deserialize)]
pub(super) struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct StreamError {
    #[serde(default)]
    message: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    code: Option<serde_json::Value>,
}

impl ChatDecoder {
    pub(super) fn new(pricing: Option<Pricing>) -> Self {
        Self {
            pricing,
            calls: BTreeMap::new(),
            had_calls: false,
            finish_reason: None,
        }
    }

    /// Adds a fragment of the tool call at `index`.
    pub(super) fn add_fragment(&mut self, index: u32, fragment: ToolCallDelta) {
        let call = self.calls.entry(index).or_default();
        self.had_calls = true;
        if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
            call.id = id;
        }
        if let Some(function) = fragment.function {
            if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                call.name = name;
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    /// Emits the assembled tool calls in index order.
    fn flush_calls(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        for (index, call) in std::mem::take(&mut self.calls) {
            if call.name.is_empty() {
                return Err(ModelError::Malformed(format!(
                    "tool call {index} has no name"
                )));
            }
            let id = if call.id.is_empty() {
                format!("call_{index}")
            } else {
                call.id
            };
            let arguments = parse_arguments(&call.arguments);
            out.push(ModelEvent::ToolCall(ToolCall {
                id,
                name: call.name,
                arguments,
            }));
        }
        Ok(())
    }

    /// Ends the choice: keeps its finish reason, if it has one, and emits its tool calls.
    pub(super) fn end_choice(
        &mut self,
        finish_reason: Option<String>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ModelError> {
        if finish_reason.is_some() {
            self.finish_reason = finish_reason;
        }
        self.flush_calls(out)
    }

    /// The usage event, priced when a price is set.
    pub(super) fn usage(&self, usage: ChunkUsage) -> ModelEvent {
        let cached = usage
            .prompt_tokens_details
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0);
        let usage = Usage {
            input_tokens: usage.prompt_tokens,
            output_tokens: usage.completion_tokens,
            cached_input_tokens: cached,
            cost_micros: None,
        };
        ModelEvent::Usage(priced(self.pricing, usage))
    }

    /// Why the model stopped, from the finish reason and whether it called tools.
    pub(super) fn stop_reason(&self) -> StopReason {
        match self.finish_reason.as_deref() {
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            Some("length") => StopReason::MaxTokens,
            Some("stop") | None if self.had_calls => StopReason::ToolUse,
            Some("stop") | None => StopReason::EndTurn,
            Some(_) => StopReason::Other,
        }
    }
}

impl Decoder for ChatDecoder {
    fn decode(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        if event.data.trim() == "[DONE]" {
            self.flush_calls(out)?;
            out.push(ModelEvent::Done(self.stop_reason()));
            return Ok(true);
        }
        let chunk: Chunk = serde_json::from_str(&event.data).map_err(|e| malformed(&event, &e))?;
        if let Some(error) = chunk.error {
            let code = error
                .code
                .as_ref()
                .and_then(|c| c.as_str())
                .or(error.kind.as_deref());
            let message = error
                .message
                .unwrap_or_else(|| "the provider reported an error".into());
            return Err(error_from_code(code, &message));
        }
        for choice in chunk
            .choices
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.index == 0)
        {
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    out.push(ModelEvent::TextDelta(text));
                }
                for (position, fragment) in
                    delta.tool_calls.unwrap_or_default().into_iter().enumerate()
                {
                    let index = fragment.index.unwrap_or_else(|| position_index(position));
                    self.add_fragment(index, fragment);
                }
            }
            if choice.finish_reason.is_some() {
                self.end_choice(choice.finish_reason, out)?;
            }
        }
        if let Some(usage) = chunk.usage {
            out.push(self.usage(usage));
        }
        Ok(false)
    }

    fn plain_answer(self, answer: Value) -> Result<Vec<ModelEvent>, ModelError> {
        super::plain::answer(self, answer)
    }
}

/// The index of the tool call at `position` in a list.
pub(super) fn position_index(position: usize) -> u32 {
    u32::try_from(position).unwrap_or(u32::MAX)
}
