//! Access: API tokens and their rights, by resource kind and action.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ids::{BotId, TokenId};

/// A kind of resource a right covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    /// Bots.
    Bots,
    /// Chats and their input.
    Chats,
    /// Executions and their events.
    Executions,
    /// API tokens.
    Tokens,
    /// The organization's model provider settings.
    Models,
    /// Decisions on calls whose outcome is unknown: read lists them, write decides.
    Outcomes,
    /// Usage and billing: read sees usage reports, prices and credits; write sets prices and
    /// grants credits (with the owner or admin role).
    Billing,
    /// Vault items and their rules: read lists them (never values), write creates, changes
    /// and deletes them (an organization's items with the owner or admin role).
    Vaults,
    /// Apps and their connections: read sees them, write adds, connects (OAuth sign-in
    /// included) and removes them.
    Apps,
    /// The organization's members and invitations: read lists members, write invites and
    /// removes them and lists and revokes invitations (with the owner or admin role, and only
    /// from a token that holds every right and no Bot limit: what an invitation hands out is
    /// never more than the token that made it holds).
    Members,
    /// Organizations: read lists the caller's, write creates one (with the owner or admin
    /// role, from a token that holds every right and no Bot limit, as its first token has).
    Organizations,
    /// Computers: read lists the caller's own and the organization's shared ones, write
    /// approves pairings and removes Computers.
    Computers,
}

/// What a right allows on its resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Read.
    Read,
    /// Create, change, delete, send, cancel.
    Write,
}

/// One right: an action on a kind of resource. Write does not imply read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct Right {
    /// The resource kind.
    pub resource: Resource,
    /// The action.
    pub action: Action,
}

impl Right {
    /// Every right there is.
    pub fn all() -> Vec<Right> {
        let mut all = Vec::new();
        for resource in [
            Resource::Bots,
            Resource::Chats,
            Resource::Executions,
            Resource::Tokens,
            Resource::Models,
            Resource::Outcomes,
            Resource::Billing,
            Resource::Vaults,
            Resource::Apps,
            Resource::Members,
            Resource::Organizations,
            Resource::Computers,
        ] {
            for action in [Action::Read, Action::Write] {
                all.push(Right { resource, action });
            }
        }
        all
    }
}

/// A request to create an API token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    /// A name for people, 1-100 characters.
    #[schema(min_length = 1, max_length = 100)]
    pub name: String,
    /// What the token may do; no more than the creating token may do.
    pub rights: Vec<Right>,
    /// The only Bots the token may use; all when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub bot_ids: Option<Vec<BotId>>,
    /// When the token stops working; never when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub expires_at: Option<DateTime<Utc>>,
}

/// An API token (never its secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ApiToken {
    /// Its ID.
    pub id: TokenId,
    /// Its name.
    pub name: String,
    /// What it may do.
    pub rights: Vec<Right>,
    /// The only Bots it may use, if limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub bot_ids: Option<Vec<BotId>>,
    /// When it stops working.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub revoked_at: Option<DateTime<Utc>>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// A new token and its secret, which is shown only this once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct CreatedToken {
    /// The token.
    pub token: ApiToken,
    /// The secret to send as `Authorization: Bearer <secret>`.
    pub secret: String,
}
