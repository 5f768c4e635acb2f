//! The identity store: one interface, implemented on SQLite and PostgreSQL.

use async_trait::async_trait;
use openbot_schema::BotId;
use uuid::Uuid;

use crate::store::{Millis, StoreError};
use openbot_schema::Right;

/// A member's role in its organization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Created the organization; may do everything.
    Owner,
    /// May manage the organization's members and shared resources.
    Admin,
    /// May use the organization's shared resources and own private ones.
    Member,
}

impl Role {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Member => "member",
        }
    }

    /// Reads the stored name.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "owner" => Role::Owner,
            "admin" => Role::Admin,
            "member" => Role::Member,
            _ => return None,
        })
    }
}

/// A member, as access checks see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRef {
    /// The member.
    pub member_id: Uuid,
    /// Its organization.
    pub organization_id: Uuid,
    /// Its role there.
    pub role: Role,
}

/// A token to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewToken {
    /// Its ID.
    pub id: Uuid,
    /// A name for people.
    pub name: String,
    /// The hash of its secret.
    pub secret_hash: Vec<u8>,
    /// What it may do.
    pub rights: Vec<Right>,
    /// The only Bots it may use, if limited.
    pub bot_ids: Option<Vec<BotId>>,
    /// When it stops working.
    pub expires_at: Option<Millis>,
}

impl NewToken {
    /// A new token with every right and no expiry (an owner's or a new member's first one),
    /// and its secret, to be shown once.
    pub fn with_every_right(name: &str) -> (String, NewToken) {
        let secret = super::new_secret();
        let token = NewToken {
            id: Uuid::now_v7(),
            name: name.to_string(),
            secret_hash: super::secret_hash(&secret),
            rights: Right::all(),
            bot_ids: None,
            expires_at: None,
        };
        (secret, token)
    }
}

/// A stored token (never its secret).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenRow {
    /// Its ID.
    pub id: Uuid,
    /// The member it acts for.
    pub member_id: Uuid,
    /// Its name.
    pub name: String,
    /// What it may do.
    pub rights: Vec<Right>,
    /// The only Bots it may use, if limited.
    pub bot_ids: Option<Vec<BotId>>,
    /// When it stops working.
    pub expires_at: Option<Millis>,
    /// When it was revoked.
    pub revoked_at: Option<Millis>,
    /// When it was created.
    pub created_at: Millis,
}

/// An invitation, as stored (never its secret).
#[derive(Debug, Clone, PartialEq)]
pub struct InvitationRow {
    /// Its ID.
    pub id: Uuid,
    /// The organization it joins.
    pub organization_id: Uuid,
    /// The invited person's email.
    pub email: String,
    /// The role they get.
    pub role: Role,
    /// When it stops working.
    pub expires_at: Millis,
    /// When it was accepted.
    pub accepted_at: Option<Millis>,
    /// When it was revoked.
    pub revoked_at: Option<Millis>,
    /// When it was created.
    pub created_at: Millis,
}

/// A member as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberRow {
    /// The member.
    pub member: MemberRef,
    /// The person's email.
    pub email: String,
    /// When they joined.
    pub created_at: Millis,
}

/// An organization as an account sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct OrganizationRow {
    /// Its ID.
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// The account's membership there.
    pub member_id: Uuid,
    /// The account's role there.
    pub role: Role,
    /// When it was created.
    pub created_at: Millis,
}

