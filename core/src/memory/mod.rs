//! The in-memory mode: Turns run in this process and everything lives in memory.
//!
//! Nothing here survives the process: a Turn that is running when the process stops is gone,
//! with its events and history. Use the server for work that must survive a crash.

mod apps;
mod client;
mod host;
mod sealed;

pub use apps::OPERATIONS as APP_OPERATIONS;
pub use client::MemoryClient;
pub use host::MemoryHost;
pub use sealed::SealedErrors;
