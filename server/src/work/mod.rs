//! Child work: what a Turn's tool calls start besides answering at once.
//!
//! - `admission`: before a tool call runs, the approval rules, background tools and delegate
//!   tools decide whether it runs inline, is refused, or starts a child execution. The child
//!   (and an approval request) is committed with the call's result, in one transaction.
//! - `job`: the `tool_job` workflow: one saved tool call run in its own execution, once,
//!   after its approval when it needed one; its end and its notice commit together.
//! - `delegation`: the child Turn a delegate tool starts: the delegate Bot's saved definition,
//!   a private history, and every limit of its source.
//! - `notice`: what a notice says.
//!
//! A notice reaches the work that started the child while that work takes input (the model
//! sees it at its next step); otherwise a Chat keeps it as history and starts no Turn.

mod admission;
mod delegation;
mod job;
mod notice;

pub use admission::{Admission, Admitted};
pub use job::{JobInput, TOOL_JOB, ToolJobWorkflow};
pub(crate) use notice::final_answer;
pub use notice::notice_content;
