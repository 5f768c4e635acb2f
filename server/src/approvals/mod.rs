//! Approvals: rules per organization, Bot and member that allow, ask for or deny tool calls,
//! and the requests an `ask` creates.
//!
//! A call a rule asks about is answered at once ("waits for approval"), so the Turn goes on
//! and may end; the call itself is saved in a waiting `tool_job` execution, written with its
//! request in the same transaction as the call's result. A decision closes the request, writes
//! its audit entry and its notice, and wakes the job, in one transaction (see
//! `RequestStore::decide_request`); an approved job runs the call once. A decision never grants what
//! the platform, the member or the original credential denies now: the saved identity is
//! checked when the decision is made and again before the call is sent.

mod rules;
mod service;
mod sql;
mod store;

pub use rules::{DEFAULT_EXPIRY_MS, RuleRow, Verdict, glob, verdict};
pub use service::{ApprovalError, Approvals};
pub use store::RuleStore;
