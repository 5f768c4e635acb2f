//! Printing results: JSON for programs, short text for people, and a progress indicator on
//! a terminal while a command waits.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use serde::Serialize;

/// How a command prints.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// JSON instead of text.
    pub json: bool,
}

impl Output {
    /// Prints `value` as JSON, or `text` of it for people.
    pub fn print<T: Serialize>(
        &self,
        value: &T,
        text: impl FnOnce(&T) -> String,
    ) -> anyhow::Result<()> {
        let mut stdout = std::io::stdout().lock();
        if self.json {
            writeln!(stdout, "{}", serde_json::to_string(value)?)?;
        } else {
            writeln!(stdout, "{}", text(value))?;
        }
        Ok(())
    }
}

/// A spinner on standard error while waiting, only when standard error is a terminal and
/// nothing else is printed; stopped (and erased) when dropped.
pub struct Progress {
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Progress {
    /// Starts showing `label`.
    pub fn start(label: &'static str) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self { task: None };
        }
        let task = tokio::spawn(async move {
            let frames = ['|', '/', '-', '\\'];
            for frame in frames.iter().cycle() {
                eprint!("\r{frame} {label}");
                let _ = std::io::stderr().flush();
                tokio::time::sleep(Duration::from_millis(120)).await;
            }
        });
        Self { task: Some(task) }
    }

    /// Stops and erases the indicator.
    pub fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}
