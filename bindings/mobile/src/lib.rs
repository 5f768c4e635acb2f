//! OpenBot for Kotlin and Swift.
//!
//! A thin uniffi layer over [`openbot_core::connect`] and the [`openbot_core::Client`] trait:
//! `connect("memory://", ..)` runs Bots in this process, `connect("http://host:port", token, ..)`
//! talks to a server, and both return the same [`Client`] object. Every call is `suspend` in
//! Kotlin and `async` in Swift; the work runs on one Tokio runtime owned by this library, so a
//! cancelled coroutine stops waiting but cancels nothing: cancellation is an explicit call
//! ([`Client::cancel_execution`], [`Client::stop`], [`Client::close`]).
//!
//! Errors cross as one [`OpenBotError`] with the stable code, a reason, and for faults the
//! category and error ID. Nothing here panics across the boundary.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod client;
mod error;
mod events;
mod operations;
mod runtime;
mod tools;
mod types;

pub use client::{ApiBytes, Client, connect};
pub use error::OpenBotError;
pub use events::EventStream;
pub use tools::{HostTool, HostToolError, ToolCallContext};
pub use types::*;

uniffi::setup_scaffolding!("openbot");
