//! The resource directory across two nodes (docs/cluster.md, "What a node owns"): two node
//! runtimes in this process, each with its own RPC listener on 127.0.0.1, on one real
//! PostgreSQL; the physical resources are real TCP connections to a peer that counts the
//! closes it sees. A close is done by the owner and saved; a lost reply reads the saved
//! result; a failed close keeps its error ID; an owner nobody reaches is no proof of release;
//! an old incarnation's late close changes nothing; an owner that lost its lease closes.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/nodes.rs"]
mod nodes;
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
    (store, ClusterKey::from_base64(key_text()).unwrap(), url)
}

/// This test process's cluster key, as text (the owner processes it starts get it so).
fn key_text() -> &'static str {
    static KEY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    KEY.get_or_init(ClusterKey::generate)
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
    let lines = nodes::json_lines(&nodes::admin(
        &url,
        SEAL_KEYS,
        &["resources", "--scope", "app:7"],
    ));
    let status = |id: Uuid| {
        lines
            .iter()
            .find(|l| l["id"] == id.to_string())
            .map(|l| l["state"].clone())
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_asked_while_the_connection_starts_runs_once_it_is_attached() {
    let (store, a, b) = two_nodes(LEASE).await;
    let peer = Peer::start().await;
    let id = b
        .directory
        .register("test.socket", "app:8", None, Some("loop"))
        .await
        .unwrap();
    // Asked while the connection starts: nothing is closed yet, so nothing is saved.
    assert_eq!(a.directory.close(id).await.unwrap(), ResourceStatus::Open);
    assert!(store.resource(id).await.unwrap().unwrap().closed.is_none());
    b.directory
        .attach(id, socket(&peer, Duration::ZERO, false).await);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while a.directory.status(id).await.unwrap() != ResourceStatus::Closed {
        assert!(std::time::Instant::now() < deadline, "never closed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(peer.closes(), 1, "closed as soon as it started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_scope_closes_it_on_every_node_and_never_counts_an_old_route_as_closed() {
    let (store, key) = setup().await;
    let lease = Duration::from_millis(800);
    let a = node(&store, &key, "node-a", lease).await;
    let b = node(&store, &key, "node-b", lease).await;
    let old = node(&store, &key, "node-c", lease).await;
    let peer = Peer::start().await;
    let on_a = held(&a, &peer, "app:9", Duration::ZERO, false).await;
    let on_b = held(&b, &peer, "app:9", Duration::ZERO, false).await;
    let old_peer = Peer::start().await;
    let on_old = held(&old, &old_peer, "app:9", Duration::ZERO, false).await;
    // node-c's route is replaced: it restarts, and its old start's lease runs out unsaved.
    old.listener.abort();
    drop(old);
    let _c = node(&store, &key, "node-c", lease).await;
    tokio::time::sleep(lease + Duration::from_millis(200)).await;

    let statuses = a.directory.close_scope("app:9").await.unwrap();
    assert_eq!(
        statuses,
        vec![
            (on_a, ResourceStatus::Closed),
            (on_b, ResourceStatus::Closed),
            (on_old, ResourceStatus::Unknown),
        ]
    );
    assert_eq!(peer.closes(), 2, "each live owner closed its own");
}

// ---------------------------------------------------------------------------------------------
// The same rules across OS processes (F08, A03): the owner is a separate process (this test
// binary started again as `resource_node_process`: a node runtime, its RPC listener and
// directory, holding one real TCP connection), so it can be killed, frozen, cut off from the
// database by a real network cut, or have its RPC reply lost on a real TCP proxy.
// ---------------------------------------------------------------------------------------------

/// The environment variable that carries a node process's settings (JSON).
const NODE_PROCESS: &str = "OPENBOT_TEST_RESOURCE_NODE";

/// The body of a node process the tests below start (it runs only with [`NODE_PROCESS`] set,
/// as those tests start this binary: `--ignored --exact resource_node_process`). It holds
/// one resource, registered under the given scope, to the given peer, and prints its ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the body of the node processes the process tests start, not a test of its own"]
async fn resource_node_process() {
    let settings: serde_json::Value =
        serde_json::from_str(&std::env::var(NODE_PROCESS).expect("started by a process test"))
            .unwrap();
    let text = |name: &str| settings[name].as_str().unwrap().to_string();
    let lease = Duration::from_millis(settings["lease_ms"].as_u64().unwrap());
    let store = Arc::new(
        PostgresStore::connect(&text("database"), 4, KeyRing::parse(SEAL_KEYS).unwrap())
            .await
            .unwrap(),
    );
    let key = ClusterKey::from_base64(&text("key")).unwrap();
    let listener = tokio::net::TcpListener::bind(text("rpc_bind"))
        .await
        .unwrap();
    let address = match settings["advertise"].as_str() {
        Some(advertised) => advertised.to_string(),
        None => listener.local_addr().unwrap().to_string(),
    };
    let name = text("name");
    let nodes: Arc<dyn NodeStore> = store.clone();
    let membership = Membership::join(Arc::clone(&nodes), &name, Uuid::now_v7(), &address)
        .await
        .unwrap();
    let directory = Directory::new(DirectoryConfig {
        store: store.clone(),
        records: store.clone(),
        keys: KeyRing::parse(SEAL_KEYS).unwrap(),
        node: name.clone(),
        incarnation: membership.node.incarnation,
        lease,
        peers: Some(Peers {
            nodes,
            client: NodeClient::new(&name, key.clone()).unwrap(),
            deadline: Duration::from_millis(300),
        }),
    });
    let rpc = Listener::new(
        &name,
        membership.node.incarnation,
        key,
        directory.operations(Operations::default()),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, rpc.router()).await;
    });
    let id = directory
        .register("test.socket", &text("scope"), None, Some("loop"))
        .await
        .unwrap();
    let peer = Peer {
        address: text("peer"),
        closed: Arc::default(),
    };
    let slow = Duration::from_millis(settings["slow_ms"].as_u64().unwrap_or(0));
    directory.attach(id, socket(&peer, slow, false).await);
    directory.keep_leases(tokio_util::sync::CancellationToken::new());
    println!("resource {id}");
    std::future::pending::<()>().await;
}

/// An owner node in a process of its own.
struct OwnerProcess {
    child: std::process::Child,
    /// The resource it holds.
    resource: Uuid,
}

impl OwnerProcess {
    /// Starts one with these settings (see [`resource_node_process`]), in network namespace
    /// `netns` when given; returns once it holds its resource.
    fn start(settings: serde_json::Value, netns: Option<&str>) -> Self {
        use std::io::BufRead as _;
        let exe = std::env::current_exe().unwrap();
        let args = [
            "--ignored",
            "--exact",
            "resource_node_process",
            "--nocapture",
        ];
        let mut command = match netns {
            Some(ns) => {
                let mut command = std::process::Command::new("ip");
                command.args(["netns", "exec", ns]).arg(&exe).args(args);
                command
            }
            None => {
                let mut command = std::process::Command::new(&exe);
                command.args(args);
                command
            }
        };
        let mut child = command
            .env(NODE_PROCESS, settings.to_string())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = std::io::BufReader::new(stdout).lines();
        let resource = loop {
            let line = lines
                .next()
                .expect("the node process printed its resource")
                .unwrap();
            if let Some(id) = line.strip_prefix("resource ") {
                break id.parse().unwrap();
            }
        };
        // The rest of its output is not read: keep the pipe drained.
        std::thread::spawn(move || for _ in lines {});
        Self { child, resource }
    }

    fn signal(&self, which: &str) {
        let status = std::process::Command::new("kill")
            .args([which, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for OwnerProcess {
    fn drop(&mut self) {
        // A frozen one must be able to die; a dead one takes no signal.
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The settings of an owner process named `name` on the database at `url`.
fn owner_settings(url: &str, name: &str, scope: &str, peer: &Peer) -> serde_json::Value {
    serde_json::json!({
        "database": url, "key": key_text(), "name": name, "scope": scope,
        "peer": peer.address, "lease_ms": 1500, "rpc_bind": "127.0.0.1:0",
    })
}

/// Waits (up to 20 s) until `check` holds.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_owner_process_leaves_its_resource_unknown_never_released() {
    let (store, key, url) = setup_at().await;
    let a = node(&store, &key, "node-a", LEASE).await;
    let peer = Peer::start().await;
    let mut owner = OwnerProcess::start(owner_settings(&url, "node-b", "app:p1", &peer), None);
    let id = owner.resource;
    owner.child.kill().unwrap();
    owner.child.wait().unwrap();
    // The kernel closed the dead process's socket: the peer saw it, nobody saved it.
    until("the peer sees the socket closed", || async {
        peer.closes() == 1
    })
    .await;

    assert_eq!(a.directory.close(id).await.unwrap(), ResourceStatus::Open);
    until("the lease lapses", || async {
        a.directory.status(id).await.unwrap() == ResourceStatus::Unknown
    })
    .await;
    assert_eq!(
        a.directory.close(id).await.unwrap(),
        ResourceStatus::Unknown
    );
    assert!(store.resource(id).await.unwrap().unwrap().closed.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_close_in_the_owner_process_is_read_from_its_saved_result() {
    let (store, key, url) = setup_at().await;
    let a = node(&store, &key, "node-a", LEASE).await;
    let peer = Peer::start().await;
    let mut settings = owner_settings(&url, "node-b", "app:p2", &peer);
    settings["slow_ms"] = 1200.into();
    let owner = OwnerProcess::start(settings, None);
    // node-a waits 300 ms for the owner's answer; the close takes 1.2 s.
    assert_eq!(
        a.directory.close(owner.resource).await.unwrap(),
        ResourceStatus::Open,
        "no answer is no release"
    );
    until("the owner saves its close", || async {
        a.directory.status(owner.resource).await.unwrap() == ResourceStatus::Closed
    })
    .await;
    assert_eq!(peer.closes(), 1);
    assert_eq!(
        a.directory.close(owner.resource).await.unwrap(),
        ResourceStatus::Closed
    );
    assert_eq!(peer.closes(), 1, "closed once");
}

/// A TCP proxy on 127.0.0.1 to `target` that passes each request on and drops the reply:
/// the caller's connection is cut after the owner answered. Counts the replies it dropped.
async fn reply_dropping_proxy(target: String) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let dropped = Arc::new(AtomicUsize::new(0));
    let counting = Arc::clone(&dropped);
    tokio::spawn(async move {
        while let Ok((mut caller, _)) = listener.accept().await {
            let (target, counting) = (target.clone(), Arc::clone(&counting));
            tokio::spawn(async move {
                let mut owner = tokio::net::TcpStream::connect(&target).await.unwrap();
                let mut request = vec![0u8; 64 * 1024];
                let n = caller.read(&mut request).await.unwrap();
                owner.write_all(&request[..n]).await.unwrap();
                let mut reply = vec![0u8; 64 * 1024];
                if owner.read(&mut reply).await.unwrap_or(0) > 0 {
                    counting.fetch_add(1, Ordering::SeqCst);
                }
                // The reply is lost: the caller's connection just ends.
                drop(caller);
            });
        }
    });
    (address, dropped)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_rpc_reply_from_the_owner_process_reads_the_saved_close() {
    let (store, key, url) = setup_at().await;
    let a = node(&store, &key, "node-a", LEASE).await;
    let peer = Peer::start().await;
    // The owner listens on a port of its own and is called through the proxy.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let owner_address = port.local_addr().unwrap().to_string();
    drop(port);
    let (proxy, dropped) = reply_dropping_proxy(owner_address.clone()).await;
    let mut settings = owner_settings(&url, "node-b", "app:p3", &peer);
    settings["rpc_bind"] = owner_address.into();
    settings["advertise"] = proxy.into();
    let owner = OwnerProcess::start(settings, None);

    assert_eq!(
        a.directory.close(owner.resource).await.unwrap(),
        ResourceStatus::Closed,
        "the lost reply is read from the saved row"
    );
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the owner's reply was lost"
    );
    assert_eq!(peer.closes(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_close_from_a_frozen_old_owner_after_its_route_was_replaced_touches_only_its_own() {
    let (store, key, url) = setup_at().await;
    let a = node(&store, &key, "node-a", LEASE).await;
    let (old_peer, new_peer) = (Peer::start().await, Peer::start().await);
    let old = OwnerProcess::start(owner_settings(&url, "node-b", "app:p4", &old_peer), None);
    old.signal("-STOP");
    until("the frozen owner's lease lapses", || async {
        a.directory.status(old.resource).await.unwrap() == ResourceStatus::Unknown
    })
    .await;
    // The scope gets a new route: node-b starts again and holds a new resource in it.
    let new = OwnerProcess::start(owner_settings(&url, "node-b", "app:p4", &new_peer), None);
    assert_eq!(
        a.directory.scope("app:p4").await.unwrap(),
        vec![
            (old.resource, ResourceStatus::Unknown),
            (new.resource, ResourceStatus::Open)
        ]
    );

    // The old owner wakes: its lease lapsed unconfirmed, so it closes and saves its own.
    old.signal("-CONT");
    until("the old owner saves its late close", || async {
        a.directory.status(old.resource).await.unwrap() == ResourceStatus::Closed
    })
    .await;
    assert_eq!(old_peer.closes(), 1);
    assert_eq!(
        a.directory.status(new.resource).await.unwrap(),
        ResourceStatus::Open,
        "the new route is untouched"
    );
    assert_eq!(new_peer.closes(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_database_connections_of_the_owner_process_do_not_release_its_resource() {
    let (store, key, url) = setup_at().await;
    let a = node(&store, &key, "node-a", LEASE).await;
    let peer = Peer::start().await;
    let named = format!(
        "{url}{}application_name=owner-p5",
        if url.contains('?') { '&' } else { '?' }
    );
    let owner = OwnerProcess::start(owner_settings(&named, "node-b", "app:p5", &peer), None);
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    // Its connections are killed again and again, for most of a lease: each time it
    // reconnects and renews, so it keeps what it holds.
    let mut terminated = 0;
    for _ in 0..4 {
        let killed: i64 = sqlx::query_scalar(
            // Materialized first: the filter must run before any backend is terminated.
        "WITH named AS MATERIALIZED (SELECT pid FROM pg_stat_activity WHERE application_name = 'owner-p5') SELECT count(*) FROM named WHERE pg_terminate_backend(pid)",
        )
        .fetch_one(&admin)
        .await
        .unwrap();
        terminated += killed;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(terminated > 0, "the owner's connections were terminated");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        a.directory.status(owner.resource).await.unwrap(),
        ResourceStatus::Open
    );
    assert_eq!(peer.closes(), 0, "nothing was closed");
    assert_eq!(
        a.directory.close(owner.resource).await.unwrap(),
        ResourceStatus::Closed
    );
    assert_eq!(peer.closes(), 1);
}

/// A network namespace joined to this one by a veth pair: a real link that can be cut. The
/// host end is `10.199.<n>.1`, the namespace end `10.199.<n>.2`. Removed when dropped.
struct Netns {
    name: String,
    host_link: String,
    host: String,
    inside: String,
}

fn ip(args: &[&str]) {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ip {args:?}: {} (the network tests need `ip netns`, as root)",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    fn new() -> Self {
        let n = std::process::id() % 200 + 20;
        let name = format!("obt{}", std::process::id());
        let (host_link, inner_link) = (format!("obh{n}"), format!("obn{n}"));
        let (host, inside) = (format!("10.199.{n}.1"), format!("10.199.{n}.2"));
        ip(&["netns", "add", &name]);
        let netns = Self {
            name,
            host_link,
            host,
            inside,
        };
        ip(&[
            "link",
            "add",
            &netns.host_link,
            "type",
            "veth",
            "peer",
            "name",
            &inner_link,
        ]);
        ip(&["link", "set", &inner_link, "netns", &netns.name]);
        ip(&[
            "addr",
            "add",
            &format!("{}/24", netns.host),
            "dev",
            &netns.host_link,
        ]);
        ip(&["link", "set", &netns.host_link, "up"]);
        let inner = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &netns.name, "ip"];
            all.extend_from_slice(args);
            ip(&all);
        };
        inner(&[
            "addr",
            "add",
            &format!("{}/24", netns.inside),
            "dev",
            &inner_link,
        ]);
        inner(&["link", "set", &inner_link, "up"]);
        inner(&["link", "set", "lo", "up"]);
        netns
    }

    /// Cuts (`false`) or restores (`true`) the link.
    fn link(&self, up: bool) {
        ip(&[
            "link",
            "set",
            &self.host_link,
            if up { "up" } else { "down" },
        ]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.host_link])
            .status();
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Forwards TCP connections made to `listen` on to `target` (the namespace reaches the
/// database through it, over the veth link).
async fn forwarder(listen: &str, target: String) -> String {
    let listener = tokio::net::TcpListener::bind(listen).await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    address
}

/// A TCP peer inside the namespace (a Python process there), which writes a line to `log`
/// for each connection closed to it; returns its process and its address there.
fn peer_inside(netns: &Netns, log: &std::path::Path) -> (std::process::Child, String) {
    use std::io::BufRead as _;
    const PEER: &str = r#"
import socket, sys, threading
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
def serve(c):
    while c.recv(64):
        pass
    with open(sys.argv[1], "a") as f:
        f.write("closed\n")
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", &netns.name, "python3", "-c", PEER])
        .arg(log)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, format!("127.0.0.1:{}", line.trim()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_cut_off_from_the_database_closes_what_it_cannot_check_and_saves_it_once_back() {
    let (store, key, url) = setup_at().await;
    let a = node(&store, &key, "node-a", LEASE).await;
    let netns = Netns::new();
    // The owner lives in the namespace: the database and the RPC go over the veth link; its
    // physical resource is a connection to a peer in the namespace, which the cut leaves up.
    let database = reqwest::Url::parse(&url).unwrap();
    let pg = format!(
        "{}:{}",
        database.host_str().unwrap(),
        database.port().unwrap()
    );
    let through = forwarder(&format!("{}:0", netns.host), pg).await;
    let mut owner_url = database.clone();
    let (host, port) = through.split_once(':').unwrap();
    owner_url.set_host(Some(host)).unwrap();
    owner_url.set_port(Some(port.parse().unwrap())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("peer.log");
    let (mut peer, peer_address) = peer_inside(&netns, &log);
    let closes = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let settings = serde_json::json!({
        "database": owner_url.as_str(), "key": key_text(), "name": "node-b", "scope": "app:p6",
        "peer": peer_address, "lease_ms": 1500, "rpc_bind": format!("{}:0", netns.inside),
    });
    let owner = OwnerProcess::start(settings, Some(&netns.name));
    let id = owner.resource;
    assert_eq!(a.directory.status(id).await.unwrap(), ResourceStatus::Open);

    netns.link(false);
    // node-a cannot reach the owner: no answer is no release.
    assert_eq!(a.directory.close(id).await.unwrap(), ResourceStatus::Open);
    // The owner cannot check its lease for a whole lease: it closes what it holds.
    until("the owner closes its resource", || async { closes() == 1 }).await;
    assert_ne!(
        a.directory.status(id).await.unwrap(),
        ResourceStatus::Closed,
        "nothing was saved while the owner is cut off"
    );
    until("the lease lapses", || async {
        a.directory.status(id).await.unwrap() == ResourceStatus::Unknown
    })
    .await;

    netns.link(true);
    until("the owner saves its close once back", || async {
        a.directory.status(id).await.unwrap() == ResourceStatus::Closed
    })
    .await;
    assert_eq!(closes(), 1, "closed once");
    let _ = peer.kill();
    let _ = peer.wait();
}
