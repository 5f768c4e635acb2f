//! `openbot serve`: runs a node until it gets SIGINT or SIGTERM, then gives its work up so
//! other nodes take it over at once.

use std::process::ExitCode;

use clap::Args;

use super::node_args::NodeArgs;

/// Arguments of `openbot serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    node: NodeArgs,
}

/// Runs the node.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = args.node.config();
    let engine = openbot_server::node::start(&config).await?;
    let backend = if config.database_url.is_some() {
        "postgres"
    } else {
        "sqlite"
    };
    eprintln!("openbot: node {} running on {backend}", config.node_name);
    shutdown_signal().await;
    eprintln!("openbot: stopping; releasing work");
    engine.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
