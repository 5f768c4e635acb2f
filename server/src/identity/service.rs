//! The account use cases: organizations, members, invitations, tokens and browser sessions.
//! Every public method takes the caller and checks its right first (accepting an invitation
//! takes its secret instead: the person is not a member yet).

use std::sync::Arc;

use openbot_schema::{
    AcceptedInvitation, Action, ApiToken, ApiTokenPage, CreateInvitation, CreateOrganization,
    CreateToken, CreatedInvitation, CreatedOrganization, CreatedToken, Invitation, InvitationPage,
    Member, MemberPage, MemberRole, Organization, OrganizationPage, Resource, Right, TokenId,
};
use uuid::Uuid;

use super::{
    Caller, Credential, IdentityStore, InvitationRow, NewToken, OrganizationRow, Role, TokenRow,
    new_secret, secret_hash,
};
use crate::paging::{CreatedPosition, Paging};
use crate::service::ServiceError;
use crate::store::{Millis, StoreError, now_ms, stored_time, stored_time_opt};

/// How long an invitation stays valid (seven days).
pub const INVITATION_DAYS: i64 = 7;

/// How long a browser session lasts, in seconds (one day).
pub const SESSION_SECONDS: i64 = 86_400;

/// The public name of a role.
pub fn role_view(role: Role) -> MemberRole {
    match role {
        Role::Owner => MemberRole::Owner,
        Role::Admin => MemberRole::Admin,
        Role::Member => MemberRole::Member,
    }
}

fn organization_view(row: OrganizationRow) -> Result<Organization, StoreError> {
    Ok(Organization {
        id: row.id,
        name: row.name,
        member_id: row.member_id,
        role: role_view(row.role),
        created_at: stored_time(row.created_at)?,
    })
}

fn invitation_view(row: InvitationRow) -> Result<Invitation, StoreError> {
    Ok(Invitation {
        id: row.id,
        email: row.email,
        role: role_view(row.role),
        expires_at: stored_time(row.expires_at)?,
        accepted_at: stored_time_opt(row.accepted_at)?,
        revoked_at: stored_time_opt(row.revoked_at)?,
    })
}

fn token_view(row: TokenRow) -> Result<ApiToken, StoreError> {
    Ok(ApiToken {
        id: TokenId::from(row.id),
        name: row.name,
        rights: row.rights,
        bot_ids: row.bot_ids,
        expires_at: stored_time_opt(row.expires_at)?,
        revoked_at: stored_time_opt(row.revoked_at)?,
        created_at: stored_time(row.created_at)?,
    })
}

/// A new browser session: its secret (for the cookie only) and when it ends.
pub struct NewSession {
    /// The cookie's secret.
    pub secret: String,
    /// When the session ends.
    pub expires_at: Millis,
}

/// The account use cases. Cheap to clone.
#[derive(Clone)]
pub struct Accounts {
    store: Arc<dyn IdentityStore>,
}

impl Accounts {
    /// The use cases on `store`.
    pub fn new(store: Arc<dyn IdentityStore>) -> Self {
        Self { store }
    }

    /// The caller a token's secret stands for: a token that exists, is not revoked and has
    /// not expired.
    pub async fn token_caller(&self, secret: &str) -> Result<Caller, ServiceError> {
        let (token, member) = self
            .store
            .token_by_hash(&secret_hash(secret))
            .await?
            .ok_or(ServiceError::Unauthorized("the token is not valid"))?;
        if token.revoked_at.is_some() {
            return Err(ServiceError::Unauthorized("the token was revoked"));
        }
        if token.expires_at.is_some_and(|at| at <= now_ms()) {
            return Err(ServiceError::Unauthorized("the token has expired"));
        }
        Ok(Caller {
            member,
            credential: Credential::Token { id: token.id },
            rights: token.rights,
            bot_ids: token.bot_ids,
        })
    }

    /// The caller a browser session's secret stands for: every right of its member, no Bot
    /// limit.
    pub async fn session_caller(&self, secret: &str) -> Result<Caller, ServiceError> {
        let (session, member) = self
            .store
            .session_by_hash(&secret_hash(secret))
            .await?
            .ok_or(ServiceError::Unauthorized(
                "the session is not valid; sign in again",
            ))?;
        Ok(Caller {
            member,
            credential: Credential::Session { id: session },
            rights: Right::all(),
            bot_ids: None,
        })
    }

    /// Managing members: the `members` write right, the owner or admin role, and a token not
    /// limited to some Bots (membership is the whole organization's).
    fn manage(caller: &Caller) -> Result<(), ServiceError> {
        caller.require(Resource::Members, Action::Write)?;
        if !caller.is_admin() {
            return Err(ServiceError::Forbidden(
                "only owners and admins manage members".into(),
            ));
        }
        if caller.bot_ids.is_some() {
            return Err(ServiceError::Forbidden(
                "a token limited to some Bots does not manage members".into(),
            ));
        }
        Ok(())
    }

