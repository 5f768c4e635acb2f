//! `openbot_platform._native`: the Rust core of the OpenBot Python package.
//!
//! A thin layer over [`openbot_core::connect`] and the [`openbot_core::Client`] trait; the
//! Python package (`packages-python/python/openbot_platform`) builds the public classes on it.
//! Every API operation goes through the one generic call ([`openbot_core::Client::call`]);
//! values cross as plain Python data converted with serde; every call has a sync form that
//! waits with the GIL released and an async form that returns an awaitable of the running
//! event loop; errors become the package's exception classes; Python functions become core
//! tools.
//! One Tokio runtime serves the process (a forked child gets its own).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod bridge;
mod client;
mod errors;
mod runtime;
mod tool;

use pyo3::prelude::*;

/// Does nothing: measures the cost of one call into the native module.
#[pyfunction]
fn noop() {}

/// The Computer tools' names, as the core declares them (docs/computers.md).
#[pyfunction]
fn computer_tools() -> Vec<&'static str> {
    openbot_core::computer::TOOL_NAMES.to_vec()
}

/// Turns on the export of this process's agent spans over OTLP/HTTP (docs/observability.md):
/// to `endpoint` (a base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT`), else to what the standard
/// `OTEL_*` variables name. Answers whether export is on: `False` when no endpoint is named.
#[pyfunction]
#[pyo3(signature = (endpoint=None, service_name=None))]
fn enable_tracing(endpoint: Option<String>, service_name: Option<String>) -> PyResult<bool> {
    let config = openbot_core::telemetry::export::ExportConfig {
        endpoint,
        service_name,
    };
    openbot_core::telemetry::export::enable_tracing(&config)
        .map_err(|err| pyo3::exceptions::PyRuntimeError::new_err(err.to_string()))
}

/// Exports the spans queued so far, now (before a short-lived process exits).
#[pyfunction]
fn flush_tracing(py: Python<'_>) {
    py.detach(openbot_core::telemetry::export::flush_tracing);
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(noop, m)?)?;
    m.add_function(wrap_pyfunction!(computer_tools, m)?)?;
    m.add_function(wrap_pyfunction!(enable_tracing, m)?)?;
    m.add_function(wrap_pyfunction!(flush_tracing, m)?)?;
    m.add_function(wrap_pyfunction!(tool::shutdown, m)?)?;
    m.add_function(wrap_pyfunction!(errors::register_errors, m)?)?;
    m.add_function(wrap_pyfunction!(client::connect_sync, m)?)?;
    m.add_function(wrap_pyfunction!(client::connect_async, m)?)?;
    m.add_class::<client::NativeClient>()?;
    m.add_class::<client::NativeEvents>()?;
    m.add_class::<bridge::Bridge>()?;
    m.add_class::<bridge::Pending>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
