//! Limits: shared admission for outside calls. A limit names a scope of an organization (a
//! provider, the organization itself, a Bot, or any name a caller takes) and caps it with a
//! number of permits (calls at once) and token buckets (requests and tokens per window, a
//! minute unless configured). Everything is kept in the database, so every node counts the
//! same calls, and a permit belongs to an execution's generation: a takeover never frees a
//! slot twice nor loses one, and a permit whose holder lost its lease passes on.
//!
//! - `store`: the rows and the [`LimitStore`] trait; `sql`: its one body for both databases;
//! - `service`: [`Limits`], the one way a caller takes permits (a model request, a memory
//!   helper call and an App call name their scopes the same way), and [`LimitsAdmin`], the use
//!   cases that list, set and delete limits.

mod service;
mod sql;
mod store;
mod turn;

pub use service::{AcquireError, Limits, LimitsAdmin, LimitsError, Permit, model_scopes};
pub use store::{Holder, LimitRow, LimitSettings, LimitStore, Take, valid_scope};
pub use turn::LimitsFeature;
