//! The billing store: prices, credits, usage records and the reports over them.

use async_trait::async_trait;
use openbot_core::model::Pricing;
use openbot_schema::{ExecutionId, Usage, UsageGroup};
use uuid::Uuid;

use crate::store::{Millis, StoreError};

/// An organization's price for a model spec.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceRow {
    /// The model spec.
    pub model: String,
    /// Its price.
    pub price: Pricing,
    /// When it was set.
    pub updated_at: Millis,
}

/// An organization's credits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CreditsRow {
    /// Whether it has a credit account (a grant was made).
    pub enabled: bool,
    /// Grants minus charges.
    pub balance_micros: i64,
    /// The estimates of the calls held now.
    pub held_micros: i64,
}

/// One ledger entry.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerRow {
    /// Its ID.
    pub id: Uuid,
    /// `grant` or `charge`.
    pub kind: String,
    /// Positive for a grant, negative for a charge.
    pub amount_micros: i64,
    /// A charge's execution.
    pub execution_id: Option<Uuid>,
    /// A charge's call key.
    pub call_key: Option<String>,
    /// A grant's member.
    pub member_id: Option<Uuid>,
    /// A grant's note.
    pub note: Option<String>,
    /// When it was written.
    pub created_at: Millis,
}

/// Which usage records a report adds up.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageQuery {
    /// The organization.
    pub organization: Uuid,
    /// Sent at or after (ms).
    pub from: Option<Millis>,
    /// Sent before (ms).
    pub to: Option<Millis>,
    /// The grouping.
    pub group: UsageGroup,
    /// Only calls of these Chats' Bots (a Bot-limited caller), as a JSON array.
    pub bot_limit: Option<String>,
    /// Only calls made by this Bot.
    pub bot: Option<Uuid>,
    /// Only calls for this Chat.
    pub chat: Option<Uuid>,
    /// Only calls of this member's work.
    pub member: Option<Uuid>,
    /// Only calls to this model spec.
    pub model: Option<String>,
    /// Only groups after this key (a page's cursor).
    pub after: Option<String>,
    /// At most this many groups.
    pub limit: i64,
}

/// The sums of one group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UsageSums {
    /// The group's key.
    pub key: Option<String>,
    /// Calls sent.
    pub calls: i64,
    /// Calls settled with confirmed usage.
    pub confirmed_calls: i64,
    /// Calls whose result had no usage.
    pub unknown_calls: i64,
    /// Confirmed input tokens.
    pub input_tokens: i64,
    /// Confirmed output tokens.
    pub output_tokens: i64,
    /// Confirmed cached input tokens.
    pub cached_tokens: i64,
    /// Confirmed cost.
    pub cost_micros: i64,
    /// The estimates of the calls with unknown usage.
    pub unknown_estimate_micros: i64,
}

/// The usage record of one model call: its reservation and what it settled to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRecordRow {
    /// `held`, `settled`, `unknown` or `released`.
    pub state: String,
    /// The generation that reserved it.
    pub generation: i64,
    /// The model spec.
    pub model: String,
    /// The reservation's estimate; `None` for a call that had no reservation.
    pub estimate_micros: Option<i64>,
    /// The confirmed cost, once settled.
    pub cost_micros: Option<i64>,
    /// Confirmed input tokens, once settled.
    pub input_tokens: Option<i64>,
    /// Confirmed output tokens, once settled.
    pub output_tokens: Option<i64>,
}

/// Prices, credits and usage per organization.
#[async_trait]
pub trait BillingStore: Send + Sync + 'static {
    /// The organization's price overrides whose model comes after `after`, by model (text
    /// compared by bytes), at most `limit`.
    async fn prices(
        &self,
        organization: Uuid,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<PriceRow>, StoreError>;

    /// Sets the organization's price for `model`, replacing an earlier one.
    async fn put_price(
        &self,
        organization: Uuid,
        model: &str,
        price: Pricing,
    ) -> Result<PriceRow, StoreError>;

    /// Removes the organization's price for `model`; returns whether it existed.
    async fn delete_price(&self, organization: Uuid, model: &str) -> Result<bool, StoreError>;

    /// The organization's credits and what is held now.
    async fn credits(&self, organization: Uuid) -> Result<CreditsRow, StoreError>;

    /// Adds `amount_micros` to the organization's credits with a ledger entry, in one
    /// transaction (the first grant opens its credit account); `member` is who granted, `None`
    /// for the platform.
    async fn grant_credits(
        &self,
        organization: Uuid,
        amount_micros: i64,
        member: Option<Uuid>,
        note: Option<&str>,
    ) -> Result<CreditsRow, StoreError>;

    /// The organization's ledger, newest first, after `before` (an entry ID), `limit` entries.
    async fn ledger(
        &self,
        organization: Uuid,
        before: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<LedgerRow>, StoreError>;

    /// The sums of the usage records `query` selects, per group, by key.
    async fn usage_report(&self, query: &UsageQuery) -> Result<Vec<UsageSums>, StoreError>;

    /// The usage record of a model call, if one was written.
    async fn usage_record(
        &self,
        execution: ExecutionId,
        call_key: &str,
    ) -> Result<Option<UsageRecordRow>, StoreError>;

    /// Settles a call's confirmed usage that came after its result (a late receipt): priced at
    /// the call's saved price and charged once; a call already settled is left as it is.
    /// Returns whether this receipt settled it.
    async fn settle_receipt(
        &self,
        execution: ExecutionId,
        call_key: &str,
        usage: Usage,
    ) -> Result<bool, StoreError>;
}
