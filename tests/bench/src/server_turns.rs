//! `server-turns`: the server end to end. Starts a real `openbot serve` (release build) on a
//! fresh SQLite data folder or PostgreSQL database and measures: the time from start to ready,
//! the idle resident memory, and Turns per second over HTTP with many Chats at once (each Turn
//! one scripted model step: send, then long-poll its events to the end).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Parser;
use serde_json::{Value, json};

#[path = "common/served.rs"]
mod served;
use served::Served;

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
    let served = Served::start(&args.openbot, args.database_url.as_deref())?;
    let (api, token, ready_ms, ready_reported) = (
        served.api.clone(),
        served.token.clone(),
        served.ready_ms,
        served.ready_reported_ms,
    );
    let data = &served.data;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_rss = rss_mb(served.child.id())?;

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
    let busy_rss = rss_mb(served.child.id())?;
    drop(served);

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
