//! Code Mode: model-written JavaScript run in a wasmtime sandbox against a Bot's tools.
//!
//! The guest is QuickJS compiled to wasm32-wasip1 (codemode/guest). The host compiles it
//! once per process ([`Sandbox::shared`]) and runs each program in its own Store with fuel,
//! a memory limit, a stack limit, a tool-call limit and an output limit. The guest has no
//! file system, network, environment or clock of its own: time and random numbers are fixed
//! per run from [`RunInput::seed`] and [`RunInput::now_ms`]. Every tool call leaves the
//! sandbox through [`ToolHost`], which applies the caller's rules (rights, approvals, replay).

mod engine;
mod host;
mod imports;
mod limits;
mod outcome;
mod run;
mod seed;
mod typescript;

pub use engine::{Sandbox, SandboxError};
pub use host::{ToolHost, ToolReply};
pub use limits::{DEFAULT_WALL_MS, Limits};
pub use outcome::{ConsoleLine, LimitKind, ProgramError, RunOutcome, RunResult};
pub use run::RunInput;
pub use seed::{derive_seed, sub_key};
pub use typescript::{ToolSignature, declaration, identifier_ok};
