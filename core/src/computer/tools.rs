//! The tools a Bot gets on a Computer. Their answers are the JSON of the schema's Computer
//! types, so a program reads them as a model does.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use openbot_schema::ToolDefinition;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Computer, MAX_READ_WAIT, StartTerminal};
use crate::tool::{SharedTool, Tool, ToolContext, ToolError, ToolOutput};

/// The Computer tools' names: the terminal's four, then the file tools.
pub const TOOL_NAMES: [&str; 6] = [
    "computer_terminal_start",
    "computer_terminal_write",
    "computer_terminal_read",
    "computer_terminal_close",
    "computer_file_read",
    "computer_file_write",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Start,
    Write,
    Read,
    Close,
    FileRead,
    FileWrite,
}

const OPS: [Op; 6] = [
    Op::Start,
    Op::Write,
    Op::Read,
    Op::Close,
    Op::FileRead,
    Op::FileWrite,
];

impl Op {
    fn name(self) -> &'static str {
        TOOL_NAMES[self as usize]
    }

    fn terminal(self) -> bool {
        matches!(self, Op::Start | Op::Write | Op::Read | Op::Close)
    }

    fn definition(self) -> ToolDefinition {
        let session = json!({"type": "string", "description": "The session's ID, as computer_terminal_start answered."});
        let path = json!({"type": "string", "minLength": 1, "description": "The file's path: absolute, or relative to the first allowed folder. Only paths inside the allowed folders can be reached."});
        let (description, schema) = match self {
            Op::Start => (
                "Starts a terminal session on the Computer: its shell, or one command line. \
                 Answers the session's ID; read its output with computer_terminal_read.",
                json!({"type": "object", "properties": {
                    "cwd": {"type": "string", "description": "The folder to start in (inside an allowed folder); the first allowed folder if left out."},
                    "command": {"type": "string", "minLength": 1, "description": "A command line to run instead of the shell; the session ends when it ends."}
                }, "additionalProperties": false}),
            ),
            Op::Write => (
                "Types input into a terminal session, as a person would: end a command with \
                 \\n; \\u0003 is Ctrl-C. Each write is sent once, never repeated.",
                json!({"type": "object", "properties": {
                    "session_id": session,
                    "input": {"type": "string", "minLength": 1}
                }, "required": ["session_id", "input"], "additionalProperties": false}),
            ),
            Op::Read => (
                "Reads a terminal session's output after a cursor (0: from the start), \
                 waiting up to wait_ms for some. Answers numbered chunks, next_cursor to read \
                 on from, and whether the program exited (with its exit code).",
                json!({"type": "object", "properties": {
                    "session_id": session,
                    "after": {"type": "integer", "minimum": 0, "description": "The next_cursor of the last read; 0 reads from the start."},
                    "wait_ms": {"type": "integer", "minimum": 0, "maximum": MAX_READ_WAIT.as_millis() as u64, "description": "How long to wait for output when there is none yet."}
                }, "required": ["session_id"], "additionalProperties": false}),
            ),
            Op::Close => (
                "Ends a terminal session's program and closes the session.",
                json!({"type": "object", "properties": {"session_id": session},
                       "required": ["session_id"], "additionalProperties": false}),
            ),
            Op::FileRead => (
                "Reads a UTF-8 text file (at most 1 MiB) inside the Computer's allowed folders.",
                json!({"type": "object", "properties": {"path": path},
                       "required": ["path"], "additionalProperties": false}),
            ),
            Op::FileWrite => (
                "Creates or replaces a UTF-8 text file (at most 1 MiB) inside the Computer's \
                 allowed folders; its folder must exist.",
                json!({"type": "object", "properties": {"path": path, "content": {"type": "string"}},
                       "required": ["path", "content"], "additionalProperties": false}),
            ),
        };
        ToolDefinition {
            name: self.name().to_string(),
            description: description.to_string(),
            input_schema: schema,
        }
    }
}

