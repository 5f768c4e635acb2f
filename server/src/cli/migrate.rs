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

/// Applies the migrations the database lacks, then seals the rows an older build wrote in
/// clear text. Safe to run again and from several processes.
pub async fn run(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    let migrated = openbot_server::node::migrate(&args.node.config()?).await?;
    match migrated.sealed_rows {
        Some(0) => {}
        Some(rows) => println!("sealed {rows} rows an older openbot wrote in clear text"),
        None => eprintln!(
            "openbot: OPENBOT_SEAL_KEYS is not set: rows an older openbot wrote in clear text \
             stay so (they are still read) until `openbot migrate` runs with the keys"
        ),
    }
    println!("the database is at schema version {}", migrated.version);
    Ok(ExitCode::SUCCESS)
}
