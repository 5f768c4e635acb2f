//! Node RPC against real `openbot serve` processes on a real PostgreSQL (docs/cluster.md):
//! nodes register and beat their hearts in the `nodes` table; each answers signed calls on its
//! private RPC listener and nothing else there; a call signed with another key, replayed, or
//! past its deadline is refused before it runs; an answer not signed for the call is not
//! believed; a node nobody can reach is a typed error that says the call never ran.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/nodes.rs"]
mod nodes;
#[path = "support/pg.rs"]
mod pg;

use std::sync::Arc;
use std::time::{Duration, Instant};

use nodes::NodeProcess;
use openbot_server::cluster::directory::ResourceStore;
use openbot_server::cluster::rpc::auth::{self, ClusterKey, header};
use openbot_server::cluster::rpc::{NodeClient, PING, RpcError};
use openbot_server::cluster::{NodeRecord, NodeStore};
use openbot_server::sealed::KeyRing;
use openbot_server::store::{PostgresStore, now_ms};

const SEAL_KEYS: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// A database with nodes on it, all sharing one cluster key.
struct Deployment {
    url: String,
    key_text: String,
    store: Arc<PostgresStore>,
}

impl Deployment {
    async fn new() -> Self {
        let url = pg::fresh_database().await;
        let store = Arc::new(
            PostgresStore::connect(&url, 2, KeyRing::parse(SEAL_KEYS).unwrap())
                .await
                .unwrap(),
        );
        Self {
            url,
            key_text: ClusterKey::generate(),
            store,
        }
    }

    fn key(&self) -> ClusterKey {
        ClusterKey::from_base64(&self.key_text).unwrap()
    }

    fn node(&self, name: &str) -> NodeProcess {
        NodeProcess::start_with(
            &self.url,
            SEAL_KEYS,
            name,
            2000,
            &[
                ("OPENBOT_RPC_BIND", "127.0.0.1:0"),
                ("OPENBOT_CLUSTER_KEY", &self.key_text),
            ],
        )
    }

