//! `turn-latency`: the latency of one Turn over HTTP with one client, and where its time goes.
//!
//! Starts a real `openbot serve` (release build) on a fresh SQLite data folder or PostgreSQL
//! database, with a scripted model that answers each message with one text step, and runs
//! Turns one after the other from one client: `POST /v1/chats/{id}/messages`, then long polls
//! of `GET /v1/executions/{id}/events?after=..&wait=30` until the page that ends it. A Turn's
//! latency is from sending the message to receiving that page. Before each Turn the client
//! does one `GET /v1/health`, the baseline: a round trip through the same client, connection
//! and server that touches no database.
//!
//! It runs twice, each time on a new server: with trace export off (the figures), then with
//! the server exporting its spans at `debug` to an OTLP/HTTP receiver in this program
//! (docs/observability.md): each request's `request` span, each Turn's `submit` span, the
//! runner's `claim` spans, its `execution` span and `commit` spans, and the observers' `woke`
//! events, with wall-clock start and end times. Client and server share the machine's clock,
//! so each Turn's time splits exactly along its critical path (see [`Split`]). The last line
//! of the output is one JSON object with all figures; it prints and never asserts.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use clap::Parser;
use serde_json::{Value, json};

#[path = "common/served.rs"]
mod served;
use served::Served;
#[path = "../../../server/tests/support/otlp.rs"]
mod otlp;
use otlp::{Received, Receiver};

/// The latency of one Turn over HTTP, and its split.
#[derive(Debug, Parser)]
#[command(name = "turn-latency")]
struct Args {
    /// The `openbot` binary (a release build).
    #[arg(long, default_value = "openbot")]
    openbot: PathBuf,
    /// A PostgreSQL database URL (already created, empty); SQLite in a new folder when absent.
    /// The run with traces on gets a second database next to it, `<name>_timed`, which it
    /// creates.
    #[arg(long)]
    database_url: Option<String>,
    /// Measured Turns per run.
    #[arg(long, default_value_t = 500)]
    turns: usize,
    /// Turns before measuring, per run.
    #[arg(long, default_value_t = 50)]
    warmup: usize,
    /// Turns per Chat: a new Chat after this many, so history stays short.
    #[arg(long, default_value_t = 10)]
    turns_per_chat: usize,
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// One request as the client saw it.
#[derive(Debug, Clone)]
struct Sent {
    method: &'static str,
    /// The route's template, as the server's `request` span names it.
    route: &'static str,
    start: u64,
    end: u64,
}

/// One measured Turn as the client saw it.
#[derive(Debug, Clone)]
struct TurnRecord {
    execution: String,
    chat: String,
    requests: Vec<Sent>,
}

impl TurnRecord {
    fn start(&self) -> u64 {
        self.requests.first().map_or(0, |r| r.start)
    }
    fn end(&self) -> u64 {
        self.requests.last().map_or(0, |r| r.end)
    }
    fn ms(&self) -> f64 {
        (self.end() - self.start()) as f64 / 1000.0
    }
}

struct Client {
    http: reqwest::Client,
    api: String,
    token: String,
}

impl Client {
    async fn send(
        &self,
        method: &'static str,
        route: &'static str,
        path: String,
        body: Option<Value>,
    ) -> anyhow::Result<(Value, Sent)> {
        let url = format!("{}{path}", self.api);
        let start = now_us();
        let request = match method {
            "POST" => self.http.post(url),
            _ => self.http.get(url),
        };
        let request = request.bearer_auth(&self.token);
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        let value: Value = request.send().await?.error_for_status()?.json().await?;
        let end = now_us();
        Ok((
            value,
            Sent {
                method,
                route,
                start,
                end,
            },
        ))
    }

    async fn turn(&self, chat: &str) -> anyhow::Result<TurnRecord> {
        let (sent, post) = self
            .send(
                "POST",
                "/v1/chats/{id}/messages",
                format!("/v1/chats/{chat}/messages"),
                Some(json!({"content": [{"type": "text", "text": "hi"}]})),
            )
            .await?;
        let execution = sent["execution_id"]
            .as_str()
            .context("no execution")?
            .to_string();
        let mut requests = vec![post];
        let mut after = 0;
        loop {
            let (page, poll) = self
                .send(
                    "GET",
                    "/v1/executions/{id}/events",
                    format!("/v1/executions/{execution}/events?after={after}&wait=30"),
                    None,
                )
                .await?;
            requests.push(poll);
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
                return Ok(TurnRecord {
                    execution,
                    chat: chat.to_string(),
                    requests,
                });
            }
        }
    }

