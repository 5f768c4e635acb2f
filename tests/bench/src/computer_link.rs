//! `computer-link`: what reaching a paired machine's terminal costs through its link, on the
//! node that holds the link and through another node (docs/benchmarks.md, "Computers"). Two
//! node runtimes in this process on one SQLite database, each with its RPC listener on
//! 127.0.0.1; the real agent (`openbot computer run`, a separate process) links to node A. Node
//! A's link route here skips the credential check (it runs once per connection, not per call).
//!
//! - round trip: write a line to `cat` in a terminal session and read it back by cursor, each
//!   a Computer tool call through the links: from node A (its own link: one WebSocket hop) and
//!   from node B (signed RPC to A, then the WebSocket), interleaved, one session each;
//! - throughput: a program writes `--megabytes` MB; read to its end by cursor from A and from B
//!   (the bytes delivered, and the chunks a slower reader lost: a session keeps its newest
//!   1 MiB).
//!
//! Prints p50/p99 of the round trips, MB/s of each read, and the ratios of B to A (the owner,
//! the baseline measured in the same run); never asserts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::response::IntoResponse;
use clap::Parser;
use openbot_core::computer::link::LinkResult;
use openbot_schema::{ExecutionId, TerminalOutput, TerminalSession};
use openbot_server::cluster::directory::{Directory, DirectoryConfig, Peers};
use openbot_server::cluster::rpc::auth::ClusterKey;
use openbot_server::cluster::rpc::{Listener, NodeClient, Operations};
use openbot_server::cluster::{Membership, NodeStore};
use openbot_server::computers::Links;
use openbot_server::computers::link::Request;
use openbot_server::sealed::KeyRing;
use openbot_server::store::SqliteStore;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use uuid::Uuid;

#[path = "common/micros.rs"]
mod micros;
use micros::summary;

#[derive(Debug, Parser)]
#[command(name = "computer-link")]
struct Args {
    /// The `openbot` binary whose `computer run` is the agent.
    #[arg(long)]
    openbot: std::path::PathBuf,
    /// Measured round trips through each node (after 50 warm-up ones).
    #[arg(long, default_value_t = 500)]
    round_trips: usize,
    /// Megabytes the throughput program writes.
    #[arg(long, default_value_t = 16)]
    megabytes: usize,
}

/// A node runtime: membership, directory, the machines' links, the RPC listener.
async fn node(
    store: &Arc<SqliteStore>,
    keys: &KeyRing,
    key: &ClusterKey,
    name: &str,
) -> anyhow::Result<(Arc<Links>, Membership)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?.to_string();
    let nodes: Arc<dyn NodeStore> = store.clone();
    let membership = Membership::join(Arc::clone(&nodes), name, Uuid::now_v7(), &address).await?;
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
    let links = Links::new(Arc::clone(&directory), None);
    let rpc = Listener::new(
        name,
        membership.node.incarnation,
        key.clone(),
        links.operations(directory.operations(Operations::default())),
    );
    tokio::spawn(async move { axum::serve(listener, rpc.router()).await });
    Ok((links, membership))
}

