//! The CLI as a client of a server: `openbot login`, `bots`, `chats`, `executions`, ... (one file
//! per area; `super::coverage` maps every operation of the API to its command). Every
//! command goes through the same [`openbot_core::Client`] an SDK program uses.

pub mod approvals;
pub mod apps;
pub mod billing;
pub mod bots;
pub mod budgets;
pub mod channels;
pub mod chats;
pub mod code;
pub mod computer_agent;
pub mod computers;
pub mod executions;
pub mod files;
pub mod health;
pub mod limits;
pub mod login;
pub mod members;
pub mod memories;
pub mod oauth;
pub mod organizations;
mod output;
pub mod paging;
mod profile;
pub mod providers;
pub mod tokens;
pub mod tools;
pub mod triggers;
pub mod usage;
pub mod vaults;

use std::sync::Arc;

use clap::Args;
use openbot_core::{Client, ConnectOptions, connect};

pub use output::Output;
use profile::Profile;

/// Where the server is and who is calling: flags, then the environment, then `openbot login`.
#[derive(Debug, Args, Clone)]
pub struct ServerArgs {
    /// The server, e.g. http://127.0.0.1:8080 (default: the one saved by `openbot login`).
    #[arg(long, env = "OPENBOT_SERVER", global = true)]
    pub server: Option<String>,
    /// An API token (default: the one saved by `openbot login`).
    #[arg(long, env = "OPENBOT_TOKEN", global = true, hide_env_values = true)]
    pub token: Option<String>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

impl ServerArgs {
    /// The server and the token to use.
    pub fn resolve(&self) -> anyhow::Result<(String, Option<String>)> {
        let saved = Profile::load()?;
        let server = self
            .server
            .clone()
            .or_else(|| saved.as_ref().map(|p| p.server.clone()))
            .ok_or_else(|| {
                anyhow::anyhow!("no server: run `openbot login --server <url>` or pass --server")
            })?;
        let token = self
            .token
            .clone()
            .or_else(|| saved.filter(|p| p.server == server).map(|p| p.token));
        Ok((server, token))
    }

    /// The client of the chosen server.
    pub async fn connect(&self) -> anyhow::Result<Arc<dyn Client>> {
        let (server, token) = self.resolve()?;
        Ok(connect(
            &server,
            ConnectOptions {
                token,
                ..ConnectOptions::default()
            },
        )
        .await?)
    }

    /// The client of the chosen server, with what only a server has (budgets, tools, ...).
    pub fn remote(&self) -> anyhow::Result<openbot_core::RemoteClient> {
        let (server, token) = self.resolve()?;
        Ok(openbot_core::RemoteClient::new(
            &server,
            ConnectOptions {
                token,
                ..ConnectOptions::default()
            },
        )?)
    }

    /// How results are printed.
    pub fn output(&self) -> Output {
        Output { json: self.json }
    }
}
