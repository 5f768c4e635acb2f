use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Which limit ended a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// The fuel (CPU) budget ran out: an endless or too long computation.
    Fuel,
    /// The memory limit was reached.
    Memory,
    /// The stack overflowed: too deep recursion.
    Stack,
    /// More tool calls than allowed.
    ToolCalls,
    /// More console output or a larger return value than allowed.
    Output,
    /// The program text is too long.
    CodeSize,
    /// The run took longer than its wall time ([`crate::Limits::wall_ms`]).
    WallTime,
}

impl LimitKind {
    /// The stable error code of this limit.
    pub fn code(self) -> &'static str {
        match self {
            Self::Fuel => "code_mode.fuel_exhausted",
            Self::Memory => "code_mode.memory_limit",
            Self::Stack => "code_mode.stack_overflow",
            Self::ToolCalls => "code_mode.tool_call_limit",
            Self::Output => "code_mode.output_limit",
            Self::CodeSize => "code_mode.code_too_long",
            Self::WallTime => "code_mode.deadline_exceeded",
        }
    }
}

/// Why a program did not return a value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProgramError {
    /// The program threw (or did not compile): the JavaScript error's name and message.
    Thrown {
        /// The error's name, e.g. `TypeError`, `ToolError`, `SyntaxError`.
        name: String,
        /// The error's message.
        message: String,
        /// A tool error's stable code, when the error came from a tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
    /// A limit ended the run.
    Limit {
        /// Which limit.
        limit: LimitKind,
        /// A sentence for the model.
        message: String,
    },
    /// The host stopped the run (a call-order mismatch on replay, a stale owner, a wait).
    Stopped {
        /// The host's stable code.
        code: String,
        /// The host's sentence.
        message: String,
    },
}

impl ProgramError {
    /// The stable code of this error.
    pub fn code(&self) -> String {
        match self {
            Self::Thrown {
                code: Some(code), ..
            } => code.clone(),
            Self::Thrown { .. } => "code_mode.program_error".into(),
            Self::Limit { limit, .. } => limit.code().into(),
            Self::Stopped { code, .. } => code.clone(),
        }
    }

    /// The sentence for the model.
    pub fn message(&self) -> String {
        match self {
            Self::Thrown { name, message, .. } => format!("{name}: {message}"),
            Self::Limit { message, .. } | Self::Stopped { message, .. } => message.clone(),
        }
    }
}

/// One console line of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsoleLine {
    /// `log`, `warn` or `error`.
    pub level: String,
    /// The line as the program printed it.
    pub text: String,
}

/// The value a program returned, or why it did not.
pub type RunResult = Result<Value, ProgramError>;

/// What one run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The return value (JSON) or the error.
    pub result: RunResult,
    /// The console lines, in order, bounded by the output limit.
    pub console: Vec<ConsoleLine>,
    /// Tool calls the program made.
    pub tool_calls: u32,
    /// Fuel the run used.
    pub fuel_used: u64,
}

impl RunOutcome {
    /// The outcome as the code tool's result for the model: `{ok, value | error, console}`.
    pub fn to_tool_result(&self) -> Value {
        let console: Vec<Value> = self
            .console
            .iter()
            .map(|l| json!({"level": l.level, "text": l.text}))
            .collect();
        match &self.result {
            Ok(value) => {
                json!({"ok": true, "value": value, "console": console, "tool_calls": self.tool_calls})
            }
            Err(e) => json!({
                "ok": false,
                "error": {"code": e.code(), "message": e.message()},
                "console": console,
                "tool_calls": self.tool_calls,
            }),
        }
    }
}