    /// The organizations of the caller's account, oldest first.
    pub async fn organizations(
        &self,
        caller: &Caller,
        paging: &Paging<CreatedPosition>,
    ) -> Result<OrganizationPage, ServiceError> {
        caller.require(Resource::Organizations, Action::Read)?;
        let rows = self
            .store
            .organizations_of(&caller.member, paging.after, paging.fetch())
            .await?;
        Ok(paging.try_page(rows, |row| (row.created_at, row.id), organization_view)?)
    }

    /// Creates an organization owned by the caller's account, with the owner's first token
    /// there (every right; its secret in this answer only). Only an owner's or admin's token
    /// that holds every right with no Bot limit hands that out.
    pub async fn create_organization(
        &self,
        caller: &Caller,
        request: &CreateOrganization,
    ) -> Result<CreatedOrganization, ServiceError> {
        if !caller.is_admin() {
            return Err(ServiceError::Forbidden(
                "only owners and admins create organizations".into(),
            ));
        }
        caller.require_unrestricted(Resource::Organizations)?;
        let name = request.name.trim();
        if name.is_empty() || name.chars().count() > 200 {
            return Err(ServiceError::Invalid(
                "name must have 1-200 characters".into(),
            ));
        }
        let (token_secret, token) = NewToken::with_every_right("first");
        let row = self
            .store
            .create_organization(&caller.member, name, token)
            .await?;
        Ok(CreatedOrganization {
            organization: organization_view(row)?,
            token_secret,
        })
    }

    /// The organization's members, oldest first.
    pub async fn members(
        &self,
        caller: &Caller,
        paging: &Paging<CreatedPosition>,
    ) -> Result<MemberPage, ServiceError> {
        caller.require(Resource::Members, Action::Read)?;
        let rows = self
            .store
            .members_page(caller.member.organization_id, paging.after, paging.fetch())
            .await?;
        Ok(paging.try_page(
            rows,
            |row| (row.created_at, row.member.member_id),
            |row| {
                Ok::<_, StoreError>(Member {
                    id: row.member.member_id,
                    email: row.email,
                    role: role_view(row.member.role),
                    created_at: stored_time(row.created_at)?,
                })
            },
        )?)
    }

    /// Removes a member (never an owner): their tokens and sessions stop working at once.
    pub async fn remove_member(&self, caller: &Caller, member: Uuid) -> Result<(), ServiceError> {
        Self::manage(caller)?;
        if self
            .store
            .remove_member(caller.member.organization_id, member)
            .await?
        {
            Ok(())
        } else {
            Err(ServiceError::NotFound("member"))
        }
    }

    /// Invites a person as `member` or `admin`; the secret is in this answer only.
    pub async fn invite(
        &self,
        caller: &Caller,
        request: &CreateInvitation,
    ) -> Result<CreatedInvitation, ServiceError> {
        Self::manage(caller)?;
        // An invitation hands out a whole membership with an every-right first token.
        caller.require_unrestricted(Resource::Members)?;
        let role = match request.role {
            MemberRole::Member => Role::Member,
            MemberRole::Admin => Role::Admin,
            MemberRole::Owner => {
                return Err(ServiceError::Invalid(
                    "an organization has one owner; invite as member or admin".into(),
                ));
            }
        };
        if !request.email.contains('@') || request.email.len() > 320 {
            return Err(ServiceError::Invalid(
                "email must be an email address".into(),
            ));
        }
        let secret = new_secret();
        let expires_at = now_ms() + INVITATION_DAYS * 86_400_000;
        let row = self
            .store
            .create_invitation(
                &caller.member,
                Uuid::now_v7(),
                &request.email,
                role,
                &secret_hash(&secret),
                expires_at,
            )
            .await?;
        Ok(CreatedInvitation {
            invitation: invitation_view(row)?,
            secret,
        })
    }

    /// The organization's invitations, newest first.
    pub async fn invitations(
        &self,
        caller: &Caller,
        paging: &Paging<CreatedPosition>,
    ) -> Result<InvitationPage, ServiceError> {
        Self::manage(caller)?;
        let rows = self
            .store
            .invitations_of(caller.member.organization_id, paging.after, paging.fetch())
            .await?;
        Ok(paging.try_page(rows, |row| (row.created_at, row.id), invitation_view)?)
    }

