//! `openbot limits`: shared permits and rate limits per scope (see docs/limits.md).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use openbot_core::Operations;
use openbot_schema::{PutScopeLimit, ScopeLimit, ScopeLimitPage};

use super::ServerArgs;
use super::paging::{PageArgs, list};

/// Arguments of `openbot limits`.
#[derive(Debug, Args)]
pub struct LimitsArgs {
    #[command(subcommand)]
    command: LimitsCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum LimitsCommand {
    /// Lists the limits and the permits each has in use, by scope name.
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Sets the limit of a scope: `organization`, `provider:<kind>`, `bot:<id>` or any name.
    Set {
        /// The scope.
        scope: String,
        /// Calls in flight at once, on every node together.
        #[arg(long)]
        concurrent: Option<u32>,
        /// Requests per window.
        #[arg(long)]
        requests: Option<u64>,
        /// Tokens (input and output) per window.
        #[arg(long)]
        tokens: Option<u64>,
        /// The window in milliseconds (default a minute).
        #[arg(long)]
        window_ms: Option<u64>,
        /// How long a call waits for room before it fails (milliseconds, default 60000).
        #[arg(long)]
        max_wait_ms: Option<u64>,
    },
    /// Removes the limit of a scope.
    Delete {
        /// The scope.
        scope: String,
    },
}

fn line(limit: &ScopeLimit) -> String {
    let mut parts = vec![limit.scope.clone()];
    if let Some(n) = limit.max_concurrent {
        parts.push(format!("{} of {n} permits in use", limit.in_use));
    }
    if let Some(n) = limit.requests_per_window {
        parts.push(format!("{n} requests per {} ms", limit.window_ms));
    }
    if let Some(n) = limit.tokens_per_window {
        parts.push(format!("{n} tokens per {} ms", limit.window_ms));
    }
    parts.push(format!("wait at most {} ms", limit.max_wait_ms));
    parts.join("  ")
}

/// Runs the command.
pub async fn run(args: LimitsArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        LimitsCommand::List { page } => {
            list::<ScopeLimitPage>(&client, "/v1/limits", &page, output, line, "no limits").await?;
        }
        LimitsCommand::Set {
            scope,
            concurrent,
            requests,
            tokens,
            window_ms,
            max_wait_ms,
        } => {
            let request = PutScopeLimit {
                max_concurrent: concurrent,
                requests_per_window: requests,
                tokens_per_window: tokens,
                window_ms,
                max_wait_ms,
            };
            let limit = client.put_limit(&scope, &request).await?;
            output.print(&limit, line)?;
        }
        LimitsCommand::Delete { scope } => {
            client.delete_limit(&scope).await?;
            output.print(&serde_json::json!({"deleted": scope}), |_| {
                format!("deleted the limit of {scope}")
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
