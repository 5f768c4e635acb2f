//! One terminal session: a program on a pseudo-terminal, its output numbered in the order it
//! was read and kept (newest first kept) for readers with a cursor.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::Utc;
use openbot_schema::{OutputChunk, TerminalOutput, TerminalSession};
use portable_pty::{ChildKiller, CommandBuilder, PtySize, native_pty_system};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{ComputerError, MAX_INPUT_BYTES, MAX_READ_WAIT};

/// The output a session keeps, in bytes; older chunks are dropped first.
const KEPT_BYTES: usize = 1024 * 1024;
/// The most one read returns, in bytes (at least one chunk is always returned).
const READ_BYTES: usize = 64 * 1024;
/// The longest a write waits for the terminal to take its input.
const WRITE_WAIT: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Log {
    chunks: VecDeque<OutputChunk>,
    kept_bytes: usize,
    /// The sequence of the last chunk added.
    last: u64,
    /// Bytes of a UTF-8 character split between two reads.
    partial: Vec<u8>,
    exited: bool,
    exit_code: Option<i32>,
}

impl Log {
    fn push(&mut self, bytes: &[u8]) {
        let mut data = std::mem::take(&mut self.partial);
        data.extend_from_slice(bytes);
        // Keep an incomplete character at the end for the next read.
        let cut = match std::str::from_utf8(&data) {
            Ok(_) => data.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => data.len(),
        };
        self.partial = data.split_off(cut);
        if data.is_empty() {
            return;
        }
        self.add(String::from_utf8_lossy(&data).into_owned());
    }

    fn add(&mut self, text: String) {
        self.last += 1;
        self.kept_bytes += text.len();
        self.chunks.push_back(OutputChunk {
            seq: self.last,
            text,
        });
        while self.kept_bytes > KEPT_BYTES && self.chunks.len() > 1 {
            if let Some(old) = self.chunks.pop_front() {
                self.kept_bytes -= old.text.len();
            }
        }
    }

    fn end(&mut self, exit_code: Option<i32>) {
        if !self.partial.is_empty() {
            let rest = std::mem::take(&mut self.partial);
            self.add(String::from_utf8_lossy(&rest).into_owned());
        }
        self.exited = true;
        self.exit_code = exit_code;
    }

    fn after(&self, session: &str, after: u64) -> TerminalOutput {
        let first = self.chunks.front().map_or(self.last + 1, |c| c.seq);
        let dropped = first.saturating_sub(after.saturating_add(1));
        let mut chunks = Vec::new();
        let mut bytes = 0;
        for chunk in self.chunks.iter().filter(|c| c.seq > after) {
            if !chunks.is_empty() && bytes + chunk.text.len() > READ_BYTES {
                break;
            }
            bytes += chunk.text.len();
            chunks.push(chunk.clone());
        }
        let next_cursor = chunks.last().map_or(after, |c| c.seq);
        let complete = next_cursor >= self.last;
        TerminalOutput {
            session_id: session.to_string(),
            chunks,
            next_cursor,
            dropped,
            exited: self.exited && complete,
            exit_code: if self.exited && complete {
                self.exit_code
            } else {
                None
            },
        }
    }
}