    async fn chat(&self, bot: &str) -> anyhow::Result<String> {
        let (chat, _) = self
            .send(
                "POST",
                "/v1/chats",
                "/v1/chats".into(),
                Some(json!({"bot_id": bot})),
            )
            .await?;
        Ok(chat["id"].as_str().context("no chat id")?.to_string())
    }
}

/// What one run measured.
struct Run {
    turns: Vec<TurnRecord>,
    health_ms: Vec<f64>,
    /// The spans the server exported (none with traces off).
    spans: Vec<Received>,
}

async fn run(args: &Args, database_url: Option<&str>, traced: bool) -> anyhow::Result<Run> {
    let receiver = match traced {
        true => Some(Receiver::start().await),
        false => None,
    };
    let served = Served::start_with(
        &args.openbot,
        database_url,
        receiver.as_ref().map(|r| r.base.as_str()),
    )?;
    let script = served.data.path().join("answer.json");
    std::fs::write(&script, r#"{"steps": [{"text": "ok"}], "repeat": true}"#)?;
    let client = Client {
        http: reqwest::Client::builder().tcp_nodelay(true).build()?,
        api: served.api.clone(),
        token: served.token.clone(),
    };
    let (bot, _) = client
        .send(
            "POST",
            "/v1/bots",
            "/v1/bots".into(),
            Some(json!({"name": "Bench", "model": format!("scripted:{}", script.display())})),
        )
        .await?;
    let bot = bot["id"].as_str().context("no bot id")?.to_string();
    let per_chat = args.turns_per_chat.max(1);
    let mut chat = String::new();
    let mut turns = Vec::with_capacity(args.turns);
    let mut health_ms = Vec::with_capacity(args.turns);
    for i in 0..args.warmup + args.turns {
        if i % per_chat == 0 {
            chat = client.chat(&bot).await?;
        }
        let (_, health) = client
            .send("GET", "/v1/health", "/v1/health".into(), None)
            .await?;
        let turn = client.turn(&chat).await?;
        if i >= args.warmup {
            health_ms.push((health.end - health.start) as f64 / 1000.0);
            turns.push(turn);
        }
    }
    // Let the last spans reach the receiver: until none came for half a second.
    let spans = match receiver {
        Some(receiver) => {
            let mut seen = 0;
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let now = receiver.spans().len();
                if now == seen {
                    break receiver.spans();
                }
                seen = now;
            }
        }
        None => Vec::new(),
    };
    Ok(Run {
        turns,
        health_ms,
        spans,
    })
}

/// One span (or event: start = end) of the server, in wall-clock µs.
#[derive(Debug, Clone, Copy)]
struct Part {
    start: u64,
    end: u64,
}

impl Part {
    fn of(span: &Received) -> Self {
        Self {
            start: span.start_ns / 1000,
            end: span.end_ns / 1000,
        }
    }
}

/// The parts of one Turn's time along its critical path, in ms; they add up to its latency.
///
/// From the client sending the message: `http_in` (to the router), `before_submit` (the send's
/// checks and reads), `submit` (its commit), `claim_wait` (from that commit to the runner's
/// claim starting, or to the Turn's handoff to the runner when its send claimed it), `claim`
/// (the claim's transaction; none when the send claimed the Turn), `phase_start` (the claimed Turn's reads
/// before its first commit), `step_commits` (the Turn's commits, the end's included),
/// `between_commits` (the engine's work between them: the model, checks and reads), then from
/// the end's commit: `wake` (to the waiting long poll's wake-up), `answer` (from that wake-up,
/// or from the end's commit when the poll read it without waiting, to its response being
/// ready), `http_out` (to the client having read it), `catch_up` (when the client's last poll
/// arrived only after the end's commit: the time until it arrived).
#[derive(Debug, Default, Clone, Copy)]
struct Split {
    http_in: f64,
    before_submit: f64,
    submit: f64,
    claim_wait: f64,
    claim: f64,
    phase_start: f64,
    step_commits: f64,
    between_commits: f64,
    wake: f64,
    answer: f64,
    http_out: f64,
    catch_up: f64,
    /// Not on the path: each request's round trip minus its time in the router, summed.
    http_all: f64,
    /// Not on the path: the Turn's step commits.
    commits: f64,
    /// Not on the path: how many long polls the Turn took.
    polls: f64,
}

