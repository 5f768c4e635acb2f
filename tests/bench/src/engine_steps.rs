//! Durable engine steps per second, against a raw-SQL baseline doing the same writes and (on
//! PostgreSQL) against DBOS Transact for Python, all measured in the same run.
//!
//! A step is one Turn model step with its one tool call: the scripted model (no network)
//! answers every request with one call to the `echo` tool, an HTTP endpoint served by this
//! process on 127.0.0.1 (the Turn's tool route `ToolRoute::Http`). Each Turn is limited to
//! `--steps` model steps and ends with outcome `max_steps`, so every step of every Turn does
//! the same work. A round submits `--executions` Turns at once to an engine with an in-process
//! runner and waits until all have ended; its figure is (executions x steps) / round time.
//!
//! The baseline does, per Turn, the same SQL writes the engine does (same tables, statement
//! texts, parameters and transaction boundaries: submit, claim, and per step the model call's
//! intent / sending / result commits, the tool call's intent / sending / result commits and
//! the steering transaction, then the final commit) and the same HTTP tool call, from one task
//! per Turn, without the engine: no runner, no leases, no reads of the call log, no wake-ups,
//! no sealing (ciphertexts of the same size are written). In each round the engine, the
//! baseline and the floor (below) run one after the other, a different one first each round;
//! the result is the median of the rounds.
//!
//! The floor is what a durable step cannot do without: one transaction per step that saves the
//! step's model result and its tool result (one `INSERT` of two rows, the ciphertext sizes of
//! the engine's sealed results, into a table of its own), after the same HTTP tool call, on a
//! pool opened the same way and at the same concurrency; no submission, claim or end. It runs
//! in the same rounds as the other two.
//!
//! On PostgreSQL, the same workload then runs in DBOS Transact (`python/dbos_steps.py`, a child
//! process) on the same server: `--executions` concurrent workflows of `--steps` iterations,
//! each iteration a `@DBOS.step` for the model answer and a `@DBOS.step` for the tool call.
//!
//! The last line of the output is one JSON object with all figures.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail, ensure};
use clap::{Parser, ValueEnum};
use openbot_core::tool::{Tool, ToolContext};
use openbot_core::turn::{CallKey, CallResult, CallSlot};
use openbot_schema::{
    ContentPart, EventKind, ExecutionId, Limits, Message, ToolCall, ToolDefinition, ToolResult,
    TurnOutcome, Usage,
};
use openbot_server::engine::{Engine, RunnerConfig, Submission};
use openbot_server::sealed::KeyRing;
use openbot_server::store::{PostgresStore, Scope, SqliteStore, Store, event_type, now_ms};
use openbot_server::turns::{HttpTool, SavedTool, TURN, ToolRoute, TurnInput};
use serde_json::{Value, json};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{Connection, PgPool, Postgres, Sqlite, SqlitePool, Transaction};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Least engine steps/s as a share of the raw-SQL baseline's (the earlier target; the baseline
/// repeats the engine's own transactions, so it says nothing about the design).
const TARGET_BASELINE_SHARE: f64 = 0.8;
/// Least engine steps/s as a share of the floor's (issue 13), on both backends.
const TARGET_FLOOR_SHARE: f64 = 0.25;
/// Least times DBOS's steps/s (issue 13).
const TARGET_DBOS_RATIO: f64 = 10.0;
/// Most CPU per step, this process and PostgreSQL together, in milliseconds (issue 13).
const TARGET_CPU_MS_PER_STEP: f64 = 1.2;
/// How often a round checks whether all its executions ended.
const POLL: Duration = Duration::from_millis(5);
/// The usage the scripted model reports for every answer (its default).
const USAGE: Usage = Usage {
    input_tokens: 10,
    output_tokens: 5,
    cached_input_tokens: 0,
    cost_micros: None,
};
/// The node name of the baseline's claims.
const BASELINE_NODE: &str = "baseline";
/// The lease the runner and the baseline's claim use.
const LEASE_MS: i64 = 2000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Side {
    #[value(alias = "both")]
    All,
    Engine,
    RawSql,
    Floor,
}

/// The sides of a round, in the order of [`SIDE_NAMES`].
const ENGINE: usize = 0;
const RAW_SQL: usize = 1;
const FLOOR: usize = 2;
const SIDE_NAMES: [&str; 3] = ["engine: ", "raw SQL:", "floor:  "];

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    Postgres,
    Sqlite,
}

/// Engine steps/s (Turn model steps, one HTTP tool call each) on PostgreSQL or SQLite, against
/// a raw-SQL baseline doing the same writes, and DBOS Transact, in the same run.
#[derive(Debug, Parser)]
#[command(name = "engine-steps")]
struct Args {
    /// The database.
    #[arg(long, value_enum, default_value_t = Backend::Postgres)]
    backend: Backend,
    /// Turns running at once in a round.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    executions: u32,
    /// Model steps per Turn, each with one tool call.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    steps: u32,
    /// Measured rounds of each side; the median is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Unmeasured rounds of each side before measuring.
    #[arg(long, default_value_t = 1)]
    warmup: u32,
    /// A PostgreSQL server URL (its maintenance database); each side gets a new database on it.
    #[arg(long, env = "OPENBOT_BENCH_DATABASE_URL")]
    database_url: Option<String>,
    /// Connections of the engine's pool and of the baseline's (the node default is 16).
    #[arg(long, default_value_t = 16)]
    max_connections: u32,
    /// The folder for the SQLite files (default: a new temporary folder).
    #[arg(long)]
    sqlite_dir: Option<PathBuf>,
    /// The Python interpreter with `dbos` installed.
    #[arg(long, default_value = "python3")]
    dbos_python: PathBuf,
    /// The DBOS workload.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/python/dbos_steps.py"))]
    dbos_script: PathBuf,
    /// Connections of DBOS's system database pool (default: DBOS's own default, 20).
    #[arg(long)]
    dbos_pool_size: Option<u32>,
    /// Skip DBOS.
    #[arg(long)]
    no_dbos: bool,
    /// Make the baseline a leaner protocol than the engine's, to see its floor: no intent
    /// commits (a first attempt's intent changes nothing a recovery does) and no steering
    /// transaction (as if the engine took input only when some waits). Not the target's
    /// baseline: the ratio is then to this leaner protocol.
    #[arg(long)]
    raw_sql_lean: bool,
    /// Run only one side (for profiling); then there is no ratio and no check of the writes.
    #[arg(long, value_enum, default_value_t = Side::All)]
    only: Side,
    /// Keep the benchmark databases (PostgreSQL) instead of dropping them at the end.
    #[arg(long)]
    keep_databases: bool,
    /// The process's telemetry: `none` (no subscriber), `default` (what `openbot serve` installs
    /// without an exporter: error logs and the metrics layer), `otlp` (the same, exporting
    /// every span to an OTLP/HTTP receiver in this process that discards them).
    #[arg(long, value_enum, default_value_t = Telemetry::None)]
    telemetry: Telemetry,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Telemetry {
    None,
    Default,
    Otlp,
}

/// Installs the telemetry `choice` asks for; the guard flushes the export when dropped.
async fn install_telemetry(
    choice: Telemetry,
) -> anyhow::Result<Option<openbot_server::telemetry::TelemetryGuard>> {
    let otlp_endpoint = match choice {
        Telemetry::None => return Ok(None),
        Telemetry::Default => None,
        Telemetry::Otlp => {
            let app = axum::Router::new().route(
                "/v1/traces",
                axum::routing::post(|_body: axum::body::Bytes| async { "" }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let address = listener.local_addr()?;
            tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            });
            Some(format!("http://{address}"))
        }
    };
    let config = openbot_server::telemetry::TelemetryConfig {
        otlp_endpoint,
        ..Default::default()
    };
    Ok(Some(openbot_server::telemetry::init(&config)?))
}

// ---------------------------------------------------------------------------------------------
// The tool endpoint.

/// Serves `POST /echo`: answers with the `text` argument. Returns the URL.
async fn start_tool_server() -> anyhow::Result<String> {
    async fn echo(axum::Json(args): axum::Json<Value>) -> String {
        args["text"].as_str().unwrap_or_default().to_string()
    }
    let app = axum::Router::new().route("/echo", axum::routing::post(echo));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{address}/echo"))
}

fn echo_definition() -> ToolDefinition {
    ToolDefinition {
        name: "echo".into(),
        description: "Repeats the text.".into(),
        input_schema: json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
    }
}

// ---------------------------------------------------------------------------------------------
// Databases.

async fn create_pg_database(server: &str, name: &str) -> anyhow::Result<String> {
    let mut admin = sqlx::PgConnection::connect(server)
        .await
        .context("connecting to the PostgreSQL server")?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await?;
    admin.close().await?;
    let (base, _) = server.rsplit_once('/').context("a URL with a database")?;
    Ok(format!("{base}/{name}"))
}

async fn drop_pg_database(server: &str, name: &str) -> anyhow::Result<()> {
    let mut admin = sqlx::PgConnection::connect(server).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await?;
    admin.close().await?;
    Ok(())
}

/// A read connection that watches how many executions ended; its statements are counted so
/// they can be left out of the database's transaction count.
enum Poller {
    Pg(PgPool, AtomicU64),
    Lite(SqlitePool, AtomicU64),
}

const ENDED_COUNTS: &str = "SELECT COALESCE(SUM(CASE WHEN state = 'completed' THEN 1 ELSE 0 END), 0), \
     COALESCE(SUM(CASE WHEN state IN ('failed', 'cancelled', 'interrupted', 'outcome_unknown') THEN 1 ELSE 0 END), 0) \
     FROM executions";

impl Poller {
    async fn pg(url: &str) -> anyhow::Result<Self> {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(url)
            .await?;
        Ok(Self::Pg(pool, AtomicU64::new(0)))
    }

