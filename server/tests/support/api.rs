//! The HTTP API harness the end-to-end suites share: a node with its engine and HTTP API on
//! SQLite or on a real PostgreSQL, and helpers that speak the API as a client would.
#![allow(dead_code, clippy::unwrap_used)] // each suite uses some helpers; a failed unwrap is a failed test

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use openbot_schema::{ContentPart, Event, EventKind, EventPage, ExecutionId, Limits, TurnOutcome};
use openbot_server::engine::{Engine, RunnerConfig, Submission, TestClock};
use openbot_server::http::{AppState, app};
use openbot_server::identity::{NewToken, Right, Role, new_secret, secret_hash};
use openbot_server::node::{Database, bootstrap, registry};
use openbot_server::sealed::KeyRing;
use openbot_server::store::{PostgresStore, Scope, SqliteStore};
use openbot_server::turns::{TURN, TurnInput};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::fake_openai::FakeOpenAi;
use super::pg;

#[path = "dump.rs"]
pub mod dump;

/// Log lines of this test binary, to prove fault causes never reach them.
pub fn logs() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = Arc::clone(&buffer);
        let _ = tracing_subscriber::fmt()
            .with_env_filter("debug")
            .with_writer(move || LogWriter(Arc::clone(&writer)))
            .try_init();
        buffer
    })
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The platform of the test nodes: loopback endpoints (the tests' own servers) allowed,
/// scripted models from the temp folder the tests write them to.
pub fn test_platform() -> openbot_server::platform::Platform {
    openbot_server::platform::Platform::new(
        openbot_core::outbound::OutboundPolicy::parse("loopback").unwrap(),
        Some(&std::env::temp_dir()),
    )
    .unwrap()
}

/// The key ring of the test nodes: their stores and engines seal with it.
pub fn test_keys() -> KeyRing {
    static KEYS: OnceLock<KeyRing> = OnceLock::new();
    KEYS.get_or_init(|| KeyRing::generate("k1").0).clone()
}

pub enum Raw {
    Sqlite(SqliteStore, #[allow(dead_code)] tempfile::TempDir),
    Postgres(PostgresStore),
}

pub async fn sqlite() -> Raw {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openbot.db");
    SqliteStore::migrate(&path).await.unwrap();
    Raw::Sqlite(SqliteStore::open(&path, test_keys()).await.unwrap(), dir)
}

pub async fn postgres() -> Raw {
    Raw::Postgres(
        PostgresStore::connect(&pg::fresh_database().await, 8, test_keys())
            .await
            .unwrap(),
    )
}

pub struct Server {
    pub base: String,
    pub owner: String,
    pub database: Database,
    pub engine: Arc<Engine>,
    pub raw: Raw,
    pub http: reqwest::Client,
    /// The object store's folder.
    pub objects: tempfile::TempDir,
    /// The clock of the node's durable timers: the system's time until a test moves it.
    pub clock: Arc<TestClock>,
}

pub async fn server(raw: Raw) -> Server {
    server_on(raw, test_platform()).await
}

/// A node whose outbound requests, keys and scripted models follow `platform`.
pub async fn server_on(raw: Raw, platform: openbot_server::platform::Platform) -> Server {
    logs();
    server_with(
        raw,
        platform,
        RunnerConfig {
            lease: Duration::from_secs(5),
            capacity: 16,
            storage_retry_budget: openbot_server::engine::STORAGE_RETRY_BUDGET,
        },
    )
    .await
}

/// A node as [`server_on`] makes it, whose runner has `runner`'s lease and capacity.
pub async fn server_with(
    raw: Raw,
    platform: openbot_server::platform::Platform,
    runner: RunnerConfig,
) -> Server {
    let objects = tempfile::tempdir().unwrap();
    let store = openbot_server::files::local_objects(objects.path()).unwrap();
    server_with_objects(raw, platform, runner, store, objects).await
}

/// A node as [`server_with`] makes it, whose files' bytes live in `store` (`objects` is the
/// folder kept with the server).
pub async fn server_with_objects(
    raw: Raw,
    platform: openbot_server::platform::Platform,
    runner: RunnerConfig,
    store: Arc<dyn object_store::ObjectStore>,
    objects: tempfile::TempDir,
) -> Server {
    let database = match &raw {
        Raw::Sqlite(store, _) => Database::on(Arc::new(store.clone())),
        Raw::Postgres(store) => Database::on(Arc::new(store.clone())),
    }
    .with_objects(Arc::clone(&store));
    // The node's resource directory, as `openbot serve` runs it: App sessions register there.
    let directory = openbot_server::cluster::directory::Directory::new(
        openbot_server::cluster::directory::DirectoryConfig {
            store: Arc::clone(
                openbot_server::cluster::directory::store(&database.features).unwrap(),
            ),
            records: Arc::clone(&database.store),
            keys: test_keys(),
            node: "node-a".into(),
            incarnation: uuid::Uuid::now_v7(),
            lease: openbot_server::cluster::directory::LEASE,
            peers: None,
        },
    );
    let database = database.with_directory(directory);
    let owner = bootstrap(database.identity.as_ref())
        .await
        .unwrap()
        .unwrap();
    let clock = TestClock::new();
    let engine = Arc::new(Engine::open_with_clock(
        Arc::clone(&database.store),
        test_keys(),
        "node-a".into(),
        clock.clone(),
    ));
    engine
        .start_runner(registry(Some(&database), &platform), runner)
        .await;
    let state = AppState::new(Arc::clone(&engine), &database, store, platform);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        // The node's own server loop, as `openbot serve` runs it.
        let _ = openbot_server::http::serve(listener, app(state), std::future::pending()).await;
    });
    Server {
        base,
        owner,
        database,
        engine,
        raw,
        http: reqwest::Client::new(),
        objects,
        clock,
    }
}
#[allow(unused_macros)] // not every suite runs on the default platform
macro_rules! http_tests {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::server(super::sqlite().await).await).await })*
        }
        mod on_postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::server(super::postgres().await).await).await })*
        }
    };
}
impl Server {
    /// Walks the list at `path` in pages of `limit`, following `next_cursor` until it is absent,
    /// and returns every item in the order the pages gave them. Each page holds `limit` items
    /// but the last, which may hold fewer.
    pub async fn walk(&self, token: &str, path: &str, limit: u32) -> Vec<Value> {
        self.walk_from(token, path, limit, None).await
    }

