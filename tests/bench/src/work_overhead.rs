//! `work-overhead`: what child work costs end to end on a real `openbot serve`, on SQLite or
//! PostgreSQL, measured one at a time (latency, not throughput), each against baselines run
//! in the same process:
//!
//! - single: a Turn of one scripted model step (send, then long-poll its events to the end);
//! - inline tool: a Turn whose model calls an HTTP tool inline, then answers (two steps);
//! - approval round trip: an `ask` rule holds the same call; from sending the decision until
//!   a reader sees the approved call's job end (its result is then in the Chat);
//! - delegation round trip: a Turn delegates to another Bot (one child step) and waits; from
//!   the commit that starts the child to the commit that hands its answer to the parent (the
//!   server's event times), against the single-step Turn.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, ensure};
use clap::Parser;
use serde_json::{Value, json};

#[allow(dead_code)] // the start-up figures are server-turns's
#[path = "common/served.rs"]
mod served;
use served::Served;

#[derive(Debug, Parser)]
#[command(name = "work-overhead")]
struct Args {
    /// The `openbot` binary (a release build).
    #[arg(long, default_value = "openbot")]
    openbot: PathBuf,
    /// A PostgreSQL database URL (already created); SQLite in a new folder when absent.
    #[arg(long)]
    database_url: Option<String>,
    /// Measured repetitions of each case (after 3 warm-up ones).
    #[arg(long, default_value_t = 30)]
    repeats: usize,
}

struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let text = response.text().await?;
        ensure!(status.is_success(), "POST {path}: {status} {text}");
        Ok(serde_json::from_str(&text)?)
    }

    async fn put(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        Ok(self
            .http
            .put(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?)
    }

    /// Long-polls an execution's events to its end; returns them.
    async fn events(&self, execution: &str) -> anyhow::Result<Vec<Value>> {
        let mut after = 0;
        let mut all = Vec::new();
        loop {
            let page: Value = self
                .http
                .get(format!(
                    "{}/v1/executions/{execution}/events?after={after}&wait=30",
                    self.base
                ))
                .bearer_auth(&self.token)
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            after = page["next_after"].as_u64().unwrap_or(after);
            all.extend(page["events"].as_array().cloned().unwrap_or_default());
            if page["ended"].as_bool() == Some(true) {
                return Ok(all);
            }
        }
    }

    async fn bot(
        &self,
        name: &str,
        script: &std::path::Path,
        tools: &[&str],
    ) -> anyhow::Result<Value> {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| json!({"name": t, "input_schema": {"type": "object"}}))
            .collect();
        self.post(
            "/v1/bots",
            json!({"name": name, "model": format!("scripted:{}", script.display()), "tools": tools}),
        )
        .await
    }

    /// Sends to a new Chat of `bot` and waits for the Turn's end; returns its events.
    async fn turn(&self, bot: &Value) -> anyhow::Result<Vec<Value>> {
        let chat = self.post("/v1/chats", json!({"bot_id": bot["id"]})).await?;
        let chat = chat["id"].as_str().context("no chat id")?;
        let sent = self
            .post(
                &format!("/v1/chats/{chat}/messages"),
                json!({"content": [{"type": "text", "text": "go"}]}),
            )
            .await?;
        let events = self
            .events(sent["execution_id"].as_str().context("no execution")?)
            .await?;
        let last = events.last().cloned().unwrap_or_default();
        ensure!(
            last["outcome"] == "completed",
            "a Turn did not complete: {last}"
        );
        Ok(events)
    }
}

/// Median and 90th percentile of `samples` (ms).
fn summary(samples: &mut [f64]) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.9))
}