    async fn lite(path: &Path) -> anyhow::Result<Self> {
        let options = SqliteConnectOptions::new().filename(path).read_only(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        Ok(Self::Lite(pool, AtomicU64::new(0)))
    }

    /// Executions completed, and executions that ended any other way.
    async fn counts(&self) -> anyhow::Result<(i64, i64)> {
        Ok(match self {
            Poller::Pg(pool, polls) => {
                polls.fetch_add(1, Ordering::Relaxed);
                sqlx::query_as(ENDED_COUNTS).fetch_one(pool).await?
            }
            Poller::Lite(pool, polls) => {
                polls.fetch_add(1, Ordering::Relaxed);
                sqlx::query_as(ENDED_COUNTS).fetch_one(pool).await?
            }
        })
    }

    fn polls(&self) -> u64 {
        match self {
            Poller::Pg(_, polls) | Poller::Lite(_, polls) => polls.load(Ordering::Relaxed),
        }
    }

    /// Waits until `expected` executions completed in all.
    async fn wait_completed(&self, expected: i64) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(900);
        loop {
            let (done, bad) = self.counts().await?;
            ensure!(bad == 0, "{bad} executions did not complete");
            if done >= expected {
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "timed out: {done} of {expected} completed"
            );
            tokio::time::sleep(POLL).await;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The engine side.

struct EngineSide {
    engine: Arc<Engine>,
    input: Arc<TurnInput>,
}

impl EngineSide {
    async fn open(
        store: Arc<dyn Store>,
        keys: KeyRing,
        input: TurnInput,
    ) -> anyhow::Result<EngineSide> {
        let engine = Arc::new(Engine::open(store, keys, "bench-node".into()));
        engine
            .start_runner(
                openbot_server::node::registry(
                    None,
                    &openbot_server::platform::Platform::new(
                        openbot_core::outbound::OutboundPolicy::parse("loopback")?,
                        Some(&std::env::temp_dir()),
                    )?,
                ),
                RunnerConfig {
                    lease: Duration::from_millis(LEASE_MS as u64),
                    capacity: 256,
                    storage_retry_budget: openbot_server::engine::STORAGE_RETRY_BUDGET,
                },
            )
            .await;
        Ok(EngineSide {
            engine,
            input: Arc::new(input),
        })
    }

    /// Submits `executions` Turns at once and waits until `expected` executions completed.
    async fn round(
        &self,
        executions: u32,
        poller: &Poller,
        expected: i64,
    ) -> anyhow::Result<Duration> {
        let start = Instant::now();
        let mut submits = Vec::new();
        for _ in 0..executions {
            let engine = Arc::clone(&self.engine);
            let input = Arc::clone(&self.input);
            submits.push(tokio::spawn(async move {
                let submission = Submission {
                    kind: TURN,
                    scope: Scope::Member("bench".into()),
                    command_key: None,
                    input: &*input,
                    events: vec![EventKind::TurnStarted {
                        input: input.input.clone(),
                    }],
                    parent_id: None,
                    chat_id: None,
                    admission_gate: None,
                };
                engine.submit(submission).await
            }));
        }
        for submit in submits {
            submit.await??;
        }
        poller.wait_completed(expected).await?;
        Ok(start.elapsed())
    }
}

// ---------------------------------------------------------------------------------------------
// The raw-SQL baseline.

/// What the baseline writes that the engine would have sealed: same sizes, fresh IDs per row.
struct Fixture {
    key_id: String,
    input_nonce: Vec<u8>,
    input_ciphertext: Vec<u8>,
    model_nonce: Vec<u8>,
    model_ciphertext: Vec<u8>,
    tool_nonce: Vec<u8>,
    tool_ciphertext: Vec<u8>,
    output_nonce: Vec<u8>,
    output_ciphertext: Vec<u8>,
    turn_input: Vec<ContentPart>,
    steps: u32,
    tool: HttpTool,
    /// Numbers the model's tool calls like the scripted model: `call_<request>_1`.
    requests: AtomicU64,
    /// The leaner protocol (`--raw-sql-lean`).
    lean: bool,
}

impl Fixture {
    fn new(keys: &KeyRing, input: &TurnInput, tool: HttpTool) -> anyhow::Result<Self> {
        let seal = |value: &Value| -> anyhow::Result<(Vec<u8>, Vec<u8>, String)> {
            let blob = keys.seal(Uuid::now_v7(), &serde_json::to_vec(value)?)?;
            Ok((blob.nonce, blob.ciphertext, blob.key_id))
        };
        let call = ToolCall {
            id: "call_1000_1".into(),
            name: "echo".into(),
            arguments: json!({"text": "x"}),
        };
        let model_result = CallResult::Model {
            message: Message::Assistant {
                content: Vec::new(),
                tool_calls: vec![call.clone()],
            },
            usage: Some(USAGE),
        };
        let tool_result = CallResult::Tool {
            result: ToolResult::text(&call, "x"),
        };
        let (input_nonce, input_ciphertext, key_id) = seal(&serde_json::to_value(input)?)?;
        let (model_nonce, model_ciphertext, _) = seal(&serde_json::to_value(&model_result)?)?;
        let (tool_nonce, tool_ciphertext, _) = seal(&serde_json::to_value(&tool_result)?)?;
        // The Turn's messages, sealed as its output by the final commit.
        let steps = input.limits.max_steps.unwrap_or(1);
        let mut messages = vec![Message::User {
            content: input.input.clone(),
        }];
        for step in 1..=steps {
            let call = ToolCall {
                id: format!("call_{}_1", 1000 + step),
                ..call.clone()
            };
            messages.push(Message::Assistant {
                content: Vec::new(),
                tool_calls: vec![call.clone()],
            });
            messages.push(Message::Tool {
                result: ToolResult::text(&call, "x"),
            });
        }
        let (output_nonce, output_ciphertext, _) = seal(&serde_json::to_value(&messages)?)?;
        Ok(Self {
            key_id,
            input_nonce,
            input_ciphertext,
            model_nonce,
            model_ciphertext,
            tool_nonce,
            tool_ciphertext,
            output_nonce,
            output_ciphertext,
            turn_input: input.input.clone(),
            steps,
            tool,
            requests: AtomicU64::new(0),
            lean: false,
        })
    }

    fn next_call(&self) -> ToolCall {
        let request = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
        ToolCall {
            id: format!("call_{request}_1"),
            name: "echo".into(),
            arguments: json!({"text": "x"}),
        }
    }

    /// The step's tool call, through the same HTTP tool the engine uses.
    async fn call_tool(
        &self,
        id: ExecutionId,
        key: CallKey,
        call: &ToolCall,
    ) -> anyhow::Result<ToolResult> {
        let context = ToolContext {
            execution_id: id,
            step: key.step,
            call_id: call.id.clone(),
            idempotency_key: key.idempotency_key(id),
            cancel: CancellationToken::new(),
            from_code: false,
        };
        let output = self
            .tool
            .call(call.arguments.clone(), context)
            .await
            .map_err(|e| anyhow!("tool call failed: {e}"))?;
        Ok(ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            output: output.content,
            is_error: false,
        })
    }
}

/// A call-log write of the baseline.
struct CallW<'a> {
    key: CallKey,
    phase: &'static str,
    idempotency_key: &'a str,
    /// The sealed result: its ID, nonce and ciphertext.
    result: Option<(Uuid, &'a [u8], &'a [u8])>,
    usage: Option<Usage>,
}

fn call_write<'a>(
    key: CallKey,
    phase: &'static str,
    idempotency_key: &'a str,
    result: Option<(Uuid, &'a [u8], &'a [u8])>,
) -> CallW<'a> {
    CallW {
        key,
        phase,
        idempotency_key,
        result,
        usage: None,
    }
}

/// The end of a Turn: state, outcome, and the owner gives it up.
struct End {
    state: &'static str,
    outcome: String,
    /// The sealed output record (the Turn's messages).
    output: Uuid,
}

fn slot_name(slot: CallSlot) -> String {
    openbot_server::store::slot_name(slot)
}

/// Event rows as columns: sequences, kinds, sealed payloads.
type EventRows = (Vec<i64>, Vec<String>, Vec<Vec<u8>>);

/// Event rows as the store writes them: the kind in the clear, the payload sealed (here: a
/// ciphertext of the sealed size, nonce and tag included, with no encryption).
fn event_rows(first: i64, events: &[EventKind]) -> anyhow::Result<EventRows> {
    let mut sequences = Vec::with_capacity(events.len());
    let mut kinds = Vec::with_capacity(events.len());
    let mut payloads = Vec::with_capacity(events.len());
    for (i, event) in events.iter().enumerate() {
        sequences.push(first + i as i64);
        kinds.push(event_type(event));
        payloads.push(vec![0u8; SEAL_OVERHEAD + serde_json::to_vec(event)?.len()]);
    }
    Ok((sequences, kinds, payloads))
}

/// What sealing adds to a payload: the 24-byte nonce and the 16-byte tag.
const SEAL_OVERHEAD: usize = 24 + 16;

