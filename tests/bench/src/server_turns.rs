//! `server-turns`: the server end to end. Starts a real `openbot serve` (release build) on a
//! fresh SQLite data folder or PostgreSQL database and measures: the time from start to ready,
//! the idle resident memory, and Turns per second over HTTP with many Chats at once (each Turn
//! one scripted model step: send, then long-poll its events to the end).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::Parser;
use serde_json::{Value, json};

#[derive(Debug, Parser)]
#[command(name = "server-turns")]
struct Args {
    /// The `openbot` binary (a release build).
    #[arg(long, default_value = "openbot")]
    openbot: PathBuf,
    /// A PostgreSQL database URL (already created); SQLite in a new folder when absent.
    #[arg(long)]
    database_url: Option<String>,
    /// Chats sending at once.
    #[arg(long, default_value_t = 32)]
    chats: usize,
    /// Turns each Chat runs, one after the other.
    #[arg(long, default_value_t = 20)]
    turns: usize,
}

fn rss_mb(pid: u32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmRSS")?;
    Ok(kb / 1024.0)
}

async fn turn(http: &reqwest::Client, api: &str, token: &str, chat: &str) -> anyhow::Result<()> {
    let sent: Value = http
        .post(format!("{api}/v1/chats/{chat}/messages"))
        .bearer_auth(token)
        .json(&json!({"content": [{"type": "text", "text": "hi"}]}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let execution = sent["execution_id"].as_str().context("no execution")?;
    let mut after = 0;
    loop {
        let page: Value = http
            .get(format!(
                "{api}/v1/executions/{execution}/events?after={after}&wait=30"
            ))
            .bearer_auth(token)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        after = page["next_after"].as_u64().unwrap_or(after);
        if page["ended"].as_bool() == Some(true) {
            let last = page["events"]
                .as_array()
                .and_then(|e| e.last())
                .cloned()
                .unwrap_or_default();
            ensure!(
                last["outcome"] == "completed",
                "a Turn did not complete: {last}"
            );
            return Ok(());
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let data = tempfile::tempdir()?;
    let mut node_args: Vec<String> = vec!["--data-dir".into(), data.path().display().to_string()];
    if let Some(url) = &args.database_url {
        node_args.extend(["--database-url".into(), url.clone()]);
    }
    let keys = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    let migrated = Command::new(&args.openbot)
        .arg("migrate")
        .args(&node_args)
        .output()?;
    ensure!(
        migrated.status.success(),
        "migrate failed: {}",
        String::from_utf8_lossy(&migrated.stderr)
    );

    let started = Instant::now();
    let mut child = Command::new(&args.openbot)
        .arg("serve")
        .args(&node_args)
        .args(["--bind", "127.0.0.1:0"])
        .env("OPENBOT_SEAL_KEYS", keys)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stderr = child.stderr.take().context("no stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let (api, ready_reported) = loop {
        let Some(line) = lines.next() else {
            bail!("the server stopped before it was ready")
        };
        let line = line?;
        if let Some(at) = line.find("http://") {
            let api = line[at..]
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
            let reported = line
                .split("ready in ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse::<f64>().ok());
            break (api, reported);
        }
    };
    let ready_ms = started.elapsed().as_secs_f64() * 1000.0;
    std::thread::spawn(move || for _ in lines {});
    let token = {
        let stdout = child.stdout.take().context("no stdout")?;
        BufReader::new(stdout)
            .lines()
            .next()
            .context("no token")??
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_rss = rss_mb(child.id())?;

    let script = data.path().join("answer.json");
    std::fs::write(&script, r#"{"steps": [{"text": "ok"}], "repeat": true}"#)?;
    let http = reqwest::Client::new();
    let bot: Value = http
        .post(format!("{api}/v1/bots"))
        .bearer_auth(&token)
        .json(&json!({"name": "Bench", "model": format!("scripted:{}", script.display())}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let mut chats = Vec::new();
    for _ in 0..args.chats {
        let chat: Value = http
            .post(format!("{api}/v1/chats"))
            .bearer_auth(&token)
            .json(&json!({"bot_id": bot["id"]}))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        chats.push(chat["id"].as_str().context("no chat id")?.to_string());
    }
    // One warm-up Turn per Chat, then the measured ones.
    for chat in &chats {
        turn(&http, &api, &token, chat).await?;
    }
    let measured = Instant::now();
    let tasks: Vec<_> = chats
        .iter()
        .map(|chat| {
            let (http, api, token, chat, turns) = (
                http.clone(),
                api.clone(),
                token.clone(),
                chat.clone(),
                args.turns,
            );
            tokio::spawn(async move {
                for _ in 0..turns {
                    turn(&http, &api, &token, &chat).await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    let elapsed = measured.elapsed().as_secs_f64();
    let total = args.chats * args.turns;
    let turns_per_s = total as f64 / elapsed;
    let busy_rss = rss_mb(child.id())?;
    let _ = child.kill();
    let _ = child.wait();

    let backend = if args.database_url.is_some() {
        "postgres"
    } else {
        "sqlite"
    };
    println!(
        "server ({backend}): ready in {ready_ms:.0} ms (the server reports {:.0} ms); idle RSS {idle_rss:.1} MB",
        ready_reported.unwrap_or(f64::NAN)
    );
    println!(
        "server ({backend}): {turns_per_s:.1} Turns/s end to end over HTTP ({total} Turns, {} Chats at once, {elapsed:.2} s); RSS after: {busy_rss:.1} MB",
        args.chats
    );
    println!(
        "{}",
        json!({"benchmark": "server_turns", "backend": backend, "ready_ms": ready_ms, "ready_reported_ms": ready_reported,
               "idle_rss_mb": idle_rss, "busy_rss_mb": busy_rss, "turns_per_s": turns_per_s, "turns": total, "chats": args.chats})
    );
    Ok(())
}
