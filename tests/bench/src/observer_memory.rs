//! `observer-memory`: what an idle observer of a waiting Turn costs the server in memory.
//!
//! For each kind of observer (SSE: `GET /v1/executions/{id}/events` with
//! `Accept: text/event-stream`; long polling: the same with `?after=<last>&wait=60`) and each
//! count N, a fresh release `openbot serve` on SQLite: one Bot with a scripted model whose
//! step waits 600 s before its first output, one Turn started and followed until its
//! `model_step_started`; then the server's VmRSS with no observer (the baseline, after 2 s
//! idle), then N observers opened from this process over 127.0.0.1 (raw HTTP/1.1 on one TCP
//! connection each, at most `--connecting` connects at once), each after the Turn's last event
//! so it waits idle. Connected means: an SSE observer got its response head; a long poll's
//! request was accepted (the server's open file count grew by N) and none was answered. Then
//! the VmRSS once it stops growing and the server is idle, and (after - baseline) / N in
//! bytes. VmRSS counts the process's resident pages (heap, stacks); it does not count the
//! kernel's socket buffers.
//! Also reported: the server's CPU use over 4 s with all observers idle.
//!
//! Prints, never asserts; each scenario ends within the long polls' 60 s. The last line of the
//! output is one JSON object with all figures.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::Parser;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[path = "common/served.rs"]
mod served;
use served::Served;

/// The memory target per idle observer, in bytes.
const TARGET_BYTES: f64 = 4096.0;

/// How long the server's CPU use with all observers idle is measured.
const IDLE_CPU_WINDOW: Duration = Duration::from_secs(4);

#[derive(Debug, Parser)]
#[command(name = "observer-memory")]
struct Args {
    /// The `openbot` binary (a release build).
    #[arg(long, default_value = "openbot")]
    openbot: PathBuf,
    /// Observer counts, one fresh server each.
    #[arg(long, value_delimiter = ',', default_values_t = [1000, 10000])]
    counts: Vec<usize>,
    /// Which observers: `sse`, `poll` or both.
    #[arg(long, value_delimiter = ',', default_values_t = ["sse".to_string(), "poll".to_string()])]
    kinds: Vec<String>,
    /// Connects in flight at once.
    #[arg(long, default_value_t = 128)]
    connecting: usize,
    /// Seconds to keep each server and its observers after the measurement (to inspect it).
    #[arg(long, default_value_t = 0)]
    hold_s: u64,
}

fn status_kb(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {field}"))
}

fn rss_bytes(pid: u32) -> anyhow::Result<u64> {
    Ok(status_kb(pid, "VmRSS:")? * 1024)
}

/// The CPU time the process used so far (user and system), in clock ticks of 10 ms.
fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("no stat")?
        .1
        .split_whitespace()
        .collect();
    let field =
        |i: usize| -> anyhow::Result<u64> { Ok(fields.get(i).context("short stat")?.parse()?) };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    Ok(field(11)? + field(12)?)
}

fn open_files(pid: u32) -> anyhow::Result<usize> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count())
}

