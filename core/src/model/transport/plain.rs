//! Whole answers: a provider that ignores `stream: true` sends its answer as one JSON document.
//! It is read here, checked for an error report, and handed to the adapter's
//! [`Decoder::plain_answer`].

use std::time::Duration;

use reqwest::Response;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::wire::error_from_code;
use super::{Decoder, describe, message_in};
use crate::model::{ModelError, ModelEvent};

/// The most bytes of a whole JSON answer that are read.
const MAX_ANSWER_BODY: usize = 16 * 1024 * 1024;

/// Whether a `content-type` (lowercase) announces one JSON document rather than an event stream.
pub(super) fn is_json(content_type: &str) -> bool {
    content_type.starts_with("application/json")
}

/// The model events of a whole JSON answer. A body that is no JSON is
/// [`ModelError::Malformed`]; a body with an `error` is the error it reports, typed by its
/// `code` or `type`; everything else is the `decoder`'s to read. No bytes for `idle_timeout` is
/// a [`ModelError::Timeout`].
pub(super) async fn events<D: Decoder>(
    response: Response,
    decoder: D,
    idle_timeout: Duration,
) -> Result<Vec<ModelEvent>, ModelError> {
    let body = read(response, idle_timeout).await?;
    let answer: Value = serde_json::from_slice(&body).map_err(|e| {
        ModelError::Malformed(format!("the provider's JSON answer cannot be read: {e}"))
    })?;
    if let Some(error) = reported_error(&answer) {
        return Err(error);
    }
    decoder.plain_answer(answer)
}

/// `answer` read as `T`, or [`ModelError::Malformed`] saying it is not `what` (e.g.
/// `a chat completion`).
pub(crate) fn parse_answer<T: DeserializeOwned>(
    answer: Value,
    what: &str,
) -> Result<T, ModelError> {
    serde_json::from_value(answer)
        .map_err(|e| ModelError::Malformed(format!("the JSON answer is not {what}: {e}")))
}

/// The whole body, at most [`MAX_ANSWER_BODY`] bytes.
async fn read(mut response: Response, idle_timeout: Duration) -> Result<Vec<u8>, ModelError> {
    let mut body = Vec::new();
    loop {
        let chunk = match tokio::time::timeout(idle_timeout, response.chunk()).await {
            Err(_) => return Err(ModelError::Timeout),
            Ok(Err(e)) => {
                return Err(ModelError::Transport(format!(
                    "the answer broke: {}",
                    describe(&e)
                )));
            }
            Ok(Ok(None)) => return Ok(body),
            Ok(Ok(Some(chunk))) => chunk,
        };
        if body.len() + chunk.len() > MAX_ANSWER_BODY {
            return Err(ModelError::Malformed(format!(
                "the JSON answer is larger than {MAX_ANSWER_BODY} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
}

/// The error a JSON body reports in its `error` field (an object or a text), if it does; the
/// first element's when the body is a list.
fn reported_error(answer: &Value) -> Option<ModelError> {
    let answer = match answer {
        Value::Array(items) => items.first()?,
        other => other,
    };
    let error = answer
        .get("error")
        .filter(|e| e.is_object() || e.is_string())?;
    let code = ["code", "type"]
        .iter()
        .find_map(|field| error.get(field).and_then(Value::as_str));
    let message = message_in(answer).unwrap_or_else(|| "the provider reported an error".into());
    Some(error_from_code(code, &message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_are_typed_by_their_code() {
        let openai = serde_json::json!({"error": {"message": "Slow down", "type": "requests",
            "code": "rate_limit_exceeded"}});
        assert_eq!(
            reported_error(&openai),
            Some(ModelError::RateLimited {
                retry_after: None,
                message: "Slow down".into()
            })
        );
        let anthropic = serde_json::json!({"type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"}});
        assert!(matches!(
            reported_error(&anthropic),
            Some(ModelError::Server { status: 529, .. })
        ));
        let text = serde_json::json!([{"error": "the backend failed"}]);
        assert!(matches!(
            reported_error(&text),
            Some(ModelError::Server { message, .. }) if message == "the backend failed"
        ));
    }

    #[test]
    fn a_completion_without_an_error_reports_none() {
        let response = serde_json::json!({"object": "response", "error": null, "output": []});
        assert_eq!(reported_error(&response), None);
        assert!(is_json("application/json; charset=utf-8"));
        assert!(!is_json("text/event-stream"));
    }
}
