//! Sending a firing's input to a Chat as the identity that set it up, with that identity's
//! rights read anew each time.

use openbot_schema::{Action, ChatId, ExecutionId, Resource, SendInput};
use uuid::Uuid;

use crate::chats::{ChatError, Chats};
use crate::identity::{Credential, IdentityCheckError, IdentityStore, current_caller};
use crate::store::StoreError;

/// Who input is sent as: a member through the credential saved with the trigger or reminder.
#[derive(Debug, Clone, Copy)]
pub struct SendAs {
    /// The organization.
    pub organization_id: Uuid,
    /// The member.
    pub member_id: Uuid,
    /// The credential whose current rights bound the send.
    pub credential: Credential,
}

/// What became of a send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// The input went to this Turn (the same one for a retry of the same key).
    Turn(ExecutionId),
    /// The identity may no longer send to the Chat: nothing was sent, for this reason.
    Refused(String),
}

/// A send that failed on storage (retried by the caller) or on a command key conflict.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The command key was used for other input.
    #[error("{0}")]
    Conflict(String),
}

/// Sends `text` to `chat` as `who`, under `command_key` (so a retry after a crash sends it
/// once). The credential's current rights decide: revoked, expired, removed, without the
/// right to write Chats, or the Chat gone or out of its Bot limit -> [`Sent::Refused`].
pub async fn send_as(
    identity: &dyn IdentityStore,
    chats: &Chats,
    who: SendAs,
    chat: ChatId,
    text: String,
    command_key: String,
) -> Result<Sent, SendError> {
    let caller =
        match current_caller(identity, who.credential, who.member_id, who.organization_id).await {
            Ok(caller) => caller,
            Err(IdentityCheckError::Denied(why)) => return Ok(Sent::Refused(why)),
            Err(IdentityCheckError::Store(err)) => return Err(err.into()),
        };
    if caller.require(Resource::Chats, Action::Write).is_err() {
        return Ok(Sent::Refused("the token may no longer write chats".into()));
    }
    let input = SendInput {
        content: vec![openbot_schema::ContentPart::text(text)],
        command_key: Some(command_key),
    };
    match chats.send(&caller, chat, input).await {
        Ok(receipt) => Ok(Sent::Turn(receipt.execution_id)),
        Err(ChatError::NotFound(what)) => Ok(Sent::Refused(format!(
            "the {what} was deleted or is out of this credential's reach"
        ))),
        Err(ChatError::Invalid(why) | ChatError::Forbidden(why)) => Ok(Sent::Refused(why)),
        Err(ChatError::Conflict(why)) => Err(SendError::Conflict(why)),
        Err(ChatError::Store(err)) => Err(err.into()),
    }
}
