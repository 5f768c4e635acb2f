//! `resource-routing`: what routing a resource's close to its owner costs per call
//! (docs/benchmarks.md, "Node RPC"). Two node runtimes in this process on one SQLite database,
//! each with its RPC listener on 127.0.0.1; node B holds every resource (a no-op physical
//! thing, so only the directory's work is measured). Interleaved, one at a time:
//!
//! - held: B registers, attaches and closes a resource itself (the fast path of every App call);
//! - routed: B registers and attaches one, and node A closes it: A reads the row and the
//!   owner's node record, calls B over signed RPC, B closes and saves, A reads the saved row.
//!
//! Prints p50/p99 of each, their difference (the routing overhead per call) and their ratio;
//! never asserts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use clap::Parser;
use openbot_server::cluster::directory::{
    Directory, DirectoryConfig, Peers, Physical, ResourceStatus,
};
use openbot_server::cluster::rpc::auth::ClusterKey;
use openbot_server::cluster::rpc::{Listener, NodeClient, Operations};
use openbot_server::cluster::{Membership, NodeStore};
use openbot_server::sealed::KeyRing;
use openbot_server::store::SqliteStore;

#[path = "common/micros.rs"]
mod micros;
use micros::summary;

#[derive(Debug, Parser)]
#[command(name = "resource-routing")]
struct Args {
    /// Measured calls of each kind (after 100 warm-up ones).
    #[arg(long, default_value_t = 2000)]
    calls: usize,
}

/// A physical thing whose close does nothing: only the directory's own work is measured.
struct Nothing;

#[async_trait]
impl Physical for Nothing {
    async fn close(self: Box<Self>) -> Result<(), String> {
        Ok(())
    }
}

/// A node runtime: membership, RPC listener, directory.
async fn node(
    store: &Arc<SqliteStore>,
    keys: &KeyRing,
    key: &ClusterKey,
    name: &str,
) -> anyhow::Result<(Arc<Directory>, Membership)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?.to_string();
    let nodes: Arc<dyn NodeStore> = store.clone();
    let membership =
        Membership::join(Arc::clone(&nodes), name, uuid::Uuid::now_v7(), &address).await?;
    let directory = Directory::new(DirectoryConfig {
        store: store.clone(),
        records: store.clone(),
        keys: keys.clone(),
        node: name.to_string(),
        incarnation: membership.node.incarnation,
        lease: Duration::from_secs(60),
        peers: Some(Peers {
            nodes,
            client: NodeClient::new(name, key.clone())?,
            deadline: Duration::from_secs(5),
        }),
    });
    let rpc = Listener::new(
        name,
        membership.node.incarnation,
        key.clone(),
        directory.operations(Operations::default()),
    );
    tokio::spawn(async move { axum::serve(listener, rpc.router()).await });
    Ok((directory, membership))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let folder = tempfile::tempdir()?;
    let (keys, _) = KeyRing::generate("k1");
    let path = folder.path().join("bench.db");
    SqliteStore::migrate(&path).await?;
    let store = Arc::new(SqliteStore::open(&path, keys.clone()).await?);
    let key = ClusterKey::from_base64(&ClusterKey::generate())?;
    let (a, _a) = node(&store, &keys, &key, "node-a").await?;
    let (b, _b) = node(&store, &keys, &key, "node-b").await?;

    let mut held_us = Vec::with_capacity(args.calls);
    let mut routed_us = Vec::with_capacity(args.calls);
    for i in 0..100 + args.calls {
        let started = Instant::now();
        let id = b.register("bench.nothing", "bench", None, None).await?;
        b.attach(id, Box::new(Nothing));
        let closed = b.close(id).await?;
        let held_took = started.elapsed();
        anyhow::ensure!(closed == ResourceStatus::Closed, "held close: {closed:?}");

        let started = Instant::now();
        let id = b.register("bench.nothing", "bench", None, None).await?;
        b.attach(id, Box::new(Nothing));
        let closed = a.close(id).await?;
        let routed_took = started.elapsed();
        anyhow::ensure!(closed == ResourceStatus::Closed, "routed close: {closed:?}");
        if i >= 100 {
            held_us.push(held_took.as_secs_f64() * 1e6);
            routed_us.push(routed_took.as_secs_f64() * 1e6);
        }
    }
    let (held_p50, held_p99) = summary(held_us);
    let (routed_p50, routed_p99) = summary(routed_us);
    println!(
        "resource-routing: {} calls each (register, attach, close): held here p50 {held_p50:.1} us, \
         p99 {held_p99:.1} us; closed from another node p50 {routed_p50:.1} us, p99 {routed_p99:.1} us; \
         routing overhead p50 {:.1} us per call, routed p50 / held p50 = {:.2}x",
        args.calls,
        routed_p50 - held_p50,
        routed_p50 / held_p50
    );
    println!(
        "{}",
        serde_json::json!({"benchmark": "resource_routing", "calls": args.calls,
            "held_us": {"p50": held_p50, "p99": held_p99},
            "routed_us": {"p50": routed_p50, "p99": routed_p99},
            "overhead_p50_us": routed_p50 - held_p50,
            "ratio_p50": routed_p50 / held_p50})
    );
    Ok(())
}
