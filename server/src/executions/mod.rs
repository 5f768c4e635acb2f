//! Executions as their callers see them: read one, cancel, pause or resume it, deliver the
//! result of a host-tool call it waits for. Every use case answers "not found" for work the
//! caller may not see (another member's, a service's, or, for a token limited to some Bots,
//! work for a Chat of another Bot); the rule is part of the query.

mod service;

pub use service::{Command, ExecutionError, Executions};