/// One Computer tool call through `links`; the answer's text.
async fn call(
    links: &Links,
    computer: Uuid,
    tool: &str,
    arguments: Value,
) -> anyhow::Result<String> {
    let request = Request {
        tool: tool.into(),
        arguments,
        execution_id: ExecutionId::new(),
        call_id: "bench".into(),
    };
    match links
        .call(computer, request, Duration::from_secs(30))
        .await?
    {
        LinkResult::Output { content } => Ok(content
            .iter()
            .filter_map(|part| match part {
                openbot_schema::ContentPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()),
        LinkResult::Error { message, .. } => anyhow::bail!("{tool}: {message}"),
    }
}

async fn start(links: &Links, computer: Uuid, command: &str) -> anyhow::Result<String> {
    let text = call(
        links,
        computer,
        "computer_terminal_start",
        json!({"command": command}),
    )
    .await?;
    Ok(serde_json::from_str::<TerminalSession>(&text)?.id)
}

async fn read(
    links: &Links,
    computer: Uuid,
    session: &str,
    after: u64,
) -> anyhow::Result<TerminalOutput> {
    let text = call(
        links,
        computer,
        "computer_terminal_read",
        json!({"session_id": session, "after": after, "wait_ms": 5000}),
    )
    .await?;
    Ok(serde_json::from_str(&text)?)
}

/// One round trip: a line written to `cat`, read back.
async fn round_trip(
    links: &Links,
    computer: Uuid,
    session: &str,
    cursor: &mut u64,
    i: usize,
) -> anyhow::Result<Duration> {
    let line = format!("ping {i}");
    let started = Instant::now();
    call(
        links,
        computer,
        "computer_terminal_write",
        json!({"session_id": session, "input": format!("{line}\n")}),
    )
    .await?;
    let mut seen = String::new();
    while !seen.contains(&line) {
        let out = read(links, computer, session, *cursor).await?;
        *cursor = out.next_cursor;
        seen.push_str(&out.text());
    }
    Ok(started.elapsed())
}

/// Reads a producer's whole output by cursor: MB/s, bytes delivered, chunks lost.
async fn throughput(
    links: &Links,
    computer: Uuid,
    megabytes: usize,
) -> anyhow::Result<(f64, u64, u64)> {
    let command = format!("head -c {} /dev/zero | tr '\\0' x", megabytes * 1024 * 1024);
    let started = Instant::now();
    let session = start(links, computer, &command).await?;
    let (mut cursor, mut bytes, mut dropped) = (0, 0u64, 0u64);
    loop {
        let out = read(links, computer, &session, cursor).await?;
        cursor = out.next_cursor;
        dropped += out.dropped;
        bytes += out.chunks.iter().map(|c| c.text.len() as u64).sum::<u64>();
        if out.exited {
            break;
        }
    }
    let took = started.elapsed().as_secs_f64();
    call(
        links,
        computer,
        "computer_terminal_close",
        json!({"session_id": session}),
    )
    .await
    .ok();
    Ok((bytes as f64 / 1e6 / took, bytes, dropped))
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
    let computer = Uuid::now_v7();

    // Node A's link route, for the agent.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let route =
        axum::Router::new()
            .route(
                "/v1/computers/link",
                axum::routing::get(
                    |State((links, computer)): State<(Arc<Links>, Uuid)>,
                     upgrade: WebSocketUpgrade| async move {
                        match links.register(computer).await {
                            Ok(registered) => {
                                upgrade.on_upgrade(move |socket| links.serve(registered, socket))
                            }
                            Err(_) => axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response(),
                        }
                    },
                ),
            )
            .with_state((Arc::clone(&a), computer));
    tokio::spawn(async move { axum::serve(listener, route).await });
    let work = folder.path().join("work");
    std::fs::create_dir(&work)?;
    let saved = folder.path().join("computer.json");
    std::fs::write(
        &saved,
        json!({"server": base, "computer_id": computer, "credential": "obc_bench"}).to_string(),
    )?;
    let mut agent = tokio::process::Command::new(&args.openbot)
        .args(["computer", "run", "--json", "--credential-file"])
        .arg(&saved)
        .arg("--folder")
        .arg(&work)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut lines = tokio::io::BufReader::new(
        agent
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?,
    )
    .lines();
    loop {
        let line = lines
            .next_line()
            .await?
            .ok_or_else(|| anyhow::anyhow!("the agent ended"))?;
        if line.contains("\"linked\"") {
            break;
        }
    }
    // The node takes the socket just after the agent hears it linked.
    let mut session_a = start(&a, computer, "stty -echo; exec cat").await;
    for _ in 0..50 {
        if session_a.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        session_a = start(&a, computer, "stty -echo; exec cat").await;
    }
    let session_a = session_a?;
    let session_b = start(&b, computer, "stty -echo; exec cat").await?;

    let (mut cursor_a, mut cursor_b) = (0, 0);
    let mut owner_us = Vec::with_capacity(args.round_trips);
    let mut routed_us = Vec::with_capacity(args.round_trips);
    for i in 0..50 + args.round_trips {
        let owner = round_trip(&a, computer, &session_a, &mut cursor_a, i).await?;
        let routed = round_trip(&b, computer, &session_b, &mut cursor_b, i).await?;
        if i >= 50 {
            owner_us.push(owner.as_secs_f64() * 1e6);
            routed_us.push(routed.as_secs_f64() * 1e6);
        }
    }
    let (owner_p50, owner_p99) = summary(owner_us);
    let (routed_p50, routed_p99) = summary(routed_us);
    let (owner_mbs, owner_bytes, owner_dropped) = throughput(&a, computer, args.megabytes).await?;
    let (routed_mbs, routed_bytes, routed_dropped) =
        throughput(&b, computer, args.megabytes).await?;
    println!(
        "computer-link: {} round trips each (a terminal write, then reads by cursor until it comes back): \
         on the link's owner p50 {owner_p50:.1} us, p99 {owner_p99:.1} us; through another node p50 \
         {routed_p50:.1} us, p99 {routed_p99:.1} us; routed / owner p50 = {:.2}x",
        args.round_trips,
        routed_p50 / owner_p50
    );
    println!(
        "computer-link: {} MB read by cursor: on the owner {owner_mbs:.1} MB/s ({owner_bytes} bytes, \
         {owner_dropped} chunks lost), through another node {routed_mbs:.1} MB/s ({routed_bytes} bytes, \
         {routed_dropped} chunks lost); routed / owner = {:.2}x",
        args.megabytes,
        routed_mbs / owner_mbs
    );
    println!(
        "{}",
        json!({"benchmark": "computer_link", "round_trips": args.round_trips,
            "owner_us": {"p50": owner_p50, "p99": owner_p99},
            "routed_us": {"p50": routed_p50, "p99": routed_p99},
            "ratio_p50": routed_p50 / owner_p50,
            "megabytes": args.megabytes,
            "owner_mb_s": owner_mbs, "routed_mb_s": routed_mbs,
            "owner_dropped": owner_dropped, "routed_dropped": routed_dropped})
    );
    agent.kill().await.ok();
    Ok(())
}