/// A running (or ended) terminal session.
pub(super) struct Terminal {
    view: TerminalSession,
    log: Arc<Mutex<Log>>,
    /// Bumped after every change of the log, so readers wait without polling.
    changed: watch::Receiver<u64>,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    killer: Mutex<Box<dyn ChildKiller + Send + Sync>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind: go on with it.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Terminal {
    /// Starts `command` (the shell when `None`) in `cwd` on a new pseudo-terminal.
    pub(super) fn start(
        id: String,
        cwd: &Path,
        command: Option<&str>,
    ) -> Result<Arc<Self>, ComputerError> {
        let unavailable =
            |what: &str| ComputerError::Unavailable(format!("the terminal cannot {what}"));
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 40,
                cols: 160,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|_| unavailable("open a pseudo-terminal"))?;
        let shell = std::env::var("SHELL")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "/bin/sh".into());
        let (mut builder, shown) = match command {
            Some(line) => {
                let mut builder = CommandBuilder::new("/bin/sh");
                builder.args(["-c", line]);
                (builder, line.to_string())
            }
            None => (CommandBuilder::new(&shell), shell.clone()),
        };
        builder.cwd(cwd);
        // Plain output: a model reads it, not a screen.
        builder.env("TERM", "dumb");
        builder.env("NO_COLOR", "1");
        let mut child = pair
            .slave
            .spawn_command(builder)
            .map_err(|_| unavailable("start its program"))?;
        // The session's end is the end of its output: only the child may hold the other side.
        drop(pair.slave);
        let mut reader = pair
            .master
            .try_clone_reader()
            .map_err(|_| unavailable("read its output"))?;
        let writer = pair
            .master
            .take_writer()
            .map_err(|_| unavailable("take its input"))?;
        let killer = child.clone_killer();
        let log = Arc::new(Mutex::new(Log::default()));
        let (tell, changed) = watch::channel(0u64);
        let reading = Arc::clone(&log);
        let master = pair.master;
        std::thread::Builder::new()
            .name(format!("openbot-terminal-{id}"))
            .spawn(move || {
                // Keep the master open while reading: dropping it ends the session.
                let _master = master;
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    match reader.read(&mut buf) {
                        // EIO is how Linux says the other side closed.
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            lock(&reading).push(&buf[..n]);
                            tell.send_modify(|v| *v += 1);
                        }
                    }
                }
                let code = child
                    .wait()
                    .ok()
                    .map(|status| i32::try_from(status.exit_code()).unwrap_or(i32::MAX));
                lock(&reading).end(code);
                tell.send_modify(|v| *v += 1);
            })
            .map_err(|_| unavailable("start its reader"))?;
        Ok(Arc::new(Self {
            view: TerminalSession {
                id,
                cwd: cwd.display().to_string(),
                command: shown,
                started_at: Utc::now(),
            },
            log,
            changed,
            writer: Arc::new(Mutex::new(writer)),
            killer: Mutex::new(killer),
        }))
    }

    pub(super) fn view(&self) -> &TerminalSession {
        &self.view
    }

    pub(super) fn exited(&self) -> bool {
        lock(&self.log).exited
    }

    /// Writes `input` as typed.
    pub(super) async fn write(&self, input: &str) -> Result<usize, ComputerError> {
        if input.len() > MAX_INPUT_BYTES {
            return Err(ComputerError::TooLarge(format!(
                "terminal input is at most {MAX_INPUT_BYTES} bytes"
            )));
        }
        if self.exited() {
            return Err(ComputerError::InvalidInput(format!(
                "the terminal session `{}` has ended",
                self.view.id
            )));
        }
        let writer = Arc::clone(&self.writer);
        let bytes = input.as_bytes().to_vec();
        let writing = tokio::task::spawn_blocking(move || {
            let mut writer = lock(&writer);
            writer.write_all(&bytes)?;
            writer.flush()?;
            Ok::<_, std::io::Error>(bytes.len())
        });
        // A program that reads no input lets the terminal's buffer fill: the write then waits
        // (until the program reads or ends), and the caller is told it may be partly in.
        match tokio::time::timeout(WRITE_WAIT, writing).await {
            Ok(Ok(Ok(n))) => Ok(n),
            // The bytes may be partly in the terminal: say so, never write them again.
            _ => Err(ComputerError::OutcomeUnknown(format!(
                "the write to terminal session `{}` failed or was not taken in time; its \
                 input may have been read in part",
                self.view.id
            ))),
        }
    }

    /// The output after `after`, waiting up to `wait` when there is none yet.
    pub(super) async fn read(
        &self,
        after: u64,
        wait: Duration,
        cancel: CancellationToken,
    ) -> TerminalOutput {
        let deadline = tokio::time::Instant::now() + wait.min(MAX_READ_WAIT);
        let mut changed = self.changed.clone();
        loop {
            // Mark the current version seen before reading, so no change is missed.
            changed.borrow_and_update();
            let output = lock(&self.log).after(&self.view.id, after);
            if !output.chunks.is_empty() || output.exited || output.dropped > 0 {
                return output;
            }
            tokio::select! {
                _ = cancel.cancelled() => return output,
                _ = tokio::time::sleep_until(deadline) => return output,
                res = changed.changed() => {
                    if res.is_err() {
                        // The reader ended; its last change is in the log.
                        return lock(&self.log).after(&self.view.id, after);
                    }
                }
            }
        }
    }

    /// Ends the program (its reader records the end).
    pub(super) fn kill(&self) {
        if !self.exited() {
            // Already gone is fine: the reader records how it ended.
            let _ = lock(&self.killer).kill();
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_between_reads_is_kept_whole() {
        let mut log = Log::default();
        let bytes = "é!".as_bytes();
        log.push(&bytes[..1]);
        assert!(log.chunks.is_empty());
        log.push(&bytes[1..]);
        assert_eq!(log.after("t", 0).text(), "é!");
    }

    #[test]
    fn chunks_are_numbered_from_one_without_gaps_and_read_by_cursor() {
        let mut log = Log::default();
        for text in ["a", "b", "c"] {
            log.push(text.as_bytes());
        }
        let all = log.after("t", 0);
        assert_eq!(
            all.chunks.iter().map(|c| c.seq).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(all.next_cursor, 3);
        let rest = log.after("t", 2);
        assert_eq!(rest.text(), "c");
        let none = log.after("t", 3);
        assert!(none.chunks.is_empty());
        assert_eq!(none.next_cursor, 3);
    }

    #[test]
    fn old_output_beyond_the_kept_size_is_counted_as_dropped() {
        let mut log = Log::default();
        let big = "x".repeat(KEPT_BYTES / 2 + 1);
        for _ in 0..3 {
            log.push(big.as_bytes());
        }
        let out = log.after("t", 0);
        assert_eq!(out.dropped, 2);
        assert_eq!(out.chunks[0].seq, 3);
    }

    #[test]
    fn the_end_is_reported_only_with_the_last_chunk() {
        let mut log = Log::default();
        for _ in 0..3 {
            log.push("y".repeat(READ_BYTES).as_bytes());
        }
        log.end(Some(0));
        let first = log.after("t", 0);
        assert!(!first.exited);
        assert_eq!(first.exit_code, None);
        let last = log.after("t", 2);
        assert!(last.exited);
        assert_eq!(last.exit_code, Some(0));
    }
}