    /// Waits (up to 30 s) until `name` is registered and alive; returns its record.
    async fn registered(&self, name: &str) -> NodeRecord {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(node) = self.store.node(name).await.unwrap()
                && node.alive(now_ms())
            {
                return node;
            }
            assert!(Instant::now() < deadline, "node {name} never registered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A call signed by hand, to send as is (twice, late, ...).
struct Signed {
    path: String,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

fn signed(key: &ClusterKey, operation: &str, deadline_ms: i64) -> Signed {
    let path = format!("/rpc/v1/{operation}");
    let (time, deadline) = (now_ms().to_string(), deadline_ms.to_string());
    let nonce = auth::nonce();
    let body = b"{}".to_vec();
    let digest = auth::digest(&body);
    let head = auth::RequestHead {
        method: "POST",
        path: &path,
        node: "tester",
        time: &time,
        nonce: &nonce,
        deadline: &deadline,
        request_id: "req-1",
    };
    let signature = key.sign(&head.parts(&digest));
    Signed {
        path,
        headers: vec![
            (header::NODE, "tester".into()),
            (header::TIME, time),
            (header::NONCE, nonce),
            (header::DEADLINE, deadline),
            (header::REQUEST_ID, "req-1".into()),
            (header::SIGNATURE, signature),
        ],
        body,
    }
}

async fn send(node: &NodeRecord, call: &Signed) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(format!("http://{}{}", node.rpc_address, call.path))
        .body(call.body.clone());
    for (name, value) in &call.headers {
        request = request.header(*name, value);
    }
    let answer = request.send().await.unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_register_and_each_answers_a_signed_ping_with_its_own_name() {
    let deployment = Deployment::new().await;
    let (_a, _b) = (deployment.node("node-a"), deployment.node("node-b"));
    let client = NodeClient::new("tester", deployment.key()).unwrap();
    for name in ["node-a", "node-b"] {
        let node = deployment.registered(name).await;
        assert!(node.rpc_address.starts_with("127.0.0.1:"), "{node:?}");
        let answer = client
            .call(
                &node,
                PING,
                b"{}".to_vec(),
                Duration::from_secs(5),
                "ping-1",
            )
            .await
            .unwrap();
        let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(answer["node"], name);
        assert_eq!(answer["incarnation"], node.incarnation.to_string());
    }
    let names: Vec<String> = deployment
        .store
        .nodes()
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.name)
        .collect();
    assert_eq!(names, ["node-a", "node-b"]);

    // The operator's view: `openbot admin nodes` on the database.
    let lines = nodes::json_lines(&nodes::admin(&deployment.url, SEAL_KEYS, &["nodes"]));
    assert_eq!(lines.len(), 2, "{lines:?}");
    for (line, name) in lines.iter().zip(["node-a", "node-b"]) {
        assert_eq!(line["name"], name);
        assert_eq!(line["alive"], true, "{line}");
        assert!(
            line["rpc_address"]
                .as_str()
                .unwrap()
                .starts_with("127.0.0.1:")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_signed_with_another_key_is_refused_and_the_caller_believes_no_answer() {
    let deployment = Deployment::new().await;
    let _a = deployment.node("node-a");
    let node = deployment.registered("node-a").await;
    let stranger = ClusterKey::from_base64(&ClusterKey::generate()).unwrap();
    let (status, body) = send(&node, &signed(&stranger, PING, now_ms() + 5000)).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("bad signature"), "{body}");
    let client = NodeClient::new("tester", stranger).unwrap();
    let err = client
        .call(&node, PING, b"{}".to_vec(), Duration::from_secs(5), "x")
        .await
        .unwrap_err();
    assert!(
        matches!(err, RpcError::Unauthenticated { .. }),
        "an answer not signed with the caller's key is not believed: {err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_call_is_refused() {
    let deployment = Deployment::new().await;
    let _a = deployment.node("node-a");
    let node = deployment.registered("node-a").await;
    let call = signed(&deployment.key(), PING, now_ms() + 5000);
    let (first, _) = send(&node, &call).await;
    assert_eq!(first, 200);
    let (again, body) = send(&node, &call).await;
    assert_eq!(again, 401, "{body}");
    assert!(body.contains("replayed"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_deadline_passed_is_refused_before_it_runs() {
    let deployment = Deployment::new().await;
    let _a = deployment.node("node-a");
    let node = deployment.registered("node-a").await;
    let (status, body) = send(&node, &signed(&deployment.key(), PING, now_ms() - 1)).await;
    assert_eq!(status, 408, "{body}");
    assert!(body.contains("deadline passed"), "{body}");
    let (status, body) = send(
        &node,
        &signed(&deployment.key(), "no-such-operation", now_ms() + 5000),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("unknown operation"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_node_is_an_error_that_says_the_call_never_ran() {
    let deployment = Deployment::new().await;
    // A port nothing listens on.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = free.local_addr().unwrap().to_string();
    drop(free);
    let node = NodeRecord {
        name: "gone".into(),
        incarnation: uuid::Uuid::now_v7(),
        rpc_address: address,
        started_at: 0,
        heartbeat_at: 0,
        left_at: None,
    };
    let err = NodeClient::new("tester", deployment.key())
        .unwrap()
        .call(&node, PING, Vec::new(), Duration::from_secs(2), "x")
        .await
        .unwrap_err();
    assert!(matches!(err, RpcError::Unreachable { .. }), "{err:?}");
    assert!(!err.may_have_run());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rpc_listener_serves_no_public_api_and_the_public_port_no_rpc() {
    let deployment = Deployment::new().await;
    let _a = deployment.node("node-ports");
    let node = deployment.registered("node-ports").await;
    let http = reqwest::Client::new();
    let health = http
        .get(format!("http://{}/v1/health", node.rpc_address))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 404);
    // The log of this test's node only (its name is this test's own); the public address is
    // printed once the node serves, a moment after it registered.
    let path = std::env::temp_dir().join("openbot-test-node-ports.log");
    let deadline = Instant::now() + Duration::from_secs(20);
    let public = loop {
        let log = std::fs::read_to_string(&path).unwrap_or_default();
        if let Some(address) = log
            .split("listening on http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
        {
            break address.to_string();
        }
        assert!(Instant::now() < deadline, "the node never served: {log}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let call = signed(&deployment.key(), PING, now_ms() + 5000);
    let mut request = http.post(format!("http://{public}{}", call.path));
    for (name, value) in &call.headers {
        request = request.header(*name, value);
    }
    let answer = request.body(call.body.clone()).send().await.unwrap();
    assert_eq!(answer.status(), 404, "the public port has no RPC");
    assert!(answer.headers().get(header::SIGNATURE).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_is_marked_gone_and_a_killed_one_stops_being_alive() {
    let deployment = Deployment::new().await;
    let (mut a, mut b) = (deployment.node("node-a"), deployment.node("node-b"));
    deployment.registered("node-a").await;
    let before = deployment.registered("node-b").await;
    a.stop();
    let gone = deployment.store.node("node-a").await.unwrap().unwrap();
    assert!(
        gone.left_at.is_some(),
        "SIGTERM marks the node gone: {gone:?}"
    );
    assert!(!gone.alive(now_ms()));
    b.kill();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let node = deployment.store.node("node-b").await.unwrap().unwrap();
        assert_eq!(node.incarnation, before.incarnation);
        assert!(node.left_at.is_none(), "a killed node says nothing");
        if !node.alive(now_ms()) {
            break;
        }
        assert!(Instant::now() < deadline, "a killed node stayed alive");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[test]
fn rpc_without_the_cluster_key_stops_the_start_with_what_to_set() {
    let data = tempfile::tempdir().unwrap();
    let openbot = env!("CARGO_BIN_EXE_openbot");
    let migrated = std::process::Command::new(openbot)
        .arg("migrate")
        .arg("--data-dir")
        .arg(data.path())
        .output()
        .unwrap();
    assert!(migrated.status.success());
    let out = std::process::Command::new(openbot)
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--rpc-bind",
            "127.0.0.1:0",
        ])
        .arg("--data-dir")
        .arg(data.path())
        .env_remove("OPENBOT_CLUSTER_KEY")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--rpc-bind needs OPENBOT_CLUSTER_KEY"),
        "{stderr}"
    );
}

/// `openbot admin ...` on the deployment's database; its standard output.
fn admin(deployment: &Deployment, args: &[&str]) -> String {
    nodes::admin(&deployment.url, SEAL_KEYS, args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_reads_the_nodes_and_resources_over_http_and_no_member_may() {
    let deployment = Deployment::new().await;
    let public = NodeProcess::free_address();
    let _node = NodeProcess::start_at(
        &deployment.url,
        SEAL_KEYS,
        "node-view",
        2000,
        &public,
        &[
            ("OPENBOT_RPC_BIND", "127.0.0.1:0"),
            ("OPENBOT_CLUSTER_KEY", &deployment.key_text),
        ],
    );
    let registered = deployment.registered("node-view").await;
    let base = format!("http://{public}");
    NodeProcess::wait_ready(&base).await;
    let operator = admin(&deployment, &["operator-token", "create", "--name", "ops"]);
    let member = admin(&deployment, &["token", "create", "--name", "owner"]);
    let http = reqwest::Client::new();
    let get = |path: &str, token: &str| {
        http.get(format!("{base}{path}"))
            .bearer_auth(token.trim())
            .send()
    };

    let nodes: serde_json::Value = get("/v1/admin/nodes", &operator)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = nodes["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "node-view")
        .unwrap();
    assert_eq!(listed["alive"], true);
    assert_eq!(listed["rpc_address"], registered.rpc_address.as_str());
    assert_eq!(listed["incarnation"], registered.incarnation.to_string());
    let scope: serde_json::Value = get("/v1/admin/resources?scope=app_connection:none", &operator)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(scope["resources"], serde_json::json!([]));
    let neither = get("/v1/admin/resources", &operator).await.unwrap();
    assert_eq!(neither.status(), 400, "a scope or an execution is needed");
    let refused = get("/v1/admin/nodes", &member).await.unwrap();
    assert_eq!(refused.status(), 403, "not even the owner's token");

    // The CLI reads the same view through the server.
    let lines = admin(
        &deployment,
        &[
            "nodes",
            "--server",
            &base,
            "--operator-token",
            operator.trim(),
        ],
    );
    let through = nodes::json_lines(&lines);
    assert!(
        through
            .iter()
            .any(|n| n["name"] == "node-view" && n["alive"] == true),
        "{lines}"
    );
}

/// A node of `deployment` with RPC, its public API on a free address; its base URL.
fn linked_node(deployment: &Deployment, name: &str) -> (NodeProcess, String) {
    let public = NodeProcess::free_address();
    let node = NodeProcess::start_at(
        &deployment.url,
        SEAL_KEYS,
        name,
        2000,
        &public,
        &[
            ("OPENBOT_RPC_BIND", "127.0.0.1:0"),
            ("OPENBOT_CLUSTER_KEY", &deployment.key_text),
        ],
    );
    (node, format!("http://{public}"))
}

/// A member's HTTP calls to one node.
struct Member {
    http: reqwest::Client,
    token: String,
}

impl Member {
    async fn call(
        &self,
        method: reqwest::Method,
        url: String,
        body: Option<serde_json::Value>,
    ) -> serde_json::Value {
        let mut request = self.http.request(method, &url).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        assert!(status.is_success(), "{url}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
    }
}

/// A machine paired through `base` and its agent, linked to the first of `servers`.
struct Machine {
    computer: String,
    agent: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    folder: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Machine {
    async fn pair(member: &Member, base: &str, servers: &[&str]) -> Self {
        use tokio::io::AsyncBufReadExt;
        let pairing = member
            .call(
                reqwest::Method::POST,
                format!("{base}/v1/computers/pairings"),
                Some(serde_json::json!({"name": "box"})),
            )
            .await;
        let computer = member
            .call(
                reqwest::Method::POST,
                format!("{base}/v1/computers/pairings/approve"),
                Some(serde_json::json!({"code": pairing["code"]})),
            )
            .await;
        let claim = member
            .call(
                reqwest::Method::POST,
                format!(
                    "{base}/v1/computers/pairings/{}/claim",
                    pairing["id"].as_str().unwrap()
                ),
                Some(serde_json::json!({"secret": pairing["secret"]})),
            )
            .await;
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("work");
        std::fs::create_dir(&folder).unwrap();
        let saved = dir.path().join("computer.json");
        std::fs::write(
            &saved,
            serde_json::json!({"server": base, "computer_id": computer["id"], "credential": claim["credential"]})
                .to_string(),
        )
        .unwrap();
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_openbot"));
        command
            .args(["computer", "run", "--json", "--credential-file"])
            .arg(&saved)
            .arg("--folder")
            .arg(&folder);
        for server in servers {
            command.args(["--server", server]);
        }
        let mut agent = command
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let lines = tokio::io::BufReader::new(agent.stdout.take().unwrap()).lines();
        let mut machine = Self {
            computer: computer["id"].as_str().unwrap().to_string(),
            agent,
            lines,
            folder,
            _dir: dir,
        };
        machine.wait_for("linked").await;
        machine
    }

    /// The agent's next event `event`; its message.
    async fn wait_for(&mut self, event: &str) -> String {
        loop {
            let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
                .await
                .expect("the agent said something within a minute")
                .unwrap()
                .expect("the agent runs on");
            let said: serde_json::Value = serde_json::from_str(&line).unwrap();
            if said["event"] == event {
                return said["message"].as_str().unwrap().to_string();
            }
        }
    }
}

/// Grants the machine to a new Bot on a scripted model that writes `file` with `content`,
/// sends it a message, and waits for its Turn to end: all through the node at `base`. Returns
/// the Turn's events.
async fn bot_writes(
    member: &Member,
    base: &str,
    machine: &Machine,
    file: &str,
    content: &str,
) -> Vec<serde_json::Value> {
    bot_calls(
        member,
        base,
        machine,
        "computer_file_write",
        serde_json::json!({"path": file, "content": content}),
    )
    .await
}

/// As [`bot_writes`], for a Bot whose model calls the Computer tool `tool` with `arguments`.
async fn bot_calls(
    member: &Member,
    base: &str,
    machine: &Machine,
    tool: &str,
    arguments: serde_json::Value,
) -> Vec<serde_json::Value> {
    let script = tempfile::NamedTempFile::new_in(std::env::temp_dir()).unwrap();
    std::fs::write(
        script.path(),
        serde_json::json!([
            {"tool_calls": [{"name": tool, "arguments": arguments}]},
            {"text": "done"}
        ])
        .to_string(),
    )
    .unwrap();
    let bot = member
        .call(
            reqwest::Method::POST,
            format!("{base}/v1/bots"),
            Some(serde_json::json!({"name": "Operator", "model": format!("scripted:{}", script.path().display()),
                "tools": [{"name": tool, "description": "A Computer tool.", "input_schema": {"type": "object"}}]})),
        )
        .await;
    let bot = bot["id"].as_str().unwrap();
    member
        .call(
            reqwest::Method::PUT,
            format!("{base}/v1/computers/{}/bots/{bot}", machine.computer),
            Some(serde_json::json!({"ask": false})),
        )
        .await;
    let chat = member
        .call(
            reqwest::Method::POST,
            format!("{base}/v1/chats"),
            Some(serde_json::json!({"bot_id": bot})),
        )
        .await;
    let sent = member
        .call(
            reqwest::Method::POST,
            format!("{base}/v1/chats/{}/messages", chat["id"].as_str().unwrap()),
            Some(serde_json::json!({"content": [{"type": "text", "text": "write"}]})),
        )
        .await;
    let execution = sent["execution_id"].as_str().unwrap();
    let mut after = 0;
    let mut events = Vec::new();
    for _ in 0..30 {
        let page = member
            .call(
                reqwest::Method::GET,
                format!("{base}/v1/executions/{execution}/events?after={after}&wait=10"),
                None,
            )
            .await;
        after = page["next_after"].as_u64().unwrap();
        events.extend(page["events"].as_array().unwrap().iter().cloned());
        if page["ended"] == true {
            let execution = member
                .call(
                    reqwest::Method::GET,
                    format!("{base}/v1/executions/{execution}"),
                    None,
                )
                .await;
            assert_eq!(execution["outcome"], "completed", "{execution}");
            return events;
        }
    }
    panic!("the Turn never ended");
}

fn node_log(name: &str) -> String {
    std::fs::read_to_string(std::env::temp_dir().join(format!("openbot-test-{name}.log")))
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_on_another_node_reaches_the_machine_through_the_node_holding_its_link() {
    let deployment = Deployment::new().await;
    let (_a, a) = linked_node(&deployment, "link-owner");
    let (_b, b) = linked_node(&deployment, "link-caller");
    NodeProcess::wait_ready(&a).await;
    NodeProcess::wait_ready(&b).await;
    deployment.registered("link-owner").await;
    deployment.registered("link-caller").await;
    let member = Member {
        http: reqwest::Client::new(),
        token: admin(&deployment, &["token", "create", "--name", "owner"])
            .trim()
            .to_string(),
    };
    let machine = Machine::pair(&member, &a, &[&a]).await;
    // The Turn is submitted to (and runs on) the node that does not hold the link.
    let events = bot_writes(&member, &b, &machine, "routed.txt", "through the owner").await;
    assert_eq!(
        std::fs::read_to_string(machine.folder.join("routed.txt"))
            .unwrap_or_else(|_| panic!("{events:?}")),
        "through the owner"
    );
    let owner_log = node_log("link-owner");
    assert!(
        owner_log.contains("a Computer call routed here from another node"),
        "{owner_log}"
    );
    let links = deployment
        .store
        .resources_of_scope(&format!("computer:{}", machine.computer))
        .await
        .unwrap();
    assert_eq!(links.len(), 1);
    assert_eq!(links[0].owner_node, "link-owner");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_whose_node_is_killed_links_to_another_and_its_calls_follow_it() {
    let deployment = Deployment::new().await;
    let (mut first, a) = linked_node(&deployment, "link-killed");
    let (_second, b) = linked_node(&deployment, "link-survivor");
    NodeProcess::wait_ready(&a).await;
    NodeProcess::wait_ready(&b).await;
    deployment.registered("link-survivor").await;
    let member = Member {
        http: reqwest::Client::new(),
        token: admin(&deployment, &["token", "create", "--name", "owner"])
            .trim()
            .to_string(),
    };
    let mut machine = Machine::pair(&member, &a, &[&a, &b]).await;
    // A program prints 40 numbered lines over 4 s, started by a Turn on the survivor (its
    // calls routed to the machine's node); its output is read by cursor through the survivor
    // while the machine's node dies and the machine moves.
    let events = bot_calls(
        &member,
        &b,
        &machine,
        "computer_terminal_start",
        serde_json::json!({"command": "for i in $(seq 1 40); do echo line$i; sleep 0.1; done"}),
    )
    .await;
    let started = events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .unwrap_or_else(|| panic!("{events:?}"));
    let session: serde_json::Value =
        serde_json::from_str(started["result"]["output"][0]["text"].as_str().unwrap()).unwrap();
    let session = session["id"].as_str().unwrap().to_string();
    let computer = machine.computer.clone();
    let output = |after: u64| {
        member.call(
            reqwest::Method::GET,
            format!(
                "{b}/v1/computers/{computer}/terminals/{session}/output?after={after}&wait_ms=2000"
            ),
            None,
        )
    };
    let first_read = output(0).await;
    let mut cursor = first_read["next_cursor"].as_u64().unwrap();
    let mut text: String = first_read["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap().to_string())
        .collect();
    first.kill();
    machine.wait_for("unlinked").await;
    let linked = machine.wait_for("linked").await;
    assert!(linked.contains(&b), "{linked}");
    // The session lives on the machine: its output goes on, ordered and whole, by cursor.
    loop {
        let read = output(cursor).await;
        assert_eq!(read["dropped"], 0);
        cursor = read["next_cursor"].as_u64().unwrap();
        for chunk in read["chunks"].as_array().unwrap() {
            text.push_str(chunk["text"].as_str().unwrap());
        }
        if read["exited"] == true {
            break;
        }
    }
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let expected: Vec<String> = (1..=40).map(|i| format!("line{i}")).collect();
    assert_eq!(lines, expected);
    let events = bot_writes(&member, &b, &machine, "moved.txt", "after the move").await;
    assert_eq!(
        std::fs::read_to_string(machine.folder.join("moved.txt"))
            .unwrap_or_else(|_| panic!("{events:?}")),
        "after the move"
    );
    // The directory moved: the newest link is the survivor's; the killed node's is never
    // taken as closed (nothing saved its close).
    let links = deployment
        .store
        .resources_of_scope(&format!("computer:{}", machine.computer))
        .await
        .unwrap();
    assert_eq!(links.len(), 2, "{links:?}");
    assert_eq!(links[0].owner_node, "link-killed");
    assert_eq!(links[0].closed, None);
    assert_eq!(links[1].owner_node, "link-survivor");
    assert_eq!(
        links[1].status(now_ms()),
        openbot_server::cluster::directory::ResourceStatus::Open
    );
    machine.agent.kill().await.unwrap();
}
