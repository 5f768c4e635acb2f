//! Bots on the server: private to their owner or shared in the organization. Access rules
//! are applied inside the database queries.

mod deletion;
mod sql;
mod store;

pub use deletion::{
    BOT_DELETION, BotDeletionInput, BotDeletionWorkflow, MarkBotDeleted, bot_deletion_service,
    delete_bot,
};
pub use store::{BotRow, BotStore, bot_view, check_spec};
pub(crate) use store::{bot_limit, parse_spec};
