//! The OTLP trace export, shared by the server and the SDKs: an OpenTelemetry tracer provider
//! with a batch exporter over OTLP/HTTP (protobuf), behind a `tracing-opentelemetry` layer.
//!
//! Off unless an endpoint is given or set in the standard variables
//! (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), and off whatever is set
//! when `OTEL_SDK_DISABLED` is `true` or `OTEL_TRACES_EXPORTER` is `none`. The exporter reads
//! the other standard variables itself (headers, timeout, the batch's `OTEL_BSP_*`), and the
//! resource its `OTEL_RESOURCE_ATTRIBUTES`. `OPENBOT_TRACE_LEVEL` (`info` unless set) says how
//! detailed the exported spans are: `debug` adds the engine's claim spans and wake-up events.

use std::sync::{Mutex, PoisonError};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing_subscriber::registry::LookupSpan;

/// Where traces go; `None` fields fall back to the standard variables.
#[derive(Debug, Clone, Default)]
pub struct ExportConfig {
    /// The OTLP/HTTP base URL (`/v1/traces` is added), as `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: Option<String>,
    /// The `service.name`; `OTEL_SERVICE_NAME`, else `openbot`.
    pub service_name: Option<String>,
}

/// Why the export could not start.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The exporter's configuration is unusable (a bad endpoint, an unknown protocol).
    #[error("the OTLP trace exporter cannot start: {0}")]
    Exporter(String),
    /// `OPENBOT_TRACE_LEVEL` is not a level.
    #[error("OPENBOT_TRACE_LEVEL is `{0}`: use error, warn, info, debug or trace")]
    Level(String),
    /// A `tracing` subscriber was installed already in this process.
    #[error("tracing cannot be turned on: {0}")]
    Install(String),
}

fn env_is(name: &str, value: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v.trim().eq_ignore_ascii_case(value))
}

fn env_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.trim().is_empty())
}

/// Whether the operator opted in to message text and tool arguments on spans
/// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
pub fn capture_content_from_env() -> bool {
    env_is("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
}

/// A running export.
pub struct Export {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    level: tracing::Level,
}

impl std::fmt::Debug for Export {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Export").finish_non_exhaustive()
    }
}

impl Export {
    /// The export `config` and the environment ask for, if any. The exporter's HTTP client is
    /// a blocking one on a thread of its own, so the export never waits on the caller's
    /// runtime.
    pub fn from_config(config: &ExportConfig) -> Result<Option<Self>, ExportError> {
        if env_is("OTEL_SDK_DISABLED", "true") || env_is("OTEL_TRACES_EXPORTER", "none") {
            return Ok(None);
        }
        let from_env =
            env_set("OTEL_EXPORTER_OTLP_ENDPOINT") || env_set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        if config.endpoint.is_none() && !from_env {
            return Ok(None);
        }
        let level = match std::env::var("OPENBOT_TRACE_LEVEL") {
            Ok(level) if !level.trim().is_empty() => level
                .trim()
                .parse()
                .map_err(|_| ExportError::Level(level.clone()))?,
            _ => tracing::Level::INFO,
        };
        let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_http();
        if let Some(base) = &config.endpoint {
            // As `OTEL_EXPORTER_OTLP_ENDPOINT`: the base, to which the traces path is added.
            exporter = exporter.with_endpoint(format!("{}/v1/traces", base.trim_end_matches('/')));
        }
        let exporter = exporter
            .build()
            .map_err(|err| ExportError::Exporter(err.to_string()))?;
        let service = config
            .service_name
            .clone()
            .or_else(|| std::env::var("OTEL_SERVICE_NAME").ok())
            .unwrap_or_else(|| "openbot".to_string());
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(Resource::builder().with_service_name(service).build())
            .build();
        let tracer = provider.tracer("openbot");
        // `traceparent` headers in (the server's requests) and out (the remote client's).
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        Ok(Some(Self {
            provider,
            tracer,
            level,
        }))
    }

    /// The layer that turns OpenBot's spans into exported spans.
    pub fn layer<S>(&self) -> tracing_opentelemetry::OpenTelemetryLayer<S, SdkTracer>
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.tracer.clone())
            .with_tracked_inactivity(false)
    }

    /// The spans it exports: OpenBot's own (targets under `openbot`: `openbot::engine`,
    /// `openbot::http`, `openbot::genai`) at its level, and nothing else a process logs.
    pub fn spans(&self) -> tracing_subscriber::filter::Targets {
        tracing_subscriber::filter::Targets::new().with_target("openbot", self.level)
    }

    /// Exports what is queued now.
    pub fn flush(&self) {
        if let Err(err) = self.provider.force_flush() {
            tracing::warn!(error = %err, "the trace export could not flush");
        }
    }

    /// Exports what is queued and stops.
    pub fn shutdown(self) {
        if let Err(err) = self.provider.shutdown() {
            eprintln!("openbot: the trace export did not finish: {err}");
        }
    }
}

/// The export an SDK process turned on with [`enable_tracing`].
static SDK_EXPORT: Mutex<Option<Export>> = Mutex::new(None);

/// Turns on the export of this process's agent spans (`invoke_agent`, `chat`,
/// `execute_tool`) for an SDK user: installs a `tracing` subscriber that exports the `openbot`
/// targets' spans. Returns `false`, installing nothing, when neither `config` nor the
/// environment names an endpoint. Capture of message text follows
/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`. Calling it again changes nothing.
pub fn enable_tracing(config: &ExportConfig) -> Result<bool, ExportError> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let mut slot = SDK_EXPORT.lock().unwrap_or_else(PoisonError::into_inner);
    if slot.is_some() {
        return Ok(true);
    }
    let Some(export) = Export::from_config(config)? else {
        return Ok(false);
    };
    tracing_subscriber::registry()
        .with(export.layer().with_filter(export.spans()))
        .try_init()
        .map_err(|err| ExportError::Install(err.to_string()))?;
    super::set_capture_content(capture_content_from_env());
    *slot = Some(export);
    Ok(true)
}

/// Exports the spans [`enable_tracing`] queued, now (before a short-lived process exits).
pub fn flush_tracing() {
    let slot = SDK_EXPORT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(export) = slot.as_ref() {
        export.flush();
    }
}