/// The statements, as `server/src/store/postgres.rs` writes them.
mod pg_sql {
    pub const INSERT_SEALED: &str = "INSERT INTO sealed_records (id, execution_id, key_id, nonce, ciphertext, created_at) VALUES ($1, $2, $3, $4, $5, $6)";
    pub const INSERT_EXECUTION: &str = "INSERT INTO executions (id, kind, state, scope, parent_id, chat_id, input_record, last_sequence, created_at, updated_at) \
             VALUES ($1, $2, 'queued', $3, $4, $5, $6, $7, $8, $8)";
    pub const INSERT_EVENTS: &str = "INSERT INTO events (execution_id, sequence, kind, payload, key_id, sealed, at) \
             SELECT $1, s, k, $4, i, b, $7 FROM UNNEST($2::bigint[], $3::text[], $5::text[], $6::bytea[]) AS t(s, k, i, b)";
    pub const CLAIM: &str = "UPDATE executions SET owner_node = $2, generation = generation + 1, lease_expires_at = $3 + $4, \
                 state = CASE WHEN state IN ('queued', 'waiting') THEN 'running' ELSE state END, \
                 wake_at = NULL, updated_at = $3 \
             WHERE id = $1 RETURNING generation";
    pub const UPDATE_EXECUTION: &str = "UPDATE executions SET last_sequence = last_sequence + $3, \
                 input_tokens = input_tokens + $4, output_tokens = output_tokens + $5, cached_tokens = cached_tokens + $6, \
                 cost_micros = CASE WHEN $7::bigint IS NULL THEN cost_micros ELSE COALESCE(cost_micros, 0) + $7 END, \
                 state = COALESCE($8, state), outcome = COALESCE($9, outcome), \
                 failure_category = COALESCE($10, failure_category), error_id = COALESCE($11, error_id), \
                 wake_at = CASE WHEN $8 IS NULL THEN wake_at ELSE $12 END, \
                 unknown_call = CASE WHEN $8 IS NULL THEN unknown_call ELSE $13 END, \
                 owner_node = CASE WHEN $14 THEN NULL ELSE owner_node END, \
                 lease_expires_at = CASE WHEN $14 THEN NULL ELSE lease_expires_at END, \
                 updated_at = $15, output_record = COALESCE($16, output_record) \
             WHERE id = $1 AND generation = $2 AND state NOT IN ('completed', 'failed', 'cancelled', 'interrupted') \
             RETURNING last_sequence";
    pub const INSERT_CALL: &str = "INSERT INTO calls (execution_id, step, slot, attempt, status, idempotency_key, result_record, \
                 has_usage, input_tokens, output_tokens, cached_tokens, cost_micros, generation, late, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15) \
             ON CONFLICT (execution_id, step, slot, attempt) DO UPDATE SET \
                 status = EXCLUDED.status, result_record = EXCLUDED.result_record, has_usage = EXCLUDED.has_usage, \
                 input_tokens = EXCLUDED.input_tokens, output_tokens = EXCLUDED.output_tokens, \
                 cached_tokens = EXCLUDED.cached_tokens, cost_micros = EXCLUDED.cost_micros, \
                 generation = EXCLUDED.generation, late = EXCLUDED.late, updated_at = EXCLUDED.updated_at \
             WHERE calls.status <> 'done'";
    pub const TAKE_OWNED: &str =
        "SELECT 1 FROM executions WHERE id = $1 AND generation = $2 FOR UPDATE";
    pub const TAKE_FRESH: &str = "UPDATE turn_inputs SET taken_step = $2 WHERE execution_id = $1 AND taken_step IS NULL \
             AND (SELECT input_step FROM executions WHERE id = $1) < $2 RETURNING content, key_id, sealed";
    pub const TAKE_STEP: &str =
        "UPDATE executions SET input_step = $2 WHERE id = $1 AND input_step < $2";
    pub const TAKE_TAKEN: &str = "SELECT content, key_id, sealed FROM turn_inputs WHERE execution_id = $1 AND taken_step = $2 ORDER BY position";
}

/// The statements, as `server/src/store/sqlite.rs` writes them.
mod lite_sql {
    pub const INSERT_SEALED: &str = "INSERT INTO sealed_records (id, execution_id, key_id, nonce, ciphertext, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
    pub const INSERT_EXECUTION: &str = "INSERT INTO executions (id, kind, state, scope, parent_id, chat_id, input_record, last_sequence, created_at, updated_at) \
             VALUES (?1, ?2, 'queued', ?3, ?4, ?5, ?6, ?7, ?8, ?8)";
    pub const INSERT_EVENT: &str = "INSERT INTO events (execution_id, sequence, kind, payload, key_id, sealed, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
    pub const CLAIM: &str = "UPDATE executions SET owner_node = ?2, generation = generation + 1, lease_expires_at = ?3 + ?4, \
                 state = CASE WHEN state IN ('queued', 'waiting') THEN 'running' ELSE state END, \
                 wake_at = NULL, updated_at = ?3 \
             WHERE id = ?1 RETURNING generation";
    pub const UPDATE_EXECUTION: &str = "UPDATE executions SET last_sequence = last_sequence + ?3, \
                 input_tokens = input_tokens + ?4, output_tokens = output_tokens + ?5, cached_tokens = cached_tokens + ?6, \
                 cost_micros = CASE WHEN ?7 IS NULL THEN cost_micros ELSE COALESCE(cost_micros, 0) + ?7 END, \
                 state = COALESCE(?8, state), outcome = COALESCE(?9, outcome), \
                 failure_category = COALESCE(?10, failure_category), error_id = COALESCE(?11, error_id), \
                 wake_at = CASE WHEN ?8 IS NULL THEN wake_at ELSE ?12 END, \
                 unknown_call = CASE WHEN ?8 IS NULL THEN unknown_call ELSE ?13 END, \
                 owner_node = CASE WHEN ?14 THEN NULL ELSE owner_node END, \
                 lease_expires_at = CASE WHEN ?14 THEN NULL ELSE lease_expires_at END, \
                 updated_at = ?15, output_record = COALESCE(?16, output_record) \
             WHERE id = ?1 AND generation = ?2 AND state NOT IN ('completed', 'failed', 'cancelled', 'interrupted') \
             RETURNING last_sequence";
    pub const INSERT_CALL: &str = "INSERT INTO calls (execution_id, step, slot, attempt, status, idempotency_key, result_record, \
                 has_usage, input_tokens, output_tokens, cached_tokens, cost_micros, generation, late, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15) \
             ON CONFLICT (execution_id, step, slot, attempt) DO UPDATE SET \
                 status = EXCLUDED.status, result_record = EXCLUDED.result_record, has_usage = EXCLUDED.has_usage, \
                 input_tokens = EXCLUDED.input_tokens, output_tokens = EXCLUDED.output_tokens, \
                 cached_tokens = EXCLUDED.cached_tokens, cost_micros = EXCLUDED.cost_micros, \
                 generation = EXCLUDED.generation, late = EXCLUDED.late, updated_at = EXCLUDED.updated_at \
             WHERE calls.status <> 'done'";
    pub const TAKE_OWNED: &str = "SELECT 1 FROM executions WHERE id = ?1 AND generation = ?2";
    pub const TAKE_FRESH: &str = "UPDATE turn_inputs SET taken_step = ?2 WHERE execution_id = ?1 AND taken_step IS NULL \
             AND (SELECT input_step FROM executions WHERE id = ?1) < ?2 RETURNING content, key_id, sealed";
    pub const TAKE_STEP: &str =
        "UPDATE executions SET input_step = ?2 WHERE id = ?1 AND input_step < ?2";
    pub const TAKE_TAKEN: &str = "SELECT content, key_id, sealed FROM turn_inputs WHERE execution_id = ?1 AND taken_step = ?2 ORDER BY position";
}

/// The baseline's database: the same pool the store would use.
#[derive(Clone)]
enum BaselineDb {
    Pg(PgPool),
    Lite(SqlitePool),
}

impl BaselineDb {
    async fn submit(&self, fx: &Fixture, id: Uuid) -> anyhow::Result<()> {
        let record = Uuid::now_v7();
        let events = [EventKind::TurnStarted {
            input: fx.turn_input.clone(),
        }];
        let (sequences, kinds, payloads) = event_rows(1, &events)?;
        let now = now_ms();
        match self {
            BaselineDb::Pg(pool) => {
                let mut tx = pool.begin().await?;
                sqlx::query(pg_sql::INSERT_SEALED)
                    .bind(record)
                    .bind(Some(id))
                    .bind(&fx.key_id)
                    .bind(&fx.input_nonce)
                    .bind(&fx.input_ciphertext)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(pg_sql::INSERT_EXECUTION)
                    .bind(id)
                    .bind(TURN)
                    .bind("member:bench")
                    .bind(None::<Uuid>)
                    .bind(None::<Uuid>)
                    .bind(record)
                    .bind(events.len() as i64)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(pg_sql::INSERT_EVENTS)
                    .bind(id)
                    .bind(&sequences)
                    .bind(&kinds)
                    .bind("")
                    .bind(vec![fx.key_id.clone(); sequences.len()])
                    .bind(&payloads)
                    .bind(now_ms())
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
            }
            BaselineDb::Lite(pool) => {
                let mut tx = pool.begin().await?;
                sqlx::query(lite_sql::INSERT_SEALED)
                    .bind(record)
                    .bind(Some(id))
                    .bind(&fx.key_id)
                    .bind(&fx.input_nonce)
                    .bind(&fx.input_ciphertext)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(lite_sql::INSERT_EXECUTION)
                    .bind(id)
                    .bind(TURN)
                    .bind("member:bench")
                    .bind(None::<Uuid>)
                    .bind(None::<Uuid>)
                    .bind(record)
                    .bind(events.len() as i64)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                lite_events(&mut tx, &fx.key_id, id, &sequences, &kinds, &payloads).await?;
                tx.commit().await?;
            }
        }
        Ok(())
    }

    async fn claim(&self, id: Uuid) -> anyhow::Result<i64> {
        let now = now_ms();
        Ok(match self {
            BaselineDb::Pg(pool) => {
                sqlx::query_scalar(pg_sql::CLAIM)
                    .bind(id)
                    .bind(BASELINE_NODE)
                    .bind(now)
                    .bind(LEASE_MS)
                    .fetch_one(pool)
                    .await?
            }
            BaselineDb::Lite(pool) => {
                sqlx::query_scalar(lite_sql::CLAIM)
                    .bind(id)
                    .bind(BASELINE_NODE)
                    .bind(now)
                    .bind(LEASE_MS)
                    .fetch_one(pool)
                    .await?
            }
        })
    }

