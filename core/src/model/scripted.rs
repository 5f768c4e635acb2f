//! The scripted model: a fixed list of outputs, for tests and demos. Deterministic and offline.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use openbot_schema::{ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;

use super::{Model, ModelError, ModelEvent, ModelRequest, ModelStream, StopReason};

/// One scripted answer, as read from JSON.
///
/// ```json
/// {"text": "It is sunny.", "tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedStep {
    /// The answer's text, sent as one delta unless `deltas` is given.
    #[serde(default)]
    pub text: Option<String>,
    /// The text as separate deltas.
    #[serde(default)]
    pub deltas: Vec<String>,
    /// Tool calls. A call without an `id` gets `call_<request>_<index>`.
    #[serde(default)]
    pub tool_calls: Vec<ScriptedToolCall>,
    /// The usage to report; by default a small fixed count.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// Wait this long before each delta, to imitate a slow provider.
    #[serde(default)]
    pub delay_ms: u64,
    /// Fail instead of answering: `rate_limited`, `server`, `unauthorized`, `invalid_request`
    /// fail before any output; `interrupted` fails after the deltas were sent.
    #[serde(default)]
    pub error: Option<String>,
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// The call's ID.
    #[serde(default)]
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The arguments.
    #[serde(default)]
    pub arguments: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    steps: Vec<ScriptedStep>,
    #[serde(default)]
    repeat: bool,
}

/// A model that answers each request with the next step of its script.
#[derive(Debug)]
pub struct ScriptedModel {
    name: String,
    steps: Vec<ScriptedStep>,
    repeat: bool,
    next: AtomicUsize,
}

impl ScriptedModel {
    /// A model that gives `steps` in order, one per request, then fails with
    /// [`ModelError::ScriptExhausted`].
    pub fn new(steps: Vec<ScriptedStep>) -> Self {
        Self {
            name: "scripted".into(),
            steps,
            repeat: false,
            next: AtomicUsize::new(0),
        }
    }

    /// The same model, but starting again from the first step after the last.
    pub fn repeating(mut self) -> Self {
        self.repeat = true;
        self
    }

    /// Reads a script from JSON: either a list of steps or `{"steps": [...], "repeat": bool}`.
    pub fn from_json(json: &str) -> Result<Self, ModelError> {
        let invalid =
            |e: serde_json::Error| ModelError::Configuration(format!("invalid script: {e}"));
        // A list of steps, or an object; each form read on its own so errors name the field.
        let file = if json.trim_start().starts_with('[') {
            ScriptFile {
                steps: serde_json::from_str(json).map_err(invalid)?,
                repeat: false,
            }
        } else {
            serde_json::from_str(json).map_err(invalid)?
        };
        Ok(Self {
            repeat: file.repeat,
            ..Self::new(file.steps)
        })
    }

    /// Reads a script from a JSON file.
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<Self, ModelError> {
        let path = path.as_ref();
        let json = std::fs::read_to_string(path).map_err(|e| {
            ModelError::Configuration(format!("cannot read script {}: {e}", path.display()))
        })?;
        let mut model = Self::from_json(&json)?;
        model.name = format!("scripted:{}", path.display());
        Ok(model)
    }

    /// The index of the next step: the requests answered so far, or more when a request came
    /// from a conversation further along.
    pub fn requests(&self) -> usize {
        self.next.load(Ordering::Relaxed)
    }
}

fn scripted_error(kind: &str) -> ModelError {
    match kind {
        "rate_limited" => ModelError::RateLimited {
            retry_after: None,
            message: "scripted rate limit".into(),
        },
        "unauthorized" => ModelError::Unauthorized {
            status: 401,
            message: "scripted".into(),
        },
        "invalid_request" => ModelError::InvalidRequest {
            status: 400,
            message: "scripted".into(),
        },
        "interrupted" => ModelError::Interrupted,
        _ => ModelError::Server {
            status: 500,
            message: "scripted server error".into(),
        },
    }
}

#[async_trait]
impl Model for ScriptedModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn context_window(&self) -> u32 {
        1_000_000
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        // A conversation further along than this model's count (a fresh process resuming a
        // saved Turn) continues the script where the conversation is, so a recovered Turn
        // gets the answer it would have got.
        let answered = request
            .messages
            .iter()
            .filter(|m| matches!(m.as_ref(), openbot_schema::Message::Assistant { .. }))
            .count();
        let index = match self
            .next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |next| {
                Some(next.max(answered) + 1)
            }) {
            Ok(previous) | Err(previous) => previous.max(answered),
        };
        let position = if self.repeat && !self.steps.is_empty() {
            index % self.steps.len()
        } else {
            index
        };
        let step = self
            .steps
            .get(position)
            .ok_or(ModelError::ScriptExhausted(index + 1))?;
        if let Some(kind) = step.error.as_deref().filter(|k| *k != "interrupted") {
            return Err(scripted_error(kind));
        }
        let mut events = Vec::with_capacity(step.deltas.len() + step.tool_calls.len() + 3);
        let deltas = if step.deltas.is_empty() {
            step.text.iter().cloned().collect()
        } else {
            step.deltas.clone()
        };
        events.extend(deltas.into_iter().map(|d| Ok(ModelEvent::TextDelta(d))));
        if step.error.is_some() {
            events.push(Err(ModelError::Interrupted));
            return Ok(paced(events, step.delay_ms));
        }
        for (i, call) in step.tool_calls.iter().enumerate() {
            events.push(Ok(ModelEvent::ToolCall(ToolCall {
                id: call
                    .id
                    .clone()
                    .unwrap_or_else(|| format!("call_{}_{}", index + 1, i + 1)),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            })));
        }
        let usage = step.usage.unwrap_or(Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        });
        events.push(Ok(ModelEvent::Usage(usage)));
        let stop = if step.tool_calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        };
        events.push(Ok(ModelEvent::Done(stop)));
        Ok(paced(events, step.delay_ms))
    }
}

fn paced(events: Vec<Result<ModelEvent, ModelError>>, delay_ms: u64) -> ModelStream {
    if delay_ms == 0 {
        return futures::stream::iter(events).boxed();
    }
    let delay = Duration::from_millis(delay_ms);
    futures::stream::iter(events)
        .then(move |event| async move {
            tokio::time::sleep(delay).await;
            event
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::TryStreamExt;

    #[tokio::test]
    async fn a_script_answers_in_order_then_runs_out() {
        let model = ScriptedModel::from_json(
            r#"[{"text":"one","tool_calls":[{"name":"t","arguments":{"a":1}}]},{"deltas":["t","wo"]}]"#,
        )
        .unwrap();
        let first: Vec<_> = model
            .stream(ModelRequest::default())
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(first[0], ModelEvent::TextDelta("one".into()));
        assert!(
            matches!(&first[1], ModelEvent::ToolCall(c) if c.id == "call_1_1" && c.arguments["a"] == 1)
        );
        assert_eq!(first.last(), Some(&ModelEvent::Done(StopReason::ToolUse)));
        let second: Vec<_> = model
            .stream(ModelRequest::default())
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(second[1], ModelEvent::TextDelta("wo".into()));
        let third = model.stream(ModelRequest::default()).await.err();
        assert_eq!(third, Some(ModelError::ScriptExhausted(3)));
    }

    #[test]
    fn a_bad_script_is_a_configuration_error() {
        let err = ScriptedModel::from_json(r#"[{"txt":"typo"}]"#).unwrap_err();
        assert!(matches!(err, ModelError::Configuration(m) if m.contains("txt")));
    }
}
