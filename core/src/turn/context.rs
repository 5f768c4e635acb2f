//! Context sizing: keeping each model request under the model's context window.
//!
//! The policy, in order:
//! 1. Tokens are estimated, not counted: one token per 4 bytes of text (rounded up), plus 4
//!    per message and the size of each tool definition. The estimate errs on the large side
//!    for English text and code.
//! 2. The budget is the window minus the tokens kept free for the answer
//!    (`max_output_tokens`, or 4096 when unset).
//! 3. The instructions, the tool definitions and the current Turn's messages are always sent.
//!    Older messages are dropped oldest first, a whole exchange at a time: an assistant message
//!    that called tools is never sent without its tool results, nor a result without its call.
//! 4. If the always-sent part alone does not fit, the request is not sent and the Turn fails
//!    with a configuration error that says so.

use openbot_schema::{ContentPart, Message, ToolDefinition};

/// Tokens kept free for the answer when a request sets no limit.
pub const DEFAULT_OUTPUT_RESERVE: u32 = 4096;

/// The always-sent part of a request does not fit in the window.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the request needs about {needed} tokens but the model's window leaves {budget}")]
pub struct ContextOverflow {
    /// The estimated tokens of the part that must be sent.
    pub needed: u64,
    /// The tokens available.
    pub budget: u64,
}

/// The estimated tokens of a text.
pub fn estimate_text(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// The estimated tokens of a JSON value, counted without building its text.
fn estimate_json(value: &serde_json::Value) -> u64 {
    struct Counter(u64);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len() as u64;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing to a counter cannot fail; a value that cannot be written counts as empty.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0.div_ceil(4)
}

/// The estimated tokens of one message.
pub fn estimate_message(message: &Message) -> u64 {
    let parts = |content: &[ContentPart]| -> u64 {
        content
            .iter()
            .map(|part| match part {
                ContentPart::Text { text } => estimate_text(text),
                // Providers bill images by size; a file costs a fixed, generous amount.
                ContentPart::File { .. } | ContentPart::Media { .. } => 1000,
            })
            .sum()
    };
    4 + match message {
        Message::User { content } => parts(content),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            parts(content)
                + tool_calls
                    .iter()
                    .map(|c| estimate_text(&c.name) + estimate_json(&c.arguments) + 8)
                    .sum::<u64>()
        }
        Message::Tool { result } => parts(&result.output) + estimate_text(&result.call_id),
    }
}

/// The estimated tokens of a tool definition.
pub fn estimate_tool(tool: &ToolDefinition) -> u64 {
    estimate_text(&tool.name) + estimate_text(&tool.description) + estimate_json(&tool.input_schema)
}

/// The sizes of the parts of a Turn's requests that do not change between its steps,
/// estimated once.
#[derive(Debug, Clone)]
pub struct ContextSizer {
    budget: u64,
    fixed: u64,
    history: Vec<u64>,
    history_total: u64,
}

impl ContextSizer {
    /// Estimates the instructions, tools and earlier conversation of a Turn.
    pub fn new(
        window: u32,
        max_output_tokens: Option<u32>,
        instructions: &str,
        tools: &[ToolDefinition],
        history: &[Message],
    ) -> Self {
        let budget = u64::from(window).saturating_sub(u64::from(
            max_output_tokens.unwrap_or(DEFAULT_OUTPUT_RESERVE),
        ));
        let fixed = estimate_text(instructions) + tools.iter().map(estimate_tool).sum::<u64>();
        let history: Vec<u64> = history.iter().map(estimate_message).collect();
        let history_total = history.iter().sum();
        Self {
            budget,
            fixed,
            history,
            history_total,
        }
    }

    /// The estimated input tokens of a request that sends `history` from `first` on and the
    /// current Turn's messages (`current_tokens`).
    pub fn request_tokens(&self, first: usize, current_tokens: u64) -> u64 {
        let history: u64 = self.history.iter().skip(first).sum();
        self.fixed + history + current_tokens
    }

    /// The most output tokens each request reserves room for.
    pub fn output_reserve(max_output_tokens: Option<u32>) -> u64 {
        u64::from(max_output_tokens.unwrap_or(DEFAULT_OUTPUT_RESERVE))
    }

    /// The index into `history` of the first message to send, given the estimated tokens of
    /// the current Turn's messages, which are always sent.
    pub fn first_history_message(
        &self,
        history: &[Message],
        current_tokens: u64,
    ) -> Result<usize, ContextOverflow> {
        let fixed = self.fixed + current_tokens;
        if fixed > self.budget {
            return Err(ContextOverflow {
                needed: fixed,
                budget: self.budget,
            });
        }
        let mut left = self.budget - fixed;
        if self.history_total <= left {
            return Ok(0);
        }
        // Walk back from the newest history message; stop at the first exchange that does not fit.
        let mut first = history.len();
        let mut pending = 0u64;
        for index in (0..history.len().min(self.history.len())).rev() {
            pending += self.history[index];
            if is_exchange_start(&history[index]) {
                if pending > left {
                    break;
                }
                left -= pending;
                pending = 0;
                first = index;
            }
        }
        Ok(first)
    }
}

/// Chooses how many of the oldest `history` messages to leave out so that the request fits.
/// `current` are the current Turn's messages, always sent. Returns the index into `history`
/// of the first message to send.
#[cfg(test)]
fn first_history_message(
    window: u32,
    max_output_tokens: Option<u32>,
    instructions: &str,
    tools: &[ToolDefinition],
    history: &[Message],
    current: &[Message],
) -> Result<usize, ContextOverflow> {
    let sizer = ContextSizer::new(window, max_output_tokens, instructions, tools, history);
    sizer.first_history_message(history, current.iter().map(estimate_message).sum())
}

/// Whether a message can be the first one sent: anything but a tool result, whose call would
/// then be missing.
fn is_exchange_start(message: &Message) -> bool {
    !matches!(message, Message::Tool { .. })
}

#[cfg(test)]
mod tests {
    use super::*;
    use openbot_schema::{ToolCall, ToolResult};
    use serde_json::json;

    fn long(n: usize) -> Message {
        Message::user("x".repeat(n))
    }

    #[test]
    fn everything_is_sent_when_it_fits() {
        let history = vec![long(40), Message::assistant("ok")];
        let first =
            first_history_message(10_000, Some(100), "", &[], &history, &[long(4)]).unwrap();
        assert_eq!(first, 0);
    }

    #[test]
    fn the_oldest_messages_are_dropped_first() {
        // Each 400-byte message is about 104 tokens; the budget holds the current one and two more.
        let history = vec![long(400), long(400), long(400)];
        let first = first_history_message(400, Some(50), "", &[], &history, &[long(400)]).unwrap();
        assert_eq!(first, 1);
    }

    #[test]
    fn a_tool_result_is_never_sent_without_its_call() {
        let call = ToolCall {
            id: "c1".into(),
            name: "t".into(),
            arguments: json!({}),
        };
        let history = vec![
            long(400),
            Message::Assistant {
                content: vec![],
                tool_calls: vec![call.clone()],
            },
            Message::Tool {
                result: ToolResult::text(&call, "y".repeat(400)),
            },
        ];
        // Room for the tool result alone, not for it and its call together.
        let first = first_history_message(134, Some(10), "", &[], &history, &[long(40)]).unwrap();
        assert_eq!(first, 3);
    }

    #[test]
    fn a_turn_too_large_for_the_window_is_refused() {
        let err = first_history_message(100, Some(50), "", &[], &[], &[long(400)]).unwrap_err();
        assert_eq!(err.budget, 50);
        assert!(err.needed > 50);
    }
}