impl Split {
    const PARTS: [&'static str; 12] = [
        "http_in",
        "before_submit",
        "submit",
        "claim_wait",
        "claim",
        "phase_start",
        "step_commits",
        "between_commits",
        "wake",
        "answer",
        "http_out",
        "catch_up",
    ];

    fn get(&self, name: &str) -> f64 {
        match name {
            "http_in" => self.http_in,
            "before_submit" => self.before_submit,
            "submit" => self.submit,
            "claim_wait" => self.claim_wait,
            "claim" => self.claim,
            "phase_start" => self.phase_start,
            "step_commits" => self.step_commits,
            "between_commits" => self.between_commits,
            "wake" => self.wake,
            "answer" => self.answer,
            "http_out" => self.http_out,
            "catch_up" => self.catch_up,
            "http_all" => self.http_all,
            "commits" => self.commits,
            "polls" => self.polls,
            _ => f64::NAN,
        }
    }

    fn sum(&self) -> f64 {
        Self::PARTS.iter().map(|p| self.get(p)).sum()
    }

    /// The four headline groups: commits, claim and wake-up, HTTP, the rest.
    fn groups(&self) -> [(&'static str, f64); 4] {
        [
            ("commits", self.submit + self.claim + self.step_commits),
            ("claim and wake-up", self.claim_wait + self.wake),
            ("HTTP", self.http_in + self.http_out + self.catch_up),
            (
                "rest",
                self.before_submit + self.phase_start + self.between_commits + self.answer,
            ),
        ]
    }
}

fn ms(us: i64) -> f64 {
    us as f64 / 1000.0
}

/// The server's spans: requests by method and route; and by execution, its submit, its claim
/// (or handoff), its commits and the observers' wake-ups for it.
struct Timeline {
    requests: HashMap<(String, String), Vec<Part>>,
    executions: HashMap<String, Execution>,
}

/// What the server did for one execution.
#[derive(Debug, Default)]
struct Execution {
    submit: Option<Part>,
    /// The runner's claim that took it, or (a send that claimed it) the handoff: the point its
    /// `execution` span started.
    claim: Option<Part>,
    commits: Vec<Part>,
    woke: Vec<u64>,
}

impl Timeline {
    fn new(spans: &[Received]) -> anyhow::Result<Self> {
        let mut requests: HashMap<(String, String), Vec<Part>> = HashMap::new();
        let mut executions: HashMap<String, Execution> = HashMap::new();
        let claims: HashMap<&[u8], Part> = spans
            .iter()
            .filter(|s| s.name == "claim")
            .map(|s| (s.span_id.as_slice(), Part::of(s)))
            .collect();
        // An execution's spans are in the trace whose ID is its UUID.
        let mut by_trace: HashMap<&[u8], &str> = HashMap::new();
        for span in spans {
            if let Some(execution) = span.attribute("execution")
                && span.name.starts_with("execution ")
            {
                by_trace.insert(span.trace_id.as_slice(), execution);
                let claim = span
                    .linked_spans
                    .iter()
                    .find_map(|id| claims.get(id.as_slice()).copied())
                    .unwrap_or(Part {
                        start: span.start_ns / 1000,
                        end: span.start_ns / 1000,
                    });
                executions.entry(execution.to_string()).or_default().claim = Some(claim);
            }
        }
        for span in spans {
            match span.name.as_str() {
                "submit" => {
                    let execution = span
                        .attribute("execution")
                        .context("a submit names its execution")?;
                    executions.entry(execution.to_string()).or_default().submit =
                        Some(Part::of(span));
                }
                "commit" => {
                    if let Some(execution) = by_trace.get(span.trace_id.as_slice()) {
                        executions
                            .entry(execution.to_string())
                            .or_default()
                            .commits
                            .push(Part::of(span));
                    }
                }
                _ => {}
            }
            if let (Some(method), Some(route)) = (
                span.attribute("http.request.method"),
                span.attribute("http.route"),
            ) {
                requests
                    .entry((method.to_string(), route.to_string()))
                    .or_default()
                    .push(Part::of(span));
            }
            for (name, at, attributes) in &span.events {
                if name == "woke"
                    && let Some(execution) = attributes.get("execution")
                {
                    executions
                        .entry(execution.clone())
                        .or_default()
                        .woke
                        .push(at / 1000);
                }
            }
        }
        Ok(Self {
            requests,
            executions,
        })
    }

    /// The server's span of a client's request: same method and route, inside its round trip.
    fn request(&self, sent: &Sent) -> anyhow::Result<Part> {
        self.requests
            .get(&(sent.method.to_string(), sent.route.to_string()))
            .and_then(|parts| {
                parts
                    .iter()
                    .find(|p| p.start >= sent.start && p.end <= sent.end)
                    .copied()
            })
            .with_context(|| format!("no server span for {} {}", sent.method, sent.route))
    }

