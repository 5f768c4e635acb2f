//! The standalone OpenBot runtime.
//!
//! - [`Agent`] runs the model-and-tool loop in this process, with no server.
//! - [`connect`] returns the [`Client`]: `memory://` runs Bots and Chats in this process,
//!   and code written against it works unchanged against a server.
//! - [`model`] has the providers (OpenAI, Anthropic, any OpenAI-compatible endpoint, a
//!   scripted model), [`tool`] the tool trait, [`turn`] the one Turn loop and its [`turn::Host`].

mod agent;
pub mod client;
pub mod computer;
pub mod delegation;
mod error;
pub mod events;
pub mod files;
pub mod live;
pub mod mcp;
pub mod memories;
pub mod memory;
pub mod model;
pub mod outbound;
pub mod rules;
pub mod telemetry;
pub mod tool;
pub mod turn;
pub mod websocket;

pub use agent::{Agent, AgentBuilder, TurnHandle};
pub use client::{
    ApiAnswer, ApiBody, ApiBytes, ApiRequest, Client, ConnectOptions, OPERATIONS, ObserveStream,
    Operations, RemoteClient, connect,
};
pub use error::Error;
pub use openbot_codemode as codemode;
pub use openbot_schema as schema;

/// The manual's Rust examples, compiled and run as doc tests.
#[cfg(doctest)]
mod manual {
    #[doc = include_str!("../../README.md")]
    struct Readme;
    #[doc = include_str!("../../docs/agents.md")]
    struct Agents;
    #[doc = include_str!("../../docs/client.md")]
    struct Client;
    #[doc = include_str!("../../docs/models.md")]
    struct Models;
    #[doc = include_str!("../../docs/memory.md")]
    struct Memory;
    #[doc = include_str!("../../docs/apps.md")]
    struct Apps;
    #[doc = include_str!("../../docs/files.md")]
    struct Files;
    #[doc = include_str!("../../docs/computers.md")]
    struct Computers;
    #[doc = include_str!("../../docs/live.md")]
    struct Live;
}
