//! Organizations: members, their roles, and invitations.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// A member's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum MemberRole {
    /// Created the organization.
    Owner,
    /// Manages members, invitations and model providers.
    Admin,
    /// Uses the organization's shared Bots and owns private ones.
    Member,
}

/// A member of the caller's organization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Member {
    /// The member's ID.
    pub id: Uuid,
    /// The person's email.
    pub email: String,
    /// The role.
    pub role: MemberRole,
    /// When they joined.
    pub created_at: DateTime<Utc>,
}

/// A request to invite a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct CreateInvitation {
    /// The person's email.
    #[schema(min_length = 3, max_length = 320, pattern = "^[^@\\s]+@[^@\\s]+$")]
    pub email: String,
    /// The role they get: `member` or `admin`.
    pub role: MemberRole,
}

/// An invitation (never its secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Invitation {
    /// Its ID.
    pub id: Uuid,
    /// The invited person's email.
    pub email: String,
    /// The role they get.
    pub role: MemberRole,
    /// When it stops working.
    pub expires_at: DateTime<Utc>,
    /// When it was accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub accepted_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A new invitation and its secret, shown only this once: give it to the person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct CreatedInvitation {
    /// The invitation.
    pub invitation: Invitation,
    /// The secret the person accepts it with.
    pub secret: String,
}

/// Accepting an invitation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct AcceptInvitation {
    /// The invitation's secret.
    #[schema(min_length = 1)]
    pub secret: String,
}

/// A new member and its first API token, whose secret is shown only this once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct AcceptedInvitation {
    /// The new member.
    pub member_id: Uuid,
    /// The organization.
    pub organization_id: Uuid,
    /// The member's first token (every right), to send as `Authorization: Bearer <secret>`.
    pub token_secret: String,
}

/// A request to create an organization; the caller's account becomes its owner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct CreateOrganization {
    /// Its name, 1-200 characters.
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
}

/// An organization the caller's account belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct Organization {
    /// Its ID.
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// The account's membership there.
    pub member_id: Uuid,
    /// The account's role there.
    pub role: MemberRole,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// A new organization with its owner's first token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct CreatedOrganization {
    /// The organization.
    pub organization: Organization,
    /// The owner's first token there (every right), shown only here. A token acts in one
    /// organization: use this one for the new organization.
    pub token_secret: String,
}
