//! Takeover time after SIGKILL of the owner, with real `openbot serve` processes on PostgreSQL.
//!
//! Each repetition: a new database; node A starts and runs a Turn whose model request hangs
//! (scripted model, a step that waits 600 s before its first output); once the Turn's
//! `model_step_started` (step 1, attempt 1) is observed, node B starts and reports it is
//! running; the script is replaced by a fast answer (B reads it when it first needs the model);
//! then A gets SIGKILL. The figure is the time from the kill until this process, observing the
//! Turn from a third engine (its own pool and listener), receives B's `model_step_started`
//! (step 1, attempt 2): B claimed the execution after A's lease lapsed and started the step
//! again from the saved call log. Also reported: the time until the Turn's end, and how much of
//! A's lease was left at the kill (the part of the takeover the lease itself accounts for).
//!
//! Nodes run with `--lease-ms` (default 2000 ms, the node default). The last line of the output
//! is one JSON object with all figures.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::Parser;
use futures::StreamExt;
use openbot_schema::{ContentPart, EventKind, ExecutionState, Limits};
use openbot_server::engine::{Engine, Submission};
use openbot_server::sealed::KeyRing;
use openbot_server::store::{PostgresStore, Scope, Store, now_ms};
use openbot_server::turns::{TURN, TurnInput};
use serde_json::json;
use sqlx::Connection;
use uuid::Uuid;

/// Most milliseconds from the kill to the new owner's restart of the step.
const TARGET_MS: f64 = 3000.0;

/// Takeover after SIGKILL of the owner node (PostgreSQL, real node processes).
#[derive(Debug, Parser)]
#[command(name = "takeover")]
struct Args {
    /// A PostgreSQL server URL (its maintenance database); each repetition gets a new database.
    #[arg(long, env = "OPENBOT_BENCH_DATABASE_URL")]
    database_url: String,
    /// The `openbot` binary (default: the one next to this program).
    #[arg(long)]
    openbot: Option<PathBuf>,
    /// Repetitions; the median is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// The nodes' lease.
    #[arg(long, default_value_t = 2000)]
    lease_ms: u64,
    /// Where the nodes' logs go (default: a new temporary folder, kept).
    #[arg(long)]
    log_dir: Option<PathBuf>,
}

/// One `openbot serve` process; killed when dropped.
struct Node {
    child: Child,
}

impl Node {
    /// Starts a node and waits until it says it is running.
    fn start(
        binary: &PathBuf,
        url: &str,
        keys: &str,
        name: &str,
        lease_ms: u64,
        data: &std::path::Path,
        log: PathBuf,
    ) -> anyhow::Result<Node> {
        let mut child = Command::new(binary)
            .args([
                "serve",
                "--database-url",
                url,
                "--node-name",
                name,
                "--bind",
                "127.0.0.1:0",
            ])
            .args(["--lease-ms", &lease_ms.to_string()])
            .env("OPENBOT_SEAL_KEYS", keys)
            // Two nodes on one machine: each listens on a free port.
            .env("OPENBOT_BIND", "127.0.0.1:0")
            .env("OPENBOT_DATA_DIR", data)
            .env("OPENBOT_SCRIPTED_DIR", std::env::temp_dir())
            .env("OPENBOT_LOG", "info")
            .env_remove("OPENBOT_FAULT_POINT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stderr = child.stderr.take().context("the node's stderr")?;
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut file = std::fs::File::create(&log).ok();
            let mut ready = Some(ready_tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(file) = file.as_mut() {
                    let _ = writeln!(file, "{line}");
                }
                if (line.contains("running on") || line.contains("listening on"))
                    && let Some(ready) = ready.take()
                {
                    let _ = ready.send(());
                }
            }
        });
        let mut node = Node { child };
        if ready_rx.recv_timeout(Duration::from_secs(30)).is_err() {
            node.kill();
            bail!("node {name} did not start");
        }
        Ok(node)
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits for it to end.
    fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn create_database(server: &str, name: &str) -> anyhow::Result<String> {
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

async fn drop_database(server: &str, name: &str) -> anyhow::Result<()> {
    let mut admin = sqlx::PgConnection::connect(server).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await?;
    admin.close().await?;
    Ok(())
}

/// One repetition's figures, in milliseconds.
struct Takeover {
    lease_left_ms: i64,
    restarted_ms: f64,
    ended_ms: f64,
}

async fn repetition(
    args: &Args,
    binary: &PathBuf,
    logs: &std::path::Path,
    round: u32,
) -> anyhow::Result<Takeover> {
    let name = format!("bench_takeover_{}", Uuid::now_v7().simple());
    let url = create_database(&args.database_url, &name).await?;
    let result = repetition_on(args, binary, logs, round, &url).await;
    if let Err(err) = drop_database(&args.database_url, &name).await {
        eprintln!("could not drop {name}: {err}");
    }
    result
}

async fn repetition_on(
    args: &Args,
    binary: &PathBuf,
    logs: &std::path::Path,
    round: u32,
    url: &str,
) -> anyhow::Result<Takeover> {
    PostgresStore::migrate(url).await?;
    let (keys, keys_text) = KeyRing::generate("k1");
    let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(url, 4, keys.clone()).await?);
    let client = Engine::open(Arc::clone(&store), keys, "bench-client".into());
    let work = tempfile::tempdir()?;
    let script = work.path().join("model.json");
    // A model request that hangs: the first output comes after 600 s.
    std::fs::write(
        &script,
        json!({"steps": [{"text": "late", "delay_ms": 600_000}]}).to_string(),
    )?;
    let data_a = work.path().join("a");
    let data_b = work.path().join("b");
    let mut a = Node::start(
        binary,
        url,
        &keys_text,
        &format!("takeover-a{round}"),
        args.lease_ms,
        &data_a,
        logs.join(format!("a{round}.log")),
    )?;

    let input = TurnInput {
        instructions: String::new(),
        model: format!("scripted:{}", script.display()),
        tools: Vec::new(),
        limits: Limits::default(),
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
    let submission = Submission {
        kind: TURN,
        scope: Scope::Member("bench".into()),
        command_key: None,
        input: &input,
        events: vec![EventKind::TurnStarted {
            input: input.input.clone(),
        }],
        parent_id: None,
        chat_id: None,
        admission_gate: None,
    };
    let id = client.submit(submission).await?.execution_id();
    let mut stream = client.observe(id, 0);
    let started = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = stream.next().await {
            let event = event?;
            if matches!(
                event.kind,
                EventKind::ModelStepStarted {
                    step: 1,
                    attempt: 1
                }
            ) {
                return Ok::<_, anyhow::Error>(event.sequence);
            }
        }
        bail!("the Turn ended before its model step started")
    })
    .await
    .context("node A did not start the Turn")??;
    drop(stream);