async fn timed<F, Fut>(repeats: usize, mut case: F) -> anyhow::Result<Vec<f64>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<f64>>,
{
    for _ in 0..3 {
        case().await?;
    }
    let mut samples = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        samples.push(case().await?);
    }
    Ok(samples)
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// A local endpoint standing for the tool: answers each call at once.
async fn endpoint() -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let app = axum::Router::new().route("/act", axum::routing::post(|| async { "done" }));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(address)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let served = Served::start(&args.openbot, args.database_url.as_deref())?;
    let api = Api {
        http: reqwest::Client::new(),
        base: served.api.clone(),
        token: served.token.clone(),
    };
    let address = endpoint().await?;
    let url = format!("http://{address}/act");
    let dir = served.data.path();
    let write = |name: &str, script: Value| -> anyhow::Result<PathBuf> {
        let path = dir.join(name);
        std::fs::write(&path, json!({"steps": script, "repeat": true}).to_string())?;
        Ok(path)
    };
    let call = |tool: &str| json!({"tool_calls": [{"name": tool, "arguments": {"task": "go"}}]});
    let single = write("single.json", json!([{"text": "ok"}]))?;
    let inline = write("inline.json", json!([call("act"), {"text": "done"}]))?;
    let asking = write("asking.json", json!([call("pay"), {"text": "asked"}]))?;
    let parent = write(
        "parent.json",
        json!([call("helper"), {"text": "waiting"}, {"text": "done"}]),
    )?;
    for tool in ["act", "pay"] {
        api.put(
            &format!("/v1/tools/{tool}"),
            json!({"input_schema": {"type": "object"}, "url": url}),
        )
        .await?;
    }
    api.post(
        "/v1/approval-rules",
        json!({"tool": "pay", "action": "ask"}),
    )
    .await?;
    let single_bot = api.bot("Single", &single, &[]).await?;
    let inline_bot = api.bot("Inline", &inline, &["act"]).await?;
    let asking_bot = api.bot("Asking", &asking, &["pay"]).await?;
    let child_bot = api.bot("Child", &single, &[]).await?;
    api.put("/v1/delegates/helper", json!({"bot_id": child_bot["id"]}))
        .await?;
    let parent_bot = api.bot("Parent", &parent, &["helper"]).await?;

    let mut single_ms = timed(args.repeats, || async {
        let started = Instant::now();
        api.turn(&single_bot).await?;
        Ok(ms(started))
    })
    .await?;
    let mut inline_ms = timed(args.repeats, || async {
        let started = Instant::now();
        api.turn(&inline_bot).await?;
        Ok(ms(started))
    })
    .await?;
    let mut approval_ms = timed(args.repeats, || async {
        let events = api.turn(&asking_bot).await?;
        let request = events
            .iter()
            .find(|e| e["type"] == "approval_requested")
            .and_then(|e| e["request_id"].as_str())
            .context("no approval request")?
            .to_string();
        let job = events
            .iter()
            .find(|e| e["type"] == "child_started")
            .and_then(|e| e["child_id"].as_str())
            .context("no child")?
            .to_string();
        let started = Instant::now();
        api.post(
            &format!("/v1/approvals/{request}/decision"),
            json!({"decision": "approve"}),
        )
        .await?;
        let job_events = api.events(&job).await?;
        let elapsed = ms(started);
        let last = job_events.last().cloned().unwrap_or_default();
        ensure!(
            last["state"] == "completed",
            "the approved call did not complete: {last}"
        );
        Ok(elapsed)
    })
    .await?;
    let round_trips = std::sync::Mutex::new(Vec::new());
    let mut delegated_ms = timed(args.repeats, || async {
        let started = Instant::now();
        let events = api.turn(&parent_bot).await?;
        let elapsed = ms(started);
        // Parent to child and back, on the server's clock: from the commit that started the
        // child to the commit that gave the parent the child's answer.
        let at = |kind: &str| -> anyhow::Result<chrono::DateTime<chrono::Utc>> {
            let event = events
                .iter()
                .find(|e| e["type"] == kind)
                .with_context(|| format!("no {kind} event"))?;
            Ok(event["at"].as_str().context("no time")?.parse()?)
        };
        let trip = at("input_steered")? - at("child_started")?;
        round_trips
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .push(trip.num_microseconds().unwrap_or_default() as f64 / 1000.0);
        Ok(elapsed)
    })
    .await?;
    // The warm-up Turns' round trips are not counted.
    let mut round_trips = round_trips
        .into_inner()
        .map_err(|_| anyhow::anyhow!("poisoned"))?;
    let mut round_trips = round_trips.split_off(round_trips.len() - args.repeats);

    let backend = if args.database_url.is_some() {
        "postgres"
    } else {
        "sqlite"
    };
    let (single_p50, single_p90) = summary(&mut single_ms);
    let (inline_p50, inline_p90) = summary(&mut inline_ms);
    let (approval_p50, approval_p90) = summary(&mut approval_ms);
    let (delegated_p50, delegated_p90) = summary(&mut delegated_ms);
    let (trip_p50, trip_p90) = summary(&mut round_trips);
    let tool_call = inline_p50 - single_p50;
    println!(
        "work ({backend}, {} repeats each, medians with p90): single-step Turn {single_p50:.1} ms ({single_p90:.1}); \
         inline tool Turn {inline_p50:.1} ms ({inline_p90:.1}), so an inline tool call ~{tool_call:.1} ms",
        args.repeats
    );
    println!(
        "work ({backend}): approval round trip (decision -> approved call's job ended, seen by a reader) \
         {approval_p50:.1} ms ({approval_p90:.1}); {:.1}x an inline tool call",
        approval_p50 / tool_call.max(0.001)
    );
    println!(
        "work ({backend}): delegation round trip (child started -> its answer given to the waiting parent) \
         {trip_p50:.1} ms ({trip_p90:.1}), {:.2}x a single-step Turn over HTTP; whole delegated Turn \
         {delegated_p50:.1} ms ({delegated_p90:.1})",
        trip_p50 / single_p50
    );
    println!(
        "{}",
        json!({"benchmark": "work_overhead", "backend": backend, "repeats": args.repeats,
               "single_turn_ms": single_p50, "inline_tool_turn_ms": inline_p50, "inline_tool_call_ms": tool_call,
               "approval_round_trip_ms": approval_p50, "approval_round_trip_p90_ms": approval_p90,
               "delegated_turn_ms": delegated_p50, "delegation_round_trip_ms": trip_p50,
               "delegation_round_trip_p90_ms": trip_p90})
    );
    Ok(())
}
