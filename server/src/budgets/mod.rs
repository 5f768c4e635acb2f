//! Budgets: spending caps on all Turns of an organization, a Bot or a Chat, enforced before
//! each model request a Turn sends. The spending is read from the executions themselves, so it
//! is never stale and survives every restart; a failed read stops the request instead of
//! guessing.

mod sql;
mod store;

pub use store::{BudgetRow, BudgetStore, Exhausted};
