//! JavaScript functions as core tools.
//!
//! The TypeScript layer wraps each user function so that it never throws nor rejects: it returns
//! a [`ToolReply`] (at once for a synchronous function, else through a Promise): the function's
//! value as text, or the message of what it threw with `isError` set. It keeps the thrown value itself for its caller. Here the
//! wrapper is held as a weak threadsafe function: it can be called from any Tokio thread and
//! never keeps the Node.js process alive. When the Turn is cancelled, a second weak threadsafe
//! function aborts the call's `AbortSignal` in JavaScript.

use std::sync::Arc;

use async_trait::async_trait;
use napi::Status;
use napi::bindgen_prelude::{Either, Promise};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use openbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use openbot_schema::ToolDefinition;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

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

/// What the wrapper returns: a [`ToolReply`] at once when the tool's function was synchronous,
/// or a Promise of one.
pub type ToolAnswer = Either<Promise<ToolReply>, ToolReply>;

/// The weak threadsafe function of a tool: called with one [`ToolInvocation`], returns a
/// [`ToolAnswer`].
pub type ToolFunction =
    ThreadsafeFunction<ToolInvocation, ToolAnswer, ToolInvocation, Status, false, true>;

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
    #[napi(ts_type = "(call: ToolInvocation) => ToolReply | Promise<ToolReply>")]
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

/// Aborts a JavaScript call's signal when its Turn was cancelled: while the call runs, and also
/// when the caller drops the call because of the cancellation.
struct AbortOnCancel {
    cancel: CancellationToken,
    abort: Arc<AbortFunction>,
    target: Option<ToolAbort>,
}

impl AbortOnCancel {
    fn fire(&mut self) {
        if let Some(target) = self.target.take() {
            self.abort
                .call(target, ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

impl Drop for AbortOnCancel {
    fn drop(&mut self) {
        if self.cancel.is_cancelled() {
            self.fire();
        }
    }
}

#[async_trait]
impl Tool for JsTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let cancel = context.cancel.clone();
        let mut guard = AbortOnCancel {
            cancel: context.cancel.clone(),
            abort: Arc::clone(&self.abort),
            target: Some(ToolAbort {
                execution_id: context.execution_id.to_string(),
                call_id: context.call_id.clone(),
            }),
        };
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
        let work = async {
            match self
                .function
                .call_async_catch(invocation)
                .await
                .map_err(unreachable)?
            {
                Either::A(promise) => promise.await.map_err(unreachable),
                Either::B(reply) => Ok(reply),
            }
        };
        let reply = tokio::select! {
            reply = work => reply?,
            () = cancel.cancelled() => {
                guard.fire();
                return Err(ToolError::new("the Turn was cancelled"));
            }
        };
        if reply.is_error {
            Err(ToolError::new(reply.text))
        } else {
            Ok(ToolOutput::text(reply.text))
        }
    }
}
