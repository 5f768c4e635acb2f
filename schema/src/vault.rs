//! Vaults: items of named secret fields, owned by an organization or a member, and the rules
//! that say which reader (a Bot, a tool) may read which field. Values go in and never come
//! out of the API: they are opened only where a call is sent.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::ids::BotId;

/// Who owns a Vault item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum VaultOwner {
    /// The member who created it: only that member sees and changes it, and only that member's
    /// Turns may read it.
    #[default]
    Member,
    /// The organization: every member with the `vaults` read right sees it (never its
    /// values); owners and admins change it.
    Organization,
}

/// A Vault item to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct CreateVaultItem {
    /// A name for people, 1-100 characters. Names need not be unique: references use the
    /// item's ID.
    #[schema(min_length = 1, max_length = 100)]
    pub name: String,
    /// Who owns it: the creating member unless `organization`.
    // No uniffi default: uniffi takes none for an enum type, so Kotlin and Swift callers name it.
    #[serde(default)]
    pub owner: VaultOwner,
    /// Its fields: name (1-64 of a-z A-Z 0-9 _ -) to value (at most 16 KiB).
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub fields: HashMap<String, String>,
}

/// A field's new value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct PutVaultField {
    /// The value (at most 16 KiB); sealed at rest, never shown again.
    pub value: String,
}

/// A field of a Vault item, without its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct VaultField {
    /// Its name.
    pub name: String,
    /// When its value was last set.
    pub updated_at: DateTime<Utc>,
}

/// A Vault item: its fields' names, never their values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct VaultItem {
    /// Its ID, which references name.
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// Who owns it.
    pub owner: VaultOwner,
    /// The owning member, for a member's item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub member_id: Option<Uuid>,
    /// Its fields, by name.
    pub fields: Vec<VaultField>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it or a field last changed.
    pub updated_at: DateTime<Utc>,
}

/// Who may read a field. Each reader on a call's path needs a rule: an HTTP tool's send in a
/// Turn reads as the Turn's Bot and as the tool, so both need one; a reference a Code Mode
/// program passed reads as its Code Mode run as well. (App connections join this list.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum VaultReader {
    /// The Turns of a Bot.
    Bot {
        /// The Bot.
        bot_id: BotId,
    },
    /// A registered HTTP tool, by name.
    Tool {
        /// The tool's name.
        name: String,
    },
    /// A manual App connection, whose headers reference the field (docs/apps.md).
    AppConnection {
        /// The Connection.
        connection_id: Uuid,
    },
    /// The Code Mode runs of a Bot (its Turns' `run_code` and the model-free code run): a
    /// program may pass a `{{vault.<item>.<field>}}` reference in a tool call's arguments,
    /// opened at the HTTP tool's send. The Bot and the tool need their own rules too.
    CodeMode {
        /// The Bot.
        bot_id: BotId,
    },
}

/// A rule to add to a Vault item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct CreateVaultRule {
    /// The field it allows, or `*` for every field of the item.
    pub field: String,
    /// Who may read it.
    pub reader: VaultReader,
}

/// A rule: `reader` may read `field` of an item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct VaultRule {
    /// Its ID.
    pub id: Uuid,
    /// The item.
    pub item_id: Uuid,
    /// The field, or `*`.
    pub field: String,
    /// Who may read it.
    pub reader: VaultReader,
    /// For a tool's rule: the endpoint it covers, the tool's URL when the rule was added. Once
    /// the tool is registered on another URL the rule no longer lets it read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "uniffi", uniffi(default))]
    pub tool_url: Option<String>,
    /// When it was added.
    pub created_at: DateTime<Utc>,
}
