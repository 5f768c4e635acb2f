//! The resource directory across two nodes (docs/cluster.md, "What a node owns"): two node
//! runtimes in this process, each with its own RPC listener on 127.0.0.1, on one real
//! PostgreSQL; the physical resources are real TCP connections to a peer that counts the
//! closes it sees. A close is done by the owner and saved; a lost reply reads the saved
//! result; a failed close keeps its error ID; an owner nobody reaches is no proof of release;
//! an old incarnation's late close changes nothing; an owner that lost its lease closes.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/pg.rs"]
mod pg;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use openbot_server::cluster::directory::{
    CloseResult, Directory, DirectoryConfig, Peers, Physical, ResourceStatus, ResourceStore,
};
use openbot_server::cluster::rpc::auth::ClusterKey;
use openbot_server::cluster::rpc::{Listener, NodeClient, Operations};
use openbot_server::cluster::{Membership, NodeStore};
use openbot_server::sealed::KeyRing;
use openbot_server::store::{PostgresStore, RecordStore as _};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use uuid::Uuid;

const SEAL_KEYS: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// A TCP peer on 127.0.0.1 that counts the connections closed to it.
struct Peer {
    address: String,
    closed: Arc<AtomicUsize>,
}

impl Peer {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let closed = Arc::new(AtomicUsize::new(0));
        let counting = Arc::clone(&closed);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let counting = Arc::clone(&counting);
                tokio::spawn(async move {
                    let mut buffer = [0u8; 64];
                    while let Ok(n) = stream.read(&mut buffer).await {
                        if n == 0 {
                            counting.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                    }
                });
            }
        });
        Self { address, closed }
    }

    fn closes(&self) -> usize {
        self.closed.load(Ordering::SeqCst)
    }
}

/// A connection to the peer: the physical resource.
struct Socket {
    stream: tokio::net::TcpStream,
    /// How long its close takes.
    slow: Duration,
    /// Whether its close fails (after shutting the socket: the peer sees it closed).
    fails: bool,
}

#[async_trait]
impl Physical for Socket {
    async fn close(mut self: Box<Self>) -> Result<(), String> {
        tokio::time::sleep(self.slow).await;
        self.stream.shutdown().await.map_err(|e| e.to_string())?;
        if self.fails {
            return Err("the peer's goodbye was not acknowledged (secret-token-x)".into());
        }
        Ok(())
    }
}

async fn socket(peer: &Peer, slow: Duration, fails: bool) -> Box<Socket> {
    Box::new(Socket {
        stream: tokio::net::TcpStream::connect(&peer.address).await.unwrap(),
        slow,
        fails,
    })
}

/// One node runtime: its membership, RPC listener and directory.
struct Node {
    directory: Arc<Directory>,
    membership: Membership,
    listener: tokio::task::JoinHandle<()>,
}

async fn node(store: &Arc<PostgresStore>, key: &ClusterKey, name: &str, lease: Duration) -> Node {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let nodes: Arc<dyn NodeStore> = store.clone();
    let membership = Membership::join(Arc::clone(&nodes), name, Uuid::now_v7(), &address)
        .await
        .unwrap();
    let directory = Directory::new(DirectoryConfig {
        store: store.clone(),
        records: store.clone(),
        keys: KeyRing::parse(SEAL_KEYS).unwrap(),
        node: name.to_string(),
        incarnation: membership.node.incarnation,
        lease,
        peers: Some(Peers {
            nodes,
            client: NodeClient::new(name, key.clone()).unwrap(),
            deadline: Duration::from_millis(300),
        }),
    });
    let rpc = Listener::new(
        name,
        membership.node.incarnation,
        key.clone(),
        directory.operations(Operations::default()),
    );
    let listener = tokio::spawn(async move {
        let _ = axum::serve(listener, rpc.router()).await;
    });
    Node {
        directory,
        membership,
        listener,
    }
}

async fn setup() -> (Arc<PostgresStore>, ClusterKey) {
    let (store, key, _) = setup_at().await;
    (store, key)
}