    /// Revokes a pending invitation.
    pub async fn revoke_invitation(&self, caller: &Caller, id: Uuid) -> Result<(), ServiceError> {
        Self::manage(caller)?;
        if self
            .store
            .revoke_invitation(caller.member.organization_id, id)
            .await?
        {
            Ok(())
        } else {
            Err(ServiceError::NotFound("pending invitation"))
        }
    }

    /// Accepts an invitation with its secret (no caller: the person is not a member yet):
    /// the person becomes a member with a first token of every right. Accepted once.
    pub async fn accept_invitation(
        &self,
        secret: &str,
    ) -> Result<AcceptedInvitation, ServiceError> {
        let (token_secret, token) = NewToken::with_every_right("first");
        let member = self
            .store
            .accept_invitation(&secret_hash(secret), token)
            .await?
            .ok_or(ServiceError::NotFound("pending invitation"))?;
        Ok(AcceptedInvitation {
            member_id: member.member_id,
            organization_id: member.organization_id,
            token_secret,
        })
    }

    /// Creates a token for the caller's member, with no more rights than the caller's token
    /// and no wider Bot limit. The secret is in this answer only.
    pub async fn create_token(
        &self,
        caller: &Caller,
        request: CreateToken,
    ) -> Result<CreatedToken, ServiceError> {
        caller.require(Resource::Tokens, Action::Write)?;
        if request.name.is_empty() || request.name.chars().count() > 100 {
            return Err(ServiceError::Invalid(
                "a token's name must have 1-100 characters".into(),
            ));
        }
        if let Some(extra) = request.rights.iter().find(|r| !caller.rights.contains(r)) {
            return Err(ServiceError::Forbidden(format!(
                "a new token cannot have a right this token lacks: {:?} {:?}",
                extra.action, extra.resource
            )));
        }
        if let Some(limit) = &caller.bot_ids {
            let wider = match &request.bot_ids {
                None => true,
                Some(ids) => ids.iter().any(|id| !limit.contains(id)),
            };
            if wider {
                return Err(ServiceError::Forbidden(
                    "a new token cannot reach Bots this token cannot".into(),
                ));
            }
        }
        if request
            .expires_at
            .is_some_and(|at| at.timestamp_millis() <= now_ms())
        {
            return Err(ServiceError::Invalid(
                "expires_at must be in the future".into(),
            ));
        }
        let secret = new_secret();
        let new = NewToken {
            id: Uuid::now_v7(),
            name: request.name,
            secret_hash: secret_hash(&secret),
            rights: request.rights,
            bot_ids: request.bot_ids,
            expires_at: request.expires_at.map(|at| at.timestamp_millis()),
        };
        let row = self
            .store
            .create_token(caller.member.member_id, new)
            .await?;
        Ok(CreatedToken {
            token: token_view(row)?,
            secret,
        })
    }

    /// The caller's member's tokens, newest first.
    pub async fn tokens(
        &self,
        caller: &Caller,
        paging: &Paging<CreatedPosition>,
    ) -> Result<ApiTokenPage, ServiceError> {
        caller.require(Resource::Tokens, Action::Read)?;
        let rows = self
            .store
            .tokens_of(caller.member.member_id, paging.after, paging.fetch())
            .await?;
        Ok(paging.try_page(rows, |row| (row.created_at, row.id), token_view)?)
    }

    /// Revokes one of the caller's member's tokens; it stops working at once.
    pub async fn revoke_token(&self, caller: &Caller, id: TokenId) -> Result<(), ServiceError> {
        caller.require(Resource::Tokens, Action::Write)?;
        if self
            .store
            .revoke_token(caller.member.member_id, id.as_uuid())
            .await?
        {
            Ok(())
        } else {
            Err(ServiceError::NotFound("token"))
        }
    }

    /// Starts a browser session for the caller's member: only from a token with every right
    /// and no Bot limit.
    pub async fn start_session(&self, caller: &Caller) -> Result<NewSession, ServiceError> {
        if Right::all().iter().any(|r| !caller.rights.contains(r)) || caller.bot_ids.is_some() {
            return Err(ServiceError::Forbidden(
                "a session needs a token with every right and no Bot limit".into(),
            ));
        }
        let secret = new_secret();
        let expires_at = now_ms() + SESSION_SECONDS * 1000;
        self.store
            .create_session(
                caller.member.member_id,
                Uuid::now_v7(),
                &secret_hash(&secret),
                expires_at,
            )
            .await?;
        Ok(NewSession { secret, expires_at })
    }

    /// Ends the caller's session, when it is a session that calls (a request that also sent a
    /// token acts with the token: its session is not the caller's).
    pub async fn end_session(&self, caller: &Caller) -> Result<(), ServiceError> {
        if let Credential::Session { id } = caller.credential {
            self.store.revoke_session(id).await?;
        }
        Ok(())
    }
}
