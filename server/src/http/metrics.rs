//! `GET /metrics`: the node's Prometheus metrics, for the platform operator only (an operator
//! token as a bearer token: Prometheus's `authorization` scrape setting). A member's
//! credential is refused: the counts are the whole platform's.

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::admin::Operator;
use super::error::ApiError;
use crate::telemetry::metrics::{Snapshot, render};

/// The exposition's media type: the Prometheus text format 0.0.4.
pub const CONTENT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The node's metrics in the Prometheus text format.
pub async fn metrics(
    State(state): State<AppState>,
    Operator(_): Operator,
) -> Result<Response, ApiError> {
    let store = &state.engine.context().store;
    let executions = store
        .execution_counts()
        .await
        .map_err(|err| ApiError::store(err, "executions"))?;
    let snapshot = Snapshot {
        executions,
        running: state.engine.running().await,
        capacity: state.engine.capacity().await,
        pools: store.pool_use(),
    };
    Ok(([(CONTENT_TYPE, CONTENT)], render(&snapshot)).into_response())
}
