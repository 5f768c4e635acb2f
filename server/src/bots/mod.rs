//! Bots on the server: private to their owner or shared in the organization. Access rules
//! are applied inside the database queries.

/// The rule of who may use a Bot, as SQL on the Bot row `$bot`: of organization `$org`, not
/// deleted, and shared or owned by member `$member`. The Bot store's reads and the identity
/// check of restored work both use it (a token's Bot limit is checked on its own).
macro_rules! bot_usable_by {
    ($bot:literal, $org:literal, $member:literal) => {
        concat!(
            $bot,
            ".organization_id = ",
            $org,
            " AND ",
            $bot,
            ".deleted_at IS NULL AND (",
            $bot,
            ".shared OR ",
            $bot,
            ".owner_member_id = ",
            $member,
            ")"
        )
    };
}
pub(crate) use bot_usable_by;

mod deletion;
mod service;
mod sql;
mod store;

pub use deletion::{
    BOT_DELETION, BotDeletionInput, BotDeletionWorkflow, MarkBotDeleted, bot_deletion_service,
    delete_bot,
};
pub use service::Bots;
pub use store::{BotRow, BotStore, bot_view, check_spec};
pub(crate) use store::{bot_limit, parse_spec};
