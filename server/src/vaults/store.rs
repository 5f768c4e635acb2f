//! The Vault store: items, their sealed fields and their rules.

use async_trait::async_trait;
use uuid::Uuid;

use crate::sealed::SealedValue;
use crate::store::{Millis, StoreError};

/// A Vault item with its fields' names (never their values).
#[derive(Debug, Clone, PartialEq)]
pub struct ItemRow {
    /// Its ID.
    pub id: Uuid,
    /// Its organization.
    pub organization_id: Uuid,
    /// The owning member; `None` for the organization's item.
    pub owner_member_id: Option<Uuid>,
    /// Its name.
    pub name: String,
    /// Its fields by name, with when each was set.
    pub fields: Vec<(String, Millis)>,
    /// When it was created.
    pub created_at: Millis,
    /// When it or a field last changed.
    pub updated_at: Millis,
}

/// A field's value, sealed for its place (see [`field_place`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SealedField {
    /// The field's name.
    pub name: String,
    /// The sealed value.
    pub value: SealedValue,
}

/// The place a field's value is sealed for: its item and name, so a value moved to another
/// field or item does not open.
pub fn field_place(item: Uuid, field: &str) -> Vec<u8> {
    format!("vault_fields/{item}/{field}").into_bytes()
}

/// A rule: the reader `reader_kind:reader_id` may read `field` (or `*`) of the item.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleRow {
    /// Its ID.
    pub id: Uuid,
    /// The item.
    pub item_id: Uuid,
    /// The field or `*`.
    pub field: String,
    /// `bot`, `tool` or `code_mode` (more kinds later).
    pub reader_kind: String,
    /// The Bot's ID or the tool's name.
    pub reader_id: String,
    /// What the reader must still be: a tool's endpoint URL as the rule was added; empty for a
    /// Bot.
    pub reader_scope: String,
    /// When it was added.
    pub created_at: Millis,
}

/// Which items of an organization a member sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Visibility {
    /// The organization.
    pub organization: Uuid,
    /// The member: the organization's items and this member's own.
    pub member: Uuid,
}

/// Vault items, fields and rules.
#[async_trait]
pub trait VaultStore: Send + Sync + 'static {
    /// Creates an item with its sealed fields, in one transaction.
    async fn create_item(&self, item: &ItemRow, fields: &[SealedField]) -> Result<(), StoreError>;

    /// An item the member sees.
    async fn item(&self, seen: Visibility, id: Uuid) -> Result<Option<ItemRow>, StoreError>;

    /// Up to `limit` items the member sees, by ID, after `after`.
    async fn items(
        &self,
        seen: Visibility,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<ItemRow>, StoreError>;

    /// Sets a field's sealed value (new or replaced) and the item's change time; `false`
    /// (and nothing written) when the item is gone.
    async fn put_field(&self, item: Uuid, field: &SealedField) -> Result<bool, StoreError>;

    /// Removes a field and the rules naming it; whether it existed.
    async fn delete_field(&self, item: Uuid, name: &str) -> Result<bool, StoreError>;

    /// Removes an item with its fields and rules; whether it existed.
    async fn delete_item(&self, item: Uuid) -> Result<bool, StoreError>;

    /// Adds a rule; the same rule twice is one rule (the existing one is returned).
    async fn create_rule(&self, rule: &RuleRow) -> Result<RuleRow, StoreError>;

    /// Up to `limit` of an item's rules, by ID, after `after`.
    async fn rules(
        &self,
        item: Uuid,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<RuleRow>, StoreError>;

    /// A rule by ID.
    async fn rule(&self, id: Uuid) -> Result<Option<RuleRow>, StoreError>;

    /// Removes a rule; whether it existed.
    async fn delete_rule(&self, id: Uuid) -> Result<bool, StoreError>;

    /// For a send: the item (any owner) of `organization`, the field's sealed value, and
    /// whether a rule lets each of the three readers of the send's path (its Bot, its tool,
    /// and its Code Mode run or the Bot again) read the field, read in one statement.
    async fn field_for_send(
        &self,
        organization: Uuid,
        item: Uuid,
        field: &str,
        readers: [&Reader; 3],
    ) -> Result<Option<FieldForSend>, StoreError>;
}

/// A reader on a send's path, as rules name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reader {
    /// `bot`, `tool` or `code_mode`.
    pub kind: &'static str,
    /// The Bot's ID or the tool's name.
    pub id: String,
    /// The tool's endpoint URL; empty for a Bot.
    pub scope: String,
}

/// What a send needs to know about one referenced field.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldForSend {
    /// The owning member, if a member's item.
    pub owner_member_id: Option<Uuid>,
    /// The sealed value, if the field exists.
    pub value: Option<SealedValue>,
    /// For each of the three readers, in order, whether a rule allows it.
    pub allowed: Vec<bool>,
}