    /// The steering transaction of a step (nothing to take).
    async fn take_inputs(&self, id: Uuid, generation: i64, step: u32) -> anyhow::Result<()> {
        match self {
            BaselineDb::Pg(pool) => {
                let mut tx = pool.begin().await?;
                let owned = sqlx::query(pg_sql::TAKE_OWNED)
                    .bind(id)
                    .bind(generation)
                    .fetch_optional(&mut *tx)
                    .await?;
                ensure!(owned.is_some(), "fenced");
                let fresh: Vec<String> = sqlx::query_scalar(pg_sql::TAKE_FRESH)
                    .bind(id)
                    .bind(step as i32)
                    .fetch_all(&mut *tx)
                    .await?;
                ensure!(fresh.is_empty(), "unexpected input");
                sqlx::query(pg_sql::TAKE_STEP)
                    .bind(id)
                    .bind(step as i32)
                    .execute(&mut *tx)
                    .await?;
                let taken: Vec<String> = sqlx::query_scalar(pg_sql::TAKE_TAKEN)
                    .bind(id)
                    .bind(step as i32)
                    .fetch_all(&mut *tx)
                    .await?;
                ensure!(taken.is_empty(), "unexpected input");
                tx.commit().await?;
            }
            BaselineDb::Lite(pool) => {
                let mut tx = pool.begin().await?;
                let owned = sqlx::query(lite_sql::TAKE_OWNED)
                    .bind(id)
                    .bind(generation)
                    .fetch_optional(&mut *tx)
                    .await?;
                ensure!(owned.is_some(), "fenced");
                let fresh: Vec<String> = sqlx::query_scalar(lite_sql::TAKE_FRESH)
                    .bind(id)
                    .bind(step as i32)
                    .fetch_all(&mut *tx)
                    .await?;
                ensure!(fresh.is_empty(), "unexpected input");
                sqlx::query(lite_sql::TAKE_STEP)
                    .bind(id)
                    .bind(step as i32)
                    .execute(&mut *tx)
                    .await?;
                let taken: Vec<String> = sqlx::query_scalar(lite_sql::TAKE_TAKEN)
                    .bind(id)
                    .bind(step as i32)
                    .fetch_all(&mut *tx)
                    .await?;
                ensure!(taken.is_empty(), "unexpected input");
                tx.commit().await?;
            }
        }
        Ok(())
    }

