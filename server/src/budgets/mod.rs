//! Budgets: spending caps on all Turns of an organization, a Bot or a Chat, enforced before
//! each model request a Turn sends by the request's reservation (`crate::billing`). The
//! spending is read from the model calls' usage records (their confirmed, priced cost), so it
//! is never stale and survives every restart; a failed read stops the request instead of
//! guessing.

mod service;
mod sql;
mod store;

pub use service::Budgets;
pub(crate) use store::parse_scope;
pub use store::{BudgetRow, BudgetStore, Exhausted};
