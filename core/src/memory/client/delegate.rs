//! A delegate tool in memory: each call runs a child Turn of the delegate's Bot in this
//! process and answers with the child's final text. The child is an execution of its own
//! (observable, cancellable, listed in the parent's events as `child_started`), with a private
//! history (only its task) and the limits [`crate::delegation::child_limits`] gives it.

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use openbot_schema::{
    ContentPart, EventKind, Limits, Message, ToolCall, ToolDefinition, TurnOutcome,
};
use serde_json::Value;
use tracing::Instrument as _;

use super::Inner;
use crate::delegation::task_of;
use crate::memory::MemoryHost;
use crate::model::Model;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};
use crate::turn::{ToolSet, TurnSpec, run_turn};

/// What a child Turn of the delegate's Bot is made of, resolved when the parent's tools were.
pub(super) struct ChildTurn {
    pub bot_name: String,
    pub instructions: String,
    pub model: Arc<dyn Model>,
    pub tools: Arc<ToolSet>,
    pub limits: Limits,
}

/// The handler of one delegate tool of one Turn's tool set.
pub(super) struct DelegateTool {
    definition: ToolDefinition,
    child: ChildTurn,
    /// Weak: the client's cached tool sets hold this tool.
    inner: Weak<Inner>,
}

impl DelegateTool {
    pub(super) fn new(definition: ToolDefinition, child: ChildTurn, inner: Weak<Inner>) -> Self {
        Self {
            definition,
            child,
            inner,
        }
    }
}

#[async_trait]
impl Tool for DelegateTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let inner = self
            .inner
            .upgrade()
            .ok_or_else(|| ToolError::new("the client is closed"))?;
        let task = task_of(&ToolCall {
            id: context.call_id.clone(),
            name: self.definition.name.clone(),
            arguments,
        });
        let host = Arc::new(MemoryHost::new(
            MemoryHost::new_execution(None),
            inner.errors.clone(),
        ));
        let child_id = host.log().execution_id();
        let parent = {
            let mut state = inner.lock();
            if state.closed {
                return Err(ToolError::new("the client is closed"));
            }
            state.executions.insert(child_id, Arc::clone(&host));
            state.executions.get(&context.execution_id).cloned()
        };
        if let Some(parent) = &parent {
            parent.log().append(EventKind::ChildStarted {
                call_id: context.call_id.clone(),
                child_id,
                kind: "turn".into(),
            });
        }
        let input = vec![ContentPart::text(task)];
        host.start(input.clone());
        // The child Turn's span sits under the parent's `execute_tool` span.
        let agent = crate::telemetry::AgentLabel {
            id: None,
            name: Some(self.definition.name.clone()),
            conversation: None,
        };
        let spec = TurnSpec {
            instructions: self.child.instructions.clone(),
            model: Arc::clone(&self.child.model),
            tools: Arc::clone(&self.child.tools),
            limits: self.child.limits,
            history: Vec::new(),
            input,
            max_output_tokens: None,
        };
        // Cancelling the parent cancels its child.
        let watcher = {
            let host = Arc::clone(&host);
            let cancel = context.cancel.clone();
            tokio::spawn(async move {
                cancel.cancelled().await;
                host.cancel();
            })
        };
        // The child runs as a task of its own, so that it still reaches its end (cancelled)
        // when the parent stops awaiting this call: a dropped call cancels it.
        let guard = CancelOnDrop(Some(Arc::clone(&host)));
        let child = {
            let host = Arc::clone(&host);
            tokio::spawn(
                async move { run_turn(spec, host.as_ref()).await }
                    .instrument(crate::telemetry::invoke_agent(&agent)),
            )
        };
        let end = child.await;
        guard.disarm();
        watcher.abort();
        let end = end.map_err(|e| {
            ToolError::new(format!(
                "the delegate's Turn (execution {child_id}) stopped: {e}"
            ))
        })?;
        if let Some(parent) = &parent {
            // The child's usage (its own children's included) counts for its parent too.
            parent.add_child_usage(host.execution().usage);
        }
        let name = &self.child.bot_name;
        let end = end.map_err(|e| {
            ToolError::new(format!(
                "the delegate {name} (execution {child_id}) stopped without an end: {e}"
            ))
        })?;
        match end.outcome {
            Ok(TurnOutcome::Completed) => {
                let answer = end
                    .messages
                    .iter()
                    .rev()
                    .find(|m| matches!(m, Message::Assistant { .. }))
                    .map(Message::text)
                    .unwrap_or_default();
                Ok(ToolOutput::text(answer))
            }
            Ok(outcome) => Err(ToolError::new(format!(
                "the delegate {name} (execution {child_id}) ended ({}) without an answer",
                label(outcome)
            ))),
            // The cause is sealed with the child's `failed` event, never given to a model.
            Err(failure) => Err(ToolError::new(format!(
                "the delegate {name} (execution {child_id}) failed ({})",
                label(failure.category)
            ))),
        }
    }
}

/// A unit enum's wire name (`max_steps`, `model_provider`).
/// Cancels a child Turn when the call that awaits it is dropped before it ended.
struct CancelOnDrop(Option<Arc<MemoryHost>>);

impl CancelOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(host) = self.0.take() {
            host.cancel();
        }
    }
}

fn label(value: impl serde::Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
