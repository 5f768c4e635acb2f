//! ExecutionIdentity: who a piece of work belongs to and who started it, with which
//! credential and Bot, kept apart and saved with the work, so restored work is checked
//! against current rights and never gains any.

use openbot_schema::{Action, BotId, ExecutionId, Resource};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::caller::Caller;
use super::store::IdentityStore;
use crate::store::{StoreError, now_ms};

/// How the caller proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Credential {
    /// An API token.
    Token {
        /// The token's ID.
        id: Uuid,
    },
    /// A browser session.
    Session {
        /// The session's ID.
        id: Uuid,
    },
}

impl Credential {
    /// Refuses a browser session as the credential of long-lived work (a Trigger, a Channel,
    /// a reminder): such work is checked against its credential each time it acts, and a
    /// session ends after 24 hours, so the work would stop with it without anyone noticing.
    /// An API token lasts until it expires or is revoked, which its creator chose.
    pub fn for_long_lived_work(&self, what: &str) -> Result<(), String> {
        match self {
            Credential::Token { .. } => Ok(()),
            Credential::Session { .. } => Err(format!(
                "{what} outlives the browser session that would create it (sessions end after 24 hours, and the {what} would stop with it): create it with an API token"
            )),
        }
    }
}

/// The identity of a piece of work, saved with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionIdentity {
    /// The organization the work runs in.
    pub organization_id: Uuid,
    /// The member who owns the resources (the Chat's member).
    pub owner_member_id: Uuid,
    /// The member on whose behalf the work acts now.
    pub actor_member_id: Uuid,
    /// The credential the work was started with; its current rights bound the work.
    pub credential: Credential,
    /// The Bot the work runs.
    pub bot_id: BotId,
    /// The execution that started this one, for delegated work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_execution: Option<ExecutionId>,
}

/// Why work may not go on.
#[derive(Debug, thiserror::Error)]
pub enum IdentityCheckError {
    /// The owner, actor or credential lost the right; the message says which.
    #[error("{0}")]
    Denied(String),
    /// The current rights could not be read: the work stops rather than use old ones.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<IdentityCheckError> for crate::engine::PhaseError {
    /// Lost rights fail the work as an access failure; a failed read is a storage failure the
    /// engine retries.
    fn from(err: IdentityCheckError) -> Self {
        match err {
            IdentityCheckError::Denied(cause) => Self::Failed {
                category: openbot_schema::ErrorCategory::Access,
                cause,
            },
            IdentityCheckError::Store(err) => Self::Storage(err),
        }
    }
}

impl ExecutionIdentity {
    /// The identity of a Chat's Turn started by `caller` in a Chat of `owner_member_id`.
    pub fn for_turn(caller: &Caller, owner_member_id: Uuid, bot_id: BotId) -> Self {
        Self {
            organization_id: caller.member.organization_id,
            owner_member_id,
            actor_member_id: caller.member.member_id,
            credential: caller.credential,
            bot_id,
            source_execution: None,
        }
    }

    /// Checks that the work may still send to the outside: the credential is valid (not
    /// revoked or expired), its member and the owner are still members, it may still write
    /// Chats with this Bot, and the Bot is still there for both of them (not deleted, not made
    /// private by someone else). Reads the current state every time.
    pub async fn check_current(
        &self,
        identity: &dyn IdentityStore,
    ) -> Result<(), IdentityCheckError> {
        let denied = |why: &str| Err(IdentityCheckError::Denied(why.to_string()));
        let (caller, bot_usable) = caller_and_bot(
            identity,
            self.credential,
            self.actor_member_id,
            self.organization_id,
            Some(self.bot_id),
        )
        .await?;
        if caller.require(Resource::Chats, Action::Write).is_err() {
            return denied("the token may no longer write chats");
        }
        if !caller.may_use(self.bot_id) {
            return denied("the token may no longer use this Bot");
        }
        if !bot_usable {
            return denied("the Bot was deleted or is no longer shared with this member");
        }
        if self.owner_member_id != self.actor_member_id {
            let members = identity.members_of(self.organization_id).await?;
            let Some(owner) = members
                .into_iter()
                .find(|m| m.member.member_id == self.owner_member_id)
            else {
                return denied("the owner is no longer a member");
            };
            let owner = Caller {
                member: owner.member,
                credential: self.credential,
                rights: openbot_schema::Right::all(),
                bot_ids: None,
            };
            if !identity.bot_usable(&owner, self.bot_id).await? {
                return denied("the Bot was deleted or is no longer shared with the Chat's member");
            }
        }
        Ok(())
    }
}

/// The caller a saved credential stands for now: its current rights and Bot limit, read
/// anew. Fails with [`IdentityCheckError::Denied`] when the credential was revoked, expired or
/// ended, or belongs to another member or organization than the one saved with the work.
pub async fn current_caller(
    identity: &dyn IdentityStore,
    credential: Credential,
    actor_member_id: Uuid,
    organization_id: Uuid,
) -> Result<Caller, IdentityCheckError> {
    let (caller, _) =
        caller_and_bot(identity, credential, actor_member_id, organization_id, None).await?;
    Ok(caller)
}

/// [`current_caller`], and with `bot` whether its member may use that Bot (read in the same
/// statement as the credential).
async fn caller_and_bot(
    identity: &dyn IdentityStore,
    credential: Credential,
    actor_member_id: Uuid,
    organization_id: Uuid,
    bot: Option<BotId>,
) -> Result<(Caller, bool), IdentityCheckError> {
    let denied = |why: &str| Err(IdentityCheckError::Denied(why.to_string()));
    let (member, rights, bot_ids, bot_usable) = match credential {
        Credential::Token { id } => {
            let Some((token, member, bot_usable)) = identity.token_by_id(id, bot).await? else {
                return denied("the token's member was removed");
            };
            if token.revoked_at.is_some() {
                return denied("the token was revoked");
            }
            if token.expires_at.is_some_and(|at| at <= now_ms()) {
                return denied("the token has expired");
            }
            (member, token.rights, token.bot_ids, bot_usable)
        }
        Credential::Session { id } => match identity.session_member(id, bot).await? {
            Some((member, bot_usable)) => (member, openbot_schema::Right::all(), None, bot_usable),
            None => return denied("the session ended"),
        },
    };
    if member.member_id != actor_member_id || member.organization_id != organization_id {
        return denied("the credential belongs to someone else now");
    }
    let caller = Caller {
        member,
        credential,
        rights,
        bot_ids,
    };
    Ok((caller, bot_usable))
}
