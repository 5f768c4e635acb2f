//! Tools written in Kotlin or Swift: a [`HostTool`] object given to `connect` runs in this
//! process whenever a Bot's tool of the same name is called, in both modes.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use openbot_schema as schema;

use crate::error::OpenBotError;

/// What a host tool throws. Any exception will do (Kotlin: `throw IllegalStateException("no
/// such city")`); the model is given its message as the call's error result.
#[derive(Debug, Clone, PartialEq, thiserror::Error, uniffi::Error)]
pub enum HostToolError {
    /// The tool failed.
    #[error("{reason}")]
    Failed {
        /// Why, for the model.
        reason: String,
    },
}

impl HostToolError {
    fn into_reason(self) -> String {
        match self {
            Self::Failed { reason } => reason,
        }
    }
}

/// Any exception a host tool throws arrives here with its text (Kotlin gives
/// `ClassName: message`); the model is given the message alone.
impl From<uniffi::UnexpectedUniFFICallbackError> for HostToolError {
    fn from(error: uniffi::UnexpectedUniFFICallbackError) -> Self {
        Self::Failed {
            reason: strip_class_name(&error.reason).to_string(),
        }
    }
}

/// `java.lang.IllegalStateException: boom` -> `boom`; any other text stays as it is.
fn strip_class_name(text: &str) -> &str {
    match text.split_once(": ") {
        Some((class, rest))
            if !class.is_empty()
                && class
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '.' | '$' | '_')) =>
        {
            rest
        }
        _ => text,
    }
}

/// What a host tool knows about the call it serves.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct ToolCallContext {
    /// The execution the call belongs to.
    pub execution_id: String,
    /// The model step that asked for the call.
    pub step: u32,
    /// The provider's ID of the call.
    pub call_id: String,
    /// Stays the same if this exact call is retried; pass it to services that deduplicate
    /// writes.
    pub idempotency_key: String,
}

/// A tool implemented in Kotlin or Swift. `name` is the Bot tool it serves; `call` gets the
/// arguments as JSON text (already checked against the Bot's input schema) and returns the
/// text the model sees. Whatever it throws becomes an error result for the model, with the
/// exception's message; the Turn goes on. When the Turn is cancelled the call's coroutine
/// (Kotlin) or task (Swift) is cancelled.
#[uniffi::export(with_foreign)]
#[async_trait]
pub trait HostTool: Send + Sync {
    /// The name of the Bot tool this serves. Asked once, by `connect`.
    fn name(&self) -> Result<String, HostToolError>;

    /// Runs one call.
    async fn call(
        &self,
        arguments_json: String,
        context: ToolCallContext,
    ) -> Result<String, HostToolError>;
}

/// A [`HostTool`] as the core's [`Tool`]. The Bot's own definition is what the model sees and
/// what arguments are checked against; this one only carries the name.
pub(crate) struct ForeignTool {
    definition: schema::ToolDefinition,
    host: Arc<dyn HostTool>,
}

impl ForeignTool {
    /// Fails when the tool's `name()` throws.
    pub(crate) fn new(host: Arc<dyn HostTool>) -> Result<Self, OpenBotError> {
        let name = host.name().map_err(|e| {
            OpenBotError::invalid_input(format!("a tool's name() failed: {}", e.into_reason()))
        })?;
        Ok(Self {
            definition: schema::ToolDefinition {
                name,
                description: String::new(),
                input_schema: serde_json::json!({"type": "object"}),
            },
            host,
        })
    }
}

#[async_trait]
impl Tool for ForeignTool {
    fn definition(&self) -> &schema::ToolDefinition {
        &self.definition
    }

    async fn call(
        &self,
        arguments: serde_json::Value,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let ToolContext {
            execution_id,
            step,
            call_id,
            idempotency_key,
            cancel,
            from_code: _,
        } = context;
        let info = ToolCallContext {
            execution_id: execution_id.to_string(),
            step,
            call_id,
            idempotency_key,
        };
        let call = self.host.call(arguments.to_string(), info);
        // Dropping the foreign future cancels the Kotlin coroutine / Swift task behind it.
        tokio::select! {
            result = call => result
                .map(ToolOutput::text)
                .map_err(|e| ToolError::new(e.into_reason())),
            () = cancel.cancelled() => Err(ToolError::new("the Turn was cancelled")),
        }
    }
}
