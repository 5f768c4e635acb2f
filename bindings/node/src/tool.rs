//! JavaScript functions as core tools.
//!
//! The TypeScript layer wraps each user function so that it always returns a Promise that
//! resolves (never rejects) to a [`ToolReply`]: the function's value as text, or the message of
//! what it threw with `isError` set. It keeps the thrown value itself for its caller. Here the
//! wrapper is held as a weak threadsafe function: it can be called from any Tokio thread and
//! never keeps the Node.js process alive. When the Turn is cancelled, a second weak threadsafe
//! function aborts the call's `AbortSignal` in JavaScript.

use std::sync::Arc;

use async_trait::async_trait;
use napi::Status;
use napi::bindgen_prelude::Promise;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use openbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use openbot_schema::ToolDefinition;
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// One call of a tool, as the JavaScript wrapper receives it.
#[napi(object)]
pub struct ToolInvocation {
    /// The arguments the model gave, already checked against the tool's schema.
    pub arguments: Value,
    /// The execution the call belongs to.
    pub execution_id: String,
    /// The model step that asked for the call.
    pub step: u32,
    /// The model's ID of the call; with the execution ID it names the call.
    pub call_id: String,
    /// Stays the same if this exact call is retried.
    pub idempotency_key: String,
}

/// What a tool answered.
#[napi(object)]
pub struct ToolReply {
    /// The text the model sees: the result, or what went wrong.
    pub text: String,
    /// Whether the tool failed.
    pub is_error: bool,
}

/// The weak threadsafe function of a tool: called with one [`ToolInvocation`], returns a
/// Promise of a [`ToolReply`].
pub type ToolFunction =
    ThreadsafeFunction<ToolInvocation, Promise<ToolReply>, ToolInvocation, Status, false, true>;

/// Names one call whose Turn was cancelled: the wrapper aborts that call's `AbortSignal`.
#[napi(object)]
pub struct ToolAbort {
    /// The execution the call belongs to.
    pub execution_id: String,
    /// The model's ID of the call.
    pub call_id: String,
}

/// The weak threadsafe function that aborts one call's signal.
pub type AbortFunction = ThreadsafeFunction<ToolAbort, (), ToolAbort, Status, false, true>;

/// A tool served by JavaScript: its name and its wrapped function.
#[napi(object, object_to_js = false)]
pub struct ToolHandler {
    /// The tool's name, as the Bot's tool definition names it.
    pub name: String,
    /// The wrapped function.
    #[napi(ts_type = "(call: ToolInvocation) => Promise<ToolReply>")]
    pub call: ToolFunction,
    /// Aborts the signal of a call whose Turn was cancelled.
    #[napi(ts_type = "(call: ToolAbort) => void")]
    pub abort: AbortFunction,
}

/// A core [`Tool`] whose handler is a JavaScript function. The Bot's definition of the tool
/// (description, input schema) is what the model sees; this one only carries the name.
pub struct JsTool {
    definition: ToolDefinition,
    function: Arc<ToolFunction>,
    abort: Arc<AbortFunction>,
}

impl JsTool {
    /// The tool for one handler.
    pub fn new(handler: ToolHandler) -> Self {
        Self {
            definition: ToolDefinition {
                name: handler.name,
                description: String::new(),
                input_schema: json!({"type": "object"}),
            },
            function: Arc::new(handler.call),
            abort: Arc::new(handler.abort),
        }
    }
}

#[async_trait]
impl Tool for JsTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        // When the Turn is cancelled, the JavaScript function's signal is aborted, also when the
        // caller drops this future on cancellation; a call that ends first stops the watcher.
        let (done, finished) = oneshot::channel::<()>();
        let cancel = context.cancel.clone();
        let abort = Arc::clone(&self.abort);
        let target = ToolAbort {
            execution_id: context.execution_id.to_string(),
            call_id: context.call_id.clone(),
        };
        tokio::spawn(async move {
            tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    abort.call(target, ThreadsafeFunctionCallMode::NonBlocking);
                }
                _ = finished => {}
            }
        });
        let _done = done;
        let invocation = ToolInvocation {
            arguments,
            execution_id: context.execution_id.to_string(),
            step: context.step,
            call_id: context.call_id,
            idempotency_key: context.idempotency_key,
        };
        let unreachable = |e: napi::Error| {
            ToolError::new(format!(
                "the JavaScript function of tool `{}` could not be called: {}",
                self.definition.name, e.reason
            ))
        };
        let promise = self
            .function
            .call_async_catch(invocation)
            .await
            .map_err(unreachable)?;
        let reply = promise.await.map_err(unreachable)?;
        if reply.is_error {
            Err(ToolError::new(reply.text))
        } else {
            Ok(ToolOutput::text(reply.text))
        }
    }
}
