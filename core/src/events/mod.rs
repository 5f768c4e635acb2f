//! Event logs and observation: each execution's events in order, read from any cursor.

mod log;

pub use log::{EventLog, EventStream, OBSERVE_PAGE};
