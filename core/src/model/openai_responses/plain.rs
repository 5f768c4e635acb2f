//! Reading a whole `response` object, sent by a server that ignores `stream: true`.

use serde::Deserialize;
use serde_json::Value;

use super::stream::{FunctionCall, ResponseBody, ResponsesDecoder, error};
use crate::model::transport::parse_answer;
use crate::model::{ModelError, ModelEvent};

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    status: Option<String>,
    output: Vec<Value>,
    #[serde(flatten)]
    body: ResponseBody,
}

/// The events of a response: the text of its `message` items (`output_text` and `refusal`
/// parts), its `function_call` items in order, the usage and the stop reason. A `failed`
/// response is the error it reports; one that is not finished is malformed.
pub(super) fn answer(
    mut decoder: ResponsesDecoder,
    answer: Value,
) -> Result<Vec<ModelEvent>, ModelError> {
    let Response {
        status,
        output,
        mut body,
    } = parse_answer(answer, "a response")?;
    let completed = match status.as_deref() {
        None | Some("completed") => true,
        Some("incomplete") => false,
        Some("failed") => {
            let report = body.error.take().unwrap_or_default();
            return Err(error(report, "the response failed"));
        }
        Some(other) => {
            return Err(ModelError::Malformed(format!(
                "the response is `{}`, not finished",
                other.chars().take(64).collect::<String>()
            )));
        }
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    for item in output {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => text.push_str(&message_text(&item)),
            Some("function_call") => {
                let call: FunctionCall = parse_answer(item, "a function call")?;
                decoder.emit_call(FunctionCall::default(), call, &mut calls)?;
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if !text.is_empty() {
        out.push(ModelEvent::TextDelta(text));
    }
    out.append(&mut calls);
    decoder.finish(completed, body, &mut out)?;
    Ok(out)
}

/// The text of a message item's `output_text` and `refusal` parts, joined.
fn message_text(item: &Value) -> String {
    let parts = item.get("content").and_then(Value::as_array);
    parts
        .into_iter()
        .flatten()
        .filter_map(|part| match part.get("type").and_then(Value::as_str) {
            Some("output_text") => part.get("text").and_then(Value::as_str),
            Some("refusal") => part.get("refusal").and_then(Value::as_str),
            _ => None,
        })
        .collect()
}
