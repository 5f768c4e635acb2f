//! `GET /v1/health`: whether the node is up.

use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

/// The node's health.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// Always `ok` when the node answers.
    pub status: &'static str,
}

/// Answers while the node runs. Needs no token.
#[utoipa::path(get, path = "/v1/health", tag = "node", responses((status = 200, body = Health)))]
pub async fn health() -> Json<Health> {
    Json(Health { status: "ok" })
}
