//! Tools: what a model can call. A tool has a definition (name, description, JSON Schema of its
//! input) and a handler. Arguments that do not match the schema never reach the handler: the
//! model gets an error result that says what is wrong, and the Turn goes on.

mod function;
mod http;
mod validate;

use std::sync::Arc;

use async_trait::async_trait;
use openbot_schema::{ContentPart, ExecutionId, ToolDefinition};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use function::FnTool;
pub use http::{
    HttpTool, LOST_ANSWER_ATTEMPTS, PreparedCall, REDACTED, RequestParts, check_http_tool, redacted,
};
pub use validate::{ArgumentError, CheckedSchema, SchemaError};

/// What a tool's handler knows about the call it serves.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The execution the call belongs to.
    pub execution_id: ExecutionId,
    /// The model step that asked for the call.
    pub step: u32,
    /// The provider's ID of the call.
    pub call_id: String,
    /// A key that stays the same if this exact call is retried; pass it to outside services
    /// that deduplicate writes.
    pub idempotency_key: String,
    /// Cancelled when the Turn is cancelled; long tools should stop then.
    pub cancel: CancellationToken,
    /// Whether a Code Mode program made the call (`await tools.x()`): on a server, only such
    /// a call's arguments may carry Vault references, opened at the send.
    pub from_code: bool,
}

/// A tool's answer: what the model sees.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// Text and files for the model.
    pub content: Vec<ContentPart>,
}

impl ToolOutput {
    /// An answer of one text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentPart::text(text)],
        }
    }

    /// An answer holding `value` as JSON text.
    pub fn json(value: &Value) -> Self {
        Self::text(value.to_string())
    }
}

/// A tool failure. Its message is given to the model as an error result, so the model can
/// react; it must not contain secrets.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// What went wrong, for the model.
    pub message: String,
    /// The call may have taken effect but its result is lost (a connection that broke after
    /// the request was sent): a durable host waits in `outcome_unknown` for a decision instead
    /// of giving the model an error it might act on by calling again.
    pub outcome_unknown: bool,
}

impl ToolError {
    /// A failure with this message for the model.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            outcome_unknown: false,
        }
    }

    /// A call that may have taken effect and whose result is lost. Only for tools whose host
    /// keeps a call log a person can decide on (the server); the message is the reason.
    pub fn outcome_unknown(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            outcome_unknown: true,
        }
    }
}

/// A tool handler.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The definition offered to the model.
    fn definition(&self) -> &ToolDefinition;

    /// Runs one call with arguments already checked against the definition's schema.
    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError>;
}

/// A shared tool handler.
pub type SharedTool = Arc<dyn Tool>;
