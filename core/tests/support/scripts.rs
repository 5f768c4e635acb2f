//! Helpers shared by the loop and client tests.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::StreamExt;
use openbot_core::model::{Model, ModelError, ModelRequest, ModelStream, ScriptedModel};
use openbot_core::tool::{FnTool, ToolOutput};
use openbot_schema::{Event, EventKind};
use serde_json::json;

/// A scripted model from JSON steps.
pub fn scripted(json: serde_json::Value) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_json(&json.to_string()).expect("valid script"))
}

/// A model that records every request it gets and answers with an inner model.
pub struct Recording {
    pub inner: Arc<dyn Model>,
    pub requests: Mutex<Vec<ModelRequest>>,
}

impl Recording {
    pub fn new(inner: Arc<dyn Model>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            requests: Mutex::new(Vec::new()),
        })
    }

    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().unwrap().clone()
    }
}

#[async_trait]
impl Model for Recording {
    fn name(&self) -> &str {
        "recording"
    }
    fn context_window(&self) -> u32 {
        self.inner.context_window()
    }
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.stream(request).await
    }
}

/// A tool named `echo` that answers with its `text` argument.
pub fn echo_tool() -> FnTool {
    FnTool::new(
        "echo",
        "Repeats the text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        |args, _ctx| async move { Ok(ToolOutput::text(args["text"].as_str().unwrap_or_default())) },
    )
}

/// The event types, in order, without sequences.
pub fn kinds(events: &[Event]) -> Vec<&'static str> {
    events
        .iter()
        .map(|e| match e.kind {
            EventKind::TurnStarted { .. } => "turn_started",
            EventKind::InputSteered { .. } => "input_steered",
            EventKind::ModelStepStarted { .. } => "model_step_started",
            EventKind::TextDelta { .. } => "text_delta",
            EventKind::ToolCall { .. } => "tool_call",
            EventKind::ToolResult { .. } => "tool_result",
            EventKind::TurnEnded { .. } => "turn_ended",
            EventKind::Failed { .. } => "failed",
            _ => "other",
        })
        .collect()
}

/// All events of a stream, checking that sequences run 1, 2, 3... without gaps.
pub async fn collect_checked(stream: openbot_core::events::EventStream, after: u64) -> Vec<Event> {
    let events: Vec<Event> = stream.collect().await;
    for (i, event) in events.iter().enumerate() {
        assert_eq!(
            event.sequence,
            after + 1 + i as u64,
            "sequences have no gaps"
        );
    }
    events
}
