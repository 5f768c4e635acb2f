//! `rpc-roundtrip`: a node RPC call (`ping`, signed both ways with the cluster key) against a
//! plain HTTP round trip to the same kind of server on the same machine, in the same run
//! (docs/benchmarks.md, "Node RPC"). Both servers run in this process on 127.0.0.1 with one
//! kept-alive connection each; calls are one at a time (latency). Prints p50/p99 and the ratio
//! of the p50s; never asserts.

use std::time::{Duration, Instant};

use clap::Parser;
use openbot_server::cluster::NodeRecord;
use openbot_server::cluster::rpc::auth::ClusterKey;
use openbot_server::cluster::rpc::{Listener, NodeClient, Operations, PING};

#[path = "common/micros.rs"]
mod micros;
use micros::summary;

#[derive(Debug, Parser)]
#[command(name = "rpc-roundtrip")]
struct Args {
    /// Measured calls of each kind (after 200 warm-up ones).
    #[arg(long, default_value_t = 5000)]
    calls: usize,
}

async fn serve(router: axum::Router) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?.to_string();
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(address)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let key = ClusterKey::from_base64(&ClusterKey::generate())?;
    let incarnation = uuid::Uuid::now_v7();
    let rpc = Listener::new("node-b", incarnation, key.clone(), Operations::default());
    let rpc_address = serve(rpc.router()).await?;
    // The baseline: the same body as `ping` answers, from a plain axum route.
    let plain = axum::Router::new().route(
        "/ping",
        axum::routing::post(|| async {
            serde_json::json!({"node": "node-b", "incarnation": uuid::Uuid::nil(), "time_ms": 0})
                .to_string()
        }),
    );
    let plain_address = serve(plain).await?;
    let node = NodeRecord {
        name: "node-b".into(),
        incarnation,
        rpc_address,
        started_at: 0,
        heartbeat_at: 0,
        left_at: None,
    };
    let client = NodeClient::new("node-a", key)?;
    let http = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let plain_url = format!("http://{plain_address}/ping");

    let mut rpc_us = Vec::with_capacity(args.calls);
    let mut plain_us = Vec::with_capacity(args.calls);
    for i in 0..200 + args.calls {
        // Interleaved, so both see the same machine.
        let started = Instant::now();
        client
            .call(
                &node,
                PING,
                b"{}".to_vec(),
                Duration::from_secs(5),
                &format!("r{i}"),
            )
            .await?;
        let rpc_took = started.elapsed();
        let started = Instant::now();
        http.post(&plain_url)
            .body("{}")
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        let plain_took = started.elapsed();
        if i >= 200 {
            rpc_us.push(rpc_took.as_secs_f64() * 1e6);
            plain_us.push(plain_took.as_secs_f64() * 1e6);
        }
    }
    let (rpc_p50, rpc_p99) = summary(rpc_us);
    let (plain_p50, plain_p99) = summary(plain_us);
    println!(
        "rpc-roundtrip: {} calls each: node RPC ping p50 {rpc_p50:.1} us, p99 {rpc_p99:.1} us; \
         plain HTTP POST p50 {plain_p50:.1} us, p99 {plain_p99:.1} us; RPC p50 / plain p50 = {:.2}x",
        args.calls,
        rpc_p50 / plain_p50
    );
    println!(
        "{}",
        serde_json::json!({"benchmark": "rpc_roundtrip", "calls": args.calls,
            "rpc_us": {"p50": rpc_p50, "p99": rpc_p99},
            "plain_us": {"p50": plain_p50, "p99": plain_p99},
            "ratio_p50": rpc_p50 / plain_p50})
    );
    Ok(())
}
