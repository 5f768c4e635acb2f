//! `openbot migrate`: brings the database to this build's schema version.

use std::process::ExitCode;

use clap::Args;

use super::node_args::NodeArgs;

/// Arguments of `openbot migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    node: NodeArgs,
}

/// Applies the migrations the database lacks. Safe to run again and from several processes.
pub async fn run(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    let version = openbot_server::node::migrate(&args.node.config()?).await?;
    println!("the database is at schema version {version}");
    Ok(ExitCode::SUCCESS)
}
