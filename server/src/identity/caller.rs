//! The Caller: who makes a request and what it may do, the same for every entry point.

use openbot_schema::BotId;

use super::store::{MemberRef, Role};
use openbot_schema::{Action, Resource, Right};

/// An authenticated caller: a member acting through a token with rights.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    /// The member.
    pub member: MemberRef,
    /// The credential it used: a token or a session.
    pub credential: super::Credential,
    /// What the token may do.
    pub rights: Vec<Right>,
    /// The only Bots the token may use, if limited.
    pub bot_ids: Option<Vec<BotId>>,
}

/// A caller without the right to do something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("this token may not {action} {resource}")]
pub struct AccessError {
    /// The action, for the message.
    pub action: &'static str,
    /// The resource, for the message.
    pub resource: &'static str,
}

impl Caller {
    /// Fails unless the token has this right.
    pub fn require(&self, resource: Resource, action: Action) -> Result<(), AccessError> {
        if self.rights.contains(&Right { resource, action }) {
            return Ok(());
        }
        Err(AccessError {
            action: match action {
                Action::Read => "read",
                Action::Write => "write",
            },
            resource: match resource {
                Resource::Bots => "bots",
                Resource::Chats => "chats",
                Resource::Executions => "executions",
                Resource::Tokens => "tokens",
                Resource::Models => "model providers",
                Resource::Outcomes => "unknown outcomes",
                Resource::Billing => "usage and billing",
                Resource::Vaults => "vaults",
                Resource::Apps => "apps",
                Resource::Members => "members",
                Resource::Organizations => "organizations",
                Resource::Computers => "computers",
            },
        })
    }

    /// Fails unless the token holds every right there is and no Bot limit, and the member is
    /// an owner or admin: what hands out a whole membership or organization (an invitation,
    /// a new organization's first token) may come only from a token that holds as much.
    pub fn require_unrestricted(&self, resource: Resource) -> Result<(), AccessError> {
        self.require(resource, Action::Write)?;
        let holds_all = Right::all().iter().all(|right| self.rights.contains(right));
        if holds_all && self.bot_ids.is_none() && self.is_admin() {
            Ok(())
        } else {
            Err(AccessError {
                action: "hand out",
                resource: "a membership or an organization (it takes an owner's or admin's token with every right and no Bot limit)",
            })
        }
    }

    /// Fails for a token limited to some Bots: a setting of the whole organization (limits,
    /// memory settings, an approval rule not for one of its Bots) reaches every Bot, more
    /// than such a token holds.
    pub fn require_whole_organization(&self) -> Result<(), AccessError> {
        match self.bot_ids {
            None => Ok(()),
            Some(_) => Err(AccessError {
                action: "change",
                resource: "settings of the whole organization (it is limited to some Bots)",
            }),
        }
    }

    /// Whether the token's Bot limit lets it use `bot` (no limit: every Bot). The one rule
    /// for checks in memory; lists apply the same limit inside their query
    /// (`in_bot_limit!`).
    pub fn may_use(&self, bot: BotId) -> bool {
        self.bot_ids.as_deref().is_none_or(|ids| ids.contains(&bot))
    }

    /// Whether the caller may manage everything of its organization.
    pub fn is_admin(&self) -> bool {
        matches!(self.member.role, Role::Owner | Role::Admin)
    }

    /// Whether a record of `member` in `organization` is the caller's own (a member's records
    /// are never another's, whatever the role).
    pub fn owns(&self, organization: uuid::Uuid, member: uuid::Uuid) -> bool {
        self.member.organization_id == organization && self.member.member_id == member
    }

    /// The storage scope of the caller's own work.
    pub fn scope(&self) -> crate::store::Scope {
        crate::store::Scope::Member(self.member.member_id.to_string())
    }
}
