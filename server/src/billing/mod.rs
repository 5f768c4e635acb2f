//! Usage and billing: model prices (a built-in catalog and each organization's overrides),
//! an organization's credits (a ledger of grants and charges, and its balance), and one
//! usage record per model call, its billing identity (execution and call key).
//!
//! Before a Turn sends a model request, the durable host reserves the request's estimate
//! (its input tokens and most output tokens, at the price in force) in the request's own
//! `sending` commit, against every budget above the Turn and the organization's credits; a
//! reservation that would overspend refuses the commit, and the Turn ends `max_cost` or
//! `credits_exhausted` without sending (`writes.rs`, `sql.rs`). The answer's commit settles
//! it: confirmed usage priced at the saved price and charged once, or unknown usage (no usage
//! in the result) that keeps its estimate and charges nothing. A call that ends otherwise
//! releases its hold, and so does a takeover. Reports add the records up by organization, Bot,
//! Chat, member or model (`service.rs`).

mod catalog;
mod service;
mod sql;
mod store;
mod writes;

pub use catalog::{CATALOG_DATE, catalog, catalog_price};
pub use service::{Billing, BillingError, DEFAULT_PAGE, MAX_PAGE, UsageFilter};
pub use store::{
    BillingStore, CreditsRow, LedgerRow, PriceRow, UsageQuery, UsageRecordRow, UsageSums,
};
pub use writes::{CallBilling, Refusal, Release, Reservation, Settlement, cost_of, estimate_of};
