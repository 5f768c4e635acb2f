//! Reading a whole `chat.completion` object, which some compatible servers send although a
//! stream was asked for.

use serde::Deserialize;
use serde_json::Value;

use super::stream::{ChatDecoder, ChunkUsage, Delta, position_index};
use crate::model::transport::parse_answer;
use crate::model::{ModelError, ModelEvent};

#[derive(Deserialize)]
struct Completion {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<ChunkUsage>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    message: Delta,
    #[serde(default)]
    finish_reason: Option<String>,
}

/// The events of a completion: the first choice's text, its tool calls in their order, the
/// usage and the stop reason.
pub(super) fn answer(
    mut decoder: ChatDecoder,
    answer: Value,
) -> Result<Vec<ModelEvent>, ModelError> {
    let completion: Completion = parse_answer(answer, "a chat completion")?;
    let choice = completion
        .choices
        .into_iter()
        .find(|c| c.index == 0)
        .ok_or_else(|| ModelError::Malformed("the chat completion has no choice".into()))?;
    let mut out = Vec::new();
    if let Some(text) = choice.message.content.filter(|t| !t.is_empty()) {
        out.push(ModelEvent::TextDelta(text));
    }
    let calls = choice.message.tool_calls.unwrap_or_default();
    for (position, call) in calls.into_iter().enumerate() {
        decoder.add_fragment(position_index(position), call);
    }
    decoder.end_choice(choice.finish_reason, &mut out)?;
    if let Some(usage) = completion.usage {
        out.push(decoder.usage(usage));
    }
    out.push(ModelEvent::Done(decoder.stop_reason()));
    Ok(out)
}
