//! The node's Prometheus metrics, in the Prometheus text format (0.0.4), served on `/metrics`
//! to the platform operator (docs/observability.md has the catalogue).
//!
//! They are counted where they happen, beside the span of the same thing (a claim, a phase, a
//! commit, a request; the agent loop's model calls through [`LoopMetrics`]), not read from the
//! spans: a node that exports no traces then enables no span at all, and pays for no span
//! (docs/benchmarks.md, "The cost of tracing"). The rest are read at scrape time (executions by
//! kind and state, the database pools).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::Duration;

/// The label pairs of one series, in a fixed order.
type Labels = Vec<(&'static str, String)>;

/// A family of counters.
struct Counter {
    name: &'static str,
    help: &'static str,
    series: Mutex<BTreeMap<Labels, f64>>,
}

impl Counter {
    const fn new(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            help,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    fn add(&self, labels: Labels, by: f64) {
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        *series.entry(labels).or_default() += by;
    }

    fn encode(&self, out: &mut String) {
        let series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        header(out, self.name, self.help, "counter");
        for (labels, value) in series.iter() {
            sample(out, self.name, labels, None, *value);
        }
    }
}

#[derive(Default)]
struct Buckets {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

/// A family of histograms with fixed bucket bounds.
struct Histogram {
    name: &'static str,
    help: &'static str,
    bounds: &'static [f64],
    series: Mutex<BTreeMap<Labels, Buckets>>,
}

impl Histogram {
    const fn new(name: &'static str, help: &'static str, bounds: &'static [f64]) -> Self {
        Self {
            name,
            help,
            bounds,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    fn observe(&self, labels: Labels, value: f64) {
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        let buckets = series.entry(labels).or_default();
        if buckets.counts.is_empty() {
            buckets.counts = vec![0; self.bounds.len()];
        }
        for (bound, count) in self.bounds.iter().zip(buckets.counts.iter_mut()) {
            if value <= *bound {
                *count += 1;
            }
        }
        buckets.sum += value;
        buckets.count += 1;
    }

    fn encode(&self, out: &mut String) {
        let series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        header(out, self.name, self.help, "histogram");
        let bucket = format!("{}_bucket", self.name);
        for (labels, buckets) in series.iter() {
            for (bound, count) in self.bounds.iter().zip(&buckets.counts) {
                let le = bound.to_string();
                sample(out, &bucket, labels, Some(le.as_str()), *count as f64);
            }
            sample(out, &bucket, labels, Some("+Inf"), buckets.count as f64);
            sample(
                out,
                &format!("{}_sum", self.name),
                labels,
                None,
                buckets.sum,
            );
            sample(
                out,
                &format!("{}_count", self.name),
                labels,
                None,
                buckets.count as f64,
            );
        }
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn sample(out: &mut String, name: &str, labels: &Labels, le: Option<&str>, value: f64) {
    out.push_str(name);
    if !labels.is_empty() || le.is_some() {
        out.push('{');
        let mut first = true;
        for (key, value) in labels
            .iter()
            .map(|(k, v)| (*k, escape(v)))
            .chain(le.map(|le| ("le", le.to_string())))
        {
            if !first {
                out.push(',');
            }
            first = false;
            let _ = write!(out, "{key}=\"{value}\"");
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// Seconds, from a millisecond to a few minutes.
const SECONDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];
/// The GenAI conventions' advised bounds for `gen_ai.client.operation.duration`.
const GENAI_SECONDS: &[f64] = &[
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
/// The GenAI conventions' advised bounds for `gen_ai.client.token.usage`.
const GENAI_TOKENS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

/// Every metric a node keeps in memory.
struct Metrics {
    claimed: Counter,
    takeovers: Counter,
    claim_lag: Histogram,
    phase: Histogram,
    commit: Histogram,
    requests: Counter,
    request_duration: Histogram,
    outbound: Counter,
    permit_waits: Counter,
    tokens: Counter,
    cost: Counter,
    token_usage: Histogram,
    operation_duration: Histogram,
    observers: AtomicI64,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| Metrics {
    claimed: Counter::new(
        "openbot_executions_claimed_total",
        "Executions this node claimed, by workflow kind (takeovers included).",
    ),
    takeovers: Counter::new(
        "openbot_takeovers_total",
        "Claims of an execution another owner had run before (generation above 1), by kind.",
    ),
    claim_lag: Histogram::new(
        "openbot_claim_lag_seconds",
        "Time from an execution being due (its wake time, or its creation) to its claim.",
        SECONDS,
    ),
    phase: Histogram::new(
        "openbot_phase_duration_seconds",
        "Duration of one phase (step) of an execution on this node, by kind.",
        SECONDS,
    ),
    commit: Histogram::new(
        "openbot_commit_duration_seconds",
        "Duration of one commit of an execution's step to the database.",
        SECONDS,
    ),
    requests: Counter::new(
        "openbot_http_requests_total",
        "HTTP requests answered, by method, matched route and status.",
    ),
    request_duration: Histogram::new(
        "openbot_http_request_duration_seconds",
        "Time to an HTTP response's head, by method and matched route.",
        SECONDS,
    ),
    outbound: Counter::new(
        "openbot_outbound_calls_total",
        "Outside calls by outcome: result (saved), unknown (maybe sent, result lost), refused (by the outbound policy).",
    ),
    permit_waits: Counter::new(
        "openbot_permit_waits_total",
        "Times work waited for room in a concurrency or rate limit.",
    ),
    tokens: Counter::new(
        "openbot_model_tokens_total",
        "Model tokens reported by providers, by provider and type (input, output).",
    ),
    cost: Counter::new(
        "openbot_model_cost_usd_total",
        "Cost of model calls in US dollars at known prices, by provider.",
    ),
    token_usage: Histogram::new(
        "gen_ai_client_token_usage",
        "Tokens per model request (gen_ai.client.token.usage), by operation, provider and token type.",
        GENAI_TOKENS,
    ),
    operation_duration: Histogram::new(
        "gen_ai_client_operation_duration_seconds",
        "Duration of a model request (gen_ai.client.operation.duration), by operation and provider.",
        GENAI_SECONDS,
    ),
    observers: AtomicI64::new(0),
});

/// One reader following an execution's events (an SSE stream or a long poll), counted in
/// `openbot_observers_open` from its creation until it is dropped.
#[derive(Debug)]
pub struct ObserverOpen(());

impl ObserverOpen {
    /// Counts one more reader.
    pub fn open() -> Self {
        METRICS.observers.fetch_add(1, Ordering::Relaxed);
        Self(())
    }
}

impl Drop for ObserverOpen {
    fn drop(&mut self) {
        METRICS.observers.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How an outside call ended, for `openbot_outbound_calls_total`.
#[derive(Debug, Clone, Copy)]
pub enum OutboundOutcome {
    /// Its result was saved.
    Result,
    /// It may have been sent and its result was lost.
    Unknown,
    /// The outbound policy refused it.
    Refused,
}

/// Counts an outside call's end.
pub fn outbound(outcome: OutboundOutcome) {
    let outcome = match outcome {
        OutboundOutcome::Result => "result",
        OutboundOutcome::Unknown => "unknown",
        OutboundOutcome::Refused => "refused",
    };
    METRICS
        .outbound
        .add(vec![("outcome", outcome.to_string())], 1.0);
}

/// The outside calls a commit ends: saved results and `unknown`s, counted once it landed.
#[derive(Debug, Clone, Copy)]
pub struct CallsEnded {
    results: u32,
    unknown: u32,
}

impl CallsEnded {
    /// The calls of `calls` that end: `done` or `unknown`.
    pub fn of(calls: &[crate::store::CallWrite]) -> Self {
        use crate::store::CallPhase;
        let count = |phase| calls.iter().filter(|call| call.phase == phase).count() as u32;
        Self {
            results: count(CallPhase::Done),
            unknown: count(CallPhase::Unknown),
        }
    }

    /// Adds them to `openbot_outbound_calls_total`.
    pub fn count(self) {
        for (outcome, n) in [("result", self.results), ("unknown", self.unknown)] {
            if n > 0 {
                METRICS
                    .outbound
                    .add(vec![("outcome", outcome.to_string())], f64::from(n));
            }
        }
    }
}

/// Counts a wait for room in a limit.
pub fn permit_wait() {
    METRICS.permit_waits.add(Vec::new(), 1.0);
}

/// What is read at scrape time, from the node and its database.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Executions by (kind, state), across the cluster.
    pub executions: Vec<(String, String, i64)>,
    /// Executions this node runs now.
    pub running: usize,
    /// Executions this node runs at most at once.
    pub capacity: usize,
    /// Database pools: (pool, open connections, idle connections).
    pub pools: Vec<(&'static str, u32, u32)>,
}

/// The whole exposition: the node's metrics and `snapshot`, in the Prometheus text format.
pub fn render(snapshot: &Snapshot) -> String {
    let m = &*METRICS;
    let mut out = String::new();
    header(
        &mut out,
        "openbot_executions",
        "Executions in the database by workflow kind and state (queued ones are the cluster's queue).",
        "gauge",
    );
    for (kind, state, count) in &snapshot.executions {
        let labels = vec![("kind", kind.clone()), ("state", state.clone())];
        sample(&mut out, "openbot_executions", &labels, None, *count as f64);
    }
    header(
        &mut out,
        "openbot_node_executions_running",
        "Executions this node runs now.",
        "gauge",
    );
    sample(
        &mut out,
        "openbot_node_executions_running",
        &Vec::new(),
        None,
        snapshot.running as f64,
    );
    header(
        &mut out,
        "openbot_node_executions_capacity",
        "Executions this node runs at most at once; with running, how full it is (nodes pull from the cluster's queue, so a full node is a node that claims nothing more).",
        "gauge",
    );
    sample(
        &mut out,
        "openbot_node_executions_capacity",
        &Vec::new(),
        None,
        snapshot.capacity as f64,
    );
    header(
        &mut out,
        "openbot_observers_open",
        "Readers following an execution's events on this node (SSE streams and long polls).",
        "gauge",
    );
    sample(
        &mut out,
        "openbot_observers_open",
        &Vec::new(),
        None,
        m.observers.load(Ordering::Relaxed) as f64,
    );
    header(
        &mut out,
        "openbot_db_pool_connections",
        "Database connections of this node by pool and state (idle, in use).",
        "gauge",
    );
    for (pool, size, idle) in &snapshot.pools {
        for (state, value) in [("idle", *idle), ("in_use", size.saturating_sub(*idle))] {
            let labels = vec![("pool", (*pool).to_string()), ("state", state.to_string())];
            sample(
                &mut out,
                "openbot_db_pool_connections",
                &labels,
                None,
                value as f64,
            );
        }
    }
    m.claimed.encode(&mut out);
    m.takeovers.encode(&mut out);
    m.claim_lag.encode(&mut out);
    m.phase.encode(&mut out);
    m.commit.encode(&mut out);
    m.requests.encode(&mut out);
    m.request_duration.encode(&mut out);
    m.outbound.encode(&mut out);
    m.permit_waits.encode(&mut out);
    m.tokens.encode(&mut out);
    m.cost.encode(&mut out);
    m.token_usage.encode(&mut out);
    m.operation_duration.encode(&mut out);
    out
}

/// Counts a claim of an execution of `kind` as owner `generation`, `lag` after it was due
/// (when known).
pub fn claimed(kind: &str, generation: i64, lag: Option<Duration>) {
    METRICS.claimed.add(vec![("kind", kind.to_string())], 1.0);
    if generation > 1 {
        METRICS.takeovers.add(vec![("kind", kind.to_string())], 1.0);
    }
    if let Some(lag) = lag {
        METRICS.claim_lag.observe(Vec::new(), lag.as_secs_f64());
    }
}

/// Times one phase of an execution of `kind`.
pub fn phase_ended(kind: &str, took: Duration) {
    METRICS
        .phase
        .observe(vec![("kind", kind.to_string())], took.as_secs_f64());
}

/// Times one commit.
pub fn commit_ended(took: Duration) {
    METRICS.commit.observe(Vec::new(), took.as_secs_f64());
}

/// Counts and times one HTTP request until its response's head.
pub fn request_ended(method: &str, route: &str, status: u16, took: Duration) {
    METRICS.requests.add(
        vec![
            ("method", method.to_string()),
            ("route", route.to_string()),
            ("status", status.to_string()),
        ],
        1.0,
    );
    METRICS.request_duration.observe(
        vec![("method", method.to_string()), ("route", route.to_string())],
        took.as_secs_f64(),
    );
}

/// What the agent loop reports to the node's metrics (installed by [`super::init`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct LoopMetrics;

impl openbot_core::telemetry::Observer for LoopMetrics {
    fn model_call(&self, call: &openbot_core::telemetry::ModelCall<'_>) {
        // No model label: members name their Bots' models, so a label per name would let any
        // member grow this node's series without bound. The model is on the `chat` span.
        let base = vec![
            ("gen_ai_operation_name", "chat".to_string()),
            ("gen_ai_provider_name", call.provider.to_string()),
        ];
        METRICS
            .operation_duration
            .observe(base.clone(), call.took.as_secs_f64());
        let tokens = call.usage.map(|u| (u.input_tokens, u.output_tokens));
        for (kind, count) in [
            ("input", tokens.map(|t| t.0)),
            ("output", tokens.map(|t| t.1)),
        ] {
            let Some(count) = count else { continue };
            let mut labels = base.clone();
            labels.push(("gen_ai_token_type", kind.to_string()));
            METRICS.token_usage.observe(labels, count as f64);
            METRICS.tokens.add(
                vec![
                    ("provider", call.provider.to_string()),
                    ("type", kind.to_string()),
                ],
                count as f64,
            );
        }
        if let Some(micros) = call.usage.and_then(|u| u.cost_micros) {
            METRICS.cost.add(
                vec![("provider", call.provider.to_string())],
                micros as f64 / 1_000_000.0,
            );
        }
    }

    fn outbound_refused(&self) {
        outbound(OutboundOutcome::Refused);
    }
}
