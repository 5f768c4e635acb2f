//! Commit-to-observer latency on PostgreSQL: how long after a commit returns its events reach
//! the observers of the execution, when the observers sit on another node.
//!
//! Two engines in one process, each with its own connection pool, listener and notifier, as
//! two nodes would have: the writer and the observer node. Wake-ups cross between them only
//! through PostgreSQL's LISTEN/NOTIFY, as between two nodes; one monotonic clock measures both
//! ends. The writer owns `--executions` Turn executions (submitted and claimed; no runner) and
//! commits to each one event (`text_delta`) every `--interval-ms`, the way the durable host
//! commits a step: `Store::commit`, then the wake-up. `--observers` streams of
//! `Engine::observe` on the observer node, spread evenly over the executions, each record the
//! time they receive every event. A sample is one event received by one observer: receipt time
//! minus the time its commit returned. The first `--warmup` commits are not counted.
//!
//! The last line of the output is one JSON object with all figures.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Parser;
use futures::StreamExt;
use openbot_schema::{
    ContentPart, EventKind, ExecutionId, ExecutionState, Limits, TurnOutcome, Usage,
};
use openbot_server::engine::{Engine, Submission, Wake};
use openbot_server::sealed::KeyRing;
use openbot_server::store::{Commit, PostgresStore, Scope, StateChange, Store};
use openbot_server::turns::{TURN, TurnInput};
use serde_json::json;
use sqlx::Connection;
use uuid::Uuid;

/// Most milliseconds at the 99th percentile.
const TARGET_P99_MS: f64 = 10.0;

/// Commit-to-observer latency with many observers on another node (PostgreSQL).
#[derive(Debug, Parser)]
#[command(name = "observer-latency")]
struct Args {
    /// A PostgreSQL server URL (its maintenance database); the run gets a new database on it.
    #[arg(long, env = "OPENBOT_BENCH_DATABASE_URL")]
    database_url: String,
    /// Observers (`Engine::observe` streams) on the observer node.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    observers: u32,
    /// Executions the writer commits to; the observers are spread evenly over them.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    executions: u32,
    /// Time between two commits to the same execution.
    #[arg(long, default_value_t = 100)]
    interval_ms: u64,
    /// Measured commits in all, after the warm-up.
    #[arg(long, default_value_t = 5000)]
    commits: u64,
    /// Commits before measuring.
    #[arg(long, default_value_t = 500)]
    warmup: u64,
    /// Connections of each node's pool (the node default is 16).
    #[arg(long, default_value_t = 16)]
    max_connections: u32,
    /// Keep the benchmark database instead of dropping it at the end.
    #[arg(long)]
    keep_database: bool,
}

/// When each commit returned: (execution index, sequence) -> (commit order, time).
type Commits = Arc<Mutex<HashMap<(usize, u64), (u64, Instant)>>>;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
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

fn clock_tick_ms() -> f64 {
    let ticks: f64 = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0);
    1000.0 / ticks
}

/// CPU milliseconds the whole machine spent busy (user, nice, system, irq, softirq) so far.
fn machine_busy_ms() -> f64 {
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
    busy as f64 * clock_tick_ms()
}

/// CPU milliseconds this process used so far.
fn own_cpu_ms() -> f64 {
    let text = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = text.rfind(')').map_or("", |i| &text[i + 1..]);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    ticks as f64 * clock_tick_ms()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let executions = args.executions as usize;
    let rate = executions as f64 * 1000.0 / args.interval_ms as f64;
    println!(
        "observer latency: {} observers on another node over {} executions; one commit per \
         execution every {} ms ({rate:.0} commits/s); {} warm-up + {} measured commits; {cores} cores",
        args.observers, args.executions, args.interval_ms, args.warmup, args.commits
    );
    let name = format!("bench_observe_{}", Uuid::now_v7().simple());
    let url = create_database(&args.database_url, &name).await?;
    PostgresStore::migrate(&url).await?;
    let result = run(&args, &url, rate, cores).await;
    if !args.keep_database
        && let Err(err) = drop_database(&args.database_url, &name).await
    {
        eprintln!("could not drop {name}: {err}");
    }
    result
}

