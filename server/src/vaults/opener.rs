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

/// Who reads at a send: the Turn's organization and member, its Bot, and what sends (an
/// HTTP tool or an App connection). Each of the Bot and the sender needs a rule for the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderPath {
    /// The organization the Turn works in; items of others are never found.
    pub organization: Uuid,
    /// The member the Turn is for; another member's items are not readable.
    pub member: Uuid,
    /// The Turn's Bot; `None` for a member's own request without a Bot (an App discovery),
    /// where the sender's rule alone decides.
    pub bot: Option<BotId>,
    /// What sends the request.
    pub through: Through,
}

/// What sends the request a reference is opened for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Through {
    /// An HTTP tool: its name and its endpoint URL as the Turn saved it (a tool rule holds
    /// only for the URL the tool had when the rule was added).
    Tool {
        /// The tool's name.
        name: String,
        /// Its endpoint URL.
        url: String,
    },
    /// An App connection's request to its MCP server.
    AppConnection {
        /// The Connection.
        id: Uuid,
        /// Its App's name, for messages.
        app: String,
    },
}

impl Through {
    fn reader(&self) -> Reader {
        match self {
            Self::Tool { name, url } => Reader {
                kind: "tool",
                id: name.clone(),
                scope: url.clone(),
            },
            Self::AppConnection { id, .. } => Reader {
                kind: "app_connection",
                id: id.to_string(),
                scope: String::new(),
            },
        }
    }

    fn named(&self) -> String {
        match self {
            Self::Tool { name, .. } => format!("the tool `{name}` at its endpoint"),
            Self::AppConnection { id, app } => format!("the connection {id} of the App `{app}`"),
        }
    }
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
        let sender = path.through.reader();
        // Without a Bot the sender's rule is asked in both places: it alone decides.
        let first = match path.bot {
            Some(bot) => Reader {
                kind: "bot",
                id: bot.as_uuid().to_string(),
                scope: String::new(),
            },
            None => sender.clone(),
        };
        // The Bot whose Code Mode runs must also read, when a program passed the references.
        let code_bot = match (from_code, path.bot) {
            (false, _) => None,
            (true, Some(bot)) => Some(bot),
            (true, None) => {
                return Err(OpenError::Refused(
                    "a Code Mode program's references need its Bot; the call was not sent".into(),
                ));
            }
        };
        // Without code the first reader stands third: its answer repeats the first.
        let third = match code_bot {
            Some(bot) => Reader {
                kind: "code_mode",
                id: bot.as_uuid().to_string(),
                scope: String::new(),
            },
            None => first.clone(),
        };
        let readers = [first, sender, third];
        let mut values = BTreeMap::new();
        for reference in refs {
            let found = self
                .store
                .field_for_send(
                    path.organization,
                    reference.item,
                    &reference.field,
                    [&readers[0], &readers[1], &readers[2]],
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
            if let Some(bot) = path.bot
                && found.allowed.first() != Some(&true)
            {
                return Err(OpenError::Refused(format!(
                    "no Vault rule lets the Bot {bot} read {reference}; the call was not sent"
                )));
            }
            if found.allowed.get(1) != Some(&true) {
                return Err(OpenError::Refused(format!(
                    "no Vault rule lets {} read {reference}; the call was not sent",
                    path.through.named()
                )));
            }
            if let Some(bot) = code_bot
                && found.allowed.get(2) != Some(&true)
            {
                return Err(OpenError::Refused(format!(
                    "no Vault rule lets the Code Mode runs of the Bot {bot} read {reference}; the call was not sent"
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