/// Organizations, members and tokens.
#[async_trait]
pub trait IdentityStore: Send + Sync + 'static {
    /// On a database with no organization yet, creates the first organization, its owner
    /// and the owner's token, once, even when several nodes start at the same time. Returns
    /// whether this call created them.
    async fn bootstrap(
        &self,
        organization: &str,
        owner_email: &str,
        token: NewToken,
    ) -> Result<bool, StoreError>;

    /// The owner of the first organization, if it exists.
    async fn first_owner(&self) -> Result<Option<MemberRef>, StoreError>;

    /// Adds a person to an organization with a role (creating the account when it is new).
    async fn add_member(
        &self,
        organization_id: Uuid,
        email: &str,
        role: Role,
    ) -> Result<MemberRef, StoreError>;

    /// Stores an invitation to the inviter's organization.
    async fn create_invitation(
        &self,
        inviter: &MemberRef,
        id: Uuid,
        email: &str,
        role: Role,
        secret_hash: &[u8],
        expires_at: Millis,
    ) -> Result<InvitationRow, StoreError>;

    /// Up to `limit` of the organization's invitations, newest first, after the invitation at
    /// `before` (its creation time and ID) when given.
    async fn invitations_of(
        &self,
        organization_id: Uuid,
        before: Option<crate::paging::CreatedPosition>,
        limit: i64,
    ) -> Result<Vec<InvitationRow>, StoreError>;

    /// Revokes one of the organization's pending invitations; returns whether it was pending.
    async fn revoke_invitation(&self, organization_id: Uuid, id: Uuid) -> Result<bool, StoreError>;

    /// Accepts a pending, unexpired invitation once: adds the member and its first token in one
    /// transaction. `None` when the secret names no such invitation.
    async fn accept_invitation(
        &self,
        secret_hash: &[u8],
        token: NewToken,
    ) -> Result<Option<MemberRef>, StoreError>;

    /// Creates an organization whose owner is the account of `member` (a member elsewhere),
    /// with the owner's first token, in one transaction.
    async fn create_organization(
        &self,
        member: &MemberRef,
        name: &str,
        token: NewToken,
    ) -> Result<OrganizationRow, StoreError>;

    /// Up to `limit` of the organizations the account of `member` belongs to now, oldest
    /// first, after the organization at `after` (its creation time and ID) when given.
    async fn organizations_of(
        &self,
        member: &MemberRef,
        after: Option<crate::paging::CreatedPosition>,
        limit: i64,
    ) -> Result<Vec<OrganizationRow>, StoreError>;

    /// The organization's current members, oldest first.
    async fn members_of(&self, organization_id: Uuid) -> Result<Vec<MemberRow>, StoreError>;

    /// Whether `caller` may still use `bot`: it exists, was not deleted, is shared or the
    /// caller's own, and is within the caller's Bot limit (the query Bots are listed with).
    async fn bot_usable(
        &self,
        caller: &super::Caller,
        bot: openbot_schema::BotId,
    ) -> Result<bool, StoreError>;

    /// Up to `limit` of the organization's current members, oldest first, after the member at
    /// `after` (its creation time and ID) when given.
    async fn members_page(
        &self,
        organization_id: Uuid,
        after: Option<crate::paging::CreatedPosition>,
        limit: i64,
    ) -> Result<Vec<MemberRow>, StoreError>;

    /// Removes a member (not an owner) of the organization: its tokens and sessions stop
    /// working at once. Returns whether it was removed.
    async fn remove_member(
        &self,
        organization_id: Uuid,
        member_id: Uuid,
    ) -> Result<bool, StoreError>;

    /// Creates a token for a member.
    async fn create_token(&self, member_id: Uuid, token: NewToken) -> Result<TokenRow, StoreError>;

    /// The token with this secret hash and its member, if both exist and the member was not
    /// removed. Expiry and revocation are the caller's to check.
    async fn token_by_hash(
        &self,
        secret_hash: &[u8],
    ) -> Result<Option<(TokenRow, MemberRef)>, StoreError>;

    /// Starts a browser session for a member; only the hash of its secret is stored.
    async fn create_session(
        &self,
        member_id: Uuid,
        id: Uuid,
        secret_hash: &[u8],
        expires_at: Millis,
    ) -> Result<(), StoreError>;

    /// A token by its ID and its member, if the member was not removed (the caller checks
    /// revocation and expiry, as for [`IdentityStore::token_by_hash`]); with `bot`, also
    /// whether that member may use it (the Bot store's rule), read in the same statement.
    async fn token_by_id(
        &self,
        id: Uuid,
        bot: Option<openbot_schema::BotId>,
    ) -> Result<Option<(TokenRow, MemberRef, bool)>, StoreError>;

    /// The member of a session that is still valid (not revoked, not expired, member not
    /// removed), by the session's ID; with `bot`, also whether that member may use it.
    async fn session_member(
        &self,
        id: Uuid,
        bot: Option<openbot_schema::BotId>,
    ) -> Result<Option<(MemberRef, bool)>, StoreError>;

    /// The live session with this secret hash and its member (not expired, not revoked, member
    /// not removed).
    async fn session_by_hash(
        &self,
        secret_hash: &[u8],
    ) -> Result<Option<(Uuid, MemberRef)>, StoreError>;

    /// Ends a session.
    async fn revoke_session(&self, id: Uuid) -> Result<(), StoreError>;

    /// Up to `limit` of a member's tokens, newest first, after the token at `before` (its
    /// creation time and ID) when given.
    async fn tokens_of(
        &self,
        member_id: Uuid,
        before: Option<crate::paging::CreatedPosition>,
        limit: i64,
    ) -> Result<Vec<TokenRow>, StoreError>;

    /// Revokes one of a member's tokens; returns whether it existed.
    async fn revoke_token(&self, member_id: Uuid, token_id: Uuid) -> Result<bool, StoreError>;
}

/// Reads a token's stored rights.
pub(crate) fn parse_rights(text: &str) -> Result<Vec<Right>, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Invalid(format!("token rights: {e}")))
}

/// Reads a token's stored Bot limit.
pub(crate) fn parse_bot_ids(text: Option<String>) -> Result<Option<Vec<BotId>>, StoreError> {
    text.map(|t| {
        serde_json::from_str(&t).map_err(|e| StoreError::Invalid(format!("token bots: {e}")))
    })
    .transpose()
}