#[allow(clippy::too_many_lines)] // one benchmark run, its steps in the order they print
async fn run(args: &Args, url: &str, rate: f64, cores: usize) -> anyhow::Result<()> {
    let executions = args.executions as usize;
    let (keys, _) = KeyRing::generate("k1");
    let writer_store: Arc<dyn Store> =
        Arc::new(PostgresStore::connect(url, args.max_connections, keys.clone()).await?);
    let observer_store: Arc<dyn Store> =
        Arc::new(PostgresStore::connect(url, args.max_connections, keys.clone()).await?);
    let writer = Engine::open(Arc::clone(&writer_store), keys.clone(), "writer".into());
    let observer = Engine::open(observer_store, keys, "observer".into());

    // The executions: submitted and claimed by the writer, which never runs them.
    let input = TurnInput {
        instructions: String::new(),
        model: "scripted:/dev/null".into(),
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
    let mut ids = Vec::with_capacity(executions);
    for _ in 0..executions {
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
        ids.push(writer.submit(submission).await?.execution_id());
    }
    let mut generations: HashMap<ExecutionId, i64> = HashMap::new();
    while generations.len() < executions {
        let claims = writer_store
            .claim("writer", &[TURN], 3_600_000, 100)
            .await?;
        ensure!(!claims.is_empty(), "could not claim the executions");
        for claim in claims {
            generations.insert(claim.id, claim.generation);
        }
    }
    // Let both nodes' listeners connect before anything is measured.
    tokio::time::sleep(Duration::from_millis(1000)).await;

    // The observers: each follows one execution from after its `turn_started`.
    let mut observers = Vec::new();
    for i in 0..args.observers as usize {
        let index = i % executions;
        let mut stream = observer.observe(ids[index], 1);
        observers.push(tokio::spawn(async move {
            let mut received = Vec::new();
            while let Some(event) = stream.next().await {
                let at = Instant::now();
                let event = event?;
                if matches!(event.kind, EventKind::TextDelta { .. }) {
                    received.push((index, event.sequence, at));
                }
            }
            Ok::<_, anyhow::Error>((index, received))
        }));
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;

    // The writers: one task per execution, commits spread evenly over the interval.
    let total = args.warmup + args.commits;
    let per_execution = total.div_ceil(executions as u64);
    let commits: Commits = Arc::new(Mutex::new(HashMap::new()));
    let order = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let commit_times = Arc::new(Mutex::new(Vec::new()));
    let writer = Arc::new(writer);
    let started = Instant::now();
    let busy_before = machine_busy_ms();
    let own_before = own_cpu_ms();
    let mut writers = Vec::new();
    for (index, id) in ids.iter().copied().enumerate() {
        let generation = generations[&id];
        let writer = Arc::clone(&writer);
        let store = Arc::clone(&writer_store);
        let commits = Arc::clone(&commits);
        let order = Arc::clone(&order);
        let commit_times = Arc::clone(&commit_times);
        let interval = Duration::from_millis(args.interval_ms);
        let offset = interval.mul_f64(index as f64 / executions as f64);
        writers.push(tokio::spawn(async move {
            let mut ticks =
                tokio::time::interval_at(tokio::time::Instant::now() + offset, interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            for n in 0..per_execution {
                ticks.tick().await;
                let commit = Commit {
                    events: vec![EventKind::TextDelta {
                        step: 1,
                        attempt: 1,
                        text: format!("delta {n} of the benchmark's text stream"),
                    }],
                    ..Commit::default()
                };
                let before = Instant::now();
                let sequence = store.commit(id, generation, commit).await?;
                let at = Instant::now();
                let position = order.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                commits
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert((index, sequence as u64), (position, at));
                commit_times
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((at - before).as_secs_f64() * 1000.0);
                // As the durable host does after a commit with events.
                writer.context().hub.announce(Wake::Events(id));
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for task in writers {
        task.await??;
    }
    let writing = started.elapsed();
    // Cores the machine and this process were busy while writing (PostgreSQL and other jobs
    // are the difference).
    let machine_cores = (machine_busy_ms() - busy_before) / writing.as_secs_f64() / 1000.0;
    let own_cores = (own_cpu_ms() - own_before) / writing.as_secs_f64() / 1000.0;

    // End every execution, so the streams end after their last event.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for id in &ids {
        let end = Commit {
            events: vec![EventKind::TurnEnded {
                outcome: TurnOutcome::Completed,
                usage: Usage::default(),
            }],
            state: Some(StateChange {
                state: ExecutionState::Completed,
                outcome: Some(TurnOutcome::Completed),
                failure: None,
                wake_at: None,
                unknown_call: None,
                output: None,
                release: true,
                reason: None,
            }),
            ..Commit::default()
        };
        writer_store.commit(*id, generations[id], end).await?;
        writer.context().hub.announce(Wake::Events(*id));
    }
    let mut received = Vec::new();
    for task in observers {
        let got = tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .context("an observer did not end")???;
        received.push(got);
    }
    writer.shutdown().await;
    observer.shutdown().await;

    // Every observer must have received every event of its execution, once, in order.
    let commits = commits
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let mut latencies = Vec::new();
    let mut missing = 0u64;
    for (index, got) in &received {
        let index = *index;
        let expected = commits.keys().filter(|(i, _)| *i == index).count();
        missing += expected.saturating_sub(got.len()) as u64;
        for (i, sequence, at) in got {
            let (position, committed) = commits
                .get(&(*i, *sequence))
                .context("an event nobody committed")?;
            if *position >= args.warmup {
                let ms = if *at >= *committed {
                    (*at - *committed).as_secs_f64() * 1000.0
                } else {
                    -((*committed - *at).as_secs_f64() * 1000.0)
                };
                latencies.push(ms);
            }
        }
    }
    ensure!(
        missing == 0,
        "{missing} events did not reach their observers"
    );
    latencies.sort_by(f64::total_cmp);
    let mut commit_ms = commit_times
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    commit_ms.sort_by(f64::total_cmp);
    let achieved = commits.len() as f64 / writing.as_secs_f64();
    let p = |q| percentile(&latencies, q);
    println!(
        "{} samples ({} commits x their observers); {achieved:.0} commits/s achieved",
        latencies.len(),
        commits.len() as u64 - args.warmup.min(commits.len() as u64)
    );
    println!(
        "commit-to-observer latency: p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms (min {:.2} ms)",
        p(50.0),
        p(95.0),
        p(99.0),
        p(99.9),
        latencies.last().copied().unwrap_or(f64::NAN),
        latencies.first().copied().unwrap_or(f64::NAN),
    );
    println!(
        "for comparison, the commit itself: p50 {:.2} ms, p99 {:.2} ms",
        percentile(&commit_ms, 50.0),
        percentile(&commit_ms, 99.0)
    );
    println!(
        "while writing, the machine was busy {machine_cores:.2} cores of {cores}: this process \
         {own_cores:.2}, PostgreSQL and other jobs {:.2}",
        machine_cores - own_cores
    );
    let met = p(99.0) <= TARGET_P99_MS;
    println!(
        "target: p99 ≤ {TARGET_P99_MS} ms: {}",
        if met { "met" } else { "NOT met" }
    );
    let summary = json!({
        "benchmark": "observer_latency",
        "observers": args.observers,
        "executions": args.executions,
        "interval_ms": args.interval_ms,
        "commits_per_s_planned": rate,
        "commits_per_s": achieved,
        "commits": commits.len(),
        "warmup_commits": args.warmup,
        "samples": latencies.len(),
        "p50_ms": p(50.0),
        "p95_ms": p(95.0),
        "p99_ms": p(99.0),
        "p999_ms": p(99.9),
        "max_ms": latencies.last(),
        "min_ms": latencies.first(),
        "commit_p50_ms": percentile(&commit_ms, 50.0),
        "commit_p99_ms": percentile(&commit_ms, 99.0),
        "max_connections": args.max_connections,
        "machine_busy_cores": machine_cores,
        "process_cores": own_cores,
        "cores": cores,
        "target_p99_ms": TARGET_P99_MS,
        "met": met,
    });
    println!("{summary}");
    Ok(())
}
