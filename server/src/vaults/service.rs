//! The Vault use cases: items, fields and rules as members manage them. Values go in and
//! never come out: every answer names fields, none carries a value.
//!
//! Rights: reading needs the `vaults` read right, changing the `vaults` write right. A
//! member's item is seen and changed only by that member; an organization's item is seen by
//! every member and changed by owners and admins. A token limited to some Bots may add rules
//! only for those Bots.

use std::sync::Arc;

use openbot_schema::{
    Action, CreateVaultItem, CreateVaultRule, PutVaultField, Resource, VaultField, VaultItem,
    VaultItemPage, VaultOwner, VaultReader, VaultRule, VaultRulePage,
};
use uuid::Uuid;

use super::reference::valid_field_name;
use super::store::{ItemRow, RuleRow, SealedField, VaultStore, Visibility, field_place};
use crate::identity::{AccessError, Caller};
use crate::paging::Paging;
use crate::sealed::KeyRing;
use crate::store::{StoreError, now_ms, stored_time};

/// The most bytes of one field's value.
pub const MAX_VALUE_BYTES: usize = 16 * 1024;
/// The most fields of one item.
pub const MAX_FIELDS: usize = 64;

/// Why a Vault use case failed.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
    /// The caller's token lacks the right.
    #[error(transparent)]
    Forbidden(#[from] AccessError),
    /// The caller may see the item but not change it.
    #[error("{0}")]
    NotAllowed(&'static str),
    /// No such item, field or rule the caller can see.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// A value could not be sealed.
    #[error("a value could not be sealed")]
    Seal,
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The Vault use cases.
#[derive(Clone)]
pub struct Vaults {
    store: Arc<dyn VaultStore>,
    keys: KeyRing,
    bots: Arc<dyn crate::bots::BotStore>,
    tools: Arc<dyn crate::tools::ToolStore>,
    apps: Option<Arc<dyn crate::apps::AppStore>>,
}

/// The public view of an item: its fields' names only.
pub fn item_view(row: ItemRow) -> Result<VaultItem, StoreError> {
    Ok(VaultItem {
        id: row.id,
        name: row.name,
        owner: if row.owner_member_id.is_some() {
            VaultOwner::Member
        } else {
            VaultOwner::Organization
        },
        member_id: row.owner_member_id,
        fields: row
            .fields
            .into_iter()
            .map(|(name, at)| {
                Ok(VaultField {
                    name,
                    updated_at: stored_time(at)?,
                })
            })
            .collect::<Result<_, StoreError>>()?,
        created_at: stored_time(row.created_at)?,
        updated_at: stored_time(row.updated_at)?,
    })
}

fn reader_of(row: &RuleRow) -> Result<VaultReader, StoreError> {
    match row.reader_kind.as_str() {
        "bot" => Uuid::parse_str(&row.reader_id)
            .map(|id| VaultReader::Bot { bot_id: id.into() })
            .map_err(|_| StoreError::Invalid(format!("vault rule {}: bad Bot ID", row.id))),
        "tool" => Ok(VaultReader::Tool {
            name: row.reader_id.clone(),
        }),
        "app_connection" => Uuid::parse_str(&row.reader_id)
            .map(|connection_id| VaultReader::AppConnection { connection_id })
            .map_err(|_| StoreError::Invalid(format!("vault rule {}: bad connection ID", row.id))),
        "code_mode" => Uuid::parse_str(&row.reader_id)
            .map(|id| VaultReader::CodeMode { bot_id: id.into() })
            .map_err(|_| StoreError::Invalid(format!("vault rule {}: bad Bot ID", row.id))),
        other => Err(StoreError::Invalid(format!(
            "vault rule {}: unknown reader kind `{other}`",
            row.id
        ))),
    }
}

fn rule_view(row: RuleRow) -> Result<VaultRule, StoreError> {
    Ok(VaultRule {
        reader: reader_of(&row)?,
        tool_url: (row.reader_kind == "tool").then(|| row.reader_scope.clone()),
        id: row.id,
        item_id: row.item_id,
        field: row.field,
        created_at: stored_time(row.created_at)?,
    })
}

fn checked_value(name: &str, value: &str) -> Result<(), VaultError> {
    if !valid_field_name(name) {
        return Err(VaultError::Invalid(format!(
            "`{}` is not a field name: 1-64 of a-z A-Z 0-9 _ -",
            name.chars().take(80).collect::<String>()
        )));
    }
    if value.len() > MAX_VALUE_BYTES {
        return Err(VaultError::Invalid(format!(
            "the value of field `{name}` is larger than {MAX_VALUE_BYTES} bytes"
        )));
    }
    Ok(())
}

impl Vaults {
    /// The use cases on `store`, sealing with `keys`; rules are checked against `bots` and
    /// `tools`.
    pub fn new(
        store: Arc<dyn VaultStore>,
        keys: KeyRing,
        bots: Arc<dyn crate::bots::BotStore>,
        tools: Arc<dyn crate::tools::ToolStore>,
    ) -> Self {
        Self {
            store,
            keys,
            bots,
            tools,
            apps: None,
        }
    }

    /// The same use cases, whose rules may name App connections of `apps`.
    pub fn with_apps(mut self, apps: Arc<dyn crate::apps::AppStore>) -> Self {
        self.apps = Some(apps);
        self
    }

    /// An opener over the same store and keys, for sends outside a Turn (the model-free code
    /// run).
    pub fn opener(&self) -> super::VaultOpener {
        super::VaultOpener::new(Arc::clone(&self.store), self.keys.clone())
    }

    fn seen(caller: &Caller) -> Visibility {
        Visibility {
            organization: caller.member.organization_id,
            member: caller.member.member_id,
        }
    }

    fn seal(&self, item: Uuid, name: &str, value: &str) -> Result<SealedField, VaultError> {
        let value = self
            .keys
            .seal_at(&field_place(item, name), value.as_bytes())
            .map_err(|_| VaultError::Seal)?;
        Ok(SealedField {
            name: name.to_string(),
            value,
        })
    }

    /// An item the caller sees and may change.
    async fn changeable(&self, caller: &Caller, id: Uuid) -> Result<ItemRow, VaultError> {
        caller.require(Resource::Vaults, Action::Write)?;
        let item = self
            .store
            .item(Self::seen(caller), id)
            .await?
            .ok_or(VaultError::NotFound("vault item"))?;
        if item.owner_member_id.is_none() && !caller.is_admin() {
            return Err(VaultError::NotAllowed(
                "only owners and admins change the organization's Vault items",
            ));
        }
        Ok(item)
    }

    /// Creates an item with its fields, each value sealed.
    pub async fn create(
        &self,
        caller: &Caller,
        request: CreateVaultItem,
    ) -> Result<VaultItem, VaultError> {
        caller.require(Resource::Vaults, Action::Write)?;
        let name = request.name.trim();
        if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
            return Err(VaultError::Invalid(
                "name must be 1-100 characters, none a control character".into(),
            ));
        }
        if request.owner == VaultOwner::Organization && !caller.is_admin() {
            return Err(VaultError::NotAllowed(
                "only owners and admins create the organization's Vault items",
            ));
        }
        if request.fields.len() > MAX_FIELDS {
            return Err(VaultError::Invalid(format!(
                "an item has at most {MAX_FIELDS} fields"
            )));
        }
        let id = Uuid::now_v7();
        let mut fields = Vec::with_capacity(request.fields.len());
        let mut names: Vec<_> = request.fields.iter().collect();
        names.sort();
        for (field, value) in names {
            checked_value(field, value)?;
            fields.push(self.seal(id, field, value)?);
        }
        let now = now_ms();
        let row = ItemRow {
            id,
            organization_id: caller.member.organization_id,
            owner_member_id: match request.owner {
                VaultOwner::Member => Some(caller.member.member_id),
                VaultOwner::Organization => None,
            },
            name: name.to_string(),
            fields: fields.iter().map(|f| (f.name.clone(), now)).collect(),
            created_at: now,
            updated_at: now,
        };
        self.store.create_item(&row, &fields).await?;
        Ok(item_view(row)?)
    }

    /// The items the caller sees (the organization's and its own), oldest first.
    pub async fn list(
        &self,
        caller: &Caller,
        paging: &Paging<Uuid>,
    ) -> Result<VaultItemPage, VaultError> {
        caller.require(Resource::Vaults, Action::Read)?;
        let rows = self
            .store
            .items(Self::seen(caller), paging.after, paging.fetch())
            .await?;
        Ok(paging.try_page(rows, |row| row.id, item_view)?)
    }

    /// One item the caller sees, with its fields' names.
    pub async fn get(&self, caller: &Caller, id: Uuid) -> Result<VaultItem, VaultError> {
        caller.require(Resource::Vaults, Action::Read)?;
        self.store
            .item(Self::seen(caller), id)
            .await?
            .map(item_view)
            .transpose()?
            .ok_or(VaultError::NotFound("vault item"))
    }

    /// Sets one field's value (a new field or a new value), sealed.
    pub async fn put_field(
        &self,
        caller: &Caller,
        id: Uuid,
        field: &str,
        request: PutVaultField,
    ) -> Result<VaultItem, VaultError> {
        let item = self.changeable(caller, id).await?;
        checked_value(field, &request.value)?;
        if item.fields.len() >= MAX_FIELDS && !item.fields.iter().any(|(name, _)| name == field) {
            return Err(VaultError::Invalid(format!(
                "an item has at most {MAX_FIELDS} fields"
            )));
        }
        let sealed = self.seal(id, field, &request.value)?;
        if !self.store.put_field(id, &sealed).await? {
            return Err(VaultError::NotFound("vault item"));
        }
        self.get(caller, id).await
    }

    /// Removes one field and the rules that name it.
    pub async fn delete_field(
        &self,
        caller: &Caller,
        id: Uuid,
        field: &str,
    ) -> Result<(), VaultError> {
        self.changeable(caller, id).await?;
        if self.store.delete_field(id, field).await? {
            Ok(())
        } else {
            Err(VaultError::NotFound("vault field"))
        }
    }

    /// Removes an item with its fields and rules. Saved calls that reference it fail with a
    /// clear error from then on; a new item under the same name does not replace it.
    pub async fn delete(&self, caller: &Caller, id: Uuid) -> Result<(), VaultError> {
        self.changeable(caller, id).await?;
        if self.store.delete_item(id).await? {
            Ok(())
        } else {
            Err(VaultError::NotFound("vault item"))
        }
    }

    /// Checks that every reference names a field of an item the caller sees (its
    /// organization's or its own), as a tool that holds them is registered.
    pub async fn check_references(
        &self,
        caller: &Caller,
        refs: &std::collections::BTreeSet<super::VaultRef>,
    ) -> Result<(), VaultError> {
        for reference in refs {
            let item = self
                .store
                .item(Self::seen(caller), reference.item)
                .await?
                .ok_or_else(|| {
                    VaultError::Invalid(format!("Vault item {} does not exist", reference.item))
                })?;
            if !item.fields.iter().any(|(name, _)| *name == reference.field) {
                return Err(VaultError::Invalid(format!("{reference} does not exist")));
            }
        }
        Ok(())
    }

    /// Adds a rule to an item the caller may change: a Bot the caller can use, or a
    /// registered HTTP tool, may read `field` (or `*`, every field).
    pub async fn create_rule(
        &self,
        caller: &Caller,
        id: Uuid,
        request: CreateVaultRule,
    ) -> Result<VaultRule, VaultError> {
        let item = self.changeable(caller, id).await?;
        if request.field != "*" && !valid_field_name(&request.field) {
            return Err(VaultError::Invalid(
                "field must be a field name or `*`".into(),
            ));
        }
        if request.field != "*" && !item.fields.iter().any(|(name, _)| *name == request.field) {
            return Err(VaultError::NotFound("vault field"));
        }
        let (kind, reader_id, reader_scope) = match &request.reader {
            VaultReader::Bot { bot_id } => {
                // Visibility and the token's Bot limit are part of the query.
                if self.bots.visible_bot(caller, *bot_id).await?.is_none() {
                    return Err(VaultError::NotFound("bot"));
                }
                ("bot", bot_id.as_uuid().to_string(), String::new())
            }
            VaultReader::CodeMode { bot_id } => {
                if self.bots.visible_bot(caller, *bot_id).await?.is_none() {
                    return Err(VaultError::NotFound("bot"));
                }
                ("code_mode", bot_id.as_uuid().to_string(), String::new())
            }
            VaultReader::Tool { name } => {
                if caller.bot_ids.is_some() {
                    return Err(VaultError::NotAllowed(
                        "a token limited to some Bots adds rules only for those Bots",
                    ));
                }
                let tools = self.tools.tools(caller.member.organization_id).await?;
                let tool = tools
                    .iter()
                    .find(|t| t.definition.name == *name)
                    .ok_or(VaultError::NotFound("tool"))?;
                // The rule covers the tool at this endpoint only: registering it again on
                // another URL needs a new rule from the item's owner.
                ("tool", name.clone(), tool.url.clone())
            }
            VaultReader::AppConnection { connection_id } => {
                if caller.bot_ids.is_some() {
                    return Err(VaultError::NotAllowed(
                        "a token limited to some Bots adds rules only for those Bots",
                    ));
                }
                let apps = self
                    .apps
                    .as_ref()
                    .ok_or(VaultError::NotFound("app connection"))?;
                // A live manual Connection of the caller's organization; its App's URL never
                // changes, so the ID alone names where the value goes.
                match apps
                    .connection(caller.member.organization_id, *connection_id)
                    .await?
                {
                    Some(row)
                        if row.status != openbot_schema::AppConnectionStatus::Removed
                            && row.auth == openbot_schema::AppAuthKind::Manual => {}
                    _ => return Err(VaultError::NotFound("app connection")),
                }
                ("app_connection", connection_id.to_string(), String::new())
            }
        };
        let row = self
            .store
            .create_rule(&RuleRow {
                id: Uuid::now_v7(),
                item_id: id,
                field: request.field,
                reader_kind: kind.to_string(),
                reader_id,
                reader_scope,
                created_at: now_ms(),
            })
            .await?;
        Ok(rule_view(row)?)
    }

    /// The rules of an item the caller sees, oldest first.
    pub async fn rules(
        &self,
        caller: &Caller,
        id: Uuid,
        paging: &Paging<Uuid>,
    ) -> Result<VaultRulePage, VaultError> {
        self.get(caller, id).await?;
        let rows = self.store.rules(id, paging.after, paging.fetch()).await?;
        let (rows, next_cursor) = paging.finish(rows, |row| row.id);
        Ok(VaultRulePage {
            items: rows.into_iter().map(rule_view).collect::<Result<_, _>>()?,
            next_cursor,
        })
    }

    /// Removes a rule of an item the caller may change. The next send checks the rules again.
    pub async fn delete_rule(&self, caller: &Caller, rule: Uuid) -> Result<(), VaultError> {
        caller.require(Resource::Vaults, Action::Write)?;
        let row = self
            .store
            .rule(rule)
            .await?
            .ok_or(VaultError::NotFound("vault rule"))?;
        // A rule of an item the caller cannot see is not found, not forbidden.
        self.changeable(caller, row.item_id)
            .await
            .map_err(|err| match err {
                VaultError::NotFound(_) => VaultError::NotFound("vault rule"),
                other => other,
            })?;
        if self.store.delete_rule(rule).await? {
            Ok(())
        } else {
            Err(VaultError::NotFound("vault rule"))
        }
    }
}
