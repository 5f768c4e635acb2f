//! The OpenBot server: the durable execution engine on SQL and the `openbot` command's
//! building blocks.

pub mod approvals;
pub mod billing;
pub mod bots;
pub mod budgets;
pub mod chats;
pub mod codemode;
pub mod engine;
pub mod files;
pub mod http;
pub mod identity;
pub mod limits;
pub mod models;
pub mod node;
pub mod outcomes;
pub mod paging;
pub mod platform;
pub mod sealed;
pub mod store;
pub mod timing;
pub mod tools;
pub mod turns;
pub mod work;