    /// One generation-checked commit: the execution row, sealed results, call-log rows and
    /// events, in one transaction, like `Store::commit`.
    #[allow(clippy::too_many_arguments)]
    async fn commit(
        &self,
        fx: &Fixture,
        id: Uuid,
        generation: i64,
        calls: &[CallW<'_>],
        events: &[EventKind],
        usage: Option<Usage>,
        end: Option<&End>,
    ) -> anyhow::Result<i64> {
        let now = now_ms();
        let total = usage.unwrap_or_default();
        match self {
            BaselineDb::Pg(pool) => {
                let mut tx = pool.begin().await?;
                let last: Option<i64> = sqlx::query_scalar(pg_sql::UPDATE_EXECUTION)
                    .bind(id)
                    .bind(generation)
                    .bind(events.len() as i64)
                    .bind(total.input_tokens as i64)
                    .bind(total.output_tokens as i64)
                    .bind(total.cached_input_tokens as i64)
                    .bind(usage.and_then(|u| u.cost_micros).map(|c| c as i64))
                    .bind(end.map(|e| e.state))
                    .bind(end.map(|e| e.outcome.clone()))
                    .bind(None::<String>)
                    .bind(None::<Uuid>)
                    .bind(None::<i64>)
                    .bind(None::<String>)
                    .bind(end.is_some())
                    .bind(now)
                    .bind(end.map(|e| e.output))
                    .fetch_optional(&mut *tx)
                    .await?;
                let last = last.context("fenced")?;
                for call in calls {
                    pg_call(&mut tx, fx, id, generation, call).await?;
                }
                if !events.is_empty() {
                    let (sequences, kinds, payloads) =
                        event_rows(last - events.len() as i64 + 1, events)?;
                    sqlx::query(pg_sql::INSERT_EVENTS)
                        .bind(id)
                        .bind(&sequences)
                        .bind(&kinds)
                        .bind("")
                        .bind(vec![fx.key_id.clone(); sequences.len()])
                        .bind(&payloads)
                        .bind(now_ms())
                        .execute(&mut *tx)
                        .await?;
                }
                if let Some(end) = end {
                    sqlx::query(pg_sql::INSERT_SEALED)
                        .bind(end.output)
                        .bind(Some(id))
                        .bind(&fx.key_id)
                        .bind(&fx.output_nonce)
                        .bind(&fx.output_ciphertext)
                        .bind(now_ms())
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(last)
            }
            BaselineDb::Lite(pool) => {
                let mut tx = pool.begin().await?;
                let last: Option<i64> = sqlx::query_scalar(lite_sql::UPDATE_EXECUTION)
                    .bind(id)
                    .bind(generation)
                    .bind(events.len() as i64)
                    .bind(total.input_tokens as i64)
                    .bind(total.output_tokens as i64)
                    .bind(total.cached_input_tokens as i64)
                    .bind(usage.and_then(|u| u.cost_micros).map(|c| c as i64))
                    .bind(end.map(|e| e.state))
                    .bind(end.map(|e| e.outcome.clone()))
                    .bind(None::<String>)
                    .bind(None::<Uuid>)
                    .bind(None::<i64>)
                    .bind(None::<String>)
                    .bind(end.is_some())
                    .bind(now)
                    .bind(end.map(|e| e.output))
                    .fetch_optional(&mut *tx)
                    .await?;
                let last = last.context("fenced")?;
                for call in calls {
                    lite_call(&mut tx, fx, id, generation, call).await?;
                }
                if !events.is_empty() {
                    let (sequences, kinds, payloads) =
                        event_rows(last - events.len() as i64 + 1, events)?;
                    lite_events(&mut tx, &fx.key_id, id, &sequences, &kinds, &payloads).await?;
                }
                if let Some(end) = end {
                    sqlx::query(lite_sql::INSERT_SEALED)
                        .bind(end.output)
                        .bind(Some(id))
                        .bind(&fx.key_id)
                        .bind(&fx.output_nonce)
                        .bind(&fx.output_ciphertext)
                        .bind(now_ms())
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(last)
            }
        }
    }

    /// One Turn of `fx.steps` steps, from submit to its end.
    async fn turn(&self, fx: &Fixture) -> anyhow::Result<()> {
        let execution = ExecutionId::new();
        let id = execution.as_uuid();
        self.submit(fx, id).await?;
        let generation = self.claim(id).await?;
        if !fx.lean {
            self.take_inputs(id, generation, 1).await?;
        }
        let mut used = Usage::default();
        for step in 1..=fx.steps {
            // The model call: intent, sending (+ model_step_started), result (+ tool_call).
            let key = CallKey {
                step,
                slot: CallSlot::Model,
                attempt: 1,
            };
            let idempotency_key = key.idempotency_key(execution);
            let write = |phase| call_write(key, phase, &idempotency_key, None);
            if !fx.lean {
                self.commit(fx, id, generation, &[write("intent")], &[], None, None)
                    .await?;
            }
            let started = EventKind::ModelStepStarted { step, attempt: 1 };
            self.commit(
                fx,
                id,
                generation,
                &[write("sending")],
                &[started],
                None,
                None,
            )
            .await?;
            let call = fx.next_call();
            let record = Uuid::now_v7();
            let done = CallW {
                usage: Some(USAGE),
                ..call_write(
                    key,
                    "done",
                    &idempotency_key,
                    Some((record, &fx.model_nonce, &fx.model_ciphertext)),
                )
            };
            let asked = EventKind::ToolCall {
                step,
                call: call.clone(),
            };
            self.commit(fx, id, generation, &[done], &[asked], Some(USAGE), None)
                .await?;
            used += USAGE;

            // The tool call: intent, sending, the HTTP call, result (+ tool_result).
            let key = CallKey {
                step,
                slot: CallSlot::Tool(0),
                attempt: 1,
            };
            let idempotency_key = key.idempotency_key(execution);
            let write = |phase| call_write(key, phase, &idempotency_key, None);
            if !fx.lean {
                self.commit(fx, id, generation, &[write("intent")], &[], None, None)
                    .await?;
            }
            self.commit(fx, id, generation, &[write("sending")], &[], None, None)
                .await?;
            let result = fx.call_tool(execution, key, &call).await?;
            let record = Uuid::now_v7();
            let done = call_write(
                key,
                "done",
                &idempotency_key,
                Some((record, &fx.tool_nonce, &fx.tool_ciphertext)),
            );
            let answered = EventKind::ToolResult { step, result };
            self.commit(fx, id, generation, &[done], &[answered], None, None)
                .await?;

            // Input that arrived meanwhile joins the next step.
            if !fx.lean {
                self.take_inputs(id, generation, step + 1).await?;
            }
        }
        let end = End {
            state: "completed",
            outcome: openbot_server::store::outcome_name(TurnOutcome::MaxSteps),
            output: Uuid::now_v7(),
        };
        let ended = EventKind::TurnEnded {
            outcome: TurnOutcome::MaxSteps,
            usage: used,
        };
        self.commit(fx, id, generation, &[], &[ended], None, Some(&end))
            .await?;
        Ok(())
    }

    /// Runs `executions` Turns at once and waits until `expected` executions completed.
    async fn round(
        &self,
        fx: &Arc<Fixture>,
        executions: u32,
        poller: &Poller,
        expected: i64,
    ) -> anyhow::Result<Duration> {
        let start = Instant::now();
        let mut turns = Vec::new();
        for _ in 0..executions {
            let db = self.clone();
            let fx = Arc::clone(fx);
            turns.push(tokio::spawn(async move { db.turn(&fx).await }));
        }
        let all = async move {
            for turn in turns {
                turn.await??;
            }
            Ok::<(), anyhow::Error>(())
        };
        tokio::pin!(all);
        let done = poller.wait_completed(expected);
        tokio::pin!(done);
        let mut turns_ok = false;
        let elapsed = loop {
            tokio::select! {
                result = &mut done => {
                    result?;
                    break start.elapsed();
                }
                result = &mut all, if !turns_ok => {
                    result?;
                    turns_ok = true;
                }
            }
        };
        if !turns_ok {
            all.await?;
        }
        Ok(elapsed)
    }
}

// ---------------------------------------------------------------------------------------------
// The floor: one transaction per step with the step's two results.

const FLOOR_TABLE_PG: &str = "CREATE TABLE floor_results (execution_id UUID NOT NULL, step INTEGER NOT NULL, \
     slot TEXT NOT NULL, result BYTEA NOT NULL, at BIGINT NOT NULL, PRIMARY KEY (execution_id, step, slot))";
const FLOOR_TABLE_LITE: &str = "CREATE TABLE floor_results (execution_id BLOB NOT NULL, step INTEGER NOT NULL, \
     slot TEXT NOT NULL, result BLOB NOT NULL, at INTEGER NOT NULL, PRIMARY KEY (execution_id, step, slot))";
const FLOOR_INSERT_PG: &str = "INSERT INTO floor_results (execution_id, step, slot, result, at) \
     VALUES ($1, $2, 'model', $3, $5), ($1, $2, 'tool', $4, $5)";
const FLOOR_INSERT_LITE: &str = "INSERT INTO floor_results (execution_id, step, slot, result, at) \
     VALUES (?1, ?2, 'model', ?3, ?5), (?1, ?2, 'tool', ?4, ?5)";
const FLOOR_WRITTEN: &str = "SELECT count(*), COALESCE(SUM(length(result)), 0) FROM floor_results";

impl BaselineDb {
    async fn create_floor_table(&self) -> anyhow::Result<()> {
        match self {
            BaselineDb::Pg(pool) => {
                sqlx::query(FLOOR_TABLE_PG).execute(pool).await?;
            }
            BaselineDb::Lite(pool) => {
                sqlx::query(FLOOR_TABLE_LITE).execute(pool).await?;
            }
        }
        Ok(())
    }

    /// One step's results in one transaction: a single statement, so one round trip and one
    /// commit.
    async fn floor_save(&self, fx: &Fixture, id: Uuid, step: u32) -> anyhow::Result<()> {
        let done = match self {
            BaselineDb::Pg(pool) => sqlx::query(FLOOR_INSERT_PG)
                .bind(id)
                .bind(step as i32)
                .bind(&fx.model_ciphertext)
                .bind(&fx.tool_ciphertext)
                .bind(now_ms())
                .execute(pool)
                .await?
                .rows_affected(),
            BaselineDb::Lite(pool) => sqlx::query(FLOOR_INSERT_LITE)
                .bind(id)
                .bind(step as i32)
                .bind(&fx.model_ciphertext)
                .bind(&fx.tool_ciphertext)
                .bind(now_ms())
                .execute(pool)
                .await?
                .rows_affected(),
        };
        ensure!(done == 2, "the floor saved {done} rows instead of 2");
        Ok(())
    }

    /// One Turn of the floor: per step the same tool call, then its two results.
    async fn floor_turn(&self, fx: &Fixture) -> anyhow::Result<()> {
        let execution = ExecutionId::new();
        // Its own call IDs: the baseline's follow the scripted model's numbering.
        let call = ToolCall {
            id: "call_floor_1".into(),
            name: "echo".into(),
            arguments: json!({"text": "x"}),
        };
        for step in 1..=fx.steps {
            let key = CallKey {
                step,
                slot: CallSlot::Tool(0),
                attempt: 1,
            };
            fx.call_tool(execution, key, &call).await?;
            self.floor_save(fx, execution.as_uuid(), step).await?;
        }
        Ok(())
    }

    /// Runs `executions` floor Turns at once, until all are done.
    async fn floor_round(&self, fx: &Arc<Fixture>, executions: u32) -> anyhow::Result<Duration> {
        let start = Instant::now();
        let mut turns = Vec::new();
        for _ in 0..executions {
            let db = self.clone();
            let fx = Arc::clone(fx);
            turns.push(tokio::spawn(async move { db.floor_turn(&fx).await }));
        }
        for turn in turns {
            turn.await??;
        }
        Ok(start.elapsed())
    }

    /// Rows and result bytes the floor wrote.
    async fn floor_written(&self) -> anyhow::Result<(i64, i64)> {
        Ok(match self {
            BaselineDb::Pg(pool) => {
                sqlx::query_as(sqlx::AssertSqlSafe(
                    FLOOR_WRITTEN.replace("SUM(length(result))", "SUM(length(result))::bigint"),
                ))
                .fetch_one(pool)
                .await?
            }
            BaselineDb::Lite(pool) => sqlx::query_as(FLOOR_WRITTEN).fetch_one(pool).await?,
        })
    }

    /// Closes the pool: PostgreSQL's backends then report their last counters.
    async fn close(&self) {
        match self {
            BaselineDb::Pg(pool) => pool.close().await,
            BaselineDb::Lite(pool) => pool.close().await,
        }
    }
}

async fn pg_call(
    tx: &mut Transaction<'_, Postgres>,
    fx: &Fixture,
    id: Uuid,
    generation: i64,
    call: &CallW<'_>,
) -> anyhow::Result<()> {
    if let Some((record, nonce, ciphertext)) = call.result {
        sqlx::query(pg_sql::INSERT_SEALED)
            .bind(record)
            .bind(Some(id))
            .bind(&fx.key_id)
            .bind(nonce)
            .bind(ciphertext)
            .bind(now_ms())
            .execute(&mut **tx)
            .await?;
    }
    let usage = call.usage.unwrap_or_default();
    sqlx::query(pg_sql::INSERT_CALL)
        .bind(id)
        .bind(call.key.step as i32)
        .bind(slot_name(call.key.slot))
        .bind(call.key.attempt as i32)
        .bind(call.phase)
        .bind(call.idempotency_key)
        .bind(call.result.map(|(record, _, _)| record))
        .bind(call.usage.is_some())
        .bind(usage.input_tokens as i64)
        .bind(usage.output_tokens as i64)
        .bind(usage.cached_input_tokens as i64)
        .bind(usage.cost_micros.map(|c| c as i64))
        .bind(generation)
        .bind(false)
        .bind(now_ms())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn lite_call(
    tx: &mut Transaction<'_, Sqlite>,
    fx: &Fixture,
    id: Uuid,
    generation: i64,
    call: &CallW<'_>,
) -> anyhow::Result<()> {
    if let Some((record, nonce, ciphertext)) = call.result {
        sqlx::query(lite_sql::INSERT_SEALED)
            .bind(record)
            .bind(Some(id))
            .bind(&fx.key_id)
            .bind(nonce)
            .bind(ciphertext)
            .bind(now_ms())
            .execute(&mut **tx)
            .await?;
    }
    let usage = call.usage.unwrap_or_default();
    sqlx::query(lite_sql::INSERT_CALL)
        .bind(id)
        .bind(call.key.step as i32)
        .bind(slot_name(call.key.slot))
        .bind(call.key.attempt as i32)
        .bind(call.phase)
        .bind(call.idempotency_key)
        .bind(call.result.map(|(record, _, _)| record))
        .bind(call.usage.is_some())
        .bind(usage.input_tokens as i64)
        .bind(usage.output_tokens as i64)
        .bind(usage.cached_input_tokens as i64)
        .bind(usage.cost_micros.map(|c| c as i64))
        .bind(generation)
        .bind(false)
        .bind(now_ms())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn lite_events(
    tx: &mut Transaction<'_, Sqlite>,
    key_id: &str,
    id: Uuid,
    sequences: &[i64],
    kinds: &[String],
    payloads: &[Vec<u8>],
) -> anyhow::Result<()> {
    let at = now_ms();
    for ((sequence, kind), payload) in sequences.iter().zip(kinds).zip(payloads) {
        sqlx::query(lite_sql::INSERT_EVENT)
            .bind(id)
            .bind(sequence)
            .bind(kind)
            .bind("")
            .bind(key_id)
            .bind(payload)
            .bind(at)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Checks and statistics.

/// What a side's database holds at the end, to check both sides wrote the same.
#[derive(Debug, Default, Clone, PartialEq)]
struct Written {
    executions: i64,
    wrong_end: i64,
    calls: i64,
    events: i64,
    event_bytes: i64,
    sealed: i64,
    sealed_bytes: i64,
}

const WRITTEN: &str = "SELECT \
     (SELECT count(*) FROM executions), \
     (SELECT count(*) FROM executions WHERE state <> 'completed' OR outcome IS NULL OR outcome <> 'max_steps' OR last_sequence <> $1), \
     (SELECT count(*) FROM calls WHERE status = 'done'), \
     (SELECT count(*) FROM events), \
     (SELECT COALESCE(SUM(length(sealed)), 0) FROM events), \
     (SELECT count(*) FROM sealed_records), \
     (SELECT COALESCE(SUM(length(ciphertext)), 0) FROM sealed_records)";

async fn written_pg(url: &str, last_sequence: i64) -> anyhow::Result<Written> {
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let row: (i64, i64, i64, i64, i64, i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(
        WRITTEN
            .replace("SUM(length(sealed))", "SUM(length(sealed))::bigint")
            .replace("SUM(length(ciphertext))", "SUM(length(ciphertext))::bigint"),
    ))
    .bind(last_sequence)
    .fetch_one(&mut conn)
    .await?;
    conn.close().await?;
    Ok(written(row))
}

async fn written_lite(path: &Path, last_sequence: i64) -> anyhow::Result<Written> {
    let options = SqliteConnectOptions::new().filename(path).read_only(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options).await?;
    let row: (i64, i64, i64, i64, i64, i64, i64) =
        sqlx::query_as(sqlx::AssertSqlSafe(WRITTEN.replace("$1", "?1")))
            .bind(last_sequence)
            .fetch_one(&mut conn)
            .await?;
    conn.close().await?;
    Ok(written(row))
}

fn written(row: (i64, i64, i64, i64, i64, i64, i64)) -> Written {
    Written {
        executions: row.0,
        wrong_end: row.1,
        calls: row.2,
        events: row.3,
        event_bytes: row.4,
        sealed: row.5,
        sealed_bytes: row.6,
    }
}

/// PostgreSQL's counters of a database: committed transactions (every statement outside a
/// transaction counts as one), rows inserted, rows updated.
async fn pg_counters(server: &str, name: &str) -> anyhow::Result<(i64, i64, i64)> {
    let mut conn = sqlx::PgConnection::connect(server).await?;
    let row: (i64, i64, i64) = sqlx::query_as(
        "SELECT xact_commit, tup_inserted, tup_updated FROM pg_stat_database WHERE datname = $1",
    )
    .bind(name)
    .fetch_one(&mut conn)
    .await?;
    conn.close().await?;
    Ok(row)
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

fn list(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| format!("{v:.0}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// CPU time used by this process and by a PostgreSQL server's processes, read from `/proc`.
struct CpuMeter {
    tick_ms: f64,
    postmaster: Option<u32>,
}

impl CpuMeter {
    fn new(postmaster: Option<u32>) -> Self {
        let ticks: f64 = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0);
        Self {
            tick_ms: 1000.0 / ticks,
            postmaster,
        }
    }

    /// CPU milliseconds the whole machine spent busy (user, nice, system, irq, softirq) so
    /// far, from `/proc/stat`.
    fn machine(&self) -> f64 {
        let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let busy: u64 = text
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .enumerate()
            .filter(|(i, _)| matches!(i, 0 | 1 | 2 | 5 | 6))
            .filter_map(|(_, v)| v.parse::<u64>().ok())
            .sum();
        busy as f64 * self.tick_ms
    }

    /// CPU time so far of this process's threads and of the server's processes now running,
    /// in nanoseconds from `/proc/<pid>/schedstat` (the clock ticks of `/proc/<pid>/stat` are
    /// 10 ms, too coarse for a floor round of some 70 ms).
    fn sample(&self) -> CpuSample {
        let mut own = HashMap::new();
        if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
            for task in tasks.flatten() {
                let name = task.file_name();
                if let (Some(tid), Some(ns)) = (
                    name.to_str().and_then(|n| n.parse::<u32>().ok()),
                    schedstat_ns(&task.path().join("schedstat")),
                ) {
                    own.insert(tid, ns);
                }
            }
        }
        let mut server = HashMap::new();
        if let Some(postmaster) = self.postmaster
            && let Ok(entries) = std::fs::read_dir("/proc")
        {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
                    continue;
                };
                // PostgreSQL's processes have one thread each.
                if let Some((ppid, _)) = proc_stat(&pid.to_string())
                    && (ppid == postmaster || pid == postmaster)
                    && let Some(ns) = schedstat_ns(&entry.path().join("schedstat"))
                {
                    server.insert(pid, ns);
                }
            }
        }
        CpuSample { own, server }
    }
}

/// CPU nanoseconds by thread (this process) and by process (PostgreSQL's).
struct CpuSample {
    own: HashMap<u32, u64>,
    server: HashMap<u32, u64>,
}

impl CpuSample {
    /// CPU milliseconds since `before`: this process, PostgreSQL. A thread or process that
    /// started meanwhile counts whole; one that ended meanwhile is missed (none of the
    /// runtime's or the pools' do during a round).
    fn since(&self, before: &CpuSample) -> (f64, f64) {
        let delta = |after: &HashMap<u32, u64>, before: &HashMap<u32, u64>| {
            after
                .iter()
                .map(|(id, ns)| ns.saturating_sub(before.get(id).copied().unwrap_or(0)))
                .sum::<u64>() as f64
                / 1e6
        };
        (
            delta(&self.own, &before.own),
            delta(&self.server, &before.server),
        )
    }
}

/// The CPU time a thread ran, in nanoseconds: the first field of its `schedstat`.
fn schedstat_ns(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A process's parent and its user + system CPU time in clock ticks, from `/proc/<pid>/stat`.
fn proc_stat(pid: &str) -> Option<(u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((ppid, utime + stime))
}

fn mean_cpu(values: &[(f64, f64)]) -> (f64, f64) {
    let n = values.len().max(1) as f64;
    (
        values.iter().map(|v| v.0).sum::<f64>() / n,
        values.iter().map(|v| v.1).sum::<f64>() / n,
    )
}

/// Runs the DBOS workload as a child process and returns its JSON line, with the server's CPU
/// milliseconds during its measured rounds.
async fn run_dbos(
    args: &Args,
    url: &str,
    tool_url: &str,
    meter: &CpuMeter,
) -> anyhow::Result<(Value, f64)> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut command = tokio::process::Command::new(&args.dbos_python);
    command
        .arg(&args.dbos_script)
        .args(["--database-url", url, "--tool-url", tool_url])
        .args(["--workflows", &args.executions.to_string()])
        .args(["--steps", &args.steps.to_string()])
        .args(["--rounds", &args.rounds.to_string()])
        .args(["--warmup", &args.warmup.to_string()])
        .arg("--handshake")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    if let Some(size) = args.dbos_pool_size {
        command.args(["--pool-size", &size.to_string()]);
    }
    let mut child = command
        .spawn()
        .with_context(|| format!("running {}", args.dbos_python.display()))?;
    let mut stdin = child.stdin.take().context("the child's stdin")?;
    let mut lines =
        tokio::io::BufReader::new(child.stdout.take().context("the child's stdout")?).lines();
    let mut before = None;
    let mut result = None;
    while let Some(line) = lines.next_line().await? {
        let line = line.trim();
        if line == "READY" {
            before = Some((meter.sample(), meter.machine(), Instant::now()));
            stdin.write_all(b"go\n").await?;
            stdin.flush().await?;
        } else if line.starts_with('{') {
            let sample = meter.sample();
            let machine = meter.machine();
            let (sample_0, machine_0, started) =
                before.take().context("no READY line before the result")?;
            let (own, server) = sample.since(&sample_0);
            let mut value: Value = serde_json::from_str(line)?;
            let python_ms = value["cpu_ms_per_step"].as_f64().unwrap_or(0.0)
                * value["steps"].as_f64().unwrap_or(0.0)
                * value["workflows"].as_f64().unwrap_or(0.0)
                * value["rounds"].as_f64().unwrap_or(0.0);
            let others = (machine - machine_0 - own - server - python_ms)
                / started.elapsed().as_secs_f64()
                / 1000.0;
            value["other_jobs_cores"] = json!(others);
            result = Some((value, server));
            stdin.write_all(b"done\n").await?;
            stdin.flush().await?;
        }
    }
    let status = child.wait().await?;
    ensure!(status.success(), "the DBOS workload failed ({status})");
    result.context("the DBOS workload printed no JSON line")
}

// ---------------------------------------------------------------------------------------------

#[tokio::main]
#[allow(clippy::too_many_lines)] // every benchmark step in the order it prints
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let _telemetry = install_telemetry(args.telemetry).await?;
    println!("telemetry: {:?}", args.telemetry);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let steps_per_round = u64::from(args.executions) * u64::from(args.steps);
    println!(
        "engine steps: {:?}, {} executions at once x {} model steps (one HTTP tool call each), \
         scripted model; {} warm-up + {} measured rounds per side; {cores} cores",
        args.backend, args.executions, args.steps, args.warmup, args.rounds
    );
    let tool_url = start_tool_server().await?;
    let (keys, _) = KeyRing::generate("k1");
    let script_dir = tempfile::tempdir()?;
    let script = script_dir.path().join("model.json");
    std::fs::write(
        &script,
        json!({"steps": [{"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}]}], "repeat": true})
            .to_string(),
    )?;
    let input = TurnInput {
        instructions: String::new(),
        model: format!("scripted:{}", script.display()),
        tools: vec![SavedTool {
            definition: echo_definition(),
            route: ToolRoute::Http {
                url: tool_url.clone(),
                retry_safe: false,
                background: false,
                template: Default::default(),
            },
        }],
        limits: Limits {
            max_steps: Some(args.steps),
            ..Limits::default()
        },
        history: Vec::new(),
        input: vec![ContentPart::text("go")],
        max_output_tokens: None,
        organization_id: None,
        identity: None,
        source: None,
        plan_mode: false,
        memory: false,
        code_mode: false,
    };
    let fixture = Arc::new(Fixture {
        lean: args.raw_sql_lean,
        ..Fixture::new(&keys, &input, {
            let platform = openbot_server::platform::Platform::new(
                openbot_core::outbound::OutboundPolicy::parse("loopback")?,
                None,
            )?;
            HttpTool::new(
                echo_definition(),
                tool_url.clone(),
                platform.tool_client(),
                Arc::clone(platform.outbound()),
            )
        })?
    });
    if args.raw_sql_lean {
        println!(
            "raw SQL baseline: LEAN protocol (--raw-sql-lean): no intent commits, no steering \
             transactions; not the target's baseline"
        );
    }

    // Databases, one per side.
    let suffix = Uuid::now_v7().simple().to_string();
    let names = [
        format!("bench_engine_{suffix}"),
        format!("bench_sql_{suffix}"),
        format!("bench_dbos_{suffix}"),
        format!("bench_floor_{suffix}"),
    ];
    let mut sqlite_tmp = None;
    let mut engine_pool = None;
    let (engine_store, baseline, floor, engine_poller, baseline_poller, sqlite_paths, server) =
        match args.backend {
            Backend::Postgres => {
                let server = args
                    .database_url
                    .clone()
                    .context("--database-url is needed with --backend postgres")?;
                let engine_url = create_pg_database(&server, &names[0]).await?;
                let sql_url = create_pg_database(&server, &names[1]).await?;
                let floor_url = create_pg_database(&server, &names[3]).await?;
                PostgresStore::migrate(&engine_url).await?;
                PostgresStore::migrate(&sql_url).await?;
                PostgresStore::migrate(&floor_url).await?;
                let engine_store =
                    PostgresStore::connect(&engine_url, args.max_connections, keys.clone()).await?;
                engine_pool = Some(engine_store.pool().clone());
                let store: Arc<dyn Store> = Arc::new(engine_store);
                let sql_store =
                    PostgresStore::connect(&sql_url, args.max_connections, keys.clone()).await?;
                let floor_store =
                    PostgresStore::connect(&floor_url, args.max_connections, keys.clone()).await?;
                (
                    store,
                    BaselineDb::Pg(sql_store.pool().clone()),
                    BaselineDb::Pg(floor_store.pool().clone()),
                    Poller::pg(&engine_url).await?,
                    Poller::pg(&sql_url).await?,
                    None,
                    Some(server),
                )
            }
            Backend::Sqlite => {
                let dir = match &args.sqlite_dir {
                    Some(dir) => {
                        std::fs::create_dir_all(dir)?;
                        tempfile::tempdir_in(dir)?
                    }
                    None => tempfile::tempdir()?,
                };
                let engine_path = dir.path().join("engine.db");
                let sql_path = dir.path().join("baseline.db");
                let floor_path = dir.path().join("floor.db");
                SqliteStore::migrate(&engine_path).await?;
                SqliteStore::migrate(&sql_path).await?;
                SqliteStore::migrate(&floor_path).await?;
                let store: Arc<dyn Store> =
                    Arc::new(SqliteStore::open(&engine_path, keys.clone()).await?);
                let sql_store = SqliteStore::open(&sql_path, keys.clone()).await?;
                let floor_store = SqliteStore::open(&floor_path, keys.clone()).await?;
                let pollers = (
                    Poller::lite(&engine_path).await?,
                    Poller::lite(&sql_path).await?,
                );
                sqlite_tmp = Some(dir);
                (
                    store,
                    BaselineDb::Lite(sql_store.pool().clone()),
                    BaselineDb::Lite(floor_store.pool().clone()),
                    pollers.0,
                    pollers.1,
                    Some((engine_path, sql_path)),
                    None,
                )
            }
        };
    if let Some(dir) = &sqlite_tmp {
        println!("sqlite files in {}", dir.path().display());
    }
    floor.create_floor_table().await?;

    let engine = EngineSide::open(engine_store, keys.clone(), input.clone()).await?;
    let postmaster = match &engine_poller {
        Poller::Pg(pool, _) => {
            let backend: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
                .fetch_one(pool)
                .await?;
            proc_stat(&backend.to_string()).map(|(ppid, _)| ppid)
        }
        Poller::Lite(..) => None,
    };
    let meter = CpuMeter::new(postmaster);
    // Steps/s and CPU milliseconds per step (this process, PostgreSQL) of each measured round,
    // by side.
    let mut rates: [Vec<f64>; 3] = Default::default();
    let mut cpus: [Vec<(f64, f64)>; 3] = Default::default();
    // Cores the rest of the machine used during each measured round.
    let mut others_cores: Vec<f64> = Vec::new();
    let mut engine_done = 0i64;
    let mut baseline_done = 0i64;
    let per_round = i64::from(args.executions);
    let runs = |side: usize| match args.only {
        Side::All => true,
        Side::Engine => side == ENGINE,
        Side::RawSql => side == RAW_SQL,
        Side::Floor => side == FLOOR,
    };
    for round in 0..args.warmup + args.rounds {
        let measured = round >= args.warmup;
        // Rotate which side goes first, so none always runs on a warmer machine.
        let first = round as usize % 3;
        for side in [first, (first + 1) % 3, (first + 2) % 3] {
            if !runs(side) {
                continue;
            }
            let before = meter.sample();
            let machine_before = meter.machine();
            let time = match side {
                ENGINE => {
                    engine_done += per_round;
                    engine
                        .round(args.executions, &engine_poller, engine_done)
                        .await?
                }
                RAW_SQL => {
                    baseline_done += per_round;
                    baseline
                        .round(&fixture, args.executions, &baseline_poller, baseline_done)
                        .await?
                }
                _ => floor.floor_round(&fixture, args.executions).await?,
            };
            let name = SIDE_NAMES[side];
            let (own, server) = meter.sample().since(&before);
            // What the rest of the machine (other jobs) used meanwhile, in cores.
            let others =
                (meter.machine() - machine_before - own - server) / time.as_secs_f64() / 1000.0;
            let cpu = (
                own / steps_per_round as f64,
                server / steps_per_round as f64,
            );
            let rate = steps_per_round as f64 / time.as_secs_f64();
            let server_cpu = if postmaster.is_some() {
                format!(", {:.2} ms PostgreSQL", cpu.1)
            } else {
                String::new()
            };
            println!(
                "  round {round:>2} {name} {rate:>8.0} steps/s ({:.3} s; CPU per step: \
                 {:.2} ms this process{server_cpu}; other jobs {others:.2} cores){}",
                time.as_secs_f64(),
                cpu.0,
                if measured { "" } else { " warm-up" }
            );
            if measured {
                others_cores.push(others);
                rates[side].push(rate);
                cpus[side].push(cpu);
            }
        }
    }
    let [engine_rounds, baseline_rounds, floor_rounds] = rates;
    let [engine_cpu, baseline_cpu, floor_cpu] = cpus;
    engine.engine.shutdown().await;
    let engine_polls = engine_poller.polls();
    let baseline_polls = baseline_poller.polls();
    drop(engine);
    drop(engine_poller);
    drop(baseline_poller);
    let floor_written = floor.floor_written().await?;
    // Closed pools' backends report their last counters to PostgreSQL as they exit.
    baseline.close().await;
    floor.close().await;
    if let Some(pool) = &engine_pool {
        pool.close().await;
    }

    let engine_rate = median(&engine_rounds);
    let baseline_rate = median(&baseline_rounds);
    let floor_rate = median(&floor_rounds);
    let share = engine_rate / baseline_rate;
    let floor_share = engine_rate / floor_rate;
    println!(
        "engine:  {engine_rate:.0} steps/s (median; rounds: {})",
        list(&engine_rounds)
    );
    println!(
        "raw SQL: {baseline_rate:.0} steps/s (median; rounds: {})",
        list(&baseline_rounds)
    );
    println!(
        "floor:   {floor_rate:.0} steps/s (median; rounds: {})",
        list(&floor_rounds)
    );
    let floor_met = floor_share >= TARGET_FLOOR_SHARE;
    println!(
        "ratio: engine = {floor_share:.2} x the floor (one transaction per step with its two \
         results); target ≥ {TARGET_FLOOR_SHARE}: {}",
        verdict(floor_met)
    );
    let share_met = (args.backend == Backend::Postgres).then_some(share >= TARGET_BASELINE_SHARE);
    match share_met {
        Some(met) => println!(
            "ratio: engine = {share:.2} x the raw-SQL baseline (the engine's own transactions); \
             earlier target ≥ {TARGET_BASELINE_SHARE}: {}",
            verdict(met)
        ),
        None => println!("ratio: engine = {share:.2} x the raw-SQL baseline (no target on SQLite)"),
    }
    let (engine_own, engine_server) = mean_cpu(&engine_cpu);
    let (baseline_own, baseline_server) = mean_cpu(&baseline_cpu);
    let (floor_own, floor_server) = mean_cpu(&floor_cpu);
    let engine_total = engine_own + engine_server;
    let floor_total = floor_own + floor_server;
    let cpu_met =
        (args.backend == Backend::Postgres).then_some(engine_total <= TARGET_CPU_MS_PER_STEP);
    if postmaster.is_some() {
        println!(
            "CPU per step (mean of measured rounds): engine {engine_own:.2} ms in this process + \
             {engine_server:.2} ms in PostgreSQL = {engine_total:.2} ms (target ≤ \
             {TARGET_CPU_MS_PER_STEP}: {}); raw SQL {baseline_own:.2} + {baseline_server:.2} = \
             {:.2} ms; floor {floor_own:.2} + {floor_server:.2} = {floor_total:.2} ms; engine = \
             {:.1} x the floor's CPU",
            verdict(engine_total <= TARGET_CPU_MS_PER_STEP),
            baseline_own + baseline_server,
            engine_total / floor_total
        );
    } else {
        println!(
            "CPU per step (mean of measured rounds; one process: SQLite runs inside it): engine \
             {engine_own:.2} ms, raw SQL {baseline_own:.2} ms, floor {floor_own:.2} ms; engine = \
             {:.1} x the floor's CPU",
            engine_own / floor_own
        );
    }

    if args.only != Side::All {
        println!("only one side ran (--only): no ratio, no check of the writes");
        if let Some(server) = &server
            && !args.keep_databases
        {
            for name in [&names[0], &names[1], &names[3]] {
                drop_pg_database(server, name).await?;
            }
        }
        return Ok(());
    }

    println!(
        "other jobs on the machine during the measured rounds: median {:.2} cores of {cores}",
        median(&others_cores)
    );

    // The engine and the baseline must have written the same: same rows, same bytes; the
    // floor its two rows per step.
    let last_sequence = 3 * i64::from(args.steps) + 2;
    let (engine_written, baseline_written) = match &sqlite_paths {
        Some((engine_path, sql_path)) => (
            written_lite(engine_path, last_sequence).await?,
            written_lite(sql_path, last_sequence).await?,
        ),
        None => {
            let server = server.as_deref().context("a server")?;
            let (base, _) = server.rsplit_once('/').context("a URL with a database")?;
            (
                written_pg(&format!("{base}/{}", names[0]), last_sequence).await?,
                written_pg(&format!("{base}/{}", names[1]), last_sequence).await?,
            )
        }
    };
    let total_steps = engine_written.executions * i64::from(args.steps);
    println!(
        "written: engine {engine_written:?}\n         raw SQL {baseline_written:?}\n         \
         floor {} rows, {} result bytes",
        floor_written.0, floor_written.1
    );
    ensure!(
        engine_written.wrong_end == 0 && baseline_written.wrong_end == 0,
        "some executions did not end as expected"
    );
    ensure!(
        engine_written.executions == baseline_written.executions
            && engine_written.calls == baseline_written.calls
            && engine_written.events == baseline_written.events
            && engine_written.sealed == baseline_written.sealed,
        "the two sides wrote different rows"
    );
    ensure!(
        floor_written.0 == 2 * total_steps,
        "the floor wrote {} rows for {total_steps} steps",
        floor_written.0
    );

    // What each side cost the database, per step (PostgreSQL's counters).
    let mut counters = Value::Null;
    let mut transactions = None;
    if let Some(server) = &server {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let engine_c = pg_counters(server, &names[0]).await?;
        let sql_c = pg_counters(server, &names[1]).await?;
        let floor_c = pg_counters(server, &names[3]).await?;
        let per_step = |c: (i64, i64, i64), polls: u64| {
            let steps = total_steps as f64;
            (
                (c.0 as f64 - polls as f64) / steps,
                c.1 as f64 / steps,
                c.2 as f64 / steps,
            )
        };
        let e = per_step(engine_c, engine_polls);
        let b = per_step(sql_c, baseline_polls);
        let f = per_step(floor_c, 0);
        println!(
            "per step, PostgreSQL counters: engine {:.1} transactions (xact_commit: each \
             statement outside a transaction is one), {:.1} rows inserted, {:.1} rows updated; \
             raw SQL {:.1}, {:.1}, {:.1}; floor {:.1}, {:.1}, {:.1}: engine = {:.1} x the floor's \
             transactions",
            e.0,
            e.1,
            e.2,
            b.0,
            b.1,
            b.2,
            f.0,
            f.1,
            f.2,
            e.0 / f.0
        );
        transactions = Some((e.0, f.0));
        counters = json!({
            "engine": {"transactions_per_step": e.0, "inserted_per_step": e.1, "updated_per_step": e.2},
            "raw_sql": {"transactions_per_step": b.0, "inserted_per_step": b.1, "updated_per_step": b.2},
            "floor": {"transactions_per_step": f.0, "inserted_per_step": f.1, "updated_per_step": f.2},
        });
    }

    // DBOS on the same server.
    let mut dbos = Value::Null;
    let mut dbos_ratio = None;
    match (&server, args.no_dbos) {
        (Some(server), false) => {
            let url = create_pg_database(server, &names[2]).await?;
            let url = url.replacen("postgres://", "postgresql://", 1);
            println!(
                "DBOS: {} workflows at once x {} iterations (a model step + a tool step each), {}",
                args.executions,
                args.steps,
                args.dbos_python.display()
            );
            let (result, server_ms) = run_dbos(&args, &url, &tool_url, &meter).await?;
            let rate = result["steps_per_s"].as_f64().unwrap_or(f64::NAN);
            let ratio = engine_rate / rate;
            println!(
                "DBOS {} (Python {}): {rate:.0} steps/s (median; rounds: {}); {:.0} @DBOS.step calls/s",
                result["version"].as_str().unwrap_or("?"),
                result["python"].as_str().unwrap_or("?"),
                result["rounds_steps_per_s"]
                    .as_array()
                    .map(|a| a
                        .iter()
                        .filter_map(Value::as_f64)
                        .map(|v| format!("{v:.0}"))
                        .collect::<Vec<_>>()
                        .join(", "))
                    .unwrap_or_default(),
                result["dbos_steps_per_s"].as_f64().unwrap_or(f64::NAN)
            );
            let steps = result["total_steps"].as_f64().unwrap_or(f64::NAN);
            let measured_steps = f64::from(args.executions * args.steps * args.rounds);
            let dbos_server_cpu = server_ms / measured_steps;
            let dbos_own_cpu = result["cpu_ms_per_step"].as_f64().unwrap_or(f64::NAN);
            println!(
                "CPU per step: DBOS {dbos_own_cpu:.2} ms in Python + {dbos_server_cpu:.2} ms in PostgreSQL \
                 (measured rounds); other jobs on the machine meanwhile: {:.2} cores",
                result["other_jobs_cores"].as_f64().unwrap_or(f64::NAN)
            );
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let c = pg_counters(server, &names[2]).await?;
            println!(
                "per step, PostgreSQL counters: DBOS {:.1} transactions/statements, {:.1} rows inserted, {:.1} rows updated",
                c.0 as f64 / steps,
                c.1 as f64 / steps,
                c.2 as f64 / steps
            );
            println!(
                "ratio: engine = {ratio:.2} x DBOS; target ≥ {TARGET_DBOS_RATIO}: {}; the floor \
                 = {:.1} x DBOS",
                verdict(ratio >= TARGET_DBOS_RATIO),
                floor_rate / rate
            );
            dbos = result;
            dbos["counters"] = json!({
                "transactions_per_step": c.0 as f64 / steps,
                "inserted_per_step": c.1 as f64 / steps,
                "updated_per_step": c.2 as f64 / steps,
            });
            dbos["cpu_ms_per_step_postgres"] = json!(dbos_server_cpu);
            dbos_ratio = Some(ratio);
        }
        (Some(_), true) => println!("DBOS: skipped (--no-dbos)"),
        (None, _) => println!("DBOS: not run on SQLite"),
    }

    if let Some(server) = &server
        && !args.keep_databases
    {
        for name in &names {
            if let Err(err) = drop_pg_database(server, name).await {
                eprintln!("could not drop {name}: {err}");
            }
        }
    }
    if args.keep_databases
        && let Some(dir) = sqlite_tmp
    {
        let kept = dir.keep();
        println!("kept {}", kept.display());
    }

    // Issue 13's targets, each with its figure, in one place.
    println!("targets (issue 13), {:?}:", args.backend);
    println!(
        "  engine ≥ {TARGET_FLOOR_SHARE} x the floor: {} ({engine_rate:.0} / {floor_rate:.0} steps/s = {floor_share:.2})",
        verdict(floor_met)
    );
    if let Some(ratio) = dbos_ratio {
        println!(
            "  engine ≥ {TARGET_DBOS_RATIO} x DBOS: {} ({ratio:.2})",
            verdict(ratio >= TARGET_DBOS_RATIO)
        );
    }
    if let Some(met) = cpu_met {
        println!(
            "  CPU per step ≤ {TARGET_CPU_MS_PER_STEP} ms, engine + PostgreSQL: {} ({engine_own:.2} + {engine_server:.2} = {engine_total:.2} ms)",
            verdict(met)
        );
    }
    if let Some((engine_tx, floor_tx)) = transactions {
        println!("  (no target) transactions per step: engine {engine_tx:.1}, floor {floor_tx:.1}");
    }

    let summary = json!({
        "benchmark": "engine_steps",
        "backend": match args.backend { Backend::Postgres => "postgres", Backend::Sqlite => "sqlite" },
        "executions": args.executions,
        "steps_per_turn": args.steps,
        "rounds": args.rounds,
        "warmup": args.warmup,
        "max_connections": args.max_connections,
        "cores": cores,
        "engine_steps_per_s": engine_rate,
        "engine_rounds": engine_rounds,
        "raw_sql_steps_per_s": baseline_rate,
        "raw_sql_rounds": baseline_rounds,
        "ratio_to_raw_sql": share,
        "target_ratio_to_raw_sql": TARGET_BASELINE_SHARE,
        "raw_sql_met": share_met,
        "floor_steps_per_s": floor_rate,
        "floor_rounds": floor_rounds,
        "ratio_to_floor": floor_share,
        "target_ratio_to_floor": TARGET_FLOOR_SHARE,
        "floor_met": floor_met,
        "cpu_ms_per_step_engine_total": engine_total,
        "target_cpu_ms_per_step": TARGET_CPU_MS_PER_STEP,
        "cpu_met": cpu_met,
        "dbos": dbos,
        "ratio_to_dbos": dbos_ratio,
        "target_ratio_to_dbos": TARGET_DBOS_RATIO,
        "dbos_met": dbos_ratio.map(|r| r >= TARGET_DBOS_RATIO),
        "postgres_counters": counters,
        "raw_sql_lean": args.raw_sql_lean,
        "other_jobs_cores_median": median(&others_cores),
        "cpu_ms_per_step": {
            "engine": {"process": engine_own, "postgres": engine_server},
            "raw_sql": {"process": baseline_own, "postgres": baseline_server},
            "floor": {"process": floor_own, "postgres": floor_server},
        },
    });
    println!("{summary}");
    if dbos_ratio.is_none() && args.backend == Backend::Postgres && !args.no_dbos {
        bail!("DBOS did not run");
    }
    Ok(())
}
