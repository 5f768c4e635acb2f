//! `openbot health`: whether a server answers (no token needed).

use std::process::ExitCode;

use clap::Args;
use openbot_core::Operations;

use super::ServerArgs;

/// Arguments of `openbot health`.
#[derive(Debug, Args)]
pub struct HealthArgs {
    #[command(flatten)]
    server: ServerArgs,
}

/// Runs the command.
pub async fn run(args: HealthArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let health = client.health().await?;
    args.server
        .output()
        .print(&health, |health| health.status.clone())?;
    Ok(ExitCode::SUCCESS)
}