    /// [`Server::walk`] from the page at `cursor`.
    pub async fn walk_from(
        &self,
        token: &str,
        path: &str,
        limit: u32,
        mut cursor: Option<String>,
    ) -> Vec<Value> {
        let mut items = Vec::new();
        for _ in 0..1000 {
            let mut query = format!("limit={limit}");
            if let Some(cursor) = &cursor {
                query.push_str(&format!("&cursor={cursor}"));
            }
            let joiner = if path.contains('?') { '&' } else { '?' };
            let response = self
                .get(&format!("{path}{joiner}{query}"), token)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::OK, "{path}?{query}");
            let page: Value = response.json().await.unwrap();
            let got = page["items"].as_array().unwrap();
            assert!(got.len() <= limit as usize, "{path}: {page}");
            items.extend(got.iter().cloned());
            match page.get("next_cursor") {
                Some(next) => {
                    assert_eq!(got.len(), limit as usize, "only the last page is short");
                    cursor = Some(next.as_str().unwrap().to_string());
                }
                None => return items,
            }
        }
        panic!("{path}: the walk never ended");
    }

    /// The items of the first page of the list at `path` (which must answer 200).
    pub async fn items(&self, path: &str, token: &str) -> Vec<Value> {
        let response = self.get(path, token).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let page: Value = response.json().await.unwrap();
        page["items"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("{path}: {page}"))
    }

    pub fn get(&self, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.http
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
    }

    pub fn post(&self, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}{path}", self.base))
            .bearer_auth(token)
    }

    pub async fn owner_member(&self) -> openbot_server::identity::MemberRef {
        self.database.identity.first_owner().await.unwrap().unwrap()
    }

    /// A token of a new member of the owner's organization, with every right.
    pub async fn other_member_token(&self) -> String {
        self.member_token_as(Role::Member, "other@example.com")
            .await
    }

    /// An all-rights token of a new member of the owner's organization with `role`.
    pub async fn member_token_as(&self, role: Role, email: &str) -> String {
        let owner = self.owner_member().await;
        let member = self
            .database
            .identity
            .add_member(owner.organization_id, email, role)
            .await
            .unwrap();
        let secret = new_secret();
        let token = NewToken {
            id: uuid::Uuid::now_v7(),
            name: "other".into(),
            secret_hash: secret_hash(&secret),
            rights: Right::all(),
            bot_ids: None,
            expires_at: None,
        };
        self.database
            .identity
            .create_token(member.member_id, token)
            .await
            .unwrap();
        secret
    }

    pub async fn token_with(&self, rights: Value) -> String {
        let response = self
            .post("/v1/tokens", &self.owner)
            .json(&json!({"name": "limited", "rights": rights}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        response.json::<Value>().await.unwrap()["secret"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Sends "hi" to a new Chat of a new Bot of the owner on `model`, through the API with
    /// the owner's token; the Turn's execution.
    pub async fn owner_turn(&self, model: &FakeOpenAi) -> ExecutionId {
        let bot = self.bot(&self.owner, model, false).await;
        let chat = self.chat(&self.owner, &bot).await;
        let sent = receipt(self.send(&self.owner, &chat, "hi", None).await).await;
        sent["execution_id"].as_str().unwrap().parse().unwrap()
    }

    /// Submits a Turn with no saved identity straight to the engine, in `scope`: work a
    /// server's nodes refuse to run unchecked (it ends failed with the category `access`).
    pub async fn turn_in(&self, scope: Scope, model: &FakeOpenAi) -> ExecutionId {
        let input = TurnInput {
            instructions: String::new(),
            model: model.spec(),
            tools: Vec::new(),
            limits: Limits::default(),
            history: Vec::new(),
            input: vec![ContentPart::text("hi")],
            max_output_tokens: None,
            organization_id: None,
            identity: None,
            source: None,
            plan_mode: false,
            memory: false,
            code_mode: false,
        };
        let events = vec![EventKind::TurnStarted {
            input: input.input.clone(),
        }];
        let submission = Submission::new(TURN, scope, &input).with_events(events);
        self.engine.submit(submission).await.unwrap().execution_id()
    }
}
pub async fn error_code(response: reqwest::Response) -> (StatusCode, String) {
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    (
        status,
        body["code"].as_str().unwrap_or_default().to_string(),
    )
}
impl Server {
    pub fn delete(&self, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.http
            .delete(format!("{}{path}", self.base))
            .bearer_auth(token)
    }

    pub fn patch(&self, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.http
            .patch(format!("{}{path}", self.base))
            .bearer_auth(token)
    }

    pub async fn bot(&self, token: &str, model: &FakeOpenAi, shared: bool) -> Value {
        let spec = json!({"name": "Helper", "instructions": "Be brief.", "model": model.spec(), "shared": shared});
        let response = self
            .post("/v1/bots", token)
            .json(&spec)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        response.json().await.unwrap()
    }

    pub async fn chat(&self, token: &str, bot: &Value) -> String {
        let response = self
            .post("/v1/chats", token)
            .json(&json!({"bot_id": bot["id"]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        response.json::<Value>().await.unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    pub async fn send(
        &self,
        token: &str,
        chat: &str,
        text: &str,
        key: Option<&str>,
    ) -> reqwest::Response {
        let mut body = json!({"content": [{"type": "text", "text": text}]});
        if let Some(key) = key {
            body["command_key"] = json!(key);
        }
        self.post(&format!("/v1/chats/{chat}/messages"), token)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// Every event of an execution, to its end, by long polling.
    pub async fn finish(&self, token: &str, execution: &str) -> Vec<Event> {
        let mut after = 0;
        let mut all = Vec::new();
        for _ in 0..100 {
            let page: EventPage = self
                .get(
                    &format!("/v1/executions/{execution}/events?after={after}&wait=20"),
                    token,
                )
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            all.extend(page.events);
            after = page.next_after;
            if page.ended {
                return all;
            }
        }
        panic!("execution {execution} did not end");
    }

    /// Waits until the execution's first model request was sent.
    pub async fn wait_started(&self, execution: &str) {
        let mut after = 0;
        for _ in 0..100 {
            let page: EventPage = self
                .get(
                    &format!("/v1/executions/{execution}/events?after={after}&wait=10"),
                    &self.owner,
                )
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if page
                .events
                .iter()
                .any(|e| matches!(e.kind, EventKind::ModelStepStarted { .. }))
            {
                return;
            }
            after = page.next_after;
        }
        panic!("execution {execution} never sent its model request");
    }

    /// The Vault scan: `value` is in no column of any table, no event of `events`, no
    /// message of `chat`, no body `model` received, and no log line of the run.
    pub async fn assert_value_nowhere(
        &self,
        value: &str,
        events: &[Event],
        chat: &str,
        model: &FakeOpenAi,
    ) {
        assert_eq!(self.columns_containing(value).await, Vec::<String>::new());
        assert!(
            !serde_json::to_string(events).unwrap().contains(value),
            "an event held the value"
        );
        for body in model.bodies() {
            assert!(!body.contains(value), "a model request held the value");
        }
        let history = self.history(&self.owner, chat).await.join("\n");
        assert!(
            !history.contains(value),
            "the Chat's history held the value"
        );
        let logged = String::from_utf8_lossy(&logs().lock().unwrap()).to_string();
        assert!(!logged.is_empty(), "the run logs at debug level");
        assert!(!logged.contains(value), "a log line held the value");
    }

    pub async fn history(&self, token: &str, chat: &str) -> Vec<String> {
        let entries = self
            .items(&format!("/v1/chats/{chat}/messages?limit=200"), token)
            .await;
        entries
            .iter()
            .map(|e| {
                // A tool message keeps its text in its result's output.
                let parts = e["message"]["content"]
                    .as_array()
                    .or_else(|| e["message"]["result"]["output"].as_array())
                    .unwrap();
                parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<String>()
            })
            .collect()
    }
}

impl Server {
    /// A Bot of the owner on a scripted model whose script is `script` (written to a folder
    /// of its own, returned so that it outlives the Bot's Turns).
    #[allow(dead_code)]
    pub async fn scripted_bot(&self, name: &str, script: Value) -> (Value, tempfile::TempDir) {
        self.scripted_bot_with_tools(name, &[], script).await
    }

    /// [`Server::scripted_bot`] naming `tools` (each with an object schema).
    #[allow(dead_code)]
    pub async fn scripted_bot_with_tools(
        &self,
        name: &str,
        tools: &[&str],
        script: Value,
    ) -> (Value, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("script.json");
        std::fs::write(&file, script.to_string()).unwrap();
        let mut spec = json!({"name": name, "model": format!("scripted:{}", file.display())});
        if !tools.is_empty() {
            spec["tools"] = tools
                .iter()
                .map(|name| json!({"name": name, "description": "A tool.", "input_schema": {"type": "object"}}))
                .collect();
        }
        let response = self
            .post("/v1/bots", &self.owner)
            .json(&spec)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        (response.json().await.unwrap(), dir)
    }

    /// A browser session of the owner: the `cookie` header's value.
    #[allow(dead_code)]
    pub async fn session_cookie(&self) -> String {
        let started = self.post("/v1/sessions", &self.owner).send().await.unwrap();
        assert_eq!(started.status(), StatusCode::CREATED);
        started.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_string()
    }

    /// Runs one statement on the node's database as it is (as damage or an older build
    /// would), with `$1` bound to `id`.
    #[allow(dead_code)]
    pub async fn raw_execute(&self, sql: &str, id: uuid::Uuid) {
        match &self.raw {
            Raw::Sqlite(store, _) => {
                sqlx::query(sqlx::AssertSqlSafe(sql.replace("$1", "?1")))
                    .bind(id)
                    .execute(store.pool())
                    .await
                    .unwrap();
            }
            Raw::Postgres(store) => {
                sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
                    .bind(id)
                    .execute(store.pool())
                    .await
                    .unwrap();
            }
        }
    }

    /// The first column of the first row of a query on the node's database, as text, with
    /// `$1` bound to `id`.
    #[allow(dead_code)]
    pub async fn raw_text(&self, sql: &str, id: uuid::Uuid) -> Option<String> {
        match &self.raw {
            Raw::Sqlite(store, _) => sqlx::query_scalar::<_, Option<String>>(sqlx::AssertSqlSafe(
                sql.replace("$1", "?1"),
            ))
            .bind(id)
            .fetch_optional(store.pool())
            .await
            .unwrap()
            .flatten(),
            Raw::Postgres(store) => {
                sqlx::query_scalar::<_, Option<String>>(sqlx::AssertSqlSafe(sql.to_string()))
                    .bind(id)
                    .fetch_optional(store.pool())
                    .await
                    .unwrap()
                    .flatten()
            }
        }
    }

    /// The `table.column`s of the node's database in which some row holds `needle`: what a
    /// dump of the database would show.
    pub async fn columns_containing(&self, needle: &str) -> Vec<String> {
        match &self.raw {
            Raw::Sqlite(store, _) => dump::sqlite_columns_containing(store.pool(), needle).await,
            Raw::Postgres(store) => dump::pg_columns_containing(store.pool(), needle).await,
        }
    }
}

pub fn outcome_of(events: &[Event]) -> Option<TurnOutcome> {
    match events.last()?.kind {
        EventKind::TurnEnded { outcome, .. } => Some(outcome),
        _ => None,
    }
}

pub async fn receipt(response: reqwest::Response) -> Value {
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    response.json().await.unwrap()
}

impl Server {
    /// Asserts that `execution` opened one App session of `kind` (`mcp.stdio`,
    /// `mcp.connector`, ...), registered in the node's directory under its Connection's scope,
    /// and that its close was saved.
    pub async fn assert_one_closed_app_session(&self, execution: &str, kind: &str) {
        let sessions = openbot_server::cluster::directory::store(&self.database.features)
            .unwrap()
            .resources_of_execution(execution.parse().unwrap())
            .await
            .unwrap();
        assert_eq!(sessions.len(), 1, "{sessions:?}");
        assert_eq!(sessions[0].kind, kind);
        assert!(
            sessions[0].scope.starts_with("app_connection:"),
            "{sessions:?}"
        );
        assert!(
            matches!(
                sessions[0].closed,
                Some(openbot_server::cluster::directory::CloseResult::Closed { .. })
            ),
            "{sessions:?}"
        );
    }
}

impl Server {
    /// A token of the owner with every right, limited to one Bot.
    pub async fn bot_limited_token(&self, bot: &Value) -> String {
        let response = self
            .post("/v1/tokens", &self.owner)
            .json(&json!({"name": "one bot", "rights": Right::all(), "bot_ids": [bot["id"]]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        response.json::<Value>().await.unwrap()["secret"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

/// The `x-openbot-signature` of a webhook delivery, computed by the `openssl` command (an
/// outside implementation of HMAC-SHA256, not the server's own).
pub fn openssl_signature(secret: &str, timestamp: &str, body: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("openssl")
        .args(["dgst", "-sha256", "-hmac", secret, "-r"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("openssl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{timestamp}.{body}").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    format!("v1={}", text.split_whitespace().next().unwrap())
}

/// Posts a signed delivery of `body` to webhook trigger `id`.
pub async fn deliver_webhook(
    s: &Server,
    id: &str,
    secret: &str,
    timestamp: i64,
    delivery: Option<&str>,
    body: &str,
) -> reqwest::Response {
    let ts = timestamp.to_string();
    let mut request = s
        .http
        .post(format!("{}/v1/hooks/{id}", s.base))
        .header("content-type", "application/json")
        .header("x-openbot-timestamp", &ts)
        .header("x-openbot-signature", openssl_signature(secret, &ts, body))
        .body(body.to_string());
    if let Some(delivery) = delivery {
        request = request.header("x-openbot-delivery", delivery);
    }
    request.send().await.unwrap()
}
