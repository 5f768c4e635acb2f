//! Channels: a Bot connected to Slack or Telegram in an organization.
//!
//! - `slack` / `telegram`: each platform's request proof and the inputs its requests hold.
//! - `inbound`: what a verified request asks for.
//! - `service`: the use cases (create, list, show, delete, sends, taking a request).
//! - `delivery`: one input's durable delivery: its Turn, then its reply as a saved send.
//! - `sends`: the platform calls and what their answers prove (the retry rules).
//! - `removal`: deleting a Channel closes admission at once and ends once every delivery has.
//! - `store` / `sql`: Channels, conversation Chats and inputs, once for both databases.

mod delivery;
mod inbound;
mod removal;
mod sends;
mod service;
pub mod slack;
mod sql;
mod store;
pub mod telegram;

pub use delivery::{
    CHANNEL_DELIVERY, DeliveryInput, DeliveryWorkflow, MAX_ATTEMPTS, channels_service,
};
pub use inbound::{Inbound, InboundError, InboundMessage, MAX_TEXT_CHARS};
pub use removal::{CHANNEL_REMOVAL, RemovalInput, RemovalWorkflow};
pub use sends::{ChannelHttp, Reply, SendOutcome, check_base};
pub use service::{
    ChannelError, ChannelSecrets, Channels, PlatformRequest, Received, channel_view, send_view,
    webhook_path,
};
pub use sql::MarkRemoving;
pub use store::{ChannelRow, ChannelStore, MessageRow, NewMessage, Stage};