/// The soft limit of open files of this process (its children inherit it).
fn file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Starts a Turn that waits in its model step; answers its ID and last event sequence.
async fn waiting_turn(served: &Served) -> anyhow::Result<(String, u64)> {
    let (api, token) = (&served.api, &served.token);
    let script = served.data.path().join("wait.json");
    std::fs::write(
        &script,
        json!({"steps": [{"text": "late", "delay_ms": 600_000}]}).to_string(),
    )?;
    let http = reqwest::Client::new();
    let bot: Value = http
        .post(format!("{api}/v1/bots"))
        .bearer_auth(token)
        .json(&json!({"name": "Bench", "model": format!("scripted:{}", script.display())}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let chat: Value = http
        .post(format!("{api}/v1/chats"))
        .bearer_auth(token)
        .json(&json!({"bot_id": bot["id"]}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let chat = chat["id"].as_str().context("no chat id")?;
    let sent: Value = http
        .post(format!("{api}/v1/chats/{chat}/messages"))
        .bearer_auth(token)
        .json(&json!({"content": [{"type": "text", "text": "hi"}]}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let execution = sent["execution_id"]
        .as_str()
        .context("no execution")?
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut after = 0;
    while Instant::now() < deadline {
        let page: Value = http
            .get(format!(
                "{api}/v1/executions/{execution}/events?after={after}&wait=5"
            ))
            .bearer_auth(token)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        ensure!(page["ended"] != true, "the Turn ended: {page}");
        after = page["next_after"].as_u64().unwrap_or(after);
        let started = page["events"]
            .as_array()
            .is_some_and(|events| events.iter().any(|e| e["type"] == "model_step_started"));
        if started {
            return Ok((execution, after));
        }
    }
    bail!("the Turn did not start its model step")
}

/// Opens one observer; answers once it is connected (see the module doc).
async fn open(
    address: String,
    request: String,
    sse: bool,
) -> anyhow::Result<(TcpStream, Option<Vec<u8>>)> {
    let mut stream = TcpStream::connect(&address).await?;
    stream.write_all(request.as_bytes()).await?;
    if !sse {
        return Ok((stream, None));
    }
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await?;
        ensure!(n > 0, "the server closed an SSE stream before its head");
        head.extend_from_slice(&buf[..n]);
    }
    ensure!(
        head.starts_with(b"HTTP/1.1 200"),
        "SSE answered {}",
        String::from_utf8_lossy(&head)
    );
    Ok((stream, Some(head)))
}

struct Figures {
    ready_ms: f64,
    /// Cores the server used while the observers were idle.
    idle_cpu: f64,
    baseline: u64,
    after: u64,
    open_s: f64,
}

async fn scenario(args: &Args, kind: &str, count: usize) -> anyhow::Result<Figures> {
    let served = Served::start(&args.openbot, None)?;
    let pid = served.child.id();
    let (execution, last) = waiting_turn(&served).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let baseline = rss_bytes(pid)?;
    let files_before = open_files(pid)?;
    let address = served
        .api
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let sse = kind == "sse";
    let request = if sse {
        format!(
            "GET /v1/executions/{execution}/events HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\nLast-Event-ID: {last}\r\n\r\n",
            served.token
        )
    } else {
        format!(
            "GET /v1/executions/{execution}/events?after={last}&wait=60 HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\nAccept: application/json\r\n\r\n",
            served.token
        )
    };
    let started = Instant::now();
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(args.connecting));
    let mut tasks = Vec::with_capacity(count);
    for _ in 0..count {
        let permit = std::sync::Arc::clone(&permits).acquire_owned().await?;
        let (address, request) = (address.clone(), request.clone());
        tasks.push(tokio::spawn(async move {
            let opened = open(address, request, sse).await;
            drop(permit);
            opened
        }));
    }
    let mut streams = Vec::with_capacity(count);
    for task in tasks {
        streams.push(task.await??.0);
    }
    if !sse {
        // Every long poll accepted: one more open file each on the server.
        let deadline = Instant::now() + Duration::from_secs(20);
        while open_files(pid)? < files_before + count {
            ensure!(
                Instant::now() < deadline,
                "the server accepted {} of {count} long polls",
                open_files(pid)?.saturating_sub(files_before)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let open_s = started.elapsed().as_secs_f64();
    // Settled: over 1 s, VmRSS grew by less than 0.2 % and the server used less than 5 % of
    // a core (requests still being routed would show as CPU), at most 15 s.
    let settle_deadline = Instant::now() + Duration::from_secs(15);
    let mut previous = rss_bytes(pid)?;
    let mut ticks = cpu_ticks(pid)?;
    let after = loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (now, ticks_now) = (rss_bytes(pid)?, cpu_ticks(pid)?);
        let quiet = ticks_now - ticks < 5;
        if (now <= previous + previous / 500 && quiet) || Instant::now() > settle_deadline {
            break now.max(previous);
        }
        (previous, ticks) = (now, ticks_now);
    };
    // Idle CPU with the observers connected (their fallback wake-ups included).
    let (ticks_before, idle_from) = (cpu_ticks(pid)?, Instant::now());
    tokio::time::sleep(IDLE_CPU_WINDOW).await;
    let idle_cpu =
        (cpu_ticks(pid)? - ticks_before) as f64 / 100.0 / idle_from.elapsed().as_secs_f64();
    if !sse {
        // None answered yet: each was still waiting when memory was read.
        let mut answered = 0;
        for stream in &streams {
            let mut byte = [0u8; 1];
            if stream.try_read(&mut byte).is_ok_and(|n| n > 0) {
                answered += 1;
            }
        }
        ensure!(
            answered == 0,
            "{answered} long polls were answered before the measurement"
        );
        ensure!(
            started.elapsed() < Duration::from_secs(55),
            "the long polls took too long to open"
        );
    }
    let ready_ms = served.ready_ms.max(served.ready_reported_ms.unwrap_or(0.0));
    if args.hold_s > 0 {
        eprintln!("holding server pid {pid} for {} s", args.hold_s);
        tokio::time::sleep(Duration::from_secs(args.hold_s)).await;
    }
    drop(served);
    drop(streams);
    Ok(Figures {
        ready_ms,
        idle_cpu,
        baseline,
        after,
        open_s,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let most = args.counts.iter().copied().max().unwrap_or(0);
    if let Some(limit) = file_limit() {
        ensure!(
            limit > most + 100,
            "open files are limited to {limit} here; raise the limit (ulimit -n) above {}",
            most + 100
        );
    }
    let mut results = Vec::new();
    for kind in &args.kinds {
        ensure!(
            kind == "sse" || kind == "poll",
            "unknown observer kind `{kind}`"
        );
        for &count in &args.counts {
            let f = scenario(&args, kind, count).await?;
            let per = (f.after as f64 - f.baseline as f64) / count as f64;
            println!(
                "{kind:>4} x {count:>6}: baseline {:.1} MB, with observers {:.1} MB: {per:.0} bytes per idle observer ({:.2} KiB; target {:.0} KiB: {}); opened in {:.1} s; idle CPU {:.1} % of a core",
                f.baseline as f64 / 1e6,
                f.after as f64 / 1e6,
                per / 1024.0,
                TARGET_BYTES / 1024.0,
                if per <= TARGET_BYTES {
                    "met"
                } else {
                    "not met"
                },
                f.open_s,
                f.idle_cpu * 100.0
            );
            results.push(json!({"kind": kind, "observers": count, "baseline_rss_bytes": f.baseline,
                "rss_bytes": f.after, "bytes_per_observer": per, "open_s": f.open_s, "server_ready_ms": f.ready_ms, "idle_cpu_cores": f.idle_cpu}));
        }
    }
    println!(
        "{}",
        json!({"benchmark": "observer_memory", "backend": "sqlite", "results": results})
    );
    Ok(())
}
