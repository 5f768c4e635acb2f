//! Reminders: a Bot's own durable timers. With its `reminders` setting on, a Bot is offered
//! the `remind` tool; a call commits the reminder (its rows and its timer) with the call's
//! result, and at its time the text reaches the Chat as input.
//!
//! - `tool`: the tool's definition and its arguments (`at` or `in`, and `text`).
//! - `set`: the timer and rows a call commits.
//! - `workflow`: the timer, a detached child of the Turn that set it.
//! - `service`: listing and cancelling; `store` / `sql`: the rows, once for both databases.

mod service;
mod set;
mod sql;
mod store;
mod tool;
mod workflow;

pub use service::{ReminderError, Reminders};
pub use set::{SetReminder, set_reminder};
pub use sql::NewReminder;
pub use store::{ReminderRow, ReminderStore};
pub use tool::{
    MAX_TEXT_CHARS, MAX_WAIT_MS, REMIND, RemindArgs, RemindOffer, iso_duration_ms, parse_args,
    remind_tool,
};
pub use workflow::{REMINDER, ReminderInput, ReminderWorkflow};
