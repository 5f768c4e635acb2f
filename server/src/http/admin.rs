//! `/v1/admin/...`: the platform operator's routes. They take only an operator token
//! (`openbot admin operator-token create`), never a member's: a member's token or session,
//! an organization owner's or admin's included, is refused with 403. Each read is audited
//! (`crate::operator`).

use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use openbot_schema::{
    ClusterNodes, ErrorBody, ErrorCategory, ErrorCode, ErrorId, ErrorRecord, PhysicalResources,
    ResourceFilter,
};

use super::AppState;
use super::error::ApiError;
use super::json::ApiQuery;
use crate::identity::{Caller, secret_hash};
use crate::operator::{OperatorActor, OperatorError, read_error};

/// The platform operator, proven by an operator token.
pub struct Operator(pub OperatorActor);

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let secret = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|secret| !secret.is_empty())
            .map(str::to_string);
        if let Some(secret) = secret {
            match operator_store(state)?
                .operator_token_by_hash(&secret_hash(&secret))
                .await
            {
                Ok(Some(token)) => return Ok(Operator(OperatorActor::Token(token))),
                Ok(None) => {}
                Err(err) => return Err(ApiError::store(err, "operator token")),
            }
        }
        // Not an operator: a member's credential is refused, anything else is not valid.
        Caller::from_request_parts(parts, state).await?;
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            "only the platform operator (an operator token) may use admin routes; no member may",
        ))
    }
}

/// Reads a sealed error record: the error ID, its category, when it happened, the execution
/// that failed with it (if any) and the full cause, opened. Only for the platform operator,
/// with an operator token; every read (found or not) is written to the operator audit first.
#[utoipa::path(get, path = "/v1/admin/errors/{id}", tag = "admin", params(("id" = uuid::Uuid, Path, description = "The error ID an answer or a `failed` event gave")),
    responses((status = 200, body = ErrorRecord), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("token" = [])))]
pub async fn get_error(
    State(state): State<AppState>,
    Operator(actor): Operator,
    Path(id): Path<String>,
) -> Result<Json<ErrorRecord>, ApiError> {
    let id: ErrorId = id
        .parse()
        .map_err(|e: openbot_schema::IdParseError| ApiError::invalid(e.to_string()))?;
    let keys = &state.engine.context().keys;
    match read_error(operator_store(&state)?.as_ref(), keys, id, &actor).await {
        Ok(Some(record)) => Ok(Json(record)),
        Ok(None) => Err(ApiError::not_found("error record")),
        Err(OperatorError::Store(err)) => Err(ApiError::store(err, "error record")),
        Err(err @ OperatorError::Open(_)) => {
            Err(ApiError::failed(ErrorCategory::Internal, err.to_string()))
        }
    }
}

/// The operator's store as its capability registered it; a node built without it is a fault.
fn operator_store(
    state: &AppState,
) -> Result<&std::sync::Arc<dyn crate::operator::OperatorStore>, ApiError> {
    crate::operator::store(&state.features).ok_or_else(|| {
        ApiError::failed(
            openbot_schema::ErrorCategory::Internal,
            "the operator's store was not registered",
        )
    })
}

/// The cluster's nodes as they registered (docs/cluster.md): name, incarnation, RPC address,
/// start, last heartbeat, when it left, and whether it is alive (never proof that what it held
/// was released). Only for the platform operator.
#[utoipa::path(get, path = "/v1/admin/nodes", tag = "admin",
    responses((status = 200, body = ClusterNodes), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_cluster_nodes(
    State(state): State<AppState>,
    Operator(_): Operator,
) -> Result<Json<ClusterNodes>, ApiError> {
    let store = crate::cluster::store(&state.features).ok_or_else(|| unregistered("nodes"))?;
    let now = crate::store::now_ms();
    let nodes = store
        .nodes()
        .await
        .and_then(|nodes| nodes.iter().map(|node| node.view(now)).collect())
        .map_err(|err| ApiError::store(err, "nodes"))?;
    Ok(Json(ClusterNodes { nodes }))
}

/// The physical resources of one scope (`scope`, e.g. `app_connection:<id>`, old routes
/// included) or of one execution's phases (`execution_id`), oldest first, each with what is
/// known of its release: `open`, `closed`, `failed` (with the error ID of its sealed cause),
/// or `unknown` (its owner's lease ran out with nothing saved). Give exactly one of the two.
/// Only for the platform operator.
#[utoipa::path(get, path = "/v1/admin/resources", tag = "admin", params(ResourceFilter),
    responses((status = 200, body = PhysicalResources), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("token" = [])))]
pub async fn list_physical_resources(
    State(state): State<AppState>,
    Operator(_): Operator,
    ApiQuery(filter): ApiQuery<ResourceFilter>,
) -> Result<Json<PhysicalResources>, ApiError> {
    let store = crate::cluster::directory::store(&state.features)
        .ok_or_else(|| unregistered("resources"))?;
    let rows = match (filter.scope, filter.execution_id) {
        (Some(scope), None) => store.resources_of_scope(&scope).await,
        (None, Some(execution)) => store.resources_of_execution(execution.as_uuid()).await,
        _ => {
            return Err(ApiError::invalid(
                "give exactly one of `scope` and `execution_id`",
            ));
        }
    };
    let now = crate::store::now_ms();
    let resources = rows
        .and_then(|rows| rows.iter().map(|row| row.view(now)).collect())
        .map_err(|err| ApiError::store(err, "resources"))?;
    Ok(Json(PhysicalResources { resources }))
}

/// A store this node was built without: a fault, not the caller's.
fn unregistered(what: &str) -> ApiError {
    ApiError::failed(
        ErrorCategory::Internal,
        format!("the {what} store was not registered"),
    )
}