    let mut b = Node::start(
        binary,
        url,
        &keys_text,
        &format!("takeover-b{round}"),
        args.lease_ms,
        &data_b,
        logs.join(format!("b{round}.log")),
    )?;
    // B reads the script when it first needs the model: after it took the Turn over.
    std::fs::write(&script, json!({"steps": [{"text": "done"}]}).to_string())?;
    // Spread the kills over one renewal period (a quarter of the lease), so the repetitions
    // see different amounts of lease left.
    let spread = args.lease_ms / 4 * u64::from(round - 1) / u64::from(args.repeats);
    tokio::time::sleep(Duration::from_millis(300 + spread)).await;

    let mut stream = client.observe(id, started);
    let killed = Instant::now();
    let killed_ms = now_ms();
    a.kill();
    let lease_left_ms = store
        .execution(id)
        .await?
        .lease_expires_at
        .map_or(0, |at| at - killed_ms);
    let mut restarted = None;
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(event) = stream.next().await {
            let event = event?;
            match event.kind {
                EventKind::ModelStepStarted { step: 1, attempt } if attempt >= 2 => {
                    restarted.get_or_insert(killed.elapsed());
                }
                EventKind::TurnEnded { .. } | EventKind::Failed { .. } => {
                    return Ok::<_, anyhow::Error>(killed.elapsed());
                }
                _ => {}
            }
        }
        bail!("the event stream ended without the Turn's end")
    })
    .await
    .context("node B did not finish the Turn")??;
    let restarted = restarted.context("no second attempt of the model step was seen")?;
    let row = store.execution(id).await?;
    ensure!(
        row.state == ExecutionState::Completed && row.generation == 2,
        "unexpected end: {:?}, generation {}",
        row.state,
        row.generation
    );
    b.stop();
    client.shutdown().await;
    Ok(Takeover {
        lease_left_ms,
        restarted_ms: restarted.as_secs_f64() * 1000.0,
        ended_ms: ended.as_secs_f64() * 1000.0,
    })
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let binary = match &args.openbot {
        Some(path) => path.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("the program's folder")?
            .join("openbot"),
    };
    ensure!(
        binary.exists(),
        "{} is missing: build it with `cargo build --release -p openbot-server`",
        binary.display()
    );
    let logs = match &args.log_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            dir.clone()
        }
        None => tempfile::Builder::new()
            .prefix("openbot-takeover-")
            .tempdir()?
            .keep(),
    };
    println!(
        "takeover: {} repetitions, lease {} ms, nodes {}; logs in {}",
        args.repeats,
        args.lease_ms,
        binary.display(),
        logs.display()
    );
    let mut results = Vec::new();
    for round in 1..=args.repeats {
        let result = repetition(&args, &binary, &logs, round).await?;
        println!(
            "  {round}: step restarted by the other node {:.0} ms after SIGKILL \
             (lease left at the kill {} ms, so {:.0} ms after the lease lapsed); Turn ended after {:.0} ms",
            result.restarted_ms,
            result.lease_left_ms,
            result.restarted_ms - result.lease_left_ms as f64,
            result.ended_ms
        );
        results.push(result);
    }
    let restarted: Vec<f64> = results.iter().map(|r| r.restarted_ms).collect();
    let ended: Vec<f64> = results.iter().map(|r| r.ended_ms).collect();
    let after_lease: Vec<f64> = results
        .iter()
        .map(|r| r.restarted_ms - r.lease_left_ms as f64)
        .collect();
    let lease_left: Vec<f64> = results.iter().map(|r| r.lease_left_ms as f64).collect();
    let worst = restarted.iter().copied().fold(f64::MIN, f64::max);
    let figure = median(&restarted);
    println!(
        "takeover after SIGKILL: median {figure:.0} ms (max {worst:.0} ms); Turn end: median {:.0} ms; \
         after the lease lapsed: median {:.0} ms",
        median(&ended),
        median(&after_lease)
    );
    let met = figure <= TARGET_MS;
    println!(
        "target: ≤ {TARGET_MS} ms: {} (every repetition: {})",
        if met { "met" } else { "NOT met" },
        if worst <= TARGET_MS { "met" } else { "NOT met" }
    );
    let summary = json!({
        "benchmark": "takeover",
        "lease_ms": args.lease_ms,
        "repeats": args.repeats,
        "takeover_ms": restarted,
        "takeover_median_ms": figure,
        "takeover_max_ms": worst,
        "turn_end_ms": ended,
        "lease_left_at_kill_ms": lease_left,
        "after_lease_lapsed_ms": after_lease,
        "target_ms": TARGET_MS,
        "met": met,
        "met_every_repetition": worst <= TARGET_MS,
    });
    println!("{summary}");
    Ok(())
}
