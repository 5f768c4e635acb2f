use serde_json::Value;

/// The answer to one tool call from the program.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolReply {
    /// The tool's result: `await tools.x()` resolves with it.
    Ok(Value),
    /// The tool failed: `await tools.x()` throws a `ToolError` with this code and message,
    /// which the program may catch.
    Failed {
        /// The stable error code.
        code: String,
        /// The sentence.
        message: String,
    },
    /// End the whole run now (call-order mismatch, stale owner, a wait for approval): the
    /// program cannot catch this.
    Stop {
        /// The stable code.
        code: String,
        /// The sentence.
        message: String,
    },
}

/// Executes the tool calls of a run. `index` counts the run's calls from 0, so a host can
/// key each call (e.g. the code call's key plus the index) and replay saved results in order.
#[async_trait::async_trait]
pub trait ToolHost: Send + Sync {
    /// Runs call number `index` of tool `name` with `arguments`.
    async fn call(&self, index: u32, name: &str, arguments: Value) -> ToolReply;
}