/// [`setup`], and the database's URL.
async fn setup_at() -> (Arc<PostgresStore>, ClusterKey, String) {
    let url = pg::fresh_database().await;
    let store = Arc::new(
        PostgresStore::connect(&url, 4, KeyRing::parse(SEAL_KEYS).unwrap())
            .await
            .unwrap(),
    );
    (
        store,
        ClusterKey::from_base64(&ClusterKey::generate()).unwrap(),
        url,
    )
}

const LEASE: Duration = Duration::from_secs(30);

/// A connection to `peer` registered in `scope` and held by `node`.
async fn held(node: &Node, peer: &Peer, scope: &str, slow: Duration, fails: bool) -> Uuid {
    let id = node
        .directory
        .register("test.socket", scope, None, Some("loop"))
        .await
        .unwrap();
    node.directory.attach(id, socket(peer, slow, fails).await);
    id
}

/// A database and two nodes on it, `node-a` and `node-b`.
async fn two_nodes(lease: Duration) -> (Arc<PostgresStore>, Node, Node) {
    let (store, key) = setup().await;
    let a = node(&store, &key, "node-a", lease).await;
    let b = node(&store, &key, "node-b", lease).await;
    (store, a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_asked_on_another_node_is_done_by_the_owner_and_saved() {
    let (store, a, b) = two_nodes(LEASE).await;
    let peer = Peer::start().await;
    let id = held(&b, &peer, "app:1", Duration::ZERO, false).await;
    assert_eq!(a.directory.status(id).await.unwrap(), ResourceStatus::Open);

    assert_eq!(a.directory.close(id).await.unwrap(), ResourceStatus::Closed);
    assert_eq!(peer.closes(), 1, "the owner closed the real connection");
    let row = store.resource(id).await.unwrap().unwrap();
    assert!(
        matches!(row.closed, Some(CloseResult::Closed { .. })),
        "{row:?}"
    );
    assert_eq!(row.owner_node, "node-b");
    assert_eq!(
        a.directory.scope("app:1").await.unwrap(),
        vec![(id, ResourceStatus::Closed)]
    );
    // Asked again: the saved result, nothing closed twice.
    assert_eq!(a.directory.close(id).await.unwrap(), ResourceStatus::Closed);
    assert_eq!(peer.closes(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_lists_a_scopes_resources_and_their_release() {
    let (store, key, url) = setup_at().await;
    let b = node(&store, &key, "node-b", LEASE).await;
    let peer = Peer::start().await;
    let closed = held(&b, &peer, "app:7", Duration::ZERO, false).await;
    let open = held(&b, &peer, "app:7", Duration::ZERO, false).await;
    b.directory.close(closed).await.unwrap();
    let listed = std::process::Command::new(env!("CARGO_BIN_EXE_openbot"))
        .args([
            "admin",
            "--database-url",
            &url,
            "resources",
            "--scope",
            "app:7",
        ])
        .env("OPENBOT_SEAL_KEYS", SEAL_KEYS)
        .output()
        .unwrap();
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let status = |id: Uuid| {
        lines
            .iter()
            .find(|l| l["id"] == id.to_string())
            .map(|l| l["status"].clone())
    };
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(status(closed), Some(serde_json::json!("closed")));
    assert_eq!(status(open), Some(serde_json::json!("open")));
    assert!(lines.iter().all(|l| l["owner_node"] == "node-b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_close_whose_reply_is_lost_is_not_taken_as_done_and_its_saved_result_is_read_later()
{
    let (_, a, b) = two_nodes(LEASE).await;
    let peer = Peer::start().await;
    // The close takes 1 s; the asking node waits 300 ms for the owner's answer.
    let id = held(&b, &peer, "app:2", Duration::from_secs(1), false).await;

    let answered = a.directory.close(id).await.unwrap();
    assert_eq!(answered, ResourceStatus::Open, "no answer is no release");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        a.directory.status(id).await.unwrap(),
        ResourceStatus::Closed
    );
    assert_eq!(peer.closes(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_close_keeps_its_error_id_and_sealed_cause_after_the_owner_is_gone() {
    let (store, a, b) = two_nodes(LEASE).await;
    let peer = Peer::start().await;
    let id = held(&b, &peer, "app:3", Duration::ZERO, true).await;

    let ResourceStatus::Failed { error_id } = a.directory.close(id).await.unwrap() else {
        panic!("a failed close is saved as failed");
    };
    b.listener.abort();
    drop(b);
    assert_eq!(
        a.directory.status(id).await.unwrap(),
        ResourceStatus::Failed { error_id },
        "the same error ID after the owner stopped"
    );
    let (category, blob) = store.error_record(error_id).await.unwrap().unwrap();
    assert_eq!(category, "resource");
    let cause = KeyRing::parse(SEAL_KEYS).unwrap().open(&blob).unwrap();
    assert!(String::from_utf8_lossy(&cause).contains("not acknowledged"));
    let row = store.resource(id).await.unwrap().unwrap();
    assert!(
        !format!("{row:?}").contains("secret-token-x"),
        "the cause is sealed, not in the directory"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_nobody_reaches_is_no_proof_of_release_and_its_lapsed_lease_reads_unknown() {
    let (store, key) = setup().await;
    let lease = Duration::from_millis(800);
    let (a, b) = (
        node(&store, &key, "node-a", lease).await,
        node(&store, &key, "node-b", lease).await,
    );
    let peer = Peer::start().await;
    let id = held(&b, &peer, "app:4", Duration::ZERO, false).await;
    // The owner's RPC is cut (its listener gone); it renews no lease either.
    b.listener.abort();
    tokio::time::sleep(Duration::from_millis(50)).await;

    assert_eq!(a.directory.close(id).await.unwrap(), ResourceStatus::Open);
    tokio::time::sleep(lease).await;
    assert_eq!(
        a.directory.close(id).await.unwrap(),
        ResourceStatus::Unknown,
        "a lapsed lease with no saved close is unknown, never released"
    );
    assert_eq!(peer.closes(), 0, "nothing was closed");
    drop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_close_from_an_old_incarnation_changes_nothing() {
    let (store, key) = setup().await;
    let b = node(&store, &key, "node-b", LEASE).await;
    let peer = Peer::start().await;
    let id = held(&b, &peer, "app:5", Duration::ZERO, false).await;
    let old = b.membership.node.incarnation;
    // The node restarts under the same name: a new incarnation replaces the old.
    let b2 = node(&store, &key, "node-b", LEASE).await;
    assert_ne!(b2.membership.node.incarnation, old);
    // The new incarnation cannot close or save what the old one holds.
    let late = CloseResult::Failed {
        error_id: Uuid::now_v7(),
        at: 0,
    };
    assert!(
        !store
            .save_close(id, b2.membership.node.incarnation, &late)
            .await
            .unwrap()
    );
    assert_eq!(b2.directory.close(id).await.unwrap(), ResourceStatus::Open);
    assert_eq!(peer.closes(), 0);
    // The old incarnation's own close is saved once; its late second try changes nothing.
    assert_eq!(b.directory.close(id).await.unwrap(), ResourceStatus::Closed);
    assert!(!store.save_close(id, old, &late).await.unwrap());
    assert_eq!(
        b2.directory.status(id).await.unwrap(),
        ResourceStatus::Closed
    );
    assert_eq!(peer.closes(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_that_lost_its_lease_closes_its_resource() {
    let (store, key) = setup().await;
    let b = node(&store, &key, "node-b", LEASE).await;
    let peer = Peer::start().await;
    let id = held(&b, &peer, "app:6", Duration::ZERO, false).await;
    b.directory.keep_leases_once().await;
    assert_eq!(peer.closes(), 0, "a renewed lease keeps the resource");
    // The row no longer leases to this owner (its result was saved elsewhere, as a close
    // asked through another path would).
    let incarnation = b.membership.node.incarnation;
    assert!(
        store
            .save_close(id, incarnation, &CloseResult::Closed { at: 1 })
            .await
            .unwrap()
    );
    b.directory.keep_leases_once().await;
    assert_eq!(
        peer.closes(),
        1,
        "a lost lease closes the physical resource"
    );
}
