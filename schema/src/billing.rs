//! Billing: model prices, an organization's credits, and usage reports.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Where a model's price comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum PriceSource {
    /// The built-in catalog of the providers' published prices (see `as_of`).
    Catalog,
    /// The organization's own override.
    Organization,
}

/// A model's price per million tokens, in millionths of a US dollar (so `2500000` is $2.50
/// per million tokens).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct ModelPrice {
    /// The model spec as Bots name it, e.g. `openai:gpt-4o` or `anthropic:claude-sonnet-4-5`.
    pub model: String,
    /// Per million uncached input tokens.
    pub input_micros_per_million: u64,
    /// Per million output tokens.
    pub output_micros_per_million: u64,
    /// Per million input tokens the provider served from its cache.
    pub cached_input_micros_per_million: u64,
    /// The catalog's or the organization's.
    pub source: PriceSource,
    /// For a catalog price, the day the table was taken from the providers' price pages
    /// (`YYYY-MM-DD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
    /// For an override, when it was last set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<DateTime<Utc>>,
}

/// An organization's price for one model, replacing the catalog's for calls sent from now on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct PutModelPrice {
    /// The model spec as Bots name it (1-500 characters).
    #[schema(min_length = 1, max_length = 500)]
    pub model: String,
    /// Per million uncached input tokens, in millionths of a US dollar.
    pub input_micros_per_million: u64,
    /// Per million output tokens, in millionths of a US dollar.
    pub output_micros_per_million: u64,
    /// Per million cached input tokens; the input price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_micros_per_million: Option<u64>,
}

/// An organization's credits: what it was granted, minus what its model calls cost, minus
/// what calls being sent now hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct CreditBalance {
    /// Whether the organization is on credits (it has had a grant). An organization that is
    /// not is never refused for credits; its budgets still apply.
    pub enabled: bool,
    /// Grants minus charges, in millionths of a US dollar (negative when confirmed usage went
    /// past the estimates).
    pub balance_micros: i64,
    /// The estimates of calls being sent now.
    pub held_micros: i64,
    /// What a new call may still reserve: balance minus holds.
    pub available_micros: i64,
}

/// Credits to add to an organization's balance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(deny_unknown_fields)]
pub struct GrantCredits {
    /// How much, in millionths of a US dollar (at least 1).
    #[schema(minimum = 1)]
    pub amount_micros: u64,
    /// Why, for the ledger (at most 500 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 500)]
    pub note: Option<String>,
}

/// What a ledger entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum CreditKind {
    /// Credits granted by an owner or admin, or by the platform.
    Grant,
    /// The confirmed cost of one model call.
    Charge,
}

/// One entry of an organization's credit ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct CreditEntry {
    /// Its ID.
    pub id: uuid::Uuid,
    /// A grant or a charge.
    pub kind: CreditKind,
    /// Positive for a grant, negative for a charge, in millionths of a US dollar.
    pub amount_micros: i64,
    /// For a charge: the execution whose model call it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<crate::ExecutionId>,
    /// For a charge: the call, e.g. `2/model/1` (step, slot, attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// For a grant by a member: who.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_id: Option<uuid::Uuid>,
    /// For a grant: its note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// When it was written.
    pub created_at: DateTime<Utc>,
}

/// What a usage report adds up by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum UsageGroup {
    /// One row for the organization.
    Organization,
    /// A row per Bot that made the calls.
    Bot,
    /// A row per Chat the calls worked for.
    Chat,
    /// A row per member whose work made the calls.
    Member,
    /// A row per model spec.
    Model,
}

impl UsageGroup {
    /// The group as it appears in queries, e.g. `bot`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Organization => "organization",
            Self::Bot => "bot",
            Self::Chat => "chat",
            Self::Member => "member",
            Self::Model => "model",
        }
    }

    /// Reads a group from its query form.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "organization" => Some(Self::Organization),
            "bot" => Some(Self::Bot),
            "chat" => Some(Self::Chat),
            "member" => Some(Self::Member),
            "model" => Some(Self::Model),
            _ => None,
        }
    }
}

/// The model calls of one group in a time range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct UsageRow {
    /// The group's key: the organization's, Bot's, Chat's or member's ID, or the model spec.
    /// Calls with no Chat or member (service work) are left out of those two groupings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Model calls sent.
    pub calls: u64,
    /// Calls whose usage is confirmed (and charged).
    pub confirmed_calls: u64,
    /// Calls whose result came without usage: nothing was charged for them.
    pub unknown_calls: u64,
    /// Confirmed input tokens, including cached ones.
    pub input_tokens: u64,
    /// Confirmed output tokens.
    pub output_tokens: u64,
    /// Confirmed cached input tokens.
    pub cached_input_tokens: u64,
    /// The confirmed cost, in millionths of a US dollar.
    pub cost_micros: u64,
    /// The estimates of the calls with unknown usage (never charged; shown apart).
    pub unknown_estimate_micros: u64,
}

/// A page of a usage report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct UsagePage {
    /// The rows on this page, by key.
    pub items: Vec<UsageRow>,
    /// The cursor of the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A page of an organization's credit ledger, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
pub struct CreditLedgerPage {
    /// The entries on this page.
    pub items: Vec<CreditEntry>,
    /// The cursor of the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}
