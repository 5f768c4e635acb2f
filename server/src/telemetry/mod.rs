//! Observability: the spans of every request, execution, phase and commit, their export over
//! OTLP, the node's Prometheus metrics, and the log format (docs/observability.md).
//!
//! Everything starts from `tracing` spans. The engine opens an `execution` span per claimed
//! program (execution, kind, generation, node) with a `phase` span per phase and a `commit`
//! span per commit; the HTTP layer opens a `request` span per request; the agent loop in
//! `openbot-core` opens the GenAI spans (`invoke_agent`, `chat`, `execute_tool`). Two layers
//! read them: the log formatter (so a line inside an execution carries its fields without
//! anyone adding them) and the OTLP exporter when configured. [`metrics`] counts the same
//! things where they happen, so a node that exports nothing and logs at `error` enables no
//! span at all.

pub mod http;
pub mod metrics;
pub mod spans;

use std::str::FromStr;

use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::EnvFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

pub use openbot_core::telemetry::export::ExportError;
use openbot_core::telemetry::export::{Export, ExportConfig};

/// How log lines are written to standard error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines, with the fields of the spans they are in.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields`, and `span` and
    /// `spans` with the fields of the spans it is in.
    Json,
}

impl FromStr for LogFormat {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            other => Err(format!(
                "unknown log format `{other}`: use `text` or `json`"
            )),
        }
    }
}

/// What [`init`] sets up.
#[derive(Debug, Clone, Default)]
pub struct TelemetryConfig {
    /// The log lines' format.
    pub log_format: LogFormat,
    /// The log filter (`OPENBOT_LOG` syntax); `error` when unset.
    pub log_filter: Option<String>,
    /// Where traces go over OTLP/HTTP (protobuf). `None`: the standard `OTEL_*` variables
    /// decide (off unless `OTEL_EXPORTER_OTLP_ENDPOINT` or `..._TRACES_ENDPOINT` is set).
    pub otlp_endpoint: Option<String>,
    /// The service name of exported traces; `OTEL_SERVICE_NAME`, else `openbot`.
    pub service_name: Option<String>,
}

/// What [`init`] started; dropping it flushes the traces not yet exported.
#[must_use = "dropping the guard flushes and stops the trace export"]
pub struct TelemetryGuard {
    otel: Option<Export>,
}

impl std::fmt::Debug for TelemetryGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelemetryGuard")
            .field("exporting", &self.otel.is_some())
            .finish()
    }
}

impl TelemetryGuard {
    /// Whether traces are exported.
    pub fn exporting(&self) -> bool {
        self.otel.is_some()
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(export) = self.otel.take() {
            export.shutdown();
        }
    }
}

/// Spawns `task` inside the current span, so what it logs and the spans it opens belong to
/// the request or execution that started it. Every task the server spawns goes through here.
pub fn spawn<F>(task: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    use tracing::Instrument as _;
    tokio::spawn(task.in_current_span())
}

/// Installs the process's subscriber: logs in `config.log_format` filtered by
/// `config.log_filter`, and the OTLP export when configured; and the agent loop's metrics
/// observer. Call once,
/// at start, before the runtime runs work.
pub fn init(config: &TelemetryConfig) -> Result<TelemetryGuard, ExportError> {
    let filter = config
        .log_filter
        .as_deref()
        .and_then(|filter| EnvFilter::try_new(filter).ok())
        .unwrap_or_else(|| EnvFilter::new("error"));
    let logs = match config.log_format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_writer(std::io::stderr)
            .with_filter(filter)
            .boxed(),
    };
    let export = Export::from_config(&ExportConfig {
        endpoint: config.otlp_endpoint.clone(),
        service_name: config.service_name.clone(),
    })?;
    let otel_layer = export
        .as_ref()
        .map(|export| export.layer().with_filter(export.spans()));
    tracing_subscriber::registry()
        .with(logs)
        .with(otel_layer)
        .try_init()
        .map_err(|err| ExportError::Install(err.to_string()))?;
    openbot_core::telemetry::set_observer(Box::new(metrics::LoopMetrics));
    openbot_core::telemetry::set_capture_content(
        openbot_core::telemetry::export::capture_content_from_env(),
    );
    Ok(TelemetryGuard { otel: export })
}
