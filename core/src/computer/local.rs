//! This machine as a Computer: the driver `connect("memory://")` and an Agent attach, and
//! the one the Computer agent serves.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use openbot_schema::{ComputerFile, TerminalOutput, TerminalSession};
use tokio_util::sync::CancellationToken;

use super::terminal::Terminal;
use super::{AllowedFolders, Computer, ComputerError, MAX_FILE_BYTES, StartTerminal};

/// The most terminal sessions open at once on one Computer.
pub const MAX_SESSIONS: usize = 16;

/// How this machine is offered as a Computer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputerOptions {
    /// The folders its file tools reach and its terminals start in; the first is where
    /// relative paths start.
    pub folders: Vec<PathBuf>,
    /// Whether it offers terminal sessions. A terminal runs programs as the user running this
    /// process, who can reach anything that user can: turn it off to offer files only.
    pub terminal: bool,
    /// What its terminal session IDs start with (`t`, so `t1`, `t2`, ...). A paired machine's
    /// agent makes it unique to its run, so that a restarted agent's sessions never take the
    /// IDs of earlier ones, whose output the server keeps.
    pub session_prefix: String,
}

impl ComputerOptions {
    /// Files and terminals in these folders.
    pub fn new<P: Into<PathBuf>>(folders: impl IntoIterator<Item = P>) -> Self {
        Self {
            folders: folders.into_iter().map(Into::into).collect(),
            terminal: true,
            session_prefix: "t".into(),
        }
    }

    /// The same options, naming terminal sessions `<prefix>1`, `<prefix>2`, ...
    pub fn with_session_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.session_prefix = prefix.into();
        self
    }

    /// Files only: no terminal sessions.
    pub fn without_terminal(mut self) -> Self {
        self.terminal = false;
        self
    }
}

/// This machine as a Computer. Dropping it ends its terminal sessions' programs.
pub struct LocalComputer {
    folders: AllowedFolders,
    terminal: bool,
    sessions: Mutex<BTreeMap<u64, Arc<Terminal>>>,
    next: AtomicU64,
    prefix: String,
}

impl std::fmt::Debug for LocalComputer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalComputer")
            .field("folders", &self.folders)
            .field("terminal", &self.terminal)
            .finish_non_exhaustive()
    }
}

fn session_number(prefix: &str, id: &str) -> Result<u64, ComputerError> {
    id.strip_prefix(prefix)
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| ComputerError::NotFound(format!("no terminal session `{id}`")))
}

impl LocalComputer {
    /// This machine, offered as `options` say; a folder that does not exist is
    /// `InvalidInput`.
    pub fn new(options: ComputerOptions) -> Result<Self, ComputerError> {
        Ok(Self {
            folders: AllowedFolders::new(&options.folders)?,
            terminal: options.terminal,
            sessions: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(1),
            prefix: options.session_prefix,
        })
    }

    /// The allowed folders, resolved.
    pub fn folders(&self) -> &AllowedFolders {
        &self.folders
    }

    /// Whether it offers terminal sessions.
    pub fn has_terminal(&self) -> bool {
        self.terminal
    }

    fn sessions(&self) -> MutexGuard<'_, BTreeMap<u64, Arc<Terminal>>> {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn session(&self, id: &str) -> Result<Arc<Terminal>, ComputerError> {
        let n = session_number(&self.prefix, id)?;
        self.sessions()
            .get(&n)
            .cloned()
            .ok_or_else(|| ComputerError::NotFound(format!("no terminal session `{id}`")))
    }

    fn check_terminal(&self) -> Result<(), ComputerError> {
        if self.terminal {
            Ok(())
        } else {
            Err(ComputerError::Unavailable(
                "this Computer offers no terminal sessions".into(),
            ))
        }
    }
}

impl Drop for LocalComputer {
    fn drop(&mut self) {
        for session in self.sessions().values() {
            session.kill();
        }
    }
}

