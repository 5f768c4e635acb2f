//! Who a Turn's or a learning's work acts as on a Bot's memories: the Chat's member, with the
//! right to change shared memories only as the API gives it (the Bot's owner or an admin), read
//! from the saved identity's current rights, never from the work's input.

use uuid::Uuid;

use super::store::Reader;
use crate::identity::{ExecutionIdentity, IdentityCheckError, IdentityStore, current_caller};

/// The reader `identity`'s work acts as on a Bot owned by `bot_owner`. It may change shared
/// memories only when it acts for itself (the actor is the Chat's member) and that member is
/// the Bot's owner or an admin now; without an identity store it may not.
pub async fn work_reader(
    identity: &ExecutionIdentity,
    store: Option<&dyn IdentityStore>,
    bot_owner: Uuid,
) -> Result<Reader, IdentityCheckError> {
    let may_change_shared = match store {
        Some(store) if identity.actor_member_id == identity.owner_member_id => {
            let caller = current_caller(
                store,
                identity.credential,
                identity.actor_member_id,
                identity.organization_id,
            )
            .await?;
            caller.is_admin() || bot_owner == identity.owner_member_id
        }
        _ => false,
    };
    Ok(Reader {
        organization_id: identity.organization_id,
        bot_id: identity.bot_id,
        member_id: identity.owner_member_id,
        may_change_shared,
    })
}
