//! Reading the Responses API event stream.

use std::collections::BTreeMap;

use openbot_schema::{ToolCall, Usage};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::model::sse::SseEvent;
use crate::model::transport::{Decoder, error_from_code, malformed, parse_arguments, priced};
use crate::model::{ModelError, ModelEvent, Pricing, StopReason};

/// Turns `response.*` events into model events until `response.completed` or
/// `response.incomplete`. Events it does not need (reasoning, annotations, ...) are skipped.
pub(super) struct ResponsesDecoder {
    pricing: Option<Pricing>,
    /// Function calls being streamed, by `output_index`.
    calls: BTreeMap<u64, FunctionCall>,
    had_calls: bool,
}

#[derive(Deserialize)]
struct Delta {
    delta: String,
    #[serde(default)]
    output_index: Option<u64>,
}

#[derive(Deserialize)]
struct ItemEvent {
    #[serde(default)]
    output_index: Option<u64>,
    item: Value,
}

/// A function call item, or what was streamed of one.
#[derive(Default, Deserialize)]
pub(super) struct FunctionCall {
    #[serde(default)]
    call_id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Deserialize)]
struct ArgumentsDone {
    #[serde(default)]
    output_index: Option<u64>,
    arguments: String,
}

#[derive(Deserialize)]
struct Finished {
    response: ResponseBody,
}

/// The parts of a `response` object that end an answer.
#[derive(Deserialize)]
pub(super) struct ResponseBody {
    #[serde(default)]
    usage: Option<ResponseUsage>,
    #[serde(default)]
    pub(super) error: Option<ErrorBody>,
    #[serde(default)]
    incomplete_details: Option<IncompleteDetails>,
}

#[derive(Deserialize)]
struct ResponseUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    input_tokens_details: Option<InputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// An `error` event has `code` and `message` at the top level; older shapes nest them in
/// `error`, as `response.failed` does.
#[derive(Default, Deserialize)]
pub(super) struct ErrorBody {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    error: Option<Box<ErrorBody>>,
}

#[derive(Deserialize)]
struct IncompleteDetails {
    #[serde(default)]
    reason: Option<String>,
}

impl ResponsesDecoder {
    pub(super) fn new(pricing: Option<Pricing>) -> Self {
        Self {
            pricing,
            calls: BTreeMap::new(),
            had_calls: false,
        }
    }

    /// Emits a finished function call, completing what the item lacks from what was streamed.
    pub(super) fn emit_call(
        &mut self,
        streamed: FunctionCall,
        item: FunctionCall,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ModelError> {
        let pick = |a: String, b: String| if a.is_empty() { b } else { a };
        let id = pick(item.call_id, streamed.call_id);
        let name = pick(item.name, streamed.name);
        if id.is_empty() || name.is_empty() {
            return Err(ModelError::Malformed(
                "a function call has no call_id or name".into(),
            ));
        }
        let arguments = parse_arguments(&pick(item.arguments, streamed.arguments));
        self.had_calls = true;
        out.push(ModelEvent::ToolCall(ToolCall {
            id,
            name,
            arguments,
        }));
        Ok(())
    }

    /// Handles `response.completed` and `response.incomplete`: calls not yet emitted, usage,
    /// and the stop reason.
    pub(super) fn finish(
        &mut self,
        completed: bool,
        body: ResponseBody,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ModelError> {
        for (_, streamed) in std::mem::take(&mut self.calls) {
            self.emit_call(streamed, FunctionCall::default(), out)?;
        }
        if let Some(usage) = body.usage {
            let cached = usage
                .input_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0);
            let usage = Usage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                cached_input_tokens: cached,
                cost_micros: None,
            };
            out.push(ModelEvent::Usage(priced(self.pricing, usage)));
        }
        let reason = body.incomplete_details.and_then(|d| d.reason);
        let stop = match (completed, reason.as_deref()) {
            (true, _) if self.had_calls => StopReason::ToolUse,
            (true, _) => StopReason::EndTurn,
            (false, Some("max_output_tokens")) => StopReason::MaxTokens,
            (false, _) => StopReason::Other,
        };
        out.push(ModelEvent::Done(stop));
        Ok(())
    }
}

fn parse<T: DeserializeOwned>(event: &SseEvent, value: Value) -> Result<T, ModelError> {
    serde_json::from_value(value).map_err(|e| malformed(event, &e))
}

/// The error a failed response or an `error` event reports.
pub(super) fn error(body: ErrorBody, fallback: &str) -> ModelError {
    let nested = body.error.map(|e| *e).unwrap_or_default();
    let code = body.code.or(nested.code);
    let message = body
        .message
        .or(nested.message)
        .unwrap_or_else(|| fallback.to_string());
    error_from_code(code.as_deref(), &message)
}

impl Decoder for ResponsesDecoder {
    fn decode(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        let value: Value = serde_json::from_str(&event.data).map_err(|e| malformed(&event, &e))?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match kind.as_str() {
            "response.output_text.delta" | "response.refusal.delta" => {
                let delta: Delta = parse(&event, value)?;
                if !delta.delta.is_empty() {
                    out.push(ModelEvent::TextDelta(delta.delta));
                }
            }
            "response.output_item.added" | "response.output_item.done" => {
                let added = kind == "response.output_item.added";
                let ItemEvent { output_index, item } = parse(&event, value)?;
                if item.get("type").and_then(Value::as_str) != Some("function_call") {
                    return Ok(false);
                }
                let call: FunctionCall = parse(&event, item)?;
                match (added, output_index) {
                    (true, Some(index)) => {
                        self.calls.insert(index, call);
                    }
                    (true, None) => {}
                    (false, index) => {
                        let streamed = index
                            .and_then(|i| self.calls.remove(&i))
                            .unwrap_or_default();
                        self.emit_call(streamed, call, out)?;
                    }
                }
            }
            "response.function_call_arguments.delta" => {
                let delta: Delta = parse(&event, value)?;
                if let Some(call) = delta.output_index.and_then(|i| self.calls.get_mut(&i)) {
                    call.arguments.push_str(&delta.delta);
                }
            }
            "response.function_call_arguments.done" => {
                let done: ArgumentsDone = parse(&event, value)?;
                if let Some(call) = done.output_index.and_then(|i| self.calls.get_mut(&i)) {
                    call.arguments = done.arguments;
                }
            }
            "response.completed" | "response.incomplete" => {
                let Finished { response } = parse(&event, value)?;
                self.finish(kind == "response.completed", response, out)?;
                return Ok(true);
            }
            "response.failed" => {
                let Finished { response } = parse(&event, value)?;
                let body = response.error.unwrap_or_default();
                return Err(error(body, "the response failed"));
            }
            "error" => {
                return Err(error(
                    parse(&event, value)?,
                    "the provider reported an error",
                ));
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
