//! `openbot providers`: the organization's model providers (API keys and base URLs), which
//! owners and admins set. A key goes in from a variable or standard input and is never printed.

use std::io::Read;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use openbot_core::Operations;
use openbot_schema::{ProviderSettings, ProviderSettingsPage, PutProvider};

use super::ServerArgs;
use super::paging::{PageArgs, list};

/// Arguments of `openbot providers`.
#[derive(Debug, Args)]
pub struct ProvidersArgs {
    #[command(subcommand)]
    command: ProvidersCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum ProvidersCommand {
    /// Lists the configured providers (whether each has a key, never the key).
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Sets a provider's API key and/or base URL (owners and admins).
    Set {
        /// The provider, e.g. openai, anthropic.
        kind: String,
        /// Read the API key from this environment variable.
        #[arg(long, conflicts_with = "api_key_stdin")]
        api_key_env: Option<String>,
        /// Read the API key from standard input.
        #[arg(long)]
        api_key_stdin: bool,
        /// A base URL instead of the provider's default (openai and anthropic only).
        #[arg(long)]
        base_url: Option<String>,
    },
    /// Removes a provider's settings (owners and admins).
    Delete {
        /// The provider.
        kind: String,
    },
}

fn line(provider: &ProviderSettings) -> String {
    format!(
        "{}  {}  {}",
        provider.kind,
        if provider.has_key {
            "key set"
        } else {
            "no key"
        },
        provider.base_url.as_deref().unwrap_or("default URL")
    )
}

/// Runs the command.
pub async fn run(args: ProvidersArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        ProvidersCommand::List { page } => {
            list::<ProviderSettingsPage>(
                &client,
                "/v1/models/providers",
                &page,
                output,
                line,
                "no providers",
            )
            .await?;
        }
        ProvidersCommand::Set {
            kind,
            api_key_env,
            api_key_stdin,
            base_url,
        } => {
            let api_key = match (api_key_env, api_key_stdin) {
                (Some(variable), _) => Some(
                    std::env::var(&variable)
                        .with_context(|| format!("the variable {variable} is not set"))?,
                ),
                (None, true) => {
                    let mut text = String::new();
                    std::io::stdin().read_to_string(&mut text)?;
                    Some(text.trim_end_matches(['\r', '\n']).to_string())
                }
                (None, false) => None,
            };
            anyhow::ensure!(
                api_key.is_some() || base_url.is_some(),
                "give an API key (--api-key-env or --api-key-stdin) or --base-url"
            );
            let provider = client
                .put_provider(&kind, &PutProvider { api_key, base_url })
                .await?;
            output.print(&provider, line)?;
        }
        ProvidersCommand::Delete { kind } => {
            client.delete_provider(&kind).await?;
            output.print(&serde_json::json!({"deleted": kind}), |_| {
                format!("deleted {kind}")
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