#[derive(Deserialize)]
struct StartArgs {
    cwd: Option<String>,
    command: Option<String>,
}

#[derive(Deserialize)]
struct WriteArgs {
    session_id: String,
    input: String,
}

#[derive(Deserialize)]
struct ReadArgs {
    session_id: String,
    #[serde(default)]
    after: u64,
    #[serde(default)]
    wait_ms: u64,
}

#[derive(Deserialize)]
struct SessionArgs {
    session_id: String,
}

#[derive(Deserialize)]
struct FileArgs {
    path: String,
}

#[derive(Deserialize)]
struct FileWriteArgs {
    path: String,
    content: String,
}

struct ComputerTool {
    op: Op,
    definition: ToolDefinition,
    computer: Arc<dyn Computer>,
}

fn args<T: serde::de::DeserializeOwned>(arguments: Value) -> Result<T, ToolError> {
    serde_json::from_value(arguments).map_err(|e| ToolError::new(format!("bad arguments: {e}")))
}

fn answer<T: serde::Serialize>(value: &T) -> Result<ToolOutput, ToolError> {
    serde_json::to_value(value)
        .map(|v| ToolOutput::json(&v))
        .map_err(|_| ToolError::new("the answer could not be written"))
}

#[async_trait]
impl Tool for ComputerTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let computer = &self.computer;
        match self.op {
            Op::Start => {
                let a: StartArgs = args(arguments)?;
                let start = StartTerminal {
                    cwd: a.cwd,
                    command: a.command,
                };
                answer(&computer.start_terminal(start).await?)
            }
            Op::Write => {
                let a: WriteArgs = args(arguments)?;
                let written = computer.write_terminal(&a.session_id, &a.input).await?;
                Ok(ToolOutput::json(&json!({"written": written})))
            }
            Op::Read => {
                let a: ReadArgs = args(arguments)?;
                let wait = Duration::from_millis(a.wait_ms);
                let cancel = context.cancel.clone();
                answer(
                    &computer
                        .read_terminal(&a.session_id, a.after, wait, cancel)
                        .await?,
                )
            }
            Op::Close => {
                let a: SessionArgs = args(arguments)?;
                computer.close_terminal(&a.session_id).await?;
                Ok(ToolOutput::json(&json!({"closed": a.session_id})))
            }
            Op::FileRead => {
                let a: FileArgs = args(arguments)?;
                answer(&computer.read_file(&a.path).await?)
            }
            Op::FileWrite => {
                let a: FileWriteArgs = args(arguments)?;
                let file = computer.write_file(&a.path, &a.content).await?;
                Ok(ToolOutput::json(
                    &json!({"path": file.path, "size": file.size}),
                ))
            }
        }
    }
}

/// The definition of the Computer tool `name`, as every host offers it; `None` for a name
/// that is no Computer tool.
pub fn tool_definition(name: &str) -> Option<ToolDefinition> {
    OPS.iter()
        .find(|op| op.name() == name)
        .map(|op| op.definition())
}

/// Whether the Computer tool `name` only reads (a terminal's output, a file): it changes
/// nothing on the machine, so it may be sent again after a lost answer and needs no approval
/// by default. Every other Computer tool changes the machine.
pub fn reads_only(name: &str) -> bool {
    name == Op::Read.name() || name == Op::FileRead.name()
}

/// The tools a Bot gets on `computer`: file reads and writes, and with `terminal` the four
/// terminal tools. Each handler calls the Computer, which checks its own rules.
pub fn computer_tools(computer: Arc<dyn Computer>, terminal: bool) -> Vec<SharedTool> {
    OPS.iter()
        .filter(|op| terminal || !op.terminal())
        .map(|&op| {
            Arc::new(ComputerTool {
                op,
                definition: op.definition(),
                computer: Arc::clone(&computer),
            }) as SharedTool
        })
        .collect()
}
