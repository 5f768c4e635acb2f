//! Paged lists: every list operation takes a [`PageQuery`] and answers one page, an object
//! `{"items": [...], "next_cursor": "..."}` whose `next_cursor` is absent on the last page.
//! Each page type is declared once here by [`page!`], so every list has the same shape.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::app::{App, AppConnection};
use crate::approval::{ApprovalRequest, ApprovalRule};
use crate::billing::ModelPrice;
use crate::bot::Bot;
use crate::budget::Budget;
use crate::channel::{Channel, ChannelSend};
use crate::chat::{Chat, ChatEntry};
use crate::file::StoredFile;
use crate::memory::Memory;
use crate::models::ProviderSettings;
use crate::organization::{Invitation, Member, Organization};
use crate::outcome::UnknownOutcome;
use crate::tool_registry::{DelegateTool, HttpTool};
use crate::trigger::{Reminder, Trigger, TriggerFiring};
use crate::{ApiToken, BotId};

/// How many items a page holds when the caller names no `limit`.
pub const DEFAULT_PAGE_LIMIT: u32 = 50;

/// The most items a page holds; a larger `limit` is refused.
pub const MAX_PAGE_LIMIT: u32 = 200;

/// Which page of a list to answer: the query parameters every list operation takes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// How many items the page holds: 1-200, default 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 200, nullable = false)]
    pub limit: Option<u32>,
    /// Where the page starts: the `next_cursor` of the page before (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(nullable = false)]
    pub cursor: Option<String>,
}

impl PageQuery {
    /// The first page of `limit` items.
    pub fn first(limit: u32) -> Self {
        Self {
            limit: Some(limit),
            cursor: None,
        }
    }

    /// The query string of this page (`limit=..&cursor=..`), empty when both are absent.
    pub fn to_query_string(&self) -> String {
        let mut parts = Vec::new();
        if let Some(limit) = self.limit {
            parts.push(format!("limit={limit}"));
        }
        if let Some(cursor) = &self.cursor {
            parts.push(format!("cursor={}", encode_query_value(cursor)));
        }
        parts.join("&")
    }
}

/// Percent-encodes a query value (cursors are URL-safe already; this keeps any text safe).
fn encode_query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The filter of `GET /v1/chats`, beside the page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ChatFilter {
    /// Only the Chats with this Bot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(value_type = Option<uuid::Uuid>, nullable = false)]
    pub bot: Option<BotId>,
}

/// One page of a list: its items in the list's order and the cursor of the next page.
pub trait Page: Serialize + DeserializeOwned + Send + 'static {
    /// What the list holds.
    type Item: Serialize + DeserializeOwned + Send + 'static;

    /// A page of `items`, followed by the page at `next_cursor` (none on the last page).
    fn new(items: Vec<Self::Item>, next_cursor: Option<String>) -> Self;

    /// The items on this page.
    fn items(&self) -> &[Self::Item];

    /// The cursor of the next page; `None` on the last page.
    fn next_cursor(&self) -> Option<&str>;

    /// The items and the next cursor.
    fn into_parts(self) -> (Vec<Self::Item>, Option<String>);
}

/// Declares a page type `$page` of `$item`s: `{items, next_cursor?}`.
macro_rules! page {
    ($(#[doc = $doc:literal])* $page:ident of $item:ty) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
        #[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
        pub struct $page {
            /// The items on this page, in the list's order.
            pub items: Vec<$item>,
            /// The cursor of the next page (pass it as `cursor`); absent on the last page.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schema(nullable = false)]
            #[cfg_attr(feature = "uniffi", uniffi(default))]
            pub next_cursor: Option<String>,
        }

        impl Page for $page {
            type Item = $item;

            fn new(items: Vec<$item>, next_cursor: Option<String>) -> Self {
                Self { items, next_cursor }
            }

            fn items(&self) -> &[$item] {
                &self.items
            }

            fn next_cursor(&self) -> Option<&str> {
                self.next_cursor.as_deref()
            }

            fn into_parts(self) -> (Vec<$item>, Option<String>) {
                (self.items, self.next_cursor)
            }
        }
    };
}

page!(
    /// One page of Apps, oldest first.
    AppPage of App
);
page!(
    /// One page of an App's Connections, oldest first.
    AppConnectionPage of AppConnection
);
page!(
    /// One page of Bots, oldest first.
    BotPage of Bot
);
page!(
    /// One page of Channels, oldest first.
    ChannelPage of Channel
);
page!(
    /// One page of a Channel's inputs and their replies, newest first.
    ChannelSendPage of ChannelSend
);
page!(
    /// One page of Chats, oldest first.
    ChatPage of Chat
);
page!(
    /// One page of a Chat's history, oldest first.
    ChatEntryPage of ChatEntry
);
page!(
    /// One page of approval requests, newest first.
    ApprovalRequestPage of ApprovalRequest
);
page!(
    /// One page of approval rules, oldest first.
    ApprovalRulePage of ApprovalRule
);
page!(
    /// One page of budgets, by scope and target.
    BudgetPage of Budget
);
page!(
    /// One page of Computers, oldest first.
    ComputerPage of crate::Computer
);
page!(
    /// One page of delegate tools, by name.
    DelegateToolPage of DelegateTool
);
page!(
    /// One page of stored files, newest first.
    StoredFilePage of StoredFile
);
page!(
    /// One page of invitations, newest first.
    InvitationPage of Invitation
);
page!(
    /// One page of the prices in force, by model spec (compared by bytes).
    ModelPricePage of ModelPrice
);
page!(
    /// One page of members, oldest first.
    MemberPage of Member
);
page!(
    /// One page of a Bot's memories, oldest first.
    MemoryPage of Memory
);
page!(
    /// One page of model provider settings, by kind.
    ProviderSettingsPage of ProviderSettings
);
page!(
    /// One page of organizations, oldest first.
    OrganizationPage of Organization
);
page!(
    /// One page of API tokens, newest first.
    ApiTokenPage of ApiToken
);
page!(
    /// One page of HTTP tools, by name.
    HttpToolPage of HttpTool
);
page!(
    /// One page of unknown outcomes, oldest first.
    UnknownOutcomePage of UnknownOutcome
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_page_has_no_next_cursor_field() {
        let page = BotPage::new(Vec::new(), None);
        assert_eq!(
            serde_json::to_value(&page).unwrap(),
            serde_json::json!({"items": []})
        );
        let more = BotPage::new(Vec::new(), Some("abc".into()));
        assert_eq!(
            serde_json::to_value(&more).unwrap(),
            serde_json::json!({"items": [], "next_cursor": "abc"})
        );
    }

    #[test]
    fn a_page_query_writes_its_query_string() {
        assert_eq!(PageQuery::default().to_query_string(), "");
        let query = PageQuery {
            limit: Some(5),
            cursor: Some("a b+/=".into()),
        };
        assert_eq!(query.to_query_string(), "limit=5&cursor=a%20b%2B%2F%3D");
    }
}
page!(
    /// One page of Vault items, oldest first.
    VaultItemPage of crate::vault::VaultItem
);
page!(
    /// One page of a Vault item's rules, oldest first.
    VaultRulePage of crate::vault::VaultRule
);
page!(
    /// One page of triggers, oldest first.
    TriggerPage of Trigger
);
page!(
    /// One page of a trigger's firings, newest first.
    TriggerFiringPage of TriggerFiring
);
page!(
    /// One page of a Chat's reminders, by due time.
    ReminderPage of Reminder
);
page!(
    /// One page of limits, by scope name.
    ScopeLimitPage of crate::limit::ScopeLimit
);
