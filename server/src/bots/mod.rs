//! Bots on the server: private to their owner or shared in the organization. Access rules
//! are applied inside the database queries.

mod sql;
mod store;

pub use store::{BotRow, BotStore, bot_view, check_spec};
pub(crate) use store::{bot_limit, parse_spec};
