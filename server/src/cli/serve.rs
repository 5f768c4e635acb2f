//! `openbot serve`: runs a node and its HTTP API until SIGINT or SIGTERM, then gives its work
//! up so other nodes take it over at once.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use openbot_server::cluster::directory::{self, Directory, DirectoryConfig, Peers};
use openbot_server::cluster::rpc::auth::ClusterKey;
use openbot_server::cluster::rpc::{Listener, NodeClient, Operations};
use openbot_server::cluster::{self, Membership};
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
    /// The private RPC listener other nodes call (docs/cluster.md); never the public address.
    /// Off when unset. Needs `OPENBOT_CLUSTER_KEY`.
    #[arg(long, env = "OPENBOT_RPC_BIND")]
    rpc_bind: Option<SocketAddr>,
    /// The `host:port` other nodes reach the RPC listener at; the bound address by default
    /// (set it when binding to 0.0.0.0).
    #[arg(long, env = "OPENBOT_RPC_ADVERTISE")]
    rpc_advertise: Option<String>,
}

/// The node's RPC listener and its place in the cluster, when `--rpc-bind` is set.
async fn join_cluster(
    args: &ServeArgs,
    node_name: &str,
    database: &node::Database,
    directory: &Arc<Directory>,
    stop: tokio_util::sync::CancellationToken,
) -> anyhow::Result<Option<Membership>> {
    let Some(bind) = args.rpc_bind else {
        return Ok(None);
    };
    if bind == args.bind && bind.port() != 0 {
        anyhow::bail!(
            "--rpc-bind must differ from --bind: the RPC listener is never the public one"
        );
    }
    let key = std::env::var("OPENBOT_CLUSTER_KEY").map_err(|_| {
        anyhow::anyhow!(
            "--rpc-bind needs OPENBOT_CLUSTER_KEY, the key every node of the cluster shares \
             (`openssl rand -base64 32` makes one)"
        )
    })?;
    let key = ClusterKey::from_base64(&key)?;
    let store = cluster::store(&database.features)
        .ok_or_else(|| anyhow::anyhow!("this database has no nodes table"))?;
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen for RPC on {bind}: {e}"))?;
    let address = listener.local_addr()?;
    let advertised = args
        .rpc_advertise
        .clone()
        .unwrap_or_else(|| address.to_string());
    let membership = Membership::join(
        Arc::clone(store),
        node_name,
        directory.incarnation(),
        &advertised,
    )
    .await?;
    directory.connect(Peers {
        nodes: Arc::clone(store),
        client: NodeClient::new(node_name, key.clone())?,
        deadline: directory::CLOSE_DEADLINE,
    });
    let rpc = Listener::new(
        node_name,
        membership.node.incarnation,
        key,
        rpc_operations(database, directory),
    );
    openbot_server::telemetry::spawn(async move {
        let served = axum::serve(listener, rpc.router())
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(err) = served {
            tracing::error!("the RPC listener stopped: {err}");
        }
    });
    eprintln!("openbot: RPC for the cluster on {address} (advertised as {advertised})");
    Ok(Some(membership))
}

/// What this node answers over RPC: closes of the resources it holds, and calls on the
/// machines' links it holds.
fn rpc_operations(database: &node::Database, directory: &Arc<Directory>) -> Operations {
    let operations = directory.operations(Operations::default());
    match openbot_server::computers::links(&database.features) {
        Some(links) => links.operations(operations),
        None => operations,
    }
}

/// Runs the node.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let started = std::time::Instant::now();
    // Registered first: a signal during start-up stops the node once it serves, instead of
    // killing it with the default action.
    let signal = shutdown_signal();
    let stopping = tokio_util::sync::CancellationToken::new();
    let cancel = stopping.clone();
    openbot_server::telemetry::spawn(async move {
        signal.await;
        cancel.cancel();
    });
    let stop = stopping.clone().cancelled_owned();
    let config = args.node.config()?;
    let (database, keys) = node::open_database_and_keys(&config).await?;
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
    // This start's resource directory: the physical resources its phases open (MCP sessions)
    // are registered there before they connect, under this start's incarnation.
    let resources = directory::store(&database.features)
        .ok_or_else(|| anyhow::anyhow!("this database has no resources table"))?;
    let directory = Directory::new(DirectoryConfig {
        store: Arc::clone(resources),
        records: Arc::clone(&database.store),
        keys: keys.clone(),
        node: config.node_name.clone(),
        incarnation: uuid::Uuid::now_v7(),
        lease: directory::LEASE,
        peers: None,
    });
    directory.keep_leases(stopping.clone());
    let database = database.with_directory(Arc::clone(&directory));
    let engine = Arc::new(node::start(&config, &database, keys).await?);
    let membership = join_cluster(
        &args,
        &config.node_name,
        &database,
        &directory,
        stopping.clone(),
    )
    .await?;
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
    if let Some(membership) = membership
        && let Err(err) = membership.leave().await
    {
        eprintln!("openbot: could not mark this node gone: {err}");
    }
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
