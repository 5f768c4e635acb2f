//! Latency timings: the points of one Turn's path through a node (its submit, its claim, each
//! of its commits, an observer's wake-up, each HTTP request) as log lines, so the `turn-latency`
//! benchmark can split a Turn's time into its parts (docs/benchmarks.md, "Latency of one Turn").
//!
//! Off unless the log filter enables the target [`TARGET`] at `debug`
//! (`OPENBOT_LOG=error,openbot::timing=debug`). Off, a timing point costs one check of the
//! filter's cached interest and reads no clock; the HTTP layer that times requests is only
//! added when timings are on at start ([`enabled`]). Lines carry wall-clock microseconds
//! (`start_us`, `end_us`, `at_us`), so a client on the same machine can place its own times
//! among them. Nothing secret is logged: parts, execution IDs, methods and paths.

use std::time::{SystemTime, UNIX_EPOCH};

use openbot_schema::ExecutionId;

/// The log target of timing lines.
pub const TARGET: &str = "openbot::timing";

/// Whether timing lines are logged now.
pub fn enabled() -> bool {
    tracing::enabled!(target: TARGET, tracing::Level::DEBUG)
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// The start of a timed part; holds nothing and reads no clock when timings are off.
#[derive(Debug, Clone, Copy)]
#[must_use = "a timed part is logged by `end`"]
pub struct Timed(Option<u64>);

impl Timed {
    /// Starts timing a part now (if timings are on).
    pub fn start() -> Self {
        Self(enabled().then(now_us))
    }

    /// Logs the part from its start until now for `execution`.
    pub fn end(self, part: &'static str, execution: ExecutionId) {
        if let Some(start_us) = self.0 {
            let end_us = now_us();
            tracing::debug!(target: TARGET, part, %execution, start_us, end_us);
        }
    }

    /// Logs the part from its start until now once for each execution of `executions` (a
    /// claim that took several); nothing when it took none.
    pub fn end_each(self, part: &'static str, executions: impl IntoIterator<Item = ExecutionId>) {
        if let Some(start_us) = self.0 {
            let end_us = now_us();
            for execution in executions {
                tracing::debug!(target: TARGET, part, %execution, start_us, end_us);
            }
        }
    }
}

/// Logs a point in time of `execution` (an observer woken for it).
pub fn mark(part: &'static str, execution: ExecutionId) {
    if enabled() {
        let at_us = now_us();
        tracing::debug!(target: TARGET, part, %execution, at_us);
    }
}

/// The HTTP layer of timings: each request's method, path (without its query) and the time from
/// the router receiving it to its response's head being ready. Added only when timings are
/// on when the router is built.
pub async fn time_request(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let start_us = now_us();
    let method = request.method().clone();
    // The path only: a query is the client's and could carry anything.
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    let end_us = now_us();
    tracing::debug!(target: TARGET, part = "request", %method, path, start_us, end_us);
    response
}
