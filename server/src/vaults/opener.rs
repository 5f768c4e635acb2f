//! Opening Vault fields at the call boundary: each send reads the item, its field and the
//! rules again, as of that moment, and opens only the fields it references. What it returns
//! goes into the outgoing request and nowhere else; a refusal names the item ID and the field,
//! never a value.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use openbot_schema::BotId;
use uuid::Uuid;

use super::reference::VaultRef;
use super::store::{Reader, VaultStore, field_place};
use crate::sealed::KeyRing;
use crate::store::StoreError;

/// Who reads at a send: the Turn's organization and member, its Bot, and the tool that sends.
/// Every one of the Bot and the tool needs a rule for the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderPath {
    /// The organization the Turn works in; items of others are never found.
    pub organization: Uuid,
    /// The member the Turn is for; another member's items are not readable.
    pub member: Uuid,
    /// The Turn's Bot.
    pub bot: BotId,
    /// The HTTP tool's name.
    pub tool: String,
    /// The HTTP tool's endpoint URL, as the Turn saved it: a tool rule holds only for the URL
    /// the tool had when the rule was added.
    pub tool_url: String,
}

/// Why a send may not read a field. The message is safe to show the model.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// A missing item, field or rule: the call is not sent, the model is told why.
    #[error("{0}")]
    Refused(String),
    /// Storage failed or a value does not open.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Opens referenced fields for sends.
#[derive(Clone)]
pub struct VaultOpener {
    store: Arc<dyn VaultStore>,
    keys: KeyRing,
}

impl std::fmt::Debug for VaultOpener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VaultOpener")
    }
}

impl VaultOpener {
    /// An opener over `store` with the key ring its values were sealed with.
    pub fn new(store: Arc<dyn VaultStore>, keys: KeyRing) -> Self {
        Self { store, keys }
    }

    /// Checks and opens every reference for `path`, or refuses the whole send. With
    /// `from_code` the references came from a Code Mode program's arguments: the Bot's Code
    /// Mode runs need a rule as well.
    pub async fn open(
        &self,
        refs: &BTreeSet<VaultRef>,
        path: &ReaderPath,
        from_code: bool,
    ) -> Result<BTreeMap<VaultRef, String>, OpenError> {
        let code_reader = Reader {
            kind: "code_mode",
            id: path.bot.as_uuid().to_string(),
            scope: String::new(),
        };
        let readers = [
            Reader {
                kind: "bot",
                id: path.bot.as_uuid().to_string(),
                scope: String::new(),
            },
            Reader {
                kind: "tool",
                id: path.tool.clone(),
                scope: path.tool_url.clone(),
            },
        ];
        let mut values = BTreeMap::new();
        for reference in refs {
            let found = self
                .store
                .field_for_send(
                    path.organization,
                    reference.item,
                    &reference.field,
                    // Without code the Bot stands third: its answer repeats the first.
                    [
                        &readers[0],
                        &readers[1],
                        if from_code { &code_reader } else { &readers[0] },
                    ],
                )
                .await?;
            let Some(found) = found else {
                return Err(OpenError::Refused(format!(
                    "Vault item {} does not exist (it was deleted, or never was in this organization); the call was not sent",
                    reference.item
                )));
            };
            if found
                .owner_member_id
                .is_some_and(|owner| owner != path.member)
            {
                return Err(OpenError::Refused(format!(
                    "Vault item {} belongs to another member; the call was not sent",
                    reference.item
                )));
            }
            let Some(sealed) = found.value else {
                return Err(OpenError::Refused(format!(
                    "Vault item {} has no field `{}`; the call was not sent",
                    reference.item, reference.field
                )));
            };
            if found.allowed.first() != Some(&true) {
                return Err(OpenError::Refused(format!(
                    "no Vault rule lets the Bot {} read {reference}; the call was not sent",
                    path.bot
                )));
            }
            if found.allowed.get(1) != Some(&true) {
                return Err(OpenError::Refused(format!(
                    "no Vault rule lets the tool `{}` at its endpoint read {reference}; the call was not sent",
                    path.tool
                )));
            }
            if found.allowed.get(2) != Some(&true) {
                return Err(OpenError::Refused(format!(
                    "no Vault rule lets the Code Mode runs of the Bot {} read {reference}; the call was not sent",
                    path.bot
                )));
            }
            let plain = self
                .keys
                .open_at(&field_place(reference.item, &reference.field), &sealed)
                .map_err(|e| StoreError::Invalid(e.to_string()))?;
            let text = String::from_utf8(plain)
                .map_err(|_| StoreError::Invalid(format!("{reference} is not text")))?;
            values.insert(reference.clone(), text);
        }
        Ok(values)
    }
}