#[async_trait]
impl Computer for LocalComputer {
    async fn start_terminal(&self, start: StartTerminal) -> Result<TerminalSession, ComputerError> {
        self.check_terminal()?;
        let cwd = self.folders.folder(start.cwd.as_deref())?;
        if start.command.as_deref().is_some_and(str::is_empty) {
            return Err(ComputerError::InvalidInput("the command is empty".into()));
        }
        let mut sessions = self.sessions();
        if sessions.len() >= MAX_SESSIONS {
            return Err(ComputerError::Unavailable(format!(
                "{MAX_SESSIONS} terminal sessions are open: close one first"
            )));
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let terminal = Terminal::start(
            format!("{}{n}", self.prefix),
            &cwd,
            start.command.as_deref(),
        )?;
        let view = terminal.view().clone();
        sessions.insert(n, terminal);
        Ok(view)
    }

    async fn write_terminal(&self, session: &str, input: &str) -> Result<usize, ComputerError> {
        self.check_terminal()?;
        self.session(session)?.write(input).await
    }

    async fn read_terminal(
        &self,
        session: &str,
        after: u64,
        wait: Duration,
        cancel: CancellationToken,
    ) -> Result<TerminalOutput, ComputerError> {
        self.check_terminal()?;
        Ok(self.session(session)?.read(after, wait, cancel).await)
    }

    async fn close_terminal(&self, session: &str) -> Result<(), ComputerError> {
        self.check_terminal()?;
        let n = session_number(&self.prefix, session)?;
        let removed = self.sessions().remove(&n);
        match removed {
            Some(terminal) => {
                terminal.kill();
                Ok(())
            }
            None => Err(ComputerError::NotFound(format!(
                "no terminal session `{session}`"
            ))),
        }
    }

    async fn terminals(&self) -> Result<Vec<TerminalSession>, ComputerError> {
        Ok(self.sessions().values().map(|t| t.view().clone()).collect())
    }

    async fn read_file(&self, path: &str) -> Result<ComputerFile, ComputerError> {
        let resolved = self.folders.existing(path)?;
        let shown = path.to_string();
        tokio::task::spawn_blocking(move || {
            let meta =
                std::fs::metadata(&resolved).map_err(|e| ComputerError::from_io(&shown, &e))?;
            if meta.is_dir() {
                return Err(ComputerError::InvalidInput(format!(
                    "`{shown}` is a folder"
                )));
            }
            if meta.len() > MAX_FILE_BYTES {
                return Err(ComputerError::TooLarge(format!(
                    "`{shown}` has {} bytes; a read carries at most {MAX_FILE_BYTES}",
                    meta.len()
                )));
            }
            let bytes = std::fs::read(&resolved).map_err(|e| ComputerError::from_io(&shown, &e))?;
            let size = bytes.len() as u64;
            let content = String::from_utf8(bytes)
                .map_err(|_| ComputerError::InvalidInput(format!("`{shown}` is not UTF-8 text")))?;
            Ok(ComputerFile {
                path: resolved.display().to_string(),
                content,
                size,
            })
        })
        .await
        .map_err(|_| ComputerError::Unavailable("the file read stopped".into()))?
    }

    async fn write_file(&self, path: &str, content: &str) -> Result<ComputerFile, ComputerError> {
        if content.len() as u64 > MAX_FILE_BYTES {
            return Err(ComputerError::TooLarge(format!(
                "a write carries at most {MAX_FILE_BYTES} bytes"
            )));
        }
        let target = self.folders.writable(path)?;
        let shown = path.to_string();
        let bytes = content.as_bytes().to_vec();
        tokio::task::spawn_blocking(move || {
            use std::io::Write;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            // The checked name must not turn into a link between the check and the open.
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.custom_flags(libc::O_NOFOLLOW);
            }
            let mut file = options
                .open(&target)
                .map_err(|e| ComputerError::from_io(&shown, &e))?;
            file.write_all(&bytes)
                .and_then(|()| file.flush())
                .map_err(|e| ComputerError::from_io(&shown, &e))?;
            Ok(ComputerFile {
                path: target.display().to_string(),
                content: String::new(),
                size: bytes.len() as u64,
            })
        })
        .await
        .map_err(|_| ComputerError::Unavailable("the file write stopped".into()))?
    }
}
