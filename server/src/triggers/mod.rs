//! Triggers: input that reaches a Chat on a schedule (a cron expression in a time zone) or
//! on a signed webhook call, sent as the member who created the trigger, with their rights
//! checked again at each firing.
//!
//! - `schedule`: cron expressions and time zones; the next slot after a time.
//! - `signature`: webhook secrets and HMAC-SHA256 signatures, stale timestamps refused.
//! - `firing`: sending input as a saved identity, its rights read anew.
//! - `workflow`: a schedule's durable timer, work of the organization's `triggers` service.
//! - `service`: the use cases; `store` / `sql`: triggers and firings, once for both databases.

mod firing;
mod schedule;
mod service;
mod signature;
mod sql;
mod store;
mod workflow;

pub use firing::{SendAs, SendError, Sent, send_as};
pub use schedule::{MIN_INTERVAL_MS, Schedule, ScheduleError};
pub use service::{Delivery, Received, TriggerError, Triggers, firing_view, trigger_view};
pub use signature::{
    DELIVERY_HEADER, SECRET_PREFIX, SIGNATURE_HEADER, SignatureError, TIMESTAMP_HEADER,
    TOLERANCE_MS, sign, verify,
};
pub use store::{FiringRow, NewTrigger, TriggerRow, TriggerStore};
pub use workflow::{
    FiringStores, ScheduleInput, ScheduleWorkflow, TRIGGER_SCHEDULE, schedule_submission,
    triggers_service,
};
