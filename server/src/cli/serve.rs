//! `openbot serve`: runs a node and its HTTP API until SIGINT or SIGTERM, then gives its work
//! up so other nodes take it over at once.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use openbot_server::http::{AppState, app};
use openbot_server::node;

use super::node_args::NodeArgs;

/// Arguments of `openbot serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    node: NodeArgs,
    /// The address to listen on; port 0 picks a free port (the address is printed).
    #[arg(long, env = "OPENBOT_BIND", default_value = "127.0.0.1:8080")]
    bind: SocketAddr,
}

/// Runs the node.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let started = std::time::Instant::now();
    // Registered first: a signal during start-up stops the node once it serves, instead of
    // killing it with the default action.
    let stop = shutdown_signal();
    let config = args.node.config()?;
    let database = node::open_database(&config).await?;
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.bind))?;
    let address = listener.local_addr()?;
    if let Some(secret) = node::bootstrap(database.identity.as_ref()).await? {
        println!("{secret}");
        eprintln!("openbot: first start: the line above is the admin token; it is shown only once");
    }
    let objects = node::objects(&config)?;
    // The node's file deletions, retention sweep and Turns reach the same object store.
    let database = database.with_objects(Arc::clone(&objects));
    let engine = Arc::new(node::start(&config, &database).await?);
    let state = AppState::new(
        Arc::clone(&engine),
        &database,
        objects,
        config.platform.clone(),
    );
    let backend = if config.database_url.is_some() {
        "postgres"
    } else {
        "sqlite"
    };
    eprintln!(
        "openbot: node {} on {backend} listening on http://{address} (ready in {} ms)",
        config.node_name,
        started.elapsed().as_millis()
    );
    openbot_server::http::serve(listener, app(state), stop).await?;
    eprintln!("openbot: stopping; releasing work");
    engine.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

/// Registers for SIGINT and SIGTERM now; the future ends at the first of them.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let signals = signal(SignalKind::interrupt()).and_then(|interrupt| {
            signal(SignalKind::terminate()).map(|terminate| (interrupt, terminate))
        });
        async move {
            match signals {
                Ok((mut interrupt, mut terminate)) => {
                    tokio::select! {
                        _ = interrupt.recv() => {}
                        _ = terminate.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
