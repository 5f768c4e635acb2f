//! Code Mode's own operation: run a program against a Bot's tools without a model.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::ExecutionId;

/// A program to run against a Bot's tools (the body of an async JavaScript function).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct CodeRun {
    /// The program: `await tools.<name>(args)` calls a tool, `return` gives the result.
    pub code: String,
    /// The caller's name for this run: a retry with the same key and program answers the same
    /// execution and its result, and sends nothing again; the same key with another program
    /// or Bot is a 409 conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub command_key: Option<String>,
}

/// Why a program did not return a value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct CodeRunError {
    /// A stable code, e.g. `code_mode.fuel_exhausted` or `code_mode.program_error`.
    pub code: String,
    /// The sentence.
    pub message: String,
}

/// One console line of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct CodeConsoleLine {
    /// `log`, `warn` or `error`.
    pub level: String,
    /// The line.
    pub text: String,
}

/// What a program run produced: what the model would read as the `run_code` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct CodeRunResult {
    /// Whether the program returned a value.
    pub ok: bool,
    /// The returned value (JSON), when `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub value: Option<Value>,
    /// Why not, when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub error: Option<CodeRunError>,
    /// The console lines, in order.
    pub console: Vec<CodeConsoleLine>,
    /// The tool calls the program made.
    pub tool_calls: u32,
    /// The run's execution (on a server): its events (`GET /v1/executions/{id}/events`) show
    /// each call; a run that had not ended when the answer was given (202) ends there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub execution_id: Option<ExecutionId>,
}
