//! `GET /v1/health`: whether the node is up.

use axum::Json;
use openbot_schema::Health;

/// Answers while the node runs. Needs no token.
#[utoipa::path(get, path = "/v1/health", tag = "node", responses((status = 200, body = Health)))]
pub async fn health() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}
