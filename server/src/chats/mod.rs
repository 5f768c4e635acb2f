//! Chats on the server: a member's conversation with a Bot. A Chat's input is the queue of its
//! Turn executions: the engine runs them one at a time, in order, and deleting a Chat closes its
//! admission gate before it cancels what runs.

mod deletion;
mod history;
mod plan;
mod routing;
mod service;
mod sql;
mod store;

pub use deletion::{
    CHAT_DELETION, ChatDeletionWorkflow, DeletionInput, deletion_service,
    deletion_submission as chat_deletion_submission,
};
pub use history::{HistoryEntry, HistoryPosition, chat_history, chat_history_after};
pub(crate) use plan::PlanApproved;
pub use plan::PlanOffer;
pub use routing::{RouteRequest, Slot, ToolRouting, ToolSource, TurnOffer};
pub use service::{ChatError, Chats};
pub use store::{ChatRow, ChatStore};
