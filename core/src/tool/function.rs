//! Tools made from async closures.

use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;
use openbot_schema::ToolDefinition;
use serde_json::Value;

use super::{Tool, ToolContext, ToolError, ToolOutput};

type BoxedFuture = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send>>;
type Handler = dyn Fn(Value, ToolContext) -> BoxedFuture + Send + Sync;

/// A tool whose handler is an async closure.
///
/// ```
/// use openbot_core::tool::{FnTool, ToolOutput};
/// use serde_json::json;
///
/// let add = FnTool::new(
///     "add",
///     "Adds two numbers.",
///     json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
///            "required": ["a", "b"]}),
///     |args, _ctx| async move {
///         let sum = args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
///         Ok(ToolOutput::text(sum.to_string()))
///     },
/// );
/// ```
pub struct FnTool {
    definition: ToolDefinition,
    handler: Box<Handler>,
}

impl FnTool {
    /// A tool with this name, description, input schema and handler.
    pub fn new<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: F,
    ) -> Self
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        let definition = ToolDefinition {
            name: name.into(),
            description: description.into(),
            input_schema,
        };
        Self {
            definition,
            handler: Box::new(move |args, ctx| Box::pin(handler(args, ctx))),
        }
    }
}

impl std::fmt::Debug for FnTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool")
            .field("definition", &self.definition)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Tool for FnTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        (self.handler)(arguments, context).await
    }
}