    fn split(&self, turn: &TurnRecord) -> anyhow::Result<Split> {
        let spans = self
            .executions
            .get(&turn.execution)
            .with_context(|| format!("no spans of execution {}", turn.execution))?;
        let submit = spans
            .submit
            .with_context(|| format!("no submit of execution {}", turn.execution))?;
        let claim = spans
            .claim
            .with_context(|| format!("no execution span of {}", turn.execution))?;
        let (start, end) = (turn.start(), turn.end());
        let mut commits: Vec<Part> = spans
            .commits
            .iter()
            .filter(|c| c.end <= end)
            .copied()
            .collect();
        commits.sort_by_key(|c| c.start);
        let (Some(first), Some(last)) = (commits.first().copied(), commits.last().copied()) else {
            bail!("no commits of execution {}", turn.execution);
        };
        let post = turn.requests.first().context("no send")?;
        let post_server = self.request(post)?;
        let poll = turn.requests.last().context("no poll")?;
        let poll_server = self.request(poll)?;
        let d = |a: u64, b: u64| ms(b as i64 - a as i64);

        let step_commits: f64 = commits.iter().map(|c| d(c.start, c.end)).sum();
        let mut split = Split {
            http_in: d(start, post_server.start),
            before_submit: d(post_server.start, submit.start),
            submit: d(submit.start, submit.end),
            claim_wait: d(submit.end, claim.start),
            claim: d(claim.start, claim.end),
            phase_start: d(claim.end, first.start),
            step_commits,
            between_commits: d(first.start, last.end) - step_commits,
            http_out: d(poll_server.end, end),
            commits: commits.len() as f64,
            polls: (turn.requests.len() - 1) as f64,
            ..Split::default()
        };
        if poll_server.start <= last.end {
            // The last poll was in the server when the end committed: it waited for it, or
            // read it without waiting (the end committed before its read).
            let woke = spans
                .woke
                .iter()
                .copied()
                .filter(|at| *at >= last.end && *at <= poll_server.end)
                .min();
            match woke {
                Some(woke) => {
                    split.wake = d(last.end, woke);
                    split.answer = d(woke, poll_server.end);
                }
                None => split.answer = d(last.end, poll_server.end),
            }
        } else {
            split.catch_up = d(last.end, poll_server.start);
            split.answer = d(poll_server.start, poll_server.end);
        }
        for sent in &turn.requests {
            let server = self.request(sent)?;
            split.http_all += d(sent.start, sent.end) - d(server.start, server.end);
        }
        Ok(split)
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn sorted(values: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.into_iter().collect();
    v.sort_by(f64::total_cmp);
    v
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

fn summary(values: &[f64]) -> Value {
    let s = sorted(values.iter().copied());
    json!({"p50": percentile(&s, 50.0), "p90": percentile(&s, 90.0), "p99": percentile(&s, 99.0),
           "mean": mean(&s), "max": s.last().copied().unwrap_or(f64::NAN)})
}

fn mean_split(splits: &[&Split]) -> Split {
    let n = splits.len().max(1) as f64;
    let avg = |f: fn(&Split) -> f64| splits.iter().map(|s| f(s)).sum::<f64>() / n;
    Split {
        http_in: avg(|s| s.http_in),
        before_submit: avg(|s| s.before_submit),
        submit: avg(|s| s.submit),
        claim_wait: avg(|s| s.claim_wait),
        claim: avg(|s| s.claim),
        phase_start: avg(|s| s.phase_start),
        step_commits: avg(|s| s.step_commits),
        between_commits: avg(|s| s.between_commits),
        wake: avg(|s| s.wake),
        answer: avg(|s| s.answer),
        http_out: avg(|s| s.http_out),
        catch_up: avg(|s| s.catch_up),
        http_all: avg(|s| s.http_all),
        commits: avg(|s| s.commits),
        polls: avg(|s| s.polls),
    }
}

fn split_json(split: &Split) -> Value {
    let mut parts: serde_json::Map<String, Value> = Split::PARTS
        .iter()
        .map(|p| (p.to_string(), json!(split.get(p))))
        .collect();
    for (name, value) in split.groups() {
        parts.insert(format!("group {name}"), json!(value));
    }
    for extra in ["http_all", "commits", "polls"] {
        parts.insert(extra.to_string(), json!(split.get(extra)));
    }
    Value::Object(parts)
}

fn print_split(label: &str, split: &Split) {
    let total = split.sum();
    println!("  {label}: {total:.2} ms on the path");
    let groups: Vec<String> = split
        .groups()
        .iter()
        .map(|(name, v)| format!("{name} {v:.2} ms ({:.0} %)", 100.0 * v / total))
        .collect();
    println!("    {}", groups.join(", "));
    let parts: Vec<String> = Split::PARTS
        .iter()
        .map(|p| format!("{p} {:.2}", split.get(p)))
        .collect();
    println!("    {}", parts.join(", "));
    println!(
        "    not on the path: HTTP round trips minus server time {:.2} ms over {:.1} polls + the send; {:.1} step commits",
        split.http_all, split.polls, split.commits
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let backend = if args.database_url.is_some() {
        "postgres"
    } else {
        "sqlite"
    };
    let timed_url = match &args.database_url {
        Some(url) => {
            let (server, name) = url
                .rsplit_once('/')
                .context("a database URL ends in /name")?;
            let timed = format!("{name}_timed");
            use sqlx::Connection;
            let mut admin = sqlx::PgConnection::connect(url).await?;
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {timed}"
            )))
            .execute(&mut admin)
            .await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {timed}")))
                .execute(&mut admin)
                .await?;
            Some(format!("{server}/{timed}"))
        }
        None => None,
    };

    let plain = run(&args, args.database_url.as_deref(), false).await?;
    let timed = run(&args, timed_url.as_deref(), true).await?;

    let mut report = serde_json::Map::new();
    report.insert("benchmark".into(), json!("turn_latency"));
    report.insert("backend".into(), json!(backend));
    report.insert("turns".into(), json!(args.turns));
    for (name, run) in [("traces_off", &plain), ("traces_on", &timed)] {
        let latency: Vec<f64> = run.turns.iter().map(TurnRecord::ms).collect();
        let turn = summary(&latency);
        let health = summary(&run.health_ms);
        let ratio =
            turn["p50"].as_f64().unwrap_or(f64::NAN) / health["p50"].as_f64().unwrap_or(f64::NAN);
        println!(
            "turn-latency ({backend}, trace export {}): {} Turns: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, mean {:.2} ms, max {:.2} ms; \
             GET /v1/health p50 {:.3} ms, p99 {:.3} ms; Turn p50 / health p50 = {ratio:.1}x",
            &name[7..],
            latency.len(),
            turn["p50"].as_f64().unwrap_or_default(),
            turn["p90"].as_f64().unwrap_or_default(),
            turn["p99"].as_f64().unwrap_or_default(),
            turn["mean"].as_f64().unwrap_or_default(),
            turn["max"].as_f64().unwrap_or_default(),
            health["p50"].as_f64().unwrap_or_default(),
            health["p99"].as_f64().unwrap_or_default(),
        );
        report.insert(
            name.into(),
            json!({"turn_ms": turn, "health_ms": health, "ratio_p50": ratio}),
        );
    }

    let timeline = Timeline::new(&timed.spans)?;
    let mut splits = Vec::new();
    for turn in &timed.turns {
        splits.push((turn.ms(), timeline.split(turn)?));
    }
    let chats: std::collections::HashSet<&str> =
        timed.turns.iter().map(|t| t.chat.as_str()).collect();
    println!(
        "split of the run with traces on ({} Turns in {} Chats; ms, mean per Turn):",
        splits.len(),
        chats.len()
    );
    let all: Vec<&Split> = splits.iter().map(|(_, s)| s).collect();
    let worst: f64 = splits
        .iter()
        .map(|(ms, s)| (ms - s.sum()).abs())
        .fold(0.0, f64::max);
    let mean_all = mean_split(&all);
    print_split("all Turns", &mean_all);
    let p90 = percentile(&sorted(splits.iter().map(|(ms, _)| *ms)), 90.0);
    let slow: Vec<&Split> = splits
        .iter()
        .filter(|(ms, _)| *ms >= p90)
        .map(|(_, s)| s)
        .collect();
    let mean_slow = mean_split(&slow);
    print_split(&format!("the slowest 10 % (>= {p90:.2} ms)"), &mean_slow);
    println!("  (parts and latency differ by at most {worst:.3} ms in any Turn)");
    report.insert(
        "split_ms".into(),
        json!({"all": split_json(&mean_all), "slowest_10_percent": split_json(&mean_slow)}),
    );
    println!("{}", Value::Object(report));
    Ok(())
}
