//! What is sent to a model and what comes back.

use std::sync::Arc;

use openbot_schema::{ContentPart, Message, ToolCall, ToolDefinition, Usage};

/// One request to a model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelRequest {
    /// The system instructions.
    pub instructions: String,
    /// The conversation so far, oldest first. Shared with the Turn, so a step does not copy
    /// the conversation.
    pub messages: Vec<Arc<Message>>,
    /// The tools the model may call; shared by the requests of a Turn.
    pub tools: Arc<[ToolDefinition]>,
    /// The most tokens the answer may have.
    pub max_output_tokens: Option<u32>,
}

/// Why a model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// It finished its answer.
    EndTurn,
    /// It wants tool results.
    ToolUse,
    /// It reached the output token limit.
    MaxTokens,
    /// Something else, e.g. a content filter.
    Other,
}

/// One event of a model's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// More text.
    TextDelta(String),
    /// A complete tool call.
    ToolCall(ToolCall),
    /// Usage of this request; may come more than once, the last one counts.
    Usage(Usage),
    /// The end of the answer.
    Done(StopReason),
}

/// A whole answer, collected from its events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelResponse {
    /// The text.
    pub text: String,
    /// The tool calls, in the order given.
    pub tool_calls: Vec<ToolCall>,
    /// The usage, if the provider reported it.
    pub usage: Option<Usage>,
    /// Why the model stopped; `None` until [`ModelEvent::Done`].
    pub stop: Option<StopReason>,
}

impl ModelResponse {
    /// Adds one event to the answer.
    pub fn apply(&mut self, event: &ModelEvent) {
        match event {
            ModelEvent::TextDelta(text) => self.text.push_str(text),
            ModelEvent::ToolCall(call) => self.tool_calls.push(call.clone()),
            ModelEvent::Usage(usage) => self.usage = Some(*usage),
            ModelEvent::Done(stop) => self.stop = Some(*stop),
        }
    }

    /// The answer as the assistant message of the conversation.
    pub fn to_message(&self) -> Message {
        let content = if self.text.is_empty() {
            Vec::new()
        } else {
            vec![ContentPart::text(&self.text)]
        };
        Message::Assistant {
            content,
            tool_calls: self.tool_calls.clone(),
        }
    }
}
