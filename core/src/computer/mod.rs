//! Computers: a machine a Bot works on. A Computer offers terminal sessions (a real
//! pseudo-terminal, its output numbered and read by cursor) and text file reads and writes
//! inside the folders its owner allowed (docs/computers.md).
//!
//! - [`Computer`] is what a Computer offers, wherever the machine is.
//! - [`LocalComputer`] is this machine: `connect("memory://")` attaches it with
//!   [`crate::ConnectOptions::computer`], an [`crate::Agent`] with
//!   [`crate::AgentBuilder::computer`].
//! - [`computer_tools`] are the tools a Bot gets on a Computer.
//! - [`AllowedFolders`] is the one rule for what its file tools reach.
//! - [`link`] is what a paired machine's agent and its node say to each other.
//! - [`connector`] is the local MCP servers a paired machine publishes over its link.

pub mod connector;
mod folders;
pub mod link;
mod local;
mod terminal;
mod tools;

use std::time::Duration;

use async_trait::async_trait;
use openbot_schema::{ComputerFile, ErrorCode, TerminalOutput, TerminalSession};
use tokio_util::sync::CancellationToken;

pub use folders::AllowedFolders;
pub use local::{ComputerOptions, LocalComputer};
pub use tools::{TOOL_NAMES, computer_tools, reads_only, tool_definition};

/// The most a file read or write carries, in bytes.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// The most one terminal write carries, in bytes.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;
/// The longest a terminal read waits for output.
pub const MAX_READ_WAIT: Duration = Duration::from_secs(30);

/// Why a Computer refused or failed a request. Messages name the caller's own input and the
/// kind of failure only: they go to models.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComputerError {
    /// The request breaks a rule; the message says which.
    #[error("{0}")]
    InvalidInput(String),
    /// The path leaves the allowed folders (by name or through a symbolic link).
    #[error("`{0}` is outside the folders this Computer allows")]
    OutsideFolders(String),
    /// No such file, folder or terminal session.
    #[error("{0}")]
    NotFound(String),
    /// The file or input is larger than a Computer carries.
    #[error("{0}")]
    TooLarge(String),
    /// The Computer cannot do this now (its terminal is off, too many sessions, the machine
    /// is not connected); nothing was done.
    #[error("{0}")]
    Unavailable(String),
    /// An interactive write may have reached the machine but its answer is lost: it is never
    /// sent again on its own.
    #[error("{0}")]
    OutcomeUnknown(String),
}

impl ComputerError {
    /// An I/O failure on `path`, named by its kind.
    pub(crate) fn from_io(path: &str, err: &std::io::Error) -> Self {
        let reason = folders::io_reason(err);
        match err.kind() {
            std::io::ErrorKind::NotFound => Self::NotFound(format!("`{path}` does not exist")),
            _ => Self::InvalidInput(format!("`{path}`: {reason}")),
        }
    }

    /// The error code a client sees.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::InvalidInput(_) => ErrorCode::InvalidInput,
            Self::OutsideFolders(_) => ErrorCode::Forbidden,
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::TooLarge(_) => ErrorCode::PayloadTooLarge,
            Self::Unavailable(_) | Self::OutcomeUnknown(_) => ErrorCode::Unavailable,
        }
    }
}

impl From<ComputerError> for crate::Error {
    fn from(err: ComputerError) -> Self {
        crate::Error::new(err.code(), err.to_string())
    }
}

impl From<ComputerError> for crate::tool::ToolError {
    fn from(err: ComputerError) -> Self {
        match err {
            ComputerError::OutcomeUnknown(message) => Self::outcome_unknown(message),
            other => Self::new(other.to_string()),
        }
    }
}

/// How to start a terminal session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartTerminal {
    /// The folder to start in (inside an allowed folder); `None` is the first allowed folder.
    pub cwd: Option<String>,
    /// A command line to run (by `sh -c`); `None` runs the machine's shell.
    pub command: Option<String>,
}

/// What a Computer offers, wherever the machine is. Every method checks the allowed-folders
/// rule on the machine itself, so no caller can widen it.
#[async_trait]
pub trait Computer: Send + Sync {
    /// Starts a terminal session.
    async fn start_terminal(&self, start: StartTerminal) -> Result<TerminalSession, ComputerError>;

    /// Writes input to a session as typed (`\n` is Enter, `\u0003` is Ctrl-C). An
    /// interactive write: a lost answer is [`ComputerError::OutcomeUnknown`], never resent.
    /// Returns the bytes written.
    async fn write_terminal(&self, session: &str, input: &str) -> Result<usize, ComputerError>;

    /// The session's output after chunk `after`, waiting up to `wait` (at most
    /// [`MAX_READ_WAIT`]) for some when there is none yet; returns early when `cancel` fires.
    async fn read_terminal(
        &self,
        session: &str,
        after: u64,
        wait: Duration,
        cancel: CancellationToken,
    ) -> Result<TerminalOutput, ComputerError>;

    /// Ends a session's program and forgets the session.
    async fn close_terminal(&self, session: &str) -> Result<(), ComputerError>;

    /// The sessions that are open, oldest first.
    async fn terminals(&self) -> Result<Vec<TerminalSession>, ComputerError>;

    /// Reads a UTF-8 text file of at most [`MAX_FILE_BYTES`].
    async fn read_file(&self, path: &str) -> Result<ComputerFile, ComputerError>;

    /// Writes (creates or replaces) a text file of at most [`MAX_FILE_BYTES`]; its folder
    /// must exist. Returns the file as written, without its content.
    async fn write_file(&self, path: &str, content: &str) -> Result<ComputerFile, ComputerError>;
}
